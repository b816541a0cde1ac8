"""The eager fast path of ember.numpy's elementwise functions.

Outside any transformation, a call such as ``jnp.add(x, 1.0)`` whose arguments are ember
Arrays and Python scalars is served from a cache of the function keyed by the signature of its
arguments: each Array's abstract value (shape, dtype, weak type) and each scalar's Python type.
On a miss the function is traced once into a jaxpr (scalars as weakly typed values, which is
how JAX's promotion sees them) and compiled into a small Python function that calls the
primitives' NumPy kernels directly, skipping promotion, binding and abstract evaluation. The
first result of a new signature is checked against the ordinary path; signatures that cannot
be replayed (errors, value-dependent code, constant outputs) stay on the ordinary path for good.

Python scalars keep the ordinary path's conversion (``lax.convert_element_type``), and Python
ints outside the default integer range always take the ordinary path (which raises). Caches are
cleared whenever a config option changes (``jax_enable_x64`` changes every dtype decision).

Example:
    >>> add = fastpath(plain_add, nargs=2)   # plain_add(x1, x2) written on lax primitives
    >>> add(jnp.ones(3), 1.0)                # traced on the first call, replayed afterwards
    Array([2., 2., 2.], dtype=float32)
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from ember import core, dtypes, lax
from ember.config import config
from ember.core import EvalTrace, ShapedArray
from ember.interpreters.partial_eval import trace_to_jaxpr
from ember.jaxpr import Literal
from ember.lax import elementwise as ew
from ember.lax.shape import broadcast_in_dim_p
from ember.runtime.array import Array

_SCALAR_TYPES = frozenset((bool, int, float, complex))
_LOW_FLOATS = (dtypes.float16, dtypes.bfloat16)
_SEEN = object()  # cache value: this signature was called once (compiled when seen again)
_SLOW = object()  # cache value: this signature always takes the ordinary path
_NO_ENTRY = (_SLOW, _SLOW, _SLOW, None)  # matches no key objects
_L1_SIZE, _L2_SIZE = 2048, 512

# The thread's trace state, read directly on the hot path (``current_trace()`` costs a call).
_trace_state = core._ctx
_setflags = np.ndarray.setflags
_new = object.__new__

# NumPy's floating-point error state lives in a context variable; setting it directly costs a
# tenth of ``np.errstate``. The kernels below run with all errors ignored (XLA never warns).
try:
    from numpy._core.umath import _extobj_contextvar as _errvar

    with np.errstate(all="ignore"):
        _IGNORE = _errvar.get()
except (ImportError, AttributeError):  # pragma: no cover - other NumPy versions
    _errvar = _IGNORE = None


class _Fallback(Exception):
    """Raised by a compiled program when this call must take the ordinary path."""


# ------------------------------------------------------------------ kernels
# Primitives whose eager impl is a NumPy ufunc wrapped only to silence warnings (the compiled
# programs run with warnings off), so the ufunc itself can be called.

def _square(x):
    return np.multiply(x, x)


_ANY_DTYPE = {
    ew.add_p: np.add, ew.sub_p: np.subtract, ew.mul_p: np.multiply, ew.neg_p: np.negative,
    ew.max_p: np.maximum, ew.min_p: np.minimum, ew.abs_p: np.abs, ew.square_p: _square,
    ew.eq_p: np.equal, ew.ne_p: np.not_equal, ew.lt_p: np.less, ew.le_p: np.less_equal,
    ew.gt_p: np.greater, ew.ge_p: np.greater_equal, ew.and_p: np.bitwise_and,
    ew.or_p: np.bitwise_or, ew.xor_p: np.bitwise_xor, ew.not_p: np.invert,
}
# Float math: float16/bfloat16 are computed in float32 by the impl, other dtypes directly.
_NOT_LOW_FLOAT = {
    ew.exp_p: np.exp, ew.exp2_p: np.exp2, ew.expm1_p: np.expm1, ew.log_p: np.log,
    ew.log1p_p: np.log1p, ew.sqrt_p: np.sqrt, ew.cbrt_p: np.cbrt, ew.sin_p: np.sin,
    ew.cos_p: np.cos, ew.tan_p: np.tan, ew.asin_p: np.arcsin, ew.acos_p: np.arccos,
    ew.atan_p: np.arctan, ew.sinh_p: np.sinh, ew.cosh_p: np.cosh, ew.tanh_p: np.tanh,
    ew.asinh_p: np.arcsinh, ew.acosh_p: np.arccosh, ew.atanh_p: np.arctanh,
    ew.atan2_p: np.arctan2, ew.floor_p: np.floor, ew.ceil_p: np.ceil,
}


def _raw_convert(src: np.dtype, dst: np.dtype) -> Callable | None:
    # convert_element_type is a plain cast except into bool, complex to real, float to int
    # (saturating) and casts involving float16/bfloat16 (kept on the impl).
    if (dst == dtypes.bool_ or src in _LOW_FLOATS or dst in _LOW_FLOATS
            or (dtypes.is_complex(src) and not dtypes.is_complex(dst))
            or (dtypes.is_integer(dst) and dtypes.is_inexact(src))):
        return None
    return lambda x: x.astype(dst)


def _select2(which, case0, case1):
    return np.where(which, case1, case0)


def _raw_kernel(eqn) -> Callable | None:
    """A NumPy function computing ``eqn`` (broadcasting like NumPy), or None: use the impl."""
    prim, in_dts = eqn.primitive, [a.aval.dtype for a in eqn.invars]
    raw = _ANY_DTYPE.get(prim)
    if raw is None and not any(dt in _LOW_FLOATS for dt in in_dts):
        raw = _NOT_LOW_FLOAT.get(prim)
    if raw is None and prim is ew.div_p and dtypes.is_inexact(in_dts[0]):
        raw = np.true_divide
    if raw is None and prim is ew.select_n_p and len(in_dts) == 3 and \
            in_dts[0] == dtypes.bool_:
        raw = _select2
    if raw is None and prim is ew.convert_element_type_p:
        raw = _raw_convert(in_dts[0], eqn.params["new_dtype"])
    return raw


def _numpy_broadcast(eqn) -> bool:
    """Whether ``eqn`` is a broadcast_in_dim that NumPy's broadcasting rules also perform."""
    if eqn.primitive is not broadcast_in_dim_p:
        return False
    ndim, out_ndim = len(eqn.invars[0].aval.shape), len(eqn.params["shape"])
    return tuple(eqn.params["broadcast_dimensions"]) == tuple(range(out_ndim - ndim, out_ndim))


def _plan(jaxpr) -> list[tuple[Any, list, Callable | None]]:
    """The equations to run, as (eqn, operands, raw kernel or None).

    A NumPy-style broadcast feeding a raw kernel is left to the kernel's own broadcasting when
    the output shape stays the same; equations whose outputs are then unused are dropped.
    """
    source: dict[int, Any] = {}  # id(output of a NumPy-style broadcast) -> its operand
    steps = []
    for eqn in jaxpr.eqns:
        raw = _raw_kernel(eqn)
        operands = list(eqn.invars)
        if raw is not None and any(id(a) in source for a in operands):
            folded = [source.get(id(a), a) for a in operands]
            shape = np.broadcast_shapes(*(a.aval.shape for a in folded))
            if shape == eqn.outvars[0].aval.shape:
                operands = folded
        if _numpy_broadcast(eqn):
            source[id(eqn.outvars[0])] = eqn.invars[0]
        steps.append((eqn, operands, raw))
    live = {id(v) for v in jaxpr.outvars}
    kept = []
    for eqn, operands, raw in reversed(steps):
        if any(id(v) in live for v in eqn.outvars):
            kept.append((eqn, operands, raw))
            live.update(id(a) for a in operands)
    return kept[::-1]


# ------------------------------------------------------------------ compiling a jaxpr


def _int_bounds() -> tuple[int, int]:
    info = np.iinfo(dtypes.default_int_dtype())
    return int(info.min), int(info.max)


def _convert_scalar(memo: dict, x: Any, dtype: np.dtype, weak: bool) -> np.ndarray:
    """``x`` converted as the ordinary path converts it, memoized in ``memo`` by value.

    A memo serves one argument position of one signature, so its keys share one Python type;
    zeros (0.0 == -0.0) and NaNs (NaN != NaN) are not memoized.
    """
    value = lax.convert_element_type(x, dtype, weak)._value
    if x == x and x != 0:
        if len(memo) >= 256:
            memo.clear()
        memo[x] = value
    return value


def _compile(closed, kinds: tuple, scalar_avals: dict, out_tree: type | None) -> Callable | None:
    """The jaxpr as a Python function of the call's arguments; None if not replayable.

    ``kinds[i]`` is "array", "scalar" or "static" for argument i; the jaxpr's invars are the
    non-static arguments in order. ``out_tree`` is tuple/list for several outputs.
    """
    jaxpr = closed.jaxpr
    env: dict[str, Any] = {
        "_Array": Array, "_new": _new, "_sf": _setflags, "_asarray": np.asarray,
        "_conv": _convert_scalar, "_Fallback": _Fallback, "_IGNORE": _IGNORE,
        "_errset": _errvar and _errvar.set, "_errreset": _errvar and _errvar.reset,
        "_errstate": np.errstate, "_ndarray": np.ndarray,
        "_fix": _fix_value,
    }
    names: dict[int, str] = {}  # id(var) -> local name
    arg_of: dict[int, int] = {}  # id(invar) -> argument position
    invars = iter(jaxpr.invars)
    for i, kind in enumerate(kinds):
        if kind != "static":  # static arguments are baked into the jaxpr
            var = next(invars)
            names[id(var)] = f"v{i}"
            arg_of[id(var)] = i
    for j, c in enumerate(jaxpr.constvars):
        value = closed.consts[j]
        env[f"_c{j}"] = value._value if isinstance(value, Array) else np.asarray(value)
        names[id(c)] = f"_c{j}"
    used: set[str] = set()

    def atom(a) -> str:
        if isinstance(a, Literal):
            name = f"_lit{len(env)}"
            env[name] = np.asarray(a.val, a.aval.dtype)
            return name
        used.add(names[id(a)])
        return names[id(a)]

    body = []
    for j, (eqn, operands, raw) in enumerate(_plan(jaxpr)):
        outs = [f"t{j}_{k}" for k in range(len(eqn.outvars))]
        for v, n in zip(eqn.outvars, outs):
            names[id(v)] = n
        pos = arg_of.get(id(operands[0])) if operands else None
        if (eqn.primitive is ew.convert_element_type_p and pos is not None
                and kinds[pos] == "scalar"):
            # A Python scalar converted by promotion: the ordinary path's own conversion.
            env[f"_dt{j}"], env[f"_m{j}"] = eqn.params["new_dtype"], {}
            body.append(f"        {outs[0]} = _m{j}.get(a{pos})")
            body.append(f"        if {outs[0]} is None: {outs[0]} = _conv(_m{j}, a{pos}, "
                        f"_dt{j}, {bool(eqn.params['weak_type'])})")
            continue
        if raw is not None:
            env[f"_k{j}"] = raw
        else:
            env[f"_k{j}"] = (functools.partial(eqn.primitive.impl, **eqn.params)
                             if eqn.params else eqn.primitive.impl)
        call = f"_k{j}({', '.join(atom(a) for a in operands)})"
        many = "," if eqn.primitive.multiple_results else ""
        body.append(f"        {', '.join(outs)}{many} = {call}")
        for v, n in zip(eqn.outvars, outs):
            env[f"_d{n}"] = v.aval.dtype
            if raw is None:  # as the eager path: every value an ndarray of its aval's dtype
                body.append(f"        if type({n}) is not _ndarray or {n}.dtype != _d{n}: "
                            f"{n} = _fix({n}, _d{n})")
            elif v.aval.shape == ():  # ufuncs give NumPy scalars for 0-d operands
                body.append(f"        {n} = _asarray({n})")

    rets, tail = [], []
    for k, v in enumerate(jaxpr.outvars):
        if isinstance(v, Literal) or names.get(id(v), "_c").startswith("_c"):
            return None  # a constant output: not worth replaying
        n = names[id(v)]
        if id(v) in arg_of and kinds[arg_of[id(v)]] == "array":
            rets.append(f"a{arg_of[id(v)]}")  # the argument itself, as the ordinary path
            continue
        used.add(n)
        env[f"_av{k}"] = v.aval
        tail.append(f"    _sf({n}, False)")
        tail.append(f"    o{k} = _new(_Array); o{k}._value = {n}; o{k}.aval = _av{k}")
        rets.append(f"o{k}")
    if out_tree is None:
        result = rets[0]
    else:
        result = f"({', '.join(rets)},)" if out_tree is tuple else f"[{', '.join(rets)}]"

    head = []
    lo, hi = _int_bounds()
    for i, kind in enumerate(kinds):
        if kind == "array":
            if f"v{i}" in used:
                head.append(f"    v{i} = a{i}._value")
        elif kind == "scalar":
            aval = scalar_avals[i]
            if aval.dtype != dtypes.bool_ and dtypes.is_integer(aval.dtype):
                head.append(f"    if not {lo} <= a{i} <= {hi}: raise _Fallback")
            if f"v{i}" in used:
                env[f"_sdt{i}"], env[f"_sm{i}"] = aval.dtype, {}
                head.append(f"    v{i} = _sm{i}.get(a{i})")
                head.append(f"    if v{i} is None: v{i} = _conv(_sm{i}, a{i}, _sdt{i}, "
                            f"{aval.weak_type})")
    lines = [f"def run({', '.join(f'a{i}' for i in range(len(kinds)))}):", *head]
    # Integer and boolean kernels never raise floating-point warnings: no error state needed.
    quiet = not any(dtypes.is_inexact(v.aval.dtype) for eqn in jaxpr.eqns
                    for v in (*eqn.invars, *eqn.outvars))
    if quiet:
        lines += [line[4:] for line in body]
    elif body:
        if _errvar is not None:
            lines += ["    tok = _errset(_IGNORE)", "    try:", *body,
                      "    finally:", "        _errreset(tok)"]
        else:  # pragma: no cover - other NumPy versions
            lines += ["    with _errstate(all='ignore'):", "      if True:", *body]
    lines += [*tail, f"    return {result}"]
    source = "\n".join(lines)
    exec(compile(source, "<ember fastpath>", "exec"), env)  # noqa: S102
    run = env["run"]
    run.source = source
    return run


def _fix_value(value: Any, dtype: np.dtype) -> np.ndarray:
    value = np.asarray(value)
    return value if value.dtype == dtype else value.astype(dtype)


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
    if t is np.dtype or isinstance(v, type):  # dtypes and scalar types (jnp.float32)
        return (t, v)
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
        if keys is None:
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
        except _Fallback:
            return self.fn(*args, **kwargs)

    def _remember(self, keys: tuple, prog: Callable) -> None:
        if len(self.by_id) >= _L1_SIZE:
            self.by_id.clear()
        # The entry holds the key objects, so their ids cannot be reused while it lives.
        self.by_id[self.id_key(keys)] = (prog, keys)

    def _compile_call(self, keys: tuple, args: tuple, kwargs: dict) -> Any:
        """Compiles the signature, checking the program's result against the ordinary path."""
        prog = self._build(keys, args, kwargs)
        result = self.fn(*args, **kwargs)  # the ordinary path decides (and raises)
        if prog is not None:
            try:
                fast = prog(*args)
            except _Fallback:
                return result  # a value-dependent fallback: decide again next time
            except Exception:  # noqa: BLE001 - any failure keeps the ordinary path
                prog = None
            else:
                if not _same(fast, result):
                    prog = None
        self.by_value[keys] = _SLOW if prog is None else prog
        if prog is not None:
            self._remember(keys, prog)
        return result

    def _build(self, keys: tuple, args: tuple, kwargs: dict) -> Callable | None:
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
        except Exception:  # noqa: BLE001 - errors, value-dependent code: ordinary path
            return None
        return _compile(closed, kinds, scalar_avals, out_tree[0])


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
            except _Fallback:
                return fn(x)
    elif simple and nargs == 2:
        def wrapper(x1, x2, /):
            if type(_trace_state.trace) is not EvalTrace:
                return fn(x1, x2)
            k1 = x1.aval if type(x1) is Array else type(x1)
            k2 = x2.aval if type(x2) is Array else type(x2)
            entry = last[0]
            if k1 is not entry[0] or k2 is not entry[1]:
                entry = by_id.get((id(k1), id(k2)))
                if entry is None:
                    return miss((x1, x2))
                last[0] = entry = (k1, k2, entry[0])
            try:
                return entry[2](x1, x2)
            except _Fallback:
                return fn(x1, x2)
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
            except _Fallback:
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
            except _Fallback:
                return fn(*args, **kwargs)

    functools.update_wrapper(wrapper, fn)
    wrapper._fast_cache = cache
    return wrapper


# ember.numpy functions (other than the ufuncs, which install theirs in ember.numpy.ufuncs)
# whose leading array arguments get the fast path, any further arguments being static.
_STATIC_SIGNATURES = {
    1: ("sum", "prod", "max", "min", "amax", "amin", "ptp", "all", "any", "count_nonzero",
        "argmax", "argmin", "mean", "var", "std", "nansum", "nanprod", "nanmax", "nanmin",
        "nanmean", "nanvar", "nanstd", "cumsum", "cumprod", "reshape", "ravel", "transpose",
        "permute_dims", "matrix_transpose", "swapaxes", "moveaxis", "expand_dims",
        "squeeze", "flip", "broadcast_to", "astype", "_getitem"),
    2: ("matmul", "dot", "vdot", "inner", "outer", "tensordot"),
}


def install(namespace: Any) -> None:
    """Gives the functions of ``_STATIC_SIGNATURES`` in ``namespace`` the fast path."""
    wrapped: dict[int, Callable] = {}
    for nargs, names in _STATIC_SIGNATURES.items():
        for name in names:
            fn = getattr(namespace, name)
            if id(fn) not in wrapped:
                wrapped[id(fn)] = fastpath(fn, nargs, statics=True)
            setattr(namespace, name, wrapped[id(fn)])


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
