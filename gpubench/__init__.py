"""gpubench: what nvidia-smi's GPU-Util says, beside what the GPU really did.

For the user's own code (each loaded on first use, so `import gpubench` stays cheap and loads no torch):
`gpubench.mark(name)` and `gpubench.step(flops=None, bytes=None, tokens=None)` (gpubench.job.markwriter),
`gpubench.count_flops(fn, ...)` and `gpubench.weight_bytes(model)` (gpubench.truth.flops), and
`with gpubench.recording(...) as rec:` (gpubench.job.watchcmd.recording).
"""

__version__ = "0.2.0"

_LAZY = {"mark": "gpubench.job.markwriter", "step": "gpubench.job.markwriter", "count_flops": "gpubench.truth.flops",
         "weight_bytes": "gpubench.truth.flops", "recording": "gpubench.job.watchcmd"}


def __getattr__(name: str):
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later lookups are plain attribute reads
        return value
    raise AttributeError(f"module 'gpubench' has no attribute {name!r}")
