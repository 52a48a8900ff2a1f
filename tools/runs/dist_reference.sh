#!/usr/bin/env bash
# Reference runs on a machine with two GPUs (two H200s), from the repository root, in about four minutes:
#   1. torchrun with two ranks: a copy on each GPU, the all-reduces and the straggler scenarios, with the
#      figures and the report;
#   2. busbw as gpubench reports it beside nccl-tests' formula applied to the measured time (and nccl-tests'
#      own all_reduce_perf where it is installed);
#   3. CUDA_VISIBLE_DEVICES=1: the sampled GPU is NVML's GPU 1, busy while GPU 0 is not;
#   4. the GPU tests of tests/suite/test_gpu_run.py (GPU_TESTS=0 leaves them out: they take up to seven minutes).
# Writes $OUT/dist.log and $OUT/dist-runs.tar.gz (the run directories, to copy under results/).
set -uo pipefail
# NVLink multicast (NVLS) stays off, here and in every child process.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
failed=0
step() { echo; echo "=== $* ($(date +%T))"; }
check() { if "$@"; then echo "PASS: $*"; else echo "FAIL ($?): $*"; failed=1; fi; }

main() {
step "install and machine"
python3 -m pip install --quiet --no-deps --no-build-isolation -e . || failed=1
nvidia-smi -L
nvidia-smi topo -m
nvidia-smi nvlink -s -i 0 | head -20
python3 - <<'EOF'
from gpubench.record import nvml
for i in range(nvml.device_count()):
    link = nvml.nvlink(nvml.handle(i))
    speeds = sorted({x["speed_mbps"] for x in link["links"] if x["active"]})
    versions = sorted({x["version"] for x in link["links"] if x["active"]})
    print(f"NVML GPU {i}: {link['active_links']} active NVLinks of {len(link['links'])}, speed {speeds} MB/s, "
          f"version {versions}: {(link['bytes_per_s'] or 0) / 1e9:.1f} GB/s per direction in all")
EOF

stamp=$(date +%Y%m%d-%H%M%S)
slug=$(python3 -c "from gpubench.record import nvml; from gpubench.record.rundir import slug; print(slug(nvml.device_info(0)['name']))")
runs=$PWD/results
dist_run=$runs/$slug-x2-$stamp
visible_run=$runs/$slug-visible1-$stamp

step "1. torchrun, two ranks"
check timeout 300 torchrun --nproc-per-node=2 -m gpubench run copy-triton allreduce-1gib allreduce-8kib straggler \
    straggler-hang --out "$dist_run"
check gpubench plot "$dist_run"
check gpubench report "$dist_run"

step "2. busbw beside nccl-tests' formula"
python3 - "$dist_run" <<'EOF'
import sys
from gpubench.record.rundir import load_run

manifest, samples, summary = load_run(sys.argv[1])
bad = 0
for r in summary:
    if r.get("bound") != "interconnect":
        continue
    n, size, t = r["world_size"], r["link_bytes_per_call"], r["kernel_ms"] / 1e3
    algbw = size / t / 1e9  # nccl-tests doc/PERFORMANCE.md: algbw = S / t
    busbw = algbw * 2 * (n - 1) / n  # all-reduce: busbw = algbw * 2(n-1)/n
    ok = abs(busbw - r["busbw_gbps"]) <= 1e-6 * busbw
    bad += not ok
    print(f"{r['scenario']} rank {r['rank']}: {size:.0f} B in {t * 1e6:.2f} us over {n} ranks; gpubench algbw "
          f"{r['algbw_gbps']:.3f} busbw {r['busbw_gbps']:.3f} GB/s; formula algbw {algbw:.3f} busbw {busbw:.3f} GB/s; "
          f"NVLink {r.get('nvlink_pct', float('nan')):.1f}% of {r.get('nvlink_gbps', float('nan')):.0f} GB/s "
          f"({r.get('nvlink_links')} links); util {r.get('gpu_util_pct')}% SM active {r.get('sm_active_pct')}% "
          f"check {r.get('check')} -> {'PASS' if ok else 'FAIL'}")
for r in summary:
    if r["scenario"].startswith("straggler"):
        print(f"{r['scenario']} rank {r['rank']}: step {r['kernel_ms']:.2f} ms, arrival delay "
              f"{r.get('arrival_delay_ms'):.3f} ms (p90 {r.get('arrival_delay_ms_p90'):.3f}), wait {r.get('wait_ms'):.3f} ms, "
              f"straggler named {r.get('straggler_rank')} (slept: {r.get('slow_rank')}); util {r.get('gpu_util_pct')}% "
              f"SM active {r.get('sm_active_pct')}% power {r.get('power_w_energy'):.0f} W")
print("\n".join(f"warning: {w}" for w in manifest.get("warnings", []) + manifest.get("errors", [])))
sys.exit(1 if bad else 0)
EOF
[ $? -eq 0 ] || failed=1
if command -v all_reduce_perf >/dev/null; then
    timeout 90 all_reduce_perf -b 8K -e 1G -f 131072 -g 2 -d bfloat16
else
    echo "nccl-tests' all_reduce_perf is not installed here: only its formula is compared"
fi

step "3. CUDA_VISIBLE_DEVICES=1 samples NVML's GPU 1"
check env CUDA_VISIBLE_DEVICES=1 timeout 120 gpubench run copy-triton --duration 2 --no-peaks --all-gpus \
    --out "$visible_run"
python3 - "$visible_run" <<'EOF'
import statistics
import sys
from gpubench.record.rundir import load_run

manifest, samples, summary = load_run(sys.argv[1])
util = {g: statistics.median(r["gpu_util_pct"] for r in samples if r["gpu"] == g and r["phase"] == "copy-triton")
        for g in sorted({r["gpu"] for r in samples})}
print(f"manifest gpu: NVML {manifest['gpu']['nvml_index']}, CUDA {manifest['gpu']['cuda_index']}; "
      f"summary gpu {summary[0]['gpu']}; median GPU-Util during copy-triton by NVML index: {util}")
ok = manifest["gpu"]["nvml_index"] == 1 == summary[0]["gpu"] and util[1] >= 90 and util[0] <= 10
print("PASS" if ok else "FAIL", "the sampled GPU is NVML index 1, busy, while GPU 0 is not")
sys.exit(0 if ok else 1)
EOF
[ $? -eq 0 ] || failed=1

if [ "${GPU_TESTS:-1}" != 0 ]; then
    step "4. GPU tests"
    check timeout 420 python3 -m pytest -m gpu tests/suite/test_gpu_run.py -q
fi

step "pack"
tar -czf "$OUT/dist-runs.tar.gz" -C "$runs" "./$(basename "$dist_run")" "./$(basename "$visible_run")"
ls -l "$OUT"
echo "done: $([ $failed -eq 0 ] && echo all passed || echo SOME FAILED)"
return $failed
}

main 2>&1 | tee "$OUT/dist.log"
exit "${PIPESTATUS[0]}"
