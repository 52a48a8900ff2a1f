"""What the generated parts share: the GPUs whose committed runs they read, and a number test that lets
infinity through (a value the tables print as it is)."""

GPUS = {"h100-80gb-hbm3": "H100", "h200": "H200"}


def finite(v) -> bool:
    """A number, not NaN."""
    return isinstance(v, (int, float)) and v == v
