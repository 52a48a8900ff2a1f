"""Jobs that do hostile things, generated: steps and marks between closing every descriptor, writing files of
their own, forking children that step and exit, moving the marks file away, changing directory, run
isolated (-I) or not. Whatever the order, the job exits as it would, its own files hold exactly what it
wrote, nothing of gpubench's reaches its output, and every step is recorded once, the children's too.

CI tries EXAMPLES jobs, the same ones on every run (derandomized); GPUBENCH_FUZZ_EXAMPLES=N tries N.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpubench.inside import markwriter
from gpubench.job import hookenv
from gpubench.job.markfile import read_all
from gpubench.job.markreader import Steps

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("GPUBENCH_FUZZ_EXAMPLES", "20"))

ACTIONS = st.one_of(
    st.tuples(st.just("step"), st.integers(1, 30)),
    st.tuples(st.just("mark"), st.sampled_from(["train", "eval", "x\ty", "é"])),
    st.tuples(st.just("closefds")),
    st.tuples(st.just("own"), st.integers(0, 2)),
    st.tuples(st.just("fork"), st.integers(0, 12)),
    st.tuples(st.just("move")),
    st.tuples(st.just("chdir")),
)


def script(actions, marks: Path, own: Path) -> tuple[str, int, dict]:
    """The job's code, the steps it takes (its children's too) and what each of its own files must hold."""
    lines = ["import os, sys, gpubench", "gpubench.mark('start')"]
    steps, files, moved = 0, {}, 0
    for action in actions:
        kind = action[0]
        if kind == "step":
            lines.append(f"for _ in range({action[1]}): gpubench.step()")
            steps += action[1]
        elif kind == "mark":
            lines.append(f"gpubench.mark({action[1]!r})")
        elif kind == "closefds":
            lines.append("os.closerange(3, 4096)")
        elif kind == "own":
            path = own / f"own{action[1]}.txt"
            text = f"line {len(files.get(path, ''))}\n"
            files[path] = files.get(path, "") + text
            lines.append(f"f = open({str(path)!r}, 'a'); gpubench.step(); f.write({text!r}); f.close()")
            steps += 1
        elif kind == "fork":
            lines.append(
                f"pid = os.fork()\nif pid == 0:\n    [gpubench.step() for _ in range({action[1]})]\n"
                "    sys.exit(0)\nos.waitpid(pid, 0)"
            )
            steps += action[1]
        elif kind == "move":
            moved += 1
            lines.append(f"os.path.exists({str(marks)!r}) and os.rename({str(marks)!r}, {str(marks)!r} + '.{moved}')")
        elif kind == "chdir":
            lines.append(f"os.chdir({str(own)!r})")
    lines.append("print('done')")
    return "\n".join(lines) + "\n", steps, files


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(actions=st.lists(ACTIONS, max_size=8), isolated=st.booleans())
def test_a_hostile_job_is_never_harmed_and_its_steps_are_recorded_once(tmp_path_factory, actions, isolated):
    tmp = tmp_path_factory.mktemp("job")
    marks, own = tmp / "marks.tsv", tmp / "own"
    own.mkdir()
    code, steps, files = script(actions, marks, own)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUBENCH_")}
    env.update(PYTHONPATH=str(ROOT), **{markwriter.ENV: str(marks)})
    hook = hookenv.prepare(env)
    try:
        done = subprocess.run(
            [sys.executable, *(["-I"] if isolated else []), "-c", code],
            env=env,
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        hookenv.release(hook)
    assert done.returncode == 0 and done.stdout == "done\n" and "Traceback" not in done.stderr, done.stderr
    for path, text in files.items():
        assert path.read_text() == text
    every = [p for p in tmp.glob("marks.tsv*")]
    recorded = sum(e.n for p in every for e in read_all(p) if isinstance(e, Steps))
    assert recorded == steps, textwrap.indent(code, "  ")
