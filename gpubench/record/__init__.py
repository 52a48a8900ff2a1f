"""Recording: what the GPU says while something runs.

The one door to NVML (nvml), which GPU is which (gpus: CUDA and NVML meet through the UUID), the metric
sources and the policy that chooses them (sources/), the sampler thread, the Recording every verb runs
inside (recording), the run directory written and read in one place (rundir), what must hold before a
recording starts (preflight) and `gpubench doctor`.
"""
