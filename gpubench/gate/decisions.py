"""What the gate has decided and gathered in one pytest session, as one object in the config's stash: the GPU it
benchmarks on, the baseline it compares with, where a saved baseline goes, the rounds of each gpu_benchmark,
the verdicts, and the lines its report ends with. The hooks (gpubench.pytest_plugin) fill it in the order pytest
calls them: configure (gate.configure), the fixtures, pytest-benchmark's machine hooks, then the end of the
session (gate.finish)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest


@dataclass
class Decisions:
    fingerprint: dict | None = None
    """The GPU this session benchmarks on: the one a baseline was picked or saved for, else the fixture's."""
    notes: list[str] = field(default_factory=list)
    """Lines for the report's header."""
    save: tuple[Path, Path] | None = None
    """--gpu-save-baseline: (the file pytest-benchmark writes, the baseline it becomes once written in full)."""
    saved: str | None = None
    """The baseline this session saved."""
    floor_runs: int = 1
    """Processes that measure a saved baseline's floor, this one first (the others start when it ends)."""
    session: pytest.Session | None = None
    """The session, for the hooks that end it as failed after its own end (the terminal summary, unconfigure)."""
    baseline: tuple[str, dict] | None = None
    """(file name, its content) of the baseline compared with, as pytest-benchmark loaded it."""
    always: list[str] = field(default_factory=list)
    """Said with every verdict: speed settings that were allowed to differ from the baseline's."""
    runs: dict[str, dict] = field(default_factory=dict)
    """fullname -> this run's rounds, name and extra_info, for each gpu_benchmark that timed something."""
    compared: list = field(default_factory=list)
    """gate.against_baseline.Compared, one per benchmark of this run."""
    early: dict = field(default_factory=dict)
    """fullname -> the Compared a benchmark reached while it ran (to decide on its counters), kept for the end."""
    ending: list[tuple[str, bool]] = field(default_factory=list)
    """(line, red) for the end of the report."""
    started: float = field(default_factory=time.monotonic)
    """When the session was configured (time.monotonic): the command's start, near enough, for
    --gpu-baseline-seconds (what ran before it, python and pytest starting, is a second or two)."""

    def keep_run(self, benchmark, rounds_s: list[float]) -> None:
        """What one gpu_benchmark timed (pytest-benchmark's `benchmark` fixture), for the verdicts."""
        early = self.early.pop(benchmark.fullname, None)
        if rounds_s:
            self.runs[benchmark.fullname] = {
                "name": benchmark.name,
                "rounds": rounds_s,
                "extra_info": dict(benchmark.extra_info),
                "compared": early,
            }


KEY = pytest.StashKey[Decisions]()


def decisions(config) -> Decisions:
    """This session's decisions; empty the first time they are asked for."""
    found = config.stash.get(KEY, None)
    if found is None:
        found = config.stash[KEY] = Decisions()
    return found
