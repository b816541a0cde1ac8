"""Bit-level elementwise primitives: ``bitcast_convert_type`` and ``mulhi``.

``bitcast_convert_type`` reinterprets the bits of each element as another dtype. When the
widths differ, a wider source gains a trailing dimension of ``old_bits // new_bits``
elements (little-endian order: element 0 holds the lowest-addressed bytes, as NumPy's
``view``), and a narrower source loses its last dimension, which must hold exactly one wide
element. Equal widths lower to HLO's elementwise ``bitcast_convert`` (fused, native for
32- and 64-bit types); others to the ``ember.bitcast_convert`` custom call, which both
backends run with the NumPy evaluator.

``mulhi`` is the high half of the double-width integer product (signed or unsigned).

Example:
    >>> lax.bitcast_convert_type(jnp.float32(1.0), jnp.int32)
    Array(1065353216, dtype=int32)
    >>> lax.mulhi(jnp.uint8(200), jnp.uint8(200))  # 40000 >> 8
    Array(156, dtype=uint8)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import core, dtypes
from ember.compiler.evaluator import register_custom_call_target
from ember.compiler.hlo import Shape
from ember.interpreters import ad
from ember.lax import base, batch_util
from ember.lax.base import broadcasting_shape, check_dtype, int_dtypes, standard_primitive
from ember.lax.elementwise import lower_broadcast_operands, lower_full

# ---------------------------------------------------------------- bitcast_convert_type

_BITCAST_TARGET = "ember.bitcast_convert"


def _bits(dt: np.dtype) -> int:
    return np.dtype(dt).itemsize * 8


def _bitcast_shape(x, *, new_dtype):
    old_bits, new_bits = _bits(x.dtype), _bits(new_dtype)
    if old_bits == new_bits:
        return x.shape
    if old_bits > new_bits:
        return x.shape + (old_bits // new_bits,)
    last = x.shape[-1] if x.shape else 1
    if last * old_bits != new_bits:
        raise ValueError(f"bitcast_convert_type: cannot convert an operand of shape {x.shape} "
                         f"from {x.dtype} ({old_bits} bits) to {np.dtype(new_dtype)} "
                         f"({new_bits} bits): the last dimension must have size "
                         f"{new_bits // old_bits}, got {last}")
    return x.shape[:-1]


def _bitcast_dtype(x, *, new_dtype):
    special = (np.bool_, np.complexfloating)
    if any(np.issubdtype(d, s) for d in (x.dtype, new_dtype) for s in special) \
            and x.dtype != new_dtype:
        raise TypeError(f"bitcast_convert_type does not support bool or complex values "
                        f"unless the operand and destination types match, got operand dtype "
                        f"{x.dtype} and new_dtype {np.dtype(new_dtype)}")
    return np.dtype(new_dtype)


def bitcast_array(x: np.ndarray, new_dtype: Any) -> np.ndarray:
    """The NumPy bitcast of ``x`` (the impl and the custom call's evaluator routine)."""
    x = np.asarray(x)
    new_dtype = np.dtype(new_dtype)
    old_bits, new_bits = _bits(x.dtype), _bits(new_dtype)
    flat = np.ascontiguousarray(x).reshape(-1)  # (0-d arrays cannot change itemsize)
    if old_bits == new_bits:
        shape = x.shape
    elif old_bits > new_bits:
        shape = x.shape + (old_bits // new_bits,)
    else:
        shape = x.shape[:-1]
    return flat.view(new_dtype).reshape(shape).copy()


bitcast_convert_type_p = standard_primitive(
    "bitcast_convert_type", lambda x, *, new_dtype: bitcast_array(x, new_dtype),
    _bitcast_shape, _bitcast_dtype, lambda x, **_: False)  # never weakly typed, as in JAX
ad.defjvp_zero(bitcast_convert_type_p)  # JAX: no derivative, even float -> float


@bitcast_convert_type_p.def_batching
def _bitcast_batch(vals, dims, *, new_dtype):
    # Elementwise, except that a widening bitcast consumes the last axis: a batch dim there
    # moves to the front first.
    (x,), (d,) = vals, dims
    aval = core.get_aval(x)
    if _bits(aval.dtype) < _bits(new_dtype) and d == aval.ndim - 1:
        x, d = batch_util.moveaxis(x, d, 0), 0
    return bitcast_convert_type_p.bind(x, new_dtype=new_dtype), d


@bitcast_convert_type_p.def_lowering
def _bitcast_lowering(ctx, x, *, new_dtype):
    new_dtype = np.dtype(new_dtype)
    if x.dtype == new_dtype:
        return x
    shape = Shape(new_dtype, tuple(ctx.aval_out.shape))
    if x.dtype.itemsize == new_dtype.itemsize:
        return ctx.b.op("bitcast_convert", x, shape=shape)
    return ctx.b.op("custom_call", x, shape=shape, call_target_name=_BITCAST_TARGET,
                    new_dtype=new_dtype.name)


register_custom_call_target(
    _BITCAST_TARGET, lambda x, *, new_dtype: bitcast_array(x, dtypes.dtype(new_dtype)))


def bitcast_convert_type(operand: Any, new_dtype: Any) -> Any:
    """Reinterprets the bits of ``operand`` as ``new_dtype`` (StableHLO ``bitcast_convert``).

    Equal widths keep the shape; a narrower ``new_dtype`` adds a trailing dimension of
    ``old_bits // new_bits``; a wider one removes the last dimension, whose size must be
    ``new_bits // old_bits``. Bool and complex dtypes only bitcast to themselves.

    Args:
        operand: an array or scalar.
        new_dtype: the dtype to reinterpret the bits as (canonicalized, as in JAX).

    Returns:
        An array of dtype ``new_dtype`` built from the same bits, never weakly typed.

    Example:
        >>> lax.bitcast_convert_type(jnp.array([1.0], jnp.float32), jnp.uint16)
        Array([[    0, 16256]], dtype=uint16)
    """
    operand = base.as_operand(operand, "bitcast_convert_type")
    try:
        new = dtypes.canonicalize_dtype(dtypes.dtype(new_dtype))
    except Exception:
        raise TypeError(f"bitcast_convert_type: new_dtype must be a dtype, got "
                        f"{new_dtype!r}") from None
    if new == dtypes.float0 or new.kind not in "biufcV":
        raise TypeError(f"bitcast_convert_type: new_dtype {new} is not a supported dtype")
    return bitcast_convert_type_p.bind(operand, new_dtype=new)


# ---------------------------------------------------------------- mulhi


def _mulhi_impl(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    x, y = np.asarray(x), np.asarray(y)
    dt = x.dtype
    bits = _bits(dt)
    signed = dt.kind == "i"
    if bits < 64:  # the exact product fits a 64-bit integer
        wide = np.int64 if signed else np.uint64
        prod = x.astype(wide) * y.astype(wide)
        return (prod >> wide(bits)).astype(dt)
    # 64 bits: the unsigned high word from 32-bit halves (all in wrapping uint64), then the
    # two's-complement correction for negative signed operands.
    with np.errstate(over="ignore"):
        u, v = x.astype(np.uint64), y.astype(np.uint64)
        lo_mask, s32 = np.uint64(0xFFFFFFFF), np.uint64(32)
        u_lo, u_hi, v_lo, v_hi = u & lo_mask, u >> s32, v & lo_mask, v >> s32
        ll, lh, hl, hh = u_lo * v_lo, u_lo * v_hi, u_hi * v_lo, u_hi * v_hi
        mid = (ll >> s32) + (lh & lo_mask) + (hl & lo_mask)
        hi = hh + (lh >> s32) + (hl >> s32) + (mid >> s32)
        if signed:
            hi = hi - np.where(x < 0, v, np.uint64(0)) - np.where(y < 0, u, np.uint64(0))
    return np.asarray(hi.astype(dt))


def _mulhi_dtype(x, y, **_):
    for arg, a in (("x", x), ("y", y)):
        check_dtype("mulhi", arg, a.dtype, int_dtypes)
    return base.check_same_dtypes("mulhi", x, y)


mulhi_p = standard_primitive("mulhi", _mulhi_impl,
                             lambda x, y, **_: broadcasting_shape("mulhi", x, y), _mulhi_dtype)
ad.defjvp_zero(mulhi_p)
batch_util.defbroadcasting(mulhi_p)


def _lower_mulhi_64(b, x, y):
    # The 64-bit high word from 32-bit halves in uint64 (see ``_mulhi_impl``).
    u64 = np.dtype(np.uint64)
    dims = x.dims

    def op(name, *args):
        return b.op(name, *args)

    def const(v):
        return lower_full(b, v, u64, dims)

    u = b.op("convert", x, shape=Shape(u64, dims)) if x.dtype != u64 else x
    v = b.op("convert", y, shape=Shape(u64, dims)) if y.dtype != u64 else y
    mask, s32 = const(0xFFFFFFFF), const(32)
    u_lo, u_hi = op("and", u, mask), op("shift_right_logical", u, s32)
    v_lo, v_hi = op("and", v, mask), op("shift_right_logical", v, s32)
    ll, lh = op("multiply", u_lo, v_lo), op("multiply", u_lo, v_hi)
    hl, hh = op("multiply", u_hi, v_lo), op("multiply", u_hi, v_hi)
    mid = op("add", op("add", op("shift_right_logical", ll, s32), op("and", lh, mask)),
             op("and", hl, mask))
    hi = op("add", op("add", hh, op("shift_right_logical", lh, s32)),
            op("add", op("shift_right_logical", hl, s32), op("shift_right_logical", mid, s32)))
    if x.dtype.kind == "i":
        zero_s, zero_u = lower_full(b, 0, x.dtype, dims), const(0)
        x_neg = b.op("compare", x, zero_s, comparison_direction="LT")
        y_neg = b.op("compare", y, zero_s, comparison_direction="LT")
        hi = op("subtract", hi, b.op("select", x_neg, v, zero_u))
        hi = op("subtract", hi, b.op("select", y_neg, u, zero_u))
        return b.op("convert", hi, shape=Shape(x.dtype, dims))
    return hi


@mulhi_p.def_lowering
def _mulhi_lowering(ctx, x, y):
    b = ctx.b
    x, y = lower_broadcast_operands(b, x, y)
    dt, dims = x.dtype, x.dims
    bits = _bits(dt)
    if bits == 64:
        return _lower_mulhi_64(b, x, y)
    wide = np.dtype(f"{'i' if dt.kind == 'i' else 'u'}{2 * bits // 8}")
    xw = b.op("convert", x, shape=Shape(wide, dims))
    yw = b.op("convert", y, shape=Shape(wide, dims))
    shift = "shift_right_arithmetic" if dt.kind == "i" else "shift_right_logical"
    hi = b.op(shift, b.op("multiply", xw, yw), lower_full(b, bits, wide, dims))
    return b.op("convert", hi, shape=Shape(dt, dims))


def mulhi(x: Any, y: Any, /) -> Any:
    """The high ``N`` bits of the ``2N``-bit product of two ``N``-bit integers, elementwise.

    Args:
        x, y: integer arrays of one dtype (signed or unsigned); rank-0 operands broadcast.

    Returns:
        An array of that dtype: ``(x * y) >> N`` computed without overflow.

    Example:
        >>> lax.mulhi(jnp.int32(-5), jnp.int32(7))  # -35 >> 32
        Array(-1, dtype=int32)
    """
    x, y = base.scalars_like("mulhi", x, y)
    return mulhi_p.bind(x, y)


__all__ = ["bitcast_convert_type", "bitcast_convert_type_p", "mulhi", "mulhi_p"]
