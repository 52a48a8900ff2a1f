"""Comparing a benchmark run with a saved baseline: the baseline file of this GPU model, the refusal to
compare across GPU models, and a verdict per benchmark that respects the noise.

A baseline is a pytest-benchmark JSON file named for the GPU model (`<dir>/h100-80gb-hbm3.json`) whose
`machine_info["gpu"]` holds the fingerprint of the GPU it was measured on. Two GPU models differ by tens of
percent on the same kernel: such a comparison is refused, never reported as a regression.

A verdict compares medians. The noise is the wider interquartile range of the two runs, and at least a
floor (a share of the baseline median) for what one run's IQR cannot show: clocks and temperature that
drift between runs. A change within the noise reads "same".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpubench.metrics import finite
from gpubench.record.rundir import slug

# What identifies the GPU a run was measured on; the model (NVML's name) decides whether runs compare.
FINGERPRINT_KEYS = ("name", "uuid", "memory_mib", "driver", "cuda_driver", "power_limit_w", "mig_mode")
NOISE_FLOOR_PCT = 2.0


def fingerprint(info: dict) -> dict:
    """The identifying facts of a GPU, from nvml.device_info (or the backend's superset of it)."""
    return {k: info.get(k) for k in FINGERPRINT_KEYS}


def baseline_path(directory: str | Path, gpu_name: str) -> Path:
    """The baseline file of a GPU model in a directory of baselines."""
    return Path(directory) / f"{slug(gpu_name)}.json"


def missing_baseline(directory: str | Path, gpu_name: str) -> str:
    """One sentence for a baseline directory without this GPU model's file."""
    path = baseline_path(directory, gpu_name)
    others = sorted(p.name for p in Path(directory).glob("*.json")) if Path(directory).is_dir() else []
    found = f"it holds {', '.join(others)}" if others else "it holds no baseline"
    return (f"no baseline for {gpu_name} in {directory} ({path.name} is missing; {found}): save one on this GPU "
            f"model with --gpu-save-baseline={directory}")


def model_mismatch(saved: dict, current: dict, where: str = "the baseline") -> str | None:
    """One sentence refusing a baseline measured on another GPU model, or None when the models match."""
    if saved.get("name") == current.get("name"):
        return None
    return (f"{where} was measured on {saved.get('name')} but this GPU is {current.get('name')}: timings of "
            f"different GPU models are not comparable, so compare against a baseline saved on "
            f"{current.get('name')} (--gpu-baseline=DIR picks DIR/{slug(current.get('name') or '')}.json)")


def differences(saved: dict, current: dict) -> list[str]:
    """What else differs between the baseline's GPU and this one (same model): worth a warning, not a refusal."""
    labels = {"driver": "driver", "cuda_driver": "CUDA driver", "power_limit_w": "power limit (W)",
              "mig_mode": "MIG mode"}
    return [f"{label} {saved.get(k)} -> {current.get(k)}" for k, label in labels.items()
            if k in saved and saved.get(k) != current.get(k)]


@dataclass(frozen=True)
class Verdict:
    word: str  # same | slower | faster
    change_pct: float  # (now - baseline) / baseline median
    noise_pct: float  # the change below which the verdict is "same"


def verdict(now_median: float, now_iqr: float, base_median: float, base_iqr: float,
            floor_pct: float = NOISE_FLOOR_PCT) -> Verdict:
    """same, slower or faster: the medians' difference against the wider IQR (at least floor_pct of the baseline)."""
    if not (finite(base_median) and base_median > 0 and finite(now_median)):
        raise ValueError("a verdict needs two positive medians")
    iqrs = [v for v in (now_iqr, base_iqr) if finite(v)]
    noise = max([*iqrs, floor_pct / 100 * base_median])
    diff = now_median - base_median
    word = "same" if abs(diff) <= noise else ("slower" if diff > 0 else "faster")
    return Verdict(word, 100 * diff / base_median, 100 * noise / base_median)


def pairs(flat_benchmarks: list[dict], keep=lambda bench: True) -> list[tuple[dict, dict]]:
    """(baseline, now) pairs from the rows pytest-benchmark groups: a row with a `path` came from a saved file,
    the row without one is this run's; both carry this run's extra_info."""
    now = {b["fullname"]: b for b in flat_benchmarks if b.get("path") is None and keep(b)}
    return [(b, now[b["fullname"]]) for b in flat_benchmarks if b.get("path") is not None and b["fullname"] in now]


def report_lines(pairs_: list[tuple[dict, dict]], floor_pct: float) -> list[str]:
    """One line per benchmark: baseline median -> now, the change, the noise, the verdict."""
    if not pairs_:
        return []
    width = max(len(now["name"]) for _, now in pairs_)
    lines = [f"median GPU time per call; a change within the noise (the wider IQR of the two runs, at least "
             f"{floor_pct:g}% of the baseline) reads same"]
    for base, now in pairs_:
        v = verdict(now["median"], now.get("iqr"), base["median"], base.get("iqr"), floor_pct)
        lines.append(f"{now['name']:<{width}}  {base['median'] * 1e3:#10.4g} ms -> {now['median'] * 1e3:#10.4g} ms  "
                     f"{v.change_pct:+7.1f}%  noise {v.noise_pct:4.1f}%  {v.word}   (vs {Path(base['path']).name})")
    return lines
