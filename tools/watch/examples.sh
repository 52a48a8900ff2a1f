#!/usr/bin/env bash
# Watch the examples in the configurations a user meets, and measure what watching costs. Run from the
# repository root on a GPU machine where gpubench is installed (it installs nothing), naming the groups to
# run (default: all of them; a group is a few minutes on an H100):
#   gpt      examples/train_gpt.py: healthy (with --peaks), fp32, a slow data loader, a tiny batch
#   llama    examples/train_llama.py: eager, compiled, 8k context, a mixture of experts, activation
#            checkpointing, and two processes sharing the GPU
#   decode   examples/decode_llm.py: eager at batch 1; compiled and replayed as a CUDA graph at batch 1 and 64
#   cost     the healthy GPT loop's steps/s with and without gpubench watch, interleaved, and what one
#            gpubench.step() costs the caller while CUDA runs
# Writes results/watch-<config>-<gpu>/ (run directories, no figures: plot them anywhere),
# $OUT/watch-<group>.tar.gz (those of each group) and $OUT/watch-<groups>.log (everything printed).
set -uo pipefail
OUT=${OUT:-/tmp/gpubench-watch-out}
mkdir -p "$OUT"
GPT="python3 examples/train_gpt.py"
LLAMA="python3 examples/train_llama.py"
DECODE="python3 examples/decode_llm.py"
# group | name | gpubench watch options | the command
CONFIGS=(
  "gpt|healthy|--peaks|$GPT --seconds 15"
  "gpt|fp32|--dtype fp32|$GPT --fp32 --seconds 10"
  "gpt|slow-loader||$GPT --loader-sleep-ms 100 --seconds 10"
  "gpt|tiny-batch||$GPT --batch 1 --seq 128 --seconds 10"
  "llama|llama-eager||$LLAMA --seconds 10"
  "llama|llama-compiled||$LLAMA --compile --seconds 10"
  "llama|llama-8k||$LLAMA --seq 8192 --batch 1 --seconds 10"
  "llama|llama-moe||$LLAMA --experts 8 --top 2 --layers 8 --seconds 10"
  "llama|llama-checkpointed||$LLAMA --checkpoint --seconds 10"
  "llama|two-processes||bash -c '$LLAMA --layers 8 --seconds 10 & $LLAMA --layers 8 --seconds 10 & wait'"
  "decode|decode-eager-b1||$DECODE --seconds 10"
  "decode|decode-graph-b1||$DECODE --compile --graph --seconds 10"
  "decode|decode-graph-b64||$DECODE --compile --graph --batch 64 --seconds 10"
)

watch_group() {
  local group=$1 gpu=$2 g name watch_opts command run runs=()
  for config in "${CONFIGS[@]}"; do
    IFS='|' read -r g name watch_opts command <<<"$config"
    [[ $g == "$group" ]] || continue
    run=results/watch-$name-$gpu
    rm -rf "$run"
    echo; echo "=== $name: gpubench watch $watch_opts -- $command"
    # shellcheck disable=SC2086  # the options split into words on purpose; the command goes through sh
    python3 -m gpubench watch --out "$run" $watch_opts -- sh -c "exec $command" \
      || echo "=== $name: gpubench watch exited with code $?"
    [[ -d $run ]] && runs+=("$run")
  done
  show_ladders "${runs[@]}"
  tar -czf "$OUT/watch-$group.tar.gz" "${runs[@]}"
}

show_ladders() {
  echo; echo "=== each row: util (mean), SM active, tensor, DRAM, steps/s, TFLOP/s, MFU/HFU, MBU, tokens/s, verdict"
  python3 - "$@" <<'EOF'
import math, sys
from pathlib import Path
from gpubench.record.rundir import load_run
for run in sys.argv[1:]:
    if not (Path(run) / "summary.csv").is_file():
        print(f"{run}: no summary"); continue
    manifest, _, summary = load_run(run)
    print(f"{run} ({manifest['status']}, exit code {manifest['child']['exit_code']}, GPUs used {manifest.get('gpus_used')})")
    for r in summary:
        g = lambda k: r.get(k, math.nan)
        print(f"  {r['scenario']:>10}: util {g('gpu_util_pct'):.0f}% (mean {g('gpu_util_mean_pct'):.0f}%), "
              f"SM active {g('sm_active_pct'):.1f}%, tensor {g('tensor_active_pct'):.1f}%, DRAM {g('dram_active_pct'):.0f}%, "
              f"{g('steps_per_s'):.4g} steps/s [{r.get('stream_rates')}], {g('tflops'):.4g} TFLOP/s, "
              f"MFU {g('mfu_pct'):.3g}% HFU {g('hfu_pct'):.3g}%, MBU {g('mbu_pct'):.3g}%, {g('tokens_per_s'):.4g} tokens/s, "
              f"{g('power_w_energy'):.0f} W, {g('j_per_step'):.3g} J/step")
        print(f"             {r['verdict']}")
EOF
}

measure_cost() {
  echo; echo "=== the cost of watching: the healthy GPT loop's steps/s without and with gpubench watch, interleaved"
  local scratch order
  scratch=$(mktemp -d)
  for order in bare watched watched bare bare watched; do
    if [[ $order == bare ]]; then
      $GPT --seconds 6 --eval-steps 1 | tee -a "$scratch/$order.txt"
    else
      python3 -m gpubench watch --out "$scratch/run-$RANDOM" -- $GPT --seconds 6 --eval-steps 1 \
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
  echo; echo "=== what one gpubench.step() costs its caller while CUDA runs (a CUDA event recorded, no wait)"
  GPUBENCH_MARKS="$scratch/cost.tsv" python3 - <<'EOF'
import statistics, time, torch, gpubench
x = torch.randn(4096, 4096, device="cuda")
for _ in range(10):
    x @ x
gpubench.step()  # the first call starts the stamping thread
per_call = []
for _ in range(20):
    x @ x  # keep the GPU busy, as a training step would
    t0 = time.perf_counter()
    for _ in range(500):
        gpubench.step(flops=1.0)
    per_call.append((time.perf_counter() - t0) / 500 * 1e6)
torch.cuda.synchronize()
print(f"gpubench.step() with a CUDA event: median {statistics.median(per_call):.2f} us a call "
      f"(p10 {statistics.quantiles(per_call, n=10)[0]:.2f}, p90 {statistics.quantiles(per_call, n=10)[-1]:.2f})")
EOF
  rm -rf "$scratch"
}

main() {
  local start gpu groups=("$@")
  [[ ${#groups[@]} -gt 0 ]] || groups=(gpt llama decode cost)
  start=$(date +%s)
  python3 -c "import gpubench" || { echo "gpubench is not importable: pip install --no-deps --no-build-isolation -e ."; return 2; }
  nvidia-smi -L
  gpu=$(python3 -c "from gpubench.record import nvml; from gpubench.record.rundir import slug; print(slug(nvml.device_info(0)['name']))")
  for group in "${groups[@]}"; do
    if [[ $group == cost ]]; then measure_cost; else watch_group "$group" "$gpu"; fi
  done
  echo; echo "done: ${groups[*]} in $(( $(date +%s) - start )) s"
}

main "$@" 2>&1 | tee "$OUT/watch-$(IFS=-; echo "${*:-all}").log"
