"""The suite's kernels, one file per family: copy, spin, softmax, gemm, launch.

Each file holds, in order: the kernels (Triton and CuPy side by side), host wrappers that check
shapes, allocate and launch, and the work model (FLOPs and bytes one call must do). Installed as
`gpubench.kernels`.
"""
