#!/usr/bin/env bash
# `gpubench top` beside a live two-rank job whose rank 1 sleeps in its data loader, so that rank 0 waits in its
# all-reduce most of each step: GPU-Util reads 100% on GPU 0 while it mostly waits. Run from the repository root
# on a machine with two GPUs where gpubench is installed:
#   OUT=DIR SECONDS_=60 AT=45 bash tools/watch/top_collective.sh
# Writes into OUT: top-collective-<gpu>-x2.txt (one frame), .json (one document), -job.log (the job's output).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/gpubench-top-out}
SECONDS_=${SECONDS_:-60}
AT=${AT:-45}
mkdir -p "$OUT"
GPU=$(python3 -c "from gpubench.record import nvml; from gpubench.record.rundir import slug; \
print(slug(nvml.device_info(0)['name']))")
NAME="$OUT/top-collective-$GPU-x2"
torchrun --nproc-per-node 2 examples/train_llama.py --slow-rank 1 --slow-ms 500 --seconds "$SECONDS_" \
    > "$NAME-job.log" 2>&1 &
job=$!
sleep "$AT"
python3 -m gpubench top --once > "$NAME.txt"
python3 -m gpubench top --once --json > "$NAME.json"
wait "$job"
echo "job exit $?" >> "$NAME-job.log"
cat "$NAME.txt"
