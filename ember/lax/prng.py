"""The Threefry-2x32 counter-based hash: the ``threefry2x32`` primitive and its helpers.

``threefry2x32(k1, k2, x1, x2)`` hashes the 64-bit counters ``(x1, x2)`` (two parallel uint32
arrays) under the 64-bit key ``(k1, k2)`` with 20 rounds of Threefry-2x32 (Salmon et al.,
"Parallel random numbers: as easy as 1, 2, 3", SC 2011), returning two uint32 arrays. It is
elementwise (operands broadcast as lax: equal shapes or rank 0), so under ``jit`` it lowers
to plain integer HLO (add, xor, shifts, or) that fuses into one loop; it has no derivatives
(integers) and batches as any broadcasting elementwise primitive. ``ember.random`` derives
keys and random bits from it exactly as JAX's default ``threefry2x32`` implementation.

Example:
    >>> a, b = lax.threefry2x32(np.uint32(0), np.uint32(0), np.uint32([0, 1]),
    ...                         np.uint32([0, 0]))
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember.compiler import eval_elementwise
from ember.interpreters import ad
from ember.lax import base, batch_util
from ember.lax.base import broadcasting_shape, check_dtype, standard_primitive
from ember.lax.elementwise import lower_broadcast_operands, lower_full

_U32 = np.dtype(np.uint32)
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA  # the key-schedule constant of Threefry


def _schedule(k1: Any, k2: Any, xor: Any) -> tuple[Any, Any, Any]:
    return k1, k2, xor(xor(k1, k2), _PARITY)


def _hash(add, xor, rotl, const, k1, k2, x1, x2):
    """Threefry-2x32 written once over abstract ops (shared by the impl and the lowering)."""
    ks = _schedule(k1, k2, lambda a, b: xor(a, const(b) if isinstance(b, int) else b))
    x1, x2 = add(x1, ks[0]), add(x2, ks[1])
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x1 = add(x1, x2)
            x2 = xor(x1, rotl(x2, r))
        x1 = add(x1, ks[(i + 1) % 3])
        x2 = add(add(x2, ks[(i + 2) % 3]), const(i + 1))
    return x1, x2


def _impl(k1, k2, x1, x2):
    k1, k2, x1, x2 = (np.asarray(a, _U32) for a in (k1, k2, x1, x2))
    shape = np.broadcast_shapes(k1.shape, k2.shape, x1.shape, x2.shape)
    if k1.size == k2.size == 1 and np.broadcast_shapes(x1.shape, x2.shape) == shape:
        run = eval_elementwise.native_runner("threefry2x32", _U32)  # (one pass, same bits)
        if run is not None:
            return run(k1, k2, x1, x2)
    with np.errstate(over="ignore"):
        out = _hash(np.add, np.bitwise_xor,
                    lambda v, r: (v << _U32.type(r)) | (v >> _U32.type(32 - r)),
                    _U32.type, k1, k2, x1, x2)
    return [np.broadcast_to(o, shape).astype(_U32) for o in out]


def _dtype_rule(*avals):
    for name, a in zip(("k1", "k2", "x1", "x2"), avals):
        check_dtype("threefry2x32", name, a.dtype, [_U32])
    return (_U32, _U32)


def _shape_rule(*avals):
    shape = broadcasting_shape("threefry2x32", *avals)
    return (shape, shape)


threefry2x32_p = standard_primitive("threefry2x32", _impl, _shape_rule, _dtype_rule,
                                    weak_type_rule=lambda *a: False,
                                    multiple_results=True)
ad.defjvp_zero(threefry2x32_p)
batch_util.defbroadcasting(threefry2x32_p)


@threefry2x32_p.def_lowering
def _lowering(ctx, k1, k2, x1, x2):
    b = ctx.b
    k1, k2, x1, x2 = lower_broadcast_operands(b, k1, k2, x1, x2)
    dims = x1.dims
    const = lambda v: lower_full(b, v, _U32, dims)  # noqa: E731

    def rotl(v, r):
        return b.op("or", b.op("shift_left", v, const(r)),
                    b.op("shift_right_logical", v, const(32 - r)))

    return list(_hash(lambda u, v: b.op("add", u, v), lambda u, v: b.op("xor", u, v), rotl,
                      const, k1, k2, x1, x2))


def threefry2x32(k1: Any, k2: Any, x1: Any, x2: Any) -> list[Any]:
    """Threefry-2x32 of the counters ``(x1, x2)`` under the key ``(k1, k2)``, elementwise.

    Args:
        k1, k2: uint32 key words (usually rank 0).
        x1, x2: uint32 counter words; all four operands have one shape or rank 0.

    Returns:
        Two uint32 arrays of the broadcast shape: the hashed words.

    Example:
        >>> lax.threefry2x32(np.uint32(0), np.uint32(0), np.uint32(0), np.uint32(0))
        [Array(1797259609, dtype=uint32), Array(2579123966, dtype=uint32)]
    """
    args = [base.as_operand(a, "threefry2x32", n) for a, n in
            zip((k1, k2, x1, x2), ("k1", "k2", "x1", "x2"))]
    return threefry2x32_p.bind(*args)


def iota_2x32_shape(shape: tuple[int, ...]) -> tuple[Any, Any]:
    """The row-major index of every element of ``shape`` as 64 bits: ``(hi, lo)`` uint32.

    Example:
        >>> hi, lo = iota_2x32_shape((2, 3))  # lo == [[0, 1, 2], [3, 4, 5]], hi == 0
    """
    from ember.lax.elementwise import add, mul, shift_right_logical
    from ember.lax.shape import broadcasted_iota, full
    shape = tuple(shape)
    size = math.prod(shape)
    if size > 2 ** 64:
        raise NotImplementedError("random bits array of size exceeding 2 ** 64")
    if not shape:
        zero = full((), 0, _U32)
        return zero, zero
    if size <= 2 ** 32:  # every index fits the low word
        strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
        lo = None
        for d, s in enumerate(strides):
            term = broadcasted_iota(_U32, shape, d)
            if s != 1:
                term = mul(term, full(shape, s % 2 ** 32, _U32))
            lo = term if lo is None else add(lo, term)
        return full(shape, 0, _U32), lo
    # Larger than 2**32 elements: the 64-bit index (needs uint64 arithmetic).
    from ember.lax.elementwise import convert_element_type
    u64 = np.dtype(np.uint64)
    idx = None
    for d in range(len(shape)):
        term = mul(broadcasted_iota(u64, shape, d), full(shape, math.prod(shape[d + 1:]), u64))
        idx = term if idx is None else add(idx, term)
    return (convert_element_type(shift_right_logical(idx, full(shape, 32, u64)), _U32),
            convert_element_type(idx, _U32))


__all__ = ["threefry2x32", "threefry2x32_p"]

