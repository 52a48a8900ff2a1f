"""FLOPs of a job nobody changed: one whole step counted once, as gpubench.count_flops counts.

A step is one pattern of the job's optimizer steps (gpubench.inside.steprule: one optimizer step where one
optimizer steps; five critic steps and one generator step in a WGAN that steps so). After COUNT_AFTER steps
(allocation, kernel selection and torch.compile are behind by then), the optimizer hook
(gpubench.inside.autohook) enters gpubench.inside.flops.counting() at the end of one step and leaves it at
the end of the next: what ran between is one whole step, every optimizer step of its pattern (data, forward,
backward, the optimizers; a Lightning closure runs inside the step and is counted too), by PaLM's convention
and as it ran. That step is written as a C line; the steps after it carry its count, and the summary gives it
to the steps of the same pattern before it (gpubench.job.provenance) and leaves its time out of every rate,
since counting slows it down. A count under way when the pattern breaks begins again later (again()): its
window would not be one whole pattern.

The count falls back to nothing (the counters alone bound the work) where anything goes wrong: a FLOP
formula that fails, a step that takes longer than LIMIT_S or than SLOWER times the steps before it (it held
more than a step: an evaluation, a checkpoint), a dispatch mode the job pushed and left on top of the
counter's, a step taken on another thread. Where the next step never comes, the first module call after the
limit ends the count, so that nothing stays slowed.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time

COUNT_AFTER = 10  # steps before the counted one
LIMIT_S = 60.0  # the longest a counted step may take ...
SLOWER = 20.0  # ... and how many times the median step before it
MIN_LIMIT_S = 5.0  # the least it is given, however fast the steps before it were
QUIET = r"Using `torch.compile\(module\)` when there are global hooks"  # the counter's module hooks, said by dynamo


class OneStep:
    """The count of one process: waits for `after` steps, counts the next, then hands out its FlopCount."""

    def __init__(self, after: int = COUNT_AFTER, on: bool = True):
        self.after, self.on = after, on  # on: count (GPUBENCH_AUTO=steps turns counting off)
        self.steps = 0
        self.last_t: float | None = None
        self.gaps: list[float] = []  # host time between the steps before the counted one
        self.started = self.closed = False  # counting began; its step was written (the C line)
        self.flops = None  # the FlopCount, once counted and found good
        self.problem: str | None = None
        self._block = self._result = self._top = self._thread = self._watchdog = self._filter = None
        self._failed: list = []
        self._t0 = self._limit = 0.0

    def at_step(self, start: bool = True):
        """Called by the hook at the end of each step: (FLOPs to report, line letter). start: a count may begin
        here (not while the pattern is learnt again: the next step might not be one whole pattern)."""
        now = time.monotonic()
        if self.last_t is not None and not self.started and self.on:  # none kept where nothing is counted
            self.gaps.append(now - self.last_t)
        self.last_t = now
        self.steps += 1
        if self.started and not self.closed:
            self.closed = True
            if self._thread is not None and threading.get_ident() != self._thread:
                # the counting modes are the counting thread's: they are left on its next module call
                self.problem = self.problem or "the optimizer stepped on another thread while a step was counted"
                _no_count(self.problem)
                return None, "C"
            self._finish(now)
            return self.flops, "C"
        if self._block is not None:
            self._leave()  # a count that could not be left when its step ended: again now
        if not self.started and self.on and self.steps >= self.after and start:
            self._start(now)
        return self.flops, "A"

    def again(self) -> None:
        """The pattern broke while its step was counted: no C line for it, and another count `after` steps on.
        Where the counting modes cannot be left here, the count ends at their first chance (as one whose step
        ended on another thread) and keeps a problem."""
        if not self.started or self.closed:
            return
        if self._block is not None and not self._leave():
            self.closed = True
            self.problem = self.problem or "the optimizers' pattern broke while a step was counted"
            return
        self.started, self.steps, self.last_t, self.gaps, self.problem, self._failed = False, 0, None, [], None, []

    def abandon(self, why: str = "the optimizer hook failed") -> None:
        """Stop counting now and keep no count (the hook failed, or the limit passed with no step)."""
        if self._block is not None:
            self.problem = self.problem or why
            self._leave()

    def forked(self) -> None:
        """In a child forked while a step was counted (a DataLoader's workers, made as an epoch begins): the
        child has a copy of the counting modes and would run slowed, counting nothing of use; it leaves them."""
        if self._block is None:
            return
        self.problem = self.problem or "the process forked while a step was counted"
        if not self._leave():  # forked from another thread: the counting thread is not in the child
            self._block = None
            if self._watchdog is not None:
                self._watchdog.remove()
                self._watchdog = None

    # --- inside
    def _start(self, now: float) -> None:
        self.started = True
        try:
            import torch
            from torch.utils._python_dispatch import _get_current_dispatch_mode

            from .flops import counting

            block = counting()
            self._result = block.__enter__()
            self._block, self._top, self._thread = block, _get_current_dispatch_mode(), threading.get_ident()
            counter = self._result.counter
            counter.flop_registry = {op: _guarded(f, self._failed) for op, f in counter.flop_registry.items()}
            if hasattr(counter, "_count_flops"):  # the counting around each formula: the job's op has run by then
                counter._count_flops = _counted(counter._count_flops, self._failed)
            median = statistics.median(self.gaps) if self.gaps else 0.0
            self._t0, self._limit = now, min(LIMIT_S, max(MIN_LIMIT_S, SLOWER * median))
            self._watchdog = torch.nn.modules.module.register_module_forward_pre_hook(self._watch)
            self._quiet()
        except Exception as err:  # noqa: BLE001
            self.problem = f"{type(err).__name__}: {err}"
            self._leave()

    def _finish(self, now: float) -> None:
        seconds = now - self._t0
        if self._block is not None and not self._leave():
            self.problem = self.problem or "a dispatch mode the job pushed was still on top of the counter's"
        elif self._failed:
            self.problem = f"a FLOP formula failed ({type(self._failed[0]).__name__}: {self._failed[0]})"
        elif self.problem is None and seconds > self._limit:
            self.problem = f"the counted step took {seconds:.3g} s, more than the {self._limit:.3g} s allowed"
        if self.problem is None:
            found = self._result()
            if found > 0:
                self.flops = found
            else:
                self.problem = (
                    "no operation with a FLOP formula ran through PyTorch's dispatcher (work outside "
                    "PyTorch's operators, a replayed CUDA graph, is not seen there)"
                )
        if self.problem:
            _no_count(self.problem)

    def _watch(self, module, args):
        """A module called while counting: past the limit, the count ends here (the next step may never come)."""
        try:
            if self._block is None:
                return
            if self.closed:  # its step ended on another thread: leave on this one's first chance
                self._leave()
            elif time.monotonic() - self._t0 > self._limit:
                self.abandon(f"no step ended within the {self._limit:.3g} s allowed")
        except Exception:  # noqa: BLE001 -- never into the job
            pass

    def _leave(self) -> bool:
        """Leave the counting modes where that is safe (this thread, ours on top); True where left."""
        try:
            from torch.utils._python_dispatch import _get_current_dispatch_mode

            if threading.get_ident() != self._thread or _get_current_dispatch_mode() is not self._top:
                return False
            block, self._block = self._block, None
            if self._watchdog is not None:
                self._watchdog.remove()
                self._watchdog = None
            self._loud()
            if block is not None:
                block.__exit__(None, None, None)
            return True
        except Exception as err:  # noqa: BLE001
            self.problem = self.problem or f"leaving the counter failed ({type(err).__name__}: {err})"
            return False

    def _quiet(self) -> None:
        import warnings

        warnings.filterwarnings("ignore", message=QUIET)
        self._filter = warnings.filters[0]

    def _loud(self) -> None:
        import warnings

        if self._filter is None:
            return
        try:
            warnings.filters.remove(self._filter)
            warnings._filters_mutated()  # noqa: SLF001 -- what filterwarnings() itself calls
        except (ValueError, AttributeError):
            pass
        self._filter = None


def _guarded(formula, failed: list):
    """A FLOP formula that never raises into the job: a failure is noted and counts 0."""

    def guarded(*args, **kwargs):
        try:
            return formula(*args, **kwargs)
        except Exception as err:  # noqa: BLE001
            failed.append(err)
            return 0

    return guarded


def _counted(count, failed: list):
    """PyTorch's counting of one operation, which runs after the operation: a failure there is noted and the
    operation's output goes back to the job as it would have."""

    def counted(func_packet, out, args, kwargs):
        try:
            return count(func_packet, out, args, kwargs)
        except Exception as err:  # noqa: BLE001
            failed.append(err)
            return out

    return counted


def _no_count(problem: str) -> None:
    _say(f"no FLOPs from the counted step: {problem}; the counters alone bound its work")


def _say(message: str) -> None:
    try:
        print(f"gpubench: {message}", file=sys.stderr)
    except Exception:  # noqa: BLE001
        pass
