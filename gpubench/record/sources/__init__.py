"""Metric sources: each reads some metric columns for a set of GPUs (NVML indices).

Every source has the same few methods, so the sampler can treat them alike and tests can replace
any of them with a fake, an empty source or a replay of a recorded run. Each declares the shortest
interval at which its values are fresh (`min_interval_s`) and what one step of each value means
(`resolution`); the sampler and the source policy read both, and the manifest records them.
"""

from __future__ import annotations


class SourceUnavailable(Exception):
    """This source cannot run on this machine; the message says why in one sentence."""


class Source:
    name = "source"
    columns: tuple[str, ...] = ()
    min_interval_s = 0.0
    resolution: dict[str, str] = {}

    def open(self, gpus: list[int]) -> None:
        """Prepare to read `gpus`; raise SourceUnavailable with a one-sentence reason."""

    def read(self) -> dict[int, dict[str, float]]:
        """Values for the interval since the last read: {gpu: {column: value}}; missing ones NaN or absent."""
        return {}

    def close(self) -> None:
        """Release everything; safe to call twice."""


class NullSource(Source):
    """A source with nothing to say: lets the sampler run (and be tested) with no GPU."""

    name = "null"


def source_class(name: str) -> type[Source]:
    from .cupti import CuptiSource
    from .dcgm import DcgmSource
    from .gpm import GpmSource
    from .nvml_source import NvmlSource
    from .smi import SmiSource

    classes = {"nvml": NvmlSource, "gpm": GpmSource, "dcgm": DcgmSource, "cupti": CuptiSource, "smi": SmiSource}
    if name not in classes:
        raise ValueError(f"unknown source {name!r}; choose from {', '.join(classes)}")
    return classes[name]
