"""The regression gate behind the pytest plugin (gpubench.pytest_plugin): GPU time from CUDA events
(clock), the device benchmarks run on (device), what the gpu_benchmark fixture does with a call
(fixture), baselines per GPU and the refusal to compare what is not comparable (compare), the verdict of
a run against its baseline (verdict), the between-run floor stored with a baseline (floor), and the
lines and records of a comparison (report)."""
