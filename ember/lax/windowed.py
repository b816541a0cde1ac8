"""Windowed reductions: ``reduce_window`` (XLA's ReduceWindow, pooling) and its helpers.

Primitives with JAX's names and params (``window_dimensions window_strides padding
base_dilation window_dilation``):

- ``reduce_window_sum``, ``reduce_window_max``, ``reduce_window_min``: the monoid windows that
  ``lax.reduce_window`` picks for ``lax.add``/``lax.max``/``lax.min`` from their identity;
- ``reduce_window[jaxpr consts ...]``: any reducer over a pytree of operands;
- ``select_and_gather_add[select_prim ...]``: the JVP of a max/min window, the tangent of the
  element each window selects (the first maximum, in row-major window order, on ties);
- ``select_and_scatter_add[select_prim window_dimensions window_strides padding]``: its
  transpose, each window's cotangent added at its selected element.

Eager kernels are NumPy loops over the window offsets (never over output positions): the
operand is base-dilated and padded with the reducer's identity once, then every offset is one
strided view combined into the accumulators in row-major window order, from the init value,
as the HLO evaluator combines them. Under ``jit`` the first four lower to the HLO
``reduce_window`` (variadic for ``select_and_gather_add``), ``select_and_scatter_add`` to two
custom calls: ``ember.window_select`` (the offset each window selects) and
``ember.window_scatter_selected`` (the source values added at those offsets), which the CPU
backend compiles to native kernels.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import core, dtypes
from ember._pytree import tree_flatten, tree_unflatten
from ember.compiler.eval_elementwise import order_zeros_seen
from ember.compiler.evaluator import evaluate_instruction, register_custom_call_target
from ember.compiler.hlo import Builder, Module, Shape
from ember.compiler.lower import LoweringContext
from ember.interpreters import ad
from ember.interpreters.batching import not_mapped
from ember.jaxpr import ClosedJaxpr, eval_jaxpr
from ember.lax import base
from ember.lax import elementwise as E
from ember.lax.base import standard_primitive
from ember.lax.batch_util import bdim_at_front
from ember.lax.control_flow.common import lower_to_computation, trace_function
from ember.lax.convolution import padtype_to_pads
from ember.lax.reduction import max_identity, min_identity
from ember.lax.shape import pad
from ember.lax.slicing import slice as _slice

_FN = "reduce_window"


def _dilate(sizes: Sequence[int], dilation: Sequence[int]) -> tuple[int, ...]:
    return tuple(0 if n == 0 else (n - 1) * d + 1 for n, d in zip(sizes, dilation))


def reduce_window_shape_tuple(operand_shape: Sequence[int], window_dimensions: Sequence[int],
                              window_strides: Sequence[int],
                              padding: Sequence[tuple[int, int]],
                              base_dilation: Sequence[int] | None = None,
                              window_dilation: Sequence[int] | None = None) -> tuple[int, ...]:
    """The result shape of a ``reduce_window`` with these window parameters.

    Example:
        >>> lax.reduce_window_shape_tuple((4, 6), (2, 2), (2, 2), ((0, 0), (0, 0)))
        (2, 3)
    """
    if base_dilation is not None:
        operand_shape = _dilate(operand_shape, base_dilation)
    if window_dilation is not None:
        window_dimensions = _dilate(window_dimensions, window_dilation)
    out = []
    for n, (lo, hi), w, s in zip(operand_shape, padding, window_dimensions, window_strides):
        padded = n + lo + hi
        out.append(0 if padded < w else (padded - w) // s + 1)
    return tuple(out)


def _check_window(shape: tuple[int, ...], window_dimensions, window_strides, padding,
                  base_dilation, window_dilation) -> tuple[int, ...]:
    """JAX's checks of the window parameters against an operand of ``shape``."""
    for name, v, positive in (("window_dimensions", window_dimensions, True),
                              ("window_strides", window_strides, True),
                              ("base_dilation", base_dilation, True),
                              ("window_dilation", window_dilation, True)):
        if any(d < 0 for d in v):
            raise TypeError(f"{_FN} {name} must have every element be nonnegative, got {v}.")
        if positive and any(d == 0 for d in v):
            raise TypeError(f"{_FN} {name} must have every element be nonzero, got {v}.")
    if len(shape) != len(window_dimensions):
        raise TypeError(f"reduce_window got the wrong number of window_dimensions for "
                        f"operand: got operand shape {shape} with window_dimensions "
                        f"{window_dimensions}.")
    for name, v in (("window_strides", window_strides), ("base_dilation", base_dilation),
                    ("window_dilation", window_dilation)):
        if len(v) != len(window_dimensions):
            raise TypeError(f"reduce_window got inconsistent {name} and window_dimensions: "
                            f"got {name} {v} and window_dimensions {window_dimensions}.")
    if len(padding) != len(window_dimensions):
        raise TypeError(f"reduce_window got inconsistent padding and window_dimensions: got "
                        f"padding {padding} and window_dimensions {window_dimensions}.")
    return reduce_window_shape_tuple(shape, window_dimensions, window_strides, padding,
                                     base_dilation, window_dilation)


# ---------------------------------------------------------------- NumPy kernels


def _padded(x: np.ndarray, fill: Any, padding, base_dilation) -> np.ndarray:
    """``x`` base-dilated and padded (negative pads crop), the holes filled with ``fill``."""
    if all(d == 1 for d in base_dilation) and all(p == (0, 0) for p in padding):
        return x
    grow = [(max(lo, 0), max(hi, 0)) for lo, hi in padding]
    dilated = _dilate(x.shape, base_dilation)
    full = np.full([lo + d + hi for (lo, hi), d in zip(grow, dilated)], fill, x.dtype)
    full[tuple(slice(lo, lo + d, b) for (lo, _), d, b in zip(grow, dilated, base_dilation))] = x
    crop = tuple(slice(max(-lo, 0), n - max(-hi, 0)) for (lo, hi), n in zip(padding, full.shape))
    return full[crop]


def _offsets(window_dimensions, window_strides, window_dilation, out_shape):
    """For each window offset (row-major), the basic index putting that element of every
    window at its output position."""
    for offset in itertools.product(*(range(w) for w in window_dimensions)):
        yield tuple(slice(k * wd, k * wd + (n - 1) * s + 1, s)
                    for k, wd, n, s in zip(offset, window_dilation, out_shape, window_strides))


def _monoid_kernel(ufunc: np.ufunc, identity: Callable[[np.dtype], Any]):
    def impl(x, *, window_dimensions, window_strides, padding, base_dilation,
             window_dilation):
        x = np.asarray(x)
        out_shape = reduce_window_shape_tuple(x.shape, window_dimensions, window_strides,
                                              padding, base_dilation, window_dilation)
        ident = identity(x.dtype)
        acc = np.full(out_shape, ident, x.dtype)
        if math.prod(out_shape):
            xp = _padded(x, ident, padding, base_dilation)
            offsets = list(_offsets(window_dimensions, window_strides, window_dilation,
                                    out_shape))
            with np.errstate(all="ignore"):
                for index in offsets:
                    ufunc(acc, xp[index], out=acc)
            if ufunc is not np.add and dtypes.is_float(acc.dtype) and np.any(acc == 0):
                # NumPy keeps either zero of a tie; XLA (and the compiled kernels) order
                # -0 below +0: a zero maximum is +0 where a +0 met it (a minimum's -0).
                is_max = ufunc is np.maximum
                seen = np.zeros(out_shape, bool)
                for index in offsets:
                    v = xp[index]
                    seen |= (v == 0) & (np.signbit(v) != is_max)
                acc = order_zeros_seen(acc, seen, is_max)
        return acc
    return impl


def _sum_identity(dt):
    return 0


def _select_identity(select_prim: str, dt: np.dtype):
    return max_identity(dt) if select_prim == "ge" else min_identity(dt)


def _masks(take: np.ndarray, dtype: np.dtype) -> np.ndarray | None:
    """``take`` as all-ones/all-zeros integers as wide as ``dtype`` (None for widths
    without an integer type): masks for selecting by bits, several times faster than
    ``np.copyto(..., where=)`` on strided views."""
    size = np.dtype(dtype).itemsize
    if size not in (1, 2, 4, 8):
        return None
    m = take.astype(f"i{size}")
    return np.negative(m, out=m)


def _masked(src: np.ndarray, mask: np.ndarray | None, take: np.ndarray) -> np.ndarray:
    """``src`` where ``take``, else zero bits (0 of every numeric dtype)."""
    if mask is None:
        return np.where(take, src, np.zeros((), src.dtype))
    return np.bitwise_and(src.view(mask.dtype), mask).view(src.dtype)


def _select_into(dst: np.ndarray, src: np.ndarray, take: np.ndarray) -> None:
    """``dst`` takes ``src``'s values where ``take``."""
    mask = _masks(take, dst.dtype)
    if mask is None:
        np.copyto(dst, src, where=take)
        return
    d = dst.view(mask.dtype)
    diff = np.asarray(np.bitwise_xor(d, src.view(mask.dtype)))  # (an array even at rank 0)
    np.bitwise_and(diff, mask, out=diff)
    np.bitwise_xor(d, diff, out=d)


def _selected_offsets(operand: np.ndarray, select_prim: str, window_dimensions,
                      window_strides, padding, base_dilation, window_dilation, out_shape):
    """Per output position, the row-major offset of the element its window selects (the
    reducer ``select(ge(acc, x), acc, x)`` from the identity: ties keep the first)."""
    compare = np.greater_equal if select_prim == "ge" else np.less_equal
    ident = _select_identity(select_prim, operand.dtype)
    xp = _padded(operand, ident, padding, base_dilation)
    best = np.full(out_shape, ident, operand.dtype)
    which = np.zeros(out_shape, np.int32)
    take = np.empty(out_shape, bool)
    step = np.empty(out_shape, np.int32)
    for k, index in enumerate(_offsets(window_dimensions, window_strides, window_dilation,
                                       out_shape)):
        v = xp[index]
        compare(best, v, out=take)
        np.logical_not(take, out=take)
        _select_into(best, v, take)
        np.subtract(k, which, out=step)  # which += take * (k - which)
        np.multiply(step, take, out=step)
        np.add(which, step, out=which)
    return which


def _gather_impl(tangents, operand, *, select_prim, window_dimensions, window_strides,
                 padding, base_dilation, window_dilation):
    tangents, operand = np.asarray(tangents), np.asarray(operand)
    out_shape = reduce_window_shape_tuple(operand.shape, window_dimensions, window_strides,
                                          padding, base_dilation, window_dilation)
    out = np.zeros(out_shape, tangents.dtype)
    if not math.prod(out_shape):
        return out
    which = _selected_offsets(operand, select_prim, window_dimensions, window_strides,
                              padding, base_dilation, window_dilation, out_shape)
    tp = _padded(tangents, 0, padding, base_dilation)
    take = np.empty(out_shape, bool)
    for k, index in enumerate(_offsets(window_dimensions, window_strides, window_dilation,
                                       out_shape)):
        np.equal(which, k, out=take)
        _select_into(out, tp[index], take)
    return out


def select_and_scatter_add_numpy(source: np.ndarray, operand: np.ndarray, *, select_prim: str,
                                 window_dimensions, window_strides, padding) -> np.ndarray:
    """Each window's ``source`` value added at the element of ``operand`` it selects."""
    source, operand = np.asarray(source), np.asarray(operand)
    ones = (1,) * operand.ndim
    which = np.zeros(source.shape, np.int32)
    if math.prod(source.shape):
        which = _selected_offsets(operand, select_prim, window_dimensions, window_strides,
                                  padding, ones, ones, source.shape)
    return _scatter_selected(source, which, operand.shape, window_dimensions, window_strides,
                             padding)


def _scatter_selected(source: np.ndarray, which: np.ndarray, operand_shape, window_dimensions,
                      window_strides, padding) -> np.ndarray:
    """Each window's ``source`` value added at its element at offset ``which`` (row-major in
    the window) in an array of ``operand_shape``. An element's sum takes its windows in
    increasing order (XLA's), from zero: the window offsets decreasing."""
    ones = (1,) * len(operand_shape)
    out_shape = source.shape
    acc = np.zeros(tuple(n + max(lo, 0) + max(hi, 0) for n, (lo, hi)
                         in zip(operand_shape, padding)), source.dtype)
    if math.prod(out_shape):
        # (negative pads crop; an all-positive frame keeps indexing simple)
        crop = tuple(slice(max(-lo, 0), n - max(-hi, 0))
                     for (lo, hi), n in zip(padding, acc.shape))
        view = acc[crop + (Ellipsis,)]
        take = np.empty(out_shape, bool)
        offsets = list(_offsets(window_dimensions, window_strides, ones, out_shape))
        for k in reversed(range(len(offsets))):
            # For one offset the windows' elements are distinct: adding in place is safe.
            np.equal(which, k, out=take)
            target = view[offsets[k] + (Ellipsis,)]  # (a view even at rank 0)
            target += _masked(source, _masks(take, source.dtype), take)
    lo = tuple(max(lo, 0) for lo, _ in padding)
    return acc[tuple(slice(p, p + n) for p, n in zip(lo, operand_shape)) + (Ellipsis,)].copy()


def _pairs(flat) -> tuple[tuple[int, int], ...]:
    return tuple(zip(flat[::2], flat[1::2]))


def _scatter_target(source, operand, *, select_prim, window_dimensions, window_strides,
                    padding):
    return select_and_scatter_add_numpy(source, operand, select_prim=select_prim,
                                        window_dimensions=window_dimensions,
                                        window_strides=window_strides, padding=_pairs(padding))


def _select_target(operand, *, select_prim, window_dimensions, window_strides, padding):
    operand = np.asarray(operand)
    ones = (1,) * operand.ndim
    pads = _pairs(padding)
    out_shape = reduce_window_shape_tuple(operand.shape, window_dimensions, window_strides,
                                          pads)
    if not math.prod(out_shape):
        return np.zeros(out_shape, np.int32)
    return _selected_offsets(operand, select_prim, window_dimensions, window_strides, pads,
                             ones, ones, out_shape)


def _scatter_selected_target(source, which, *, operand_shape, window_dimensions,
                             window_strides, padding):
    return _scatter_selected(np.asarray(source), np.asarray(which), tuple(operand_shape),
                             window_dimensions, window_strides, _pairs(padding))


# (The one-step target of earlier lowerings, kept for modules serialized with it.)
register_custom_call_target("ember.select_and_scatter_add", _scatter_target)
register_custom_call_target("ember.window_select", _select_target)
register_custom_call_target("ember.window_scatter_selected", _scatter_selected_target)


# ---------------------------------------------------------------- shape and dtype rules


def _window_shape(x, *, window_dimensions, window_strides, padding, base_dilation,
                  window_dilation, **_):
    return _check_window(x.shape, window_dimensions, window_strides, padding, base_dilation,
                         window_dilation)


def _sum_dtype(x, **_):
    if not (dtypes.is_integer(x.dtype) or dtypes.is_inexact(x.dtype)) \
            or x.dtype == dtypes.bool_:
        raise TypeError(f"operand to reduce_window_sum must have a number type, got "
                        f"{np.dtype(x.dtype).name}")
    return x.dtype


def _input_dtype(x, **_):
    return x.dtype


def _window_lowering(opcode: str, identity):
    def rule(ctx, x, *, window_dimensions, window_strides, padding, base_dilation,
             window_dilation):
        bb = ctx.new_builder(f"region_{opcode}")
        a = bb.parameter(0, Shape(x.dtype, ()))
        c = bb.parameter(1, Shape(x.dtype, ()))
        body = bb.build(bb.op(opcode, a, c))
        return ctx.b.op("reduce_window", x, ctx.constant(identity(x.dtype), x.dtype),
                        calls=[body], window_dimensions=tuple(window_dimensions),
                        window_strides=tuple(window_strides), padding=tuple(padding),
                        base_dilations=tuple(base_dilation),
                        window_dilations=tuple(window_dilation))
    return rule


def _window_batcher(prim):
    def rule(vals, dims, **params):
        (x,), (d,) = vals, dims
        x = bdim_at_front(x, d, core.get_aval(x).shape[d])
        return prim.bind(x, **_with_batch_window(params)), 0
    return rule


def _with_batch_window(params: dict) -> dict:
    """``params`` with a leading window dim of 1 (no stride, padding or dilation) for the
    batch dim."""
    out = dict(params)
    out["window_dimensions"] = (1,) + tuple(params["window_dimensions"])
    out["window_strides"] = (1,) + tuple(params["window_strides"])
    out["padding"] = ((0, 0),) + tuple(params["padding"])
    for name in ("base_dilation", "window_dilation"):
        if name in params:
            out[name] = (1,) + tuple(params[name])
    return out


reduce_window_sum_p = standard_primitive(
    "reduce_window_sum", _monoid_kernel(np.add, _sum_identity), _window_shape, _sum_dtype)
reduce_window_max_p = standard_primitive(
    "reduce_window_max", _monoid_kernel(np.maximum, max_identity), _window_shape, _input_dtype)
reduce_window_min_p = standard_primitive(
    "reduce_window_min", _monoid_kernel(np.minimum, min_identity), _window_shape, _input_dtype)
reduce_window_sum_p.def_lowering(_window_lowering("add", _sum_identity))
reduce_window_max_p.def_lowering(_window_lowering("maximum", max_identity))
reduce_window_min_p.def_lowering(_window_lowering("minimum", min_identity))
for _p in (reduce_window_sum_p, reduce_window_max_p, reduce_window_min_p):
    _p.def_batching(_window_batcher(_p))


def _vjp_lhs_padding(in_shape, window_dimensions, window_strides, out_shape, padding,
                     base_dilation, window_dilation) -> list[tuple[int, int]]:
    # The pads of the (stride-dilated) cotangent so that a unit-stride window over it gives
    # every operand position the windows it fell in (as for a convolution's lhs gradient).
    lhs = _dilate(in_shape, base_dilation)
    win = _dilate(window_dimensions, window_dilation)
    out = _dilate(out_shape, window_strides)
    pads = []
    for n, w, o, (lo, _) in zip(lhs, win, out, padding):
        before = w - lo - 1
        pads.append((before, n + w - 1 - o - before))
    return pads


def _sum_transpose(ct, x, *, window_dimensions, window_strides, padding, base_dilation,
                   window_dilation):
    in_shape = x.aval.shape
    pads = _vjp_lhs_padding(in_shape, window_dimensions, window_strides,
                            core.get_aval(ct).shape, padding, base_dilation, window_dilation)
    config = tuple((lo, hi, s - 1) for (lo, hi), s in zip(pads, window_strides))
    padded = pad(ct, np.zeros((), core.get_aval(ct).dtype), config)
    ones = (1,) * len(in_shape)
    out = reduce_window_sum_p.bind(
        padded, window_dimensions=tuple(window_dimensions), window_strides=tuple(base_dilation),
        padding=((0, 0),) * len(in_shape), base_dilation=ones,
        window_dilation=tuple(window_dilation))
    return [out]


ad.deflinear2(reduce_window_sum_p, _sum_transpose)


def _chooser_jvp(select_prim: str):
    def rule(g, x, **params):
        return select_and_gather_add_p.bind(g, x, select_prim=select_prim, **params)
    return rule


ad.defjvp(reduce_window_max_p, _chooser_jvp("ge"))
ad.defjvp(reduce_window_min_p, _chooser_jvp("le"))


# ---------------------------------------------------------------- select_and_gather_add


def _gather_shape(t, x, *, select_prim, **params):
    if t.shape != x.shape:
        raise TypeError(f"select_and_gather_add tangents and operand shapes must match, got "
                        f"{t.shape} and {x.shape}.")
    return _window_shape(x, **params)


select_and_gather_add_p = standard_primitive(
    "select_and_gather_add", _gather_impl, _gather_shape, lambda t, x, **_: t.dtype,
    lambda t, x, **_: t.weak_type)


@select_and_gather_add_p.def_lowering
def _gather_lowering(ctx, t, x, *, select_prim, window_dimensions, window_strides, padding,
                     base_dilation, window_dilation):
    # A variadic window over (operand, tangent) pairs keeping the selected pair.
    bb = ctx.new_builder("region_select_gather")
    av, at, bv, bt = (bb.parameter(i, Shape(dt, ()))
                      for i, dt in enumerate((x.dtype, t.dtype, x.dtype, t.dtype)))
    keep = bb.op("compare", av, bv, comparison_direction="GE" if select_prim == "ge" else "LE")
    body = bb.build(bb.op("tuple", bb.op("select", keep, av, bv), bb.op("select", keep, at, bt)))
    ident = _select_identity(select_prim, x.dtype)
    out = ctx.b.op("reduce_window", x, t, ctx.constant(ident, x.dtype),
                   ctx.constant(0, t.dtype), calls=[body],
                   window_dimensions=tuple(window_dimensions),
                   window_strides=tuple(window_strides), padding=tuple(padding),
                   base_dilations=tuple(base_dilation), window_dilations=tuple(window_dilation))
    return ctx.b.op("get_tuple_element", out, index=1)


def _gather_jvp(primals, tangents, **params):
    t, x = primals
    gt, _ = tangents  # the selection is piecewise constant in the operand
    out = select_and_gather_add_p.bind(t, x, **params)
    if type(gt) is ad.Zero:
        return out, ad.Zero.from_primal_value(out)
    return out, select_and_gather_add_p.bind(gt, x, **params)


def _gather_transpose(ct, t, x, *, select_prim, window_dimensions, window_strides, padding,
                      base_dilation, window_dilation):
    assert ad.is_undefined_primal(t) and not ad.is_undefined_primal(x)
    if any(d != 1 for d in window_dilation):
        raise NotImplementedError(f"VJP not implemented for select_and_gather (MaxPool) with "
                                  f"window dilation, got window_dilation={window_dilation}.")
    if type(ct) is ad.Zero:
        return [ad.Zero(t.aval), None]
    dilated = any(d != 1 for d in base_dilation)
    if dilated:
        fill = np.asarray(_select_identity(select_prim, core.get_aval(x).dtype),
                          core.get_aval(x).dtype)
        x = pad(x, fill, tuple((0, 0, d - 1) for d in base_dilation))
    out = select_and_scatter_add_p.bind(
        ct, x, select_prim=select_prim, window_dimensions=tuple(window_dimensions),
        window_strides=tuple(window_strides), padding=tuple(padding))
    if dilated:
        shape = core.get_aval(out).shape
        out = _slice(out, (0,) * len(shape), shape, tuple(base_dilation))
    return [out, None]


select_and_gather_add_p.jvp = _gather_jvp
select_and_gather_add_p.def_transpose(_gather_transpose)


def _pair_batcher(prim):
    def rule(vals, dims, **params):
        size = next(core.get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not not_mapped)
        a, b = (bdim_at_front(v, d, size) for v, d in zip(vals, dims))
        return prim.bind(a, b, **_with_batch_window(params)), 0
    return rule


# ---------------------------------------------------------------- select_and_scatter_add


def _scatter_impl(source, operand, *, select_prim, window_dimensions, window_strides,
                  padding):
    return select_and_scatter_add_numpy(source, operand, select_prim=select_prim,
                                        window_dimensions=window_dimensions,
                                        window_strides=window_strides, padding=padding)


def _scatter_shape(s, x, *, select_prim, window_dimensions, window_strides, padding):
    ones = (1,) * x.ndim
    out = _check_window(x.shape, window_dimensions, window_strides, padding, ones, ones)
    if tuple(s.shape) != out:
        raise TypeError(f"select_and_scatter_add source shape {s.shape} does not match the "
                        f"window output shape {out}.")
    return x.shape


select_and_scatter_add_p = standard_primitive(
    "select_and_scatter_add", _scatter_impl, _scatter_shape, lambda s, x, **_: s.dtype,
    lambda s, x, **_: s.weak_type)


@select_and_scatter_add_p.def_lowering
def _scatter_lowering(ctx, s, x, *, select_prim, window_dimensions, window_strides, padding):
    # Two steps, each parallel over its own result: the offset each window selects, then
    # per operand element the sum of the source values of the windows that selected it.
    out = ctx.aval_out
    window = dict(window_dimensions=tuple(window_dimensions),
                  window_strides=tuple(window_strides),
                  padding=tuple(int(v) for p in padding for v in p))
    which = ctx.b.op("custom_call", x, shape=Shape(np.dtype(np.int32), tuple(s.shape.dims)),
                     call_target_name="ember.window_select", select_prim=select_prim,
                     **window)
    return ctx.b.op("custom_call", s, which, shape=Shape(out.dtype, tuple(out.shape)),
                    call_target_name="ember.window_scatter_selected",
                    operand_shape=tuple(out.shape), **window)


def _scatter_jvp(primals, tangents, **params):
    s, x = primals
    gs, _ = tangents
    out = select_and_scatter_add_p.bind(s, x, **params)
    if type(gs) is ad.Zero:
        return out, ad.Zero.from_primal_value(out)
    return out, select_and_scatter_add_p.bind(gs, x, **params)


def _scatter_transpose(ct, s, x, *, select_prim, window_dimensions, window_strides, padding):
    assert ad.is_undefined_primal(s) and not ad.is_undefined_primal(x)
    if type(ct) is ad.Zero:
        return [ad.Zero(s.aval), None]
    ones = (1,) * len(window_dimensions)
    return [select_and_gather_add_p.bind(
        ct, x, select_prim=select_prim, window_dimensions=window_dimensions,
        window_strides=window_strides, padding=padding, base_dilation=ones,
        window_dilation=ones), None]


select_and_scatter_add_p.jvp = _scatter_jvp
select_and_scatter_add_p.def_transpose(_scatter_transpose)
select_and_gather_add_p.def_batching(_pair_batcher(select_and_gather_add_p))
select_and_scatter_add_p.def_batching(_pair_batcher(select_and_scatter_add_p))


# ---------------------------------------------------------------- generic reduce_window


reduce_window_p = core.MultipleResultsPrimitive("reduce_window")


def _generic_abstract_eval(*avals, jaxpr, consts, **window):
    n = len(avals) // 2
    ops, inits = avals[:n], avals[n:]
    if any(o.dtype != i.dtype for o, i in zip(ops, inits)):
        raise TypeError(f"reduce_window got inconsistent dtypes for operands and init_values: "
                        f"got operand dtypes {[o.dtype for o in ops]} and init_value dtypes "
                        f"{[i.dtype for i in inits]}.")
    if any(i.shape != () for i in inits):
        raise TypeError(f"reduce_window expected init_values to be scalars but init_values "
                        f"have shapes {[i.shape for i in inits]}.")
    if any(o.shape != ops[0].shape for o in ops):
        raise TypeError(f"reduce_window operands must have the same shape, got "
                        f"{[o.shape for o in ops]}.")
    shape = _window_shape(ops[0], **window)
    return [core.ShapedArray(shape, o.dtype, o.weak_type) for o in ops]


def _generic_instruction(ctx, operands, inits, jaxpr, consts, window):
    closed = ClosedJaxpr(jaxpr, list(consts))
    body = lower_to_computation(ctx, closed, "reduce_window_body",
                                tuple_result=len(operands) > 1)
    shapes = [Shape(a.dtype, tuple(a.shape)) for a in ctx.avals_out]
    return ctx.b.op("reduce_window", *operands, *inits, calls=[body],
                    shape=shapes[0] if len(shapes) == 1 else Shape.tuple(shapes),
                    window_dimensions=tuple(window["window_dimensions"]),
                    window_strides=tuple(window["window_strides"]),
                    padding=tuple(window["padding"]),
                    base_dilations=tuple(window["base_dilation"]),
                    window_dilations=tuple(window["window_dilation"]))


def _generic_lowering(ctx, *args, jaxpr, consts, **window):
    n = len(args) // 2
    out = _generic_instruction(ctx, args[:n], args[n:], jaxpr, consts, window)
    if n == 1:
        return [out]
    return [ctx.b.op("get_tuple_element", out, index=i) for i in range(n)]


def _generic_impl(*args, jaxpr, consts, **window):
    # The HLO evaluator's rule on the lowered instruction: the body runs vectorized over
    # all output positions, once per window offset.
    avals = [core.get_aval(a) for a in args]
    args = [np.asarray(a, a_.dtype) for a, a_ in zip(args, avals)]
    avals_out = _generic_abstract_eval(*avals, jaxpr=jaxpr, consts=consts, **window)
    b = Builder(Module("reduce_window"), "main")
    params = [b.parameter(i, Shape(a.dtype, a.shape)) for i, a in enumerate(args)]
    ctx = LoweringContext(b, avals, avals_out, reduce_window_p)
    n = len(args) // 2
    inst = _generic_instruction(ctx, params[:n], params[n:], jaxpr, consts, window)
    out = evaluate_instruction(inst, args)
    return list(out) if isinstance(out, tuple) else [out]


def _generic_jvp(primals, tangents, *, jaxpr, consts, **window):
    # The reducer's JVP reduces (primal, tangent) pairs as one variadic window.
    n = len(primals) // 2
    if not all(type(t) is ad.Zero for t in tangents[n:]):
        raise TypeError("reduce_window jvp does not support non-zero init_value_tangent.")
    ops, inits = list(primals[:n]), list(primals[n:])
    touts = [ad.instantiate_zeros(t) for t in tangents[:n]]
    tinits = [np.zeros((), core.get_aval(i).dtype) for i in inits]
    closed = ClosedJaxpr(jaxpr, list(consts))

    def fun(left, right):
        pl, tl = left[:n], left[n:]
        pr, tr = right[:n], right[n:]
        outs, touts_ = ad.jvp_flat(lambda *a: eval_jaxpr(closed.jaxpr, closed.consts, *a),
                                   list(pl) + list(pr), list(tl) + list(tr))
        return list(outs) + [ad.instantiate_zeros(t) for t in touts_]

    out = _reduce_window(ops + touts, inits + tinits, fun, **window)
    return out[:n], out[n:]


reduce_window_p.def_impl(_generic_impl)
reduce_window_p.def_abstract_eval(_generic_abstract_eval)
reduce_window_p.def_lowering(_generic_lowering)
reduce_window_p.jvp = _generic_jvp


@reduce_window_p.def_batching
def _generic_batch(vals, dims, *, jaxpr, consts, **window):
    n = len(vals) // 2
    if any(d is not not_mapped for d in dims[n:]):
        raise NotImplementedError("reduce_window batching is not implemented for initial "
                                  "values")
    size = next(core.get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not not_mapped)
    ops = [bdim_at_front(v, d, size) for v, d in zip(vals[:n], dims[:n])]
    outs = reduce_window_p.bind(*ops, *vals[n:], jaxpr=jaxpr, consts=consts,
                                **_with_batch_window(window))
    return outs, [0] * n


# ---------------------------------------------------------------- user API


def _int_tuple(arg: str, v: Any, n: int | None) -> tuple[int, ...]:
    try:
        out = tuple(v)
    except TypeError:
        raise TypeError(f"{_FN}: {arg} must be a sequence of integers, got {v!r}") from None
    for d in out:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"{_FN}: {arg} must be a sequence of integers, got {v!r}")
    return tuple(int(d) for d in out)


def _is_identity(init: Any, identity: Any) -> bool:
    try:
        value = core.concrete_or_error(init, "") if isinstance(init, core.Tracer) else init
        arr = np.asarray(value)
    except Exception:  # a traced init: not a monoid window
        return False
    return arr.shape == () and bool(arr == identity)


def _reduce_window(ops: list, inits: list, computation: Callable, *, window_dimensions,
                   window_strides, padding, base_dilation, window_dilation) -> list:
    """The flat ``reduce_window`` of ``ops`` from ``inits`` with any ``computation`` on flat
    lists (``computation(left, right) -> list``)."""
    avals = [core.ShapedArray((), core.get_aval(i).dtype, core.get_aval(i).weak_type)
             for i in inits]
    _, in_tree = tree_flatten((list(range(len(inits))), list(range(len(inits)))))
    closed, tconsts, out_tree = trace_function(lambda a, b: computation(list(a), list(b)),
                                               in_tree, avals + avals)
    if tconsts:  # closed-over tracers become leading constants of the body
        raise NotImplementedError("reduce_window: a computation closing over traced values "
                                  "is not supported")
    return reduce_window_p.bind(*ops, *inits, jaxpr=closed.jaxpr, consts=tuple(closed.consts),
                                window_dimensions=window_dimensions,
                                window_strides=window_strides, padding=padding,
                                base_dilation=base_dilation, window_dilation=window_dilation)


def reduce_window(operand: Any, init_value: Any, computation: Callable,
                  window_dimensions: Sequence[int], window_strides: Sequence[int] | None = None,
                  padding: str | Sequence[tuple[int, int]] = "VALID",
                  base_dilation: Sequence[int] | None = None,
                  window_dilation: Sequence[int] | None = None) -> Any:
    """Reduces every (strided, padded, dilated) window of ``operand`` with ``computation``.

    ``lax.add`` from 0, ``lax.max`` from its identity (-inf, the dtype's minimum) and
    ``lax.min`` from its identity use the ``reduce_window_sum``/``max``/``min`` primitives
    (differentiable in reverse mode); any other reducer, over a pytree of operands, is the
    generic ``reduce_window`` primitive (forward-mode differentiable).

    Args:
        operand: an array or a pytree of arrays of one shape.
        init_value: a scalar, or a pytree of scalars like ``operand``.
        computation: the reducer ``(acc, x) -> acc`` on pytrees like ``operand``.
        window_dimensions: the window size per dimension.
        window_strides: the strides (default 1).
        padding: 'VALID', 'SAME', 'SAME_LOWER' or ``(low, high)`` pairs.
        base_dilation: dilation of the operand (default 1).
        window_dilation: dilation of the window (default 1).

    Returns:
        A pytree like ``operand`` of the window reductions.

    Example:
        >>> x = jnp.arange(6.0).reshape(2, 3)
        >>> lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (1, 1), "VALID")
        Array([[4., 5.]], dtype=float32)
    """
    flat_ops, tree = tree_flatten(operand)
    flat_inits, init_tree = tree_flatten(init_value)
    if tree != init_tree:
        raise ValueError(f"Operands must have the same tree structure as init_values: {tree} "
                         f"vs. {init_tree}")
    if not flat_ops:
        raise ValueError("reduce_window must have at least one operand.")
    flat_ops = [base.as_operand(x, _FN, "operand") for x in flat_ops]
    flat_inits = [base.as_operand(x, _FN, "init_value") for x in flat_inits]
    shape = core.get_aval(flat_ops[0]).shape
    window_dimensions = _int_tuple("window_dimensions", window_dimensions, None)
    nd = len(window_dimensions)
    strides = (1,) * nd if window_strides is None else _int_tuple("window_strides",
                                                                  window_strides, nd)
    base_dilation = (1,) * nd if base_dilation is None else _int_tuple(
        "base_dilation", base_dilation, nd)
    window_dilation = (1,) * nd if window_dilation is None else _int_tuple(
        "window_dilation", window_dilation, nd)
    if isinstance(padding, str):
        pads = tuple(padtype_to_pads(shape, _dilate(window_dimensions, window_dilation),
                                     strides, padding))
    else:
        try:
            pads = tuple((int(lo), int(hi)) for lo, hi in padding)
        except (TypeError, ValueError):
            raise TypeError(f"{_FN}: padding must be a string or a sequence of (low, high) "
                            f"integer pairs, got {padding!r}") from None
    window = dict(window_dimensions=window_dimensions, window_strides=strides, padding=pads,
                  base_dilation=base_dilation, window_dilation=window_dilation)
    if len(flat_ops) == 1:
        dt = core.get_aval(flat_inits[0]).dtype
        for fn, prim, identity in ((E.add, reduce_window_sum_p, 0),
                                   (E.max, reduce_window_max_p, max_identity(dt)),
                                   (E.min, reduce_window_min_p, min_identity(dt))):
            if computation is fn and _is_identity(flat_inits[0], identity):
                return tree_unflatten(tree, [prim.bind(flat_ops[0], **window)])
    out_tree_box = []

    def flat_computation(left, right):
        out = computation(tree_unflatten(tree, left), tree_unflatten(tree, right))
        flat, out_tree = tree_flatten(out)
        out_tree_box.append(out_tree)
        return flat

    outs = _reduce_window(flat_ops, flat_inits, flat_computation, **window)
    if out_tree_box and out_tree_box[0] != tree:
        raise ValueError(f"reduce_window output must have the same tree structure as the "
                         f"operands {tree} vs. {out_tree_box[0]}")
    return tree_unflatten(tree, outs)


__all__ = ["reduce_window", "reduce_window_shape_tuple", "reduce_window_p",
           "reduce_window_sum_p", "reduce_window_max_p", "reduce_window_min_p",
           "select_and_gather_add_p", "select_and_scatter_add_p"]
