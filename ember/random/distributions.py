"""Samplers of ``ember.random``: JAX's algorithms on the threefry bits (see ``keys.py``).

Each sampler turns the same bits into values with the same formulas as JAX, so integer and
bit-level results (``bits``, ``randint``, ``permutation``, ``choice``, ``bernoulli``, ...)
equal JAX's exactly and floating results equal them up to the rounding of ember's
transcendental functions (``log``, ``erf_inv``, ...), which may differ from XLA's in the last
bits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import dtypes, lax
from ember.numpy._eager_jit import jit_when_large
from ember.random.keys import (
    UINT_DTYPES,
    canonical_shape,
    check_key,
    random_bits,
    split_data,
    user_dtype,
)

_float = float


def _jnp():
    import ember.numpy as jnp
    return jnp


def _check_shape(name: str, shape: tuple[int, ...], *param_shapes) -> None:
    if param_shapes:
        try:
            out = np.broadcast_shapes(shape, *param_shapes)
        except ValueError:
            raise ValueError("Incompatible shapes for broadcasting: shapes="
                             f"{[shape, *param_shapes]}") from None
        if shape != out:
            raise ValueError(f"{name} parameter shapes must be broadcast-compatible with shape "
                             "argument, and the result of broadcasting the shapes must equal "
                             f"the shape argument, but got result {out} for shape argument "
                             f"{shape}.")


def _broadcast_shapes(name: str, shape: Any, *args: Any) -> tuple[int, ...]:
    arg_shapes = [np.shape(a) for a in args]
    if shape is None:
        return tuple(np.broadcast_shapes(*arg_shapes)) if arg_shapes else ()
    shape = canonical_shape(shape)
    _check_shape(name, shape, *arg_shapes)
    return shape


def _float_dtype(name: str, dtype: Any, kinds: Any = np.floating, what: str = "a float") -> Any:
    dtype = user_dtype(dtype, _float)
    if not dtypes.issubdtype(dtype, kinds):
        raise ValueError(f"dtype argument to `{name}` must be {what} dtype, got {dtype}")
    return dtype


def _const(dtype: Any, value: Any) -> np.ndarray:
    return np.array(value, dtype)


# ------------------------------------------------------------------------------ uniform

def _uniform(key, shape, dtype, minval, maxval):
    minval = lax.broadcast_to_rank(lax.convert_element_type(minval, dtype), len(shape))
    maxval = lax.broadcast_to_rank(lax.convert_element_type(maxval, dtype), len(shape))
    finfo = dtypes.finfo(dtype)
    nbits, nmant = finfo.bits, finfo.nmant
    rng_bits = 8 if nmant < 8 else nbits
    bits = random_bits(key, rng_bits, shape)
    uint = UINT_DTYPES[nbits]
    if rng_bits != nbits:
        bits = lax.convert_element_type(bits, uint)
    # The top nmant bits as the mantissa of a float in [1, 2), minus 1.
    fbits = lax.shift_right_logical(bits, lax.full(shape, rng_bits - nmant, uint))
    fbits = lax.bitwise_or(fbits, lax.full(shape, np.array(1.0, dtype).view(uint), uint))
    floats = lax.sub(lax.bitcast_convert_type(fbits, dtype), lax.full(shape, 1.0, dtype))
    # Each operation rounds to ``dtype`` (float16 too, as JAX 0.10.2's XLA CPU computes it on
    # the x86-64 hosts checked). XLA contracts the float32/float64 multiply-add into one FMA,
    # which ember's backend does not: a bounded float32 sample can differ from JAX's in the
    # last bit (the default [0, 1) bounds are exact either way).
    scaled = lax.add(lax.mul(floats, lax.sub(maxval, minval)), minval)
    return lax.max(minval, scaled)


@jit_when_large('shape', 'dtype', shape="shape")
def uniform(key: Any, shape: Sequence[int] = (), dtype: Any = None, minval: Any = 0.0,
            maxval: Any = 1.0) -> Any:
    """Uniform samples in ``[minval, maxval)``.

    Args:
        key: a PRNG key.
        shape: the result shape. Default ``()``.
        dtype: a float dtype (default float32, float64 under x64).
        minval, maxval: bounds, broadcast to ``shape``.

    Returns:
        A ``dtype`` array of ``shape``.

    Example:
        >>> random.uniform(random.PRNGKey(0), (2,))
        Array([0.947667  , 0.9785799 ], dtype=float32)
    """
    key = check_key("uniform", key)
    dtype = _float_dtype("uniform", dtype)
    shape = canonical_shape(shape)
    _check_shape("uniform", shape)
    return _uniform(key, shape, dtype, minval, maxval)


# ------------------------------------------------------------------------------ integers

def _clip_to(val: Any, dtype: Any) -> Any:
    # val clipped to the range both its dtype and ``dtype`` hold, then converted.
    vi, di = dtypes.iinfo(val.dtype), dtypes.iinfo(dtype)
    lo, hi = max(di.min, vi.min), min(di.max, vi.max)
    return _jnp().clip(val, np.array(lo, val.dtype), np.array(hi, val.dtype)).astype(dtype)


def _randint(key, shape, minval, maxval, dtype):
    jnp = _jnp()
    _check_shape("randint", shape, np.shape(minval), np.shape(maxval))
    minval, maxval = jnp.asarray(minval), jnp.asarray(maxval)
    if not dtypes.issubdtype(minval.dtype, np.integer):
        minval = minval.astype(int)
    if not dtypes.issubdtype(maxval.dtype, np.integer):
        maxval = maxval.astype(int)
    top = _clip_to(jnp.asarray(np.array(dtypes.iinfo(dtype).max, dtype)), maxval.dtype)
    maxval_out_of_range = lax.gt(maxval, top)
    minval = lax.broadcast_to_rank(_clip_to(minval, dtype), len(shape))
    maxval = lax.broadcast_to_rank(_clip_to(maxval, dtype), len(shape))
    nbits = dtypes.iinfo(dtype).bits
    ks = split_data(key, (2,))
    higher, lower = random_bits(ks[0], nbits, shape), random_bits(ks[1], nbits, shape)
    udt = UINT_DTYPES[nbits]
    span = lax.convert_element_type(lax.sub(maxval, minval), udt)
    span = jnp.where(maxval <= minval, np.array(1, udt), span)
    span = jnp.where(maxval_out_of_range & (maxval > minval), span + np.array(1, udt), span)
    # (higher * 2**nbits + lower) mod span, without overflow.
    mult = lax.rem(lax.full_like(span, 2 ** (nbits // 2)), span)
    mult = lax.rem(lax.mul(mult, mult), span)
    offset = lax.add(lax.mul(lax.rem(higher, span), mult), lax.rem(lower, span))
    offset = lax.rem(offset, span)
    return lax.add(minval, lax.convert_element_type(offset, dtype))


@jit_when_large('shape', 'dtype', shape="shape")
def randint(key: Any, shape: Sequence[int], minval: Any, maxval: Any,
            dtype: Any = None) -> Any:
    """Uniform integers in ``[minval, maxval)``.

    Args:
        key: a PRNG key.
        shape: the result shape.
        minval, maxval: bounds (broadcast to ``shape``); clipped to ``dtype``'s range.
        dtype: an integer dtype (default int32, int64 under x64).

    Returns:
        A ``dtype`` array of ``shape``.

    Example:
        >>> random.randint(random.PRNGKey(0), (3,), 0, 10)
    """
    jnp = _jnp()
    key = check_key("randint", key)
    dtype = user_dtype(dtype, int)
    shape = canonical_shape(shape)
    if not dtypes.issubdtype(dtype, np.integer):
        raise TypeError(f"randint only accepts integer dtypes, got {dtype}")
    info = dtypes.iinfo(dtype)
    sampling = dtype
    if info.bits < 32:
        sampling = np.dtype(np.int32)
        minval = jnp.asarray(minval).astype("int32").clip(int(info.min), int(info.max))
        maxval = jnp.asarray(maxval).astype("int32").clip(int(info.min), int(info.max) + 1)
    return _randint(key, shape, minval, maxval, sampling).astype(dtype)


def _shuffle(key, x, axis):
    uint32max = np.iinfo(np.uint32).max
    rounds = int(np.ceil(3 * np.log(max(1, x.size)) / np.log(uint32max)))
    for _ in range(rounds):
        ks = split_data(key, (2,))
        key, sub = ks[0], ks[1]
        _, x = lax.sort_key_val(random_bits(sub, 32, x.shape), x, axis)
    return x


def permutation(key: Any, x: Any, axis: int = 0, independent: bool = False) -> Any:
    """A random permutation of ``arange(x)`` or of ``x`` along ``axis``.

    Args:
        key: a PRNG key.
        x: an int (permute ``arange(x)``) or an array.
        axis: the axis to permute along. Default 0.
        independent: permute each slice along ``axis`` independently. Default False.

    Returns:
        The permuted array.

    Example:
        >>> random.permutation(random.PRNGKey(0), 5)
    """
    from ember import core
    jnp = _jnp()
    key = check_key("permutation", key)
    _check_arraylike("permutation", x)
    ndim = np.ndim(x)
    axis = _canonical_axis(axis, ndim or 1)
    if not ndim:
        if not dtypes.issubdtype(dtypes.dtype(x), np.integer):
            raise TypeError("x must be an integer or at least 1-dimensional")
        r = int(core.concrete_or_error(x, "argument x of jax.random.permutation()"))
        return _shuffle(key, jnp.arange(r), axis)
    x = jnp.asarray(x)
    if independent or ndim == 1:
        return _shuffle(key, x, axis)
    ind = _shuffle(key, jnp.arange(x.shape[axis]), 0)
    return jnp.take(x, ind, axis, unique_indices=True)


def _check_arraylike(name: str, *args: Any) -> None:
    for i, a in enumerate(args):
        if not (hasattr(a, "aval") or isinstance(a, (np.ndarray, np.generic, int, _float,
                                                     complex, bool))):
            raise TypeError(f"{name} requires ndarray or scalar arguments, got "
                            f"{type(a)} at position {i}.")


def _canonical_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        # NumPy's AxisError is both a ValueError (JAX's class) and an IndexError.
        raise np.exceptions.AxisError(int(axis), ndim)
    return axis % ndim


def choice(key: Any, a: Any, shape: Sequence[int] = (), replace: bool = True,
           p: Any = None, axis: int = 0, mode: str | None = None) -> Any:
    """Random samples from ``a`` (or ``arange(a)``), with or without replacement.

    Args:
        key: a PRNG key.
        a: an array, or an int ``n`` for ``arange(n)``.
        shape: the shape of the draws. Default ``()``.
        replace: draw with replacement. Default True.
        p: optional probabilities of the entries of ``a`` along ``axis``.
        axis: the axis of ``a`` to draw from. Default 0.
        mode: the gumbel mode when ``p`` is given without replacement.

    Returns:
        The draws: ``shape`` (``a`` an int) or ``a.shape`` with ``axis`` replaced by ``shape``.

    Example:
        >>> random.choice(random.PRNGKey(0), 10, (3,), replace=False)
    """
    from ember import core
    jnp = _jnp()
    key = check_key("choice", key)
    if not isinstance(shape, Sequence):
        raise TypeError("shape argument of jax.random.choice must be a sequence, "
                        f"got {shape}")
    _check_arraylike("choice", a)
    arr = jnp.asarray(a)
    if arr.ndim == 0:
        n_inputs = int(core.concrete_or_error(a, "The error occurred in jax.random.choice()"))
    else:
        axis = _canonical_axis(axis, arr.ndim)
        n_inputs = arr.shape[axis]
    shape = canonical_shape(shape)
    n_draws = math.prod(shape)
    if n_draws == 0:
        return jnp.zeros(shape, dtype=arr.dtype)
    if n_inputs <= 0:
        raise ValueError("a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"Cannot take a larger sample (size {n_draws}) than population "
                         f"(size {n_inputs}) when 'replace=False'")
    if p is None:
        if replace:
            ind = randint(key, shape, 0, n_inputs)
            result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis)
        else:
            slices = (slice(None),) * axis + (slice(n_draws),)
            result = permutation(key, n_inputs if arr.ndim == 0 else arr, axis)[slices]
    else:
        _check_arraylike("choice", p)
        p_arr = jnp.asarray(p)
        if not dtypes.issubdtype(p_arr.dtype, np.inexact):
            p_arr = p_arr.astype(dtypes.to_inexact_dtype(p_arr.dtype))
        if p_arr.shape != (n_inputs,):
            raise ValueError("p must be None or a 1D vector with the same size as "
                             f"a.shape[axis]. p has shape {p_arr.shape} and a.shape[axis] is "
                             f"{n_inputs}.")
        if replace:
            p_cuml = jnp.cumsum(p_arr)
            r = p_cuml[-1] * (1 - uniform(key, shape, dtype=p_cuml.dtype))
            ind = jnp.searchsorted(p_cuml, r).astype(int)
        else:
            g = gumbel(key, (n_inputs,), dtype=p_arr.dtype, mode=mode) + jnp.log(p_arr)
            ind = lax.top_k(g, n_draws)[1].astype(int)
        result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis)
    out_shape = shape if arr.ndim == 0 else arr.shape[:axis] + shape + arr.shape[axis + 1:]
    return result.reshape(out_shape)


@jit_when_large('shape', 'mode', shape="shape")
def bernoulli(key: Any, p: Any = 0.5, shape: Sequence[int] | None = None,
              mode: str = "low") -> Any:
    """Bernoulli samples: True with probability ``p``.

    Args:
        key: a PRNG key.
        p: probabilities (a float array), broadcast to ``shape``. Default 0.5.
        shape: the result shape (default ``p``'s shape).
        mode: ``'low'`` (default) or ``'high'`` (two uniforms per sample, finer ``p``).

    Returns:
        A bool array.

    Example:
        >>> random.bernoulli(random.PRNGKey(0), 0.3, (4,))
    """
    if shape is not None:
        shape = canonical_shape(shape)
    if mode not in ("high", "low"):
        raise ValueError(f"got mode={mode!r}, expected 'high' or 'low'")
    key = check_key("bernoulli", key)
    dtype = dtypes.dtype(p, canonicalize=True)
    if not dtypes.issubdtype(dtype, np.floating):
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got {dtype}.")
    p = lax.convert_element_type(p, dtype)
    if shape is None:
        shape = np.shape(p)
    else:
        _check_shape("bernoulli", shape, np.shape(p))
    if mode == "high":
        u = _uniform(key, (2, *shape), dtype, 0.0, 1.0)
        u1, u2 = u[0], u[1] * np.array(2.0 ** -dtypes.finfo(dtype).nmant, dtype)
        return u2 < p - u1
    return _uniform(key, shape, dtype, 0.0, 1.0) < p


@jit_when_large('shape', 'dtype', shape="shape")
def rademacher(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Random signs: -1 or +1 with equal probability.

    Example:
        >>> random.rademacher(random.PRNGKey(0), (3,))
    """
    key = check_key("rademacher", key)
    dtype = user_dtype(dtype, int)
    shape = canonical_shape(shape)
    b = bernoulli(key, 0.5, shape).astype(dtype)
    return (2 * b - 1).astype(dtype)


__all__ = ["bernoulli", "choice", "permutation", "rademacher", "randint", "uniform"]


def gumbel(*args, **kwargs):  # (defined in continuous.py; imported lazily to avoid a cycle)
    from ember.random.continuous import gumbel as g
    return g(*args, **kwargs)
