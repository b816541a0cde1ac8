"""Compiling a jaxpr into a Python function that calls NumPy kernels directly (eager replay).

Used by the eager fast path (``_fastpath``): the jaxpr of one call signature of an ember.numpy
function becomes a small generated function of the call's arguments. Each equation calls its
primitive's eager impl, or the bare NumPy ufunc where the impl only adds warning control; the
whole program runs with NumPy's floating-point warnings off, as XLA never warns (unless every
kernel is ``fp_quiet``: a native loop, or an impl that silences its own). Values are
normalized like the eager path's (``ember.runtime.eager``): NumPy arrays of the abstract value's
dtype, outputs read-only ember Arrays with the jaxpr's output avals.

Example:
    >>> closed, _ = trace_to_jaxpr(lambda x: [jnp.sin(x)], [ShapedArray((3,), np.float32)])
    >>> run = compile_jaxpr(closed, ("array",), {}, None)
    >>> run(jnp.zeros(3))
    Array([0., 0., 0.], dtype=float32)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ember import dtypes, lax
from ember.compiler import eval_elementwise
from ember.jaxpr import Literal
from ember.lax import elementwise as ew
from ember.lax.shape import broadcast_in_dim_p
from ember.runtime.array import Array
from ember.runtime.eager import ignore_fp_errors, restore_fp_errors

LOW_FLOATS = (dtypes.float16, dtypes.bfloat16)


class Fallback(Exception):
    """Raised by a compiled program when this call must take the ordinary path."""


# ------------------------------------------------------------------ kernels
# Primitives whose eager impl is a NumPy ufunc wrapped only to silence warnings.

def _select2(which, case0, case1):
    which, case0, case1 = np.asarray(which), np.asarray(case0), np.asarray(case1)
    shape = _blend_shape(which, case0, case1)
    if shape is None:
        return np.where(which, case1, case0)
    # (the same bits by integer masks: ``np.where`` branches on each element, 3.9 ms for 1M
    # float32 under a random mask against 0.75 so)
    # (Operands broadcast in the ufuncs: ``np.broadcast_to`` views cost ~3 us each, and a
    # ufunc reads a 0-d operand once.)
    u = np.dtype(f"u{case0.dtype.itemsize}")
    which = which if which.dtype == np.bool_ else which != 0
    mask = which.view(np.uint8).astype(u)
    np.negative(mask, out=mask)  # (all ones where case1 is taken)
    c0 = case0.view(u)
    out = np.bitwise_xor(c0, case1.view(u))
    out = np.bitwise_and(out, mask, out=out if out.shape == shape else None)
    out ^= c0
    return out.view(case0.dtype)


# The least elements for which ``_select2`` selects by masks rather than ``np.where``.
_BLEND_MIN_SIZE = 1 << 12


def _blend_shape(which, case0, case1) -> tuple | None:
    """The result's shape where ``_select2`` may select by masks, else None."""
    if case0.dtype != case1.dtype or case0.dtype.itemsize not in (1, 2, 4, 8) \
            or which.dtype.kind not in "biu" or which.ndim == 0:
        return None
    shape = which.shape
    if (case0.shape != shape and case0.ndim) or (case1.shape != shape and case1.ndim):
        try:  # (~2 us: only where the operands' shapes differ other than by 0-d ones)
            shape = np.broadcast_shapes(shape, case0.shape, case1.shape)
        except ValueError:
            return None
    return shape if math.prod(shape) >= _BLEND_MIN_SIZE else None


ANY_DTYPE = {
    ew.add_p: np.add, ew.sub_p: np.subtract, ew.mul_p: np.multiply, ew.neg_p: np.negative,
    ew.abs_p: np.abs, ew.square_p: eval_elementwise.square,
    ew.eq_p: np.equal, ew.ne_p: np.not_equal, ew.lt_p: np.less, ew.le_p: np.less_equal,
    ew.gt_p: np.greater, ew.ge_p: np.greater_equal, ew.and_p: np.bitwise_and,
    ew.or_p: np.bitwise_or, ew.xor_p: np.bitwise_xor, ew.not_p: np.invert,
}
# Float math: the impl computes float16/bfloat16 in float32 and complex numbers with XLA's
# special values; other dtypes are direct.
NOT_LOW_FLOAT = {
    ew.exp_p: np.exp, ew.exp2_p: np.exp2, ew.expm1_p: eval_elementwise.expm1, ew.log_p: np.log,
    ew.log1p_p: eval_elementwise.log1p, ew.sqrt_p: np.sqrt, ew.cbrt_p: np.cbrt, ew.sin_p: np.sin,
    ew.cos_p: np.cos, ew.tan_p: np.tan, ew.asin_p: np.arcsin, ew.acos_p: np.arccos,
    ew.atan_p: np.arctan, ew.sinh_p: np.sinh, ew.cosh_p: np.cosh, ew.tanh_p: np.tanh,
    ew.asinh_p: np.arcsinh, ew.acosh_p: np.arccosh, ew.atanh_p: np.arctanh,
    ew.atan2_p: np.arctan2, ew.floor_p: np.floor, ew.ceil_p: np.ceil,
}


def raw_convert(src: np.dtype, dst: np.dtype) -> Callable | None:
    """``x.astype(dst)`` where convert_element_type is a plain cast, else None.

    Not plain: into bool, complex to real, float to int (saturating) and casts involving
    float16/bfloat16.
    """
    if (dst == dtypes.bool_ or src in LOW_FLOATS or dst in LOW_FLOATS
            or (dtypes.is_complex(src) and not dtypes.is_complex(dst))
            or (dtypes.is_integer(dst) and dtypes.is_inexact(src))):
        return None
    return lambda x: x.astype(dst)


def raw_kernel(eqn) -> Callable | None:
    """A NumPy function computing ``eqn`` (broadcasting like NumPy), or None: use the impl."""
    prim, in_dts = eqn.primitive, [a.aval.dtype for a in eqn.invars]
    native = getattr(prim.impl, "native_kernel", None)  # (as the impl would run it)
    if native is not None and (raw := native(in_dts[0])) is not None:
        return raw
    # (Complex math follows XLA at special values, where NumPy's ufuncs follow C99: the
    # impls of abs, division and the float math functions handle that themselves.)
    plain = not any(dt in LOW_FLOATS or dtypes.is_complex(dt) for dt in in_dts)
    raw = ANY_DTYPE.get(prim)
    if raw is not None and prim is ew.abs_p and dtypes.is_complex(in_dts[0]):
        raw = None
    if raw is None and plain:
        raw = NOT_LOW_FLOAT.get(prim)
    if raw is None and prim is ew.div_p and plain and dtypes.is_inexact(in_dts[0]):
        raw = np.true_divide
    if raw is None and prim is ew.select_n_p and len(in_dts) == 3 and \
            in_dts[0] == dtypes.bool_:
        raw = _select2
    if raw is None and prim is ew.convert_element_type_p:
        raw = raw_convert(in_dts[0], eqn.params["new_dtype"])
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
        raw = raw_kernel(eqn)
        operands = list(eqn.invars)
        if raw is not None and any(id(a) in source for a in operands):
            folded = [source.get(id(a), a) for a in operands]
            if np.broadcast_shapes(*(a.aval.shape for a in folded)) == eqn.outvars[0].aval.shape:
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


# ------------------------------------------------------------------ code generation


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


def _fix(value: Any, dtype: np.dtype) -> np.ndarray:
    value = np.asarray(value)
    return value if value.dtype == dtype else value.astype(dtype)


class _Source:
    """The generated function's source lines and the names its code refers to."""

    def __init__(self, closed, kinds: tuple):
        self.env: dict[str, Any] = {
            "_Array": Array, "_new": object.__new__, "_sf": np.ndarray.setflags,
            "_asarray": np.asarray, "_conv": _convert_scalar, "_Fallback": Fallback,
            "_errset": ignore_fp_errors, "_errreset": restore_fp_errors,
            "_ndarray": np.ndarray, "_fix": _fix,
        }
        self.kinds = kinds
        self.names: dict[int, str] = {}  # id(var) -> local name
        self.arg_of: dict[int, int] = {}  # id(invar) -> argument position
        self.used: set[str] = set()
        self.may_warn = False  # whether some kernel may set NumPy's floating-point warnings
        invars = iter(closed.jaxpr.invars)
        for i, kind in enumerate(kinds):
            if kind != "static":  # static arguments are baked into the jaxpr
                var = next(invars)
                self.names[id(var)] = f"v{i}"
                self.arg_of[id(var)] = i
        for j, (var, value) in enumerate(zip(closed.jaxpr.constvars, closed.consts)):
            self.env[f"_c{j}"] = value._value if type(value) is Array else np.asarray(value)
            self.names[id(var)] = f"_c{j}"

    def atom(self, a) -> str:
        if isinstance(a, Literal):
            name = f"_lit{len(self.env)}"
            self.env[name] = np.asarray(a.val, a.aval.dtype)
            return name
        self.used.add(self.names[id(a)])
        return self.names[id(a)]

    def equation(self, j: int, eqn, operands: list, raw: Callable | None) -> list[str]:
        outs = [f"t{j}_{k}" for k in range(len(eqn.outvars))]
        for v, n in zip(eqn.outvars, outs):
            self.names[id(v)] = n
        pos = self.arg_of.get(id(operands[0])) if operands else None
        if (eqn.primitive is ew.convert_element_type_p and pos is not None
                and self.kinds[pos] == "scalar"):
            # A Python scalar converted by promotion: the ordinary path's own conversion.
            self.env[f"_dt{j}"], self.env[f"_m{j}"] = eqn.params["new_dtype"], {}
            weak = bool(eqn.params["weak_type"])
            return [f"{outs[0]} = _m{j}.get(a{pos})",
                    f"if {outs[0]} is None: {outs[0]} = _conv(_m{j}, a{pos}, _dt{j}, {weak})"]
        quiet = getattr(eqn.primitive.impl if raw is None else raw, "fp_quiet", False)
        if not quiet and any(dtypes.is_inexact(v.aval.dtype)
                             for v in (*eqn.invars, *eqn.outvars)):
            self.may_warn = True  # (integer and boolean kernels never warn)
        if raw is None:
            raw = (functools.partial(eqn.primitive.impl, **eqn.params) if eqn.params
                   else eqn.primitive.impl)
            fix = True  # as the eager path: every value an ndarray of its aval's dtype
        else:
            fix = False  # ufuncs return their operands' dtype, NumPy scalars for 0-d ones
        self.env[f"_k{j}"] = raw
        many = "," if eqn.primitive.multiple_results else ""
        lines = [f"{', '.join(outs)}{many} = _k{j}({', '.join(map(self.atom, operands))})"]
        for v, n in zip(eqn.outvars, outs):
            self.env[f"_d{n}"] = v.aval.dtype
            if fix:
                lines.append(f"if type({n}) is not _ndarray or {n}.dtype != _d{n}: "
                             f"{n} = _fix({n}, _d{n})")
            elif v.aval.shape == ():
                lines.append(f"{n} = _asarray({n})")
        return lines

    def outputs(self, outvars, out_tree: type | None) -> tuple[list[str], str] | None:
        """Lines wrapping the outputs into Arrays and the returned expression; None for a
        constant output (not worth replaying)."""
        rets, lines = [], []
        for k, v in enumerate(outvars):
            if isinstance(v, Literal) or self.names.get(id(v), "_c").startswith("_c"):
                return None
            n = self.names[id(v)]
            if id(v) in self.arg_of and self.kinds[self.arg_of[id(v)]] == "array":
                rets.append(f"a{self.arg_of[id(v)]}")  # the argument itself, as eagerly
                continue
            self.used.add(n)
            self.env[f"_av{k}"] = v.aval
            lines += [f"_sf({n}, False)",
                      f"o{k} = _new(_Array); o{k}._value = {n}; o{k}.aval = _av{k}"]
            rets.append(f"o{k}")
        if out_tree is None:
            return lines, rets[0]
        return lines, f"({', '.join(rets)},)" if out_tree is tuple else f"[{', '.join(rets)}]"

    def inputs(self, scalar_avals: dict) -> list[str]:
        """Lines reading the arguments' values (after ``used`` is complete)."""
        info = np.iinfo(dtypes.default_int_dtype())
        lines = []
        for i, kind in enumerate(self.kinds):
            if kind == "array" and f"v{i}" in self.used:
                lines.append(f"v{i} = a{i}._value")
            elif kind == "scalar":
                aval = scalar_avals[i]
                if aval.dtype != dtypes.bool_ and dtypes.is_integer(aval.dtype):
                    # Out of the default int range: the ordinary path raises.
                    lines.append(f"if not {info.min} <= a{i} <= {info.max}: raise _Fallback")
                if f"v{i}" in self.used:
                    self.env[f"_sdt{i}"], self.env[f"_sm{i}"] = aval.dtype, {}
                    lines += [f"v{i} = _sm{i}.get(a{i})",
                              f"if v{i} is None: v{i} = _conv(_sm{i}, a{i}, _sdt{i}, "
                              f"{aval.weak_type})"]
        return lines


def _indent(lines: list[str], depth: int) -> list[str]:
    return [" " * (4 * depth) + line for line in lines]


def compile_jaxpr(closed, kinds: tuple, scalar_avals: dict,
                  out_tree: type | None) -> Callable | None:
    """The jaxpr as a Python function of the call's arguments; None if not replayable.

    ``kinds[i]`` is "array", "scalar" or "static" for argument i (the jaxpr's invars are the
    non-static arguments in order; ``scalar_avals[i]`` is a scalar's aval). ``out_tree`` is
    None for one output, else tuple or list.
    """
    jaxpr = closed.jaxpr
    src = _Source(closed, kinds)
    body = [line for j, step in enumerate(_plan(jaxpr)) for line in src.equation(j, *step)]
    outputs = src.outputs(jaxpr.outvars, out_tree)
    if outputs is None:
        return None
    tail, result = outputs
    lines = [f"def run({', '.join(f'a{i}' for i in range(len(kinds)))}):",
             *_indent(src.inputs(scalar_avals), 1)]
    # NumPy's floating-point warnings are silenced around kernels that may raise them. (A
    # Python scalar's conversion is the ordinary path's own, which warns as JAX does.)
    if not src.may_warn:
        lines += _indent(body, 1)
    else:
        lines += ["    tok = _errset()", "    try:", *_indent(body, 2),
                  "    finally:", "        _errreset(tok)"]
    lines += [*_indent(tail, 1), f"    return {result}"]
    source = "\n".join(lines)
    exec(compile(source, "<ember fastpath>", "exec"), src.env)  # noqa: S102
    run = src.env["run"]
    run.source = source
    return run
