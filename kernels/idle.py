"""idle: nothing runs. The baseline every other row is read against."""

from __future__ import annotations

from .common import Prepared, Work

IMPLS = ("none",)
SIZES: dict = {}
STORY = ["Nothing ran. {said}, and SM activity read {sm_active_pct:.1f}%: this is the floor the other rows stand on."]


def prepare(impl: str = "none", device="cuda", seed: int = 0) -> Prepared:
    return Prepared(run=None, check=dict, work=Work(0.0, 0.0), unit=None, bound="none", launch="no kernel")
