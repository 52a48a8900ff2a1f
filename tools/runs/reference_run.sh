#!/usr/bin/env bash
# Regenerate this GPU's reference results: the suite's run directory (timed from command to table) and
# the kernel speed table. Run from the repository root on a GPU machine; results go to $OUT (default
# out/): a tarball of the run directory, the bench CSV and the logs. Figures and the report are made
# anywhere afterwards with `gpubench plot` and `gpubench report`. The suite measures the copy, read and
# matmul peaks at its start; the bench times every family (the read beside the copy, decode at B = 1 to 512
# with the read and copy ceilings at B = 1) with the launch settings committed in kernels/*.py CONFIG,
# which python -m tools.tune.kernels --only read,decode --apply writes for this GPU model beforehand.
set -euo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
slug=$(python3 -c "import torch; from gpubench.record.rundir import slug; print(slug(torch.cuda.get_device_name(0)))")
stamp=$(date +%Y%m%d-%H%M%S)
run="$slug-$stamp"
start=$(date +%s.%N)
python3 -m gpubench run --out "$OUT/$run" 2>&1 | tee "$OUT/run-$slug.log"
echo "wall time from command to table: $(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s" | tee -a "$OUT/run-$slug.log"
python3 -m tools.tune.bench --out "$OUT/bench-kernels-$slug-${stamp%-*}.csv" 2>&1 | tee "$OUT/bench-$slug.log"
tar -C "$OUT" -czf "$OUT/run-$slug.tar.gz" "$run" && rm -rf "${OUT:?}/$run"
# The benchmarks baseline of this GPU model and the plugin demonstrations: tools/gate/baseline.sh.
