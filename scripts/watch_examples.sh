#!/usr/bin/env bash
# Watch examples/train_gpt.py in four configurations a user meets, and measure what watching costs.
# Run from the repository root on a GPU machine where gpubench is installed (it installs nothing);
# about 3.5 minutes on an H100. Writes:
#   results/watch-<config>-<gpu>/      one run directory per configuration (no figures: plot them anywhere)
#   $OUT/watch-runs.tar.gz             those four run directories
#   $OUT/watch.log                     everything printed, each configuration's ladder and verdicts, and
#                                      the watch's cost in steps/s (runs with and without it, interleaved)
set -uo pipefail
OUT=${OUT:-/tmp/gpubench-watch-out}
mkdir -p "$OUT"
example=(python3 examples/train_gpt.py)
# name | gpubench watch options | example options
configs=(
  "healthy|--peaks|--seconds 20"
  "fp32||--fp32 --seconds 15"
  "slow-loader||--loader-sleep-ms 100 --seconds 15"
  "tiny-batch||--batch 1 --seq 128 --seconds 15"
)

watch_configs() {
  local gpu=$1 name watch_opts example_opts run
  for config in "${configs[@]}"; do
    IFS='|' read -r name watch_opts example_opts <<<"$config"
    run=results/watch-$name-$gpu
    rm -rf "$run"
    echo; echo "=== $name: gpubench watch $watch_opts -- ${example[*]} $example_opts"
    # shellcheck disable=SC2086  # the option strings split into words on purpose
    python3 -m gpubench watch --out "$run" $watch_opts -- "${example[@]}" $example_opts \
      || echo "=== $name: gpubench watch exited with code $?"
  done
}

show_ladders() {
  echo; echo "=== the ladder of each phase: util, SM active, tensor active, steps/s, TFLOP/s, MFU, verdict"
  python3 - "$@" <<'EOF'
import math, sys
from pathlib import Path
from gpubench.record.rundir import load_run
for run in sys.argv[1:]:
    if not (Path(run) / "summary.csv").is_file():
        print(f"{run}: no summary"); continue
    manifest, _, summary = load_run(run)
    fp32 = ((manifest.get("peaks") or {}).get("datasheet") or {}).get("fp32") or math.nan
    print(f"{run} ({manifest['status']}, exit code {manifest['child']['exit_code']})")
    for r in summary:
        g = lambda k: r.get(k, math.nan)
        print(f"  {r['phase']:>8}: util {g('gpu_util_pct'):.0f}%, SM active {g('sm_active_pct'):.1f}%, "
              f"occupancy {g('sm_occupancy_pct'):.1f}%, tensor {g('tensor_active_pct'):.1f}%, "
              f"DRAM {g('dram_active_pct'):.0f}%, {g('steps_per_s'):.3g} steps/s, {g('tflops'):.3g} TFLOP/s, "
              f"MFU {g('mfu_pct'):.2f}% (measured peak {g('mfu_measured_pct'):.2f}%; "
              f"of the FP32 datasheet peak {100e12 * g('tflops') / fp32:.1f}%)")
        print(f"            {r['verdict']}")
EOF
}

measure_cost() {
  echo; echo "=== the cost of watching: the healthy loop's steps/s without and with gpubench watch, interleaved"
  local scratch order
  scratch=$(mktemp -d)
  for order in bare watched watched bare bare watched; do
    if [[ $order == bare ]]; then
      "${example[@]}" --seconds 6 --eval-steps 1 | tee -a "$scratch/$order.txt"
    else
      python3 -m gpubench watch --out "$scratch/run-$RANDOM" -- "${example[@]}" --seconds 6 --eval-steps 1 \
        | tee -a "$scratch/$order.txt"
    fi
  done
  python3 - "$scratch" <<'EOF'
import re, statistics, sys
from pathlib import Path
pattern = r"train: \d+ steps in [\d.]+ s: ([\d.]+) steps/s"
rate = {k: [float(x) for x in re.findall(pattern, (Path(sys.argv[1]) / f"{k}.txt").read_text())]
        for k in ("bare", "watched")}
bare, watched = statistics.median(rate["bare"]), statistics.median(rate["watched"])
print(f"steps/s without watching: {rate['bare']}, median {bare:.3f}")
print(f"steps/s while watched:    {rate['watched']}, median {watched:.3f}")
print(f"watch overhead: {100 * (1 - watched / bare):+.2f}% of steps/s (positive: slower when watched)")
EOF
  rm -rf "$scratch"
}

main() {
  local start gpu runs=()
  start=$(date +%s)
  python3 -c "import gpubench" || { echo "gpubench is not importable: pip install --no-deps --no-build-isolation -e ."; return 2; }
  nvidia-smi -L
  gpu=$(python3 -c "from gpubench import nvml; from gpubench.record.rundir import slug; print(slug(nvml.device_info(0)['name']))")
  watch_configs "$gpu"
  for config in "${configs[@]}"; do
    [[ -d results/watch-${config%%|*}-$gpu ]] && runs+=("results/watch-${config%%|*}-$gpu")
  done
  show_ladders "${runs[@]}"
  measure_cost
  tar -czf "$OUT/watch-runs.tar.gz" "${runs[@]}"
  echo; echo "wrote $OUT/watch-runs.tar.gz (${runs[*]}) in $(( $(date +%s) - start )) s"
}

main 2>&1 | tee "$OUT/watch.log"
