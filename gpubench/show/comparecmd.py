"""`gpubench compare RUN_A RUN_B [RUN ...] [--out DIR]`: the runs read and checked, the comparison printed, and
report.md, report.html and figures/change.png written into DIR (default compare-A-vs-B in the current
directory), all of them or none."""

from __future__ import annotations

from pathlib import Path

from gpubench.usage import UsageError

MAX_RUNS = 6


def cmd(run_dirs: list[Path], out: Path | None = None) -> int:
    from gpubench.show import compare_runs as cr
    from gpubench.show.console import make_console, plain
    from gpubench.show.render import _load, _written

    if len(run_dirs) < 2:
        raise UsageError("compare needs two run directories or more: gpubench compare RUN_A RUN_B")
    if len(run_dirs) > MAX_RUNS:  # each run a bar of each row and a letter of each cell: more cannot be read
        raise UsageError(f"compare sets at most {MAX_RUNS} runs side by side, and was given {len(run_dirs)}")
    runs = []
    for path in run_dirs:
        manifest, _, summary = _load(path)
        runs.append((path.name or str(path), manifest, summary))
    cr.check_kinds(runs)
    c = cr.compared(runs)
    out = out if out is not None else cr.default_out(run_dirs)
    _check_out(out, run_dirs)
    _print(c, runs, make_console(), plain)
    return _written(True, lambda: _write(c, runs, out))


def _print(c, runs, console, plain) -> None:
    from rich.table import Table

    from gpubench.show import compare_runs as cr

    for k, (name, manifest, _) in enumerate(runs):
        console.print(plain(f"{chr(ord('A') + k)}: {name} ({cr._gpu(manifest)})"), soft_wrap=True)
    head, body = cr.table(c)
    table = Table(header_style="bold")
    for h in head:
        table.add_column(h, justify="left" if h in head[:1] + head[-1:] else "right")
    for row in body:
        table.add_row(*(plain(cell) for cell in row))
    console.print(table)
    # one line each, however narrow the console: a reader greps for them, a log keeps them whole
    console.print(plain(cr.headline(c)), soft_wrap=True)
    if c["only"]:
        console.print(plain("in only some of the runs, so not compared: " + ", ".join(c["only"])), soft_wrap=True)


def _check_out(out: Path, run_dirs: list[Path]) -> None:
    """DIR must be new, empty or hold only what compare writes, and lie inside none of the runs."""
    from gpubench.show import compare_runs as cr
    from gpubench.show.render import _inside

    for run in run_dirs:
        if _inside(out, run):
            raise UsageError(f"--out {out} lies inside the run directory {run}: write the comparison elsewhere")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a directory")
    if out.is_dir():
        foreign = [p for p in out.rglob("*") if p.is_file() and str(p.relative_to(out)) not in cr.OWN_FILES]
        if foreign:
            raise UsageError(
                f"--out {out} holds files compare did not write ({foreign[0].relative_to(out)}): "
                "name a new or empty directory"
            )


def _write(c, runs, out: Path) -> list[Path]:
    from gpubench.show import compare_runs as cr
    from gpubench.show.figures import change
    from gpubench.show.page import to_html, to_markdown
    from gpubench.show.stage import commit, staging

    with staging(out) as stage:
        (stage / "figures").mkdir()
        drawn = change.draw(c, cr.work, cr.rate, runs[0][1], stage / "figures") if c["rows"] else []
        bl = cr.blocks(c, runs, figure=bool(drawn))
        (stage / "report.md").write_text(to_markdown(bl))
        (stage / "report.html").write_text(to_html(bl, stage / "figures"))
        return commit(stage, out, [f"figures/{p.name}" for p in drawn] + ["report.md", "report.html"])
