"""What the tests of a watched job's phases share (test_phases.py, test_phase_ranks.py): the summary of
synthetic samples and marks on up to eight fake GPUs, and its rows by name."""

from jobs import PEAKS, gpus

from gpubench.job.markreader import Stream
from gpubench.job.phases import summarize_watch

R0 = Stream(0, 100)
G = gpus(8)


def summary(samples, events, n_gpus=1, t1=None, contexts=None, all_gpus=False, dtype="bf16"):
    t1 = t1 if t1 is not None else max(r["t_end_s"] for r in samples)
    return summarize_watch(
        samples,
        events,
        G[:n_gpus],
        0.0,
        t1,
        PEAKS,
        dtype,
        [
            "gpu_util_pct",
            "power_w",
            "energy_j",
            "sm_active_pct",
            "sm_occupancy_pct",
            "tensor_active_pct",
            "dram_active_pct",
        ],
        contexts or {},
        all_gpus,
    )


def by_name(result):
    return {r["scenario"]: r for r in result.summary}
