#!/usr/bin/env bash
# The benchmarks' baseline for this GPU model, and what the regression gate promises, shown on this GPU in
# one run (about 8 minutes on an H100 or an H200):
#   1. pytest tests/benchmarks --gpu-save-baseline, then two unchanged reruns with --gpu-measure-floor:
#      a fresh baseline that carries its between-run floor
#   a. every call of the torch GEMM and copy does 5% more work     -> slower or unsure, never same
#   b. 40% of their calls, in whole rounds, do 30% more work        -> slower (the median hardly moves)
#   c. three unchanged reruns                                       -> same or unsure for every benchmark, none fails
#   d. test_tiny, a 2 us spin shorter than its launch               -> its time per call is the GPU's (the
#      fixture times it from a CUDA graph), not the host's launch rate
#   e. as before: the --slow-copy Triton copy -> slower and fails; a baseline claiming another GPU model ->
#      refused in one sentence (exit 4); examples/test_my_kernels.py -> passes
# The slowdowns are real work on the GPU (tests/conftest.py: --slow-copy, --slow-calls, --slow-share).
# Every step logs its command and exit status; scripts/bench_baseline_check.py then prints, per check, what
# was expected and what it got (PASS, FAIL, or N/A where this machine cannot tell). Into $OUT:
#   bench.log          everything, in order      -> commit as results/logs/bench-baseline-<gpu>.log
#   <gpu>.json         the baseline and its floor -> commit as results/benchmarks/<gpu>.json
#   bench-gate.json    the checks and the numbers the README quotes -> commit as results/logs/bench-gate-<gpu>.json
#   steps.tar.gz       each step's verdicts, rounds and output       -> commit as results/logs/bench-steps-<gpu>.tar.gz
# Run from the repository root on a GPU machine:  OUT=DIR scripts/bench_baseline.sh
# Check the script without a GPU:                  OUT=DIR scripts/bench_baseline.sh --dry-run
#   (every pytest command only collects its tests, so options and test ids are checked; nothing is timed)
set -uo pipefail
: "${OUT:?set OUT to the folder for the baseline and the log}"
dry=0
[ "${1:-}" = "--dry-run" ] && dry=1
mkdir -p "$OUT"
log=$OUT/bench.log
: >"$log"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
started=$SECONDS

say() { echo "== $*" | tee -a "$log"; }

# step NAME CMD...: run a pytest session with its verdicts in $work/NAME.json, log it, keep its exit status
step() {
    local name=$1
    shift
    say "$name: $* (+$((SECONDS - started)) s)"
    if [ "$dry" -eq 1 ]; then
        timeout 150 "$@" --collect-only -q >>"$log" 2>&1
    else
        timeout 150 "$@" --gpu-verdict-json="$work/$name.json" 2>&1 | tee "$work/$name.out" >>"$log"
    fi
    local rc=${PIPESTATUS[0]}
    printf '%s\t%s\n' "$name" "$rc" >>"$work/exits.tsv"
    say "$name: exit $rc"
}

pytest=(python3 -m pytest -p no:cacheprovider)
# unchanged reruns that measure the floor: a benchmark whose runs differ by more than the least floor moves
# further in the next run than in all n of them about 1 time in n + 1, less often as each floor is the far
# end of a rerun's interval; FLOOR_RERUNS=3 adds a third (about a minute more)
floor_reruns=${FLOOR_RERUNS:-2}
bench=tests/benchmarks/test_bench_kernels.py
gemm="$bench::test_gemm[torch-bf16]"
copy="$bench::test_copy[torch-1GiB]"

if [ "$dry" -eq 1 ]; then
    slug=dry-run other="NVIDIA H200"
else
    python3 -m pip install --no-deps --no-build-isolation -e . >>"$log" 2>&1 || say "pip install -e . failed (see above)"
    nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,ecc.mode.current --format=csv >>"$log" 2>&1
    slug=$(python3 -c "from gpubench.gate.device import identify; from gpubench.record.rundir import slug; print(slug(identify()['name']))")
    other=$(python3 -c "from gpubench.gate.device import identify; print('NVIDIA H100 80GB HBM3' if 'H200' in identify()['name'] else 'NVIDIA H200')")
fi
say "GPU model: $slug"

step 1-baseline "${pytest[@]}" tests/benchmarks --gpu-save-baseline="$OUT"
for i in $(seq "$floor_reruns"); do
    step "1-floor-$i" "${pytest[@]}" tests/benchmarks --gpu-measure-floor="$OUT"
done
step a-uniform-5pct "${pytest[@]}" "$gemm" "$copy" --slow-calls=5 --gpu-baseline="$OUT" --gpu-fail-slower
step b-40pct-of-calls-30pct "${pytest[@]}" "$gemm" "$copy" --slow-calls=30 --slow-share=0.4 \
    --gpu-baseline="$OUT" --gpu-fail-slower
for i in 1 2 3; do
    step "c-rerun-$i" "${pytest[@]}" tests/benchmarks --gpu-baseline="$OUT" --gpu-fail-slower \
        --benchmark-compare-fail=median:10%
done
step e-slow-copy "${pytest[@]}" "$bench::test_copy[triton-1GiB]" --slow-copy --gpu-baseline="$OUT" \
    --benchmark-compare-fail=median:10%

other_dir=$work/other
mkdir -p "$other_dir"
if [ "$dry" -eq 0 ]; then
    python3 - "$OUT/$slug.json" "$other_dir/$slug.json" "$other" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
data["machine_info"]["gpu"]["name"] = sys.argv[3]  # the same file, claiming to come from another model
json.dump(data, open(sys.argv[2], "w"))
PY
fi
step e-another-model "${pytest[@]}" "$copy" --gpu-baseline="$other_dir"
step e-example "${pytest[@]}" examples/test_my_kernels.py -p gpubench.pytest_plugin

if [ "$dry" -eq 1 ]; then
    bad=$(awk -F'\t' '$2 != 0' "$work/exits.tsv" | wc -l)
    say "dry run: $bad of $(wc -l <"$work/exits.tsv") pytest commands could not collect their tests"
    [ "$bad" -eq 0 ]
    exit
fi
say "the checks (+$((SECONDS - started)) s):"
python3 scripts/bench_baseline_check.py "$work" "$OUT/$slug.json" "$OUT/bench-gate.json" | tee -a "$log"
rc=${PIPESTATUS[0]}
tar -czf "$OUT/steps.tar.gz" -C "$work" . # every step's verdicts and rounds, beside the log
say "baseline: $OUT/$slug.json; checks: $OUT/bench-gate.json; steps: $OUT/steps.tar.gz; $((SECONDS - started)) s in all"
exit "$rc"
