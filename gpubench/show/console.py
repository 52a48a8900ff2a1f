"""What the terminal shows: a progress bar while the suite runs, then the table that makes the point.

Words from outside (a command, a phase name, a path, a GPU's name, a warning) reach the terminal as text:
never as rich markup (a phase named `step [/b]` is those characters), and with every control character
written out as an escape (gpubench.usage.visible), so none retitles the window or moves the cursor.
"""

from __future__ import annotations

import shlex
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from gpubench.metrics import BY_COLUMN, TABLE, fmt_value
from gpubench.record.recording import Reporter
from gpubench.usage import visible


def plain(*parts) -> Text:
    """Text that rich prints as written: each part a string, or (string, style) for gpubench's own emphasis."""
    return Text.assemble(*((visible(p[0]), p[1]) if isinstance(p, tuple) else visible(p) for p in parts))


def say(console: Console, *parts) -> None:
    """One line of words from outside, printed as text (plain's parts)."""
    console.print(plain(*parts))


def say_run_dir(console: Console, run_dir, status: str = "", hint: bool = True) -> None:
    """The run directory, and the command that plots and reports it, each printed as one line.

    A path and a command to paste stay whole whatever the console's width (a log's is 80): the terminal may fold
    them as it shows them, but a line break written into them would cut the command in two. The path is quoted
    as a shell would need it, so a folder with a space in its name pastes as one argument."""
    console.print(plain(f"run directory{status}: {run_dir}"), soft_wrap=True)
    if hint:
        quoted = shlex.quote(str(run_dir))
        console.print(plain(f"next: gpubench plot {quoted} && gpubench report {quoted}"), soft_wrap=True)


def summary_table(
    summary: list[dict], title: str = "", key: str = "scenario", columns=TABLE, header: str | None = None
) -> Table:
    table = Table(title=plain(title), title_justify="left", header_style="bold")
    table.add_column(header or key, no_wrap=True)
    for col in columns:
        table.add_column(BY_COLUMN[col].header, justify="right")
    for row in summary:
        table.add_row(plain(str(row.get(key, ""))), *(plain(fmt_value(col, row.get(col), "–")) for col in columns))
    return table


def make_console(stderr: bool = False) -> Console:
    """A rich console; a log file or a pipe gets whole tables, not ones cut to 80 columns."""
    console = Console(stderr=stderr)
    return console if console.is_terminal or console.is_jupyter else Console(stderr=stderr, width=180)


def print_table(summary: list[dict], title: str, key: str = "scenario", columns=TABLE) -> None:
    make_console().print(summary_table(summary, title, key, columns))


class ConsoleReporter(Reporter):
    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self.progress = Progress(
            TextColumn("{task.description}", style="bold", markup=False),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
        )
        self.task = None
        self.n = 0

    def start(self, scenarios, estimate_s):
        self.n = len(scenarios)
        say(self.console, f"running {self.n} scenarios, about {estimate_s:.0f} s")
        self.progress.start()
        self.task = self.progress.add_task("measuring peaks", total=self.n)

    def step(self, index, scenario, what):
        self.progress.update(self.task, description=visible(f"{index + 1}/{self.n} {scenario.name}: {what}"))

    def advance(self):
        self.progress.advance(self.task)

    def warn(self, message):
        say(self.console, ("warning:", "yellow"), " ", message)

    def finish(self):
        self.progress.stop()
