"""tools/watch/forward_tables.py holds docs/watch.md and README.md to the committed runs of jobs that step no
optimizer (read back by tools/watch/forward_runs.py): it reads committed files only, so it runs on any machine."""

import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tables():
    from tools.watch import forward_tables

    return forward_tables


def runs():
    from tools.watch import forward_runs

    return forward_runs


def test_the_docs_and_readme_tables_agree_with_the_committed_runs():
    r = subprocess.run(
        [sys.executable, "-m", "tools.watch.forward_tables", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr


def test_every_job_of_the_table_has_a_committed_run_and_its_own_count():
    t = runs()
    rows = t.compared()
    assert {r["job"] for r in rows} == {"bert", "vision", "generate-b1", "generate-b32", "train-eval", "wgan", "jax"}
    for r in rows:
        assert (t.run_dir(r["job"]) / "summary.json").is_file() and (t.run_dir(r["job"]) / "manifest.json").is_file()
        assert r["rate"] > 0 and r["own_rate"] > 0, r["job"]  # both sides were read, not left NaN
        assert r["ceiling"] > 0, r["job"]
    steps = {(r["job"], r["phase"]): r["step"] for r in rows}
    assert steps[("jax", "train")] == "a call of the jitted step function"
    assert "5 ×" in steps[("wgan", "train")]  # one pattern of five critic steps and a generator step
    # decode counts bytes, not FLOPs: its MBU has both sides, its own MFU none
    b1 = next(r for r in rows if r["job"] == "generate-b1")
    assert b1["own_mbu"] > 0 and b1["mbu"] > 0 and b1["own_mfu"] != b1["own_mfu"]


def test_the_own_mfu_is_over_the_peak_the_run_used():
    import json

    t = runs()
    bert = next(r for r in t.compared() if r["job"] == "bert")
    peak = json.loads((t.run_dir("bert") / "manifest.json").read_text())["peaks"]["datasheet"]["bf16_tensor"]
    own = re.search(
        r"own count: (\S+) FLOPs a forward .*?; (\S+) forwards/s",
        t.sections(ROOT / "results" / "logs" / t.INFER)["bert"],
    )
    assert abs(bert["own_mfu"] - 100 * float(own[1]) * float(own[2]) / peak) < 1e-9


def test_the_cost_medians_are_the_log_lines_medians():
    """Recomputed from the log's lines here, apart from the script's parser: each size ran both arms every round,
    each hooks-on round has its run directory, and the docs print the medians and their difference."""
    t = tables()
    lines = (ROOT / "results" / "logs" / t.COST).read_text().splitlines()
    found: dict = {}
    for head, after in zip(lines, lines[1:]):
        m = re.fullmatch(r"== cost width (\d+) batch (\d+) round (\d+) hooks (on|off)", head)
        if m:
            rate = float(re.match(r"own count: (\S+) forwards/s", after)[1])
            found.setdefault(int(m[1]), {}).setdefault(m[4], {})[int(m[3])] = rate
    assert set(found) == {1024, 4096}
    docs = (ROOT / "docs" / "watch.md").read_text()
    part = docs[docs.index("<!-- gpubench:forward-cost -->") : docs.index("<!-- /gpubench:forward-cost -->")]
    for width, arms in found.items():
        assert set(arms["on"]) == set(arms["off"]) and len(arms["on"]) >= 3, width
        assert all((ROOT / "results" / f"forward-cost-w{width}-on-{i}-{runs().GPU}").is_dir() for i in arms["on"])
        on, off = (statistics.median(arms[a].values()) for a in ("on", "off"))
        row = next(line for line in part.splitlines() if line.startswith(f"| width {width},"))
        assert f"| {on:,.0f} | {off:,.0f} | {100 * (on / off - 1):+.1f}% |" in row
    # a cost over the 1% target is said to miss it
    small = found[1024]
    cost = 100 * (1 - statistics.median(small["on"].values()) / statistics.median(small["off"].values()))
    assert cost > 1 and "misses it" in part


def test_the_section_states_the_discovery_as_the_hook_does():
    from gpubench.inside.forwards import DISCOVER

    docs = (ROOT / "docs" / "watch.md").read_text()
    assert f"first {DISCOVER} outermost calls" in docs
    readme = (ROOT / "README.md").read_text()
    brief = readme[readme.index("<!-- gpubench:forward-brief -->") : readme.index("<!-- /gpubench:forward-brief -->")]
    assert "jax_mlp.py" in brief and "generate_kv.py" in brief and "–" not in brief
