"""What a running watch says (gpubench.job.liveline): a log line per GPU, or one for all of many, in logfmt that a
parser reads back into the summary's own columns; a terminal's status area of constant height; and where each
goes (gpubench.job.speak.choose)."""

import math
import shlex

import pytest

from gpubench.job import speak
from gpubench.job.live import Snapshot
from gpubench.job.liveline import area_lines, cut, log_lines

ROW = {
    "gpu": 0,
    "phase": "train",
    "steps_per_s": 3.2149,
    "mfu_pct": 28.61,
    "tensor_ceiling_pct": 31.24,
    "gpu_util_pct": 100.0,
    "sm_active_pct": 97.14,
    "tensor_active_pct": 45.3,
    "dram_active_pct": 30.2,
    "power_w": 650.4,
    "verdict_rules": "tensor-part, mfu-low",
    "straggler_rank": None,
}


def parse(line: str) -> dict:
    """A logfmt line read back: shlex honours its double quotes and backslashes."""
    assert line.startswith("gpubench live ")
    return dict(word.split("=", 1) for word in shlex.split(line[len("gpubench live ") :]))


def snap(rows, phase="train", ranks=None) -> Snapshot:
    return Snapshot({}, rows, ranks or {}, phase, (10.0, 25.0) if rows else None)


def test_a_line_per_gpu_holds_the_summarys_columns_and_leaves_out_what_is_not_known():
    other = dict(ROW, gpu=1, mfu_pct=math.nan, tensor_ceiling_pct=math.nan, verdict_rules="no-steps")
    lines = log_lines(snap([ROW, other], ranks={0: "0", 1: ""}), 61.04, 60.0)
    first, second = (parse(line) for line in lines)
    assert first == {
        "elapsed_s": "61.0",
        "window_s": "60",
        "phase": "train",
        "gpu": "0",
        "rank": "0",
        "steps_per_s": "3.21",
        "mfu_pct": "28.6",
        "tensor_ceiling_pct": "31.2",
        "gpu_util_pct": "100",
        "sm_active_pct": "97.1",
        "tensor_active_pct": "45.3",
        "dram_active_pct": "30.2",
        "power_w": "650",
        "rules": "tensor-part,mfu-low",
    }
    assert "mfu_pct" not in second and "rank" not in second and second["rules"] == "no-steps"
    assert all(len(line) < 250 for line in lines)


def test_a_phase_name_from_the_job_is_quoted_and_can_move_no_cursor():
    name = 'eval "big" = 2\x1b[2J'
    line = log_lines(snap([ROW], phase=name), 5.0, 15.0)[0]
    assert "\x1b" not in line and parse(line)["phase"] == 'eval "big" = 2\\x1b[2J'
    assert parse(log_lines(snap([], phase="start-up"), 3.0, 15.0)[0]) == {
        "elapsed_s": "3.0",
        "window_s": "15",
        "phase": "start-up",
    }


def test_many_gpus_are_one_line_of_their_means_with_the_straggler_named():
    rows = [
        dict(
            ROW,
            gpu=g,
            sm_active_pct=50.0 if g == 3 else 90.0,
            verdict_rules="straggler" if g == 3 else "waiting-on-straggler",
            straggler_rank=3,
        )
        for g in range(8)
    ]
    (line,) = log_lines(snap(rows), 120.0, 60.0)
    got = parse(line)
    assert got["gpus"] == "8" and got["sm_active_pct"] == "85" and got["straggler_rank"] == "3"
    assert got["rules"] == "waiting-on-straggler:7,straggler:1" and "gpu" not in got


def test_the_status_area_keeps_its_height_and_fits_its_width():
    one = area_lines(snap([ROW], ranks={0: "0"}), 3725.0, 15.0, gpus=2)
    assert len(one) == 3 and one[0].startswith("gpubench watch 1:02:05  phase train  (the last 15 s")
    assert one[1].startswith("GPU 0 rank 0  3.21 steps/s  MFU 29% (tensor ceiling 31%)  GPU-Util 100% · SM active")
    assert one[2] == ""  # the second GPU has no row yet: its line is kept
    assert "waiting" in area_lines(snap([]), 1.0, 15.0, gpus=1)[0]
    many = area_lines(snap([dict(ROW, gpu=g) for g in range(6)]), 9.0, 15.0, gpus=6)
    assert len(many) == 3 and many[1].startswith("6 GPUs, means: 3.21 steps/s") and many[2].startswith("SM active")
    assert cut("ab漢字cd", 5) == "ab漢" and cut("abc", 10) == "abc"


@pytest.mark.parametrize(
    "quiet, env, tty, expected",
    [
        (True, {"TERM": "xterm"}, True, None),
        (False, {"TERM": "xterm"}, True, "area"),
        (False, {"TERM": "xterm", "CI": "true"}, True, "lines"),
        (False, {"TERM": "xterm", "CI": "0"}, True, "area"),
        (False, {"TERM": "dumb"}, True, "lines"),
        (False, {}, True, "lines"),
        (False, {"TERM": "xterm"}, False, "lines"),
    ],
)
def test_where_the_live_rows_go(monkeypatch, quiet, env, tty, expected):
    monkeypatch.setattr(speak.os, "isatty", lambda fd: tty)
    assert speak.choose(quiet, env) == expected
    assert speak.window_for(0.5) == 15.0 and speak.window_for(60.0) == 60.0 and speak.window_for(86400.0) == 300.0


def test_the_phases_numbers_so_far_follow_the_windows_on_both_forms():
    row = dict(ROW, phase_steps_per_s=3.1012, phase_mfu_pct=27.6)
    line = parse(log_lines(snap([row]), 90.0, 15.0)[0])
    assert (line["steps_per_s"], line["phase_steps_per_s"], line["mfu_pct"], line["phase_mfu_pct"]) == (
        "3.21",
        "3.1",
        "28.6",
        "27.6",
    )
    assert list(line).index("phase_steps_per_s") == list(line).index("steps_per_s") + 1
    area = area_lines(snap([row]), 90.0, 15.0, gpus=1)[1]
    assert "3.21 steps/s (3.1 so far)  MFU 29% (28% so far; tensor ceiling 31%)" in area
    assert "so far" not in area_lines(snap([ROW]), 90.0, 15.0, gpus=1)[1]  # a window with none: nothing said
