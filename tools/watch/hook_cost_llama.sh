#!/bin/bash
# The optimizer hook's cost on the Llama example, and its no-code-change rate against its own calls: three
# rounds, each running the three arms in another order (auto: --no-gpubench, the hook on; off: the same with
# --no-auto; own: the example's own gpubench calls), each watched. What the job printed is its job.log.
#
#     bash tools/watch/hook_cost_llama.sh [RESULTS]     # on one GPU: about 4 minutes
#
# Runs go to RESULTS/watch-auto-llama-<arm>-<i>-<gpu>/ (default results/, <i> from 3: the rounds of
# python -m tools.watch.auto --part llama come first), the lines to RESULTS/logs/watch-auto-llama-hookcost-<gpu>.log;
# tools/readme/tables.py reads them with the rest.
set -u
cd "$(dirname "$0")/../.."
results=${1:-results}
gpu=$(python3 -c "import torch; from gpubench.record.rundir import slug; print(slug(torch.cuda.get_device_name()))")
log=$results/logs/watch-auto-llama-hookcost-$gpu.log
mkdir -p "$results/logs"
nvidia-smi -L | tee "$log"
run() {
  local arm=$1 i=$2 extra="" job="--no-gpubench"
  [ "$arm" = off ] && extra="--no-auto"
  [ "$arm" = own ] && job=""
  local d=$results/watch-auto-llama-$arm-$i-$gpu
  mkdir -p "$d"
  timeout 120 python3 -m gpubench watch --out "$d" $extra -- python3 examples/train_llama.py --seconds 8 \
    --eval-seconds 2 $job > "$d/job.log" 2> /tmp/hook-cost-$arm-$i.err
  echo "$arm $i rc=$? $(grep '^train:' "$d/job.log")" | tee -a "$log"
}
for i in 3 4 5; do
  case $i in 3) order="auto off own";; 4) order="off own auto";; *) order="own auto off";; esac
  for arm in $order; do run "$arm" "$i"; done
done
