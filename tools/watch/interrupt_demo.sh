#!/usr/bin/env bash
# On a GPU machine: a run stopped by a real Ctrl-C (SIGINT) and a run killed with kill -9, each mid-run.
# Shows what each leaves on disk (every sample row up to the last batch written, a manifest that says the run
# did not complete) and that plot and report work on it, with --out, and say it is partial.
# About a minute. Writes $OUT/interrupt.log, $OUT/ctrl-c-report.md and $OUT/kill9-timeline.png.
#
#     OUT=/tmp/out bash tools/watch/interrupt_demo.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/interrupt.log") 2>&1

python3 -c "import gpubench.kernels" 2>/dev/null || pip install --quiet --no-deps --no-build-isolation -e .
work=$(mktemp -d)
scenarios=(copy-triton spin-1thread softmax-fused gemm-torch)
options=(--duration 3 --gap 0.5 --no-peaks)
now() { date +%s.%N; }

inspect() {  # inspect RUN_DIR SIGNAL_WALL: what the run left on disk
    python3 - "$1" "$2" <<'EOF'
import json, sys
from pathlib import Path
from gpubench.record.rundir import load_run, partial, samples_path
run, signal_wall = Path(sys.argv[1]), float(sys.argv[2])
path = samples_path(run)
print(f"  {path.name}: {path.stat().st_size} bytes on disk")
manifest, rows, summary = load_run(run)
print(f"  rows read back: {len(rows)}; notes: {manifest.get('read_notes') or 'none'}")
if rows:
    span = rows[-1]["t_end_s"] - rows[0]["t_start_s"]
    interval = manifest.get("options", {}).get("interval_s", 0.1)
    print(f"  rows cover {span:.2f} s of monotonic time: {span / interval:.0f} intervals of {interval} s for "
          f"{len(rows)} rows (one row per GPU and interval)")
    print(f"  last row: t_end_s {rows[-1]['t_end_s']:.3f}, wall {rows[-1]['t_wall']:.3f}, phase {rows[-1]['phase']}; "
          f"the signal came {signal_wall - rows[-1]['t_wall']:+.3f} s after it (wall clock)")
m = json.loads((run / "manifest.json").read_text())
print(f"  manifest: status {m.get('status')!r}, completed {m.get('completed')}, end_wall {m.get('end_wall')}")
print(f"  partial: {partial(m)}")
print(f"  summary.csv: {'%d scenarios: %s' % (len(summary), ', '.join(r['scenario'] for r in summary)) if summary else 'absent'}")
EOF
}

explore() {  # explore NAME RUN_DIR: plot and report with --out; the run directory must not change
    local before after
    before=$(cd "$2" && find . -type f -exec md5sum {} + | sort)
    gpubench plot "$2" --out "$work/$1-plot" > /dev/null; echo "  gpubench plot --out: exit $?"
    gpubench report "$2" --out "$work/$1-report" > /dev/null; echo "  gpubench report --out: exit $?"
    after=$(cd "$2" && find . -type f -exec md5sum {} + | sort)
    [ "$before" = "$after" ] && echo "  run directory unchanged by plot and report" || echo "  RUN DIRECTORY CHANGED"
    echo "  report.md says:"
    grep -E "partial run|^Note:|Not drawn" "$work/$1-report/report.md" | sed 's/^/    /'
}

echo "== $(gpubench --version), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"

echo; echo "== 1. Ctrl-C: timeout -s INT 12 gpubench run ${scenarios[*]} ${options[*]}"
start=$(now)
timeout --preserve-status -k 30 -s INT 12 gpubench run "${scenarios[@]}" "${options[@]}" --out "$work/ctrl-c" \
    > "$work/ctrl-c.out" 2>&1
rc=$?
signal_wall=$(python3 -c "print($start + 12)")
echo "  exit code $rc (130: stopped by SIGINT); last lines it printed:"
tail -3 "$work/ctrl-c.out" | sed 's/^/    /'
inspect "$work/ctrl-c" "$signal_wall"
explore ctrl-c "$work/ctrl-c"

echo; echo "== 2. kill -9 after 12 s: gpubench run ${scenarios[*]} ${options[*]}"
gpubench run "${scenarios[@]}" "${options[@]}" --out "$work/kill9" > "$work/kill9.out" 2>&1 &
pid=$!
sleep 12
children=$(pgrep -P "$pid" | tr '\n' ' ')
signal_wall=$(now)
kill -9 "$pid"
{ wait "$pid"; } 2>/dev/null
echo "  exit code $? (137: SIGKILL)"
for child in $children; do  # a child cannot be told by its parent when the parent is killed outright
    if kill -0 "$child" 2>/dev/null; then
        echo "  child process left running after kill -9: $(ps -o pid=,args= -p "$child"); ending it"
        kill "$child"
    fi
done
inspect "$work/kill9" "$signal_wall"
explore kill9 "$work/kill9"

cp "$work/ctrl-c-report/report.md" "$OUT/ctrl-c-report.md"
cp "$work/kill9-report/figures/timeline.png" "$OUT/kill9-timeline.png"
echo; echo "== copied: ctrl-c-report.md, kill9-timeline.png (its stamp says PARTIAL RUN)"
rm -rf "$work"
