"""Write the numbers of the README and the documentation site from the committed results, so that neither
can disagree with them.

Each generated part of README.md and of the pages under docs/ sits between `<!-- gpubench:NAME -->` and
`<!-- /gpubench:NAME -->`; this script rewrites those parts from results/ (the newest reference run of each
GPU, the kernel bench CSVs, the watch runs, the regression gate's checks). A part's links into the repository
are written relative to its file (`results/...` in the README, `../results/...` in docs/). `--check` exits 1
if a file differs from what the results say (a CPU test runs it).

    python -m tools.readme.tables          # rewrite README.md and docs/*.md
    python -m tools.readme.tables --check  # compare only
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import sys
from pathlib import Path

from gpubench.gate.judgement import RULES
from gpubench.metrics import BY_COLUMN, LADDER, fmt_value, pct
from gpubench.read.summary import windows_of
from gpubench.record.rundir import load_run
from gpubench.show.figures.common import work_fraction
from tools.readme.notes import calibration_notes, decode_notes, kernels_notes, ladder_notes
from tools.readme.tuning import ideas_table, second_ideas_table

ROOT = Path(__file__).resolve().parents[2]

MARK = re.compile(r"(<!-- gpubench:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /gpubench:(?P=name) -->)", re.S)
GPUS = {"h100-80gb-hbm3": "H100", "h200": "H200"}
REPO_LINK = re.compile(r"(\]\()(?=(?:results|examples|tools|research|tests)/)")  # a link into the repository


def reference_runs(results: Path) -> dict[str, Path]:
    """The newest suite run of each GPU: results/<slug>-<date>-<time>/ with a manifest of kind run."""
    runs: dict[str, Path] = {}
    for slug in GPUS:
        found = sorted(p.parent for p in results.glob(f"{slug}-2*/manifest.json"))
        if found:
            runs[slug] = found[-1]
    return runs


def _pct(v) -> str:
    return f"{v:.1f}%" if v == v else "n/a"


def ladder_table(results: Path) -> str:
    runs = {s: load_run(p) for s, p in reference_runs(results).items()}
    if not runs:
        return "(no reference run committed yet)\n"
    cols = list(LADDER)
    head = ["scenario"] + [BY_COLUMN[c].header for c in cols] + ["work done (ground truth)"]
    by = {s: {r["scenario"]: r for r in summary} for s, (_, _, summary) in runs.items()}
    names = list(dict.fromkeys(n for s in by for n in by[s]))
    lines = [f"Each cell: {' / '.join(GPUS[s] for s in runs)}.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in names:
        rows = [by[s].get(name) for s in runs]
        cells = [f"`{name}`"] + [" / ".join(fmt_value(c, (r or {}).get(c), "–") for r in rows) for c in cols]
        cells.append(" / ".join(_work(r) for r in rows))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _work(row) -> str:
    if not row or row.get("family") == "idle":
        return "–"
    label, v = work_fraction(row)
    return f"{label} {pct(v)}"


def peaks_table(results: Path) -> str:
    """The peaks measured at the start of each reference run; the read peak's columns where runs have one."""
    runs = {slug: load_run(path) for slug, path in reference_runs(results).items()}
    reads = any(((m.get("peaks") or {}).get("measured") or {}).get("dram_read") for m, _, _ in runs.values())
    head = ["GPU", "copy peak, TB/s"] + (["read peak, TB/s"] if reads else []) + [
        "bf16 matmul peak, TFLOP/s (SM clock, power)", "`gemm-torch` against it", "`copy-torch` against it"] + (
        ["`read-torch` against it"] if reads else [])
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for slug, (manifest, _, summary) in runs.items():
        by = {r["scenario"]: r for r in summary}
        meas = (manifest.get("peaks") or {}).get("measured") or {}
        cond = ((manifest.get("peaks") or {}).get("conditions") or {}).get("bf16_tensor") or {}
        nan = float("nan")
        cells = [GPUS[slug], f"{meas.get('dram', nan) / 1e12:.2f}"]
        cells += [f"{meas.get('dram_read', nan) / 1e12:.2f}"] if reads else []
        cells += [f"{meas.get('bf16_tensor', nan) / 1e12:.0f} ({cond.get('sm_clock_mhz', 0):.0f} MHz, "
                  f"{cond.get('power_w_energy', 0):.0f} W)",
                  _pct(by.get('gemm-torch', {}).get('mfu_measured_pct', nan)),
                  _pct(by.get('copy-torch', {}).get('mbu_measured_pct', nan))]
        cells += [_pct(by.get('read-torch', {}).get('mbu_read_pct', nan))] if reads else []
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


TARGETS = [  # (group, name, reference, what, target)
    ("softmax-8192", "triton-fused", "torch", "fused softmax vs torch.softmax, 8192²", 1.6),
    ("softmax-8192", "triton-fused", "torch-naive", "fused softmax vs the naive torch sequence, 8192²", 5.0),
    ("softmax-8192", "triton-fused", "copy-same-bytes", "fused softmax vs a copy of the same bytes, 8192²", 0.95),
    ("softmax-8192", "copy-same-bytes", "torch", "(ceiling) a copy of those bytes vs torch.softmax, 8192²", None),
    ("softmax-4096", "triton-fused", "torch", "fused softmax vs torch.softmax, 4096²", 1.3),
    ("softmax-4096", "copy-same-bytes", "torch", "(ceiling) a copy of those bytes vs torch.softmax, 4096²", None),
    ("softmax-16384", "triton-fused", "torch", "fused softmax vs torch.softmax, 16384²", 1.3),
    ("softmax-16384", "copy-same-bytes", "torch", "(ceiling) a copy of those bytes vs torch.softmax, 16384²", None),
    ("gemm-bf16-8192", "triton", "torch", "Triton GEMM vs torch.matmul, bf16 8192³", 0.95),
    ("copy-1GiB", "triton", "torch", "Triton copy vs torch `copy_`, 1 GiB", 1.0),
    ("copy-1GiB", "cupy", "torch", "CuPy copy vs torch `copy_`, 1 GiB", 0.97),
    ("read-1GiB", "triton", "torch", "Triton read (a sum) vs torch.sum, 1 GiB", 0.98),
    ("read-1GiB", "cupy", "torch", "CuPy read (a sum) vs torch.sum, 1 GiB", 0.98),
    ("read-1GiB", "torch", "copy-same-bytes", "(ceilings) torch.sum vs a copy of as many bytes: read over copy", None),
    ("decode-b1", "triton", "read-same-bytes", "Triton decode vs a read of the same bytes (the read ceiling), batch 1",
     0.95),
    ("decode-b1", "triton", "copy-same-bytes", "Triton decode vs a copy of the same bytes, batch 1", 0.92),
    ("decode-b1", "torch", "read-same-bytes", "(for reference) torch F.linear vs that read, batch 1", None),
    ("decode-b1", "torch", "copy-same-bytes", "(for reference) torch F.linear vs that copy, batch 1", None),
    *((f"decode-b{b}", "triton", "torch", f"Triton decode vs torch F.linear, batch {b}", 1.0)
      for b in (1, 2, 4, 8, 16)),
    *((f"decode-b{b}", "triton", "torch", f"Triton decode vs torch F.linear, batch {b}", 0.97)
      for b in (64, 256, 512)),
    ("decode-b1", "cupy", "torch", "CuPy decode (CUDA cores) vs torch F.linear, batch 1", None),
]


def bench_rows(path: Path) -> dict:
    with open(path, newline="") as f:
        return {(r["group"], r["name"]): r for r in csv.DictReader(f)}


def _paired(row: dict) -> tuple[float, float, float] | None:
    """A row's speed over its CSV reference, paired window by window (median, p10, p90), or None."""
    try:
        got = tuple(float(row[k]) for k in ("speed_vs_reference", "speed_p10", "speed_p90"))
    except (KeyError, TypeError, ValueError):
        return None
    return got if all(v > 0 for v in got) else None


def ratio(rows: dict, group: str, name: str, reference: str) -> tuple[float, float | None, float | None] | None:
    """name's speed over reference's, with its p10 and p90, from the windows in which both ran in turn (paired,
    so the clock's drift cancels). Against the CSV's own reference, the paired ratios as measured; against
    another row of the group, the ratio of the two paired medians, and the widest p10-p90 the two allow;
    without paired columns, the ratio of medians and no interval."""
    a, b = rows.get((group, name)), rows.get((group, reference))
    if not a or not b:
        return None
    pa, pb = _paired(a), _paired(b)
    if pa and a.get("reference") == reference:
        return pa
    if pa and pb and a.get("reference") == b.get("reference"):
        return pa[0] / pb[0], pa[1] / pb[2], pa[2] / pb[1]
    return float(b["median_ms"]) / float(a["median_ms"]), None, None


def _mark(got, target) -> str:
    """Met where even p10 reaches the target, missed where even p90 falls short, within noise between."""
    if not target or not got:
        return ""
    lo, hi = (got[1], got[2]) if got[1] is not None else (got[0], got[0])
    return " ✓" if lo >= target else (" ✗" if hi < target else " ~")


def kernels_table(results: Path) -> str:
    benches = {s: sorted(results.glob(f"bench-kernels-{s}-*.csv")) for s in GPUS}
    benches = {s: bench_rows(p[-1]) for s, p in benches.items() if p}
    head = ["ratio (speed, higher is faster)", "target"] + [f"{GPUS[s]} (p10–p90)" for s in benches]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for group, name, ref, what, target in TARGETS:
        if not any(ratio(rows, group, name, ref) for rows in benches.values()):
            continue  # not measured on any GPU yet: no row rather than a row of n/a
        cells = [what, f"≥ {target:g}x" if target else "–"]
        for rows in benches.values():
            got = ratio(rows, group, name, ref)
            spread = f" ({got[1]:.3f}–{got[2]:.3f})" if got and got[1] is not None else ""
            cells.append(f"{got[0]:.3f}x{spread}{_mark(got, target)}" if got else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


WATCH = [("healthy", "healthy: bf16, batch 16 × 1024", "(defaults)"), ("fp32", "FP32, no tensor cores", "`--fp32`"),
         ("slow-loader", "slow data loader", "`--loader-sleep-ms 100`"),
         ("tiny-batch", "tiny batch: 1 × 128", "`--batch 1 --seq 128`")]


def _num(value, fmt: str) -> str:
    return fmt.format(value) if isinstance(value, (int, float)) and value == value else "n/a"


def _known(value, fmt: str | None = None) -> str:
    """A share of a peak (or a rate, in fmt), or – where the run cannot give it (no model count; no hardware
    count of what ran)."""
    return "–" if not _finite(value) else fmt.format(value) if fmt else pct(value)


def _watch_row(what: str, flags: str, row: dict) -> str:
    """A train row: the ladder, the rate, the work against its --dtype's peak and the tensor ceiling."""
    cols = ["gpu_util_pct", "sm_active_pct", "tensor_active_pct"]
    cells = [what, flags] + [fmt_value(c, row.get(c)) for c in cols] + [
        _num(row.get("steps_per_s"), "{:.1f}"), _known(row.get("tflops"), "{:.0f}"), _known(row.get("mfu_pct")),
        _known(row.get("hfu_pct")), pct(row.get("tensor_ceiling_pct")), f"`{row['verdict_rules']}`"]
    return "| " + " | ".join(cells) + " |"


WATCH_HEAD = ("| {what} | example flags | GPU-Util | SM active | tensor active | steps/s | TFLOP/s | MFU | HFU "
              "| tensor ceiling | verdict |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")


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
    return (f"MFU and HFU against the datasheet peak of each run's `--dtype` ({each}), the tensor-pipe ceiling "
            f"against the {' and '.join(ceilings)} peak")


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
    flops = re.search(r"FLOPs per training step: (\S+) model FLOPs counted by gpubench.count_flops "
                      r"\(PaLM's convention; (\S+) ran, recomputation included\), (\S+) analytic.*?: (\S+)", log)
    cost = re.search(r"watch overhead: (\S+) of steps/s", log)
    without = re.search(r"steps/s without watching: \[(.*?)\]", log)
    watched = re.search(r"steps/s while watched: +\[(.*?)\]", log)
    call = re.search(r"gpubench.step\(\) with a CUDA event: median (\S+) us a call \(p10 (\S+), p90 (\S+)\)", log)
    if flops and cost and without and watched and call:
        runs = [float(v) for v in without.group(1).split(",") + watched.group(1).split(",")]
        spread = (max(runs) - min(runs)) / statistics.median(runs) * 100
        step_ms = 1e3 / statistics.median(float(v) for v in without.group(1).split(","))
        lines += ["", f"On an {GPUS.get(gpu, gpu)}: one healthy step counts {float(flops.group(1)):.3g} model FLOPs "
                  f"({flops.group(4)} against the analytic {float(flops.group(3)):.4g}; {float(flops.group(2)):.4g} "
                  f"ran, flash attention's recomputed scores included). Watched, the healthy loop ran "
                  f"{cost.group(1).lstrip('+')} slower in steps/s (median of three runs with and three without, "
                  f"interleaved; the six runs spread over {spread:.1f}%, so the difference is within their noise). "
                  f"A `gpubench.step()` costs its caller {float(call.group(1)):.1f} µs (median; p10 "
                  f"{float(call.group(2)):.1f}, p90 {float(call.group(3)):.1f}), "
                  f"{float(call.group(1)) / 1e3 / step_ms * 100:.2f}% of a {step_ms:.0f} ms step "
                  f"([log](results/logs/watch-{gpu}.log))."]
    return "\n".join(lines + _gpt_notes(trains)) + "\n"


def _gpt_notes(trains: dict) -> list[str]:
    """What the table says, in words, from its own rows."""
    out = []
    unmodelled = [n for n, r in trains.items() if not _finite(r.get("mfu_pct")) and _finite(r.get("hfu_pct"))]
    if unmodelled:
        out += ["", f"These {len(unmodelled)} runs were recorded before gpubench counted model FLOPs apart: their "
                "marks carry one count a step, of what ran, so they give HFU and no MFU; `bash "
                "tools/watch/examples.sh gpt` records them anew."]
    uncounted = [n for n, r in trains.items() if not _finite(r.get("mfu_pct")) and not _finite(r.get("hfu_pct"))
                 and r.get("hfu_unknown")]
    if uncounted:
        out += ["", f"{_count_of(uncounted, trains)} recorded before gpubench counted model FLOPs apart and before its "
                "hardware count followed the kernels: their marks carry one count a step, which took causal "
                "attention's whole T×T score matrix where the kernels run its lower half, so they give neither MFU "
                "nor HFU, and the tensor ceiling says how much could have run; `bash tools/watch/examples.sh gpt` "
                "records them anew."]
    busy = [n for n, r in trains.items() if (r.get("gpu_util_pct") or 0) >= 90]
    healthy, fp32 = trains.get("healthy"), trains.get("fp32")
    if healthy and fp32:
        if _finite(healthy.get("hfu_pct")):
            work = f"runs {pct(healthy['hfu_pct'])} of the bf16 peak"
        elif _finite(healthy.get("mfu_pct")):
            work = f"runs {pct(healthy['mfu_pct'])} of the bf16 peak by PaLM's count"
        else:
            work = f"at most {pct(healthy.get('tensor_ceiling_pct'))} of the bf16 peak ran on them"
        rules = fp32["verdict_rules"].split(", ")
        if "flops-above-ceiling" in rules:
            beside = ("its FLOPs ran beside them (`flops-above-ceiling`: watched with --dtype bf16, its FP32 work is "
                      "above the tensor ceiling)")
        else:
            beside = (f"its FP32 pipes were active {pct(fp32.get('fp32_active_pct'))} of the time: its matrix math ran "
                      f"beside the tensor cores (`{rules[0]}`)")
        out += ["", f"Read down the GPU-Util column: {WORDS.get(len(busy), len(busy))} of the "
                f"{WORDS.get(len(trains), len(trains))} loops read 90% or more. The ladder says how little that means: "
                f"the healthy bf16 loop keeps its tensor cores busy {pct(healthy['tensor_active_pct'])} of the time "
                f"and {work}; the FP32 loop reads {fmt_value('gpu_util_pct', fp32['gpu_util_pct'])} busy while its "
                f"tensor pipes could have delivered at most {pct(fp32.get('tensor_ceiling_pct'))} of the bf16 peak, "
                f"and {beside}; only where the host starves the GPU (the slow loader, the tiny batch) does GPU-Util "
                "fall with the work done."]
    return out


WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def _count_of(names: list[str], rows: dict) -> str:
    """'These 4 runs were' where every row of the table is named, else 'N of these M runs (a, b) were'."""
    if len(names) == len(rows):
        return f"These {len(names)} runs were"
    return f"{len(names)} of these {len(rows)} runs ({', '.join(f'`{n}`' for n in names)}) were"


DECODE = [("decode-eager-b1", "eager, batch 1", "(defaults)"),
          ("decode-graph-b1", "compiled, one CUDA graph a token, batch 1", "`--compile --graph`"),
          ("decode-graph-b64", "compiled, CUDA graph, batch 64", "`--compile --graph --batch 64`")]


def watch_decode(results: Path) -> str:
    """The decode phase of each watched decode configuration: tokens/s and MBU against the memory floor."""
    lines = ["| configuration | example flags | GPU-Util | SM active | DRAM active | ms a step | memory floor | "
             "tokens/s | MBU | MFU | J a token | verdict |", "|" + " --- |" * 12]
    gpu = None
    for name, what, flags in DECODE:
        run = _newest(results, name)
        if run is None:
            continue
        gpu = run.name.removeprefix(f"watch-{name}-")
        r = _phase(run, "decode")
        floor = r["step_ms"] * r["mbu_pct"] / 100  # the step's bytes at the datasheet bandwidth
        cells = [what, flags] + [fmt_value(c, r.get(c)) for c in ("gpu_util_pct", "sm_active_pct", "dram_active_pct")]
        cells += [f"{r['step_ms']:.2f}", f"{floor:.2f} ms", f"{r['tokens_per_s']:.0f}", pct(r["mbu_pct"]),
                  pct(r["mfu_pct"]), f"{r['j_per_token']:.3g}", f"`{r['verdict_rules']}`"]
        lines.append("| " + " | ".join(cells) + " |")
    if gpu is None:
        return "(no decode watch committed yet: `bash tools/watch/examples.sh decode` on a GPU records them)\n"
    lines += ["", f"On an {GPUS.get(gpu, gpu)} ([log](results/logs/watch-decode-{gpu}.log)); the memory floor is "
              "the step's bytes (the weights once, the cache written so far, what the step writes) at the datasheet "
              "bandwidth, the time no kernel can beat."]
    return "\n".join(lines) + "\n"


def watch_ranks(results: Path) -> str:
    """The watched two-GPU runs: the straggler named in the user's own job, and the GPUs a job used."""
    def train(name):
        run = _newest(results, name)
        if run is None:
            return None, []
        manifest, _, summary = load_run(run)
        return run, [r for r in summary if r.get("phase") == "train"]

    out = []
    run, rows = train("ddp-slow-rank")
    if rows:
        slow = next(r for r in rows if "straggler" in r["verdict_rules"])
        wait = next(r for r in rows if "waits-on-rank" in r["verdict_rules"])
        out.append(f"- A data-parallel job with one rank's loader slowed ([run]({run.relative_to(results.parent)})): "
                   f"both ranks stepped at {wait['steps_per_s']:.2f} steps/s; GPU {wait['gpu']} read "
                   f"{pct(wait['gpu_util_mean_pct'])} busy and its verdict says it waits on rank "
                   f"{slow['rank']} (`{wait['verdict_rules']}`), GPU {slow['gpu']} read "
                   f"{pct(slow['gpu_util_mean_pct'])} and is named the straggler (`{slow['verdict_rules']}`).")
    run, rows = train("ddp-even")
    if rows:
        out.append(f"- The same job with even ranks ([run]({run.relative_to(results.parent)})): "
                   + ", ".join(f"GPU {r['gpu']} {pct(r['gpu_util_mean_pct'])} busy (`{r['verdict_rules']}`)"
                               for r in rows) + "; nobody is named.")
    run, rows = train("one-gpu")
    run_all, rows_all = train("one-gpu-all-gpus")
    if rows and rows_all:
        manifest = json.loads((run / "manifest.json").read_text())
        idle = [g["nvml_index"] for g in manifest.get("gpus_idle") or []]
        out.append(f"- A one-GPU job on the two-GPU machine, no `CUDA_VISIBLE_DEVICES` "
                   f"([run]({run.relative_to(results.parent)})): one row, GPU {rows[0]['gpu']}, and GPU "
                   f"{', '.join(map(str, idle))} listed as idle; with `--all-gpus` "
                   f"([run]({run_all.relative_to(results.parent)})) the idle GPU keeps its row with nothing "
                   f"credited to it (`{next(r['verdict_rules'] for r in rows_all if r['gpu'] in idle)}`).")
    run, rows = train("visible1")
    if rows:
        out.append(f"- `CUDA_VISIBLE_DEVICES=1 gpubench watch -- ...` ([run]({run.relative_to(results.parent)})): "
                   f"the job's row is NVML GPU {rows[0]['gpu']}.")
    return ("\n".join(out) + "\n") if out else "(no watched multi-GPU run committed yet)\n"


LLAMA = [("llama-eager", "eager, 4 × 2048", "(defaults)"), ("llama-compiled", "torch.compile", "`--compile`"),
         ("llama-8k", "8k context, 1 × 8192", "`--seq 8192 --batch 1`"),
         ("llama-checkpointed", "activation checkpointing", "`--checkpoint`"),
         ("llama-moe", "mixture of experts, top-2 of 8", "`--experts 8 --top 2 --layers 8`"),
         ("two-processes", "two processes on one GPU", "two jobs of `--layers 8`")]


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
            lines += ["", f"The compiled loop's `warmup` ran {warm['steps_reported']} steps in its last "
                      f"{sum(b - a for a, b in windows_of(warm['windows'])):.2f} s, after "
                      f"{warm['t_end'] - warm['t_start']:.0f} s of compiling: too short to measure, since no sample "
                      f"row covers only that window (the counters of the one inside it still read the compile), "
                      f"against MFU {pct(train['mfu_pct'])} at {train['steps_per_s']:.1f} steps/s in `train`, on an "
                      f"{GPUS.get(gpu, gpu)} ([log](results/logs/watch-{gpu}.log))."]
        else:
            lines += ["", f"Stamped on the GPU, the compiled loop's `warmup` reads MFU {pct(warm['mfu_pct'])} at "
                      f"{warm['steps_per_s']:.1f} steps/s against {pct(train['mfu_pct'])} at "
                      f"{train['steps_per_s']:.1f} in `train`, on an {GPUS.get(gpu, gpu)} "
                      f"([log](results/logs/watch-{gpu}.log))."]
    unknown = [n for n, r in trains.items() if not _finite(r.get("hfu_pct")) and r.get("hfu_unknown")]
    if unknown:
        which = (f"these {len(unknown)} runs" if len(unknown) == len(trains) else
                 f"{len(unknown)} of these {len(trains)} runs ({', '.join(unknown)})")
        lines += ["", f"HFU is not known for {which}: their "
                  "marks carry the hardware count of the day they were recorded, which counted the whole T×T score "
                  "matrix of causal attention where the kernels run its lower half (their manifests have no "
                  "`flop_count_version`), so it is not shown nor held to the tensor ceiling; their model count, by "
                  "PaLM's convention, stands. `bash tools/watch/examples.sh llama` records them anew."]
    above = [n for n, r in trains.items() if "flops-above-ceiling" in r["verdict_rules"]]
    if above:
        lines += ["", f"HFU is above the tensor ceiling in {len(above)} of these {len(trains)} runs "
                  f"({', '.join(above)}): the FLOPs their steps reported are more than the tensor pipes could deliver "
                  "in the time they were active, and their verdicts say so (`flops-above-ceiling`)."]
    busy = [r for n, r in trains.items() if (r.get("gpu_util_pct") or 0) >= 90]
    if busy:
        lines += ["", f"Of these runs, GPU-Util reads {_span_pct([r['gpu_util_pct'] for r in busy])} for "
                  f"{len(busy)}, which run from {_span_pct([r['mfu_pct'] for r in busy], ' to ')} of the bf16 "
                  "peak by PaLM's count. " + " ".join(
                      f"`{n}` leaves its GPU idle {100 - r['gpu_util_mean_pct']:.0f}% of the time."
                      for n, r in trains.items() if r.get("gpu_util_mean_pct", 100) < 90)
                  + " Two processes sharing a GPU are two streams: each keeps its own rate, and their work adds up "
                  "over the window they share."]
    return "\n".join(lines) + "\n"


def _span_pct(values, sep: str = "–") -> str:
    lo, hi = pct(min(values)).rstrip("%"), pct(max(values)).rstrip("%")
    return f"{lo}%" if lo == hi else f"{lo}%{sep}{hi}%"


def dist_list(results: Path) -> str:
    runs = sorted(results.glob("h200-x2-*/manifest.json"))
    if not runs:
        return "(no two-GPU run committed yet)\n"
    run = runs[-1].parent
    _, _, summary = load_run(run)
    by = {(r["scenario"], r["rank"]): r for r in summary}
    a, b, s0, s1 = (by[k] for k in [("allreduce-1gib", 0), ("allreduce-8kib", 0), ("straggler", 0), ("straggler", 1)])
    h0, h1 = by[("straggler-hang", 0)], by[("straggler-hang", 1)]
    u = lambda r, c="gpu_util_pct": fmt_value(c, r.get(c))  # noqa: E731
    w = lambda r: f"{r['power_w_energy']:.0f} W"  # noqa: E731
    return "\n".join([
        f"On two H200s ([`{run.relative_to(results.parent)}`]({run.relative_to(results.parent)}), NVML: "
        f"{a['nvlink_links']:.0f} active NVLinks, {a['nvlink_gbps']:.0f} GB/s per direction in all):", "",
        f"- `allreduce-1gib`: {a['kernel_ms'] * 1e3:.0f} µs a call, busbw {a['busbw_gbps']:.0f} GB/s, "
        f"{pct(a['nvlink_pct'])} of the NVLinks' rate; GPU-Util {u(a)} while SM active read {u(a, 'sm_active_pct')}.",
        f"- `allreduce-8kib`: {b['kernel_ms'] * 1e3:.1f} µs a call, busbw {b['busbw_gbps']:.2f} GB/s; GPU-Util "
        f"{u(b)} on rank 0 and {u(by[('allreduce-8kib', 1)])} on rank 1.",
        f"- `straggler`: rank 1 reached the all-reduce {s1['arrival_delay_ms']:.1f} ms after rank 0 (median), "
        f"and was named; rank 0 waited {s0['wait_ms']:.1f} ms a step and read {u(s0)} GPU-Util, "
        f"{u(s0, 'sm_active_pct')} SM active and {w(s0)}, while the straggler's own GPU read {u(s1)}. Both "
        f"ranks' steps took {s0['kernel_ms']:.2f} and {s1['kernel_ms']:.2f} ms: the step time cannot name it.",
        f"- `straggler-hang`: the waiting GPU read {u(h0)} GPU-Util at {w(h0)}, against {w(h1)} on the "
        f"sleeping rank's idle GPU: the hang signature.", ""])


def _change(c: dict) -> str:
    return f"{c['pct']:+.1f}% [{c['lo']:+.1f}, {c['hi']:+.1f}]" if c else "n/a"


def _fixed(x, digits=2) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _verdict(v: dict | None) -> str:
    return "–" if not v or not v.get("word") else f"`{v['word']}` {(v.get('median') or {}).get('pct', 0):+.1f}%"


def gate_table(name: str, slug: str, summary: dict) -> str:
    """What tools/gate/baseline.sh showed on one GPU since the floor of several processes (summary version 2):
    a sentence, then one row per benchmark over the unchanged runs and the slowdowns."""
    n, checks = summary["numbers"], summary["checks"]
    passed = sum(c["ok"] is True for c in checks)
    told = sum(c["ok"] is not None for c in checks)  # N/A: a probe not run, a GPU the steps do not name
    r, base = n["reruns"], n["baseline"]
    part = "; ".join(f"`{v['word']}` for `{k}` ({(v.get('why') or '').split(':')[0]})" for k, v in n["part"].items())
    took = (n.get("time") or {}).get("session_s")
    lines = [f"On the {name} ([log](results/logs/bench-baseline-{slug}.log), "
             f"[checks](results/logs/bench-gate-{slug}.json)), {passed} of {told} checks passed: a baseline "
             f"of {base['processes']} processes from one command; {r['runs']} unchanged runs read `same` {r['same']} "
             f"and `unsure` {r['unsure']} times (`slower` {r['slower']}, `faster` {r['faster']}) and {r['failed']} "
             f"of them failed" + (f"; 30% more work in 40% of the calls read {part}" if part else "")
             + (f"; an unchanged run took {took:.0f} s, most of it its process's start." if took else "."), "",
             "| benchmark | median (µs) | timed | processes moved it (sd, %) | floor (%) | false alarms at the floor "
             "| unchanged runs: same / unsure / slower / faster | 5% more work | 10% more work |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for bench, row in n["benchmarks"].items():
        w = row["words"]
        fa = "–" if row["false_alarm_at_floor"] is None else f"{row['false_alarm_at_floor']:.0e}"
        lines.append(f"| `{bench}` | {row['median_us']:.3g} | {row['timed']} | {_fixed(row['spread_pct'])} | "
                     f"{_fixed(row['floor_pct'])} | {fa} | {w['same']} / {w['unsure']} / {w['slower']} / "
                     f"{w['faster']} | {_verdict(row['more_5'])} | {_verdict(row['more_10'])} |")
    return "\n".join(lines) + "\n"


def gate_sentence(name: str, slug: str, summary: dict) -> str:
    """What tools/gate/baseline.sh showed on one GPU, from its checks (results/logs/bench-gate-<slug>.json)."""
    if summary["numbers"].get("version") == 2:
        return gate_table(name, slug, summary)
    n, checks = summary["numbers"], summary["checks"]
    passed = sum(c["ok"] is True for c in checks)
    na = sum(c["ok"] is None for c in checks)
    floors = list(n["floor"]["median_pct"].values())
    parts = [f"On the {name} ([log](results/logs/bench-baseline-{slug}.log), "
             f"[checks](results/logs/bench-gate-{slug}.json)), {passed} of {len(checks)} checks passed"
             + (f" and {na} could not be told apart on this machine" if na else "") + ":"]
    if floors:
        parts.append(f"{n['floor']['reruns']} unchanged reruns put the median's floor at {min(floors):.1f}–"
                     f"{max(floors):.1f}% ({len(floors)} benchmarks);")
    a = "; ".join(f"`{v['word']}` for `{k}` (median {_change(v['median'])})" for k, v in n["a"].items())
    b = "; ".join(f"`{v['word']}` for `{k}` ({v['why'].split(':')[0]}; median {_change(v['median'])})"
                  for k, v in n["b"].items())
    c = n["c"]
    parts += [f"(a) 5% more work in every call reads {a};" if a else "",
              f"(b) 30% more work in 40% of the calls reads {b};" if b else "",
              f"(c) three unchanged reruns read `same` {c['same']} and `unsure` {c['unsure']} times "
              f"(`slower` {c['slower']}, `faster` {c['faster']}) and {c['failed']} of them failed;"]
    if n["d"]:
        d = n["d"][0]
        how = (f"timed from a CUDA graph of {d['cuda_graph_calls']} calls" if d.get("cuda_graph_calls")
               else "launched one by one behind a blocking kernel")
        parts.append(f"(d) the 2 µs spin took {d['kernel_us']:.2f} µs a call ({how}), against {d['graph_us']:.2f} "
                     f"µs in the test's own CUDA graph, while the host launched one every {d['launch_us']:.2f} µs;")
    slow = n.get("e_slow_copy") or {}
    parts.append(f"(e) the slow copy reads `{slow.get('word')}` (median {_change(slow.get('median'))}).")
    return " ".join(p for p in parts if p)


def old_gate_sentence(name: str, slug: str, log: str) -> str | None:
    """The previous gate's log: medians against the wider IQR of the two runs (None for a log of today's)."""
    rows = re.findall(r"^(test_\S+)\s+(\S+) ms ->\s+(\S+) ms\s+(\S+)%\s+noise\s+(\S+)%\s+(\w+)", log, re.M)
    if len(rows) < 2:
        return None
    slow, rerun = rows[0], rows[1:]
    same = [r for r in rerun if r[5] == "same"]
    changes = [abs(float(r[3])) for r in rerun]
    noise = [float(r[4]) for r in rerun]
    return (f"On the {name}, with the previous gate (medians against the wider IQR of the two runs), the slow "
            f"copy read `slower` ({slow[1]} -> {slow[2]} ms, {slow[3]}%) and failed the run; an unchanged rerun "
            f"read `same` for {len(same)} of {len(rerun)} benchmarks (changes of {min(changes):.1f} to "
            f"{max(changes):.1f}% against a noise of {min(noise):.1f} to {max(noise):.1f}%; "
            f"[log](results/logs/bench-baseline-{slug}.log)).")


def baselines_text(results: Path) -> str:
    out = []
    for slug, name in GPUS.items():
        summary, log = results / "logs" / f"bench-gate-{slug}.json", results / "logs" / f"bench-baseline-{slug}.log"
        if summary.is_file():
            out.append(gate_sentence(name, slug, json.loads(summary.read_text())))
        elif log.is_file():
            out.append(old_gate_sentence(name, slug, log.read_text().split("== verdicts against the baseline")[-1]))
    return "\n".join(o for o in out if o) + "\n"


def gate_rules(results: Path) -> str:
    """The verdict's rules, as gpubench.gate.judgement holds them."""
    lines = ["| verdict | when |", "| --- | --- |"]
    lines += [f"| `{word}` | {when} |" for word, when, _, _ in RULES]
    return "\n".join(lines) + "\n"


CUPTI_COLUMNS = ("sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct", "fp32_active_pct")


def close_enough(gpm: float, cupti: float) -> bool:
    """The rule each CUPTI value is held to: within half a percentage point plus a tenth of GPM's value."""
    return abs(cupti - gpm) <= 0.5 + 0.1 * abs(gpm)


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and v == v


def _cupti_metric(manifest: dict, column: str) -> str:
    res = ((manifest.get("sources") or {}).get("columns") or {}).get(column, {}).get("resolution", "")
    m = re.search(r"CUPTI PM sampling of (.+?), one sample", res)
    return m.group(1) if m else ""


def cupti_table(results: Path) -> str:
    """GPM and CUPTI side by side over the same scenarios, per GPU; what matched; what CUPTI costs."""
    out = []
    for slug, gpu in GPUS.items():
        dirs = {k: results / f"profiling-{k}-{slug}" for k in ("gpm", "cupti")}
        if not all((d / "manifest.json").is_file() for d in dirs.values()):
            continue
        (_, _, gsum), (cman, _, csum) = load_run(dirs["gpm"]), load_run(dirs["cupti"])
        cby = {r["scenario"]: r for r in csum}
        head = ["scenario"] + [BY_COLUMN[c].header for c in CUPTI_COLUMNS]
        lines = [f"On the {gpu} ([GPM run]({dirs['gpm'].relative_to(results.parent)}), [CUPTI run]"
                 f"({dirs['cupti'].relative_to(results.parent)})), each cell GPM / CUPTI; ✗ marks a CUPTI value "
                 "off by more than 0.5 percentage point plus a tenth of GPM's:", "",
                 "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        verdict = {c: [] for c in CUPTI_COLUMNS}
        for g in gsum:
            c = cby.get(g["scenario"])
            if c is None:
                continue
            cells = [f"`{g['scenario']}`"]
            for col in CUPTI_COLUMNS:
                a, b = g.get(col), c.get(col)
                ok = close_enough(a, b) if _finite(a) and _finite(b) else None
                if ok is not None:
                    verdict[col].append((ok, g["scenario"]))
                cells.append(f"{fmt_value(col, a, '–')} / {fmt_value(col, b, '–')}" + (" ✗" if ok is False else ""))
            lines.append("| " + " | ".join(cells) + " |")
        said = []
        for col in CUPTI_COLUMNS:
            name, metric = BY_COLUMN[col].label, _cupti_metric(cman, col)
            if not verdict[col]:
                said.append(f"{name}: not offered by PM sampling here, so not recorded")
            elif all(ok for ok, _ in verdict[col]):
                said.append(f"{name} matches GPM in every scenario (`{metric}`)")
            else:
                off = ", ".join(f"`{s}`" for ok, s in verdict[col] if not ok)
                said.append(f"{name} does not match GPM ({off}; `{metric}`)")
        lines += ["", "; ".join(said) + "."]
        cost = results / "logs" / f"cupti-{slug}.json"
        if cost.is_file():
            lines += ["", cupti_costs(json.loads(cost.read_text()), gpu, slug)]
        out.append("\n".join(lines))
    if not out:
        return ("(no comparison committed yet: `python -m research.cupti_compare --out DIR` on a GPU writes the runs "
                "and logs this table is made from)\n")
    return "\n\n".join(out) + "\n"


def cupti_costs(found: dict, gpu: str, slug: str) -> str:
    """One paragraph: device memory and context, overhead on a GEMM, clocks, and what a second reader met."""
    parts = []
    ctx = found.get("selfcheck") or {}
    if _finite(ctx.get("process_mib")):
        parts.append(f"a gpubench process without PyTorch holds {ctx['process_mib']:.0f} MiB of device memory once "
                     f"CUPTI samples ({'a CUDA context' if ctx.get('in_compute_processes') else 'no CUDA context'})")
    nobody = found.get("selfcheck_nobody") or {}
    if nobody.get("used") is not None:
        parts.append("an ordinary user (nobody) " + ("reads them too" if "cupti" in nobody["used"] else
                                                     f"is refused: {(nobody.get('unavailable') or {}).get('cupti')}"))
    watch = ((found.get("watch") or {}).get("summary") or [{}])[0]
    if _finite(watch.get("tensor_active_pct")):
        parts.append(f"`gpubench watch --profiling cupti` beside another process's bf16 GEMM read SM active "
                     f"{pct(watch.get('sm_active_pct'))} and tensor active {pct(watch['tensor_active_pct'])}: the "
                     "watched job's kernels are seen from outside it")
    ovh = found.get("overhead") or {}
    if _finite(ovh.get("cupti_pct")):
        parts.append(f"a bf16 GEMM ran {ovh['cupti_pct']:+.2f}% slower with the CUPTI source sampling ("
                     f"{ovh['gpm_pct']:+.2f}% with GPM; medians of {ovh['pairs']} interleaved windows, SM clock "
                     f"{ovh['clock_off_mhz']:.0f} MHz off, {ovh['clock_cupti_mhz']:.0f} MHz with CUPTI)")
    readers = found.get("two_readers") or []
    if readers:
        parts.append("two readers at once: " + "; ".join(f"{r['case']}: {r['said']}" for r in readers))
    if not parts:
        return ""
    return (f"Costs on the {gpu} ([log](results/logs/cupti-{slug}.log)): " + "; ".join(parts) + ".")


def watch_auto_brief(results: Path) -> str:
    """The README's short table of jobs watched with no code change, a cell per GPU."""
    from tools.watch import auto_tables as watch_auto_tables

    return watch_auto_tables.brief(results, GPUS)


def watch_auto(results: Path) -> str:
    """Jobs watched with no code change (tools/watch/auto.py): MFU from their own count and from gpubench's."""
    from tools.watch import auto_tables as watch_auto_tables

    return watch_auto_tables.table(results)


SECTIONS = {"ladder": ladder_table, "ladder-notes": ladder_notes, "peaks": peaks_table, "kernels": kernels_table,
            "kernels-notes": kernels_notes, "decode-notes": decode_notes, "calibration": calibration_notes,
            "watch": watch_table,
            "watch-llama": watch_llama, "watch-decode": watch_decode,
            "watch-ranks": watch_ranks, "watch-auto": watch_auto, "watch-auto-brief": watch_auto_brief,
            "dist": dist_list, "baselines": baselines_text, "gate-rules": gate_rules, "cupti": cupti_table,
            "decode-ideas": ideas_table, "decode-ideas-second": second_ideas_table}


def render(readme: str, results: Path, up: str = "") -> str:
    """The text with its generated parts made anew; `up` is the way from the file's folder to the root."""
    def fill(m):
        make = SECTIONS.get(m.group("name"))
        body = make(results) if make else m.group("body")
        if make and up:  # the generators link from the root, as the README stands
            body = REPO_LINK.sub(lambda link: link.group(1) + up, body)
        return m.group(1) + body + m.group(4)
    return MARK.sub(fill, readme)


def generated_files() -> list[Path]:
    """README.md and every page of the site: the files whose generated parts this script writes."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if a file differs from the results")
    args = ap.parse_args()
    stale = []
    for path in generated_files():
        old = path.read_text()
        new = render(old, ROOT / "results", "../" * (len(path.relative_to(ROOT).parts) - 1))
        if new != old:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(new)
    if args.check and stale:
        print(f"{', '.join(map(str, stale))} disagree with results/: run python -m tools.readme.tables",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
