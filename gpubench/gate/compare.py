"""Baselines per GPU: the file of this GPU model, the checks that it is whole, and the refusal to compare
runs of GPUs that differ in what sets their speed.

A baseline is a pytest-benchmark JSON file named for the GPU model (`<dir>/h100-80gb-hbm3.json`) whose
`machine_info["gpu"]` holds the fingerprint of the GPU it was measured on. Another model, another memory
size (two parts share the name "NVIDIA GH200 480GB") or another MIG mode differ by tens of percent on the
same kernel: such a comparison is refused, never reported as a regression. Another power limit,
application clock or ECC mode is refused too, unless the user allows it, and then said with every
verdict. Another driver is worth a note.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from gpubench.record.rundir import slug

# What identifies the GPU a run was measured on; the model (NVML's name) decides whether runs compare.
FINGERPRINT_KEYS = (
    "name",
    "uuid",
    "memory_mib",
    "driver",
    "cuda_driver",
    "power_limit_w",
    "mig_mode",
    "app_sm_clock_mhz",
    "app_mem_clock_mhz",
    "ecc",
)
# Settings that change a GPU's speed: refused unless --gpu-allow-different-limits, then said in every line.
LIMITS = {
    "power_limit_w": "power limit (W)",
    "app_sm_clock_mhz": "application SM clock (MHz)",
    "app_mem_clock_mhz": "application memory clock (MHz)",
    "ecc": "ECC",
}
NOTED = {"driver": "driver", "cuda_driver": "CUDA driver"}
MEMORY_TOLERANCE = 0.01  # drivers reserve a version-dependent few MiB; GH200's two parts differ by half


class BaselineError(ValueError):
    """A baseline file that cannot be compared with; the message is one sentence."""


def fingerprint(info: dict) -> dict:
    """The identifying facts of a GPU, from nvml.device_info and nvml.speed_settings (or a superset)."""
    return {k: info.get(k) for k in FINGERPRINT_KEYS}


def baseline_path(directory: str | Path, gpu_name: str) -> Path:
    """The baseline file of a GPU model in a directory of baselines."""
    return Path(directory) / f"{slug(gpu_name)}.json"


def missing_baseline(directory: str | Path, gpu_name: str) -> str:
    """One sentence for a baseline directory without this GPU model's file."""
    path = baseline_path(directory, gpu_name)
    others = sorted(p.name for p in Path(directory).glob("*.json")) if Path(directory).is_dir() else []
    found = f"it holds {', '.join(others)}" if others else "it holds no baseline"
    return (
        f"no baseline for {gpu_name} in {directory} ({path.name} is missing; {found}): save one on this GPU "
        f"model with --gpu-save-baseline={directory}"
    )


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _damage(data) -> str | None:
    """What makes a parsed baseline unusable, or None: the parts pytest-benchmark and the verdict read."""
    if not isinstance(data, dict):
        return "holds no JSON object"
    if not isinstance(data.get("machine_info"), dict):
        return "has no machine_info"
    benches = data.get("benchmarks")
    if not isinstance(benches, list) or not benches:
        return "holds no benchmarks"
    for i, bench in enumerate(benches):
        stats = bench.get("stats") if isinstance(bench, dict) else None
        if not isinstance(bench, dict) or not isinstance(bench.get("fullname"), str) or not isinstance(stats, dict):
            return f"has a benchmark (number {i + 1}) without a name or statistics"
        if not _positive(stats.get("median")):
            return f"has no positive median for {bench['fullname']}"
        if not (_positive(stats.get("mean")) or _positive(stats.get("ops"))):  # pytest-benchmark skips such a file
            return f"has no positive mean for {bench['fullname']}"  # with a warning: nothing would be compared
        rounds = stats.get("data")
        if rounds is not None and not (isinstance(rounds, list) and all(_positive(x) for x in rounds)):
            return f"has round times for {bench['fullname']} that are not positive numbers"
    section = data.get("gpubench")
    if section is not None and not (isinstance(section, dict) and isinstance(section.get("reruns", []), list)):
        return "has a damaged gpubench section"
    return None


def load_baseline(path: str | Path) -> dict:
    """A baseline file, read and checked whole; BaselineError (one sentence) for any other file: a gate that
    could not read its baseline must stop, not pass with nothing compared."""
    try:
        text = Path(path).read_text(encoding="utf8")
    except (OSError, UnicodeDecodeError) as err:
        raise BaselineError(f"the baseline {path} cannot be read ({getattr(err, 'strerror', None) or err})") from None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as err:
        what = "is empty" if not text.strip() else f"is not valid JSON ({err})"
        raise BaselineError(f"the baseline {path} {what}: save it again with --gpu-save-baseline") from None
    damage = _damage(data)
    if damage:
        raise BaselineError(f"the baseline {path} {damage}: save it again with --gpu-save-baseline")
    return data


def model_mismatch(saved: dict, current: dict, where: str = "the baseline") -> str | None:
    """One sentence refusing a baseline measured on another GPU model, or None when the models match."""
    if saved.get("name") == current.get("name"):
        return None
    return (
        f"{where} was measured on {saved.get('name')} but this GPU is {current.get('name')}: timings of "
        f"different GPU models are not comparable, so compare against a baseline saved on "
        f"{current.get('name')} (--gpu-baseline=DIR picks DIR/{slug(current.get('name') or '')}.json)"
    )


def part_mismatch(saved: dict, current: dict, where: str = "the baseline") -> str | None:
    """One sentence refusing a baseline of the same name but another memory size or MIG mode, or None."""
    a, b = saved.get("memory_mib"), current.get("memory_mib")
    if _positive(a) and _positive(b) and abs(a - b) > MEMORY_TOLERANCE * max(a, b):
        return (
            f"{where} was measured on a {saved.get('name')} with {a:.0f} MiB of memory but this one has "
            f"{b:.0f} MiB: parts that share a name but not their memory differ in bandwidth, so keep a "
            f"baseline of this part in a directory of its own (--gpu-save-baseline=DIR)"
        )
    if (
        saved.get("mig_mode") is not None
        and current.get("mig_mode") is not None
        and bool(saved["mig_mode"]) != bool(current["mig_mode"])
    ):
        on = {True: "on", False: "off"}
        return (
            f"{where} was measured with MIG {on[bool(saved['mig_mode'])]} but MIG is "
            f"{on[bool(current['mig_mode'])]} on this GPU: a GPU split into instances and a whole GPU are "
            f"not comparable, so save a baseline in this mode (--gpu-save-baseline=DIR)"
        )
    return None


def _changed(saved: dict, current: dict, labels: dict) -> list[str]:
    return [
        f"{label} {saved.get(k)} -> {current.get(k)}"
        for k, label in labels.items()
        if saved.get(k) is not None and current.get(k) is not None and saved.get(k) != current.get(k)
    ]


def limits_changed(saved: dict, current: dict) -> list[str]:
    """The speed settings (power limit, application clocks, ECC) in which this GPU differs from the baseline's;
    a setting either side does not record is not compared."""
    return _changed(saved, current, LIMITS)


def limits_refusal(changed: list[str], where: str = "the baseline") -> str:
    return (
        f"{where} was measured with other settings than this GPU's ({'; '.join(changed)}): they change its "
        "speed, so compare against a baseline saved with these settings, or give "
        "--gpu-allow-different-limits to compare anyway with every verdict saying so"
    )


def differences(saved: dict, current: dict) -> list[str]:
    """What else differs between the baseline's GPU and this one: worth a note, not a refusal."""
    return _changed(saved, current, NOTED)


def comparable(saved: dict, current: dict, where: str, allow_limits: bool) -> tuple[list[str], list[str]]:
    """Whether a baseline's GPU (saved) and this one compare: BaselineError with the refusal where another model,
    part or MIG mode, or other speed settings not allowed; else what to say with every verdict (the settings
    allowed to differ) and the notes for the report's header."""
    refusal = model_mismatch(saved, current, where) or part_mismatch(saved, current, where)
    if refusal:
        raise BaselineError(refusal)
    limits = limits_changed(saved, current)
    if limits and not allow_limits:
        raise BaselineError(limits_refusal(limits, where))
    always = [f"{'; '.join(limits)} (--gpu-allow-different-limits)"] if limits else []
    notes = [f"gpu baseline: other speed settings, compared as allowed: {'; '.join(limits)}"] if limits else []
    changed = differences(saved, current)
    if changed:
        notes.append(f"gpu baseline: same model, but {'; '.join(changed)}")
    return always, notes


def graph_in(baseline: dict | None, fullname: str) -> bool | None:
    """Whether a baseline timed this benchmark from a CUDA graph; None without a baseline or without the
    benchmark in it."""
    benchmarks = baseline.get("benchmarks") if isinstance(baseline, dict) else None
    for bench in benchmarks if isinstance(benchmarks, list) else []:
        if isinstance(bench, dict) and bench.get("fullname") == fullname:
            info = bench.get("extra_info")
            return bool(info.get("cuda_graph_calls")) if isinstance(info, dict) else False
    return None
