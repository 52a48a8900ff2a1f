"""Steps of a job nobody changed: under `gpubench watch`, each optimizer step of a PyTorch job is a
gpubench step, stamped on the GPU as gpubench.step() stamps it.

The bootstrap (gpubench/inside/bootstrap/sitecustomize.py) calls install() in every Python process of the
watched command. install() imports nothing heavy: it puts a finder on sys.meta_path that waits for the
job to import torch.optim.optimizer (torch imports it with itself) and, once that module has run,
registers PyTorch's global optimizer step hooks. A process that never imports torch is left as it was.

One step per real step, whatever wraps the optimizer: a step that runs inside another optimizer's step (a
wrapper that is itself an Optimizer: ZeroRedundancyOptimizer, a subclass that delegates) is the outer
one's, and of several optimizers stepping in one job (a GAN's two) the steps of one are counted: the first
to step, until another steps twice with no step of it between. A process that calls gpubench.step() itself
is never counted twice: from its first step() on, the hook writes nothing (the summary keeps that
process's own steps only: gpubench.job.provenance).

Nothing here may reach the job: every hook catches everything, says it once on stderr and turns itself off.
"""

from __future__ import annotations

import os
import sys
import time
import weakref

from . import MARKS  # markwriter's ENV: markwriter itself loads once torch's optimizers do, not at every start-up

ENV = "GPUBENCH_AUTO"  # "0": no steps from the optimizer (`gpubench watch --no-auto` sets it); "steps": no FLOPs
TARGET = "torch.optim.optimizer"
MAX_STEP_GAP_S = 60.0  # an optimizer quiet this long is no longer the one whose steps count, should another step

_on = True
_steps = None  # the Steps of this process, once the hooks are registered


def enabled(env=os.environ) -> bool:
    """Whether the hook belongs in this process: under a watch (the marks file named) and not turned off."""
    return bool(env.get(MARKS)) and env.get(ENV, "1").strip().lower() not in ("0", "off", "no", "false")


def counting(env=os.environ) -> bool:
    """Whether the hook counts one step's FLOPs ("steps": steps alone)."""
    return env.get(ENV, "1").strip().lower() != "steps"


def install() -> bool:
    """Register the hooks once torch's optimizers load (now, where they already have); False where off."""
    if not enabled():
        return False
    if TARGET in sys.modules:
        _register(sys.modules[TARGET])
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    return True


def _say(message: str) -> None:
    global _on
    _on = False
    try:
        print(f"gpubench: {message}; this process runs on unwatched by the optimizer hook", file=sys.stderr)
    except Exception:  # noqa: BLE001 -- a closed stderr: nothing more to do
        pass


class _Finder:
    """Finds nothing itself: lets the other finders find TARGET, and runs _register after its module ran."""

    def find_spec(self, name, path=None, target=None):
        if name != TARGET:
            return None
        try:
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None and spec.loader is not None:
                    _follow(spec)
                    return spec
        except Exception as err:  # noqa: BLE001
            _say(f"the optimizer hook could not watch for torch ({type(err).__name__}: {err})")
        return None


def _follow(spec) -> None:
    """Make the loader call _register once the module has run."""
    loader = spec.loader
    run = loader.exec_module

    def exec_module(module):
        run(module)
        _leave()
        _register(module)

    try:
        loader.exec_module = exec_module  # on this loader object only: the module keeps its own loader
    except (AttributeError, TypeError):
        spec.loader = _Loader(loader, exec_module)


class _Loader:
    def __init__(self, loader, exec_module):
        self._loader, self.exec_module = loader, exec_module

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def _leave() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Finder)]


def _register(module) -> None:
    global _steps
    if _steps is not None or not _on:
        return
    try:
        steps = Steps()
        module.register_optimizer_step_pre_hook(steps.pre)
        module.register_optimizer_step_post_hook(steps.post)
        _steps = steps
    except Exception as err:  # noqa: BLE001
        _say(f"PyTorch's optimizer hooks could not be registered ({type(err).__name__}: {err})")


def _on_stack(frame, start) -> bool:
    """Whether frame is start or one of its callers (walked only where an optimizer steps inside another's)."""
    f = start
    while f is not None:
        if f is frame:
            return True
        f = f.f_back
    return False


def _forked() -> None:
    """A forked child starts its own steps: no optimizer running, none leading, and a count of its own later
    (one under way in the parent is left in the child: gpubench.inside.onestep.OneStep.forked)."""
    steps = _steps
    if steps is None:
        return
    try:
        if steps.count is not None:
            steps.count.forked()
        steps.outer = steps.outer_frame = steps.leader = steps.challenger = steps.count = None
    except Exception:  # noqa: BLE001 -- in a fresh child, nothing may reach the job
        pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def _ref(opt):
    try:
        return weakref.ref(opt)
    except TypeError:  # an optimizer that takes no weak reference: held, as the job holds it anyway
        return lambda: opt


class Steps:
    """The hooks, and which optimizer's steps count."""

    def __init__(self):
        self.outer = None  # the optimizer whose step is running, outermost
        self.outer_frame = None  # the frame that called its pre-hook: on the stack while its step runs
        self.leader = None  # the optimizer whose steps count
        self.challenger = None  # another one that stepped since the leader last did
        self.leader_t = 0.0
        self.count = None  # gpubench.inside.onestep.OneStep, made at the first counted step
        from . import markwriter  # here, once torch's optimizers load: an import in a hook runs at every step

        self.markwriter = markwriter

    def pre(self, opt, args, kwargs):
        try:
            caller = sys._getframe(1)
            outer = self.outer() if self.outer is not None else None
            # none running; one whose step raised (its post-hook never came), stepping again or not: its
            # frame is off the stack, and this step is no inner one of it
            if outer is None or outer is opt or not _on_stack(self.outer_frame, caller):
                self.outer, self.outer_frame = _ref(opt), caller
        except Exception as err:  # noqa: BLE001
            self._fail(err)

    def post(self, opt, args, kwargs):
        markwriter = self.markwriter
        try:
            if self.outer is not None and self.outer() is not opt:
                return  # an inner optimizer's step, inside the outer one's
            self.outer = self.outer_frame = None
            if not _on or markwriter.own_steps or markwriter._path is None:  # off, or the job steps itself
                if self.count is not None:
                    self.count.abandon("the hook went off in this process")  # no count left running
                return
            if not self._leads(opt):
                return
            if self.count is None:
                from .onestep import OneStep

                self.count = OneStep(on=counting())
            flops, origin = self.count.at_step()
            markwriter._writer().step(flops, None, None, origin)
        except markwriter._Off:
            pass
        except Exception as err:  # noqa: BLE001
            self._fail(err)

    def _leads(self, opt) -> bool:
        now = time.monotonic()
        leader = self.leader() if self.leader is not None else None
        if leader is None or leader is opt or now - self.leader_t > MAX_STEP_GAP_S:
            if leader is not opt:
                self.leader = _ref(opt)
            self.challenger, self.leader_t = None, now
            return True
        challenger = self.challenger() if self.challenger is not None else None
        if challenger is opt:  # stepped twice with no step of the leader between: it leads now
            self.leader, self.challenger, self.leader_t = _ref(opt), None, now
            return True
        self.challenger = _ref(opt)
        return False

    def _fail(self, err: Exception) -> None:
        if self.count is not None:
            self.count.abandon()
        _say(f"the optimizer hook failed ({type(err).__name__}: {err})")
