"""`gpubench plot` and `gpubench report`: a run directory read once, where the output goes (the run directory,
or --out DIR, checked before anything is written), and the files written, each printed."""

from __future__ import annotations

from pathlib import Path

from gpubench.usage import UsageError


def _load(run_dir: Path, summarize=None):
    """The run directory's files, read and checked; UsageError where they cannot be, or hold no sample (a
    run that recorded nothing is never reported as one that completed). summarize(run_dir, manifest, samples):
    the summary so far of a watch that has not written its own (gpubench.job.running.so_far), where given."""
    from gpubench.record.rundir import SUMMARY_MISSING, RunDirError, load_run, partial, samples_path

    try:
        manifest, samples, summary = load_run(run_dir)
    except RunDirError as err:
        raise UsageError(str(err)) from None
    except OSError as err:  # unreadable: permissions, a file vanished mid-read
        raise UsageError(f"cannot read {err.filename or run_dir}: {err.strerror or err}") from None
    running = manifest.get("kind") == "watch" and manifest.get("status") == "running"
    if not len(samples) and running:  # a watch writes its samples a batch at a time (gpubench.record.arrowfile)
        raise UsageError(
            f"{run_dir} is a watch that has not finished (its manifest says running), and none of its "
            "samples is on disk yet: a watch writes them a minute at a time, so try again a minute after "
            "it started"
        )
    if not len(samples):
        why = partial(manifest)
        raise UsageError(
            f"{run_dir} holds no samples, so there is nothing to plot or report: "
            f"{samples_path(run_dir).name} has no rows"
            + (f" (the run {why})" if why else ", though its manifest says the run completed")
        )
    if running and not summary and summarize is not None:  # unfinished: its phases so far, by the summary's code
        summary = summarize(run_dir, manifest, samples)
        manifest["summary_so_far"] = True
        manifest["read_notes"] = [n for n in manifest.get("read_notes", []) if n != SUMMARY_MISSING]
    return manifest, samples, summary


def output_dir(run_dir: Path, out: Path | None, default: Path, targets: list[str]) -> Path:
    """Where plot or report writes: --out DIR, or default inside the run directory; UsageError, before
    anything is written, where that cannot work, or where any of targets (paths under it) cannot be
    replaced. Stage folders that an ended gpubench left there are removed first."""
    from gpubench.record.rundir import check_writable
    from gpubench.show.figures import own_files
    from gpubench.show.stage import clear_debris

    if out is not None and _same(out, default):
        out = None  # the place it writes to without --out: as if none were given
    if out is not None and _inside(out, run_dir):
        raise UsageError(
            f"--out {out} lies inside the run directory {run_dir}, where it would mix with the "
            f"run's own files (report writes figures/ under its --out): write elsewhere, or leave --out "
            f"out to write into {default}"
        )
    given, out = out is not None, out if out is not None else default
    for folder in (out, out / "figures"):
        if (pid := clear_debris(folder)) is not None:
            raise UsageError(f"another gpubench (process {pid}) is writing into {folder}: let it finish first")
    if given:
        own = {"figures", "report.md", "report.html"} | own_files()
        if problem := check_writable(out, may_hold=own):
            raise UsageError(f"cannot write to --out: {problem}")
    else:
        figures = run_dir / "figures"
        if figures.exists() and not figures.is_dir():
            raise UsageError(
                f"{figures} is a file, not a folder of figures: move it away, or write elsewhere with --out DIR"
            )
        if run_dir.is_dir() and (problem := check_writable(default, may_hold=None)):
            raise UsageError(f"cannot write into the run directory: {problem}; write elsewhere with --out DIR")
    for target in (out / name for name in targets):
        if target.parent != out and target.parent.exists() and not target.parent.is_dir():
            raise UsageError(
                f"{target.parent} is a file, where gpubench would write figures: move it away, or "
                "write elsewhere with --out DIR"
            )
        if target.is_dir():
            raise UsageError(
                f"{target} is a folder, where gpubench would write a file: move it away, or write "
                "elsewhere with --out DIR"
            )
    return out


def _resolved(path: Path) -> Path | None:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):  # a loop of links, a name too long: check_writable says so
        return None


def _inside(path: Path, folder: Path) -> bool:
    a, b = _resolved(path), _resolved(folder)
    return a is not None and b is not None and (a == b or b in a.parents)


def _same(a: Path, b: Path) -> bool:
    return _resolved(a) is not None and _resolved(a) == _resolved(b)


def _written(elsewhere: bool, write) -> int:
    """Run write() -> paths and print them; a refusal of the disk (read-only, full), or damage found in a
    column of the samples as it is read (a day's columns are read as the figures ask), is one sentence."""
    from gpubench.record.rundir import RunDirError

    try:
        paths = write()
    except RunDirError as err:
        raise UsageError(str(err)) from None
    except OSError as err:
        hint = "" if elsewhere else "; write elsewhere with --out DIR"
        raise UsageError(f"cannot write {err.filename or 'the output'}: {err.strerror or err}{hint}") from None
    for path in paths:
        print(path)
    return 0


def plot(run_dir: Path, out: Path | None = None, summarize=None) -> int:
    """`gpubench plot RUN_DIR [--out DIR]`: the run's figures, into DIR or the run's figures/."""
    from gpubench.show.figures import figure_files, plot_run

    manifest, samples, summary = _load(run_dir, summarize)
    where = output_dir(run_dir, out, run_dir / "figures", figure_files(manifest))
    return _written(where != run_dir / "figures", lambda: plot_run(run_dir, manifest, samples, summary, where))


def report(run_dir: Path, out: Path | None = None, summarize=None) -> int:
    """`gpubench report RUN_DIR [--out DIR]`: report.md, report.html and figures/, into DIR or the run."""
    from gpubench.show.report import report_files, write_report

    manifest, samples, summary = _load(run_dir, summarize)
    where = output_dir(run_dir, out, run_dir, report_files(manifest))
    return _written(where != run_dir, lambda: write_report(run_dir, manifest, samples, summary, where))
