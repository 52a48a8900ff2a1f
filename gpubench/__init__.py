"""gpubench: what nvidia-smi's GPU-Util says, beside what the GPU really did.

For the user's own code (each loaded on first use, so `import gpubench` stays cheap and loads no torch):
`gpubench.mark(name)` and `gpubench.step(flops=None, bytes=None, tokens=None)` (gpubench.inside.markwriter),
`gpubench.count_flops(fn, ...)` and `gpubench.weight_bytes(model)` (gpubench.inside.flops), and
`with gpubench.recording(...) as rec:` (gpubench.job.inprocess.recording).
"""

__version__ = "0.2.0"

_LAZY = {
    "count_flops": "gpubench.inside.flops",
    "weight_bytes": "gpubench.inside.flops",
    "recording": "gpubench.job.inprocess",
}


def __getattr__(name: str):
    import importlib

    if name in ("mark", "step"):  # through the writer the watch's hook shares, where it runs in this process
        from gpubench.inside import writer

        value = getattr(writer(), name)
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'gpubench' has no attribute {name!r}")
    globals()[name] = value  # later lookups are plain attribute reads
    return value
