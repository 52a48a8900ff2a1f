"""The forward hook of a process (gpubench.inside.forwards): installed once, when torch's optimizers load
(gpubench.inside.autohook), and a forked child's copy left with no step under way and no count open.
"""

from __future__ import annotations

import os

from .forwards import Forwards, _say

_forwards: Forwards | None = None


def install(count: bool, optimizer, busy) -> None:
    """Start finding the model of this process, once torch.optim.optimizer (`optimizer`) has loaded; once a
    process. busy(): whether the optimizer hook is counting a step now."""
    global _forwards
    if _forwards is not None:
        return
    try:
        import torch

        from . import markwriter
        from .flops import counting, weight_bytes

        found = Forwards(torch, markwriter, counting if count else None, weight_bytes, busy)
        found.start(optimizer)
        _forwards = found
    except Exception as err:  # noqa: BLE001
        _say(
            f"the forward hook could not be installed ({type(err).__name__}: {err}); this process runs on "
            "unwatched by it"
        )


def _forked() -> None:
    """A forked child (a DataLoader's worker) starts with no step under way, and leaves a count it was copied in."""
    found = _forwards
    if found is None:
        return
    try:
        found.pending = found.group = None
        if found.count is not None:
            found._finish(force=True)
    except Exception:  # noqa: BLE001 -- in a fresh child, nothing may reach the job
        pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
