"""The status area of `gpubench watch` in a real terminal: tmux runs the whole watch (behind a fake NVML,
tests/job/livewatch.py) from a shell; the tests read the pane and its scrollback (capture-pane), type into it
(send-keys), and hold the job's output to what it printed: every line whole and in order, the area below it while
the job runs, and the terminal the shell's own again afterwards (its margins, its line settings).

Nothing waits a fixed time: every check polls the pane until what it expects is there, within a deadline far
beyond any machine's pace. Each test runs a tmux server of its own (-L, a name no one else uses), ended with it.
"""

import shlex
import shutil
import subprocess
import sys
import time
import uuid

import pytest
from livewatch import environment, watch_argv

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
DEADLINE_S = 90.0
ROWS, COLUMNS = 30, 160
HEAD = "gpubench watch 0:"  # the area's first line
AFTER = 40  # lines the shell prints after the watch: on the bottom row once the margins are the terminal's again
# a line at a time, of many lengths, until the file named by its argument exists; then a last line
PRINTING = """
import sys, time, gpubench
from pathlib import Path
gpubench.mark("train")
i = 0
while not Path(sys.argv[1]).exists() and i < 20000:
    print(f"line {i:05d} " + "x" * (i % 97), flush=True)
    time.sleep(0.01)
    gpubench.step(flops=1e13)
    i += 1
print("the job printed", i, "lines", flush=True)
"""
READING = """
import sys, time, gpubench
gpubench.mark("train")
print("type a line:", flush=True)
line = sys.stdin.readline()
print(f"the job read: {line.strip()!r}", flush=True)
for _ in range(20):
    time.sleep(0.05)
    gpubench.step(flops=1e13)
"""


class Pane:
    def __init__(self, tmp_path, options: list[str], job: str, *args: str, **env):
        self.server = f"gpubench-live-test-{uuid.uuid4().hex[:12]}"
        watch = shlex.join(watch_argv(tmp_path, tmp_path / "run", options, [sys.executable, "-c", job, *args]))
        after = (
            f"echo EXITED $?; for i in $(seq 1 {AFTER}); do echo after $i; done; "
            "stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e echo | tr '\\n' ' '; echo; sleep 600"
        )
        self.tmux(
            "new-session",
            "-d",
            "-s",
            "w",
            "-x",
            str(COLUMNS),
            "-y",
            str(ROWS),
            f"{watch}; {after}",
            env=environment(**env),
        )

    def tmux(self, *args, env=None) -> str:
        done = subprocess.run(
            [TMUX, "-L", self.server, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=DEADLINE_S,
            env=env,
        )
        assert done.returncode == 0 or args[0] == "kill-server", done.stderr
        return done.stdout

    def screen(self) -> list[str]:
        return self.tmux("capture-pane", "-p", "-t", "w").split("\n")[:ROWS]

    def history(self) -> list[str]:
        return self.tmux("capture-pane", "-p", "-S", "-", "-t", "w").splitlines()

    def until(self, holds, what: str, also=lambda screen: None) -> list[str]:
        """The screen once holds(screen); also(screen) is checked on every screen seen on the way."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            screen = self.screen()
            also(screen)
            if holds(screen):
                return screen
            if time.monotonic() > deadline:
                pytest.fail(f"the pane never showed {what} within {DEADLINE_S:g} s; it shows:\n" + "\n".join(screen))
            time.sleep(0.1)

    def close(self) -> None:
        self.tmux("kill-server")


@pytest.fixture
def panes():
    made = []

    def start(*args, **env) -> Pane:
        made.append(Pane(*args, **env))
        return made[-1]

    yield start
    for pane in made:
        pane.close()


def area(screen: list[str]) -> bool:
    """The status area on the bottom two rows, the live row of GPU 0 with its numbers (the fake GPU's readings)."""
    return screen[-2].startswith(HEAD) and screen[-1].startswith("GPU 0  ") and "SM active 97%" in screen[-1]


def printed(screen: list[str]) -> int:
    """The number of the job's latest line on the screen; -1 before its first."""
    return max((int(line.split()[1]) for line in screen if line.startswith("line ")), default=-1)


def given_back(pane: Pane, ended: str) -> list[str]:
    """After the watch: no area left, the shell's lines reach the bottom row (its margins are the terminal's),
    and the line settings are the shell's (canonical input, echo)."""
    screen = pane.until(lambda s: "icanon echo" in "\n".join(s), "the shell's line settings after the watch")
    text = pane.history()
    assert ended in text and not any(line.startswith(HEAD) for line in text)
    assert f"after {AFTER}" in screen[-3:-1]  # the last rows: `after N`, the settings, the cursor's row
    return text


def test_the_area_sits_below_a_job_that_prints_quickly_and_every_line_stays_whole(tmp_path, panes):
    done = tmp_path / "done"
    pane = panes(tmp_path, [], PRINTING, str(done))
    screen = pane.until(lambda s: area(s) and printed(s) >= 0, "the area below the job's lines")
    assert "phase train" in screen[-2] and "GPU-Util 100%" in screen[-1]
    pane.until(lambda s: printed(s) >= 300, "300 lines of the job")
    done.write_text("")
    text = given_back(pane, "EXITED 0")
    n = int(next(line for line in text if line.startswith("the job printed")).split()[3])
    lines = [line for line in text if line.startswith("line ")]
    assert lines == [f"line {i:05d} " + "x" * (i % 97) if i % 97 else f"line {i:05d}" for i in range(n)]
    assert "medians over each phase" in "\n".join(text)


def test_a_job_that_reads_stdin_gets_the_line_typed(tmp_path, panes):
    pane = panes(tmp_path, [], READING)
    pane.until(lambda s: "type a line:" in s and area(s), "the job's prompt and the area")
    pane.tmux("send-keys", "-t", "w", "hello from the test", "Enter")
    pane.until(lambda s: "the job read: 'hello from the test'" in s, "the job's answer")
    given_back(pane, "EXITED 0")


def test_ctrl_c_ends_the_watch_and_gives_the_terminal_back(tmp_path, panes):
    pane = panes(tmp_path, [], PRINTING, str(tmp_path / "never"))
    pane.until(area, "the area")
    pane.tmux("send-keys", "-t", "w", "C-c")
    text = given_back(pane, "EXITED 130")
    assert any("run directory (interrupted)" in line for line in text)


def test_quiet_draws_no_area_and_ci_says_lines_instead(tmp_path, panes):
    def never(screen):
        assert not any(line.startswith(HEAD) for line in screen), "\n".join(screen)

    done = tmp_path / "done"
    pane = panes(tmp_path, ["--quiet"], PRINTING, str(done))
    pane.until(lambda s: printed(s) >= 300, "300 lines of the job", also=never)
    done.write_text("")
    given_back(pane, "EXITED 0")

    (tmp_path / "ci").mkdir()
    pane = panes(tmp_path / "ci", ["--every", "0.5"], READING, CI="true")
    pane.until(
        lambda s: any(line.startswith("gpubench live ") and "phase=train" in line for line in s),
        "a live line, CI being set",
        also=never,
    )
    pane.tmux("send-keys", "-t", "w", "go", "Enter")
    given_back(pane, "EXITED 0")
