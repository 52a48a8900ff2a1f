"""tools/gate/baseline.sh run without a GPU: its dry run collects every step's tests, a resumed dry run only
the steps the first run skipped, and its real path, on a fake python3 and nvidia-smi whose sessions exit as the
gate's would, runs every step in order, the two refusals side by side, logs each step's exit status and seconds,
checks and packs what it left; resumed, it runs only the steps the first run skipped."""

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "gate" / "baseline.sh"


def test_the_dry_run_collects_every_step(tmp_path):
    """Two reruns and one probe: the same steps as the script's twenty, fewer times."""
    env = {
        **os.environ,
        "OUT": str(tmp_path),
        "RERUNS": "2",
        "PROBE_RUNS": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    r = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stdout[-3000:]
    assert "dry run: 0 of 8 pytest commands could not collect their tests" in r.stdout
    assert "e-no-gpu: collected (0)" in r.stdout  # refused with exit 4 without a GPU, as it must be


def test_a_resumed_dry_run_collects_only_the_steps_the_first_run_skipped(tmp_path):
    first = tmp_path / "first"
    (first / "work" / "baseline").mkdir(parents=True)
    (first / "work" / "exits.tsv").write_text(
        "1-baseline\t0\t150\nc-rerun-1\t0\t16\na-more-work-5pct\t1\t16\n"
        "a-more-work-10pct\t1\t16\nb-part-of-calls\tskipped\t0\n"
    )
    (first / "work" / "bench.log").write_text("the first run's log\n")
    with tarfile.open(first / "steps.tar.gz", "w:gz") as tar:
        tar.add(first / "work", arcname=".")
    env = {
        **os.environ,
        "OUT": str(tmp_path / "out"),
        "RERUNS": "2",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    r = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run", "--resume", str(first)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:]
    ran = re.findall(r"^== (\S+): collected", r.stdout, re.M)
    assert ran == ["b-part-of-calls", "c-rerun-2", "e-no-gpu", "e-another-model"]
    assert "dry run: 0 of 4 pytest commands could not collect their tests" in r.stdout
    bad = subprocess.run(["bash", str(SCRIPT), "--resume", str(tmp_path)], env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "steps.tar.gz" in bad.stderr


FAKE_PYTHON = r"""#!/usr/bin/env bash
# python3 as bench_baseline.sh calls it, without a GPU: a session sleeps and exits as the gate would
if [ "$1" = -c ]; then
    case $2 in
    *parents*) echo "$PWD"; exit 0 ;;
    *identify*) echo h100-80gb-hbm3; echo "NVIDIA H200"; exit 0 ;;
    esac
fi
[ "$1" = - ] || [ "$1 $2" = "-m tools.gate.baseline_check" ] && exec "$REAL_PYTHON" "$@"
[ "$1 $2" = "-m pytest" ] || exit 3
echo "session $*" >>"$CALLS"
sleep 0.2
for a in "$@"; do
    case $a in
    --gpu-save-baseline=*) mkdir -p "${a#*=}"; echo '{"machine_info": {"gpu": {}}, "benchmarks": []}' \
        >"${a#*=}/h100-80gb-hbm3.json"; exit 0 ;;
    --more-work=*) exit 1 ;;
    --gpu-fail-slower) [ -z "${CUDA_VISIBLE_DEVICES-x}" ] && echo "ERROR: --gpu-fail-slower, but there is no GPU here" \
        && exit 4 ;;
    */other) echo "ERROR: the baseline is not comparable"; exit 4 ;;
    esac
done
exit 0
"""


def fake_run(tmp_path: Path, out: str, *args) -> tuple[subprocess.CompletedProcess, list[str], list[list[str]]]:
    """The script's real path on the fakes: its result, the sessions it started, and its exits.tsv."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").write_text(FAKE_PYTHON)
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho name, uuid\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    calls = tmp_path / f"{out}.calls"
    calls.write_text("")
    env = {
        **os.environ,
        "OUT": str(tmp_path / out),
        "RERUNS": "4",
        "REAL_PYTHON": sys.executable,
        "CALLS": str(calls),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }
    r = subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    with tarfile.open(tmp_path / out / "steps.tar.gz") as tar:
        exits = tar.extractfile("./exits.tsv").read().decode()
    return r, calls.read_text().splitlines(), [line.split("\t") for line in exits.splitlines()]


def test_the_real_path_runs_every_step_and_a_resumed_run_only_the_skipped(tmp_path):
    r, sessions, exits = fake_run(tmp_path, "first")
    names = [e[0] for e in exits]
    assert names == [
        "1-baseline",
        "c-rerun-1",
        "c-rerun-2",
        "a-more-work-5pct",
        "a-more-work-10pct",
        "b-part-of-calls",
        "c-rerun-3",
        "c-rerun-4",
        "e-no-gpu",
        "e-another-model",
    ], r.stdout[-2000:]
    assert [e[1] for e in exits] == ["0", "0", "0", "1", "1", "1", "0", "0", "4", "4"]
    assert all(e[2].isdigit() for e in exits) and len(sessions) == 10
    assert "gpubench is installed from here: no pip install" in (tmp_path / "first" / "bench.log").read_text()
    assert "--gpu-min-time=1 --more-work=30" in next(s for s in sessions if "--slow-share=0.4" in s)
    assert r.returncode == 1 and "checks failed" in r.stdout  # the fake sessions leave no verdicts to check

    # the first run as if it had run out of time for its last rerun and the refusals
    first = tmp_path / "first"
    work = tmp_path / "w"
    work.mkdir()
    with tarfile.open(first / "steps.tar.gz") as tar:
        tar.extractall(work, filter="data")
    skipped = {"c-rerun-4", "e-no-gpu", "e-another-model"}
    (work / "exits.tsv").write_text("".join(f"{n}\t{'skipped' if n in skipped else rc}\t{s}\n" for n, rc, s in exits))
    with tarfile.open(first / "steps.tar.gz", "w:gz") as tar:
        tar.add(work, arcname=".")
    r, sessions, exits = fake_run(tmp_path, "second", "--resume", str(first))
    assert len(sessions) == 3 and "--gpu-verdict-json" in sessions[0] and "c-rerun-4.json" in sessions[0]
    assert [e[:2] for e in exits[-3:]] == [["c-rerun-4", "0"], ["e-no-gpu", "4"], ["e-another-model", "4"]]
    with tarfile.open(tmp_path / "second" / "steps.tar.gz") as tar:
        assert {"./bench.log", "./bench-1.log", "./baseline/h100-80gb-hbm3.json"} <= set(tar.getnames())
