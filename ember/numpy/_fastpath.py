"""The eager fast path of ember.numpy functions (ufuncs, reductions, shapes, products).

Outside any transformation, a call such as ``jnp.add(x, 1.0)`` whose arguments are ember
Arrays and Python scalars is served from a cache of the function keyed by the signature of its
arguments: each Array's abstract value (shape, dtype, weak type), each scalar's Python type and
the values of static arguments (axes, shapes, dtypes). When a signature is seen a second time
the function is traced into a jaxpr (scalars as weakly typed values, which is how JAX's
promotion sees them) and compiled (``_replay``) into a small Python function that calls the
primitives' NumPy kernels directly, skipping promotion, binding and abstract evaluation. The
first result of a compiled signature is checked against the ordinary path; signatures that
cannot be replayed (errors, value-dependent code, constant outputs) stay on the ordinary path.

Array operators look a two-operand function's programs up themselves (``operator_method``);
functions of a sequence of arrays (``stack``) get one cache per sequence length
(``sequence_fastpath``), indexing by Arrays one per index template (``index_fastpath``).
Traced programs run the bodies of ``custom_jvp``/``custom_vjp``/nested ``jit`` calls inline.

Python scalars keep the ordinary path's conversion (``lax.convert_element_type``), and Python
ints outside the default integer range always take the ordinary path (which raises). Caches are
cleared whenever a config option changes (``jax_enable_x64`` changes every dtype decision);
while ``jax_debug_nans``/``jax_debug_infs`` or a rank promotion check is on, every call takes
the ordinary path (whose primitives are checked, and which warns on every call).

Example:
    >>> add = fastpath(plain_add, nargs=2)   # plain_add(x1, x2) written on lax primitives
    >>> add(jnp.ones(3), 1.0)                # traced on the first call, replayed afterwards
    Array([2., 2., 2.], dtype=float32)
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ember import core
from ember.config import config
from ember.core import EvalTrace, ShapedArray
from ember.custom_derivatives import custom_jvp_call_p, custom_vjp_call_p
from ember.interpreters.partial_eval import inline_calls, trace_to_jaxpr
from ember.interpreters.pjit import pjit_p
from ember.numpy._compiled import compile_program, compiles_later
from ember.numpy._eager_jit import compiles
from ember.numpy._replay import Fallback, compile_jaxpr
from ember.runtime.array import Array

_SCALAR_TYPES = frozenset((bool, int, float, complex))
_SEEN = object()  # cache value: this signature was called once (compiled when seen again)
_SLOW = object()  # cache value: this signature always takes the ordinary path
_NO_ENTRY = (_SLOW, _SLOW, _SLOW, None)  # matches no key objects
_L1_SIZE, _L2_SIZE = 2048, 512
# Seconds a signature's program may spend replayed before it is compiled, where compiling
# keeps its bits (``_compiled.compiles_later``): about one compile (ski rental, as eager
# loops).
TIER_AFTER_S = 0.03
# Equations calling a jaxpr, whose bodies programs run inline.
_CALLS = (custom_jvp_call_p, custom_vjp_call_p, pjit_p)

# The thread's trace state, read directly on the hot path (``current_trace()`` costs a call).
_trace_state = core._ctx


# ------------------------------------------------------------------ the per-function cache


def _same(a: Any, b: Any) -> bool:
    """Whether two results are identical: Arrays of one aval with the same bytes."""
    if isinstance(a, (tuple, list)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(_same(x, y) for x, y in zip(a, b)))
    return (type(a) is Array and type(b) is Array and a.aval == b.aval
            and a._value.tobytes() == b._value.tobytes())


_all_caches: list[FastFunction] = []


_STATIC_ATOMS = frozenset((type(None), bool, int, str, type(Ellipsis)))


def _static_key(v: Any) -> Any:
    """A hashable key of a static argument telling values apart exactly, or None if unusable.

    Types are part of the key (``1``, ``1.0`` and ``True`` differ) and floats are keyed by
    their bits' hex form (``0.0`` and ``-0.0`` differ).
    """
    t = type(v)
    if t in _STATIC_ATOMS:
        return (t, v)
    if t is float:
        return (t, v.hex())
    if t is tuple or t is list or t is slice:
        items = (v.start, v.stop, v.step) if t is slice else v
        parts = tuple(_static_key(e) for e in items)
        return None if None in parts else (t, parts)
    if isinstance(v, (np.dtype, type)):  # dtypes (``x.dtype``), scalar types (jnp.float32)
        return (np.dtype if isinstance(v, np.dtype) else t, v)
    if isinstance(v, (np.integer, np.bool_)):
        return (t, v.item())
    return None


class FastFunction:
    """The cache of compiled programs of one function (see the module docstring).

    The first ``nargs`` positional arguments are arrays (ember Arrays or Python scalars, which
    are abstract: only their type matters), except Python ints at positions ``static_ints``.
    With ``statics``, further positional arguments and keyword arguments are static: their
    values (see ``_static_key``) are part of the signature.
    """

    def __init__(self, fn: Callable, nargs: int, static_ints: tuple[int, ...] = (),
                 statics: bool = False):
        self.fn = fn
        self.nargs = nargs
        self.static_ints = static_ints
        self.statics = statics
        self.by_id: dict = {}  # ids of the signature's key objects -> (program, key objects)
        self.by_value: dict = {}  # key objects (avals, types, static keys) -> program/_SLOW
        self.last: list = [_NO_ENTRY]  # the wrapper's latest (key objects..., program)
        self.simple_binary = False  # whether the wrapper is ``_binary_entry``'s
        _all_caches.append(self)

    def clear(self) -> None:
        self.by_id.clear()
        self.by_value.clear()
        self.last[0] = _NO_ENTRY

    def key_objects(self, args: tuple, kwargs: dict) -> tuple | None:
        """The signature of a call: avals, scalar types and ("static", key) tuples; or None
        when the call must take the ordinary path."""
        nargs = self.nargs
        if len(args) < nargs or (len(args) > nargs or kwargs) and not self.statics:
            return None
        keys = []
        for i, a in enumerate(args):
            t = type(a)
            if i >= nargs or (t is int and i in self.static_ints):
                k = _static_key(a)
                if k is None:
                    return None
                keys.append(("static", k))
            elif t is Array:
                keys.append(a.aval)
            elif t in _SCALAR_TYPES:
                keys.append(t)
            else:
                return None
        if kwargs:
            k = _static_key(tuple(sorted(kwargs.items())))
            if k is None:
                return None
            keys.append(("kwargs", k))
        return tuple(keys)

    def id_key(self, keys: tuple) -> Any:
        """The ``by_id`` key of a signature, as the wrappers compute it."""
        if len(keys) == 1 and type(keys[0]) is not tuple:
            return id(keys[0])
        return tuple(k if type(k) is tuple else id(k) for k in keys)

    def miss(self, args: tuple, kwargs: dict = {}) -> Any:  # noqa: B006 - never mutated
        """Serves a call whose signature is not in ``by_id`` (compiling it if seen before)."""
        keys = self.key_objects(args, kwargs)
        if keys is None or config.eager_checks:  # (checks: NaNs, rank promotion warnings)
            return self.fn(*args, **kwargs)
        prog = self.by_value.get(keys)
        if prog is None:  # first sight: one-off signatures are not worth compiling
            if len(self.by_value) >= _L2_SIZE:
                self.clear()
            self.by_value[keys] = _SEEN
            return self.fn(*args, **kwargs)
        if prog is _SEEN:
            return self._compile_call(keys, args, kwargs)
        if prog is _SLOW:
            return self.fn(*args, **kwargs)
        self._remember(keys, prog)
        try:
            return prog(*args)
        except Fallback:
            return self.fn(*args, **kwargs)

    def _remember(self, keys: tuple, prog: Callable) -> None:
        if len(self.by_id) >= _L1_SIZE:
            self.by_id.clear()
        # The entry holds the key objects, so their ids cannot be reused while it lives.
        self.by_id[self.id_key(keys)] = (prog, keys)

    def _compile_call(self, keys: tuple, args: tuple, kwargs: dict) -> Any:
        """Compiles the signature, checking the program's result against the ordinary path."""
        candidates = self._build(keys, args, kwargs)
        result = self.fn(*args, **kwargs)  # the ordinary path decides (and raises)
        prog = None
        for candidate in candidates:  # (the first whose result has the ordinary path's bits)
            serves = getattr(candidate, "serves", None)
            if serves is not None and not serves(args):
                continue  # (it would not compute this call itself: it cannot be checked)
            try:
                fast = candidate(*args)
            except Fallback:
                return result  # a value-dependent fallback: decide again next time
            except Exception:  # noqa: BLE001 - any failure: try the next, or stay ordinary
                continue
            if _same(fast, result):
                prog = candidate
                break
        self.by_value[keys] = _SLOW if prog is None else prog
        if prog is not None:
            self._remember(keys, prog)
        return result

    def _build(self, keys: tuple, args: tuple, kwargs: dict) -> list[Callable]:
        """The programs that may serve the signature, best first: a compiled one for large
        arrays (``_compiled``), then the NumPy replay; none if the call cannot be replayed,
        or if the function compiles such calls itself (``_eager_jit``)."""
        if compiles(self.fn, args, kwargs):
            return []
        kinds, in_avals, scalar_avals = [], [], {}
        for i, (k, a) in enumerate(zip(keys, args)):
            if type(k) is tuple:
                kinds.append("static")
            elif type(k) is ShapedArray:
                kinds.append("array")
                in_avals.append(k)
            else:
                kinds.append("scalar")
                scalar_avals[i] = core.get_aval(a)
                in_avals.append(scalar_avals[i])
        kinds = tuple(kinds)
        out_tree = []

        def flat(*tracers):
            it = iter(tracers)
            full = [a if kind == "static" else next(it) for kind, a in zip(kinds, args)]
            out = self.fn(*full, **kwargs)
            if isinstance(out, (tuple, list)):
                out_tree.append(type(out))
                return list(out)
            out_tree.append(None)
            return [out]

        try:
            closed, _ = trace_to_jaxpr(flat, in_avals)
            # (Eagerly a call's custom derivative rules play no part: its body runs inline.)
            closed = inline_calls(closed, _CALLS)
            replay = compile_jaxpr(closed, kinds, scalar_avals, out_tree[0])
        except Exception:  # noqa: BLE001 - errors, value-dependent code: ordinary path
            return []
        if replay is None:
            return []
        name = getattr(self.fn, "__name__", "fn")
        try:
            compiled = compile_program(closed, kinds, scalar_avals, out_tree[0], name, replay)
            if compiled is None and compiles_later(closed):
                replay = self._tiered(keys, replay, functools.partial(
                    compile_program, closed, kinds, scalar_avals, out_tree[0], name, replay,
                    any_size=True))
        except Exception:  # noqa: BLE001 - a backend that cannot compile it: replay
            compiled = None
        return [replay] if compiled is None else [compiled, replay]

    def _tiered(self, keys: tuple, replay: Callable, compile: Callable) -> Callable:
        """``replay`` counting the seconds it spends; once they pass ``TIER_AFTER_S`` the
        signature's program becomes ``compile()``'s, where its result on that call has the
        replay's bits (else the plain replay, for good)."""
        spent = [0.0]
        perf_counter = time.perf_counter

        def run(*args):
            start = perf_counter()
            out = replay(*args)
            spent[0] += perf_counter() - start
            if spent[0] >= TIER_AFTER_S and self.by_value.get(keys) is run:
                self._promote(keys, args, out, replay, compile)
            return out

        run.replay = replay
        return run

    def _promote(self, keys: tuple, args: tuple, out: Any, replay: Callable,
                 compile: Callable) -> None:
        tiered = self.by_value[keys]
        self.by_value[keys] = replay  # (decided once: another thread does not compile too)
        try:
            compiled = compile()
            if compiled is not None and not compiled.serves(args):
                self.by_value[keys] = tiered  # (a strided call: check on a later one)
                return
            ok = compiled is not None and _same(compiled(*args), out)
        except Exception:  # noqa: BLE001 - any failure: the replay serves for good
            ok = False
        prog = compiled if ok else replay
        self.by_value[keys] = prog
        self._remember(keys, prog)
        self.last[0] = _NO_ENTRY


def _positional_only(fn: Callable, nargs: int) -> bool:
    """Whether ``fn``'s signature is exactly ``nargs`` required positional-only parameters."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return False
    return len(params) == nargs and all(
        p.kind is p.POSITIONAL_ONLY and p.default is p.empty for p in params)


def fastpath(fn: Callable, nargs: int, static_ints: tuple[int, ...] = (),
             statics: bool = False) -> Callable:
    """``fn`` with the eager fast path for its first ``nargs`` (array) arguments.

    Calls outside any transformation whose first ``nargs`` positional arguments are ember
    Arrays or Python scalars are served by a compiled program of their signature; every other
    call is ``fn`` itself. Python ints at positions ``static_ints`` are part of the signature
    (their value changes the computation, like an integer power). With ``statics``, further
    positional and keyword arguments (axes, shapes, dtypes, flags) may be given: their values
    are part of the signature; without it such calls take the ordinary path.

    Example:
        >>> square = fastpath(lambda x, /: lax.mul(x, x), nargs=1)
        >>> total = fastpath(plain_sum, nargs=1, statics=True)   # total(x, axis=0)
    """
    cache = FastFunction(fn, nargs, static_ints, statics)
    by_id, miss, last = cache.by_id, cache.miss, cache.last
    key_objects, id_key = cache.key_objects, cache.id_key
    simple = not static_ints and not statics and _positional_only(fn, nargs)
    cache.simple_binary = simple and nargs == 2
    # ``last[0]`` is (key objects..., program) of the latest signature served from ``by_id``:
    # a repeated signature is recognized by identity, without building a key. It is one tuple,
    # replaced whole, so another thread never sees a half-updated entry.

    if simple and nargs == 1:
        def wrapper(x, /):
            if type(_trace_state.trace) is not EvalTrace:
                return fn(x)
            k = x.aval if type(x) is Array else type(x)
            entry = last[0]
            if k is not entry[0]:
                entry = by_id.get(id(k))
                if entry is None:
                    return miss((x,))
                last[0] = entry = (k, entry[0])
            try:
                return entry[1](x)
            except Fallback:
                return fn(x)
    elif simple and nargs == 2:
        wrapper = _binary_entry(cache, fn, lambda x1, x2: miss((x1, x2)))
    elif nargs == 3 and not static_ints and not statics:
        def wrapper(*args, **kwargs):
            if kwargs or len(args) != 3 or type(_trace_state.trace) is not EvalTrace:
                return fn(*args, **kwargs)
            x1, x2, x3 = args
            k1 = x1.aval if type(x1) is Array else type(x1)
            k2 = x2.aval if type(x2) is Array else type(x2)
            k3 = x3.aval if type(x3) is Array else type(x3)
            entry = last[0]
            if k1 is not entry[0] or k2 is not entry[1] or k3 is not entry[2]:
                entry = by_id.get((id(k1), id(k2), id(k3)))
                if entry is None:
                    return miss(args)
                last[0] = entry = (k1, k2, k3, entry[0])
            try:
                return entry[3](x1, x2, x3)
            except Fallback:
                return fn(x1, x2, x3)
    else:
        def wrapper(*args, **kwargs):
            if type(_trace_state.trace) is not EvalTrace:
                return fn(*args, **kwargs)
            keys = key_objects(args, kwargs)
            if keys is None:
                return fn(*args, **kwargs)
            entry = by_id.get(id_key(keys))
            if entry is None:
                return miss(args, kwargs)
            try:
                return entry[0](*args)
            except Fallback:
                return fn(*args, **kwargs)

    functools.update_wrapper(wrapper, fn)
    wrapper._fast_cache = cache
    return wrapper


def _binary_entry(cache: FastFunction, slow: Callable, on_miss: Callable,
                  reflected: bool = False) -> Callable:
    """A function of two operands that runs ``cache``'s program of their signature.

    Outside plain eager evaluation it calls ``slow``, for a signature without a program
    ``on_miss``, and where the program falls back the ordinary function; each gets the
    arguments it was given. With ``reflected`` it is an Array's reflected operator
    (``x.__radd__(y)`` computes ``y + x``), whose operands come swapped.
    """
    by_id, last, fn = cache.by_id, cache.last, cache.fn
    if reflected:
        def entry_point(x2, x1, /):
            if type(_trace_state.trace) is not EvalTrace:
                return slow(x2, x1)
            k1 = x1.aval if type(x1) is Array else type(x1)
            k2 = x2.aval
            entry = last[0]
            if k1 is not entry[0] or k2 is not entry[1]:
                entry = by_id.get((id(k1), id(k2)))
                if entry is None:
                    return on_miss(x2, x1)
                last[0] = entry = (k1, k2, entry[0])
            try:
                return entry[2](x1, x2)
            except Fallback:
                return fn(x1, x2)
        return entry_point

    def entry_point(x1, x2, /):
        if type(_trace_state.trace) is not EvalTrace:
            return slow(x1, x2)
        k1 = x1.aval if type(x1) is Array else type(x1)
        k2 = x2.aval if type(x2) is Array else type(x2)
        entry = last[0]
        if k1 is not entry[0] or k2 is not entry[1]:
            entry = by_id.get((id(k1), id(k2)))
            if entry is None:
                return on_miss(x1, x2)
            last[0] = entry = (k1, k2, entry[0])
        try:
            return entry[2](x1, x2)
        except Fallback:
            return fn(x1, x2)
    return entry_point


def operator_method(function: Callable, method: Callable, reflected: bool) -> Callable:
    """An Array operator ``method`` (``__add__``...) that calls ``function``, with the fast
    path's lookup inlined: a signature with a compiled program runs it at once, everything
    else takes ``method``. Programs exist only for Arrays and Python scalars, the operands
    that operator methods never defer, so both routes agree. Functions without a two-operand
    fast path keep ``method``.
    """
    cache = getattr(function, "_fast_cache", None)
    if cache is None or not cache.simple_binary:
        return method
    return _binary_entry(cache, method, method, reflected)


# The longest sequences whose functions ``sequence_fastpath`` compiles (one cache per type
# and length: the bound keeps their number small).
_MAX_SEQUENCE = 32


def sequence_fastpath(fn: Callable) -> Callable:
    """``fn(arrays, ...)``, whose first argument is a list or tuple of arrays (``stack``,
    ``concatenate``), with the fast path: an eager call runs the program of a function of
    the arrays themselves, one fast-path function per sequence type and length (up to
    ``_MAX_SEQUENCE``); further arguments are static.

    Example:
        >>> stack = sequence_fastpath(plain_stack)
        >>> stack([x, y], axis=1)   # as fastpath(lambda x, y, axis: plain_stack([x, y], axis))
    """
    by_length: dict[tuple[type, int], Callable] = {}

    def wrapper(arrays, *args, **kwargs):
        kind = type(arrays)
        if (kind is not list and kind is not tuple) or len(arrays) > _MAX_SEQUENCE \
                or type(_trace_state.trace) is not EvalTrace:
            return fn(arrays, *args, **kwargs)
        fast = by_length.get((kind, len(arrays)))
        if fast is None:
            n = len(arrays)
            fast = by_length[kind, n] = fastpath(
                lambda *a, **k: fn(kind(a[:n]), *a[n:], **k), n, statics=True)
        return fast(*arrays, *args, **kwargs)

    functools.update_wrapper(wrapper, fn)
    return wrapper


_ARRAY_SLOT = ("array",)  # an Array's place in an index template (static keys are pairs)
_MAX_TEMPLATES = 64


def index_fastpath(fn: Callable) -> Callable:
    """``fn(x, idx)`` (``x[idx]``) with the fast path for static indices and for indices
    holding Arrays (``x[i]``, ``x[:, i, 0]``): those run the program of a function of ``x``
    and the index Arrays, one fast-path function per index template (the index's static
    parts, up to ``_MAX_TEMPLATES`` of them).

    Example:
        >>> getitem = index_fastpath(plain_getitem)
        >>> getitem(x, (slice(None), i))   # as fastpath(lambda x, i: plain_getitem(x, (:, i)))
    """
    static = fastpath(fn, 1, statics=True)
    by_template: dict[tuple, Callable] = {}

    def wrapper(x, idx):
        kind = type(idx)
        if (kind is Array or (kind is tuple and any(type(e) is Array for e in idx))) \
                and type(_trace_state.trace) is EvalTrace:
            parts = idx if kind is tuple else (idx,)
            template = (kind, *(_ARRAY_SLOT if type(e) is Array else _static_key(e)
                                for e in parts))
            fast = by_template.get(template)
            if fast is None and None not in template and len(by_template) < _MAX_TEMPLATES:
                fast = by_template[template] = _indexed(fn, kind, parts)
            if fast is not None:
                return fast(x, *(e for e in parts if type(e) is Array))
        return static(x, idx)

    functools.update_wrapper(wrapper, fn)
    return wrapper


def _indexed(fn: Callable, kind: type, parts: tuple) -> Callable:
    """The fast path of ``fn(x, index)`` as a function of ``x`` and the index's Arrays, the
    other parts of the index fixed to those of ``parts``."""
    slots = [type(e) is Array for e in parts]
    fixed = [None if slot else e for slot, e in zip(slots, parts)]

    def indexed(x, *arrays):
        it = iter(arrays)
        index = tuple(next(it) if slot else e for slot, e in zip(slots, fixed))
        return fn(x, index if kind is tuple else index[0])
    return fastpath(indexed, 1 + sum(slots))


# ember.numpy functions (other than the ufuncs, which install theirs in ember.numpy.ufuncs)
# whose leading array arguments get the fast path, any further arguments being static.
_STATIC_SIGNATURES = {
    1: ("sum", "prod", "max", "min", "amax", "amin", "ptp", "all", "any", "count_nonzero",
        "argmax", "argmin", "mean", "var", "std", "nansum", "nanprod", "nanmax", "nanmin",
        "nanmean", "nanvar", "nanstd", "cumsum", "cumprod", "reshape", "ravel", "transpose",
        "permute_dims", "matrix_transpose", "swapaxes", "moveaxis", "expand_dims",
        "squeeze", "flip", "broadcast_to", "astype"),
    2: ("matmul", "dot", "vdot", "inner", "outer", "tensordot", "take", "take_along_axis"),
}
# ember.numpy functions of a sequence of arrays (``sequence_fastpath``).
_SEQUENCE_FUNCTIONS = ("concatenate", "concat", "stack", "hstack", "vstack", "dstack",
                       "column_stack")


def install(namespace: Any, signatures: dict[int, tuple[str, ...]] = _STATIC_SIGNATURES
            ) -> None:
    """Gives the functions of ``signatures`` (number of leading array arguments -> names) in
    ``namespace`` the fast path, any further arguments being static; with the default,
    also ``_SEQUENCE_FUNCTIONS`` and ``_getitem``."""
    wrapped: dict[int, Callable] = {}
    for nargs, names in signatures.items():
        for name in names:
            fn = getattr(namespace, name)
            if id(fn) not in wrapped:
                wrapped[id(fn)] = fastpath(fn, nargs, statics=True)
            setattr(namespace, name, wrapped[id(fn)])
    if signatures is _STATIC_SIGNATURES:
        for name in _SEQUENCE_FUNCTIONS:
            setattr(namespace, name, sequence_fastpath(getattr(namespace, name)))
        namespace._getitem = index_fastpath(namespace._getitem)


class _OrdinaryEvalTrace(EvalTrace):
    """An eval trace that is not the plain one: eager ops run, fast paths stand aside."""


@contextlib.contextmanager
def ordinary_path():
    """Within the block, eager calls take the ordinary path (for tests and debugging).

    Example:
        >>> with ordinary_path():
        ...     jnp.add(x, 1)   # promotion, lax binding and abstract evaluation as usual
    """
    with core.set_current_trace(_OrdinaryEvalTrace()):
        yield


def _on_config_change(name: str, value: Any) -> None:
    for cache in _all_caches:
        cache.clear()


config._listeners.append(_on_config_change)
