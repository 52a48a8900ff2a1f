#!/usr/bin/env bash
# The benchmarks' baseline for this GPU model, and what the pytest plugin promises, shown on this GPU:
#   1. pytest tests/benchmarks --gpu-save-baseline   -> $OUT/<gpu-slug>.json (commit it to results/benchmarks/)
#   2. the --slow-copy regression against it          -> reads "slower" and fails (exit 1)
#   3. an unchanged rerun against it                  -> reads "same" within the noise and passes (exit 0)
#   4. a baseline claiming another GPU model          -> refused in one sentence (exit 4)
#   5. examples/test_my_kernels.py                    -> a user's own kernels through gpu_benchmark
# Everything is logged to $OUT/bench.log. Run from the repository root on a GPU machine (about 3 minutes).
set -uo pipefail
: "${OUT:?set OUT to the folder for the baseline and the log}"
log=$OUT/bench.log
: >"$log"
failures=0

say() { echo "== $*" | tee -a "$log"; }

# step NAME EXPECTED_EXIT CMD...: run, log, and check the exit status it must have
step() {
    local name=$1 expected=$2
    shift 2
    say "$name: $*"
    timeout 150 "$@" >>"$log" 2>&1
    local rc=$?
    if [ "$rc" -eq "$expected" ]; then
        say "$name: exit $rc, as expected"
    else
        say "$name: exit $rc, expected $expected"
        failures=$((failures + 1))
    fi
}

python3 -m pip install --no-deps --no-build-isolation -e . >>"$log" 2>&1 || say "pip install -e . failed (see above)"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv >>"$log" 2>&1
slug=$(python3 -c "from gpubench.gate.device import identify; from gpubench.record.rundir import slug; print(slug(identify()['name']))")
other=$(python3 -c "from gpubench.gate.device import identify; print('NVIDIA H100 80GB HBM3' if 'H200' in identify()['name'] else 'NVIDIA H200')")
say "GPU model: $slug"

step "1 baseline" 0 python3 -m pytest tests/benchmarks -p no:cacheprovider --gpu-save-baseline="$OUT"
step "2 slow copy" 1 python3 -m pytest tests/benchmarks -p no:cacheprovider -k "test_copy and triton" --slow-copy \
    --gpu-baseline="$OUT" --benchmark-compare-fail=median:10%
step "3 unchanged rerun" 0 python3 -m pytest tests/benchmarks -p no:cacheprovider --gpu-baseline="$OUT" \
    --benchmark-compare-fail=median:10%

tmp=$(mktemp -d)
python3 - "$OUT/$slug.json" "$tmp/$slug.json" "$other" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
data["machine_info"]["gpu"]["name"] = sys.argv[3]  # the same file, claiming to come from another model
json.dump(data, open(sys.argv[2], "w"))
PY
step "4 another model's baseline" 4 python3 -m pytest tests/benchmarks -p no:cacheprovider -k "test_copy and torch" \
    --gpu-baseline="$tmp"
rm -rf "$tmp"
step "5 example" 0 python3 -m pytest examples/test_my_kernels.py -p no:cacheprovider -p gpubench.pytest_plugin

verdicts=$(grep -E "^test_.* ms -> " "$log")
say "verdicts against the baseline (step 2, then step 3):"
echo "$verdicts" | tee -a "$log"
say "$failures step(s) ended otherwise than expected; baseline: $OUT/$slug.json"
[ "$failures" -eq 0 ]
