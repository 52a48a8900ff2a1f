"""The rows of tools/watch/bound_jobs.py's runs, judged: each phase row of a watch beside the job's own count,
its HFU held to the tensor ceiling's limit, and the tables that print them (the run's log, docs/ceiling.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from gpubench.metrics import finite
from gpubench.record.rundir import load_run
from tools.watch.auto_runs import OWN_COUNT

WITHHELD_RULE, ABOVE_RULE = "gpubench-count-above-ceiling", "flops-above-ceiling"
NOT_STEADY = {"too-short", "idle-gpu"}  # verdict rules of rows that measure nothing


def own_count(stdout: str) -> dict:
    """What a job printed of its own count: FLOPs a step and its steady steps/s ({} where it printed none)."""
    m = OWN_COUNT.search(stdout)
    return {"flops": float(m[1]), "rate": float(m[3]), "how": m[2]} if m else {}


def judge(job: str, row: dict, own: dict) -> dict:
    """One summary row held to its ceiling: its numbers, whether it is steady, and `bounded`: True where HFU is at
    or below the tensor ceiling's limit, False above it, None where the row has no HFU or no limit to judge."""
    rules = [r.strip() for r in str(row.get("verdict_rules") or "").split(",") if r.strip()]
    limit, over, hfu = (row.get(k) for k in ("tensor_ceiling_limit_pct", "ran_over_ceiling", "hfu_pct"))
    withheld = WITHHELD_RULE in rules and not finite(hfu) and finite(over) and finite(limit)
    if withheld:  # the verdict withheld gpubench's own HFU: its ratio to the limit still says what it was
        hfu = over * limit
    bounded = over <= 1 if finite(over) else hfu <= limit if finite(hfu) and finite(limit) else None
    out = {
        "job": job,
        **row,
        "hfu_pct": hfu,
        "hfu_withheld": withheld,
        "steady": row.get("kind") == "phase" and row.get("phase") != "warmup" and not NOT_STEADY & set(rules),
        "bounded": bounded,
        "rules": rules,
        "own_steps_per_s": math.nan,
        "own_flops_per_step": math.nan,
    }
    if own and finite(row.get("steps_per_s")):  # the job's count is of its training steps
        out.update(own_steps_per_s=own["rate"], own_flops_per_step=own["flops"])
    return out


def rows_of(job: str, run: Path, stdout: str) -> list[dict]:
    """The phase rows of a run directory (not its start-up nor teardown), judged."""
    summary = load_run(run)[2] if (run / "summary.csv").is_file() else []
    return [judge(job, r, own_count(stdout)) for r in summary if r.get("kind") == "phase"]


def committed_rows(results: Path, gpu: str) -> list[dict]:
    """The phase rows of the committed runs as they are summarized now, in the committed log's order of jobs: the
    page follows the summaries when they are made again (a new calibration), the job's own count its job.log."""
    logged = json.loads((results / "logs" / f"bound-jobs-{gpu}.json").read_text())["rows"]
    out = []
    for job in dict.fromkeys(r["job"] for r in logged):
        run = results / f"bound-{job}-{gpu}"
        out += rows_of(job, run, (run / "job.log").read_text(errors="replace") if (run / "job.log").is_file() else "")
    return out


def docs_table(rows: list[dict]) -> list[str]:
    """The steady rows as docs/ceiling.md prints them (its test holds the page to the committed log): how close
    each job's MFU comes to its ceiling, and whether what ran stayed under the limit."""
    out = [
        "| job | steps/s (its own) | MFU | HFU | ceiling | limit | MFU ÷ ceiling | HFU ≤ limit |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["steady"] and finite(r.get("tensor_ceiling_limit_pct")) and finite(r.get("steps_per_s")):
            hfu = _num(r["hfu_pct"], "{:.1f}%") + (" (withheld)" if r["hfu_withheld"] else "")
            out.append(
                f"| {r['job']} | {_num(r['steps_per_s'])} ({_num(r['own_steps_per_s'])}) | "
                f"{_num(r['mfu_pct'], '{:.1f}%')} | {hfu} | {_num(r['tensor_ceiling_pct'], '{:.1f}%')} | "
                f"{_num(r['tensor_ceiling_limit_pct'], '{:.1f}%')} | "
                f"{_num(r['mfu_pct'] / r['tensor_ceiling_pct'], '{:.2f}')} | "
                f"{'yes' if r['bounded'] else 'no'} |"
            )
    return out


def _num(v, fmt: str = "{:.3g}") -> str:
    return fmt.format(v) if finite(v) else "–"


# (title, width) of each column; a cell wider than its column still leaves a space before the next
COLUMNS = (
    ("job", 18),
    ("phase", 8),
    ("steady", 6),
    ("s", 4),
    ("steps/s", 8),
    ("own/s", 8),
    ("MFU%", 8),
    ("HFU%", 8),
    ("ceil%", 6),
    ("limit%", 6),
    ("≤limit", 6),
)


def _cells(values) -> str:
    return " ".join(f"{v:<{w}}" if i < 3 else f"{v:>{w}}" for i, (v, (_, w)) in enumerate(zip(values, COLUMNS)))


HEADER = _cells(title for title, _ in COLUMNS) + " verdicts"


def line(r: dict) -> str:
    """One row of the table: HFU at or below its limit (yes), above it (NO), or not judged (–)."""
    hfu = _num(r.get("hfu_pct")) + ("*" if r["hfu_withheld"] else "")
    return (
        _cells(
            [
                r["job"],
                str(r["phase"])[:8],
                "yes" if r["steady"] else "no",
                _num(r["seconds"], "{:.0f}"),
                _num(r.get("steps_per_s")),
                _num(r["own_steps_per_s"]),
                _num(r.get("mfu_pct")),
                hfu,
                _num(r.get("tensor_ceiling_pct")),
                _num(r.get("tensor_ceiling_limit_pct")),
                {True: "yes", False: "NO", None: "–"}[r["bounded"]],
            ]
        )
        + " "
        + ", ".join(r["rules"])
    )


def tally(rows: list[dict]) -> dict:
    steady = [r for r in rows if r["steady"]]
    judged = [r for r in steady if r["bounded"] is not None]
    return {
        "steady": len(steady),
        "judged": len(judged),
        "bounded": sum(r["bounded"] is True for r in judged),
        "above_verdicts": sum(bool({ABOVE_RULE, WITHHELD_RULE} & set(r["rules"])) for r in rows),
        "withheld_verdicts": sum(WITHHELD_RULE in r["rules"] for r in rows),
    }


def table(rows: list[dict]) -> list[str]:
    """The table of every phase row, then what was not judged, then the closing count."""
    t = tally(rows)
    out = [HEADER] + [line(r) for r in rows]
    if any(r["hfu_withheld"] for r in rows):
        out.append("* HFU withheld by the verdict (gpubench's own count over the limit): the value it had")
    out.append(
        f"{t['steady'] - t['judged']} steady rows have no HFU or no limit to judge (evaluations, a GPU "
        f"without calibration); {t['withheld_verdicts']} of the verdicts above are {WITHHELD_RULE}"
    )
    out.append(
        f"{t['bounded']} of {t['judged']} steady rows at or below the ceiling; {t['above_verdicts']} "
        f"{ABOVE_RULE} verdicts"
    )
    return out
