"""Where the optimizer hook could not see: each Python process of the job that used a GPU and wrote no line of
marks, and why, read from its command line and environment while it ran (/proc/<pid>/cmdline, environ).

The bootstrap reaches a process only through PYTHONPATH and Python's start-up import of sitecustomize: a
Python run isolated (-I) or told to ignore the environment (-E) or to skip site (-S), a launcher that
clears the environment (env -i) or replaces PYTHONPATH, or a sitecustomize.py of the job's earlier on
PYTHONPATH, each leaves the process unwatched by it. A run that says "hook on" and recorded nothing says so.
"""

from __future__ import annotations

import os
from pathlib import Path

from gpubench.inside.autohook import ENV as AUTO, MARKS, enabled

SHOWN = 3  # processes named in the warning; the manifest lists them all


def inspect(pid: int, proc: Path = Path("/proc")) -> dict | None:
    """What tells whether the hook could reach pid: its command line and the variables it depends on; None
    where they cannot be read (gone, another user's)."""
    try:
        argv = [a.decode(errors="replace") for a in (proc / str(pid) / "cmdline").read_bytes().split(b"\0") if a]
        env = dict(
            line.decode(errors="replace").partition("=")[::2]
            for line in (proc / str(pid) / "environ").read_bytes().split(b"\0")
            if b"=" in line
        )
    except OSError:
        return None
    return {"pid": pid, "argv": argv[:20], "env": {k: env[k] for k in ("PYTHONPATH", MARKS, AUTO) if k in env}}


def flags(argv: list[str]) -> set[str]:
    """The one-letter options of a Python command line, up to its script, -c or -m (-W and -X take a value)."""
    out: set[str] = set()
    i = 1
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-") or arg == "-" or arg.startswith("--"):
            break
        for k, c in enumerate(arg[1:]):
            if c in "cm":
                return out
            if c in "WX":
                i += k == len(arg) - 2  # its value is the next argument
                break
            out.add(c)
        i += 1
    return out


def reason(seen: dict, bootstrap: str) -> str | None:
    """Why the hook did not reach the process `seen` describes; None where it should have (or it is no Python)."""
    argv, env = seen.get("argv") or [], seen.get("env") or {}
    if not argv or "python" not in os.path.basename(argv[0]):
        return None
    given = flags(argv)
    for letter, why in (
        ("I", "its Python ran isolated (-I), which ignores PYTHONPATH"),
        ("E", "its Python ignored the environment (-E)"),
        ("S", "its Python skipped the site module (-S), which imports sitecustomize"),
    ):
        if letter in given:
            return why
    if MARKS not in env:
        return f"its environment lost {MARKS} (a launcher that clears or replaces the environment, as env -i does)"
    if not enabled(env):
        return None  # turned off, and said so already
    path = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    ours = [i for i, p in enumerate(path) if os.path.basename(p.rstrip("/")) == "bootstrap" or p == bootstrap]
    if not ours:
        return "its PYTHONPATH no longer holds gpubench's bootstrap (a launcher replaced it rather than adding to it)"
    for p in path[: ours[0]]:
        if os.path.isfile(os.path.join(p, "sitecustomize.py")):
            return (
                f"a sitecustomize.py in {p} comes before gpubench's on its PYTHONPATH, and Python imports only "
                "the first"
            )
    return None


def blind(seen: dict[int, dict], wrote: set[int], bootstrap: str) -> list[dict]:
    """The processes seen on a GPU that wrote no line of marks, each with why the hook missed it."""
    out = []
    for pid, facts in sorted(seen.items()):
        if pid in wrote:
            continue
        why = reason(facts, bootstrap)
        if why is not None:
            out.append({"pid": pid, "argv": facts.get("argv", []), "why": why})
    return out


def sentence(found: list[dict]) -> str:
    """One warning for the processes the hook missed."""
    import shlex

    named = "; ".join(f"pid {p['pid']} ({shlex.join(p['argv'])[:80]}): {p['why']}" for p in found[:SHOWN])
    more = f"; and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    return (
        f"gpubench's optimizer hook did not reach {len(found)} process{'es' if len(found) > 1 else ''} that "
        f"used a GPU, so no step of {'theirs' if len(found) > 1 else 'its'} is recorded ({named}{more}); "
        "gpubench.step() in the job records them whatever starts it"
    )


NO_STEP = (
    "the optimizer hook was on and recorded no step: the job steps no PyTorch optimizer (inference, "
    "evaluation, JAX), or its optimizer's step bypasses PyTorch's step hooks (a step method replaced "
    "after the optimizer was made); gpubench.step() in the job records steps"
)
