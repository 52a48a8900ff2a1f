"""Sweep the launch configurations of the Triton and CuPy kernels on this GPU, interleaved and clock-settled.

Each candidate is timed in short windows, candidates taking turns (ABC..CBA..) after a settling period
at sustained clocks, so that a candidate timed first does not catch a higher clock than the others.
Prints and writes, per candidate, the median of its window medians and the ratio to the family's
reference implementation (torch), paired window by window.

    python -m tools.tune.kernels --out tune.csv [--only copy,softmax,gemm,decode,read,clock]
    python -m tools.tune.kernels --only read,decode --out-dir $OUT [--apply] [--budget-s 300]
    python -m tools.tune.kernels --only decode --out-dir $OUT --around results/tune-decode-h200.csv
    python -m tools.tune.kernels --apply-from results/tune-decode-h200.csv results/tune-read-h200.csv
    python -m tools.tune.kernels --only decode --second results/ --decode-batches 16,256,512 --out-dir $OUT
    python -m tools.tune.kernels --only read,decode --dry-run      # on the CPU, tiny sizes: does it run?

The decode and read sweeps (tools/tune/decode.py, their settings in tools/tune/space.py) compile every
setting ahead in worker processes, screen all of them against torch, then time the best few again in
turns with torch; they stop cleanly when the time budget is spent, keeping what they measured.
`--out-dir` writes tune-decode-<gpu>.csv and tune-read-<gpu>.csv (and tune-<gpu>.csv for the other
families; a second sweep writes tune-decode2-<gpu>.csv); `--apply` writes the winners into
kernels/decode.py's and kernels/read.py's CONFIG for this GPU model, and `--apply-from` does the same from
CSVs already written (no GPU needed; a later CSV's batches replace an earlier one's).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

if "--dry-run" in sys.argv:  # before Triton is imported: its kernels then run in the interpreter
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402

from tools.tune import decode as tune_decode  # noqa: E402
from tools.tune import families  # noqa: E402
from tools.tune import machine  # noqa: E402
from tools.tune.output import apply_from, apply_rows, merge, summary, write_all  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="one CSV of every row (default: tune.csv, or --out-dir's files)")
    ap.add_argument("--out-dir", default=None, help="write tune-decode-<gpu>.csv, tune-read-<gpu>.csv, tune-<gpu>.csv")
    ap.add_argument("--only", default="facts,copy,softmax,gemm,decode,clock")
    ap.add_argument(
        "--decode-batches",
        default="1,64,512,16,256,4,2,8,32,128",
        help="batch sizes the decode sweep tunes, most wanted first",
    )
    ap.add_argument("--budget-s", type=float, default=300.0, help="stop cleanly after this long, keeping what ran")
    ap.add_argument(
        "--workers", type=int, default=None, help="processes compiling ahead (default: CPUs - 2, at most 14)"
    )
    ap.add_argument("--around", default=None, help="a first sweep's decode CSV: try one step around its best few")
    ap.add_argument(
        "--second",
        default=None,
        metavar="CSV_OR_DIR",
        help="the second sweep: the persistent TMA kernel's settings beside the best few of a first "
        "sweep's decode CSV (or of DIR/tune-decode-<this gpu>.csv) and the setting in force",
    )
    ap.add_argument("--dry-run", action="store_true", help="on the CPU through Triton's interpreter, at tiny sizes")
    ap.add_argument(
        "--apply",
        action="store_true",
        help="write the fastest decode and read settings for this GPU into kernels/decode.py and read.py",
    )
    ap.add_argument(
        "--apply-from",
        nargs="+",
        default=None,
        metavar="CSV",
        help="write the winners of sweeps already run (their CSVs name the GPU) into the CONFIG tables",
    )
    args = ap.parse_args()
    if args.apply_from:
        return apply_from(args.apply_from)
    only = set(args.only.split(","))
    dry = args.dry_run
    if not dry and not torch.cuda.is_available():
        print(
            "the sweeps time kernels on a GPU and this machine has none: --dry-run runs them on the CPU",
            file=sys.stderr,
        )
        return 2
    gpu = "cpu" if dry else torch.cuda.get_device_name()
    first_rows = None
    if args.second or args.around:  # before any GPU time: a missing file is one sentence
        path = Path(args.second or args.around)
        if path.is_dir():
            from gpubench.record.rundir import slug

            path = path / f"tune-decode-{slug(gpu)}.csv"
        try:
            first_rows = list(csv.DictReader(open(path, newline="")))
        except OSError as err:
            print(f"cannot read the first sweep's CSV {path}: {err.strerror}", file=sys.stderr)
            return 2
        if not dry and {r.get("gpu") for r in first_rows} != {gpu}:
            print(
                f"{path} is not a sweep of this GPU ({gpu}) alone: its settings and winners do not carry over",
                file=sys.stderr,
            )
            return 2
    if dry:
        os.environ["TRITON_INTERPRET"] = "1"
        only &= {"decode", "read"}
    workers = args.workers if args.workers is not None else max(1, min(14, (os.cpu_count() or 4) - 2))
    budget = tune_decode.Budget(args.budget_s)
    t0 = time.monotonic()

    def save():  # after each step, so that a sweep cut short has written (and applied) what it found
        write_all(args, gpu, families.ROWS + tune_decode.ROWS)
        if args.apply and not dry:  # a second sweep's batches over the first sweep's line, the rest kept
            apply_rows(merge(first_rows if args.second else [], families.ROWS + tune_decode.ROWS), gpu)

    sms = torch.cuda.get_device_properties(0).multi_processor_count if not dry else 4
    if "facts" in only:
        machine.facts()
    if "clock" in only:
        machine.clock_trace()
    if "copy" in only:
        families.sweep_copy(sms)
    if "softmax" in only:
        families.sweep_softmax(sms, [(8192, 8192), (4096, 4096), (16384, 16384)])
    if "gemm" in only:
        families.sweep_gemm(sms)
    if "read" in only:
        tune_decode.sweep_read(budget, save, workers, dry)
    if "decode" in only:
        batches = [int(b) for b in args.decode_batches.split(",")]
        tune_decode.sweep_decode(batches, budget, save, first_rows, workers, dry, second=bool(args.second))
    save()
    summary(tune_decode.ROWS)
    print(f"wrote the sweep in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
