"""Check what tools/watch/live_check.sh left: at least MIN_LINES live lines in the file run's log, and the last of
each phase within WITHIN of the phase's final row (its steps/s and MFU so far: phase_steps_per_s and
phase_mfu_pct, or the window's where a line has none), the row read from the run's summary.csv. The window's own
numbers are said beside them, and not held to WITHIN: a job's windows differ by a few percent.

    python3 -m tools.watch.live_check LOG RUN_DIR      -> a line per check; exit 1 where one fails
"""

from __future__ import annotations

import csv
import shlex
import sys
from pathlib import Path

MIN_LINES = 10
WITHIN = 0.02  # the last live line of a phase, relative to its final row
KEYS = (("phase_steps_per_s", "steps_per_s"), ("phase_mfu_pct", "mfu_pct"))  # (the line's, the row's)


def live_lines(log: Path) -> list[dict]:
    """The log's `gpubench live` lines, each as its key=value pairs."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("gpubench live "):
            out.append(dict(p.split("=", 1) for p in shlex.split(line[len("gpubench live ") :]) if "=" in p))
    return out


def check(log: Path, run: Path) -> list[tuple[bool, str]]:
    lines = live_lines(log)
    said = [(len(lines) >= MIN_LINES, f"live lines: {len(lines)} (at least {MIN_LINES})")]
    rows = {r["phase"]: r for r in csv.DictReader((run / "summary.csv").open()) if r.get("phase")}
    last: dict[str, dict] = {}
    for line in lines:
        last[line.get("phase", "")] = line
    for phase, line in last.items():
        row = rows.get(phase)
        if row is None:
            said.append((False, f"phase {phase}: live, but no final row of that name"))
            continue
        for mine, key in KEYS:
            held = mine if mine in line else key
            if held not in line or not row.get(key):
                continue
            live, final = float(line[held]), float(row[key])
            ok = abs(live / final - 1) <= WITHIN if final else live == 0
            window = f"; the last window's {float(line[key]):.4g}" if held != key and key in line else ""
            said.append(
                (
                    ok,
                    f"phase {phase}: {held} live {live:.4g}, final {key} {final:.4g} ({live / final - 1:+.2%}){window}"
                    if final
                    else f"phase {phase}: {held} live {live:.4g}, final 0",
                )
            )
    return said


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    said = check(Path(argv[0]), Path(argv[1]))
    for ok, text in said:
        print(("PASS  " if ok else "FAIL  ") + text)
    return 0 if all(ok for ok, _ in said) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
