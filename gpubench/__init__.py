"""gpubench: what nvidia-smi's GPU-Util says, beside what the GPU really did."""

__version__ = "0.2.0"
