"""gpubench top's live view in a real terminal: tmux runs it against five fake GPUs (fakenvml) and two real
processes; the tests read the pane (capture-pane), press keys (send-keys) and see the frame answer.

Nothing waits a fixed time: every check polls the pane until what it expects is there, within a deadline
far beyond any machine's pace, so a slow or busy machine passes too. Each test runs a tmux server of its own
(-L, a name no one else uses), ended with the test.
"""

import json
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from fakenvml import machine, order

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
HERE = Path(__file__).resolve().parent
DEADLINE_S = 60.0


class Pane:
    """One tmux server with one window running `command` at a size of columns x rows."""

    def __init__(self, command: str, columns: int = 160, rows: int = 40):
        self.server = f"gpubench-top-test-{uuid.uuid4().hex[:12]}"
        self.tmux("new-session", "-d", "-s", "top", "-x", str(columns), "-y", str(rows), command)

    def tmux(self, *args) -> str:
        done = subprocess.run(
            [TMUX, "-L", self.server, "-f", "/dev/null", *args], capture_output=True, text=True, timeout=DEADLINE_S
        )
        assert done.returncode == 0 or args[0] == "kill-server", done.stderr
        return done.stdout

    def text(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "top")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "top", *keys)

    def until(self, holds, what: str) -> str:
        """The pane's text once holds(text) is true; fails with the last screen after the deadline."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            text = self.text()
            if holds(text):
                return text
            if time.monotonic() > deadline:
                pytest.fail(f"the pane never showed {what} within {DEADLINE_S:g} s; it shows:\n{text}")
            time.sleep(0.1)

    def close(self) -> None:
        self.tmux("kill-server")


@pytest.fixture
def processes():
    """Two real processes for the fake GPUs to hold, so that their user and command come from /proc."""
    started = [subprocess.Popen(["sleep", str(s)]) for s in (3601, 3602)]
    yield [p.pid for p in started]
    for p in started:
        p.kill()
        p.wait()


@pytest.fixture
def live(tmp_path, processes):
    """A function that starts `gpubench top ARGS` in tmux; after top, the shell says its exit code and
    whether the terminal is back to its own settings (canonical input, echo)."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(machine(*processes)))
    panes = []

    def start(*args: str, columns: int = 160, rows: int = 40) -> Pane:
        top = " ".join([sys.executable, str(HERE / "fakenvml.py"), str(spec), "top", *args])
        after = "echo top exited with $?; stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e echo | tr '\\n' ' '"
        pane = Pane(f"cd {HERE}; {top}; {after}; sleep 600", columns, rows)
        panes.append(pane)
        return pane

    yield start
    for pane in panes:
        pane.close()


def test_the_live_view_shows_the_gpus_and_processes_sorts_on_a_key_and_quits_on_q(live, processes):
    pane = live("--interval", "0.2")
    text = pane.until(lambda t: len(order(t)) == 5, "a frame of five GPUs")
    assert order(text) == [0, 1, 2, 3, 4] and "sorted by GPU index" in text
    assert text.splitlines()[0].startswith("gpubench top ") and "(keys i u s o t d p m sort, q quits)" in text
    rows = {
        int(line[:3]): line.split() for line in text.splitlines() if line[:3].strip().isdigit() and line[3:5] == "  "
    }
    assert [rows[i][1] for i in range(5)] == ["idle", "fake-busy", "compute-bound", "host-bound", "memory-bound"]
    assert rows[1][2:4] == ["100%", "0.76%"] and rows[3][3:7] == ["–", "–", "–", "–"]
    spinner, trainer = processes
    assert f"{spinner}  " in text and "sleep 3601" in text and text.count("sleep 3602") == 2  # on GPUs 2 and 3
    assert "fake-busy      GPU-Util high" in text and "note: GPU 3: SM active, occupancy, tensor and DRAM" in text

    pane.keys("s")
    text = pane.until(lambda t: order(t) == [4, 2, 1, 0, 3], "the GPUs by SM active, largest first")
    assert "sorted by SM active" in text
    pane.keys("p")
    pane.until(lambda t: order(t) == [2, 4, 3, 1, 0] and "sorted by power" in t, "the GPUs by power")
    pane.keys("i")
    pane.until(lambda t: order(t) == [0, 1, 2, 3, 4] and "sorted by GPU index" in t, "the GPUs by index again")

    pane.keys("q")
    text = pane.until(lambda t: "top exited with" in t, "top ending")
    assert "top exited with 0" in text
    assert "gpubench top " not in text  # the alternate screen left: the shell's screen is back as it was
    assert pane.until(lambda t: "icanon echo" in t, "the terminal's own settings back")


def test_a_small_terminal_gets_a_frame_cut_to_fit_never_wrapped(live):
    pane = live("--interval", "0.2", columns=80, rows=16)
    text = pane.until(lambda t: "more lines" in t, "a frame cut to 16 rows")
    lines = text.splitlines()
    assert lines[0].startswith("gpubench top ") and order(text)[:3] == [0, 1, 2]
    assert len(lines) <= 16 and lines[15].startswith("… ") and "more lines" in lines[15]
    pane.keys("C-c")  # Ctrl-C ends it as q does
    text = pane.until(lambda t: "top exited with" in t, "top ending on Ctrl-C")
    assert "top exited with 0" in text and "Traceback" not in text


def test_another_key_does_nothing_and_the_frame_keeps_refreshing(live):
    pane = live("--interval", "0.2", "--sort", "power")
    first = pane.until(lambda t: len(order(t)) == 5, "a frame")
    clock = first.splitlines()[0].split()[3]
    pane.keys("x", "Up", "Enter")
    text = pane.until(lambda t: t.splitlines()[0].split()[3] != clock, "the clock of a later refresh")
    assert order(text) == [2, 4, 3, 1, 0] and "sorted by power" in text and "exited" not in text
    pane.keys("q")
    assert "top exited with 0" in pane.until(lambda t: "top exited with" in t, "top ending")
