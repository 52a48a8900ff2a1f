"""The columns of a sample row beside its metrics, and their kinds: one list for the reader
(gpubench.read.samples) and the writers of the samples files (gpubench.record.csvfile, arrowfile). Importing
it imports nothing else: `gpubench list` reads no samples and loads no numpy."""

SAMPLE_KEYS = ("t_start_s", "t_end_s", "t_wall", "gpu", "uuid", "phase")  # a run under torchrun adds "rank"
TIME_KEYS = frozenset({"t_start_s", "t_end_s", "t_wall"})  # monotonic and wall seconds, written to 0.1 ms
INT_KEYS = frozenset({"gpu", "rank"})  # a rank is empty for a GPU that --all-gpus samples and no rank uses
TEXT_KEYS = frozenset({"uuid", "phase"})
