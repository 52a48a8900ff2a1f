"""What the tensor-pipe ceiling and the summary's windows need from a GPU, and the ceiling's calibration."""
