"""The tensor-pipe ceiling's calibrations (tensor-<gpu>.json), measured and committed with their points;
installed as gpubench.calibration so that gpubench.truth.ceiling finds them outside a checkout too."""
