#!/usr/bin/env bash
# Regenerate the reference results on a GPU machine: the suite's run directory with its figures and
# report, the kernel speed table, and a pytest-benchmark baseline. Run from the repository root.
set -euo pipefail
slug=$(python3 -c "from gpubench import nvml; from gpubench.rundir import slug; print(slug(nvml.device_info(0)['name']))")
stamp=$(date +%Y%m%d-%H%M%S)
run=results/$slug-$stamp
gpubench run --out "$run"
gpubench plot "$run"
gpubench report "$run"
python3 scripts/bench_kernels.py --out "results/bench-kernels-$slug-${stamp%-*}.csv"
pytest tests/benchmarks --benchmark-storage=.benchmarks --benchmark-save="$slug-baseline"
echo "copy the newest .benchmarks/*/*_$slug-baseline.json to results/benchmarks/$slug-baseline.json"
