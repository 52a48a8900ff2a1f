# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Tutorial: the ladder from the committed runs
#
# This page is a Python script in jupytext's percent format (`docs/tutorial.py`); every CI run executes it on
# a machine without a GPU, and the site shows it with the outputs of that run. Run it yourself on a laptop:
# `pip install -e '.[dev]'`, then `jupytext --to notebook docs/tutorial.py` and open the notebook, or
# `python docs/tutorial.py`. Nothing here needs a GPU: it reads run directories an H100 recorded and that
# are committed under `results/`.
#
# It walks the ladder (GPU-Util, then SM active, tensor active, and the work done: MFU or MBU) for six
# kinds of kernel, then a watched training job and the verdict gpubench gives each of its phases. The
# cells that say `assert` hold the point of each step to the committed numbers: if a run were recorded anew
# and told another story, this page would fail to build.

# %%
import math
from pathlib import Path

import matplotlib.pyplot as plt  # in a notebook the figures are the cells' outputs

from gpubench.record.rundir import load_run

REFERENCE = "results/h100-80gb-hbm3-20261124-232113"  # the suite on an H100, the README's headline run
HEALTHY = "results/watch-healthy-h100-80gb-hbm3"  # examples/train_gpt.py, watched, as it comes
SLOW_LOADER = "results/watch-slow-loader-h100-80gb-hbm3"  # the same with --loader-sleep-ms 100
LLAMA = "results/watch-llama-eager-h100-80gb-hbm3"  # examples/train_llama.py: its steps carry FLOPs

# the repository's root, wherever the script runs from (the root, docs/, a notebook server)
ROOT = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / REFERENCE).is_dir())

# %% [markdown]
# ## 1. Load a run
#
# `load_run` returns the three parts of a run directory: the manifest (the GPU, the sources, the peaks),
# the samples (every metric every 0.1 s, read a column at a time) and the summary (one row per scenario:
# medians over its steady window, and the work it did against the GPU's peaks).

# %%
manifest, samples, summary = load_run(ROOT / REFERENCE)
rows = {row["scenario"]: row for row in summary}
print(manifest["gpu"]["name"], "|", len(samples), "sample rows |", len(rows), "scenarios")
print("metric sources:", ", ".join(sorted({c["source"] for c in manifest["sources"]["columns"].values()})))

# %% [markdown]
# ## 2. Six kernels, four rungs
#
# One kernel of each kind: a single thread spinning on one SM, a copy, a host-to-device copy, the naive
# five-kernel softmax and the fused one, a bf16 GEMM, and the matrix-vector product of LLM decode at batch 1.
# For each, nvidia-smi's GPU-Util, then DCGM's SM active and tensor active, then the ground truth: MFU
# (FLOP/s over the dense datasheet peak) and, for kernels that move bytes rather than compute, MBU (useful
# bytes/s over the datasheet bandwidth) or the PCIe link's share.

# %%
LADDER = ["spin-1thread", "copy-triton", "h2d-copy", "softmax-naive-torch", "softmax-fused", "gemm-torch", "decode-b1"]
RUNGS = [
    ("GPU-Util", "gpu_util_pct"),
    ("SM active", "sm_active_pct"),
    ("tensor active", "tensor_active_pct"),
    ("MFU", "mfu_pct"),
    ("MBU or link", None),
]


def value(row, column):
    """A rung's value; the last rung is the bytes' work done: MBU, or the link's share for h2d."""
    if column is None:
        return row["link_pct"] if math.isfinite(row.get("link_pct", math.nan)) else row["mbu_pct"]
    return row[column]


def pct(x):
    return "–" if not math.isfinite(x) else f"{x:.2g}%" if x < 10 else f"{x:.0f}%"


# each column as wide as its name (or a share such as 0.0013%) and two spaces: it fits the page without wrapping
print(f"{'scenario':<20}" + "".join(f"{name:>{max(len(name), 7) + 2}}" for name, _ in RUNGS))
for name in LADDER:
    print(f"{name:<20}" + "".join(f"{pct(value(rows[name], c)):>{max(len(rung), 7) + 2}}" for rung, c in RUNGS))

# %%
fig, ax = plt.subplots(figsize=(10, 4.2))
width = 0.16
for i, (rung, column) in enumerate(RUNGS):
    heights = [value(rows[name], column) for name in LADDER]
    ax.bar(
        [x + (i - 2) * width for x in range(len(LADDER))],
        [h if math.isfinite(h) else 0 for h in heights],
        width,
        label=rung,
    )
ax.set_xticks(range(len(LADDER)), LADDER, rotation=20, ha="right")
ax.set_ylabel("% (of time, of SMs' cycles, of the peak)")
ax.set_ylim(0, 105)
ax.set_title(f"GPU-Util reads 100% for every one of them ({manifest['gpu']['name']})")
ax.legend(ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.32), frameon=False)
fig.tight_layout()
plt.show()

# %% [markdown]
# Read it rung by rung. GPU-Util is the share of time in which *any* kernel (or a copy) ran, so it is 100%
# for all seven. SM active tells the spinning thread (one SM of 132) from the rest, but not the copy from
# the GEMM. Tensor active tells the GEMM from the copy, and the work done says how much of the GPU each
# really used: the copy moves bytes at about 90% of the bandwidth with no arithmetic at all, the naive
# softmax does the fused one's useful work at a fifth of its speed, and decode at batch 1 keeps the memory
# busy while its MFU is near zero.

# %%
spin, copy, h2d, gemm = (rows[n] for n in ("spin-1thread", "copy-triton", "h2d-copy", "gemm-torch"))
assert spin["gpu_util_pct"] >= 90 and spin["mfu_pct"] < 5 and spin["sm_active_pct"] < 5  # busy, idle SMs
assert copy["gpu_util_pct"] >= 90 and copy["mfu_pct"] < 1 and copy["mbu_pct"] > 50  # bytes, no FLOPs
assert h2d["gpu_util_pct"] >= 90 and h2d["sm_active_pct"] < 1  # no SM runs at all
assert gemm["tensor_active_pct"] > 80 and gemm["mfu_pct"] > 50  # the only one doing matrix math
naive, fused = rows["softmax-naive-torch"], rows["softmax-fused"]
assert naive["gpu_util_pct"] == fused["gpu_util_pct"] and naive["mbu_pct"] < fused["mbu_pct"] / 3
# a GPU busy x% of the time cannot do more than x% of its peak
assert all(r["mfu_pct"] <= r["gpu_util_pct"] for r in summary if math.isfinite(r.get("mfu_pct", math.nan)))
print("each rung tells apart what the one before it could not")

# %% [markdown]
# ## 3. The samples behind a row
#
# A summary row is a median over the scenario's steady window. The samples show where it comes from: here
# GPU-Util and SM active over the first scenarios of the run, the phase of each sample row named in its
# `phase` column.

# %%
t = samples.col("t_end_s")
phase = samples.col("phase")
first, last = rows["spin-1thread"]["t_start"] - 1.0, rows["spin-half-sms"]["t_end"] + 1.0
keep = (t >= first) & (t <= last)
fig, ax = plt.subplots(figsize=(10, 3.2))
ax.plot(t[keep] - first, samples.col("gpu_util_pct")[keep], label="GPU-Util")
ax.plot(t[keep] - first, samples.col("sm_active_pct")[keep], label="SM active")
for name in ("spin-1thread", "spin-1block", "spin-1warp-per-sm", "spin-half-sms"):
    row = rows[name]
    ax.axvspan(row["t_start"] - first, row["t_end"] - first, alpha=0.08, color="grey")
    ax.text((row["t_start"] + row["t_end"]) / 2 - first, 55, name, ha="center", fontsize=8, rotation=90)
ax.set_xlabel("seconds")
ax.set_ylabel("%")
ax.legend(loc="lower right")
ax.set_title("Four spin kernels: GPU-Util stays at 100% while SM active reads 0.76%, 0.76%, 100% and 50%")
fig.tight_layout()
plt.show()
assert {"spin-1thread", "spin-half-sms"} <= set(phase[keep])

# %% [markdown]
# ## 4. A watched training job and its verdicts
#
# `gpubench watch -- python examples/train_gpt.py` ran a GPT-2-small training loop on the same H100 and
# recorded the ladder per phase (`warmup`, `train`, `eval`, which the example marks with `gpubench.mark`).
# Below, that healthy run beside the same loop with a data loader that sleeps 100 ms a step.

# %%
jobs = {}
for label, path in (("healthy", HEALTHY), ("slow loader", SLOW_LOADER)):
    m, s, phases = load_run(ROOT / path)
    jobs[label] = (m, s, {row["phase"]: row for row in phases})
    command = m.get("command") or []
    print(f"{label}:", " ".join(command[command.index("--") + 1 :] if "--" in command else command))
    # what nvidia-smi said, the most the tensor pipes allowed, the rate and the verdict's rules: narrow enough
    # for the page to show it whole
    print(f"  {'phase':<10}{'GPU-Util':>10}{'ceiling':>9}{'steps/s':>9}  verdict")
    for row in phases:
        print(
            f"  {row['phase']:<10}{pct(row['gpu_util_pct']):>10}{pct(row['tensor_ceiling_pct']):>9}"
            f"{row['steps_per_s'] if math.isfinite(row['steps_per_s']) else '–':>9.3}  {row['verdict_rules']}"
        )

# %% [markdown]
# The verdict is one sentence from each of three tables (where the time goes, how much the GPU idled, what
# it achieved), with the numbers that triggered it. The `train` phase of each run:

# %%
for label, (_, _, phases) in jobs.items():
    print(f"{label}:\n  {phases['train']['verdict']}\n")

# %%
healthy, slow = jobs["healthy"][2]["train"], jobs["slow loader"][2]["train"]
assert healthy["gpu_util_pct"] >= 90 and healthy["tensor_ceiling_pct"] < 35  # "busy", a quarter of the peak
assert "host-bound" in slow["verdict_rules"] and slow["gpu_util_pct"] < 50  # the host starves the GPU
assert slow["steps_per_s"] < healthy["steps_per_s"]
print(
    f"healthy: GPU-Util {pct(healthy['gpu_util_pct'])}, yet at most {pct(healthy['tensor_ceiling_pct'])} of the "
    f"bf16 peak ran on the tensor pipes; slow loader: GPU-Util {pct(slow['gpu_util_pct'])}, verdict "
    f"{slow['verdict_rules']}"
)

# %% [markdown]
# The tensor ceiling is what the tensor pipes could have delivered in the time they were active (tensor
# active × SM clock, calibrated per GPU model): these two runs' steps carry no model FLOP count, so the
# ceiling bounds their MFU. A job whose steps do carry one gets its MFU; the Llama-style example, watched
# on the same GPU:

# %%
_, _, llama = load_run(ROOT / LLAMA)
train = next(row for row in llama if row["phase"] == "train")
print(
    f"train: GPU-Util {pct(train['gpu_util_pct'])}, MFU {pct(train['mfu_pct'])}, "
    f"tensor ceiling {pct(train['tensor_ceiling_pct'])}: {train['verdict_rules']}"
)
assert train["gpu_util_pct"] >= 90 and train["mfu_pct"] < 35 and train["mfu_pct"] <= train["gpu_util_pct"]

# %%
fig, axes = plt.subplots(2, 1, figsize=(10, 5), sharey=True)
for ax, (label, (m, s, phases)) in zip(axes, jobs.items()):
    t0 = s.col("t_end_s")[0]
    for column, name in (
        ("gpu_util_pct", "GPU-Util"),
        ("sm_active_pct", "SM active"),
        ("tensor_active_pct", "tensor active"),
    ):
        ax.plot(s.col("t_end_s") - t0, s.col(column), label=name, lw=1)
    for name, row in phases.items():
        if name in ("warmup", "train", "eval"):
            ax.axvspan(row["t_start"] - t0, row["t_end"] - t0, alpha=0.08, color="grey")
            ax.text(row["t_start"] - t0, 102, name, fontsize=8, va="bottom")
    ax.set_title(f"{label}: train {phases['train']['verdict_rules']}", fontsize=10, loc="right")
    ax.set_ylim(0, 115)
    ax.set_ylabel("%")
axes[0].legend(loc="lower center", ncol=3, fontsize=8)
axes[1].set_xlabel("seconds since the watch began")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Where next
#
# - Watch your own job: `gpubench watch -- python train.py`, and [Watch your own job](../watch/) for phases,
#   steps and FLOPs.
# - `gpubench report results/<run> --out /tmp/report` writes the report of any committed run, without a GPU.
# - [What is measured](../measured/) says where each rung comes from.
