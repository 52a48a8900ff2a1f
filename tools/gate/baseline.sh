#!/usr/bin/env bash
# What the regression gate promises, shown on this GPU in one command of about 8.5 minutes (an H100 or an H200):
#   1. the README's recipe: one command saves the baseline of tests/gate_benchmarks (nine calls, 5 us to
#      50 ms, torch, Triton and CuPy) and measures its floor in BASELINE_RUNS processes
#   c. RERUNS unchanged runs against it, c-rerun-1..N                  -> no `slower`, no `faster`, none fails
#   a. every call does 5% more work                                      -> `slower` for every call of 100 us or more
#      every call does 10% more work                                     -> `slower` or `unsure` for every call of
#                                                                           10 us or more, never `same`
#   b. 40% of the calls of the calls timed back to back do 30% more    -> `slower`
#   e. --gpu-fail-slower where CUDA sees no GPU -> refused (exit 4); a baseline claiming another model -> refused;
#      the two side by side, since neither times anything
#   x. PROBE_RUNS (default 0) fresh processes of research/bench_baseline_probe.py (what moves a small call's time
#      from one process to the next), last and only where time is left: about 9 s each; the H100's three are in
#      results/logs/bench-steps-h100-80gb-hbm3-earlier-4.tar.gz
# The slowdowns are real work on the GPU (tests/conftest.py: --more-work, --slow-share). Steps a and b run
# halfway through the reruns. Every session is a process of its own, and most of one is its start (Python,
# torch, CUDA): 31 of them fit in 9 minutes only at a tenth of a second of rounds and of settling per benchmark
# (MIN_TIME, SETTLE), which the floors allow (tests/gate/test_gate_h100_reruns.py); step b times its two calls for a
# second (PART_MIN_TIME), which its bursts need. Every step logs its command, exit status and seconds;
# tools/gate/baseline_check.py then prints, per check, what was expected and what it got, and the spread of
# every benchmark over the unchanged runs. The script keeps its own clock: a step that would end past BUDGET_S
# (default 540) is skipped and said, and what was measured is kept. Into $OUT, three files:
#   bench.log        everything, in order            -> commit as results/logs/bench-baseline-<gpu>.log
#   bench-gate.json  the checks and the numbers the README quotes -> results/logs/bench-gate-<gpu>.json
#   steps.tar.gz     the baseline (baseline/<gpu>.json -> commit as results/benchmarks/gate/<gpu>.json), each
#                    step's verdicts, round times and output, any probe's files -> results/logs/bench-steps-<gpu>.tar.gz
# Run from the repository root on a GPU machine:  OUT=DIR tools/gate/baseline.sh
# Where a first run ran out of time (its log says which steps it skipped), a second command runs those steps
# against the first's baseline and checks all of them together, from the first's OUT folder (its steps.tar.gz):
#                                                  OUT=DIR2 tools/gate/baseline.sh --resume DIR
# Check the script without a GPU:                  OUT=DIR tools/gate/baseline.sh --dry-run [--resume DIR]
#   (every pytest command only collects its tests, so options and test ids are checked; nothing is timed)
set -uo pipefail
: "${OUT:?set OUT to the folder for the log, the checks and the steps}"
dry=0 resume=
while [ $# -gt 0 ]; do
    case $1 in
    --dry-run) dry=1 ;;
    --resume)
        resume=${2:-}
        [ -f "$resume/steps.tar.gz" ] || { echo "--resume DIR: DIR must hold the first run's steps.tar.gz" >&2; exit 2; }
        shift
        ;;
    *) echo "usage: OUT=DIR tools/gate/baseline.sh [--dry-run] [--resume DIR]" >&2; exit 2 ;;
    esac
    shift
done
budget=${BUDGET_S:-540}
runs=${BASELINE_RUNS:-8}
reruns=${RERUNS:-20}
probes=${PROBE_RUNS:-0}
reserve=20 # seconds kept for the checks and the packing
export PYTHONUNBUFFERED=1
# the sessions load the two plugins they need and no other installed one: a second or more at every start
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
mkdir -p "$OUT"
log=$OUT/bench.log
: >"$log"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/baseline"
if [ -n "$resume" ]; then
    tar -xzf "$resume/steps.tar.gz" -C "$work" && mv "$work/bench.log" "$work/bench-1.log" # the first run's, kept
fi
started=$SECONDS
per_run=20 # seconds a session of the nine benchmarks takes, until sessions have run here
pending=() # steps running in the background

say() { echo "== $*" | tee -a "$log"; }
left() { echo $((budget - reserve - (SECONDS - started))); }
ran_before() { [ -f "$work/exits.tsv" ] && awk -F'\t' -v s="$1" '$1 == s && $2 != "skipped" { f = 1 } END { exit !f }' "$work/exits.tsv"; }
record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$work/exits.tsv"; }

# step NAME SESSIONS CMD...: run a command (SESSIONS pytest sessions long) with its output in $work/NAME.out, log
# it, its exit status and its seconds; skipped when the budget cannot hold it, and when resuming, where the first
# run ran it. bg=1: in the background, its output logged by wait_all
step() {
    local name=$1 sessions=$2
    shift 2
    local need=$((sessions * per_run)) t0=$SECONDS
    if [ -n "$resume" ] && ran_before "$name"; then
        return
    fi
    if [ "$dry" -eq 0 ] && [ "$(left)" -lt "$need" ]; then
        say "$name: skipped, $(left) s of the budget left and it needs about $need s"
        record "$name" skipped 0
        return
    fi
    say "$name: $* (+$((SECONDS - started)) s)"
    if [ "$dry" -eq 1 ]; then
        # without a GPU --gpu-fail-slower is refused before collecting (e-no-gpu shows it, and expects it): the
        # dry run leaves it out of the other steps so that their options and test ids are checked
        local args=() a
        for a in "$@"; do [ "$a" = --gpu-fail-slower ] && [ "$name" != e-no-gpu ] || args+=("$a"); done
        "${args[@]}" --collect-only >>"$log" 2>&1
        local rc=$?
        [ "$name" = e-no-gpu ] && rc=$((rc == 4 ? 0 : 1))
        record "$name" "$rc" dry
        say "$name: collected ($rc)"
        return
    fi
    if [ "${bg:-0}" -eq 1 ]; then
        (timeout "$(($(left) + reserve / 2))" "$@" >"$work/$name.out" 2>&1; echo "$? $((SECONDS - t0))" >"$work/$name.rc") &
        pending+=("$name")
        return
    fi
    timeout "$(($(left) + reserve / 2))" "$@" 2>&1 | tee "$work/$name.out" >>"$log"
    local rc=${PIPESTATUS[0]}
    record "$name" "$rc" $((SECONDS - t0))
    say "$name: exit $rc ($((SECONDS - t0)) s)"
    case $name in c-* | a-*) per_run=$((SECONDS - t0 + 1)) ;; esac # the next session takes about as long as this one
}

wait_all() {
    wait
    local name rc s
    for name in "${pending[@]}"; do
        cat "$work/$name.out" >>"$log"
        read -r rc s <"$work/$name.rc"
        record "$name" "$rc" "$s"
        say "$name: exit $rc ($s s)"
    done
    pending=()
}

benches=tests/gate_benchmarks
opts=(--gpu-min-time="${MIN_TIME:-0.1}" --gpu-settle="${SETTLE:-0.1}")
pytest=(python3 -m pytest -p no:cacheprovider -p pytest_benchmark.plugin -p gpubench.pytest_plugin
    --benchmark-columns=min,median,max,iqr,rounds --durations=12 --durations-min=0.1)
against() { echo "--gpu-baseline=$work/baseline" --gpu-fail-slower "--gpu-verdict-json=$work/$1.json"; }

if [ "$dry" -eq 1 ]; then
    slug=dry-run other="NVIDIA H200"
else
    here=$(python3 -c "import gpubench, pathlib; print(pathlib.Path(gpubench.__file__).resolve().parents[1])" 2>/dev/null)
    if [ "$here" = "$(pwd -P)" ]; then
        echo "gpubench is installed from here: no pip install" >>"$log"
    else
        python3 -m pip install --no-deps --no-build-isolation -e . >>"$log" 2>&1 || say "pip install -e . failed (see above)"
    fi
    nvidia-smi --query-gpu=name,uuid,driver_version,power.limit,clocks.max.sm,ecc.mode.current --format=csv >>"$log" 2>&1
    { read -r slug; read -r other; } < <(python3 -c "
from gpubench.gate.device import identify
from gpubench.record.rundir import slug
name = identify()['name']
print(slug(name))
print('NVIDIA H100 80GB HBM3' if 'H200' in name else 'NVIDIA H200')")
fi
say "GPU model: $slug; budget $budget s; $runs baseline runs, $reruns reruns, $probes probes${resume:+; resuming $resume}"
if [ -n "$resume" ] && [ "$dry" -eq 0 ] && [ ! -f "$work/baseline/$slug.json" ]; then
    say "--resume $resume: its steps hold no baseline of $slug ($(ls "$work/baseline"))"
    exit 2
fi

t0=$SECONDS
per_run=25 step 1-baseline "$runs" "${pytest[@]}" "$benches" --gpu-save-baseline="$work/baseline" \
    --gpu-baseline-runs="$runs" "${opts[@]}" --gpu-verdict-json="$work/1-baseline.json"
if [ "$dry" -eq 0 ] && [ -z "$resume" ] && [ "$runs" -gt 0 ]; then
    per_run=$(((SECONDS - t0 + runs - 1) / runs + 1))
    say "a session takes about $per_run s; the $((reruns + 3)) sessions to come need about $(((reruns + 3) * per_run)) s of the $(left) s left"
fi

half=$((reruns / 2))
for i in $(seq 1 "$half"); do
    step "c-rerun-$i" 1 "${pytest[@]}" "$benches" $(against "c-rerun-$i") "${opts[@]}"
done
step a-more-work-5pct 1 "${pytest[@]}" "$benches" $(against a-more-work-5pct) "${opts[@]}" --more-work=5
step a-more-work-10pct 1 "${pytest[@]}" "$benches" $(against a-more-work-10pct) "${opts[@]}" --more-work=10
# step b at the default second of rounds: 40% of the calls slowed in stretches of 64 shows only over several
# stretches, and at a tenth of a second the 0.6 ms saxpy's rounds hold one or two (tests/gate/test_gate_h100_reruns.py)
step b-part-of-calls 1 "${pytest[@]}" "$benches" -k "saxpy or sum_large" $(against b-part-of-calls) "${opts[@]}" \
    --gpu-min-time="${PART_MIN_TIME:-1}" --more-work=30 --slow-share=0.4
for i in $(seq $((half + 1)) "$reruns"); do
    step "c-rerun-$i" 1 "${pytest[@]}" "$benches" $(against "c-rerun-$i") "${opts[@]}"
done

other_dir=$work/other
mkdir -p "$other_dir"
if [ "$dry" -eq 0 ] && [ -f "$work/baseline/$slug.json" ]; then
    python3 - "$work/baseline/$slug.json" "$other_dir/$slug.json" "$other" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
data["machine_info"]["gpu"]["name"] = sys.argv[3]  # the same file, claiming to come from another model
json.dump(data, open(sys.argv[2], "w"))
PY
fi
per_run=10 bg=1 step e-no-gpu 1 env CUDA_VISIBLE_DEVICES= "${pytest[@]}" "$benches" --gpu-baseline="$work/baseline" \
    --gpu-fail-slower
per_run=10 bg=1 step e-another-model 1 "${pytest[@]}" "$benches" -k saxpy --gpu-baseline="$other_dir"
wait_all

for i in $(seq "$probes"); do
    if [ "$dry" -eq 1 ]; then
        say "x-probe-$i: $(python3 -m research.bench_baseline_probe --dry-run 2>&1)"
        continue
    fi
    per_run=12 step "x-probe-$i" 1 python3 -m research.bench_baseline_probe "$work/probe-$i.json"
done

if [ "$dry" -eq 1 ]; then
    bad=$(awk -F'\t' '$3 == "dry" && $2 != 0' "$work/exits.tsv" | wc -l)
    say "dry run: $bad of $(awk -F'\t' '$3 == "dry"' "$work/exits.tsv" | wc -l) pytest commands could not collect their tests"
    [ "$bad" -eq 0 ]
    exit
fi
say "the checks (+$((SECONDS - started)) s):"
BASELINE_RUNS=$runs RERUNS=$reruns python3 -m tools.gate.baseline_check "$work" "$work/baseline/$slug.json" \
    "$OUT/bench-gate.json" | tee -a "$log"
rc=${PIPESTATUS[0]}
cp "$log" "$work/bench.log"
tar -czf "$OUT/steps.tar.gz" -C "$work" . # the baseline, every step's verdicts, rounds and output, the probes
say "checks: $OUT/bench-gate.json; steps and baseline: $OUT/steps.tar.gz; $((SECONDS - started)) s in all"
exit "$rc"
