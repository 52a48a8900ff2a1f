"""A plain-text copy of a run's samples: samples.csv beside samples.arrows, written by gpubench's own CSV
writer, so the raw data behind every committed figure can be read without pyarrow (a spreadsheet, awk).

    python -m tools.runs.samples_csv results/<run>/ [...]

gpubench reads samples.arrows where both are present; the copy changes no summary, figure or report.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpubench.record import rundir
from gpubench.record.csvfile import CsvSink
from gpubench.record.rundir import load_run


def main(runs: list[str]) -> int:
    for run in map(Path, runs):
        if not (run / rundir.SAMPLES_FILE).is_file():
            print(f"{run}: no {rundir.SAMPLES_FILE}, left alone")
            continue
        manifest, samples, _ = load_run(run)
        keys = rundir.keys_of(samples)
        sink = CsvSink(run / rundir.CSV_SAMPLES, manifest["columns"], keys)
        try:
            for row in samples:
                sink(row)
        finally:
            sink.close()
        print(f"{run}: {len(samples)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
