"""What a running watch says of its live rows (gpubench.job.live.Snapshot): a line per GPU, or one for all of them
where there are more than COMPACT_OVER, in two forms.

- For a log (a scheduler's job log, CI, stderr into a file): logfmt, `key=value` pairs separated by spaces, a
  value in double quotes where it holds a space, a quote or an equals sign. Every line starts `gpubench live `
  (grep finds them among the job's own lines); the keys of the numbers are the summary's own columns
  (summary.csv), and `phase_steps_per_s` and `phase_mfu_pct`, the phase's so far, are what its final row will
  read: the last live line of a phase reads beside its final row. A number the window has no value for is left
  out, never written as 0.
- For the status area of a terminal: the same numbers as the final table writes them (gpubench.metrics).

Every word that comes from the job (its phase's name) is written out as text (gpubench.inside.text.visible):
a status line can never move the cursor.
"""

from __future__ import annotations

import math
import unicodedata

from gpubench.inside.text import visible
from gpubench.metrics import fmt_value

PREFIX = "gpubench live"
COMPACT_OVER = 4  # more GPUs than this: one line for all, their means
# (summary column, its words on a terminal); the log's keys are the columns
# phase_*: the phase's so far (gpubench.job.sofar), the numbers its final row will show; the rest, the window's
SHOWN = (
    ("steps_per_s", "steps/s"),
    ("phase_steps_per_s", "phase steps/s"),
    ("mfu_pct", "MFU"),
    ("phase_mfu_pct", "phase MFU"),
    ("tensor_ceiling_pct", "ceiling"),
    ("gpu_util_pct", "GPU-Util"),
    ("sm_active_pct", "SM active"),
    ("tensor_active_pct", "tensor"),
    ("dram_active_pct", "DRAM"),
    ("power_w", "W"),
)
MISSING = "–"


def finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def number(v: float) -> str:
    """Three significant digits, and no exponent below 100 000: 28.6, 0.757, 3210, 123457."""
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}"


def value(text: str) -> str:
    """A logfmt value: bare where it can be, else quoted with its quotes and backslashes escaped."""
    text = visible(text)
    if text and not any(c in text for c in ' "=\\'):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def pairs(items) -> str:
    return " ".join(f"{k}={value(str(v))}" for k, v in items if v is not None and v != "")


def rules(rows: list[dict]) -> str:
    """The verdicts' rule names, without spaces: `compute-bound` for one GPU, `a:7,b:1` counted over several."""
    counts: dict[str, int] = {}
    for r in rows:
        for name in str(r.get("verdict_rules") or "").replace(" ", "").split(","):
            if name:
                counts[name] = counts.get(name, 0) + 1
    if len(rows) == 1:
        return ",".join(counts)
    return ",".join(f"{k}:{n}" for k, n in counts.items())


def mean(rows: list[dict], column: str) -> float:
    got = [r[column] for r in rows if finite(r.get(column))]
    return sum(got) / len(got) if got else math.nan


def log_lines(snap, elapsed_s: float, window_s: float, compact_over: int = COMPACT_OVER) -> list[str]:
    """The lines for a log: one per GPU with a live row, or one for all where there are more than
    compact_over; one line with no numbers while no GPU has a row (start-up, a phase shorter than its trim)."""
    head = [("elapsed_s", f"{elapsed_s:.1f}"), ("window_s", f"{window_s:g}"), ("phase", snap.phase)]
    rows = list(snap.rows)
    if not rows:
        return [f"{PREFIX} {pairs(head)}"]
    if len(rows) > compact_over:
        late = next((r.get("straggler_rank") for r in rows if r.get("straggler_rank") is not None), None)
        numbers = [(c, number(v)) for c, _ in SHOWN if finite(v := mean(rows, c))]
        return [
            f"{PREFIX} {pairs(head + [('gpus', len(rows))] + numbers + [('rules', rules(rows))])}"
            + (f" straggler_rank={late}" if late is not None else "")
        ]
    out = []
    for r in rows:
        who = [("gpu", r["gpu"]), ("rank", snap.ranks.get(r["gpu"], ""))]
        numbers = [(c, number(r[c])) for c, _ in SHOWN if finite(r.get(c))]
        out.append(f"{PREFIX} {pairs(head + who + numbers + [('rules', rules([r]))])}")
    return out


# --- a terminal's status area ---------------------------------------------------------------------


def clock(seconds: float) -> str:
    s = int(max(0.0, seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def _ladder(row: dict) -> str:
    def shown(column):
        return fmt_value(column, row.get(column), MISSING)

    def so_far(column, like, then=""):
        v = row.get(column)
        return f"{fmt_value(like, v, MISSING)} so far{then}" if finite(v) else ""

    steps = so_far("phase_steps_per_s", "steps_per_s")
    parts = [
        f"{shown('steps_per_s')} steps/s" + (f" ({steps})" if steps else ""),
        f"MFU {shown('mfu_pct')} ({so_far('phase_mfu_pct', 'mfu_pct', '; ')}tensor ceiling "
        f"{shown('tensor_ceiling_pct')})",
        f"GPU-Util {shown('gpu_util_pct')} · SM active {shown('sm_active_pct')}",
        f"tensor {shown('tensor_active_pct')}",
        f"DRAM {shown('dram_active_pct')}",
        shown("power_w") if finite(row.get("power_w")) else f"{MISSING} W",
    ]
    return "  ".join(parts)


def area_lines(snap, elapsed_s: float, window_s: float, gpus: int, compact_over: int = COMPACT_OVER) -> list[str]:
    """The status area: a head line, then a line per GPU, or for more than compact_over GPUs their means and
    each one's SM active. Always 1 + gpus lines (or 3), so that the area keeps its height while the job runs."""
    window = f"the last {window_s:g} s" if snap.window else "waiting for a whole sample interval"
    head = f"gpubench watch {clock(elapsed_s)}  phase {visible(snap.phase or '–')}  ({window}; --quiet hides this)"
    rows = list(snap.rows)
    if gpus > compact_over:
        if not rows:
            return [head, "", ""]
        means = {c: mean(rows, c) for c, _ in SHOWN}
        sm = "  ".join(f"{r['gpu']}:{fmt_value('sm_active_pct', r.get('sm_active_pct'), MISSING)}" for r in rows)
        return [head, f"{len(rows)} GPUs, means: {_ladder(means)}  {rules(rows)}", f"SM active by GPU  {sm}"]
    out = [head]
    for r in rows[:gpus]:
        rank = snap.ranks.get(r["gpu"], "")
        who = f"GPU {r['gpu']}" + (f" rank {rank}" if rank else "")
        out.append(f"{who}  {_ladder(r)}  {r.get('verdict_rules') or ''}".rstrip())
    return out + [""] * (1 + gpus - len(out))


def cut(text: str, columns: int) -> str:
    """text cut to `columns` terminal cells (a wide character takes two, a combining one none)."""
    used, out = 0, []
    for c in text:
        w = 0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        if used + w > columns:
            break
        used += w
        out.append(c)
    return "".join(out)
