"""One refresh as the frame a terminal shows and as the JSON document a script reads.

The frame is plain lines of text: no colour, no box drawing beyond "–" for a value not read, so it reads the
same in tmux, over SSH and in a log file. Each GPU is a line of its ladder, then a line per process on it;
under them, what each verdict word shown means, and the notes (what is missing, said once).
"""

from __future__ import annotations

import socket
import textwrap
import time
from typing import TYPE_CHECKING

from gpubench.metrics import finite, pct

from . import verdict as rules

if TYPE_CHECKING:  # the help imports SORTS from here: no NVML bindings for it
    from .sampling import Reading

# --sort name -> (key, label, reading's value); every key but the index sorts the largest first
SORTS = {
    "index": ("i", "GPU index", lambda r: r.device.index),
    "util": ("u", "GPU-Util", lambda r: r.values.get("gpu_util_pct")),
    "sm": ("s", "SM active", lambda r: r.values.get("sm_active_pct")),
    "occupancy": ("o", "occupancy", lambda r: r.values.get("sm_occupancy_pct")),
    "tensor": ("t", "tensor active", lambda r: r.values.get("tensor_active_pct")),
    "dram": ("d", "DRAM active", lambda r: r.values.get("dram_active_pct")),
    "power": ("p", "power", lambda r: r.values.get("power_w")),
    "memory": ("m", "memory used", lambda r: r.values.get("mem_used_mib")),
}
BY_KEY = {key: name for name, (key, _, _) in SORTS.items()}
KEYS_HELP = "keys " + " ".join(key for key, _, _ in SORTS.values()) + " sort, q quits"
LADDER = ("gpu_util_pct", "sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct")
SHOWN = LADDER + (
    "power_w",
    "sm_clock_mhz",
    "mem_used_mib",
    "mem_util_pct",
    "graphics_active_pct",
    "fp16_active_pct",
    "fp32_active_pct",
    "fp64_active_pct",
)


def ordered(readings: list[Reading], sort: str) -> list[Reading]:
    """The readings in the order of --sort: the index up, every other key down, GPUs without a value last."""
    _, _, value = SORTS[sort]
    if sort == "index":
        return sorted(readings, key=value)
    return sorted(
        readings, key=lambda r: (not finite(value(r)), -(value(r) if finite(value(r)) else 0), r.device.index)
    )


def _gib(mib, digits: int = 1) -> str:
    return f"{mib / 1024:.{digits}f}" if finite(mib) else "–"


def _memory(mib) -> str:
    if not finite(mib):
        return "–"
    return f"{mib / 1024:.1f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"


# (header, width, value of a reading): right-aligned, except the verdict and the name
COLUMNS = (
    ("GPU", 3, lambda r, v: str(r.device.index)),
    ("verdict", -13, lambda r, v: v),
    ("GPU-Util", 8, lambda r, v: pct(r.values.get("gpu_util_pct"), "–")),
    ("SM active", 9, lambda r, v: pct(r.values.get("sm_active_pct"), "–")),
    ("occupancy", 9, lambda r, v: pct(r.values.get("sm_occupancy_pct"), "–")),
    ("tensor", 6, lambda r, v: pct(r.values.get("tensor_active_pct"), "–")),
    ("DRAM", 6, lambda r, v: pct(r.values.get("dram_active_pct"), "–")),
    (
        "power/limit",
        11,
        lambda r, v: (
            (f"{r.values['power_w']:.0f}" if finite(r.values.get("power_w")) else "–")
            + "/"
            + (f"{r.device.power_limit_w:.0f} W" if finite(r.device.power_limit_w) else "– W")
        ),
    ),
    (
        "SM clock",
        8,
        lambda r, v: f"{r.values['sm_clock_mhz']:.0f} MHz" if finite(r.values.get("sm_clock_mhz")) else "–",
    ),
    ("memory used", 13, lambda r, v: f"{_gib(r.values.get('mem_used_mib'))}/{_gib(r.device.memory_total_mib, 0)} GiB"),
    ("name", -1, lambda r, v: r.device.name.removeprefix("NVIDIA ")),  # every one says it: room for the model
)
PROCESS_HEADER = f"{'PID':>8}  {'user':<12} {'memory':>9}  command"


def _cells(cells: list[str]) -> str:
    return "  ".join(c.ljust(-w) if w < 0 else c.rjust(w) for c, (_, w, _) in zip(cells, COLUMNS)).rstrip()


def frame(
    readings: list[Reading],
    notes: list[str],
    sort: str,
    interval_s: float,
    keys: bool = False,
    width: int | None = None,
    height: int | None = None,
    now: float | None = None,
) -> list[str]:
    """The lines of one refresh; cut to width and height where given (a terminal), whole where not (a file)."""
    clock = time.strftime("%H:%M:%S", time.localtime(now))
    title = f"gpubench top  {socket.gethostname()}  {clock}  every {interval_s:g} s  sorted by {SORTS[sort][1]}" + (
        f"  ({KEYS_HELP})" if keys else ""
    )
    lines = [title, "", _cells([h for h, _, _ in COLUMNS]), PROCESS_HEADER]
    words = []
    for r in ordered(readings, sort):
        word = rules.verdict(r.values, r.device.power_limit_w)[0] if not r.error else "unknown"
        words.append(word)
        lines.append(_cells([f(r, word) for _, _, f in COLUMNS]))
        if r.error:
            lines.append(f"{'':5}{r.error}")
        for p in r.processes:
            lines.append(f"{p.pid:>8}  {p.user:<12.12} {_memory(p.mem_mib):>9}  {p.command}")
    lines.append("")
    if width is not None:  # the table's lines cut at the edge; the words below wrapped, so none is lost
        lines = [line[:width] for line in lines]
    below = [(f"{w:<13}  ", rules.MEANING[w]) for w in _in_rule_order(words)] + [("note: ", n) for n in notes]
    for head, text in below:
        if width is None:
            lines.append(head + text)
        else:
            lines += textwrap.wrap(text, max(width, 40), initial_indent=head, subsequent_indent=" " * 15)
    if height is not None and len(lines) > height:
        more = len(lines) - height + 1
        lines = lines[: height - 1] + [f"… {more} more lines: a taller terminal shows them, or --once"[:width]]
    return lines


def _in_rule_order(words: list[str]) -> list[str]:
    order = [w for w, _, _ in rules.RULES] + [rules.UNKNOWN[0]]
    return sorted(set(words), key=order.index)


def _number(value):
    return value if finite(value) else None  # JSON has no NaN: a value not read is null


def document(readings: list[Reading], notes: list[str], sort: str, interval_s: float, now: float | None = None) -> dict:
    """One refresh for a script: per GPU its readings (null where not read), verdict and the numbers behind it."""
    now = time.time() if now is None else now
    gpus = []
    for r in ordered(readings, sort):
        word, because = rules.verdict(r.values, r.device.power_limit_w) if not r.error else (rules.UNKNOWN[0], r.error)
        gpus.append(
            {
                "index": r.device.index,
                "name": r.device.name,
                "uuid": r.device.uuid,
                "verdict": word,
                "because": because,
                "gpm": r.device.gpm is not None,
                **{c: _number(r.values.get(c)) for c in SHOWN},
                "power_limit_w": _number(r.device.power_limit_w),
                "mem_total_mib": _number(r.device.memory_total_mib),
                "processes": [
                    {"pid": p.pid, "user": p.user, "command": p.command, "mem_used_mib": _number(p.mem_mib)}
                    for p in r.processes
                ],
                "error": r.error or None,
            }
        )
    return {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now)),
        "host": socket.gethostname(),
        "interval_s": interval_s,
        "sort": sort,
        "gpus": gpus,
        "notes": list(notes),
        "verdicts": dict(rules.MEANING),
        "thresholds": rules.thresholds(),
    }
