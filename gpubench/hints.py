"""Install hints, in one place: this project is installed from its checkout (its distribution name is
gpubench-ladder; the unrelated `gpubench` on PyPI is another project)."""

DIST = "gpubench-ladder"
CUPY_HINT = ("install this project's CuPy extra from its checkout: pip install -e '.[cu13]' "
             "(or '.[cu12]' on a CUDA 12 driver)")
TORCH_HINT = "install a CUDA build of PyTorch that your driver supports (see the README's set-up)"
