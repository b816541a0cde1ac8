"""rng_bit_generator and rng_uniform: the stateless and stateful random-bit primitives of lax.

``rng_bit_generator(key, shape)`` reproduces XLA's CPU bit generators bit for bit (checked
against JAX): the uint32[4] key is read as two uint64 words ``(k, s)``.

* ``RNG_THREE_FRY``: Threefry-2x32 under key ``k`` of the counters ``s, s+1, ...``; each
  counter gives two words. The output is laid out by splitting one dimension in two halves
  interleaved pairwise (the first even dimension, else the largest one padded by one): the
  halves' elements ``[..., 2m + j, ...]`` come from word ``j`` of the counter at position
  ``[..., m, ...]`` of the half shape. The new key is ``(k, s + counters)``.
* ``RNG_PHILOX`` (and ``RNG_DEFAULT``, which is Philox on CPU): Philox-4x32 (10 rounds)
  under the key ``k`` of the 128-bit counters ``(s + i, k)``; each counter gives four
  consecutive words of the row-major output. The new key is ``(k, s + counters)``.

Narrower dtypes (uint8, uint16) truncate the 32-bit words; uint64 joins pairs of them.
Both primitives lower to a ``custom_call`` run by the evaluator's library step.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import core, dtypes
from ember.compiler.evaluator import register_custom_call_target
from ember.compiler.hlo import Shape
from ember.interpreters import ad
from ember.interpreters.batching import not_mapped
from ember.lax import base
from ember.lax.prng import _impl as _threefry2x32
from ember.lax.shape import int_tuple

__all__ = ["RandomAlgorithm", "rng_bit_generator", "rng_bit_generator_p", "rng_uniform",
           "rng_uniform_p"]

_U32, _U64 = np.dtype(np.uint32), np.dtype(np.uint64)
_MASK32 = np.uint64(0xFFFFFFFF)


class RandomAlgorithm(enum.IntEnum):
    """The bit-generation algorithm of ``rng_bit_generator`` (XLA's names).

    Example:
        >>> lax.RandomAlgorithm.RNG_PHILOX
        <RandomAlgorithm.RNG_PHILOX: 2>
    """

    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2

    def __str__(self) -> str:
        return self.name


def _split64(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (x & _MASK32).astype(_U32), (x >> np.uint64(32)).astype(_U32)


def _threefry_words(k: np.uint64, s: np.uint64, shape: tuple) -> tuple[np.ndarray, int]:
    full = list(shape) or [1]
    even = [i for i, n in enumerate(full) if n % 2 == 0]
    d = even[0] if even else int(np.argmax(full))
    half = list(full)
    half[d] = (half[d] + 1) // 2
    count = int(np.prod(half, dtype=np.int64))
    with np.errstate(over="ignore"):
        ctr = s + np.arange(count, dtype=_U64)
    k1, k2 = _split64(np.asarray(k, _U64))
    lo, hi = _split64(ctr)
    a, b = _threefry2x32(k1, k2, lo, hi)
    split = half[:d] + [half[d], 1] + half[d + 1:]
    padded = half[:d] + [2 * half[d]] + half[d + 1:]
    words = np.concatenate([a.reshape(split), b.reshape(split)], axis=d + 1).reshape(padded)
    return np.take(words, np.arange(full[d]), axis=d), count


def _philox4x32(x: list, k0: np.uint32, k1: np.uint32) -> list:
    for _ in range(10):
        p0 = x[0].astype(_U64) * np.uint64(0xD2511F53)
        p1 = x[2].astype(_U64) * np.uint64(0xCD9E8D57)
        h0, l0 = _split64(p0)[::-1]
        h1, l1 = _split64(p1)[::-1]
        x = [h1 ^ x[1] ^ k0, l1, h0 ^ x[3] ^ k1, l0]
        k0 = np.uint32((int(k0) + 0x9E3779B9) & 0xFFFFFFFF)
        k1 = np.uint32((int(k1) + 0xBB67AE85) & 0xFFFFFFFF)
    return x


def _philox_words(k: np.uint64, s: np.uint64, n: int) -> tuple[np.ndarray, int]:
    count = -(-n // 4)
    with np.errstate(over="ignore"):
        lo = s + np.arange(count, dtype=_U64)
        hi = k + (lo < s).astype(_U64)  # the carry into the high 64 bits
    k0, k1 = _split64(np.asarray(k, _U64))
    x = [*_split64(lo), *_split64(hi)]
    out = _philox4x32(x, np.uint32(k0), np.uint32(k1))
    return np.stack(out, axis=1).ravel()[:n], count


def _generate(key: np.ndarray, shape: tuple, dtype: np.dtype, algorithm: int):
    key = np.asarray(key, _U32)
    k = np.uint64(key[0]) | (np.uint64(key[1]) << np.uint64(32))
    s = np.uint64(key[2]) | (np.uint64(key[3]) << np.uint64(32))
    wide = dtype.itemsize == 8
    n = int(np.prod(shape, dtype=np.int64))
    if algorithm == RandomAlgorithm.RNG_THREE_FRY:
        if wide:  # one counter per element, its two words joined
            with np.errstate(over="ignore"):
                ctr = s + np.arange(n, dtype=_U64)
            a, b = _threefry2x32(*_split64(np.asarray(k, _U64)), *_split64(ctr))
            words = a.astype(_U64) | (b.astype(_U64) << np.uint64(32))
            count = n
        else:
            words, count = _threefry_words(k, s, tuple(shape))
    else:
        words, count = _philox_words(k, s, 2 * n if wide else n)
        if wide:
            words = words[0::2].astype(_U64) | (words[1::2].astype(_U64) << np.uint64(32))
    with np.errstate(over="ignore"):
        s_new = s + np.uint64(count)
    new_key = np.array([key[0], key[1], *_split64(np.asarray(s_new, _U64))], _U32)
    return new_key, np.asarray(words).astype(dtype).reshape(shape)


rng_bit_generator_p = core.MultipleResultsPrimitive("rng_bit_generator")
rng_bit_generator_p.pp_param_order = ("algorithm", "dtype", "out_sharding", "shape")
_BITS_TARGET = "ember_rng_bit_generator"
_BIT_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16), _U32, _U64)


def _rbg_impl(key, *, shape, dtype, algorithm, out_sharding):
    return list(_generate(key, shape, np.dtype(dtype), algorithm))


def _rbg_abstract_eval(key, *, shape, dtype, algorithm, out_sharding):
    if key.dtype != _U32 or key.shape != (4,):
        raise TypeError("rng_bit_generator: key must be a uint32[4] array, got "
                        f"{key.str_short()}")
    return [core.ShapedArray((4,), _U32), core.ShapedArray(shape, np.dtype(dtype))]


def _rbg_lowering(ctx, key, *, shape, dtype, algorithm, out_sharding):
    out_shape = Shape.tuple([Shape(_U32, (4,)), Shape(np.dtype(dtype), tuple(shape))])
    out = ctx.b.op("custom_call", key, shape=out_shape, call_target_name=_BITS_TARGET,
                   shape_=tuple(shape), dtype_=np.dtype(dtype).name, algorithm=int(algorithm))
    return [ctx.b.op("get_tuple_element", out, index=i) for i in range(2)]


def _rbg_batch(vals, dims, *, shape, dtype, algorithm, out_sharding):
    # As JAX: the first key of the batch draws the bits of the whole batch, and only that
    # key advances (the others are returned unchanged).
    (keys,), (d,) = vals, dims
    params = dict(shape=shape, dtype=dtype, algorithm=algorithm, out_sharding=out_sharding)
    if d is not_mapped:
        return rng_bit_generator_p.bind(keys, **params), [not_mapped, not_mapped]
    from ember.lax import batch_util
    from ember.lax.slicing import dynamic_update_index_in_dim, index_in_dim
    keys = batch_util.moveaxis(keys, d, 0)
    size = core.get_aval(keys).shape[0]
    new_key, bits = rng_bit_generator_p.bind(
        index_in_dim(keys, 0, 0, keepdims=False), **dict(params, shape=(size, *shape)))
    return [dynamic_update_index_in_dim(keys, new_key, 0, 0), bits], [0, 0]


rng_bit_generator_p.def_impl(_rbg_impl)
rng_bit_generator_p.def_abstract_eval(_rbg_abstract_eval)
rng_bit_generator_p.def_lowering(_rbg_lowering)
rng_bit_generator_p.def_batching(_rbg_batch)
ad.defjvp_zero(rng_bit_generator_p)
register_custom_call_target(
    _BITS_TARGET, lambda key, *, shape_, dtype_, algorithm: tuple(
        _generate(key, tuple(shape_), np.dtype(dtype_), algorithm)))


def rng_bit_generator(key: Any, shape: Sequence[int], dtype: Any = np.uint32,
                      algorithm: RandomAlgorithm = RandomAlgorithm.RNG_DEFAULT,
                      out_sharding: Any = None) -> tuple[Any, Any]:
    """Stateless random bits: returns ``(new_key, bits)`` for a uint32[4] ``key``.

    The bits equal XLA CPU's (so JAX's on CPU) for every algorithm; ``RNG_DEFAULT`` is
    Philox. ``dtype`` is an unsigned integer type (uint8, uint16, uint32, uint64).

    Example:
        >>> key, bits = lax.rng_bit_generator(jnp.zeros(4, jnp.uint32), (2,))
        >>> bits
        Array([1713891541, 3781805453], dtype=uint32)
    """
    key = base.as_operand(key, "rng_bit_generator", "key")
    shape = int_tuple("rng_bit_generator", "shape", shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"rng_bit_generator: shape must be non-negative, got {shape}")
    dt = dtypes.canonicalize_dtype(np.dtype(dtype))
    if dt not in _BIT_DTYPES:
        raise TypeError(f"rng_bit_generator: unsupported dtype {np.dtype(dtype).name}")
    try:
        algorithm = RandomAlgorithm(algorithm)
    except ValueError:
        raise ValueError(f"rng_bit_generator: unknown algorithm {algorithm!r}") from None
    if out_sharding is not None:
        raise NotImplementedError("rng_bit_generator: ember has no shardings")
    new_key, bits = rng_bit_generator_p.bind(key, shape=shape, dtype=dt, algorithm=algorithm,
                                             out_sharding=None)
    return new_key, bits


# ---------------------------------------------------------------- rng_uniform

rng_uniform_p = core.Primitive("rng_uniform")
_UNIFORM_TARGET = "ember_rng_uniform"
_state = np.random.default_rng(0)  # (stateful, as XLA's RngUniform: each run draws anew)


def _uniform(a, b, shape) -> np.ndarray:
    a, b = np.asarray(a), np.asarray(b)
    if dtypes.is_integer(a.dtype):
        if b <= a:
            return np.full(shape, a, a.dtype)
        return _state.integers(a, b, size=shape, dtype=a.dtype)
    u = _state.random(size=shape)
    return np.asarray(a + (b - a) * u).astype(a.dtype)


def _ru_abstract_eval(a, b, *, shape):
    if a.shape != () or b.shape != ():
        raise ValueError("rng_uniform: a and b must be scalars, got "
                         f"{a.str_short()} and {b.str_short()}")
    if a.dtype != b.dtype:
        raise TypeError(f"rng_uniform: a and b must have the same dtype, got {a.dtype} and "
                        f"{b.dtype}")
    base.check_dtype("rng_uniform", "a", a.dtype, base.float_dtypes + base.int_dtypes)
    return core.ShapedArray(shape, a.dtype)


def _ru_lowering(ctx, a, b, *, shape):
    return ctx.b.op("custom_call", a, b, shape=Shape(ctx.aval_out.dtype, tuple(shape)),
                    call_target_name=_UNIFORM_TARGET, shape_=tuple(shape),
                    has_side_effect=True)


rng_uniform_p.def_impl(lambda a, b, *, shape: _uniform(a, b, shape))
rng_uniform_p.def_abstract_eval(_ru_abstract_eval)
rng_uniform_p.def_lowering(_ru_lowering)
ad.defjvp_zero(rng_uniform_p)
register_custom_call_target(
    _UNIFORM_TARGET, lambda a, b, *, shape_, has_side_effect: _uniform(a, b, tuple(shape_)))


def rng_uniform(a: Any, b: Any, shape: Sequence[int]) -> Any:
    """Stateful uniform random values in ``[a, b)`` of ``a``'s dtype (XLA's RngUniform).

    Not reproducible: each call (and each run of a compiled function) draws new values, as
    in XLA. Use ``ember.random`` for reproducible randomness.

    Example:
        >>> lax.rng_uniform(0., 1., (3,)).shape
        (3,)
    """
    shape = int_tuple("rng_uniform", "shape", shape)
    return rng_uniform_p.bind(base.as_operand(a, "rng_uniform", "a"),
                              base.as_operand(b, "rng_uniform", "b"), shape=shape)
