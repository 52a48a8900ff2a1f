"""Steps of a JAX job nobody changed: under `gpubench watch`, each call of the job's jitted step function is a
gpubench step (marks lines of letter J), carrying the FLOPs XLA's cost analysis gives that function.

install() (the bootstrap calls it in every Python process of the watched command) imports nothing: a finder
waits for the job to import jax, then puts a jit of its own in place of `jax.jit`. It makes what jax's makes
and hands it back in a _Jitted, which calls it unchanged (static arguments, donation, shardings) and
forwards the rest: attributes, `.lower`, `.trace`, `__wrapped__`, `__doc__`, method binding, `isinstance`
(its `__class__` is jax's), pickling and copying (as jax's function, where that works). Jits made by jax's
own modules (jax.numpy, jax.nn) are left as they are; `pmap` is not watched.

A step. Only a call made outside any trace counts: a jitted function called while another is traced (jit of
jit), under vmap, grad or shard_map, is part of that call. A function's work is the sum of its calls' FLOPs.
The step is the first function called twice (one called once, an init, never is), until another, called
twice or more, has done more than LEAD times the step's work. Work only grows, so each change at least
doubles the step's work: the rule cannot flap, and it settles in the first iterations where one function
does most of the work. The first step function's first call is written when it is chosen.

FLOPs. Where a call compiled (jax's cache of the function grew), the function is lowered again for that
call's shapes under jax.no_tracing (jax's caches answer: the job's Python is not traced again, nothing is
compiled again) and XLA's HloCostAnalysis counts the HLO JAX handed to XLA: a matrix product 2·M·N·K (a
multiply-add is two FLOPs, as PaLM counts it), a convolution two per multiply-add, an elementwise operation
one per element, a reduction one per element reduced; not transcendentals (exp, tanh: counted apart), nor
a custom call's work (cuDNN attention, a Pallas kernel); what jax.checkpoint recomputes is in that HLO. The
compiled executable's own analysis is not used: on a GPU it leaves out the products that run as cuBLAS
calls (on an H200, all but 0.06% of an MLP's FLOPs). Where JAX's backend is a plugin (CUDA), the CPU client
JAX starts beside it runs the analysis; without one (JAX_PLATFORMS=cuda), and for a function over several
devices (its HLO is the whole program), steps carry no FLOPs. Unanalysed shapes carry the last count made.

Clock. Steps are stamped on the host as the call returns, at dispatch: nothing here waits for the device or
holds the job's arrays (that would hold memory and defeat donation). In a steady loop the dispatch rate is
the device's: XLA's GPU client lets the host run at most 32 executions ahead of the device, and a loop that
reads a result (a logged loss) waits for it anyway; over many steps the queue is as deep at both ends.
A failure is one line on stderr; the wrappers then only call jax's function, and `jax.jit` is jax's again.
"""

from __future__ import annotations

import functools
import math
import sys
import types
import weakref

from . import finder
from .autohook import counting, enabled

TARGET = "jax"
LEAD = 2.0  # how many times the step's work another function must have done to become the step
KEY_ITEMS = 16  # items of a list, tuple or dict argument whose shapes tell one signature of a call from another

_on, _flops_on = True, True  # the hook; FLOPs on its steps (not with GPUBENCH_AUTO=steps)
_original = _module = _markwriter = None  # jax.jit as jax made it and the module it was replaced in, once it was
_top = None  # () -> whether no trace is running in this thread
_leader, _written = None, 0  # the _Stats of the function whose calls are steps; the steps this process wrote
_stats: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # the job's function -> its _Stats


def install() -> bool:
    """Replace jax.jit once the job imports jax (now, where it already has); False where the hook is off."""
    if not enabled():
        return False
    global _flops_on
    _flops_on = counting()
    jax = sys.modules.get(TARGET)
    if jax is not None:
        _patch(jax)
    elif not finder.waiting(TARGET):
        sys.meta_path.insert(0, finder.Finder(TARGET, _patch, _fail))
    return True


def _fail(err: Exception, what: str = "the JAX hook failed") -> bool:
    """Turn the hook off in this process, say so once, and give jax its jit back."""
    global _on
    if _on:
        _on = False
        try:
            if _original is not None:
                _module.jit = _original
            print(
                f"gpubench: {what} ({type(err).__name__}: {err}); this process runs on unwatched by the JAX hook",
                file=sys.stderr,
            )
        except Exception:  # noqa: BLE001 -- a closed stderr: nothing more to do
            pass
    return False


def _patch(jax) -> None:
    global _original, _module, _top, _markwriter
    if not _on or _original is not None:
        return
    try:
        core = sys.modules["jax._src.core"]
        ctx, top_trace = core.trace_ctx, core.eval_trace
        _top = lambda: ctx.trace is top_trace  # noqa: E731 -- the cheapest test, made once
        from . import markwriter as _markwriter  # the writer autohook's steps go through (a global: see above)

        original = jax.jit
        jax.jit = _jit(original)
        _original, _module = original, jax
    except Exception as err:  # noqa: BLE001
        _fail(err, "jax.jit could not be watched in this JAX")


def _jit(original):
    @functools.wraps(original)
    def jit(*args, **kwargs):
        made = original(*args, **kwargs)
        try:
            caller = sys._getframe(1).f_globals.get("__name__") or ""
            if _on and caller != "jax" and not caller.startswith(("jax.", "jaxlib.")):  # not one of jax's own
                return _wrap(made, decorator=not args)
        except Exception as err:  # noqa: BLE001
            _fail(err)
        return made

    return jit


def _wrap(made, decorator=False):
    """jax's jitted function in a _Jitted (anything else as it is); where jax.jit was given no function
    (`jax.jit(static_argnums=1)`), the decorator it returned, made one that wraps what it makes."""
    if not decorator:
        return _Jitted(made) if hasattr(made, "lower") and hasattr(made, "_cache_size") else made

    @functools.wraps(made)
    def decorate(*args, **kwargs):
        out = made(*args, **kwargs)
        try:
            return _wrap(out) if _on else out
        except Exception as err:  # noqa: BLE001
            _fail(err)
            return out

    return decorate


class _Stats:
    """One function of the job's (every jit of it together: `jax.jit(f)(x)` in a loop makes a new one a call)."""

    __slots__ = ("calls", "work", "flops", "table", "seen", "mark")

    def __init__(self, seen: int):
        self.calls, self.work, self.seen, self.mark = 0, 0.0, seen, 0  # mark: the steps written at its last call
        self.flops = None  # the last count made
        self.table: dict = {}  # the shapes of a call -> its FLOPs


def _stats_of(made) -> _Stats:
    fun, seen = getattr(made, "_fun", None), made._cache_size()  # jax's cache of fun: shared by every jit of it
    try:
        return _stats.get(fun) or _stats.setdefault(fun, _Stats(seen))
    except TypeError:  # a function that takes no weak reference or no hash: a _Stats for this jit alone
        return _Stats(seen)


class _Forward:
    """An attribute of the wrapper that is jax's function's own (read and set there)."""

    def __init__(self, name: str):
        self.name = name

    def __get__(self, obj, objtype=None):
        return self if obj is None else getattr(object.__getattribute__(obj, "_fn"), self.name)

    def __set__(self, obj, value):
        setattr(object.__getattribute__(obj, "_fn"), self.name, value)


class _Jitted:
    """jax's jitted function, called unchanged, its calls seen (see the module's docstring)."""

    __slots__ = ("_fn", "_st", "__weakref__")

    def __init__(self, made):
        object.__setattr__(self, "_fn", made)
        object.__setattr__(self, "_st", _stats_of(made))

    def __call__(self, *args, **kwargs):
        fn = self._fn
        try:
            watched = _on and _top()
        except Exception as err:  # noqa: BLE001
            watched = _fail(err)
        out = fn(*args, **kwargs)  # the job's errors are its own: raised as they are
        if watched:
            try:
                _called(self._st, fn, args, kwargs)
            except Exception as err:  # noqa: BLE001
                if not isinstance(err, _markwriter._Off):
                    _fail(err)
        return out

    def __get__(self, obj, objtype=None):  # a jitted method binds its instance, as jax's does
        return self if obj is None else types.MethodType(self, obj)

    def __getattr__(self, name):
        if name in ("_fn", "_st"):
            raise AttributeError(name)
        return getattr(self._fn, name)

    def __setattr__(self, name, value):
        setattr(self._fn, name, value)

    def __delattr__(self, name):
        delattr(self._fn, name)

    def __repr__(self):
        return repr(self._fn)

    def __reduce_ex__(self, protocol):
        return self._fn.__reduce_ex__(protocol)  # pickled and copied as jax's function, where jax's can be

    __class__ = property(lambda self: type(self._fn))  # isinstance(it, type of jax's function) holds
    # jax's own, though a class attribute would answer first (__doc__, __module__) or a protocol looks on the class
    # (jax.stages.Wrapped); __name__, __wrapped__ and the rest reach __getattr__
    lower, trace, eval_shape, clear_cache, __doc__, __module__ = (
        _Forward(n) for n in ("lower", "trace", "eval_shape", "clear_cache", "__doc__", "__module__")
    )


def _called(st: _Stats, fn, args, kwargs) -> None:
    """A call made outside any trace has returned: its FLOPs, whose step it is, and the step written."""
    global _leader
    size = fn._cache_size()
    if size != st.seen:
        st.seen = size
        _analyse(st, fn, args, kwargs)
    st.calls += 1
    flops = st.flops if len(st.table) < 2 else st.table.get(_key(args, kwargs), st.flops)
    st.work += flops or 0.0
    mark, st.mark = st.mark, _written
    leader = _leader
    if st is not leader and st.calls >= 2 and (leader is None or st.work > LEAD * leader.work):
        _leader = leader = st
        if _written != mark:  # the step before it was written since its last call: this iteration has its step
            return
    if st is leader:
        _write(st, flops)


def _write(st: _Stats, flops) -> None:
    global _written
    markwriter = _markwriter
    if markwriter.own_steps or markwriter._path is None:  # the job steps itself, or marks are off
        return
    writer = markwriter._writer()
    n = 1 if _written else min(st.calls, 2)  # the first step function's first call, made before it was known
    value = flops if _flops_on else None
    for _ in range(n):
        writer.step(value, None, None, "J")
    _written += n


def _analyse(st: _Stats, fn, args, kwargs) -> None:
    """XLA's count of fn's HLO for the shapes of this call, into st (None where it cannot be had)."""
    flops = None
    try:
        jax = sys.modules[TARGET]
        info = getattr(fn, "_jit_info", None)  # static arguments go to lower() as they came, the others as shapes
        nums = {i % len(args) for i in getattr(info, "static_argnums", ()) or () if -len(args) <= i < len(args)}
        names = set(getattr(info, "static_argnames", ()) or ())
        spec = functools.partial(jax.tree_util.tree_map, functools.partial(_spec, jax))
        a = tuple(x if i in nums else spec(x) for i, x in enumerate(args))
        k = {n: x if n in names else spec(x) for n, x in kwargs.items()}
        with sys.modules["jax._src.config"].no_tracing(True):  # jax's caches answer, or this raises before
            lowered = fn.lower(*a, **k)  # the job's Python would run again
        flops = _cost(jax, lowered)
    except Exception:  # noqa: BLE001 -- no count for this signature: its steps carry none
        flops = None
    st.flops = flops
    key = _key(args, kwargs)
    if key is not None:
        st.table[key] = flops


def _spec(jax, x):
    """An argument as its shape alone: no reference to the job's array is kept (a donated one is gone by now)."""
    if isinstance(x, jax.Array):
        sharding = x.sharding if x.committed else None  # as the call saw it: jax's lowering cache then answers
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding, weak_type=x.weak_type)
    if type(x).__module__ == "numpy" and hasattr(x, "shape") and hasattr(x, "dtype"):
        return jax.ShapeDtypeStruct(x.shape, x.dtype)
    return x


def _cost(jax, lowered) -> float | None:
    lowering = getattr(lowered, "_lowering", None)
    if getattr(lowering, "compile_args", {}).get("num_devices", 1) != 1:
        return None  # the HLO of the whole program, on several devices: this process's share is not known here
    cost = lowered.cost_analysis()  # the HLO before XLA's passes; None where the backend is a plugin
    if cost is None:
        from jax._src import lib, xla_bridge

        analyse = getattr(getattr(lib, "_jax", None), "hlo_module_cost_analysis", None)
        cost = analyse(xla_bridge.get_backend("cpu"), lowered.compiler_ir("hlo").as_hlo_module())
    cost = cost[0] if isinstance(cost, (list, tuple)) and len(cost) == 1 else cost  # older JAX: one per device
    flops = float(cost["flops"])
    return flops if math.isfinite(flops) and flops > 0 else None


def _key(args, kwargs) -> tuple | None:
    """The shapes of a call's arguments, one level into a list, tuple or dict: what tells a batch of another
    size, cheaply (a full key would flatten every argument at every call); None where they are no key."""
    try:
        key = tuple(map(_shapes, args)) + tuple((n, _shapes(x)) for n, x in kwargs.items())
        hash(key)
        return key
    except Exception:  # noqa: BLE001 -- an argument's shape that is no tuple, a property that raises
        return None


def _shapes(x):
    shape = getattr(x, "shape", None)
    if shape is not None or not isinstance(x, (list, tuple, dict)):
        return shape
    items = list(x.values())[:KEY_ITEMS] if isinstance(x, dict) else x[:KEY_ITEMS]
    return tuple(getattr(v, "shape", None) for v in items)
