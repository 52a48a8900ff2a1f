"""The suite: scenarios as data (scenarios), the GPU side of a run (backend), the one loop over scenarios,
for one GPU and for every rank under torchrun (loop), and the `run` and `list` commands (runcmd). Kernels
come from gpubench.kernels."""
