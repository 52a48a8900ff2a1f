#!/usr/bin/env bash
# watch's live rows on a GPU, a job of a few minutes: once into a file (no terminal: a line every --every
# seconds, as a scheduler's job log gets them), once on a terminal (tmux: the status area beside the job's own
# output), its pane captured as it runs. Run from the repository root on a GPU machine where gpubench is
# installed; check what it left with `python3 -m tools.watch.live_check DIR` (DIR: where OUT's files were put).
#   OUT=DIR FILE_S=150 TTY_S=75 bash tools/watch/live_check.sh
# Writes results/live-file-<gpu>/ and results/live-tty-<gpu>/ (run directories), and into OUT: live-file.log
# (everything the watch and the job printed), live-tty-<t>.txt (the pane at t seconds), live-runs.tar.gz.
set -uo pipefail
OUT=${OUT:-/tmp/gpubench-live-out}
FILE_S=${FILE_S:-150}
TTY_S=${TTY_S:-75}
mkdir -p "$OUT" results
GPU=$(python3 -c "import torch; n = torch.cuda.get_device_name(0).lower(); print(next((k for k in ('h200', 'h100', \
'a100', 'l4') if k in n), 'gpu'))")
JOB="python3 examples/train_llama.py"
rm -rf "results/live-file-$GPU" "results/live-tty-$GPU"
echo "== into a file: gpubench watch --every 10 -- $JOB --seconds $FILE_S"
python3 -m gpubench watch --every 10 --out "results/live-file-$GPU" -- $JOB --seconds "$FILE_S" > "$OUT/live-file.log" 2>&1
echo "exit $?; $(grep -c '^gpubench live' "$OUT/live-file.log") live lines"
if command -v tmux > /dev/null; then
  echo "== on a terminal (tmux, 150 x 45): the same job for $TTY_S s"
  tmux kill-server 2> /dev/null
  tmux new-session -d -s live -x 150 -y 45 \
    "python3 -m gpubench watch --every 10 --out results/live-tty-$GPU -- $JOB --seconds $TTY_S; sleep 60"
  start=$(date +%s)
  for t in 25 50 $((TTY_S + 5)) $((TTY_S + 25)); do
    sleep $((start + t - $(date +%s)))
    tmux capture-pane -p -t live > "$OUT/live-tty-$t.txt"
    echo "captured at $t s"
  done
  tmux kill-server 2> /dev/null
else
  echo "no tmux here: no terminal capture"
fi
tar czf "$OUT/live-runs.tar.gz" results/live-file-$GPU results/live-tty-$GPU 2> /dev/null
