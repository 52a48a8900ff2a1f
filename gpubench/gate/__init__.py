"""The regression gate behind the pytest plugin (gpubench.pytest_plugin, which holds only its hooks and
fixtures): GPU time from CUDA events (clock), the device benchmarks run on (device), the timing plan of a call
(plan), what the gpu_benchmark fixture does with a call (fixture), when its rounds have run enough (effort), its
counter fingerprint and what moved with a verdict (counters), baselines per GPU and the refusal to compare what
is not comparable (compare), what a run's rounds can say (rounds: the timer's step, the rounds the host was
late for), the judgement of one benchmark against its baseline (judgement), the between-run floor of a
baseline's processes (floor), how many processes each floor needs (processes) and the runs that measure it from
one command (runs), each benchmark of a run against the baseline's, as lines and records (against_baseline),
the plugin's options (options), and one session of the gate: what it decides before anything runs (configure),
what it holds meanwhile (decisions) and what it does at the end (finish)."""
