"""Steps of what steps no optimizer: under `gpubench watch`, each call of a job's outermost module (its model)
that is not training is a step, stamped on the GPU as the optimizer's steps are (gpubench.inside.autohook).

Inference, offline evaluation and the evaluation inside a training job run forwards alone; their steps are the
calls of the module the job calls from outside every other module, with the most parameters (a loss module
called beside the model has none). One step runs from the start of one such call to the start of the next,
so whatever the job does between its forwards (a head called apart, a sampler, a copy back) is in its step.

Finding the model costs a little, keeping it nothing: PyTorch's global module hooks, which slow every module
call while they are on, are on only until DISCOVER outermost calls were seen, the process first steps an
optimizer, or a module compiled by torch.compile is called (before it compiles: torch.compile guards on the
global hooks, and their leaving later would make it compile again); the model then gets a hook of its own,
one Python call per forward (a model that calls itself inside its own forward makes a step of each call).

A forward is a step where it is not training: no optimizer stepped between its start and the next call's, and
either the process never stepped one or autograd was off (torch.no_grad, torch.inference_mode: the generator
called so inside a GAN's step is not evaluation, but its step holds an optimizer's). Its values:
- FLOPs: the first step of each input shape (the shape of `input_ids`, or of the first tensor given; a decode
  step's shape stays the same as its cache grows, so it is counted once) is counted through
  gpubench.inside.flops.counting(), by PaLM's convention: a forward's FLOPs. The count covers the model's call
  alone (a hook of that one call ends it as the call returns: whatever the job runs after its last forward runs
  uncounted, at full speed). That step is written as a K line (its time, slowed by counting, is in no rate) and
  its count goes with every later step of its shape. At most MAX_SHAPES shapes are counted in a process; a
  forward through which a backward ran, in a process that never stepped an optimizer, was training by hand: its
  shape keeps no count.
- bytes: the module's weights, each read once a step (gpubench.inside.flops.weight_bytes; an embedding table
  a row a token), and the KV cache a decoder's call is given (Hugging Face's), for MBU.
- tokens: the elements of `input_ids`, or of the first integer tensor given; none for other inputs (images).

Steps of one shape ending within STAMP_S of the last written are written together, stamped where the last ended.

Nothing here may reach the job: every hook catches everything, says it once on stderr and turns itself off.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import weakref

from .inputs import _backward, _cache_bytes, _grad_nodes, _parameters, _shape

DISCOVER = 8  # outermost calls seen through the global hooks before the model's own hooks take over
MAX_SHAPES = 16  # input shapes counted in one process at most
LIMIT_S = 60.0  # a counted step still open this long is given up at the model's next call
TRIES = 3  # rounds of DISCOVER outermost calls without a module with parameters before looking stops
STAMP_S = 0.005  # steps of one shape ending this close together are written as one, stamped once


class Forwards:
    """The hooks of one process: finding its model, then its steps."""

    def __init__(self, torch, markwriter, counting, weight_bytes, busy):
        self.torch, self.markwriter, self.counting, self.weight_bytes = torch, markwriter, counting, weight_bytes
        self.busy = busy  # whether the optimizer hook is counting a step now (no count of ours inside it)
        # counting: gpubench.inside.flops.counting, or None where nothing is counted (GPUBENCH_AUTO=steps)
        self.on = True
        self.local = threading.local()  # outermost-call depth, per thread, while finding the model
        self.lock = threading.Lock()
        self.compiling = self._compiling  # torch.compiler.is_compiling once torch has loaded whole
        self.seen: dict[int, list] = {}  # id(module) -> [weak reference, outermost calls] while finding it
        self.found = 0
        self.global_hooks: list = []
        self.tries = 0  # rounds of DISCOVER calls that found no module with parameters
        self.model = None  # weak reference to the model, once found
        self.stepped_t: float | None = None  # the process's last optimizer step
        self.pending = None  # the step under way: (t, shape key, tokens, written) from its call's start
        self.shapes: dict = {}  # shape key -> (FlopCount or None, bytes)
        self.count = None  # a step being counted: (block, result, key, thread, top mode, t0, stepped_t)
        self.count_hook = None  # the hook that ends the count as the counted call returns
        self.done = None  # a count kept, until its step is written: [shape key, a backward ran through it]
        self.group = None  # steps not yet written: [FLOPs, n, bytes, tokens, bytes known, tokens known]
        self.written_t = 0.0

    # --- finding the model
    def start(self, optimizer) -> None:
        """Hooks on: torch may still be loading (its optimizers load with it), so its modules are named whole."""
        self._look()
        optimizer.register_optimizer_step_post_hook(self._stepped)

    def _look(self) -> None:
        import torch.nn.modules.module as module

        self.found = 0
        self.global_hooks = [
            module.register_module_forward_pre_hook(self._enter),
            module.register_module_forward_hook(self._leave, always_call=True),
        ]

    def _lost(self, ref) -> None:
        """The model was let go (a job that scores checkpoint after checkpoint): look for the next one."""
        try:
            if self.on and self.model is ref and not self.global_hooks:
                self.model, self.pending, self.tries, self.group = None, None, 0, None
                self.shapes = {}  # the next model's counts are its own
                self._look()
        except Exception:  # noqa: BLE001 -- a collection runs anywhere in the job, at exit too: nothing of ours
            pass

    def _enter(self, module, args):
        if self.compiling():
            return
        try:
            depth = getattr(self.local, "depth", 0)
            self.local.depth = depth + 1
            if depth:
                return
            entry = self.seen.get(id(module))
            if entry is None or entry[0]() is not module:
                entry = self.seen[id(module)] = [weakref.ref(module), 0]
            entry[1] += 1
            self.found += 1
            if type(module).__name__ == "OptimizedModule":  # torch.compile(model), about to compile: the global
                self._settle()  # hooks off first, or their leaving would make it compile again
        except Exception as err:  # noqa: BLE001
            self.fail(err)

    def _leave(self, module, args, output):
        if self.compiling():
            return
        try:
            self.local.depth = max(0, getattr(self.local, "depth", 1) - 1)
            if self.found >= DISCOVER and self.global_hooks and not self.local.depth:
                self._settle()
        except Exception as err:  # noqa: BLE001
            self.fail(err)

    def _settle(self) -> None:
        """The global hooks off; the module with the most parameters among those called outermost gets its own."""
        for h in self.global_hooks:
            h.remove()
        self.global_hooks = []
        best, most = None, 0
        for ref, _ in self.seen.values():
            m = ref()
            n = _parameters(m) if m is not None else 0
            if n > most:
                best, most = m, n
        self.seen.clear()
        if best is None and self.stepped_t is None and self.tries < TRIES:  # only modules with no parameters
            self.tries += 1  # so far (a preprocessing module): look on, a few times
            self._look()
            return
        if best is not None:
            best.register_forward_pre_hook(self._call, with_kwargs=True)  # one hook: a forward hook would cost
            # as much again at every call, to see the rare model that calls itself
            self.model = weakref.ref(best, self._lost)

    def _stepped(self, opt, args, kwargs):
        try:
            self.stepped_t = time.monotonic()
            if self.global_hooks:  # a training process: its model is among the modules called so far
                self._settle()
        except Exception as err:  # noqa: BLE001
            self.fail(err)

    def _compiling(self) -> bool:
        """Inside a trace of torch.compile the hooks fold away; torch.compiler, read at the first call, answers all."""
        compiler = getattr(self.torch, "compiler", None)
        self.compiling = getattr(compiler, "is_compiling", None) or (lambda: False)
        return self.compiling()

    # --- its steps
    def _call(self, module, args, kwargs=None):
        if not self.on or self.compiling():
            return
        markwriter = self.markwriter
        try:
            key, tokens = _shape(self.torch, args, kwargs)
            maybe = self.stepped_t is None or not self.torch.is_grad_enabled()
            cache = _cache_bytes(self.torch, kwargs) if maybe and kwargs else 0
            with self.lock:  # threads serving one model: each call ends the step before it, whichever thread's
                now = time.monotonic()
                if markwriter.own_steps or markwriter._path is None:
                    self.pending = None  # the job steps itself, or marks are off: nothing of ours
                    if self.count is not None:
                        self._finish()
                    return
                self._end_step(now)
                self.pending = (self.stepped_t, key, tokens, maybe, cache)
                if maybe and key is not None and key not in self.shapes and len(self.shapes) < MAX_SHAPES:
                    self._begin(module, key, tokens, now)
        except markwriter._Off:
            self.pending = None
        except Exception as err:  # noqa: BLE001
            self.fail(err)

    def _end_step(self, now: float) -> None:
        """The step under way ends where the next call begins: written where it was no training step."""
        pending, self.pending = self.pending, None
        if self.count is not None:
            self._finish()
        done, self.done = self.done, None
        counted = done is not None and pending is not None and done[0] == pending[1]
        if done is not None and done[1]:  # a backward ran through the counted call: no forward step's count
            counted = False
            if self.stepped_t is None:  # training by hand: its steps are no forwards, their shape has no count
                self.shapes[done[0]] = (None, self.shapes[done[0]][1])
        if pending is None or not pending[3] or pending[0] != self.stepped_t:  # an optimizer stepped in it
            self._flush(now)
            return
        _, key, tokens, _, cache = pending
        flops, nbytes = self.shapes.get(key, (None, None))
        nbytes = nbytes + cache if nbytes is not None else None
        g = self.group
        if counted or (g is not None and g[0] is not flops):
            self._flush(now)
            g = None
        if counted:  # a line of its own: its time, slowed by counting, is in no rate
            self.markwriter._writer().step(flops, nbytes, tokens, "K")
            self.written_t = now
            return
        if g is None:
            g = self.group = [flops, 0, 0, 0, nbytes is not None, tokens is not None]
        g[1] += 1
        g[2] += nbytes or 0
        g[3] += tokens or 0
        if now - self.written_t >= STAMP_S:
            self._flush(now)

    def _flush(self, now: float) -> None:
        """Write the steps gathered, all stamped now (where the last of them ended)."""
        g, self.group = self.group, None
        if g is None:
            return
        flops, n, nbytes, tokens, has_bytes, has_tokens = g
        self.markwriter._writer().step(
            flops, nbytes / n if has_bytes else None, tokens / n if has_tokens else None, "F", n
        )
        self.written_t = now

    def _begin(self, module, key, tokens, now: float) -> None:
        if self.count is not None or self.counting is None or self.busy():
            return
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        nbytes = self.weight_bytes(module, tokens)
        self.shapes[key] = (None, nbytes)  # counted once, whatever comes of it
        block = self.counting()
        result = block.__enter__()
        self.count = (block, result, key, threading.get_ident(), _get_current_dispatch_mode(), now, self.stepped_t)
        self.count_hook = module.register_forward_hook(self._counted, always_call=True)

    def _counted(self, module, args, output):
        """The counted call returned: its count ends here, whatever the job runs before its next call."""
        try:
            with self.lock:
                count = self.count
                if count is not None and count[3] != threading.get_ident():
                    return  # another thread's call of the model: the counted call returns on its own thread
                hook, self.count_hook = self.count_hook, None
                if hook is not None:
                    hook.remove()
                if count is None or not self._finish() or not self.torch.is_grad_enabled():
                    return
                done = self.done

                def ran(grad_outputs):  # a backward through the counted call: it was training
                    done[1] = True

                for node in _grad_nodes(self.torch, output):
                    with contextlib.suppress(Exception):  # a node that takes no pre-hook: the others see it
                        node.register_prehook(ran)
        except Exception as err:  # noqa: BLE001
            self.fail(err)

    def _finish(self, force: bool = False) -> bool:
        """Leave the count of the step that just ended; True where its FLOPs are kept. Where it cannot be left
        (another thread, a mode the job pushed on top of it), it is tried again at the next call, and given up
        after LIMIT_S (force: given up now), its mode left where it is."""
        block, result, key, thread, top, t0, stepped_t = self.count
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        if threading.get_ident() != thread or _get_current_dispatch_mode() is not top:
            if force or time.monotonic() - t0 > LIMIT_S:
                self.count = None
                _say(
                    "a counted forward could not be left (a dispatch mode on top of it, or another thread); "
                    "no more forwards are counted in this process"
                )
                self.counting = None
            return False
        self.count = None
        block.__exit__(None, None, None)
        found = result()
        if found > 0 and not _backward(result) and self.stepped_t == stepped_t:
            self.shapes[key] = (found, self.shapes[key][1])
            self.done = [key, False]
            return True
        return False

    def fail(self, err: Exception) -> None:
        self.on = False
        try:
            for h in self.global_hooks:
                h.remove()
            self.global_hooks = []
            if self.count_hook is not None:
                self.count_hook.remove()
                self.count_hook = None
            if self.count is not None:
                self._finish(force=True)
        except Exception:  # noqa: BLE001
            pass
        _say(f"the forward hook failed ({type(err).__name__}: {err}); this process runs on unwatched by it")


def _say(message: str) -> None:
    try:
        print(f"gpubench: {message}", file=sys.stderr)
    except Exception:  # noqa: BLE001 -- a closed stderr: nothing more to do
        pass
