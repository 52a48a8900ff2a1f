"""The regression gate behind the pytest plugin (gpubench.pytest_plugin): GPU time from CUDA events
(clock), the device benchmarks run on (device), what the gpu_benchmark fixture does with a call
(fixture), baselines per GPU and the refusal to compare what is not comparable (compare), what a run's
rounds can say (rounds: the timer's step, the rounds the host was late for), the verdict of a run against
its baseline (verdict), the between-run floor of a baseline's processes (floor) and the runs that measure
it from one command (runs), the lines and records of a comparison (report), and the plugin's options (options)
and its checks of where its files go (session)."""
