"""The metrics the CUPTI probe tries (research/cupti_probe.py) and its query step: the candidates per column,
the CUPTI source's own first, the raw counters to fall back on, and the step that lists the chip's PM-sampling
metrics, builds one-pass sets of the candidates it offers and collects once with them."""

from __future__ import annotations

import json
import time

from gpubench.record.sources.cupti_metrics import CANDIDATES, NOT_SHIPPED
from research.cupti.sampling import configure, cuda_init, decode, err, libcupti_info, log, patch_host_struct

# Candidates per column, best first: the ones the CUPTI source ships (gpubench.record.sources.cupti_metrics.CANDIDATES),
# so that the probe tries what the source would choose; a ratio's two counters are tried among RAW below.
# Columns the source ships no counter for (NOT_SHIPPED) keep the probe's own candidates, DCGM's definitions as
# Nsight Compute names them: the probe is where a match for them is looked for.
SEARCHED = {
    "dram_active_pct": [
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        "dramc__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__cycles_active.avg.pct_of_peak_sustained_elapsed",
        "dramc__read_throughput.avg.pct_of_peak_sustained_elapsed",
    ]
}
ROLES: dict[str, list[str]] = {}
for _column, _readings in CANDIDATES.items():
    ROLES[_column] = [r.metrics[0] for r in _readings if len(r.metrics) == 1]
    if _column == "tensor_active_pct":  # DRAM after the tensor pipes, its rung on the ladder
        ROLES |= {c: SEARCHED[c] for c in NOT_SHIPPED}
# Raw counters to fall back on where a percentage is not offered (ratios computed afterwards).
RAW = [
    "sm__cycles_active.avg",
    "sm__cycles_elapsed.avg",
    "sm__warps_active.avg",
    "sm__warps_active.sum",
    "gpc__cycles_elapsed.max",
    "sys__cycles_elapsed.max",
    "gr__cycles_elapsed.max",
    "dram__bytes.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__pipe_tensor_cycles_active.avg",
    "sm__inst_executed_pipe_tensor.sum",
    "gpu__time_duration.sum",
]
RAW += [
    m for readings in CANDIDATES.values() for r in readings if len(r.metrics) > 1 for m in r.metrics if m not in RAW
]
INTERESTING = (
    "sm__cycles",
    "sm__warps",
    "sm__pipe",
    "sm__inst_executed_pipe",
    "dram",
    "gpu__dram",
    "gr__",
    "gpc__cycles",
    "sys__cycles",
    "gpu__time",
    "sm__throughput",
    "gpu__compute_memory",
    "fbpa",
    "pcie",
    "nvl",
    "lts__t_bytes",
    "sm__maximum_warps",
    "tpc__",
)
# Where none of ROLES' names is offered, base metrics matching these are tried with their sub-metrics.
AUTO = {
    "sm_active_pct": ("sm__cycles_active",),
    "sm_occupancy_pct": ("sm__warps_active",),
    "tensor_active_pct": ("sm__pipe_tensor", "sm__inst_executed_pipe_tensor", "sm__pipe_shared"),
    "dram_active_pct": (
        "dram__throughput",
        "gpu__dram_throughput",
        "dramc__",
        "dram__cycles_active",
        "fbpa__dram",
        "dram__bytes",
    ),
    "fp32_active_pct": ("sm__pipe_fma", "sm__inst_executed_pipe_fma"),
    "fp64_active_pct": ("sm__pipe_fp64", "sm__inst_executed_pipe_fp64"),
    "fp16_active_pct": ("sm__pipe_fp16", "sm__inst_executed_pipe_fp16"),
    "graphics_active_pct": ("gr__cycles_active", "gpu__time_active"),
}


def step_query(args) -> dict:
    res = {"errors": {}, "cuinit": cuda_init()}
    patch_host_struct(args.patch_host_struct)
    import cupti.cupti as C
    from cupti import pm_sampling as pm
    from cupti import profiler_host as ph

    try:
        res["supported_chips"] = ph.get_supported_chips()
    except Exception as e:  # noqa: BLE001
        res["errors"]["supported_chips"] = err(e)
    res["libcupti"] = libcupti_info()
    chip = None
    try:
        p = C.ProfilerInitializeParams()
        p.struct_size = C.PROFILER_INITIALIZE_PARAMS_STRUCT_SIZE
        C.profiler_initialize(p.ptr)
        q = C.DeviceGetChipNameParams()
        q.struct_size = C.DEVICE_GET_CHIP_NAME_PARAMS_STRUCT_SIZE
        q.device_index = 0
        C.device_get_chip_name(q.ptr)
        chip = q.p_chip_name
    except Exception as e:  # noqa: BLE001
        res["errors"]["chip_name"] = err(e)
    res["chip"] = chip
    log(f"  chip {chip}; libcupti {res['libcupti']}")
    metrics = list(args.metrics.split(",")) if args.metrics else None
    if chip and not args.quick:
        try:
            res["max_hw_metrics_per_pass"] = ph.get_max_num_hardware_metrics_per_pass(chip, ph.ProfilerType.PM_SAMPLING)
        except Exception as e:  # noqa: BLE001
            res["errors"]["max_hw"] = err(e)
        try:
            sets = ph.get_single_pass_sets(chip)
            res["single_pass_sets"] = {s: ph.get_metrics_in_single_pass_set(chip, s) for s in sets}
        except Exception as e:  # noqa: BLE001
            res["errors"]["single_pass_sets"] = err(e)
        base = {}
        try:
            host = ph.ProfilerHost(chip, ph.ProfilerType.PM_SAMPLING)
            host.initialize()
            for t in (C.MetricType.COUNTER, C.MetricType.RATIO, C.MetricType.THROUGHPUT):
                base[t.name] = host.get_base_metrics(t)
            res["base_metrics"] = base
            props, subs = {}, {}
            for tname, names in base.items():
                for b in [n for n in names if n.startswith(INTERESTING)][:300]:
                    if True:
                        try:
                            subs[b] = host.get_sub_metrics(b, C.MetricType[tname])
                        except Exception as e:  # noqa: BLE001
                            subs[b] = err(e)
                        try:
                            mp = host.get_metric_properties(b)
                            props[b] = {
                                "description": mp.description,
                                "hw_unit": mp.hw_unit,
                                "dim_unit": mp.dim_unit,
                                "scope": mp.metric_collection_scope.name,
                            }
                        except Exception as e:  # noqa: BLE001
                            props[b] = err(e)
            res["sub_metrics"], res["properties"] = subs, props
            host.deinitialize()
        except Exception as e:  # noqa: BLE001
            res["errors"]["base_metrics"] = err(e)
        auto = {}
        for role, prefixes in AUTO.items():
            for b, subs in (res.get("sub_metrics") or {}).items():
                if not b.startswith(prefixes) or not isinstance(subs, list):
                    continue
                full = [x if x.startswith(b) else b + ("" if x.startswith(".") else ".") + x for x in subs]
                best = [f for f in full if f.endswith("pct_of_peak_sustained_elapsed")] or [
                    f for f in full if f.endswith((".avg", ".sum"))
                ]
                auto.setdefault(role, []).extend(best[:2])
        res["auto_candidates"] = auto
        valid = {}
        tried = [m for ms in ROLES.values() for m in ms] + RAW + [m for ms in auto.values() for m in ms][:80]
        for name in dict.fromkeys(tried):
            try:
                host = ph.ProfilerHost(chip, ph.ProfilerType.PM_SAMPLING)
                host.initialize()
                image = host.create_config_image([name])
                valid[name] = ph.get_num_of_passes(image)
                host.deinitialize()
            except Exception as e:  # noqa: BLE001
                valid[name] = err(e)
        res["candidates"] = valid
        log("  candidates: " + ", ".join(f"{k}={v if isinstance(v, int) else 'no'}" for k, v in valid.items()))
        chosen, alternates = {}, {}
        for role, names in ROLES.items():
            ok = [n for n in dict.fromkeys(names + auto.get(role, [])) if valid.get(n) == 1]
            if ok:
                chosen[role] = ok[0]
                alternates[role] = ok[1:]

        def one_pass(names: list[str]) -> list[str]:
            """The longest prefix of names that one pass collects."""
            names = list(names)
            while names:
                try:
                    host = ph.ProfilerHost(chip, ph.ProfilerType.PM_SAMPLING)
                    host.initialize()
                    passes = ph.get_num_of_passes(host.create_config_image(names))
                    host.deinitialize()
                except Exception as e:  # noqa: BLE001
                    passes = err(e)
                if passes == 1:
                    return names
                log(f"  a set of {len(names)} needs {passes} passes; dropping {names[-1]}")
                names.pop()
            return names

        kept = one_pass([chosen[r] for r in chosen])
        res["set_a"] = {r: m for r, m in chosen.items() if m in kept}
        rest = [a for r in ROLES for a in alternates.get(r, [])] + [r for r in RAW if valid.get(r) == 1]
        res["set_b"] = one_pass(rest)
        metrics = metrics or list(res["set_a"].values())
    # A minimal collection in this process: enable, configure, start, decode, stop, disable.
    metrics = metrics or ["sm__cycles_active.avg", "sm__cycles_elapsed.avg"]
    col = pm.Collector(0)
    stage = "enable"
    try:
        col.enable()
        stage = "configure"
        res["trigger"] = configure(col, metrics)
        stage = "start"
        col.start()
        time.sleep(0.5)
        stage = "decode"
        samples, td = [], []
        decode(col, samples, td)
        res["mini_collect"] = {
            "metrics": metrics,
            "samples": len(samples),
            "first": samples[:3],
            "decode_ms": td[-1]["decode_ms"],
        }
        stage = "stop"
        col.stop()
        res["mini_collect"]["ok"] = True
    except Exception as e:  # noqa: BLE001
        res["mini_collect"] = {"metrics": metrics, "ok": False, "failed_at": stage, "error": err(e)}
    finally:
        try:
            col.disable()
        except Exception as e:  # noqa: BLE001
            res["errors"]["disable"] = err(e)
    log(f"  mini collect: {json.dumps(res['mini_collect'])[:400]}")
    return res
