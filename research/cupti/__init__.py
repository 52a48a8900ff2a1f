"""CUPTI PM sampling on a GPU, measured: the modules behind `python -m research.cupti_probe` (what PM sampling
itself does on a machine) and `python -m research.cupti_compare` (the CUPTI source beside NVML GPM)."""
