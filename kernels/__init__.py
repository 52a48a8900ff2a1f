"""The suite's kernels, one file per family (copy, h2d, spin, softmax, gemm, launch, fill, idle, and under
torchrun allreduce and straggler).

Each file holds, in order: the kernels (Triton and CuPy side by side), host wrappers that check
shapes, allocate and launch, and the family's contract: IMPLS, SIZES (the default axes), STORY (the
report's sentences, filled from a summary row) and prepare(impl, **sizes) -> Prepared, which allocates
seeded inputs and poisoned outputs and returns the call to time, its check and its work model.
Installed as `gpubench.kernels`.
"""
