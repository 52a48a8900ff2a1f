"""The suite: scenarios as data (scenarios), the GPU side of a run (backend), the loop over scenarios
inside a Recording (runner), and the `run` and `list` commands (run). Kernels come from gpubench.kernels."""
