"""report.md and a self-contained report.html for a run: what nvidia-smi said, what really happened, and why.

The text is built from the run's own numbers; both files come from one list of blocks, so they say
the same thing.
"""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path

from gpubench.metrics import BY_COLUMN
from gpubench.plots import plot_run
from gpubench.summary import finite
from gpubench.summary import fmt as f

FIGURES = [("headline", "What nvidia-smi said against the work done"), ("ladder", "Which metric each kernel fools"),
           ("timeline", "The whole run over time"), ("roofline", "Each kernel against this GPU's roofs"),
           ("softmax", "Naive against fused softmax")]
TABLE = [("scenario", "scenario", "{}"), ("nvidia-smi util %", "gpu_util_pct", "{:.0f}"),
         ("SM active %", "sm_active_pct", "{:.1f}"), ("occupancy %", "sm_occupancy_pct", "{:.1f}"),
         ("tensor %", "tensor_active_pct", "{:.1f}"), ("DRAM %", "dram_active_pct", "{:.0f}"),
         ("kernel ms (p10–p90)", "kernel_ms", None), ("TFLOP/s", "tflops", "{:.3g}"), ("MFU %", "mfu_pct", "{:.2g}"),
         ("GB/s", "gbps", "{:.4g}"), ("MBU %", "mbu_pct", "{:.0f}")]


def _kernel_ms(row) -> str:
    if not finite(row.get("kernel_ms")):
        return "n/a"
    return f"{row['kernel_ms']:.4g} ({row['kernel_ms_p10']:.4g}–{row['kernel_ms_p90']:.4g})"


def story(row: dict, manifest: dict, by_name: dict) -> str:
    """Two or three plain sentences: what nvidia-smi said, what really happened, and why."""
    fam = row.get("family")
    util, sm, occ = f(row.get("gpu_util_pct"), "{:.0f}%"), f(row.get("sm_active_pct"), "{:.1f}%"), \
        f(row.get("sm_occupancy_pct"), "{:.1f}%")
    said = f"nvidia-smi said {util} busy"
    sms = manifest.get("gpu", {}).get("sm_count", "?")
    if fam == "idle":
        return f"Nothing ran. {said}, and SM activity read {sm}: this is the floor the other rows stand on."
    if row["scenario"] == "h2d-copy":
        return (f"{said}, yet SM activity read {sm}: no SM ran at all. The copy engine moved "
                f"{f(row.get('gbps'), '{:.1f}')} GB/s from pinned host memory. GPU-Util counts time in which "
                "anything ran, and on current drivers a copy counts.")
    if fam == "copy":
        return (f"{said} and SM activity {sm}, while the kernel did no arithmetic at all (0 FLOP/s). It moved "
                f"{f(row.get('gbps'), '{:.0f}')} GB/s, {f(row.get('mbu_pct'), '{:.0f}%')} of the datasheet DRAM bandwidth "
                f"({f(row.get('mbu_measured_pct'), '{:.0f}%')} of the copy peak measured at the start). "
                "Busy is true; useful arithmetic is zero.")
    if fam == "spin":
        used = row.get("sms_used", "?")
        return (f"{row.get('blocks', '?')} block(s) of {row.get('threads_per_block', '?')} threads waited on the "
                f"GPU's clock, {f(row.get('kernel_ms'), '{:.2f}')} ms per launch, on {used} of {sms} SMs. {said}; "
                f"SM activity read {sm} and occupancy {occ}. Zero FLOPs, zero bytes: utilization only says a kernel "
                "was resident somewhere.")
    if fam == "softmax":
        text = (f"{said}. One call took {f(row.get('kernel_ms'), '{:.3f}')} ms and moved "
                f"{f(row.get('bytes_per_call', math.nan) / 1e9, '{:.2f}')} GB (read + written), "
                f"{f(row.get('gbps'), '{:.0f}')} GB/s or {f(row.get('mbu_pct'), '{:.0f}%')} of the DRAM bandwidth.")
        naive = by_name.get("softmax-naive-torch")
        if row["scenario"] != "softmax-naive-torch" and naive and finite(naive.get("kernel_ms")) \
                and finite(row.get("kernel_ms")):
            text += (f" That is {naive['kernel_ms'] / row['kernel_ms']:.1f}x the speed of the naive torch sequence, "
                     "at the same utilization.")
        elif "naive" in row["scenario"]:
            text += " Five kernels each round-trip their intermediates through DRAM: four times the bytes of one fused pass."
        return text
    if fam == "gemm":
        return (f"{said}, SM activity {sm} and tensor pipes active {f(row.get('tensor_active_pct'), '{:.0f}%')}. "
                f"It achieved {f(row.get('tflops'), '{:.0f}')} TFLOP/s: MFU {f(row.get('mfu_pct'), '{:.0f}%')} of the "
                f"datasheet dense peak ({f(row.get('mfu_measured_pct'), '{:.0f}%')} of the matmul peak measured at the "
                f"start), with the SM clock at {f(row.get('sm_clock_mhz'), '{:.0f}')} MHz and "
                f"{f(row.get('power_w'), '{:.0f}')} W. Here busy and working agree, and MFU says how far from the peak.")
    if fam == "launch":
        return (f"{said} and SM activity {sm}. Each one-element kernel took {f(row.get('kernel_ms', math.nan) * 1e3, '{:.1f}')} "
                "µs of GPU time, launch gaps included: the GPU spent its time waiting for the host to launch the next "
                "kernel, and did one addition each time.")
    return said + "."


def blocks(manifest, summary) -> list[tuple]:
    gpu, versions = manifest.get("gpu", {}), manifest.get("versions", {})
    peaks = manifest.get("peaks") or {}
    meas, sheet = peaks.get("measured") or {}, peaks.get("datasheet") or {}
    by_name = {r["scenario"]: r for r in summary}
    out = [("h1", f"gpubench report: {gpu.get('name', 'unknown GPU')}")]
    status = "completed" if manifest.get("completed") else f"incomplete ({manifest.get('status')})"
    out.append(("p", f"Run of {manifest.get('start_wall', '?')}, {status}. {gpu.get('sm_count', '?')} SMs, "
                     f"{f((gpu.get('memory_mib') or math.nan) / 1024, '{:.0f}')} GiB, driver {gpu.get('driver', '?')}, "
                     f"CUDA {gpu.get('cuda_driver', '?')}. " + ", ".join(f"{k} {v}" for k, v in versions.items() if v) + "."))
    out.append(("p", "Peaks. Measured at the start of the run: device-to-device copy "
                     f"{f(meas.get('dram', math.nan) / 1e12, '{:.2f}')} TB/s (read + written), dense bf16 matmul "
                     f"{f(meas.get('bf16_tensor', math.nan) / 1e12, '{:.0f}')} TFLOP/s. Datasheet: DRAM "
                     f"{f(sheet.get('dram', math.nan) / 1e12, '{:.2f}')} TB/s, bf16 "
                     f"{f(sheet.get('bf16_tensor', math.nan) / 1e12, '{:.0f}')} TFLOP/s, FP32 "
                     f"{f(sheet.get('fp32', math.nan) / 1e12, '{:.1f}')} TFLOP/s. MFU and MBU divide by the datasheet; "
                     "the `_measured` columns of summary.csv divide by the measured peaks."))
    sources = manifest.get("sources", {})
    out.append(("p", f"Metric sources used: {', '.join(sources.get('used', [])) or 'none'}. " + " ".join(
        f"{name} not used: {why}." for name, why in sources.get("unavailable", {}).items())))
    for w in manifest.get("warnings", []) + manifest.get("errors", []):
        out.append(("p", f"Note: {w}"))
    out.append(("h2", "Summary"))
    out.append(("p", "Medians over each scenario's steady window (its first 0.5 s dropped); n/a where this run "
                     "could not record the metric."))
    rows = [[_kernel_ms(r) if col == "kernel_ms" else (r[col] if pat == "{}" else f(r.get(col), pat))
             for _, col, pat in TABLE] for r in summary]
    out.append(("table", [h for h, _, _ in TABLE], rows))
    out.append(("h2", "Figures"))
    for name, caption in FIGURES:
        out.append(("img", f"figures/{name}.png", caption))
    out.append(("h2", "Scenario by scenario"))
    for r in summary:
        out.append(("h3", r["scenario"]))
        out.append(("p", story(r, manifest, by_name)))
    out.append(("h2", "The metrics, and where to find them in DCGM"))
    out.append(("p", "GPU-Util (DCGM field 203) is the share of time in which any kernel, or on current drivers a copy, "
                     "was running; it says nothing about how much of the GPU the kernel used. Add SM active (1002) and "
                     "SM occupancy (1003) to see how much of the chip is in use, tensor active (1004) to see matrix "
                     "work, and DRAM active (1005) to see memory traffic. None of them is the work done: for that, "
                     "count FLOPs and bytes and divide by the peaks (MFU, MBU)."))
    metric_rows = [[m.column, m.label, str(m.dcgm_id), m.dcgm_name or "", m.meaning] for m in BY_COLUMN.values()
                   if not m.column.startswith(("smi_", "dcgm_"))]
    out.append(("table", ["column", "what", "DCGM id", "DCGM field", "meaning"], metric_rows))
    return out


def to_markdown(bl) -> str:
    lines = []
    for b in bl:
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            lines += ["#" * int(kind[1]) + " " + b[1], ""]
        elif kind == "p":
            lines += [b[1], ""]
        elif kind == "img":
            lines += [f"![{b[2]}]({b[1]})", ""]
        elif kind == "table":
            lines.append("| " + " | ".join(b[1]) + " |")
            lines.append("|" + "---|" * len(b[1]))
            lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in b[2]]
            lines.append("")
    return "\n".join(lines)


def to_html(bl, run_dir: Path) -> str:
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>gpubench report</title><style>"
             "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;line-height:1.45;color:#222}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}"
             "td:first-child,th:first-child{text-align:left}img{max-width:100%}</style></head><body>"]
    for b in bl:
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            parts.append(f"<{kind}>{html.escape(b[1])}</{kind}>")
        elif kind == "p":
            parts.append(f"<p>{html.escape(b[1])}</p>")
        elif kind == "img":
            path = run_dir / b[1]
            if path.is_file():
                data = base64.b64encode(path.read_bytes()).decode()
                parts.append(f"<figure><img alt='{html.escape(b[2])}' src='data:image/png;base64,{data}'>"
                             f"<figcaption>{html.escape(b[2])}</figcaption></figure>")
        elif kind == "table":
            head = "".join(f"<th>{html.escape(h)}</th>" for h in b[1])
            body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in b[2])
            parts.append(f"<table><tr>{head}</tr>{body}</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(run_dir, manifest, samples, summary) -> list[Path]:
    run_dir = Path(run_dir)
    if not all((run_dir / "figures" / f"{n}.png").is_file() for n, _ in FIGURES):
        plot_run(run_dir, manifest, samples, summary)
    bl = blocks(manifest, summary)
    md, page = run_dir / "report.md", run_dir / "report.html"
    md.write_text(to_markdown(bl))
    page.write_text(to_html(bl, run_dir))
    return [md, page]
