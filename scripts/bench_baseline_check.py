"""What scripts/bench_baseline.sh expected of each step, against what the step got: one line per check
(PASS, FAIL, or N/A where this machine cannot tell), and a summary that scripts/readme_tables.py reads for
the README.

    python scripts/bench_baseline_check.py WORK_DIR BASELINE_JSON SUMMARY_JSON

WORK_DIR holds what the script left: exits.tsv (step, exit status) and, per step, the verdicts
(--gpu-verdict-json) and its output. Exits 1 when any check failed.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

GEMM, COPY = "test_gemm[torch-bf16]", "test_copy[torch-1GiB]"
SLOW_COPY, TINY = "test_copy[triton-1GiB]", "test_tiny"
RERUNS = ("c-rerun-1", "c-rerun-2", "c-rerun-3")


def load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class Checks:
    def __init__(self, work: Path):
        self.work = work
        self.exits = {}
        for line in (work / "exits.tsv").read_text().splitlines() if (work / "exits.tsv").is_file() else []:
            name, rc = line.split("\t")
            self.exits[name] = int(rc)
        self.rows: list[dict] = []

    def add(self, step: str, what: str, expected: str, got: str, ok: bool | None) -> None:
        self.rows.append({"step": step, "what": what, "expected": expected, "got": got, "ok": ok})

    def exit(self, step: str, expected: tuple[int, ...]) -> None:
        rc = self.exits.get(step)
        self.add(step, "exit status", " or ".join(map(str, expected)),
                 "did not run" if rc is None else str(rc), rc in expected)

    def verdicts(self, step: str) -> dict:
        data = load(self.work / f"{step}.json") or {}
        return {v["name"]: v for v in data.get("verdicts", [])}

    def runs(self, step: str) -> dict:
        data = load(self.work / f"{step}.json") or {}
        return {r["name"]: r["extra_info"] for r in data.get("runs", {}).values()}


def said(v: dict | None) -> str:
    if not v:
        return "no verdict"
    if v.get("word") is None:
        return f"not compared: {v.get('not_compared')}"
    return f"{v['word']}: {v['why']}"


def median_of(v: dict) -> dict:
    return (v.get("changes") or {}).get("median") or {}


def check(work: Path, baseline_path: Path) -> tuple[Checks, dict]:
    c, numbers = Checks(work), {}

    # 1. the baseline and its floor
    c.exit("1-baseline", (0,))
    floor_steps = sorted(s for s in c.exits if s.startswith("1-floor-"))
    for step in floor_steps:
        c.exit(step, (0,))
    baseline = load(baseline_path) or {}
    names = [b["name"] for b in baseline.get("benchmarks", [])]
    reruns = (baseline.get("gpubench") or {}).get("reruns") or []
    full = {b["fullname"]: b["name"] for b in baseline.get("benchmarks", [])}
    floors = {full.get(k, k): v["median"] for k, v in ((baseline.get("gpubench") or {}).get("floor_pct") or {}).items()}
    c.add("1", "the baseline's floor", f"{len(floor_steps)} reruns measuring each of {len(names)} benchmarks",
          f"{len(reruns)} reruns, {len(floors)} benchmarks measured",
          len(reruns) == len(floor_steps) > 0 and set(floors) == set(names))
    numbers["floor"] = {"reruns": len(reruns), "median_pct": floors}

    # a. 5% more work in every call: never same
    a = c.verdicts("a-uniform-5pct")
    c.exit("a-uniform-5pct", (1,) if any(v.get("word") == "slower" for v in a.values()) else (0,))
    for name in (GEMM, COPY):
        v = a.get(name)
        c.add("a-uniform-5pct", name, "slower or unsure, never same", said(v),
              bool(v) and v["word"] in ("slower", "unsure"))
    numbers["a"] = {n: {"word": v["word"], "median": median_of(v)} for n, v in a.items() if v.get("word")}

    # b. 30% more work in 40% of the calls: slower
    b = c.verdicts("b-40pct-of-calls-30pct")
    c.exit("b-40pct-of-calls-30pct", (1,))
    for name in (GEMM, COPY):
        v = b.get(name)
        c.add("b-40pct-of-calls-30pct", name, "slower", said(v), bool(v) and v["word"] == "slower")
    numbers["b"] = {n: {"word": v["word"], "why": v["why"], "median": median_of(v)} for n, v in b.items()
                    if v.get("word")}

    # c. three unchanged reruns: same or unsure for every benchmark, none fails
    words = []
    for step in RERUNS:
        c.exit(step, (0,))
        got = c.verdicts(step)
        odd = [f"{n} {said(v)}" for n, v in got.items() if v.get("word") not in ("same", "unsure")]
        c.add(step, "every benchmark", f"same or unsure for all {len(names)}",
              f"{len(got)} verdicts" + (f"; {'; '.join(odd)}" if odd else ""), len(got) == len(names) and not odd)
        words += [v.get("word") for v in got.values()]
    numbers["c"] = {w: words.count(w) for w in ("same", "unsure", "slower", "faster")}
    numbers["c"]["failed"] = sum(c.exits.get(s) not in (0, None) for s in RERUNS)

    # d. a tiny kernel's time per call is its GPU time, not the host's launch rate
    numbers["d"] = []
    for step in ("1-baseline", *RERUNS):
        info = c.runs(step).get(TINY)
        if not info or "graph_us" not in info:
            c.add("d", f"{TINY} in {step}", "timed", "no record", False)
            continue
        k, g, h = info["kernel_us"], info["graph_us"], info["launch_us"]
        numbers["d"].append({"step": step, "kernel_us": k, "graph_us": g, "launch_us": h,
                             "cuda_graph_calls": info.get("cuda_graph_calls", 0)})
        how = f"timed from a CUDA graph of {info['cuda_graph_calls']} calls" if info.get("cuda_graph_calls") \
            else "launched one by one"
        got = f"{k:.2f} us a call ({how}); {g:.2f} us in a CUDA graph; the host launches one every {h:.2f} us"
        if h > 2 * g:
            c.add("d", f"{TINY} in {step}", "nearer the CUDA graph's time than the launch rate", got, k < (g + h) / 2)
        else:
            c.add("d", f"{TINY} in {step}", "nearer the CUDA graph's time than the launch rate",
                  got + ": the host launches about as fast as the GPU runs it, so this machine cannot tell", None)

    # e. what the gate did before
    c.exit("e-slow-copy", (1,))
    v = c.verdicts("e-slow-copy").get(SLOW_COPY)
    c.add("e-slow-copy", SLOW_COPY, "slower", said(v), bool(v) and v.get("word") == "slower")
    numbers["e_slow_copy"] = {"word": v.get("word"), "median": median_of(v)} if v else None
    c.exit("e-another-model", (4,))
    out = (work / "e-another-model.out").read_text() if (work / "e-another-model.out").is_file() else ""
    errors = [line for line in out.splitlines() if line.startswith("ERROR:")]
    c.add("e-another-model", "the refusal", "one sentence: another GPU model is not comparable",
          errors[0] if errors else "no ERROR line", len(errors) == 1 and "not comparable" in errors[0])
    c.exit("e-example", (0,))
    return c, numbers


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    work, baseline_path, summary = (Path(a) for a in argv)
    c, numbers = check(work, baseline_path)
    marks = {True: "PASS", False: "FAIL", None: "N/A "}
    for r in c.rows:
        print(f"{marks[r['ok']]}  {r['step']}: {r['what']}: expected {r['expected']}; got {r['got']}")
    failed = sum(r["ok"] is False for r in c.rows)
    print(f"{failed} of {len(c.rows)} checks failed")
    baseline = load(baseline_path) or {}
    gpu = ((baseline.get("machine_info") or {}).get("gpu") or {})
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    summary.write_text(json.dumps({"gpu": gpu.get("name"), "date": when, "failed": failed, "checks": c.rows,
                                   "numbers": numbers}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
