"""The kernel bench and the tuning sweeps of the Triton and CuPy kernels, and the CONFIG lines they write."""
