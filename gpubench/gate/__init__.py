"""The regression gate behind the pytest plugin (gpubench.pytest_plugin): GPU time from CUDA events
(clock), the device benchmarks run on (device), what the gpu_benchmark fixture does with a call
(fixture), and baselines per GPU model compared with a verdict (compare)."""
