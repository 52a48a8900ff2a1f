"""The code that runs inside the user's job: the marks writer behind `gpubench.mark` and `gpubench.step`
(markwriter, linewriter, markline, stamps), the hooks of a job nobody changed: its optimizer's steps (autohook,
onestep), several optimizers' pattern (steprule), its model's forward calls where no optimizer steps (forwards,
forwardhook), a JAX job's jitted step (jaxhook); and the bootstrap that installs them in every Python process of
a watched command (bootstrap/).

Everything else in gpubench runs in gpubench's own process. What runs here lives by the job's rules: it
never raises into the job, blocks it, or keeps a descriptor or a module name the job could own. So its
modules import one another only relatively and nothing else of gpubench's: the bootstrap loads this room
under PRIVATE, a name no job has, and never puts `gpubench` into the job's sys.modules (a job may have a
module of that name of its own).
"""

import sys

PRIVATE = "_gpubench_inside"
MARKS = "GPUBENCH_MARKS"  # the marks file of a watched process: set, the process is under a watch


def writer():
    """The markwriter module this process writes through: the private room's where the watch's bootstrap
    loaded it (loading its markwriter now if need be), else this package's. One writer a process, whichever
    comes first, gpubench.mark or torch's optimizers: a mark must close the steps gathered before it."""
    if sys.modules.get(PRIVATE) is not None:
        import importlib

        return importlib.import_module(PRIVATE + ".markwriter")
    from . import markwriter

    return markwriter
