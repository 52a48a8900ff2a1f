"""Imported by Python at start-up in every process of a command that `gpubench watch` runs (this directory is
first on its PYTHONPATH): installs gpubench's optimizer hook (gpubench.job.autohook), which acts only once
the process imports torch, then runs the sitecustomize the process would have run without this one.

Written for any Python 3 the command may run: whatever fails is one line on stderr and the process runs on
as if unwatched. The gpubench that is loaded is the one that watches (the package this file lies in), so the
steps are written in the format it reads, even where the command runs another Python environment.
"""

import os
import sys


def _gpubench_here():
    """Import gpubench from the package around this file, unless that is what `import gpubench` finds."""
    import importlib.util

    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.find_spec("gpubench")
    if spec is not None and spec.origin and os.path.dirname(os.path.abspath(spec.origin)) == package:
        return
    spec = importlib.util.spec_from_file_location("gpubench", os.path.join(package, "__init__.py"),
                                                  submodule_search_locations=[package])
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpubench"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["gpubench"]
        raise


def _install():
    try:
        if not os.environ.get("GPUBENCH_MARKS"):
            return  # not under a watch: a PYTHONPATH kept from one, or set by hand
        _gpubench_here()
        from gpubench.job import autohook

        autohook.install()
    except Exception as err:  # noqa: BLE001 -- the job comes first
        try:
            sys.stderr.write("gpubench: the optimizer hook was not installed (%s: %s); this process runs on "
                             "unwatched by it\n" % (type(err).__name__, err))
        except Exception:  # noqa: BLE001
            pass


def _chain():
    """Run the sitecustomize that comes after this one on sys.path, as Python would have without this one;
    its errors are Python's to report, as they would be."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module  # it is the process's sitecustomize from now on
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["sitecustomize"]  # as a failed import leaves it
        raise


_install()
_chain()
