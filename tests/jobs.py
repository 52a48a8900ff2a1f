"""Synthetic watched jobs for CPU tests: sample rows from functions of time, marks and step stamps as the
job's processes would write them, and run directories holding them."""

from __future__ import annotations

import json
from pathlib import Path

from gpubench.inside.markline import MARK, MARK_LINE, ORIGINS, STEPS_LINE
from gpubench.job.markreader import Mark, Steps, Stream
from gpubench.record.gpus import Gpu
from gpubench.record.csvfile import CsvSink
from gpubench.record.rundir import SAMPLES_FILE, open_sink, write_json
from gpubench.inside.flops import FLOP_COUNT_VERSION

H100 = "NVIDIA H100 80GB HBM3"
PEAKS = {
    "datasheet": {"bf16_tensor": 989.4e12, "tf32_tensor": 494.7e12, "fp32": 66.9e12, "dram": 3.35e12},
    "measured": None,
}
COLUMNS = [
    "gpu_util_pct",
    "power_w",
    "energy_j",
    "sm_active_pct",
    "sm_occupancy_pct",
    "tensor_active_pct",
    "dram_active_pct",
]


def gpus(n: int) -> list[Gpu]:
    return [Gpu(i, f"GPU-{i:08d}-0000-0000-0000-000000000000", H100, i) for i in range(n)]


def rows(n_gpus: int, t0: float, t1: float, state, dt: float = 0.1) -> list[dict]:
    """Rows of dt seconds for each GPU; state(t, gpu) gives its columns at the row's middle (power_w
    included: the energy counter integrates it)."""
    out, energy = [], [0.0] * n_gpus
    k = 0
    while t0 + (k + 1) * dt <= t1 + 1e-9:
        a, b = t0 + k * dt, t0 + (k + 1) * dt
        for g in range(n_gpus):
            values = {
                "gpu_util_pct": 0.0,
                "power_w": 100.0,
                "sm_active_pct": 0.0,
                "sm_occupancy_pct": 0.0,
                "tensor_active_pct": 0.0,
                "dram_active_pct": 0.0,
                **state((a + b) / 2, g),
            }
            energy[g] += values["power_w"] * dt
            out.append(
                {
                    "t_start_s": a,
                    "t_end_s": b,
                    "t_wall": b,
                    "gpu": g,
                    "uuid": gpus(n_gpus)[g].uuid,
                    "phase": "",
                    **values,
                    "energy_j": energy[g],
                }
            )
        k += 1
    return out


def stamps(
    stream: Stream,
    uuid: str,
    times,
    flops=None,
    hw_flops=None,
    nbytes=0.0,
    tokens=0.0,
    clock="gpu",
    lead_s=0.0,
    origin="step",
) -> list[Steps]:
    """One Steps line per stamp, as a slow loop writes them (origin: markline.ORIGINS' words)."""
    counted = flops is not None
    return [
        Steps(
            t,
            stream,
            uuid,
            clock,
            t,
            1,
            int(counted),
            flops or 0.0,
            (hw_flops if hw_flops is not None else flops) or 0.0,
            nbytes,
            tokens,
            0,
            lead_s,
            origin,
        )
        for t in times
    ]


def mark(t: float, stream: Stream, name: str, clock="gpu") -> Mark:
    return Mark(t, stream, "", clock, name)


def every(start: float, stop: float, step: float) -> list[float]:
    n = int(round((stop - start) / step))
    return [start + i * step for i in range(n + 1)]


def write_watch(
    run_dir: Path,
    n_gpus: int,
    t0: float,
    t1: float,
    samples: list[dict],
    events: list,
    contexts: dict | None = None,
    dtype: str = "bf16",
    fmt: str = "arrows",
) -> Path:
    """A watch run directory as `gpubench watch` leaves it, from synthetic rows and events (fmt "csv": as
    runs recorded before samples.arrows hold them)."""
    run_dir.mkdir(parents=True)
    sink = open_sink(run_dir / SAMPLES_FILE, COLUMNS) if fmt == "arrows" else CsvSink(run_dir / "samples.csv", COLUMNS)
    for r in samples:
        sink(r)
    sink.close()
    lines = []
    for e in events:
        who = {
            "rank": "" if e.stream.rank is None else e.stream.rank,
            "pid": e.stream.pid,
            "uuid": e.uuid,
            "clock": e.clock,
        }
        if isinstance(e, Mark):
            lines.append(MARK_LINE.write(letter=MARK, t=e.t, **who, name=e.name))
        else:
            letter = next(k for k, v in ORIGINS.items() if v == e.origin)
            lines.append(
                STEPS_LINE.write(
                    letter=letter,
                    t_first=e.t_first,
                    **who,
                    t_last=e.t_last,
                    n=e.n,
                    counted=e.counted,
                    flops=e.flops,
                    hw_flops=e.hw_flops,
                    bytes=e.bytes,
                    tokens=e.tokens,
                    bad=e.bad,
                    lead_s=e.lead_s,
                )
            )
    (run_dir / "marks.tsv").write_text("".join(lines) or "\n")
    manifest = {
        "kind": "watch",
        "completed": True,
        "status": "completed",
        "start_wall": "2026-11-23T10:00:00",
        "gpu": {"name": H100, "nvml_index": 0, "uuid": gpus(n_gpus)[0].uuid},
        "gpus_sampled": [g.as_dict() for g in gpus(n_gpus)],
        "columns": COLUMNS,
        "peaks": PEAKS,
        "dtype": dtype,
        "window": {"t_start": t0, "t_end": t1},
        "marks": {"file": "marks.tsv"},
        "contexts": {"used": {str(g): p for g, p in (contexts or {}).items()}},
        "options": {"trim_s": 0.5},
        "families": {},
        "flop_count_version": FLOP_COUNT_VERSION,
    }
    write_json(run_dir / "manifest.json", manifest)
    return run_dir


def load(path: Path) -> dict:
    return json.loads(Path(path).read_text())
