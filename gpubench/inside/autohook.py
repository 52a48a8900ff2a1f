"""Steps of a job nobody changed: under `gpubench watch`, each iteration of a PyTorch job's loop, as its
optimizer steps show it, is a gpubench step, stamped on the GPU as gpubench.step() stamps it.

The bootstrap (gpubench/inside/bootstrap/sitecustomize.py) calls install() in every Python process of the
watched command. install() imports nothing heavy: it puts a finder on sys.meta_path (gpubench.inside.finder)
that waits for the job to import torch.optim.optimizer (torch imports it with itself) and, once that module has
run, registers PyTorch's global optimizer step hooks. A process that never imports torch is left as it was.

One step per real step, whatever wraps the optimizer: a step that runs inside another optimizer's step (a
wrapper that is itself an Optimizer: ZeroRedundancyOptimizer, a subclass that delegates) is the outer
one's. Where one optimizer steps, each of its steps is a step; where several do (a GAN's two, a WGAN's
critic five times a generator step), a step is one pattern of their steps, and its FLOPs are counted over
one whole pattern (gpubench.inside.steprule says how the pattern is found and what is written until it is).
A pattern of several optimizers is told to the reader in a P line (gpubench.inside.markline), by the
optimizers' class names. A process that calls gpubench.step() itself is never counted twice: from its first
step() on, the hook writes nothing (the summary keeps that process's own steps only: gpubench.job.provenance).

Nothing here may reach the job: every hook catches everything, says it once on stderr and turns itself off.
"""

from __future__ import annotations

import os
import sys
import time
import weakref

from . import finder
from . import MARKS  # markwriter's ENV: markwriter itself loads once torch's optimizers do, not at every start-up

ENV = "GPUBENCH_AUTO"  # "0": no steps from the optimizer (`gpubench watch --no-auto` sets it); "steps": no FLOPs
TARGET = "torch.optim.optimizer"
MAX_NEWS = 64  # patterns one process may tell: past that its optimizers step in no pattern a step could be
MAX_COUNTS = 4  # FLOP counts one process may begin, one a pattern (each slows one step down)

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
    elif not finder.waiting(TARGET):
        sys.meta_path.insert(0, finder.Finder(TARGET, _register, _unwatched))
    return True


def _say(message: str) -> None:
    global _on
    _on = False
    try:
        print(f"gpubench: {message}; this process runs on unwatched by the optimizer hook", file=sys.stderr)
    except Exception:  # noqa: BLE001 -- a closed stderr: nothing more to do
        pass


def _unwatched(err: Exception) -> None:
    _say(f"the optimizer hook could not watch for torch ({type(err).__name__}: {err})")


def _register(module) -> None:
    global _steps
    if _steps is not None or not _on:
        return
    try:
        steps = Steps()
        module.register_optimizer_step_pre_hook(steps.pre)
        module.register_optimizer_step_post_hook(steps.post)
        _steps = steps
        from . import forwardhook  # the steps of what steps no optimizer: inference, evaluation

        forwardhook.install(counting(), module, _counting_now)
    except Exception as err:  # noqa: BLE001
        _say(f"PyTorch's optimizer hooks could not be registered ({type(err).__name__}: {err})")


def _counting_now() -> bool:
    """Whether this process's count of one optimizer step is on (the forward hook counts nothing inside it)."""
    steps = _steps
    return steps is not None and steps.count is not None and steps.count._block is not None


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
        steps.outer = steps.outer_frame = steps.count = None
        steps.fresh()
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
    """The hooks, which optimizer steps end a step (gpubench.inside.steprule), and the pattern told."""

    def __init__(self):
        self.outer = None  # the optimizer whose step is running, outermost
        self.outer_frame = None  # the frame that called its pre-hook: on the stack while its step runs
        self.count = None  # gpubench.inside.onestep.OneStep of the pattern now counted, made at its first step
        # here, once torch's optimizers load: an import in a hook runs at every step
        from . import markline, markwriter, steprule

        self.markwriter, self.markline, self.steprule = markwriter, markline, steprule
        self.fresh()

    def fresh(self) -> None:
        """No optimizer seen yet (a new process, or a forked child, whose writer starts its own steps)."""
        self.rule = self.steprule.Rule(self._alive)
        self.keys: dict = {}  # id(optimizer) -> its key: a small int, the rule's name for it
        self.optimizers: dict = {}  # key -> (a weak reference to the optimizer, its class name)
        self.next_key = 0
        self.written = 0  # steps handed to the writer: where a P line's pattern begins
        self.told = self.counts = 0  # P lines written; FLOP counts begun

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
                self.count = self._count()
            # a count begins only where the pattern holds: the next step is then one whole pattern
            flops, origin = self.count.at_step(self.rule.mode is self.steprule.SET)
            markwriter._writer().step(flops, None, None, origin)
            self.written += 1
        except markwriter._Off:
            pass
        except Exception as err:  # noqa: BLE001
            self._fail(err)

    def _leads(self, opt) -> bool:
        """Whether this optimizer step ends a step; a pattern that changed is told, a count it broke begun again."""
        rule = self.rule
        ends = rule.step(self._key(opt))
        if rule.news is not None:
            news, rule.news = rule.news, None
            self._tell(*news)
        elif rule.mode is not self.steprule.SET and self.count is not None:
            self.count.again()  # learning: a count under way would span no whole pattern
        return ends and _on

    def _key(self, opt) -> int:
        key = self.keys.get(id(opt))
        if key is not None and self.optimizers[key][0]() is opt:
            return key
        if len(self.optimizers) >= 16:  # optimizers made and dropped (one an epoch): forget the dead
            self.optimizers = {k: v for k, v in self.optimizers.items() if v[0]() is not None}
            self.keys = {i: k for i, k in self.keys.items() if k in self.optimizers}
        key = self.next_key  # never one an optimizer had before: a new one is no old one come back
        self.next_key += 1
        self.keys[id(opt)] = key
        self.optimizers[key] = (_ref(opt), _name(opt))
        return key

    def _alive(self, key) -> bool:
        found = self.optimizers.get(key)
        return found is not None and found[0]() is not None

    def _tell(self, pattern: tuple, back: int) -> None:
        """A P line for the pattern each step is from here on; its FLOPs are counted anew."""
        if self.told >= MAX_NEWS:
            if self.count is not None:
                self.count.abandon("the optimizers stepped in no steady pattern")
            _say(f"the job's optimizers changed the pattern they step in {MAX_NEWS} times: no step is one iteration")
            return
        if self.count is not None:
            self.count.again()  # a count under way would span two patterns
            self.count = None  # the new pattern's own is made at its first step
        names = {k: v[1] for k, v in self.optimizers.items()}
        writer, line = self.markwriter._writer(), self.markline
        with writer.lock:  # the stamper's thread writes the steps' lines under it
            writer._write(
                line.PATTERN_LINE.write(
                    letter=line.PATTERN,
                    t=time.monotonic(),
                    **writer._who(),
                    written=self.written,
                    back=back,
                    pattern=self.steprule.describe(pattern, names),
                )
            )
        self.told += 1

    def _count(self):
        """The count of the pattern now: at most MAX_COUNTS begun in a process (each slows one step down)."""
        from .onestep import OneStep

        on = counting() and self.counts < MAX_COUNTS
        self.counts += on
        return OneStep(on=on)

    def _fail(self, err: Exception) -> None:
        if self.count is not None:
            self.count.abandon()
        _say(f"the optimizer hook failed ({type(err).__name__}: {err})")


def _name(opt) -> str:
    """An optimizer's class name as a P line says it: a word, never the job's text (a class may be named anything)."""
    name = "".join(c for c in type(opt).__name__ if c.isalnum() or c == "_")[:40]
    return name or "optimizer"
