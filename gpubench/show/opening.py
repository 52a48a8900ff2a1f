"""The report's opening: what ran (the suite, or the watched job: its command, how it ended and its receipt),
on which GPU, against which peaks, read by which sources. A fact the run did not record is left out, never
written as "?" or "n/a"; every word that comes from the run is escaped for report.md."""

from __future__ import annotations

import math
import shlex

from gpubench.metrics import fmt
from gpubench.read.receipt import lines, receipt
from gpubench.record.rundir import partial
from gpubench.show import markdown as md
from gpubench.truth.peaks import SUSTAIN_S, WARM_S


def is_job(manifest: dict) -> bool:
    """A watched job's run (gpubench watch), not the suite's."""
    return manifest.get("kind") == "watch"


def known(value) -> bool:
    return value is not None and value != "" and not (isinstance(value, float) and not math.isfinite(value))


def title(manifest: dict) -> str:
    name = md.text((manifest.get("gpu") or {}).get("name") or "an unknown GPU")
    return f"gpubench report: a job watched on {name}" if is_job(manifest) else f"gpubench report: {name}"


def status_line(manifest: dict) -> str:
    """When, and whether it completed: the report's first line."""
    why = partial(manifest)
    lacking = manifest.get("summary_lacking") if manifest.get("completed") is True else None
    status = (
        f"completed, but **{md.text(lacking)}**, so no {'phase' if is_job(manifest) else 'scenario'} is summarized here"
        if lacking
        else unfinished(manifest)
        if is_job(manifest) and manifest.get("status") == "running"
        else f"**a partial run**: it {why}, so it holds only what was recorded until then"
        if why
        else "completed"
    )
    start = manifest.get("start_wall")
    what = "Watch" if is_job(manifest) else "Run"
    return f"{what} of {md.text(start)}, {status}." if known(start) else f"{what} {status}."


def unfinished(manifest: dict) -> str:
    """A watch whose manifest still says running: whether its watcher still runs (gpubench.record.liveness)."""
    from gpubench.record.liveness import still_running

    pid = (manifest.get("watcher") or {}).get("pid")
    alive = still_running(manifest)
    who = f"process {pid}" if known(pid) and isinstance(pid, int) else "its process"
    said = (
        f"the watch still runs ({who} on this machine), so this report holds what it had recorded by now"
        if alive
        else f"its watch ({who}) is gone, killed before it finished, so this report holds what it recorded until then"
        if alive is False
        else "its manifest still says running (the watch was killed, or "
        "still runs elsewhere), so this report holds what it had recorded by then"
    )
    so_far = (
        "; its phases are summarized from the samples and marks written so far (samples reach the disk a "
        "minute at a time)"
        if manifest.get("summary_so_far")
        else "; its phases are summarized when it ends"
    )
    return f"**unfinished**: {said}{so_far}"


def machine_line(manifest: dict) -> str | None:
    """The GPU's facts and the software's versions, each where known; None where none is."""
    gpu, versions = manifest.get("gpu") or {}, manifest.get("versions") or {}
    out = []
    memory = (gpu.get("memory_mib") or math.nan) / 1024
    sampled = {g.get("name") for g in manifest.get("gpus_sampled") or [] if known(g.get("name"))}
    count = len(manifest.get("gpus_sampled") or [])
    name = gpu.get("name") if known(gpu.get("name")) else next(iter(sampled)) if len(sampled) == 1 else ""
    facts = [
        (f"{count} × {md.text(name)}" if count > 1 and sampled == {name} else md.text(name)) if name else "",
        f"{gpu['sm_count']} SMs" if known(gpu.get("sm_count")) else "",
        f"{fmt(memory, '{:.0f}')} GiB" if known(memory) else "",
        f"driver {md.text(gpu['driver'])}" if known(gpu.get("driver")) else "",
        f"CUDA {md.text(gpu['cuda_driver'])}" if known(gpu.get("cuda_driver")) else "",
    ]
    if any(facts):
        out.append(", ".join(f for f in facts if f) + ".")
    if any(known(v) for v in versions.values()):
        out.append(", ".join(f"{md.text(k)} {md.text(v)}" for k, v in versions.items() if known(v)) + ".")
    return " ".join(out) or None


def job_line(manifest: dict) -> str | None:
    """The watched command and how it ended; None for a suite run."""
    if not is_job(manifest):
        return None
    child = manifest.get("child")
    if not child or not child.get("argv"):
        return "No command was started: the watch recorded whatever ran on its GPUs."
    command = md.code(shlex.join(child["argv"]))
    code, signal = child.get("exit_code"), child.get("signal")
    if signal:
        ended = f"which {md.text(signal)} ended" + (f" (exit code {code})" if known(code) else "")
    elif known(code):
        ended = f"which exited with code {code}"
    elif manifest.get("status") == "running":  # the watch has not ended: neither has the job, as far as it knows
        ended = "whose end the watch had not seen"
    else:
        ended = "which was still running when the watch ended"
    return f"The job: {command}, {ended}."


def receipt_blocks(manifest: dict, summary: list[dict]) -> list[tuple]:
    """A watched job's receipt, computed anew from its summary at the price its watch was given: a line in
    bold, then a list; none for a suite run."""
    if not is_job(manifest):
        return []
    said = lines(receipt(summary, (manifest.get("receipt") or {}).get("price_per_gpu_hour")), md.text)
    return [("p", f"**{said[0]}.**"), ("ul", said[1:])] if said else []


def _tera(d: dict, key: str, pattern: str, scale: float = 1e12) -> str | None:
    value = d.get(key)
    return fmt(value / scale, pattern) if known(value) else None


def peaks_line(manifest: dict) -> str | None:
    """The peaks measured at the start and the datasheet's, each where known; None where neither is."""
    peaks = manifest.get("peaks") or {}
    meas, sheet = peaks.get("measured") or {}, peaks.get("datasheet") or {}
    seen = (peaks.get("conditions") or {}).get("bf16_tensor") or {}
    out = []
    copy, bf16, fp16 = (
        _tera(meas, "dram", "{:.2f}"),
        _tera(meas, "bf16_tensor", "{:.0f}"),
        _tera(meas, "fp16_tensor", "{:.0f}"),
    )
    measured = [f"device-to-device copy {copy} TB/s (read + written)" if copy else ""]
    matmul = " and ".join(f"{k} {v}" for k, v in (("bf16", bf16), ("fp16", fp16)) if v)
    if matmul:
        clock = [
            f"{fmt(seen['sm_clock_mhz'], '{:.0f}')} MHz" if known(seen.get("sm_clock_mhz")) else "",
            f"{fmt(seen['power_w_energy'], '{:.0f}')} W" if known(seen.get("power_w_energy")) else "",
        ]
        at = f" (bf16 at {' and '.join(c for c in clock if c)})" if bf16 and any(clock) else ""
        measured.append(f"dense matmul {matmul} TFLOP/s{at}")
    if any(measured):
        out.append(
            f"Measured at the start, sustained (median over {SUSTAIN_S:g} s after {WARM_S:g} s of the same "
            f"work): {', '.join(m for m in measured if m)}."
        )
    sheet_parts = [
        f"{name} {v} TFLOP/s" if unit == "T" else f"{name} {v} TB/s"
        for name, v, unit in (
            ("DRAM", _tera(sheet, "dram", "{:.2f}"), "B"),
            ("bf16", _tera(sheet, "bf16_tensor", "{:.0f}"), "T"),
            ("FP32", _tera(sheet, "fp32", "{:.1f}"), "T"),
        )
        if v
    ]
    link = _tera(sheet, "link", "{:.0f}", 1e9)
    if sheet_parts or link:
        out.append(
            "Datasheet: "
            + ", ".join(sheet_parts)
            + ("; " if sheet_parts and link else "")
            + (f"host link {link} GB/s per direction" if link else "")
            + "."
        )
    if not out:
        return None
    if is_job(manifest):
        dtype = manifest.get("dtype")
        out.append(
            f"MFU divides the job's FLOPs per second by the datasheet's dense "
            f"{md.text(dtype) + ' ' if known(dtype) else ''}peak (--dtype)"
            + ("; `mfu_measured_pct` in summary.csv by the measured one." if matmul else ".")
        )
    else:
        out.append(
            "MFU, MBU and link share divide by the datasheet; the `_measured_pct` columns of summary.csv "
            "divide by the measured peaks."
        )
    return "Peaks. " + " ".join(out)


def sources_line(manifest: dict) -> str:
    sources = manifest.get("sources") or {}
    used = ", ".join(md.text(s) for s in sources.get("used") or []) or "none"
    return f"Metric sources used: {used}. " + " ".join(
        f"{md.text(name)} not used: {md.text(why)}." for name, why in (sources.get("unavailable") or {}).items()
    )


def ranks_line(d: dict) -> str:
    """Who ran where, in a run under torchrun."""
    ranks = d.get("ranks") or []
    nodes = sorted({r["node"] for r in ranks})
    each = "; ".join(
        f"rank {r['rank']} on {md.text(r['node'])}: GPU {r['gpu']['nvml_index']} ({md.text(r['gpu']['uuid'])})"
        for r in ranks
    )
    size = f"{d['world_size']} ranks" if known(d.get("world_size")) else "ranks"
    return (
        f"Run under torchrun: {size} on {len(nodes)} node(s), one GPU each ({each}). "
        f"Each scenario ran on every rank at once; one process per node sampled that node's GPUs. "
        f"Sample and window {md.text(d.get('clock', ''))}."
    )
