"""Reduction primitives (reduce_sum, reduce_max, argmax, ...) and cumulative ones (cumsum, ...).

Each primitive sits with its NumPy impl and its shape/dtype rules. Reductions of size-0 axes
give the reduction's identity, as in JAX; float16/bfloat16 sums accumulate in float32.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import core, dtypes
from ember.compiler import eval_elementwise as K
from ember.compiler.hlo import Shape
from ember.compiler.reduce_window import scan_accumulate
from ember.interpreters import ad
from ember.lax import base
from ember.lax import elementwise as E
from ember.lax.base import (
    all_dtypes,
    bool_dtypes,
    check_dtype,
    float_dtypes,
    int_dtypes,
    numeric_dtypes,
    standard_primitive,
)
from ember.lax.elementwise import lower_convert
from ember.lax.prefix_scan import associative_scan
from ember.lax.shape import broadcast_in_dim, int_tuple, pad, reshape, transpose

_LOW_PRECISION = (dtypes.float16, dtypes.bfloat16)


accumulation_dtype = K.accumulation_dtype  # low-precision floats accumulate in float32


def _check_axes(prim: str, axes: Any, ndim: int) -> tuple[int, ...]:
    if not isinstance(axes, tuple) or any(
            isinstance(a, bool) or not isinstance(a, (int, np.integer)) for a in axes):
        raise TypeError(f"{prim}: axes must be a tuple of integers, got {axes!r}")
    if any(not 0 <= a < ndim for a in axes):
        raise ValueError(f"{prim}: reduction axes {axes} contains out-of-bounds indices for an "
                         f"operand of rank {ndim}")
    if len(set(axes)) != len(axes):
        raise ValueError(f"{prim}: duplicate value in 'axes' of reduction: {axes}")
    return axes


def _normalize_axes(fn: str, axes: Any, ndim: int) -> tuple[int, ...]:
    """Python-level axes (int or sequence, negatives allowed) -> canonical tuple."""
    axes = int_tuple(fn, "axes", axes)
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"{fn}: axis {a} in axes={axes} is out of bounds for an operand of "
                             f"rank {ndim}")
    return tuple(a % ndim for a in axes)


def _reduce_shape(name: str):
    def rule(x, *, axes):
        axes = _check_axes(name, axes, x.ndim)
        return tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return rule


def _reduce_dtype(name: str, allowed):
    def rule(x, *, axes):
        check_dtype(name, "operand", x.dtype, allowed)
        return x.dtype
    return rule


def max_identity(dt: np.dtype):
    """The identity of reduce_max for ``dt`` (also the fill of masked-out maxima)."""
    if dt == dtypes.bool_:
        return False
    if dtypes.is_integer(dt):
        return np.iinfo(dt).min
    return -np.inf


def min_identity(dt: np.dtype):
    """The identity of reduce_min for ``dt``."""
    if dt == dtypes.bool_:
        return True
    if dtypes.is_integer(dt):
        return np.iinfo(dt).max
    return np.inf


# (The ufuncs' own ``reduce`` and the error state set directly: ``np.sum`` and
# ``np.errstate`` cost ~3 us more per eager call, as much as reducing (64, 128) float32.)
@K.quiet
def _sum_impl(x, *, axes):
    return np.add.reduce(x, axis=axes, dtype=accumulation_dtype(x.dtype)).astype(x.dtype)


@K.quiet
def _prod_impl(x, *, axes):
    return np.multiply.reduce(x, axis=axes, dtype=accumulation_dtype(x.dtype)).astype(x.dtype)


@K.quiet
def _max_impl(x, *, axes):
    return K.simple_reduce(np.maximum, x, axes, initial=max_identity(x.dtype))


@K.quiet
def _min_impl(x, *, axes):
    return K.simple_reduce(np.minimum, x, axes, initial=min_identity(x.dtype))


def _and_impl(x, *, axes):
    if x.dtype == dtypes.bool_:
        return np.all(x, axis=axes)
    return np.bitwise_and.reduce(x, axis=axes, initial=np.array(-1).astype(x.dtype))


def _or_impl(x, *, axes):
    if x.dtype == dtypes.bool_:
        return np.any(x, axis=axes)
    return np.bitwise_or.reduce(x, axis=axes, initial=0)


def _xor_impl(x, *, axes):
    ufunc = np.logical_xor if x.dtype == dtypes.bool_ else np.bitwise_xor
    return ufunc.reduce(x, axis=axes, initial=x.dtype.type(0)).astype(x.dtype)


def _reduction(name: str, impl, allowed):
    return standard_primitive(name, impl, _reduce_shape(name), _reduce_dtype(name, allowed))


_bitwise_dtypes = bool_dtypes + int_dtypes
reduce_sum_p = _reduction("reduce_sum", _sum_impl, numeric_dtypes)
reduce_prod_p = _reduction("reduce_prod", _prod_impl, numeric_dtypes)
reduce_max_p = _reduction("reduce_max", _max_impl, all_dtypes)
reduce_min_p = _reduction("reduce_min", _min_impl, all_dtypes)
reduce_and_p = _reduction("reduce_and", _and_impl, _bitwise_dtypes)
reduce_or_p = _reduction("reduce_or", _or_impl, _bitwise_dtypes)
reduce_xor_p = _reduction("reduce_xor", _xor_impl, _bitwise_dtypes)


def _named(fn, prim, doc: str):
    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = doc
    return fn


def _rank1_axis(prim, operand: Any, axis: Any) -> tuple[Any, int]:
    """The validated operand and its canonical ``axis`` (operands of rank >= 1 only)."""
    operand = base.as_operand(operand, prim.name)
    ndim = core.get_aval(operand).ndim
    if ndim == 0:
        raise ValueError(f"{prim.name}: operand must have rank >= 1, got a scalar")
    return operand, base.check_axis(prim.name, "axis", axis, ndim)


def _reducer(prim, what: str):
    def fn(operand: Any, axes: Sequence[int]) -> Any:
        operand = base.as_operand(operand, prim.name)
        ndim = core.get_aval(operand).ndim
        return prim.bind(operand, axes=_normalize_axes(prim.name, axes, ndim))
    return _named(fn, prim, f"{what} of ``operand`` over ``axes`` (size-0 axes give the "
                  f"identity).\n\n    Example:\n        >>> lax.{prim.name}(jnp.ones((2, 3)), "
                  "axes=(0,)).shape\n        (3,)\n")


reduce_sum = _reducer(reduce_sum_p, "Sum")
reduce_prod = _reducer(reduce_prod_p, "Product")
reduce_max = _reducer(reduce_max_p, "Maximum (NaN propagates)")
reduce_min = _reducer(reduce_min_p, "Minimum (NaN propagates)")
reduce_and = _reducer(reduce_and_p, "Logical/bitwise AND")
reduce_or = _reducer(reduce_or_p, "Logical/bitwise OR")
reduce_xor = _reducer(reduce_xor_p, "Logical/bitwise XOR")


# ---------------------------------------------------------------- argmax / argmin


def _argminmax_shape(name: str):
    def rule(x, *, axes, index_dtype):
        if not isinstance(axes, tuple) or len(axes) != 1:
            raise TypeError(f"{name}: axes must be a tuple of exactly one axis, got {axes!r}")
        _check_axes(name, axes, x.ndim)
        if x.shape[axes[0]] == 0:
            raise ValueError(f"{name}: requires a non-empty reduced dimension; got operand "
                             f"shape {x.shape} and axis {axes[0]}")
        return tuple(d for i, d in enumerate(x.shape) if i != axes[0])
    return rule


def _argminmax_dtype(name: str):
    def rule(x, *, axes, index_dtype):
        # Complex numbers have no order (JAX refuses them too).
        check_dtype(name, "operand", x.dtype, bool_dtypes + int_dtypes + float_dtypes)
        if not dtypes.is_integer(index_dtype):
            raise TypeError(f"{name}: index_dtype must be an integer dtype, got {index_dtype}")
        return np.dtype(index_dtype)
    return rule


def _argminmax_impl(np_fn):
    def impl(x, *, axes, index_dtype):
        if x.dtype in _LOW_PRECISION:
            x = x.astype(np.float32)
        # NumPy's argmax/argmin already return the first NaN's index, like JAX.
        return np_fn(x, axis=axes[0]).astype(index_dtype)
    return impl


argmax_p = standard_primitive("argmax", _argminmax_impl(np.argmax), _argminmax_shape("argmax"),
                              _argminmax_dtype("argmax"), lambda *a, **k: False)
argmin_p = standard_primitive("argmin", _argminmax_impl(np.argmin), _argminmax_shape("argmin"),
                              _argminmax_dtype("argmin"), lambda *a, **k: False)


def _arg_reducer(prim):
    def fn(operand: Any, axis: int, index_dtype: Any) -> Any:
        operand, axis = _rank1_axis(prim, operand, axis)
        index_dtype = dtypes.canonicalize_dtype(dtypes.dtype(index_dtype))
        return prim.bind(operand, axes=(axis,), index_dtype=index_dtype)
    return _named(fn, prim, f"Index of the {prim.name[3:]}imum along ``axis`` (first NaN "
                  f"wins).\n\n    Example:\n        >>> lax.{prim.name}(jnp.array([1., 3., 2.]), "
                  "0, jnp.int32)\n        Array(1, dtype=int32)\n")


argmax = _arg_reducer(argmax_p)
argmin = _arg_reducer(argmin_p)


# ---------------------------------------------------------------- cumulative reductions


def _cum_shape(name: str):
    def rule(x, *, axis, reverse):
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise TypeError(f"{name}: axis must be an integer, got {axis!r}")
        if not 0 <= axis < max(x.ndim, 1) or x.ndim == 0:
            raise ValueError(f"{name}: axis {axis} is out of bounds for an operand of rank "
                             f"{x.ndim}")
        if not isinstance(reverse, bool):
            raise TypeError(f"{name}: reverse must be a bool, got {reverse!r}")
        return x.shape
    return rule


def _cum_impl(accumulate, low_precision_in_f32: bool = True):
    def impl(x, *, axis, reverse):
        dt = x.dtype
        if low_precision_in_f32 and dt in _LOW_PRECISION:
            x = x.astype(np.float32)
        if reverse:
            x = np.flip(x, axis)
        with np.errstate(all="ignore"):
            out = accumulate(x, axis=axis)
        if reverse:
            out = np.flip(out, axis)
        return np.asarray(out).astype(dt)
    return impl


def _cum_primitive(name: str, accumulate, allowed):
    def dtype_rule(x, **_):
        check_dtype(name, "operand", x.dtype, allowed)
        return x.dtype
    return standard_primitive(name, _cum_impl(accumulate), _cum_shape(name), dtype_rule)


def _scan(opcode: str):
    # (The precision rule of jit's scans: float32 sums accumulate in float64.)
    return lambda x, axis: scan_accumulate(x, axis, False, opcode)


cumsum_p = _cum_primitive("cumsum", _scan("add"), numeric_dtypes)
cumprod_p = _cum_primitive("cumprod", _scan("multiply"), numeric_dtypes)
cummax_p = _cum_primitive("cummax", _scan("maximum"), numeric_dtypes)  # no bool (JAX)
cummin_p = _cum_primitive("cummin", _scan("minimum"), numeric_dtypes)
cumlogsumexp_p = _cum_primitive("cumlogsumexp", np.logaddexp.accumulate, float_dtypes)


def _cumulative(prim, what: str):
    def fn(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
        operand, axis = _rank1_axis(prim, operand, axis)
        return prim.bind(operand, axis=axis, reverse=bool(reverse))
    return _named(fn, prim, f"Cumulative {what} along ``axis`` (from the end when "
                  f"``reverse``).\n\n    Example:\n        >>> lax.{prim.name}(jnp.array([1., "
                  "2., 3.])).shape\n        (3,)\n")


cumsum = _cumulative(cumsum_p, "sum")
cumprod = _cumulative(cumprod_p, "product")
cummax = _cumulative(cummax_p, "maximum")
cummin = _cumulative(cummin_p, "minimum")
cumlogsumexp = _cumulative(cumlogsumexp_p, "log-sum-exp")

# ---------------------------------------------------------------- autodiff rules


def _kept_dims(ndim: int, axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(i for i in range(ndim) if i not in axes)


def _expand_reduced(ans: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    """A reduction result broadcast back over the reduced ``axes`` of ``shape``."""
    return broadcast_in_dim(ans, shape, _kept_dims(len(shape), axes))


ad.deflinear2(reduce_sum_p, lambda ct, x, *, axes: [
    _expand_reduced(ct, x.aval.shape, axes)])


def _shift(x: Any, fill: Any, axis: int, reverse: bool, s: int = 1) -> Any:
    """``x`` moved ``s`` places along ``axis`` (towards the end, or the start when
    ``reverse``), ``fill`` coming in."""
    config = [(0, 0, 0)] * core.get_aval(x).ndim
    config[axis] = (-s, s, 0) if reverse else (s, -s, 0)
    return pad(x, fill, config)


def _linear_recurrence(a: Any, b: Any, axis: int, reverse: bool) -> Any:
    """``h[i] = a[i] * h[i-1] + b[i]`` along ``axis`` (``h[i+1]`` when ``reverse``), h = 0
    before the first element: a log-step scan of lax ops, linear in ``b``."""
    n, s = core.get_aval(b).shape[axis], 1
    while s < n:
        b = E.add(E.mul(_shift(b, 0, axis, reverse, s), a), b)
        if 2 * s < n:
            a = E.mul(_shift(a, 1, axis, reverse, s), a)
        s *= 2
    return b


def _reduce_prod_jvp(g, ans, x, *, axes):
    # The product of all elements but one, from exclusive prefix and suffix products.
    shape = core.get_aval(x).shape
    kept = _kept_dims(len(shape), axes)
    n = int(math.prod(shape[a] for a in axes))
    if n == 0:
        return E.zeros_of(ans)
    perm = tuple(axes) + kept
    flat = (n,) + tuple(shape[d] for d in kept)
    xs, gs = (reshape(transpose(v, perm), flat) for v in (x, g))
    before = _shift(cumprod(xs, 0), 1, 0, False)
    after = _shift(cumprod(xs, 0, reverse=True), 1, 0, True)
    return reduce_sum(E.mul(gs, E.mul(before, after)), (0,))


def _reduce_chooser_jvp(g, ans, x, *, axes):
    # The tangent at the extremum, averaged over ties (as JAX does).
    shape = core.get_aval(x).shape
    at = E.convert_element_type(E.eq(x, _expand_reduced(ans, shape, axes)),
                                core.get_aval(g).dtype)
    total = reduce_sum(E.mul(g, at), axes)
    if any(shape[a] == 0 for a in axes):
        return total  # an empty reduction (constant -inf/inf) gets 0 rather than JAX's 0/0
    # A NaN extremum equals no element: 0/0 makes its tangent NaN, as in JAX.
    return E.div(total, reduce_sum(at, axes))


ad.defjvp2(reduce_prod_p, _reduce_prod_jvp)
ad.defjvp2(reduce_max_p, _reduce_chooser_jvp)
ad.defjvp2(reduce_min_p, _reduce_chooser_jvp)
for _p in (reduce_and_p, reduce_or_p, reduce_xor_p, argmax_p, argmin_p):
    ad.defjvp_zero(_p)
ad.deflinear(cumsum_p, lambda ct, *, axis, reverse: [cumsum(ct, axis, not reverse)])


def _cum_scan_jvp(prim, combine):
    """The JVP of ``prim`` as JAX defines it: the JVP of the associative scan of
    ``combine`` (a tree of pairwise max/min/mul), so ties split the tangent along that tree
    and a NaN result has a zero tangent, exactly as in JAX."""
    def jvp(primals, tangents, *, axis, reverse):
        scan = functools.partial(associative_scan, combine, axis=axis, reverse=reverse)
        _, (t,) = ad.jvp_flat(lambda x: [scan(x)], list(primals),
                              [ad.instantiate_zeros(tangents[0])])
        return prim.bind(*primals, axis=axis, reverse=reverse), t
    prim.jvp = jvp


_cum_scan_jvp(cumprod_p, E.mul)


def _cumlogsumexp_jvp(g, ans, x, *, axis, reverse):
    # d ans[i] = exp(ans[i-1] - ans[i]) d ans[i-1] + exp(x[i] - ans[i]) g[i]: all factors
    # are at most 1, so nothing overflows.
    prev = _shift(ans, -np.inf, axis, reverse)
    return _linear_recurrence(E.exp(E.sub(prev, ans)), E.mul(g, E.exp(E.sub(x, ans))), axis,
                              reverse)


_cum_scan_jvp(cummax_p, E.max)
_cum_scan_jvp(cummin_p, E.min)
ad.defjvp2(cumlogsumexp_p, _cumlogsumexp_jvp)


# ---------------------------------------------------------------- batching rules


def _batched_axis(a: int, bdim: int) -> int:
    """Unbatched axis ``a`` of an operand whose batch dim sits at ``bdim``."""
    return a + 1 if a >= bdim else a


def _reduce_batcher(prim):
    """Reduces over the same axes, shifted past the batch dim; the batch dim moves left by
    the number of reduced axes before it."""
    def rule(vals, dims, **params):
        (x,), (d,) = vals, dims
        axes = params.pop("axes")
        out_dim = d - sum(1 for a in axes if a < d)
        return prim.bind(x, axes=tuple(_batched_axis(a, d) for a in axes), **params), out_dim
    return rule


def _cumulative_batcher(prim):
    """Scans along the same axis, shifted past the batch dim (which stays where it is)."""
    def rule(vals, dims, *, axis, reverse):
        (x,), (d,) = vals, dims
        return prim.bind(x, axis=_batched_axis(axis, d), reverse=reverse), d
    return rule


for _p in (reduce_sum_p, reduce_prod_p, reduce_max_p, reduce_min_p, reduce_and_p, reduce_or_p,
           reduce_xor_p, argmax_p, argmin_p):
    _p.batch = _reduce_batcher(_p)
for _p in (cumsum_p, cumprod_p, cummax_p, cummin_p, cumlogsumexp_p):
    _p.batch = _cumulative_batcher(_p)


# ---------------------------------------------------------------- lowering


def _scalar_body(ctx, opcode: str, dtype: np.dtype):
    """The computation ``(a, b) -> opcode(a, b)`` on scalars: a reduce body."""
    bb = ctx.new_builder(f"region_{opcode}")
    a = bb.parameter(0, Shape(dtype, ()))
    c = bb.parameter(1, Shape(dtype, ()))
    return bb.build(bb.op(opcode, a, c))


def _and_identity(dt: np.dtype):
    return True if dt == dtypes.bool_ else np.array(-1).astype(dt)


def _lower_reduction(opcode: str, identity, accumulate: bool = False):
    def rule(ctx, x, *, axes):
        b, dt = ctx.b, x.dtype
        acc = accumulation_dtype(dt) if accumulate else dt  # as the eager impl accumulates
        x = lower_convert(b, x, acc)
        init = ctx.constant(identity(acc), acc)
        kept = tuple(d for i, d in enumerate(x.dims) if i not in axes)
        out = b.op("reduce", x, init, shape=Shape(acc, kept), dimensions=tuple(axes),
                   calls=[_scalar_body(ctx, opcode, acc)])
        return lower_convert(b, out, dt)
    return rule


reduce_sum_p.def_lowering(_lower_reduction("add", lambda dt: 0, accumulate=True))
reduce_prod_p.def_lowering(_lower_reduction("multiply", lambda dt: 1, accumulate=True))
reduce_max_p.def_lowering(_lower_reduction("maximum", max_identity))
reduce_min_p.def_lowering(_lower_reduction("minimum", min_identity))
reduce_and_p.def_lowering(_lower_reduction("and", _and_identity))
reduce_or_p.def_lowering(_lower_reduction("or", lambda dt: 0))
reduce_xor_p.def_lowering(_lower_reduction("xor", lambda dt: 0))


def _argminmax_body(ctx, dtype: np.dtype, index_dtype: np.dtype, is_max: bool):
    """(value, index) pairs -> the better pair: a NaN beats any number, then the larger
    (smaller) value, ties going to the lower index. A total order, so the reduction's order
    of combination does not matter, and the first NaN / first extremum wins, as in the impl.
    """
    bb = ctx.new_builder("region_argmax" if is_max else "region_argmin")
    av, ai = bb.parameter(0, Shape(dtype, ())), bb.parameter(1, Shape(index_dtype, ()))
    bv, bi = bb.parameter(2, Shape(dtype, ())), bb.parameter(3, Shape(index_dtype, ()))

    def cmp(x, y, direction):
        return bb.op("compare", x, y, comparison_direction=direction)

    better = cmp(av, bv, "GT" if is_max else "LT")
    tie = cmp(av, bv, "EQ")
    if dtypes.is_inexact(dtype):
        a_nan, b_nan = cmp(av, av, "NE"), cmp(bv, bv, "NE")
        better = bb.op("or", better, bb.op("and", a_nan, bb.op("not", b_nan)))
        tie = bb.op("or", tie, bb.op("and", a_nan, b_nan))
    pick_a = bb.op("or", better, bb.op("and", tie, cmp(ai, bi, "LT")))
    root = bb.op("tuple", bb.op("select", pick_a, av, bv), bb.op("select", pick_a, ai, bi))
    return bb.build(root)


def _lower_argminmax(is_max: bool):
    def rule(ctx, x, *, axes, index_dtype):
        b, dt, idt = ctx.b, x.dtype, np.dtype(index_dtype)
        axis = axes[0]
        index = b.op("iota", shape=Shape(idt, x.dims), iota_dimension=axis)
        init = ctx.constant(max_identity(dt) if is_max else min_identity(dt), dt)
        kept = tuple(d for i, d in enumerate(x.dims) if i != axis)
        out = b.op("reduce", x, index, init, ctx.constant(0, idt),
                   shape=Shape.tuple([Shape(dt, kept), Shape(idt, kept)]),
                   dimensions=(axis,), calls=[_argminmax_body(ctx, dt, idt, is_max)])
        return b.op("get_tuple_element", out, index=1)
    return rule


argmax_p.def_lowering(_lower_argminmax(True))
argmin_p.def_lowering(_lower_argminmax(False))


def _logaddexp(b, x, y):
    # max + log1p(exp(-|x - y|)); x - y is NaN when both are the same infinity (or a NaN):
    # then x + y is the answer, as in np.logaddexp.
    delta = b.op("subtract", x, y)
    tail = b.op("log_plus_one", b.op("exponential", b.op("negate", b.op("abs", delta))))
    regular = b.op("add", b.op("maximum", x, y), tail)
    return b.op("select", b.op("compare", delta, delta, comparison_direction="NE"),
                b.op("add", x, y), regular)


def _lower_cumulative(scan, in_f32: bool):
    """The lowering of a cumulative op: ``scan(ctx, y, axis, reverse)`` of the operand (in
    float32 for low-precision floats when ``in_f32``), converted back."""
    def rule(ctx, x, *, axis, reverse):
        if x.dims[axis] <= 1:
            return x
        y = lower_convert(ctx.b, x, accumulation_dtype(x.dtype) if in_f32 else x.dtype)
        return lower_convert(ctx.b, scan(ctx, y, axis, reverse), x.dtype)
    return rule


def _window_scan(opcode: str, identity):
    """A ``reduce_window`` whose window along ``axis`` is the whole dim, padded so that
    element i sees elements 0..i (i..n-1 when ``reverse``): StableHLO's cumulative scan,
    which backends run as a sequential scan (``compiler.reduce_window``)."""
    def scan(ctx, y, axis, reverse):
        n = y.dims[axis]
        window = [1] * len(y.dims)
        padding = [(0, 0)] * len(y.dims)
        window[axis] = n
        padding[axis] = (0, n - 1) if reverse else (n - 1, 0)
        return ctx.b.op("reduce_window", y, ctx.constant(identity(y.dtype), y.dtype),
                        calls=[_scalar_body(ctx, opcode, y.dtype)],
                        window_dimensions=tuple(window), padding=tuple(padding))
    return scan


def _log_step_scan(combine, identity):
    """A log-step (Hillis-Steele) scan: step k combines each element with the one 2**k
    before it (after it when ``reverse``), shifted in by a ``pad`` with the identity (for a
    combiner that is not one op, which a window scan's body would need to be)."""
    def scan(ctx, y, axis, reverse):
        b, n = ctx.b, y.dims[axis]
        fill = ctx.constant(identity(y.dtype), y.dtype)
        zeros = (0,) * len(y.dims)
        shift = 1
        while shift < n:
            low, high = list(zeros), list(zeros)
            low[axis], high[axis] = (-shift, shift) if reverse else (shift, -shift)
            shifted = b.op("pad", y, fill, edge_padding_low=tuple(low),
                           edge_padding_high=tuple(high), interior_padding=zeros)
            y = combine(b, shifted, y)
            shift *= 2
        return y
    return scan


cumsum_p.def_lowering(_lower_cumulative(_window_scan("add", lambda dt: 0), True))
cumprod_p.def_lowering(_lower_cumulative(_window_scan("multiply", lambda dt: 1), True))
cummax_p.def_lowering(_lower_cumulative(_window_scan("maximum", max_identity), False))
cummin_p.def_lowering(_lower_cumulative(_window_scan("minimum", min_identity), False))
cumlogsumexp_p.def_lowering(
    _lower_cumulative(_log_step_scan(_logaddexp, lambda dt: -np.inf), True))


__all__ = [
    "reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and", "reduce_or",
    "reduce_xor", "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp",
    "reduce_sum_p", "reduce_prod_p", "reduce_max_p", "reduce_min_p", "reduce_and_p",
    "reduce_or_p", "reduce_xor_p", "argmax_p", "argmin_p", "cumsum_p", "cumprod_p",
    "cummax_p", "cummin_p", "cumlogsumexp_p",
]
