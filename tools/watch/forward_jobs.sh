#!/usr/bin/env bash
# Jobs that step no optimizer, watched with no code change, each printing its own count beside gpubench's rows,
# and the forward hook's cost on a job of thousands of forwards a second. Run from the repository root on a GPU
# machine where gpubench is installed (it installs nothing), naming the groups (default: all):
#   infer    examples/unmodified/bert_inference.py, vision_inference.py, generate_kv.py (batch 1, then 32)
#   evals    examples/unmodified/train_eval.py: training with an evaluation between its stretches
#   compiled examples/unmodified/llama_compiled.py: a compiled training job, to compare with its bound-jobs run
#   wgan     examples/unmodified/wgan_critic.py: five critic steps a generator step
#   jax      examples/unmodified/jax_mlp.py: a JAX training loop
#   cost     examples/unmodified/forward_heavy.py with the hooks on and off (--no-auto), ROUNDS rounds interleaved,
#            at about 9,000 forwards/s (width 1024, batch 32) and 1,500 (width 4096, batch 512)
#   top      `gpubench top --once` (text and JSON) beside a watched job and beside a one-block spin
# Writes results/forward-<job>-<gpu>/ (run directories; job.log holds the job's own count) and
# $OUT/forward-jobs.tar.gz of them, and $OUT/forward-jobs.log (everything printed).
set -uo pipefail
OUT=${OUT:-/tmp/gpubench-forward-out}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT" results
GPU=$(python3 -c "import torch; n = torch.cuda.get_device_name(0).lower(); print(next(k for k in ('h200', 'h100', \
'a100', 'l4') if k in n) if any(k in n for k in ('h200', 'h100', 'a100', 'l4')) else 'gpu')")
U=examples/unmodified
watch() {  # name, then the command
  local name=$1; shift
  echo "== $name: $*"
  python3 -m gpubench watch --out "results/forward-$name-$GPU" -- "$@" 2>&1 | tail -n 40
}
groups=${*:-infer evals wgan jax cost top}
for g in $groups; do
  case $g in
    infer)
      watch bert python3 $U/bert_inference.py --seconds 20
      watch vision python3 $U/vision_inference.py --seconds 20
      watch generate-b1 python3 $U/generate_kv.py --batches 1 --new 128 --seconds 60
      watch generate-b32 python3 $U/generate_kv.py --batches 32 --new 128 --seconds 60 ;;
    generate)
      watch generate-b1 python3 $U/generate_kv.py --batches 1 --new 128 --seconds 60
      watch generate-b32 python3 $U/generate_kv.py --batches 32 --new 128 --seconds 60 ;;
    evals)
      watch train-eval python3 $U/train_eval.py --seconds 18 ;;
    compiled)  # the hook's discovery beside torch.compile: steps/s against results/bound-llama_compiled-<gpu>
      watch llama-compiled python3 $U/llama_compiled.py --seconds 10 ;;
    wgan)
      watch wgan python3 $U/wgan_critic.py --seconds 20 ;;
    jax)
      watch jax python3 $U/jax_mlp.py --seconds 20 ;;
    top)
      python3 -m gpubench watch --out "results/forward-top-bert-$GPU" -- python3 $U/bert_inference.py --seconds 25 \
        > "$OUT/top-bert-watch.log" 2>&1 &
      sleep 15
      echo "== top beside a watched BERT inference job"
      python3 -m gpubench top --once
      python3 -m gpubench top --once --json > "$OUT/top-bert.json"
      wait
      tail -n 25 "$OUT/top-bert-watch.log"
      python3 -m gpubench run --no-peaks --out "results/forward-top-spin-$GPU" --duration 30 spin-1block \
        > "$OUT/top-spin-run.log" 2>&1 &
      sleep 20  # past the run's set-up, into the spin's 30 s
      echo "== top beside a one-block spin"
      python3 -m gpubench top --once
      python3 -m gpubench top --once --json > "$OUT/top-spin.json"
      wait ;;
    cost)  # the arms in the order on, off, off, on, ...: a drift of the machine falls on both alike
      for size in "1024 32" "4096 512"; do
        set -- $size
        for i in $(seq "$ROUNDS"); do
          arms="on off"; [ $((i % 2)) = 0 ] && arms="off on"
          for arm in $arms; do
            flag=(); [ "$arm" = off ] && flag=(--no-auto)
            echo "== cost width $1 batch $2 round $i hooks $arm"
            python3 -m gpubench watch "${flag[@]}" --out "results/forward-cost-w$1-$arm-$i-$GPU" -- \
              python3 $U/forward_heavy.py --seconds 12 --width "$1" --batch "$2" 2>&1 | grep "own count"
          done
        done
      done ;;
  esac
done 2>&1 | tee "$OUT/forward-jobs.log"
tar czf "$OUT/forward-jobs.tar.gz" results/forward-*-"$GPU" 2>/dev/null
