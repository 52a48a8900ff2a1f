"""Several GPUs under torchrun: who each process is and what the ranks tell each other (launch), the
suite's loop run on every rank in step (lockstep), one run from the ranks' reports (merge) and `gpubench
run` under torchrun (torchrun)."""
