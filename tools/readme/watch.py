"""The watch parts of the README and of the site: the examples watched on each GPU (a row per run, with the
peak each is against), the Llama-style and decode examples, each from its newest committed run directory
(tools/readme/tables.py puts them in place; the torchrun runs and the distributed scenarios are in
tools/readme/ranks.py)."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from gpubench.metrics import fmt_value, pct
from gpubench.read.summary import windows_of
from gpubench.record.rundir import load_run
from tools.readme.common import GPUS, finite


WATCH = [
    ("healthy", "healthy: bf16, batch 16 × 1024", "(defaults)"),
    ("fp32", "FP32, no tensor cores", "`--fp32`"),
    ("slow-loader", "slow data loader", "`--loader-sleep-ms 100`"),
    ("tiny-batch", "tiny batch: 1 × 128", "`--batch 1 --seq 128`"),
]


def _known(value, fmt: str | None = None) -> str:
    """A share of a peak (or a rate, in fmt), or – where the run cannot give it (no model count; no hardware
    count of what ran)."""
    return "–" if not finite(value) else fmt.format(value) if fmt else pct(value)


def _named(what: str, flags: str) -> str:
    """The row's name and the example's flags in one cell, so that the columns a reader came for come next."""
    return what if flags == "(defaults)" else f"{what} ({flags})"


def _watch_row(what: str, flags: str, row: dict) -> str:
    """A train row: what nvidia-smi said, the work done against its --dtype's peak, the tensor ceiling and the
    verdict first; the rate and the activity that explain them after."""
    cells = [
        _named(what, flags),
        fmt_value("gpu_util_pct", row.get("gpu_util_pct")),
        _known(row.get("mfu_pct")),
        _known(row.get("hfu_pct")),
        pct(row.get("tensor_ceiling_pct")),
        f"`{row['verdict_rules']}`",
        _known(row.get("steps_per_s"), "{:.1f}"),
        _known(row.get("tflops"), "{:.0f}"),
        fmt_value("sm_active_pct", row.get("sm_active_pct")),
        fmt_value("tensor_active_pct", row.get("tensor_active_pct")),
    ]
    return "| " + " | ".join(cells) + " |"


WATCH_HEAD = (
    "| {what} | GPU-Util | MFU | HFU | tensor ceiling | verdict | steps/s | TFLOP/s | SM active | tensor active |\n"
    "|" + " --- |" * 10
)


def _phase(run: Path, phase: str) -> dict:
    _, _, summary = load_run(run)
    return next(r for r in summary if r.get("phase") == phase)


def _against(runs: dict[str, Path], trains: dict[str, dict]) -> str:
    """Which peak each column of a watch table divides by, from the runs' own --dtype and ceiling dtype."""
    dtypes = {n: json.loads((run / "manifest.json").read_text()).get("dtype") or "bf16" for n, run in runs.items()}
    ceilings = sorted({r.get("tensor_ceiling_dtype") for r in trains.values() if r.get("tensor_ceiling_dtype")})
    kinds = sorted(set(dtypes.values()))
    if len(kinds) == 1 and ceilings in ([], kinds):
        return f"MFU, HFU and the tensor-pipe ceiling against the {kinds[0]} datasheet peak in every row"
    each = ", ".join(f"{d} for {', '.join(f'`{n}`' for n, k in dtypes.items() if k == d)}" for d in kinds)
    return (
        f"MFU and HFU against the datasheet peak of each run's `--dtype` ({each}), the tensor-pipe ceiling "
        f"against the {' and '.join(ceilings)} peak"
    )


def _newest(results: Path, name: str) -> Path | None:
    runs = sorted(results.glob(f"watch-{name}-*/manifest.json"))
    return runs[-1].parent if runs else None


def watch_table(results: Path) -> str:
    """The train phase of each watched GPT configuration, with the example's FLOP count and the watch's cost."""
    lines = WATCH_HEAD.format(what="configuration").split("\n")
    gpu, trains, runs = None, {}, {}
    for name, what, flags in WATCH:
        run = _newest(results, name)
        if run is None:
            continue
        gpu = run.name.removeprefix(f"watch-{name}-")
        runs[name], trains[name] = run, _phase(run, "train")
        lines.append(_watch_row(what, flags, trains[name]))
    lines = ([f"Each run's `train` phase; {_against(runs, trains)}:", ""] if runs else []) + lines
    log = (results / "logs" / f"watch-{gpu}.log").read_text() if gpu else ""
    flops = re.search(
        r"FLOPs per training step: (\S+) model FLOPs counted by gpubench.count_flops "
        r"\(PaLM's convention; (\S+) ran, recomputation included\), (\S+) analytic.*?: (\S+)",
        log,
    )
    cost = re.search(r"watch overhead: (\S+) of steps/s", log)
    without = re.search(r"steps/s without watching: \[(.*?)\]", log)
    watched = re.search(r"steps/s while watched: +\[(.*?)\]", log)
    call = re.search(r"gpubench.step\(\) with a CUDA event: median (\S+) us a call \(p10 (\S+), p90 (\S+)\)", log)
    if flops and cost and without and watched and call:
        runs = [float(v) for v in without.group(1).split(",") + watched.group(1).split(",")]
        spread = (max(runs) - min(runs)) / statistics.median(runs) * 100
        step_ms = 1e3 / statistics.median(float(v) for v in without.group(1).split(","))
        lines += [
            "",
            f"On an {GPUS.get(gpu, gpu)}: one healthy step counts {float(flops.group(1)):.3g} model FLOPs "
            f"({flops.group(4)} against the analytic {float(flops.group(3)):.4g}; {float(flops.group(2)):.4g} "
            f"ran, flash attention's recomputed scores included). Watched, the healthy loop ran "
            f"{cost.group(1).lstrip('+')} slower in steps/s (median of three runs with and three without, "
            f"interleaved; the six runs spread over {spread:.1f}%, so the difference is within their noise). "
            f"A `gpubench.step()` costs its caller {float(call.group(1)):.1f} µs (median; p10 "
            f"{float(call.group(2)):.1f}, p90 {float(call.group(3)):.1f}), "
            f"{float(call.group(1)) / 1e3 / step_ms * 100:.2f}% of a {step_ms:.0f} ms step "
            f"([log](results/logs/watch-{gpu}.log)).",
        ]
    return "\n".join(lines + _gpt_notes(trains)) + "\n"


def _gpt_notes(trains: dict) -> list[str]:
    """What the table says, in words, from its own rows."""
    out = []
    unmodelled = [n for n, r in trains.items() if not finite(r.get("mfu_pct")) and finite(r.get("hfu_pct"))]
    if unmodelled:
        out += [
            "",
            f"These {len(unmodelled)} runs were recorded before gpubench counted model FLOPs apart: their "
            "marks carry one count a step, of what ran, so they give HFU and no MFU; `bash "
            "tools/watch/examples.sh gpt` records them anew.",
        ]
    uncounted = [
        n
        for n, r in trains.items()
        if not finite(r.get("mfu_pct")) and not finite(r.get("hfu_pct")) and r.get("hfu_unknown")
    ]
    if uncounted:
        out += [
            "",
            f"{_count_of(uncounted, trains)} recorded before gpubench counted model FLOPs apart and before its "
            "hardware count followed the kernels: their marks carry one count a step, which took causal "
            "attention's whole T×T score matrix where the kernels run its lower half, so they give neither MFU "
            "nor HFU, and the tensor ceiling says how much could have run; `bash tools/watch/examples.sh gpt` "
            "records them anew.",
        ]
    busy = [n for n, r in trains.items() if (r.get("gpu_util_pct") or 0) >= 90]
    healthy, fp32 = trains.get("healthy"), trains.get("fp32")
    if healthy and fp32:
        if finite(healthy.get("hfu_pct")):
            work = f"runs {pct(healthy['hfu_pct'])} of the bf16 peak"
        elif finite(healthy.get("mfu_pct")):
            work = f"runs {pct(healthy['mfu_pct'])} of the bf16 peak by PaLM's count"
        else:
            work = f"at most {pct(healthy.get('tensor_ceiling_pct'))} of the bf16 peak ran on them"
        rules = fp32["verdict_rules"].split(", ")
        if "flops-above-ceiling" in rules:
            beside = (
                "its FLOPs ran beside them (`flops-above-ceiling`: watched with --dtype bf16, its FP32 work is "
                "above the tensor ceiling)"
            )
        else:
            beside = (
                f"its FP32 pipes were active {pct(fp32.get('fp32_active_pct'))} of the time: its matrix math ran "
                f"beside the tensor cores (`{rules[0]}`)"
            )
        out += [
            "",
            f"Read down the GPU-Util column: {WORDS.get(len(busy), len(busy))} of the "
            f"{WORDS.get(len(trains), len(trains))} loops read 90% or more. The ladder says how little that means: "
            f"the healthy bf16 loop keeps its tensor cores busy {pct(healthy['tensor_active_pct'])} of the time "
            f"and {work}; the FP32 loop reads {fmt_value('gpu_util_pct', fp32['gpu_util_pct'])} busy while its "
            f"tensor pipes could have delivered at most {pct(fp32.get('tensor_ceiling_pct'))} of the bf16 peak, "
            f"and {beside}; only where the host starves the GPU (the slow loader, the tiny batch) does GPU-Util "
            "fall with the work done.",
        ]
    return out


WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def _count_of(names: list[str], rows: dict) -> str:
    """'These 4 runs were' where every row of the table is named, else 'N of these M runs (a, b) were'."""
    if len(names) == len(rows):
        return f"These {len(names)} runs were"
    return f"{len(names)} of these {len(rows)} runs ({', '.join(f'`{n}`' for n in names)}) were"


DECODE = [
    ("decode-eager-b1", "eager, batch 1", "(defaults)"),
    ("decode-graph-b1", "compiled, one CUDA graph a token, batch 1", "`--compile --graph`"),
    ("decode-graph-b64", "compiled, CUDA graph, batch 64", "`--compile --graph --batch 64`"),
]


def watch_decode(results: Path) -> str:
    """The decode phase of each watched decode configuration: tokens/s and MBU against the memory floor."""
    lines = [
        "| configuration | GPU-Util | MBU | MFU | verdict | tokens/s | ms a step | memory floor | J a token | "
        "SM active | DRAM active |",
        "|" + " --- |" * 11,
    ]
    gpu = None
    for name, what, flags in DECODE:
        run = _newest(results, name)
        if run is None:
            continue
        gpu = run.name.removeprefix(f"watch-{name}-")
        r = _phase(run, "decode")
        floor = r["step_ms"] * r["mbu_pct"] / 100  # the step's bytes at the datasheet bandwidth
        cells = [
            _named(what, flags),
            fmt_value("gpu_util_pct", r.get("gpu_util_pct")),
            pct(r["mbu_pct"]),
            pct(r["mfu_pct"]),
            f"`{r['verdict_rules']}`",
            f"{r['tokens_per_s']:.0f}",
            f"{r['step_ms']:.2f}",
            f"{floor:.2f} ms",
            f"{r['j_per_token']:.3g}",
        ]
        cells += [fmt_value(c, r.get(c)) for c in ("sm_active_pct", "dram_active_pct")]
        lines.append("| " + " | ".join(cells) + " |")
    if gpu is None:
        return "(no decode watch committed yet: `bash tools/watch/examples.sh decode` on a GPU records them)\n"
    lines += [
        "",
        f"On an {GPUS.get(gpu, gpu)} ([log](results/logs/watch-decode-{gpu}.log)); the memory floor is "
        "the step's bytes (the weights once, the cache written so far, what the step writes) at the datasheet "
        "bandwidth, the time no kernel can beat.",
    ]
    return "\n".join(lines) + "\n"


LLAMA = [
    ("llama-eager", "eager, 4 × 2048", "(defaults)"),
    ("llama-compiled", "torch.compile", "`--compile`"),
    ("llama-8k", "8k context, 1 × 8192", "`--seq 8192 --batch 1`"),
    ("llama-checkpointed", "activation checkpointing", "`--checkpoint`"),
    ("llama-moe", "mixture of experts, top-2 of 8", "`--experts 8 --top 2 --layers 8`"),
    ("two-processes", "two processes on one GPU", "two jobs of `--layers 8`"),
]


def watch_llama(results: Path) -> str:
    """The train phase of each watched Llama-style configuration: MFU beside HFU and the tensor ceiling."""
    lines = WATCH_HEAD.format(what="job").split("\n")
    found, trains = {}, {}
    for name, what, flags in LLAMA:
        run = _newest(results, name)
        if run is None:
            continue
        found[name] = run
        train = trains[name] = _phase(run, "train")
        if train.get("streams", 1) and int(train.get("streams") or 1) > 1:
            rates = re.findall(r": (\S+)/s", train["stream_rates"])
            what += f" ({' and '.join(rates)} steps/s a process)"
        lines.append(_watch_row(what, flags, train))
    lines = ([f"Each run's `train` phase; {_against(found, trains)}:", ""] if found else []) + lines
    if "llama-compiled" in found:
        warm, train = _phase(found["llama-compiled"], "warmup"), _phase(found["llama-compiled"], "train")
        gpu = found["llama-compiled"].name.removeprefix("watch-llama-compiled-")
        if warm["verdict_rules"] == "too-short":
            lines += [
                "",
                f"The compiled loop's `warmup` ran {warm['steps_reported']} steps in its last "
                f"{sum(b - a for a, b in windows_of(warm['windows'])):.2f} s, after "
                f"{warm['t_end'] - warm['t_start']:.0f} s of compiling: too short to measure, since no sample "
                f"row covers only that window (the counters of the one inside it still read the compile), "
                f"against MFU {pct(train['mfu_pct'])} at {train['steps_per_s']:.1f} steps/s in `train`, on an "
                f"{GPUS.get(gpu, gpu)} ([log](results/logs/watch-{gpu}.log)).",
            ]
        else:
            lines += [
                "",
                f"Stamped on the GPU, the compiled loop's `warmup` reads MFU {pct(warm['mfu_pct'])} at "
                f"{warm['steps_per_s']:.1f} steps/s against {pct(train['mfu_pct'])} at "
                f"{train['steps_per_s']:.1f} in `train`, on an {GPUS.get(gpu, gpu)} "
                f"([log](results/logs/watch-{gpu}.log)).",
            ]
    unknown = [n for n, r in trains.items() if not finite(r.get("hfu_pct")) and r.get("hfu_unknown")]
    if unknown:
        which = (
            f"these {len(unknown)} runs"
            if len(unknown) == len(trains)
            else f"{len(unknown)} of these {len(trains)} runs ({', '.join(unknown)})"
        )
        lines += [
            "",
            f"HFU is not known for {which}: their "
            "marks carry the hardware count of the day they were recorded, which counted the whole T×T score "
            "matrix of causal attention where the kernels run its lower half (their manifests have no "
            "`flop_count_version`), so it is not shown nor held to the tensor ceiling; their model count, by "
            "PaLM's convention, stands. `bash tools/watch/examples.sh llama` records them anew.",
        ]
    above = [n for n, r in trains.items() if "flops-above-ceiling" in r["verdict_rules"]]
    if above:
        lines += [
            "",
            f"HFU is above the tensor ceiling in {len(above)} of these {len(trains)} runs "
            f"({', '.join(above)}): the FLOPs their steps reported are more than the tensor pipes could deliver "
            "in the time they were active, and their verdicts say so (`flops-above-ceiling`).",
        ]
    busy = [r for n, r in trains.items() if (r.get("gpu_util_pct") or 0) >= 90]
    if busy:
        lines += [
            "",
            f"Of these runs, GPU-Util reads {_span_pct([r['gpu_util_pct'] for r in busy])} for "
            f"{len(busy)}, which run from {_span_pct([r['mfu_pct'] for r in busy], ' to ')} of the bf16 "
            "peak by PaLM's count. "
            + " ".join(
                f"`{n}` leaves its GPU idle {100 - r['gpu_util_mean_pct']:.0f}% of the time."
                for n, r in trains.items()
                if r.get("gpu_util_mean_pct", 100) < 90
            )
            + " Two processes sharing a GPU are two streams: each keeps its own rate, and their work adds up "
            "over the window they share.",
        ]
    return "\n".join(lines) + "\n"


def _span_pct(values, sep: str = "–") -> str:
    lo, hi = pct(min(values)).rstrip("%"), pct(max(values)).rstrip("%")
    return f"{lo}%" if lo == hi else f"{lo}%{sep}{hi}%"
