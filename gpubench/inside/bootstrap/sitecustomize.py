"""Imported by Python at start-up in every process of a command that `gpubench watch` runs (this directory is
first on its PYTHONPATH): installs gpubench's optimizer hook (gpubench.inside.autohook), which acts only once
the process imports torch, and its JAX hook (gpubench.inside.jaxhook), which acts only once it imports jax, then
runs the sitecustomize the process would have run without this one.

Written for any Python 3 the command may run: whatever fails is one line on stderr and the process runs on
as if unwatched. The code loaded is the room around this directory (gpubench/inside), from the gpubench that
watches, so the steps are written in the format it reads even where the command runs another Python
environment; it is loaded under a private name (gpubench.inside.PRIVATE), never as `gpubench`, which the job
may have a module of its own by.
"""

import os
import sys

PRIVATE = "_gpubench_inside"  # gpubench.inside.PRIVATE: this file cannot import it before the room is loaded


def _room():
    """The room, loaded under PRIVATE from the directory above this one (a link to this file is followed)."""
    import importlib.util

    found = sys.modules.get(PRIVATE)
    if found is not None:
        return found
    room = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    spec = importlib.util.spec_from_file_location(
        PRIVATE, os.path.join(room, "__init__.py"), submodule_search_locations=[room]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[PRIVATE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[PRIVATE]
        raise
    return module


def _install():
    try:
        if not os.environ.get("GPUBENCH_MARKS"):
            return  # not under a watch: a PYTHONPATH kept from one, or set by hand
        import importlib

        _room()
        importlib.import_module(PRIVATE + ".autohook").install()
    except Exception as err:  # noqa: BLE001 -- the job comes first
        try:
            sys.stderr.write(
                "gpubench: the optimizer hook was not installed (%s: %s); this process runs on "
                "unwatched by it\n" % (type(err).__name__, err)
            )
        except Exception:  # noqa: BLE001
            pass
    try:  # a JAX job's jitted step (gpubench.inside.jaxhook), in a try of its own: either hook goes in alone
        if sys.modules.get(PRIVATE) is not None:  # a room that did not load was said above
            import importlib

            importlib.import_module(PRIVATE + ".jaxhook").install()
    except Exception as err:  # noqa: BLE001
        try:
            sys.stderr.write(
                "gpubench: the JAX hook was not installed (%s: %s); this process runs on unwatched "
                "by the JAX hook\n" % (type(err).__name__, err)
            )
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
