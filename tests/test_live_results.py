"""The live rows and `top` as measured on GPUs, read back from the committed files: the README's live line and
docs/watch.md's numbers from the H200 run of tools/watch/live_check.sh (its check recomputed here from the log
and the run's summary), and docs/top.md's frame beside a collective waiting on a slow rank on two H200s."""

import csv
import json
import re
from pathlib import Path

from tools.watch import live_check

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "results" / "logs"
LOG = LOGS / "live-file-h200.log"
RUN = ROOT / "results" / "live-file-h200"


def train_row() -> dict:
    return next(r for r in csv.DictReader((RUN / "summary.csv").open()) if r["phase"] == "train")


def test_the_committed_check_is_what_the_log_and_the_summary_give_again():
    said = live_check.check(LOG, RUN)
    assert all(ok for ok, _ in said) and len(said) == 3
    committed = (LOGS / "live-check-h200.txt").read_text().splitlines()
    assert committed == [("PASS  " if ok else "FAIL  ") + text for ok, text in said]


def test_the_readme_quotes_the_last_live_line_and_the_final_row():
    readme = (ROOT / "README.md").read_text()
    last = [line for line in LOG.read_text().splitlines() if line.startswith("gpubench live ")][-1]
    assert f"\n{last}\n" in readme and "phase_steps_per_s=" in last
    row = train_row()
    assert f"final row read {float(row['steps_per_s']):.4g} steps/s and MFU {float(row['mfu_pct']):.3g}%" in re.sub(
        r"\s+", " ", readme
    )


def test_docs_watch_says_the_runs_numbers():
    text = re.sub(r"\s+", " ", (ROOT / "docs" / "watch.md").read_text())
    lines = live_check.live_lines(LOG)
    last, row = lines[-1], train_row()
    assert f"gave {len(lines)} live lines" in text
    assert (
        f"the last said {last['phase_steps_per_s']} steps/s and MFU {last['phase_mfu_pct']}% so far, against "
        f"its final row's {float(row['steps_per_s']):.4g} steps/s"
    ) in text
    assert f"where its last window read {last['steps_per_s']} steps/s" in text
    shown = re.search(r"```\n(GPU 0 .*?)  …\n```", (ROOT / "docs" / "watch.md").read_text())[1]
    assert shown in (LOGS / "live-tty-h200-at-50-s.txt").read_text() and "so far" in shown


def test_docs_top_shows_the_frame_beside_the_waiting_collective_as_it_was_read():
    page = (ROOT / "docs" / "top.md").read_text()
    frame = (LOGS / "top-collective-h200-x2.txt").read_text().rstrip("\n")
    assert f"```\n{frame}\n```" in page
    gpus = json.loads((LOGS / "top-collective-h200-x2.json").read_text())["gpus"]
    assert [g["verdict"] for g in gpus] == ["fake-busy", "idle"] and gpus[0]["gpu_util_pct"] == 100.0
    row = re.search(r"^\s+0\s+(\S+)\s+(\d+)%\s+(\d+)%", frame, re.M)
    assert row.groups() == ("fake-busy", "100", "23") and "tensor active 1.9%: `fake-busy`" in re.sub(r"\s+", " ", page)
    assert "1.843 steps/s" in (LOGS / "top-collective-h200-x2-job.log").read_text() and "1.84 steps/s" in page
