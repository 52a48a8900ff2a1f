"""The project's tools: what measures on a GPU, what writes the generated numbers, and the checks of the runs,
each run from the repository root as `python -m tools.<room>.<module>` (the shell scripts as
`tools/<room>/<script>.sh`). They import gpubench; gpubench never imports them (tests/test_layout.py).

    readme    the generated numbers of the README and the documentation site, from results/
    tune      the kernel bench and the tuning sweeps that write kernels/' CONFIG tables
    truth     the tensor-pipe ceiling's calibration and what the ground truth needs from a GPU
    gate      the regression gate's runs on a GPU and their checks
    watch     jobs watched on a GPU (the examples, jobs nobody changed, the hook's cost) and their tables
    runs      the reference runs, and committed run directories summarized again or copied to CSV
    longrun   a synthetic long watch and what plotting and reporting it costs
"""
