"""The watched command's environment for the optimizer hook: the bootstrap first on its PYTHONPATH, or the
hook turned off, and what was done, for the manifest.

PYTHONPATH is split at os.pathsep: a bootstrap whose path holds one (gpubench installed under a directory
named "a:b") is reached through a link in a directory of its own that holds none, removed when the watch ends.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from gpubench.inside import autohook
from gpubench.inside.bootstrap import BOOTSTRAP


def prepare(env: dict, on: bool = True) -> dict:
    """Put the bootstrap first on the command's PYTHONPATH in `env` (on), or turn the hook off there; what
    was done, for the manifest (its "link", where one was made, is for release())."""
    if not on:
        env[autohook.ENV] = "0"
        return {"hook": "off", "why": "--no-auto"}
    if not autohook.enabled(env):
        return {"hook": "off", "why": f"{autohook.ENV}={env.get(autohook.ENV)} in the command's environment"}
    facts = {"hook": "on", "bootstrap": BOOTSTRAP}
    where = BOOTSTRAP
    if os.pathsep in BOOTSTRAP:
        where = _linked()
        if where is None:
            env[autohook.ENV] = "0"
            return {
                "hook": "off",
                "why": f"the bootstrap's path holds {os.pathsep!r}, which PYTHONPATH cannot hold, "
                "and no directory could be made to link it from",
            }
        facts["link"] = where
    env["PYTHONPATH"] = os.pathsep.join([where, *filter(None, [env.get("PYTHONPATH")])])
    facts["flops"] = "one step counted" if autohook.counting(env) else "not counted"
    return facts


def release(facts: dict | None) -> None:
    """Remove the link directory prepare() made, if any."""
    link = (facts or {}).get("link")
    if link:
        shutil.rmtree(link, ignore_errors=True)


def _linked() -> str | None:
    """A new directory whose path holds no os.pathsep, with sitecustomize.py linked to the bootstrap's."""
    try:
        where = tempfile.mkdtemp(prefix="gpubench-hook-")
        if os.pathsep in where:
            os.rmdir(where)
            return None
        os.symlink(os.path.join(BOOTSTRAP, "sitecustomize.py"), os.path.join(where, "sitecustomize.py"))
        return where
    except OSError:
        return None
