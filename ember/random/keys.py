"""PRNG keys (legacy ``uint32[..., 2]`` key data, threefry2x32): seeding, split, fold_in, bits.

Keys are derived as JAX's default implementation (``jax_default_prng_impl=threefry2x32`` with
``jax_threefry_partitionable=True``): element ``i`` (row-major) of a draw of ``shape`` is the
threefry hash of the 64-bit counter ``i`` under the key, so the bits of a draw do not depend
on how it is computed (eagerly, under ``jit`` or ``vmap``) and equal JAX's bit for bit.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import core, dtypes, lax
from ember.lax.prng import iota_2x32_shape, threefry2x32
from ember.random.key_array import IMPL_NAME, KEY_DTYPE, PRNGKeyArray, PRNGKeyDtype

_U32 = np.dtype(np.uint32)
UINT_DTYPES = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: _U32,
               64: np.dtype(np.uint64)}


def _is_arraylike(x: Any) -> bool:
    return hasattr(x, "aval") or isinstance(x, (np.ndarray, np.generic))


def check_key(name: str, key: Any, *, allow_batched: bool = False) -> Any:
    """The key data (uint32 with trailing dimension 2) of a typed key or validated legacy key."""
    if isinstance(key, PRNGKeyArray):
        if not allow_batched and key.ndim:
            raise ValueError(f"{name} accepts a single key, but was given a key array of "
                             f"shape {key.shape} != (). Use jax.vmap for batching.")
        return key._base_array
    if not _is_arraylike(key):
        raise TypeError(f"unexpected PRNG key type {type(key)}")
    shape, dtype = np.shape(key), dtypes.dtype(key)
    if len(shape) < 1:
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data.ndim >= 1; "
                        f"got ndim={len(shape)}")
    if shape[-1:] != (2,):
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data.shape to end "
                        f"with (2,); got shape={shape} for impl=PRNGImpl(threefry2x32)")
    if dtype != _U32:
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data.dtype = "
                        f"uint32; got dtype={dtype}")
    if not allow_batched and len(shape) > 1:
        raise ValueError(f"{name} accepts a single key, but was given a key array of shape "
                         f"{shape} != (). Use jax.vmap for batching.")
    if isinstance(key, (np.ndarray, np.generic)):  # NumPy key data becomes an ember Array
        import ember.numpy as jnp
        key = jnp.asarray(key)
    return key


def _words(key: Any) -> tuple[Any, Any]:
    return key[0], key[1]


def canonical_shape(shape: Any, name: str = "shape") -> tuple[int, ...]:
    """``shape`` (an int or a sequence of ints) as a tuple, with JAX's errors."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        out = tuple(operator.index(core.concrete_or_error(d, f"The {name} argument")
                                   if hasattr(d, "aval") else d) for d in shape)
    except TypeError:
        raise TypeError("Shapes must be 1D sequences of concrete values of integer type, "
                        f"got {shape!r}.") from None
    if any(d < 0 for d in out):
        raise TypeError("Shapes must be 1D sequences of concrete values of integer type, "
                        f"got {shape!r}.")
    return out


# ------------------------------------------------------------------------------ seeding

def _seed_data(name: str, seed: Any) -> Any:
    if isinstance(seed, PRNGKeyArray):
        raise TypeError(f"{name} accepts a scalar seed, but was given a PRNG key.")
    if hasattr(seed, "dtype") and np.ndim(seed):
        raise TypeError(f"{name} accepts a scalar seed, but was given an array of shape "
                        f"{np.shape(seed)} != (). Use jax.vmap for batching")
    if isinstance(seed, (bool, np.bool_)):
        seed = int(seed)
    if isinstance(seed, int):  # (as JAX: via int64, truncated to 32 bits when x64 is off)
        value = int(np.int64(seed))
        hi = (value >> 32) & 0xFFFFFFFF if dtypes.x64_enabled() else 0
        return lax.concatenate([np.array([hi], _U32), np.array([value & 0xFFFFFFFF], _U32)], 0)
    if not _is_arraylike(seed) and np.ndim(seed):
        raise TypeError(f"{name} accepts a scalar seed, but was given an array of shape "
                        f"{np.shape(seed)} != (). Use jax.vmap for batching")
    import ember.numpy as jnp
    seed = jnp.asarray(seed)
    if seed.dtype == np.bool_:
        seed = seed.astype(dtypes.default_int_dtype())
    if not dtypes.issubdtype(seed.dtype, np.integer):
        raise TypeError(f"PRNG key seed must be an integer; got {seed!r}")
    if seed.dtype.itemsize == 8:
        hi = lax.convert_element_type(lax.shift_right_logical(seed, np.array(32, seed.dtype)),
                                      _U32)
    else:
        hi = lax.full((), 0, _U32)
    lo = lax.convert_element_type(seed, _U32)
    return lax.concatenate([lax.expand_dims(hi, (0,)), lax.expand_dims(lo, (0,))], 0)


def PRNGKey(seed: int | Any, *, impl: str | None = None) -> Any:  # noqa: N802 (JAX's name)
    """A legacy PRNG key (``uint32[2]``) from an integer seed.

    Args:
        seed: a 64- or 32-bit integer (a Python int, NumPy integer or integer array scalar,
            traced values included).
        impl: only ``'threefry2x32'`` (the default) is supported.

    Returns:
        The key data ``[seed >> 32, seed & 0xFFFFFFFF]`` as uint32 (the high word is 0 for
        Python ints when x64 is off, as JAX).

    Example:
        >>> random.PRNGKey(42)
        Array([ 0, 42], dtype=uint32)
    """
    _check_impl(impl)
    return _seed_data("PRNGKey", seed)


def _check_impl(impl: Any) -> None:
    if impl is None or isinstance(impl, PRNGKeyDtype) or impl == IMPL_NAME:
        return
    raise ValueError(f'unrecognized PRNG implementation "{impl}". Did you mean one of: '
                     f'"{IMPL_NAME}"? (ember supports only threefry2x32)')


def _impl_or_dtype(name: str, impl: Any, dtype: Any) -> None:
    if impl is not None and dtype is not None:
        raise ValueError(f"Cannot specify both `impl` and `dtype` arguments to "
                         f"jax.random.{name}")
    _check_impl(dtype if impl is None else impl)


def key(seed: int | Any, *, impl: str | None = None, dtype: Any = None) -> PRNGKeyArray:
    """A typed PRNG key (dtype ``key<fry>``, shape ``()``) from an integer seed.

    Every ``ember.random`` function takes typed keys as well as legacy ``PRNGKey`` data and
    draws the same bits from ``key(s)`` as from ``PRNGKey(s)``.

    Args:
        seed: a 64- or 32-bit integer (Python int, NumPy integer or traced integer scalar).
        impl: only ``'threefry2x32'`` (the default) is supported.
        dtype: alternatively, the key dtype (``key_dtype()``) or its impl name.

    Returns:
        A scalar key array.

    Example:
        >>> k = random.key(0)
        >>> k.shape, k.dtype
        ((), key<fry>)
    """
    _impl_or_dtype("key", impl, dtype)
    return PRNGKeyArray(_seed_data("key", seed))


def key_dtype(impl: Any = None) -> PRNGKeyDtype:
    """The dtype of typed keys of ``impl`` (only ``'threefry2x32'``): ``key<fry>``.

    Example:
        >>> random.key_dtype()
        key<fry>
    """
    _check_impl(impl)
    return KEY_DTYPE


def wrap_key_data(key_bits_array: Any, *, impl: Any = None, dtype: Any = None) -> PRNGKeyArray:
    """Typed keys around ``uint32[..., 2]`` key data (the inverse of :func:`key_data`).

    Args:
        key_bits_array: uint32 key data with trailing dimension 2.
        impl: only ``'threefry2x32'`` (the default).
        dtype: alternatively, the key dtype or its impl name.

    Returns:
        A key array of shape ``key_bits_array.shape[:-1]``.

    Example:
        >>> keys = random.wrap_key_data(random.split(random.PRNGKey(0), 3))
        >>> keys.shape
        (3,)
    """
    _impl_or_dtype("wrap_key_data", impl, dtype)
    if isinstance(key_bits_array, PRNGKeyArray):
        raise TypeError("wrap_key_data accepts uint32 key data, but was given a PRNG key "
                        "array (it is already typed; use key_data to unwrap it).")
    return PRNGKeyArray(check_key("wrap_key_data", key_bits_array, allow_batched=True))


def key_impl(keys: Any) -> str:
    """The PRNG implementation of keys (typed or legacy): ``'threefry2x32'``.

    Example:
        >>> random.key_impl(random.key(0))
        'threefry2x32'
    """
    check_key("key_impl", keys, allow_batched=True)
    return IMPL_NAME


def clone(key: Any) -> Any:
    """A copy of a key for reuse (the identity outside JAX's key-reuse checking).

    Example:
        >>> k2 = random.clone(random.key(0))
    """
    data = check_key("clone", key, allow_batched=True)
    return key if isinstance(key, PRNGKeyArray) else data


def _rewrap(like: Any, data: Any) -> Any:
    return PRNGKeyArray(data) if isinstance(like, PRNGKeyArray) else data


# ------------------------------------------------------------------ split, fold_in, bits

def split_data(key: Any, shape: tuple[int, ...]) -> Any:
    """``shape`` new keys from one key's data: ``uint32[*shape, 2]``."""
    k1, k2 = _words(key)
    hi, lo = iota_2x32_shape(shape)
    b1, b2 = threefry2x32(k1, k2, hi, lo)
    n = len(shape)
    return lax.concatenate([lax.expand_dims(b1, (n,)), lax.expand_dims(b2, (n,))], n)


def split(key: Any, num: int | Sequence[int] = 2) -> Any:
    """Splits a key into ``num`` new keys (a new leading axis, or axes when ``num`` is a shape).

    Args:
        key: a PRNG key (``PRNGKey``, ``split``, ``fold_in``).
        num: a non-negative int or a tuple of ints (the shape of keys). Default 2.

    Returns:
        The keys, ``uint32[*num, 2]``.

    Example:
        >>> key, subkey = random.split(random.PRNGKey(0))
    """
    data = check_key("split", key)
    shape = tuple(num) if isinstance(num, Sequence) else (num,)
    return _rewrap(key, split_data(data, canonical_shape(shape, "num")))


def fold_in(key: Any, data: Any) -> Any:
    """Folds a 32-bit integer into a key, giving a new key.

    Args:
        key: a PRNG key.
        data: a scalar integer (converted to uint32).

    Returns:
        A new key, a deterministic function of both inputs.

    Example:
        >>> step_key = random.fold_in(random.PRNGKey(0), 7)
    """
    import ember.numpy as jnp
    typed = key
    key = check_key("fold_in", key)
    if np.ndim(data):
        raise TypeError("fold_in accepts a scalar, but was given an array of"
                        f"shape {np.shape(data)} != (). Use jax.vmap for batching.")
    data = jnp.asarray(data, dtype=_U32)
    k1, k2 = _words(key)
    b1, b2 = threefry2x32(k1, k2, lax.full((), 0, _U32), data)
    return _rewrap(typed, lax.concatenate([lax.expand_dims(b1, (0,)),
                                           lax.expand_dims(b2, (0,))], 0))


def random_bits(key: Any, bit_width: int, shape: tuple[int, ...]) -> Any:
    """Uniform random bits ``uint{bit_width}[shape]`` from one key's data."""
    k1, k2 = _words(key)
    hi, lo = iota_2x32_shape(shape)
    b1, b2 = threefry2x32(k1, k2, hi, lo)
    dtype = UINT_DTYPES[bit_width]
    if bit_width == 64:
        hi64 = lax.convert_element_type(b1, dtype)
        lo64 = lax.convert_element_type(b2, dtype)
        return lax.bitwise_or(lax.shift_left(hi64, lax.full(shape, 32, dtype)), lo64)
    out = lax.bitwise_xor(b1, b2)
    return out if bit_width == 32 else lax.convert_element_type(out, dtype)


def user_dtype(dtype: Any, default: Any) -> np.dtype:
    """A user's dtype argument (``None``: ``default``, a Python type) canonicalized."""
    return dtypes.canonicalize_dtype(default if dtype is None else dtype)


def bits(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Uniform random bits as unsigned integers.

    Args:
        key: a PRNG key.
        shape: the result shape. Default ``()``.
        dtype: an unsigned integer dtype (default uint32, uint64 under x64).

    Returns:
        A ``dtype`` array of ``shape``.

    Example:
        >>> random.bits(random.PRNGKey(0), (2,))
        Array([4070204313, 3365278619], dtype=uint32)
    """
    key = check_key("bits", key)
    dtype = user_dtype(dtype, dtypes.default_uint_dtype())
    if not dtypes.issubdtype(dtype, np.unsignedinteger):
        raise ValueError("dtype argument to `bits` must be an unsigned int dtype, "
                         f"got {dtype}")
    return random_bits(key, dtype.itemsize * 8, canonical_shape(shape))


def key_data(keys: Any) -> Any:
    """The uint32 data ``[..., 2]`` of PRNG keys (legacy keys are their own data).

    Example:
        >>> random.key_data(random.PRNGKey(1))
        Array([0, 1], dtype=uint32)
    """
    return check_key("key_data", keys, allow_batched=True)


__all__ = ["PRNGKey", "bits", "clone", "fold_in", "key", "key_data",
           "key_dtype", "key_impl", "split", "wrap_key_data"]
