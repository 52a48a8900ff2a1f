"""What the gate does once the benchmarks ran: the saved baseline put in place, this run against its baseline,
a rerun added to the baseline's floor (--gpu-measure-floor), the records of --gpu-verdict-json,
--gpu-fail-slower's verdict on the session, the report at the end of the terminal summary, and the other
processes that measure a saved baseline's floor (gpubench.gate.runs)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from gpubench.gate import against_baseline, processes
from gpubench.gate import floor as benchfloor
from gpubench.gate import runs as benchruns
from gpubench.gate.decisions import decisions


def finish(session) -> None:
    """The end of the session, after pytest-benchmark wrote its JSON (in its own, wrapping, sessionfinish)."""
    config, known = session.config, decisions(session.config)
    if known.save is not None:
        partial, final = known.save
        opened = config.option.benchmark_json
        if hasattr(opened, "close"):
            opened.close()
        if partial.is_file() and partial.stat().st_size:
            partial.replace(final)
            known.saved = str(final)
            started(final, known.floor_runs)
        else:
            partial.unlink(missing_ok=True)  # no benchmark ran: nothing to save
    if known.baseline is not None and known.runs:
        known.compared = against_baseline.compare_run(
            known.baseline[1], known.runs, config.getoption("gpu_noise_floor"), known.always
        )
        if config.getoption("gpu_measure_floor"):
            add_rerun(session, known.baseline[1])
    if config.getoption("gpu_verdict_json", None):
        write_verdicts(session)
    if config.getoption("gpu_fail_slower") and session.exitstatus == pytest.ExitCode.OK:
        failed = fail_slower_ending(known.compared, bool(known.runs))
        if failed:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            known.ending.append((failed, True))


def started(path: Path, most: int) -> None:
    """The baseline just saved says the most processes its command allows (the floors of benchmarks measured in
    fewer are the stricter bound: gate.floor). A file pytest-benchmark did not write whole is left as it is."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if isinstance(data, dict):
        benchfloor.write(path, benchfloor.started(data, most))


def add_rerun(session, baseline: dict) -> None:
    """--gpu-measure-floor: this run, unchanged, becomes one more rerun of the baseline's floor."""
    config, known = session.config, decisions(session.config)
    lines, ok = rerun_added(
        Path(config.option.benchmark_compare), baseline, known.compared, known.fingerprint.get("uuid")
    )
    known.ending.extend(lines)
    if not ok:
        session.exitstatus = pytest.ExitCode.USAGE_ERROR


def write_verdicts(session) -> None:
    config, known = session.config, decisions(session.config)
    name = known.baseline[0] if known.baseline is not None else None
    data = verdict_records(
        known.fingerprint, name, config.getoption("gpu_noise_floor"), known.always, known.compared, known.runs
    )
    error = written(Path(config.getoption("gpu_verdict_json")), data)
    if error:
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
        known.ending.append((error, True))


def write_report(tr, config) -> None:
    """This run against the baseline, the baseline saved, and the lines the session ends with."""
    known = decisions(config)
    if known.compared:
        tr.write_sep("-", "gpu benchmarks against the baseline")
        for line in against_baseline.lines(known.compared, known.baseline[0], config.getoption("gpu_noise_floor")):
            tr.write_line(line)
    if known.saved is not None:
        tr.write_line(f"gpu baseline saved: {known.saved}")
    for line, red in known.ending:
        tr.write_line(line, red=red, bold=red)


def failed_check(tr, config, err: Exception) -> bool:
    """pytest-benchmark raises PerformanceRegression after printing which check failed: end the session as failed,
    with the report, instead of with a traceback. False for any other exception (it is raised on)."""
    known = decisions(config)
    if type(err).__name__ != "PerformanceRegression" or known.session is None:
        return False
    known.session.exitstatus = pytest.ExitCode.TESTS_FAILED
    write_report(tr, config)
    tr.write_line(
        "FAILED: --benchmark-compare-fail found a slowdown (Performance has regressed, above)", red=True, bold=True
    )
    return True


def measure_floor(config) -> None:
    """--gpu-save-baseline's other runs, once this session has saved the baseline and printed its report: each a
    fresh process, so that the floor holds what processes do."""
    known = decisions(config)
    session = known.session
    if known.floor_runs < 2 or known.saved is None or session is None or session.exitstatus != pytest.ExitCode.OK:
        return
    tr = config.pluginmanager.get_plugin("terminalreporter")
    say = benchruns.sayer(tr)
    params = config.invocation_params
    least = config.getoption("gpu_noise_floor")

    def needed() -> list[str]:
        try:
            return processes.unsettled(json.loads(Path(known.saved).read_text()), least)
        except (OSError, ValueError):
            return ["?"]  # a file that cannot be read settles nothing: the run says what is wrong with it

    rc, done = benchruns.measure_floor(
        list(params.args),
        str(params.dir),
        config.getoption("gpu_save_baseline"),
        known.floor_runs,
        say,
        needed=needed,
        seconds=config.getoption("gpu_baseline_seconds"),
        started=known.started,
    )
    if rc == 0:
        say(f"gpu baseline: {done} process{'es' * (done != 1)} measured {known.saved}", False)
        try:
            lines = processes.summary(json.loads(Path(known.saved).read_text()), least)
        except (OSError, ValueError):
            lines = []
        for line in lines:
            if tr is not None:
                tr.write_line(line)
            else:
                print(line)
    session.exitstatus = rc


def verdict_records(
    gpu: dict | None, baseline_name: str | None, least_floor_pct: float, always: list[str], compared: list, runs: dict
) -> dict:
    """What --gpu-verdict-json holds: every verdict with its numbers, and each run's extra_info (its
    round-by-round clocks left out) with its round times in microseconds and the rounds the host was late for."""
    infos = {
        k: {
            "name": r["name"],
            "extra_info": {i: v for i, v in r["extra_info"].items() if not i.startswith("rounds_")},
            "rounds_us": [round(x * 1e6, 5) for x in r["rounds"]],
            "rounds_host_late": r["extra_info"].get("rounds_host_late", []),
        }
        for k, r in runs.items()
    }
    return {
        "gpu": gpu,
        "baseline": baseline_name,
        "least_floor_pct": least_floor_pct,
        "always": always,
        "verdicts": [c.record(baseline_name) for c in compared],
        "runs": infos,
    }


def rerun_added(path: Path, baseline: dict, compared: list, uuid: str | None) -> tuple[list[tuple[str, bool]], bool]:
    """--gpu-measure-floor: add this run's changes from the baseline's first process to the baseline file as one
    more unchanged rerun. The lines for the end of the report (line, red), and whether the file was written."""
    changes = {c.fullname: dict(c.verdict.raw) for c in compared if c.verdict}
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    updated, moved = benchfloor.with_rerun(baseline, changes, when, uuid)
    try:
        benchfloor.write(path, updated)
    except OSError as err:
        return [(f"ERROR: the rerun could not be added to {path}: {err.strerror or err}", True)], False
    runs = len(benchfloor.reruns(updated))
    lines = [
        (
            f"gpu baseline floor: rerun {runs} added to {path} ({len(changes)} benchmarks; {runs + 1} processes "
            "now measure it)",
            False,
        )
    ]
    lines += [
        (
            f"measured as unchanged, though its median moved more than {benchfloor.MOVED_PCT:g}%: {name} (its "
            "floor widens by as much; if its code changed, save the baseline again)",
            True,
        )
        for name in moved
    ]
    return lines, True


def written(path: Path, data: dict) -> str | None:
    """Write the verdicts' JSON; the error line where it could not be written, else None."""
    try:
        path.write_text(json.dumps(data, indent=2, default=str))
    except OSError as err:
        return f"ERROR: the verdicts could not be written to {path}: {err.strerror or err}"
    return None


def fail_slower_ending(compared: list, ran: bool) -> str | None:
    """Why --gpu-fail-slower fails this run: a benchmark read slower, or none was compared (ran: whether any GPU
    benchmark ran); None where it passes."""
    slower = [c.name for c in compared if c.verdict and c.verdict.word == "slower"]
    if slower:
        return (
            f"FAILED: --gpu-fail-slower: {len(slower)} benchmark{'s' * (len(slower) != 1)} read slower "
            f"({', '.join(slower)})"
        )
    if not any(c.verdict for c in compared):
        why = "none had a verdict (see above)" if ran else "no GPU benchmark ran"
        return (
            f"FAILED: --gpu-fail-slower: nothing was compared with the baseline ({why}), and a gate that "
            "compared nothing must not pass"
        )
    return None
