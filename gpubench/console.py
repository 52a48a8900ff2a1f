"""What the terminal shows: a progress bar while the suite runs, then the table that makes the point."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from gpubench.runner import Reporter
from gpubench.summary import fmt

TABLE_COLUMNS = [  # (header, summary column, format)
    ("nvidia-smi util", "gpu_util_pct", "{:.0f}%"),
    ("SM active", "sm_active_pct", "{:.1f}%"),
    ("occupancy", "sm_occupancy_pct", "{:.1f}%"),
    ("tensor active", "tensor_active_pct", "{:.1f}%"),
    ("DRAM active", "dram_active_pct", "{:.0f}%"),
    ("TFLOP/s", "tflops", "{:.3g}"),
    ("MFU", "mfu_pct", "{:.2g}%"),
    ("GB/s", "gbps", "{:.4g}"),
    ("MBU", "mbu_pct", "{:.0f}%"),
]


def summary_table(summary: list[dict], title: str = "") -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("scenario", no_wrap=True)
    for header, _, _ in TABLE_COLUMNS:
        table.add_column(header, justify="right")
    for row in summary:
        table.add_row(row["scenario"], *(fmt(row.get(col), pat, "–") for _, col, pat in TABLE_COLUMNS))
    return table


class ConsoleReporter(Reporter):
    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                                 TextColumn("{task.completed}/{task.total}"), TimeRemainingColumn(),
                                 console=self.console, transient=True)
        self.task = None
        self.n = 0

    def start(self, scenarios, estimate_s):
        self.n = len(scenarios)
        self.console.print(f"running {self.n} scenarios, about {estimate_s:.0f} s")
        self.progress.start()
        self.task = self.progress.add_task("measuring peaks", total=self.n)

    def step(self, index, scenario, what):
        self.progress.update(self.task, description=f"{index + 1}/{self.n} {scenario.name}: {what}")

    def advance(self):
        self.progress.advance(self.task)

    def warn(self, message):
        self.console.print(f"[yellow]warning:[/] {message}")

    def finish(self):
        self.progress.stop()
