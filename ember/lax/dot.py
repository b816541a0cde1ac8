"""Dot primitives: dot_general (contractions with batch dimensions), and lax.dot on top of it.

``dot_general[dimension_numbers=((lc, rc), (lb, rb)) precision=... preferred_element_type=...]``
produces, like XLA, the batch dimensions first, then the free dimensions of lhs, then those of
rhs. Operands of different dtypes give the more precise one (XLA's HigherPrecisionType);
``preferred_element_type`` sets the output dtype. Low-precision floats accumulate in float32.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import core, dtypes
from ember.compiler import eval_elementwise as K
from ember.compiler.hlo import Shape
from ember.interpreters import ad
from ember.interpreters.batching import not_mapped
from ember.lax import base
from ember.lax import elementwise as E
from ember.lax.base import standard_primitive
from ember.lax.batch_util import batched_axis
from ember.lax.dot_algorithms import (
    DotAlgorithmPreset,
    algorithm_compute_types,
    check_cpu_algorithm,
    is_algorithm,
)
from ember.lax.elementwise import convert_element_type, lower_convert
from ember.lax.reduction import accumulation_dtype
from ember.lax.shape import int_tuple, transpose


class Precision(enum.Enum):
    """Precision of a contraction on accelerators (accepted and recorded; the CPU is exact)."""

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    def __repr__(self) -> str:
        return f"Precision.{self.name}"

    __str__ = __repr__


_PRECISION_STRINGS = {
    "default": Precision.DEFAULT, "fastest": Precision.DEFAULT, "bfloat16": Precision.DEFAULT,
    "high": Precision.HIGH, "tensorfloat32": Precision.HIGH, "bfloat16_3x": Precision.HIGH,
    "highest": Precision.HIGHEST, "float32": Precision.HIGHEST,
}


def _one_precision(fn: str, p: Any) -> Precision | None:
    if p is None or isinstance(p, Precision):
        return p
    if isinstance(p, str) and p.lower() in _PRECISION_STRINGS:
        return _PRECISION_STRINGS[p.lower()]
    raise ValueError(f"{fn}: precision must be None, a lax.Precision, one of "
                     f"{sorted(_PRECISION_STRINGS)}, a pair of them, a lax.DotAlgorithm, or "
                     f"a lax.DotAlgorithmPreset or its name, got {p!r}")


def canonicalize_precision(precision: Any, fn: str = "dot_general") -> Any:
    """None, a pair (lhs, rhs) of Precision values, or a DotAlgorithm/DotAlgorithmPreset
    (hashable, as a primitive param)."""
    if precision is None:
        return None
    if is_algorithm(precision):
        return precision
    if isinstance(precision, str) and precision in DotAlgorithmPreset.__members__:
        return DotAlgorithmPreset[precision]
    if isinstance(precision, (tuple, list)):
        if len(precision) != 2:
            raise ValueError(f"{fn}: precision must be a single value or a pair, "
                             f"got {precision!r}")
        pair = tuple(_one_precision(fn, p) for p in precision)
        return None if pair == (None, None) else pair
    p = _one_precision(fn, precision)
    return None if p is None else (p, p)


# ---------------------------------------------------------------- dot_general


def _check_dims(name: str, side: str, dims: tuple, ndim: int) -> None:
    for d in dims:
        if not 0 <= d < ndim:
            raise TypeError(f"dot_general: {name} dimension {d} of {side} is out of range "
                            f"for an operand of rank {ndim}")


def _dot_general_shape(lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers
    _check_dims("contracting", "lhs", lc, lhs.ndim)
    _check_dims("contracting", "rhs", rc, rhs.ndim)
    _check_dims("batch", "lhs", lb, lhs.ndim)
    _check_dims("batch", "rhs", rb, rhs.ndim)
    for side, c, b in (("lhs", lc, lb), ("rhs", rc, rb)):
        if len(set(c + b)) != len(c + b):
            raise TypeError(f"dot_general: {side} contracting dimensions {c} and batch "
                            f"dimensions {b} must be distinct and without repeats")
    if len(lc) != len(rc):
        raise TypeError(f"dot_general: lhs contracting dimensions {lc} and rhs contracting "
                        f"dimensions {rc} must have the same length")
    if len(lb) != len(rb):
        raise TypeError(f"dot_general: lhs batch dimensions {lb} and rhs batch dimensions "
                        f"{rb} must have the same length")
    for kind, ld, rd in (("contracting", lc, rc), ("batch", lb, rb)):
        ls = tuple(lhs.shape[d] for d in ld)
        rs = tuple(rhs.shape[d] for d in rd)
        if ls != rs:
            raise TypeError(f"dot_general: {kind} dimension sizes must match, got lhs "
                            f"{kind} dimensions {ld} of sizes {ls} (lhs shape {lhs.shape}) and "
                            f"rhs {kind} dimensions {rd} of sizes {rs} (rhs shape {rhs.shape})")
    batch = tuple(lhs.shape[d] for d in lb)
    lfree = tuple(s for i, s in enumerate(lhs.shape) if i not in lc and i not in lb)
    rfree = tuple(s for i, s in enumerate(rhs.shape) if i not in rc and i not in rb)
    return batch + lfree + rfree


@functools.cache
def _precision_key(dt: np.dtype) -> tuple:
    """XLA's order of element types by precision (primitive_util's HigherPrecisionType):
    complex first, then exponent range, mantissa width, bit width, signedness."""
    real = np.dtype(dtypes.finfo(dt).dtype) if dtypes.is_complex(dt) else dt
    floating = dtypes.is_inexact(real)
    bits = 1 if real == dtypes.bool_ else real.itemsize * 8
    return (dtypes.is_complex(dt), dtypes.finfo(real).maxexp if floating else -1,
            dtypes.finfo(real).nmant if floating else -1, bits, not dtypes.is_unsigned(real))


@functools.cache
def _result_dtype(lhs_dtype: np.dtype, rhs_dtype: np.dtype) -> np.dtype:
    """The more precise of the operand dtypes (the output dtype without a preferred one)."""
    lk, rk = _precision_key(lhs_dtype), _precision_key(rhs_dtype)
    if lk == rk and lhs_dtype != rhs_dtype:
        raise TypeError(f"dot_general: argument type error: {lhs_dtype}, {rhs_dtype}")
    return lhs_dtype if lk >= rk else rhs_dtype


def _dot_general_dtype(lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    base.check_dtype("dot_general", "lhs", lhs.dtype, base.all_dtypes)
    base.check_dtype("dot_general", "rhs", rhs.dtype, base.all_dtypes)
    result = _result_dtype(lhs.dtype, rhs.dtype)
    if preferred_element_type is None:
        return result
    out = np.dtype(preferred_element_type)
    if (out != result and not dtypes.is_float(result) and not is_algorithm(precision)
            and _precision_key(out)[3] < _precision_key(result)[3]):
        raise TypeError(f"dot_general: preferred_element_type must not be narrower than the "
                        f"original type, got preferred_element_type of {out} for result type "
                        f"of {result}")
    return out


def _compute_dtype(lhs_dtype: np.dtype, rhs_dtype: np.dtype, out_dtype: np.dtype) -> np.dtype:
    """The type the product is computed in before its conversion to ``out_dtype``: as XLA's
    CPU backend does, mixed operands are converted to the output type; operands of one type
    are upcast to a more precise output type, else multiplied in their own type."""
    if lhs_dtype == out_dtype or (lhs_dtype == rhs_dtype
                                  and _precision_key(out_dtype) < _precision_key(lhs_dtype)):
        return lhs_dtype
    return out_dtype


def _dot_general_weak_type(lhs, rhs, **_):
    return lhs.weak_type and rhs.weak_type


def _algorithm_types(precision, lhs_dtype, rhs_dtype, out_dtype):
    """(lhs, rhs, product) types of a dot: with a dot algorithm, its operand storage and
    accumulation types (the operands are converted to them); else the operands' own and the
    output type."""
    if not is_algorithm(precision):
        return lhs_dtype, rhs_dtype, out_dtype
    check_cpu_algorithm(precision)
    lt, rt, acc = algorithm_compute_types(precision, lhs_dtype, rhs_dtype, out_dtype)
    return lt, rt, out_dtype if acc is None else acc


def _dot_general_impl(lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    final = (_result_dtype(lhs.dtype, rhs.dtype) if preferred_element_type is None
             else np.dtype(preferred_element_type))
    lt, rt, out_dtype = _algorithm_types(precision, lhs.dtype, rhs.dtype, final)
    lhs, rhs = _convert(lhs, lt), _convert(rhs, rt)
    compute = _compute_dtype(lhs.dtype, rhs.dtype, out_dtype)
    acc = accumulation_dtype(compute)
    lhs, rhs = (_convert(_convert(x, compute), acc) for x in (lhs, rhs))
    out = K.dot_general(lhs, rhs, dimension_numbers, acc)
    return _convert(_convert(_convert(out, compute), out_dtype), final)


def _convert(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return x if x.dtype == dtype else K.convert(x, dtype)


dot_general_p = standard_primitive("dot_general", _dot_general_impl, _dot_general_shape,
                                   _dot_general_dtype, _dot_general_weak_type)


@dot_general_p.def_lowering
def _dot_general_lowering(ctx, lhs, rhs, *, dimension_numbers, precision,
                          preferred_element_type):
    # Operands are converted to the accumulation type of the compute type (float32 for
    # float16/bfloat16) and the product rounded to the compute type, then converted to the
    # result type, as the eager impl does.
    b = ctx.b
    out = ctx.aval_out
    lt, rt, out_dtype = _algorithm_types(precision, ctx.avals_in[0].dtype,
                                         ctx.avals_in[1].dtype, out.dtype)
    lhs, rhs = lower_convert(b, lhs, lt), lower_convert(b, rhs, rt)
    compute = _compute_dtype(lt, rt, out_dtype)
    acc = accumulation_dtype(compute)
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = (lower_convert(b, lower_convert(b, x, compute), acc) for x in (lhs, rhs))
    prod = b.op("dot_general", lhs, rhs,
                shape=Shape(acc, out.shape), lhs_batching_dimensions=tuple(lb),
                rhs_batching_dimensions=tuple(rb), lhs_contracting_dimensions=tuple(lc),
                rhs_contracting_dimensions=tuple(rc))
    prod = lower_convert(b, lower_convert(b, prod, compute), out_dtype)
    return lower_convert(b, prod, out.dtype)


# ---------------------------------------------------------------- dot_general autodiff


def _ranges_like(*xs: Sequence) -> list[list[int]]:
    """Consecutive index ranges with the lengths of ``xs``."""
    out, start = [], 0
    for x in xs:
        out.append(list(range(start, start + len(x))))
        start += len(x)
    return out


def _transpose_lhs(ct, x_aval, y, *, dimension_numbers, precision, swap_ans=False):
    """The cotangent of lhs ``x``: ``ct`` contracted with ``y`` over y's free dimensions,
    transposed back into x's dimension order."""
    (xc, yc), (xb, yb) = dimension_numbers
    y_ndim = core.get_aval(y).ndim
    x_kept = [d for d in range(x_aval.ndim) if d not in xc and d not in xb]
    y_kept = [d for d in range(y_ndim) if d not in yc and d not in yb]
    if swap_ans:
        ans_batch, ans_y, _ = _ranges_like(xb, y_kept, x_kept)
    else:
        ans_batch, _, ans_y = _ranges_like(xb, x_kept, y_kept)
    dims = ((tuple(ans_y), tuple(y_kept)), (tuple(ans_batch), tuple(yb)))
    xc_by_y = [xc[i] for i in np.argsort(yc)]
    out_axes = tuple(int(i) for i in np.argsort(list(xb) + x_kept + xc_by_y))
    ct_dtype = core.get_aval(ct).dtype
    y_dtype = core.get_aval(y).dtype
    prod = dot_general_p.bind(ct, y, dimension_numbers=dims, precision=precision,
                              preferred_element_type=None if ct_dtype == y_dtype else ct_dtype)
    return convert_element_type(transpose(prod, out_axes), x_aval.dtype, x_aval.weak_type)


def _dot_general_transpose(ct, x, y, *, dimension_numbers, precision, preferred_element_type):
    if ad.is_undefined_primal(x) == ad.is_undefined_primal(y):
        raise ValueError("dot_general: can transpose with respect to exactly one operand")
    if ad.is_undefined_primal(x):
        return [_transpose_lhs(ct, x.aval, y, dimension_numbers=dimension_numbers,
                               precision=precision), None]
    (xc, yc), (xb, yb) = dimension_numbers
    return [None, _transpose_lhs(ct, y.aval, x, dimension_numbers=((yc, xc), (yb, xb)),
                                 precision=precision, swap_ans=True)]


ad.defjvp(dot_general_p, lambda g, x, y, **params: dot_general_p.bind(g, y, **params),
          lambda g, x, y, **params: dot_general_p.bind(x, g, **params))
E.def_transpose(dot_general_p, _dot_general_transpose)


# ---------------------------------------------------------------- dot_general batching


def _shift(axes: Sequence[int], d: int | None) -> tuple[int, ...]:
    return tuple(axes) if d is not_mapped else tuple(batched_axis(a, d) for a in axes)


def _free_position(d: int, contracting: Sequence[int], batch: Sequence[int]) -> int:
    """How many free dims of an operand (batched, batch dim at ``d``) come before ``d``."""
    return sum(1 for i in range(d) if i not in contracting and i not in batch)


@dot_general_p.def_batching
def _dot_general_batch(vals, dims, *, dimension_numbers, precision, preferred_element_type):
    # Both mapped: the two batch dims become a new leading dot batch dim (output dim 0).
    # One mapped: its batch dim is one more free dim of that operand, so the unmapped one is
    # never broadcast; the output keeps it among that side's free dims. No transposes.
    (lhs, rhs), (dl, dr) = vals, dims
    (lc, rc), (lb, rb) = dimension_numbers
    lc, lb, rc, rb = _shift(lc, dl), _shift(lb, dl), _shift(rc, dr), _shift(rb, dr)
    if dl is not not_mapped and dr is not not_mapped:
        lb, rb, out_dim = (dl,) + lb, (dr,) + rb, 0
    elif dl is not not_mapped:
        out_dim = len(lb) + _free_position(dl, lc, lb)
    else:
        n_lfree = core.get_aval(lhs).ndim - len(lc) - len(lb)
        out_dim = len(lb) + n_lfree + _free_position(dr, rc, rb)
    out = dot_general_p.bind(lhs, rhs, dimension_numbers=((lc, rc), (lb, rb)),
                             precision=precision, preferred_element_type=preferred_element_type)
    return out, out_dim


def canonicalize_dimension_numbers(dimension_numbers: Any, fn: str = "dot_general") -> tuple:
    """((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)) as tuples of ints."""
    try:
        (lc, rc), (lb, rb) = dimension_numbers
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: dimension_numbers must be ((lhs_contracting, rhs_contracting), "
                        f"(lhs_batch, rhs_batch)), got {dimension_numbers!r}") from None
    return ((int_tuple(fn, "lhs contracting dimensions", lc),
             int_tuple(fn, "rhs contracting dimensions", rc)),
            (int_tuple(fn, "lhs batch dimensions", lb),
             int_tuple(fn, "rhs batch dimensions", rb)))


def _preferred(preferred_element_type: Any) -> np.dtype | None:
    if preferred_element_type is None:
        return None
    return dtypes.canonicalize_dtype(dtypes.dtype(preferred_element_type))


def dot_general(lhs: Any, rhs: Any, dimension_numbers: Any, precision: Any = None,
                preferred_element_type: Any = None) -> Any:
    """General tensor contraction with batch dimensions (XLA's DotGeneral).

    The output has the batch dimensions, then lhs's free dimensions, then rhs's.

    Example:
        >>> lax.dot_general(jnp.ones((2, 3)), jnp.ones((3, 4)), (((1,), (0,)), ((), ()))).shape
        (2, 4)
    """
    lhs = base.as_operand(lhs, "dot_general", "lhs")
    rhs = base.as_operand(rhs, "dot_general", "rhs")
    dn = canonicalize_dimension_numbers(dimension_numbers)
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dn,
                              precision=canonicalize_precision(precision),
                              preferred_element_type=_preferred(preferred_element_type))


def dot(lhs: Any, rhs: Any, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """Vector/matrix product: contracts lhs's last dimension with rhs's first (ranks 1 or 2).

    Example:
        >>> lax.dot(jnp.ones((2, 3)), jnp.ones(3)).shape
        (2,)
    """
    lhs = base.as_operand(lhs, "dot", "lhs")
    rhs = base.as_operand(rhs, "dot", "rhs")
    ls, rs = core.get_aval(lhs).shape, core.get_aval(rhs).shape
    if not (1 <= len(ls) <= 2 and 1 <= len(rs) <= 2) or ls[-1] != rs[0]:
        raise ValueError(f"dot: incompatible shapes for dot: got {ls} and {rs} (lax.dot takes "
                        "vectors or matrices whose inner dimensions match)")
    return dot_general(lhs, rhs, (((len(ls) - 1,), (0,)), ((), ())), precision,
                       preferred_element_type)


def batch_matmul(lhs: Any, rhs: Any, precision: Any = None,
                 preferred_element_type: Any = None) -> Any:
    """Batched matrix product of arrays of equal rank >= 2 and equal batch dimensions.

    Example:
        >>> lax.batch_matmul(jnp.ones((5, 2, 3)), jnp.ones((5, 3, 4))).shape
        (5, 2, 4)
    """
    lhs = base.as_operand(lhs, "batch_matmul", "lhs")
    rhs = base.as_operand(rhs, "batch_matmul", "rhs")
    ls, rs = core.get_aval(lhs).shape, core.get_aval(rhs).shape
    if len(ls) < 2 or len(ls) != len(rs) or ls[:-2] != rs[:-2] or ls[-1] != rs[-2]:
        raise TypeError(f"batch_matmul: incompatible shapes {ls} and {rs} (need equal ranks "
                        ">= 2, equal batch dimensions and matching inner dimensions)")
    n = len(ls)
    batch = tuple(range(n - 2))
    return dot_general(lhs, rhs, (((n - 1,), (n - 2,)), (batch, batch)), precision,
                       preferred_element_type)


# ---------------------------------------------------------------- scaled_dot


def _check_scale(side: str, shape: tuple, scale_shape: tuple, contracting: Sequence[int]) -> None:
    for i, size in enumerate(shape):
        if i in contracting:
            if scale_shape[i] == 0 or size % scale_shape[i]:
                raise TypeError(f"{side} contracting dim {i} of size {size} must be divisible "
                                f"by its scale's dim size {scale_shape[i]}.")
            if size // scale_shape[i] < 2:
                raise TypeError(f"The ratio of {side} contracting dim {i} to its scale's dim "
                                f"size ({size // scale_shape[i]}) must be at least 2.")
        elif scale_shape[i] != size:
            raise TypeError(f"{side} dim {i} of size {size} does not match scale dim size "
                            f"{scale_shape[i]}.")


def _apply_scale(x: Any, scale: Any, contracting: Sequence[int]) -> Any:
    """``x * scale`` in bfloat16, each scale entry repeated over its block of contracting
    elements."""
    from ember.lax.shape import broadcast_in_dim, reshape
    x = convert_element_type(x, dtypes.bfloat16)
    if scale is None:
        return x
    shape = core.get_aval(x).shape
    scale = convert_element_type(scale, dtypes.bfloat16)
    for i in contracting:
        s_shape = core.get_aval(scale).shape
        block = shape[i] // s_shape[i]
        if block != 1:
            wide = s_shape[:i + 1] + (block,) + s_shape[i + 1:]
            dims = tuple(d if d <= i else d + 1 for d in range(len(s_shape)))
            scale = reshape(broadcast_in_dim(scale, wide, dims),
                            s_shape[:i] + (shape[i],) + s_shape[i + 1:])
    return E.mul(x, scale)


def scaled_dot(lhs: Any, rhs: Any, *, lhs_scale: Any = None, rhs_scale: Any = None,
               dimension_numbers: Any = None, preferred_element_type: Any = None) -> Any:
    """``dot_general(lhs * lhs_scale, rhs * rhs_scale)``, with block scales: each scale entry
    covers a block of ``operand size // scale size`` (at least 2) contracting elements.

    As XLA's reference expansion does, operands and scales are rounded to bfloat16 and
    multiplied there; the product accumulates in ``preferred_element_type`` (default
    bfloat16). Without ``dimension_numbers``, rank-``n`` operands contract lhs's last axis
    with rhs's axis ``n - 2`` and batch over the leading ``n - 2``.

    Example:
        >>> lax.scaled_dot(jnp.ones((2, 4)), jnp.ones((4, 3)), lhs_scale=jnp.full((2, 2), 2.0),
        ...                preferred_element_type=jnp.float32)
        Array([[8., 8., 8.],
               [8., 8., 8.]], dtype=float32)
    """
    fn = "scaled_dot"
    lhs = base.as_operand(lhs, fn, "lhs")
    rhs = base.as_operand(rhs, fn, "rhs")
    la, ra = core.get_aval(lhs), core.get_aval(rhs)
    if dimension_numbers is None:
        if la.ndim < 2:
            raise TypeError("scaled_dot does not support 0-rank and 1-rank operands.")
        n = la.ndim
        batch = tuple(range(n - 2))
        dimension_numbers = (((n - 1,), (n - 2,)), (batch, batch))
    (lc, rc), (lb, rb) = canonicalize_dimension_numbers(dimension_numbers, fn)
    scales = [core.get_aval(base.as_operand(s, fn, name)) if s is not None else None
              for s, name in ((lhs_scale, "lhs_scale"), (rhs_scale, "rhs_scale"))]
    ranks = [la.ndim, ra.ndim] + [s.ndim for s in scales if s is not None]
    if len(set(ranks)) != 1:
        raise TypeError(f"All input tensors must have the same rank. Got ranks {ranks} "
                        "(lhs, rhs, then the scales given).")
    for i, j in zip(lb, rb):
        sizes = {la.shape[i], ra.shape[j]} | {s.shape[d] for s, d in zip(scales, (i, j))
                                              if s is not None}
        if len(sizes) != 1:
            raise TypeError(f"All input tensors must have the same batch dimension size for "
                            f"batch dims ({i}, {j}).")
    if scales[0] is not None:
        _check_scale("LHS", la.shape, scales[0].shape, lc)
    if scales[1] is not None:
        _check_scale("RHS", ra.shape, scales[1].shape, rc)
    out_dtype = dtypes.bfloat16 if preferred_element_type is None else preferred_element_type
    return dot_general(_apply_scale(lhs, lhs_scale, lc), _apply_scale(rhs, rhs_scale, rc),
                       ((lc, rc), (lb, rb)), preferred_element_type=out_dtype)


__all__ = ["Precision", "dot_general", "dot", "batch_matmul", "dot_general_p", "scaled_dot"]
