"""The CUPTI probe's driver (research/cupti_probe.py), its steps that put readers on the GPU: a CUPTI collector
beside another process's known kernels, NVML GPM over the same kernels, two readers at once, Nsight Compute
and DCGM beside a reader."""

from __future__ import annotations

import json
import math
import shutil
import statistics
import time
from pathlib import Path

from research.cupti.machine import Machine
from research.cupti.sampling import log
from research.cupti.steps import LOAD_PLAN


class Driver(Machine):
    def cross_process(self, label: str, metrics: list[str]):
        """A CUPTI collector here, the kernels in another process."""
        stop = self.tmp / f"stop-{label}"
        col = self.spawn("collect", "--metrics", ",".join(metrics), "--seconds", "50", "--stop-file", str(stop))
        time.sleep(1.0)
        load = self.run("load", "--plan", LOAD_PLAN, timeout=50)
        stop.write_text("stop")
        res = self.finish(*col, timeout=30)
        self.results[f"cross_{label}"] = {"collect": res, "load": load}
        self.summarize_cupti(label, res, load, metrics)

    def gpm_reference(self):
        stop = self.tmp / "stop-gpm"
        g = self.spawn("gpm", "--seconds", "50", "--stop-file", str(stop))
        time.sleep(0.5)
        load = self.run("load", "--plan", LOAD_PLAN, timeout=50)
        stop.write_text("stop")
        res = self.finish(*g, timeout=30)
        self.results["gpm_reference"] = {"gpm": res, "load": load}
        log("  GPM per phase (reads whose interval lies in the phase, first 0.3 s dropped):")
        for ph in load.get("phases", []):
            rows = [
                r["values"]
                for r in res.get("reads", [])
                if "values" in r and r["t0"] >= ph["t0"] + 0.3 and r["t1"] <= ph["t1"]
            ]
            means = {
                k: statistics.mean(r[k] for r in rows if not math.isnan(r[k]))
                for k in (rows[0] if rows else {})
                if any(not math.isnan(r[k]) for r in rows)
            }
            log(f"    {ph['phase']:<18} n={len(rows):<3} " + " ".join(f"{k}={v:.3g}" for k, v in means.items()))

    def summarize_cupti(self, label, res, load, metrics):
        if not res.get("ok"):
            log(f"  CUPTI collector ({label}) failed at {res.get('failed_at')}: {res.get('error')}")
        samples, td = res.get("samples", []), res.get("decodes", [])
        if not samples:
            log(f"  no CUPTI samples ({label})")
            return
        # GPU timestamps -> wall clock: the smallest (decode time - last sample end) bounds the offset.
        offs = [d["real_ns"] - d["last_end"] for d in td if d["last_end"]]
        off = min(offs) if offs else 0
        mono_minus_real = statistics.median(d["mono_ns"] - d["real_ns"] for d in td) if td else 0
        durs = [e - s for s, e, _ in samples]
        log(
            f"  {label}: {len(samples)} samples, duration median {statistics.median(durs) / 1e6:.3f} ms; GPU clock "
            f"- wall clock ~ {-off / 1e6:.1f} ms (decode latency included); decode "
            f"{statistics.median(d['decode_ms'] for d in td):.2f} ms median"
        )
        for ph in load.get("phases", []):
            lo, hi = ph["t0"] + 0.3, ph["t1"] - 0.05
            rows = [
                v
                for s, e, v in samples
                if lo <= (s + off + mono_minus_real) / 1e9 and (e + off + mono_minus_real) / 1e9 <= hi
            ]
            if not rows:
                log(f"    {ph['phase']:<18} n=0")
                continue
            means = [statistics.mean(r[i] for r in rows) for i in range(len(metrics))]
            log(
                f"    {ph['phase']:<18} n={len(rows):<3} "
                + " ".join(f"{m.split('.')[0]}={v:.4g}" for m, v in zip(metrics, means))
            )

    def two_readers(self, metrics: list[str]):
        """GPM and CUPTI, CUPTI and CUPTI, GPM and GPM, at once, while a GEMM runs in a third process."""
        ready = self.tmp / "load-ready"
        load = self.spawn("load", "--plan", "gemm-bf16:40", "--ready", str(ready))
        t = time.monotonic()
        while not ready.exists() and time.monotonic() - t < 30:
            time.sleep(0.1)
        m = ",".join(metrics)
        out = {}
        for name, first, second in (
            ("gpm_then_cupti", ("gpm",), ("collect", "--metrics", m)),
            ("cupti_then_gpm", ("collect", "--metrics", m), ("gpm",)),
            ("cupti_then_cupti", ("collect", "--metrics", m), ("collect", "--metrics", m)),
            ("gpm_then_gpm", ("gpm",), ("gpm",)),
        ):
            if self.left() < 25:
                break
            now = time.monotonic()
            a = self.spawn(first[0], *first[1:], "--seconds", "5", "--start-at", str(now + 2.0))
            b = self.spawn(second[0], *second[1:], "--seconds", "2", "--start-at", str(now + 3.5))
            ra, rb = self.finish(*a, timeout=20), self.finish(*b, timeout=20)
            out[name] = {"first": self.brief(ra, now + 3.5, now + 5.5), "second": self.brief(rb, now + 3.5, now + 5.5)}
            log(f"  {name}: first -> {json.dumps(out[name]['first'])}")
            log(f"  {name}: second -> {json.dumps(out[name]['second'])}")
        load[0].kill()
        self.finish(*load, timeout=5)
        self.results["two_readers"] = out

    @staticmethod
    def brief(r: dict, t_b0: float, t_b1: float) -> dict:
        """What a reader reported before, while and after the second reader ran."""
        b = {k: r.get(k) for k in ("ok", "failed_at", "error", "disable_error", "events") if r.get(k) is not None}
        if "reads" in r:  # GPM

            def mean(rows, key="sm_active_pct"):
                vals = [x["values"].get(key) for x in rows if "values" in x and x["values"].get(key) is not None]
                vals = [v for v in vals if not math.isnan(v)]
                return round(statistics.mean(vals), 2) if vals else None

            parts = {
                "before": [x for x in r["reads"] if x["t1"] < t_b0],
                "during": [x for x in r["reads"] if x["t0"] >= t_b0 and x["t1"] <= t_b1],
                "after": [x for x in r["reads"] if x["t0"] > t_b1],
            }
            b["sm_active"] = {k: mean(v) for k, v in parts.items()}
            b["read_errors"] = sorted({x["error"] for x in r["reads"] if "error" in x})[:3]
        if "samples" in r:  # CUPTI
            b["samples"] = len(r["samples"])
            vals = [v[0] for _, _, v in r["samples"]]
            b["first_metric_mean"] = round(statistics.mean(vals), 2) if vals else None
            b["decodes"] = len(r.get("decodes", []))
        return b

    def ncu(self, metrics: list[str]):
        ncu = shutil.which("ncu") or next(iter(sorted(Path("/opt/nvidia/nsight-compute").glob("*/ncu"))), None)
        nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
        if not ncu:
            log("  no ncu here")
            return
        src = self.tmp / "tiny.cu"
        src.write_text(
            "__global__ void k(float* x){int i=blockIdx.x*blockDim.x+threadIdx.x; for(int j=0;j<20000;j++)"
            " x[i]=x[i]*0.999f+1.0f;}\nint main(){float* x; cudaMalloc(&x, 1<<24); for(int r=0;r<20;r++)"
            " k<<<4096,1024>>>(x); cudaDeviceSynchronize(); return 0;}\n"
        )
        exe = self.tmp / "tiny"
        log("  nvcc: " + self.sh(f"{nvcc} -o {exe} {src}", timeout=60)[-300:])
        res = {"alone": self.sh(f"{ncu} --metrics sm__cycles_active.avg --launch-count 2 {exe}", timeout=60)[-1500:]}
        log("  ncu alone:\n" + res["alone"])
        if self.left() > 30:
            now = time.monotonic()
            c = self.spawn("collect", "--metrics", ",".join(metrics), "--seconds", "8", "--start-at", str(now + 1))
            time.sleep(3.0)
            res["during_cupti"] = self.sh(f"{ncu} --metrics sm__cycles_active.avg --launch-count 2 {exe}", timeout=40)[
                -1500:
            ]
            log("  ncu while a CUPTI collector runs:\n" + res["during_cupti"])
            r = self.finish(*c, timeout=20)
            res["cupti_during_ncu"] = self.brief(r, 0, 0)
            log("  the CUPTI collector meanwhile: " + json.dumps(res["cupti_during_ncu"]))
        if self.left() > 25:
            now = time.monotonic()
            g = self.spawn("gpm", "--seconds", "8", "--start-at", str(now + 1))
            time.sleep(3.0)
            res["during_gpm"] = self.sh(f"{ncu} --metrics sm__cycles_active.avg --launch-count 2 {exe}", timeout=40)[
                -1500:
            ]
            log("  ncu while GPM reads:\n" + res["during_gpm"])
            r = self.finish(*g, timeout=20)
            res["gpm_during_ncu"] = {
                "errors": sorted({x["error"] for x in r.get("reads", []) if "error" in x})[:3],
                "reads": len(r.get("reads", [])),
            }
            log("  GPM meanwhile: " + json.dumps(res["gpm_during_ncu"]))
        self.results["ncu"] = res

    def dcgm(self, metrics: list[str]):
        if not shutil.which("nv-hostengine"):
            log("  no DCGM host engine here")
            return
        res = {"start": self.sh("nv-hostengine", timeout=15)}
        time.sleep(2)
        res["dmon"] = self.sh("dcgmi dmon -e 1002 -c 5 -d 200", timeout=20)
        res["cupti"] = self.brief(
            self.run("collect", "--metrics", ",".join(metrics), "--seconds", "2", timeout=30), 0, 0
        )
        res["pause"] = self.sh("dcgmi profile --pause", timeout=15)
        res["cupti_paused"] = self.brief(
            self.run("collect", "--metrics", ",".join(metrics), "--seconds", "2", timeout=30), 0, 0
        )
        res["resume"] = self.sh("dcgmi profile --resume", timeout=15)
        res["stop"] = self.sh("nv-hostengine --term", timeout=15)
        self.results["dcgm"] = res
        log(json.dumps(res, indent=1)[:3000])
