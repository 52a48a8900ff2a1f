"""Metric sources: each reads some metric columns for a set of GPUs.

Every source has the same few methods, so the sampler can treat them alike and tests can replace
any of them with a fake, an empty source or a replay of a recorded run.
"""

from __future__ import annotations


class SourceUnavailable(Exception):
    """This source cannot run on this machine; the message says why in one sentence."""


class Source:
    name = "source"
    columns: tuple[str, ...] = ()
    # Sources that run their own process (dcgmi, nvidia-smi) refresh at their own pace.
    min_interval_s = 0.0

    def open(self, gpus: list[int]) -> None:
        """Prepare to read `gpus`; raise SourceUnavailable with a one-sentence reason."""

    def read(self) -> dict[int, dict[str, float]]:
        """Latest values: {gpu index: {column: value}}. A value this source lacks is NaN or absent."""
        return {}

    def close(self) -> None:
        """Release everything; safe to call twice."""


class NullSource(Source):
    """A source with nothing to say: lets the sampler run (and be tested) with no GPU."""

    name = "null"


def build_sources(names: list[str], **options) -> list[Source]:
    """Source objects for the given names (nvml, gpm, dcgm, smi)."""
    from .dcgm import DcgmSource
    from .gpm import GpmSource
    from .nvml_source import NvmlSource
    from .smi import SmiSource

    factories = {"nvml": NvmlSource, "gpm": GpmSource, "dcgm": DcgmSource, "smi": SmiSource}
    unknown = [n for n in names if n not in factories]
    if unknown:
        raise ValueError(f"unknown source {unknown[0]!r}; choose from {', '.join(factories)}")
    return [factories[n](**options.get(n, {})) for n in names]
