"""gpubench: what nvidia-smi's GPU-Util says, beside what the GPU really did.

For the user's own code (each loaded on first use, so `import gpubench` stays cheap and loads no torch):
`gpubench.mark(name)` and `gpubench.step(flops=None)` (gpubench.marks), `gpubench.count_flops(fn, ...)`
(gpubench.flops), and `with gpubench.recording(...) as rec:` (gpubench.watch.recording).
"""

__version__ = "0.2.0"

_LAZY = {"mark": "gpubench.marks", "step": "gpubench.marks", "count_flops": "gpubench.flops",
         "recording": "gpubench.watch"}


def __getattr__(name: str):
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later lookups are plain attribute reads
        return value
    raise AttributeError(f"module 'gpubench' has no attribute {name!r}")
