"""Summarize watch runs again from their own files, with this code: after a change to how phases are
summarized, the committed summaries follow the code and the samples stay as recorded.

    python scripts/resummarize.py results/watch-*/

Rewrites summary.csv and summary.json of each watch run (kind "watch") and the manifest's account of the
GPUs used and the sentences its report tells each row with; plot and report it afterwards. A suite run's
summary holds its timings and is left alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpubench.job.phases import STORY
from gpubench.job.watching import resummarize
from gpubench.record.rundir import write_json, write_summary


def main(runs: list[str]) -> int:
    for run in map(Path, runs):
        manifest = json.loads((run / "manifest.json").read_text())  # as written: rewritten with every field
        if manifest.get("kind") != "watch":
            print(f"{run}: not a watch run, left alone")
            continue
        result = resummarize(run)
        write_summary(run, result.summary)
        sampled = manifest.get("gpus_sampled") or []
        manifest.update(gpus_used=result.used, gpus_idle=[g for g in sampled if g["nvml_index"] not in result.used])
        manifest.setdefault("families", {})["watch"] = {"story": STORY}  # the report tells each row as this code does
        write_json(run / "manifest.json", manifest)
        print(f"{run}: {len(result.summary)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
