"""``ember.nn.initializers``: parameter initializers with ``jax.nn.initializers``' API.

Every initializer is a function ``init(key, shape, dtype=...)`` (made by a factory such as
``glorot_uniform()``), drawing from ``ember.random`` with the same formulas as JAX so that
the same key gives JAX's values (bit for bit for uniform-based ones, to ulps otherwise).

Example:
    >>> init = initializers.glorot_uniform()
    >>> w = init(random.key(0), (3, 4))
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import dtypes, random
from ember.random.keys import canonical_shape

Initializer = Callable[..., Any]
Axes = int | Sequence[int]

# The standard deviation of a unit normal truncated to [-2, 2] (real) and of the complex
# analogue used below: dividing by it restores the requested variance.
_TRUNC_STD_REAL = 0.87962566103423978
_TRUNC_STD_COMPLEX = 0.95311164380491208


def _jnp():
    import ember.numpy as jnp
    return jnp


def _dtype(dtype: Any) -> Any:
    return dtypes.default_float_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)


def zeros(key: Any, shape: Sequence[int], dtype: Any = None) -> Any:
    """An initializer returning zeros (``key`` is unused).

    Example:
        >>> initializers.zeros(random.key(0), (2, 3))
    """
    return _jnp().zeros(shape, _dtype(dtype))


def ones(key: Any, shape: Sequence[int], dtype: Any = None) -> Any:
    """An initializer returning ones (``key`` is unused).

    Example:
        >>> initializers.ones(random.key(0), (2, 3))
    """
    return _jnp().ones(shape, _dtype(dtype))


def constant(value: Any, dtype: Any = None) -> Initializer:
    """An initializer filling with ``value``.

    Example:
        >>> initializers.constant(-7.0)(random.key(0), (2,))
        Array([-7., -7.], dtype=float32)
    """
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        return _jnp().full(shape, value, dtype=_dtype(dtype))
    return init


def uniform(scale: Any = 1e-2, dtype: Any = None) -> Initializer:
    """An initializer drawing uniformly from ``[0, scale)``.

    Example:
        >>> initializers.uniform(10.0)(random.key(0), (2, 3))
    """
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dtype = _dtype(dtype)
        return random.uniform(key, shape, dtype) * _jnp().array(scale, dtype)
    return init


def normal(stddev: Any = 1e-2, dtype: Any = None) -> Initializer:
    """An initializer drawing from a centered normal with standard deviation ``stddev``.

    Example:
        >>> initializers.normal(5.0)(random.key(0), (2, 3))
    """
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dtype = _dtype(dtype)
        return random.normal(key, shape, dtype) * _jnp().array(stddev, dtype)
    return init


def truncated_normal(stddev: Any = 1e-2, dtype: Any = None, lower: Any = -2.0,
                     upper: Any = 2.0) -> Initializer:
    """An initializer drawing ``stddev * z`` for ``z`` normal truncated to ``(lower, upper)``.

    Example:
        >>> initializers.truncated_normal(5.0)(random.key(0), (2, 3))
    """
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dtype = _dtype(dtype)
        z = random.truncated_normal(key, lower, upper, shape, dtype)
        return z * _jnp().array(stddev, dtype)
    return init


def _size(shape: tuple[int, ...], axes: Axes) -> int:
    return shape[axes] if isinstance(axes, int) else math.prod(shape[i] for i in axes)


def _compute_fans(shape: tuple[int, ...], in_axis: Axes = -2, out_axis: Axes = -1,
                  batch_axis: Axes = ()) -> tuple[float, float]:
    """(fan_in, fan_out): the in/out sizes times the receptive field (the other axes)."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"Can't compute input and output sizes of a {len(shape)}-dimensional "
                         "weights tensor with default in_axis. Must be at least 2D or specify "
                         "in_axis explicitly.")
    in_size, out_size = _size(shape, in_axis), _size(shape, out_axis)
    receptive = math.prod(shape) / in_size / out_size / _size(shape, batch_axis)
    return in_size * receptive, out_size * receptive


def _complex_uniform(key: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    # Uniform on the disk of radius sqrt(2) (unit variance): radius sqrt(2 u), angle 2 pi v.
    jnp = _jnp()
    kr, kt = random.split(key)
    real = np.array(0, dtype).real.dtype
    r = jnp.sqrt(2 * random.uniform(kr, shape, real)).astype(dtype)
    theta = 2 * np.pi * random.uniform(kt, shape, real).astype(dtype)
    return r * jnp.exp(1j * theta)


def _complex_truncated_normal(key: Any, upper: float, shape: tuple[int, ...],
                              dtype: Any) -> Any:
    # A complex normal with modulus truncated to ``upper`` (inverse CDF of the modulus).
    jnp = _jnp()
    kr, kt = random.split(key)
    real = np.array(0, dtype).real.dtype
    t = ((1 - jnp.exp(jnp.array(-upper ** 2, dtype)))
         * random.uniform(kr, shape, real).astype(dtype))
    r = jnp.sqrt(-jnp.log(1 - t))
    theta = 2 * np.pi * random.uniform(kt, shape, real).astype(dtype)
    return r * jnp.exp(1j * theta)


_MODES = ("fan_in", "fan_out", "fan_avg", "fan_geo_avg")
_DISTRIBUTIONS = ("truncated_normal", "normal", "uniform")


def variance_scaling(scale: Any, mode: str, distribution: str, in_axis: Axes = -2,
                     out_axis: Axes = -1, batch_axis: Axes = (),
                     dtype: Any = None) -> Initializer:
    """An initializer whose samples have variance ``scale / n`` (``n`` set by ``mode``).

    Args:
        scale: the variance scale.
        mode: ``'fan_in'``, ``'fan_out'``, ``'fan_avg'`` or ``'fan_geo_avg'``: which fan
            (computed with ``in_axis``/``out_axis``/``batch_axis``) is ``n``.
        distribution: ``'truncated_normal'`` (to two standard deviations, rescaled),
            ``'normal'`` or ``'uniform'`` (complex dtypes: their complex analogues).
        in_axis, out_axis: the input and output axes (or sequences of axes) of the weights.
        batch_axis: axes not counted in the fans.
        dtype: the default dtype of the initializer.

    Example:
        >>> init = initializers.variance_scaling(2.0, "fan_in", "truncated_normal")
        >>> w = init(random.key(0), (3, 4))
    """
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        jnp = _jnp()
        shape = canonical_shape(shape)
        dtype = _dtype(dtype)
        fan_in, fan_out = _compute_fans(shape, in_axis, out_axis, batch_axis)
        denominators = {"fan_in": fan_in, "fan_out": fan_out,
                        "fan_avg": (fan_in + fan_out) / 2,
                        "fan_geo_avg": (fan_in * fan_out) ** 0.5}
        if mode not in denominators:
            raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
        variance = jnp.array(scale / denominators[mode], dtype=dtype)
        real = dtypes.issubdtype(dtype, np.floating)
        if distribution == "truncated_normal":
            if real:
                stddev = jnp.sqrt(variance) / jnp.array(_TRUNC_STD_REAL, dtype)
                return random.truncated_normal(key, -2, 2, shape, dtype) * stddev
            stddev = jnp.sqrt(variance) / jnp.array(_TRUNC_STD_COMPLEX, dtype)
            return _complex_truncated_normal(key, 2, shape, dtype) * stddev
        if distribution == "normal":
            return random.normal(key, shape, dtype) * jnp.sqrt(variance)
        if distribution == "uniform":
            if real:
                return random.uniform(key, shape, dtype, -1) * jnp.sqrt(3 * variance)
            return _complex_uniform(key, shape, dtype) * jnp.sqrt(variance)
        raise ValueError(f"invalid distribution for variance scaling initializer: "
                         f"{distribution}")
    return init


def _preset(name: str, scale: float, mode: str, distribution: str, doc: str):
    def factory(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                dtype: Any = None) -> Initializer:
        return variance_scaling(scale, mode, distribution, in_axis=in_axis,
                                out_axis=out_axis, batch_axis=batch_axis, dtype=dtype)
    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = (f"{doc}: ``variance_scaling({scale}, {mode!r}, {distribution!r})``."
                       f"\n\n    Example:\n        >>> w = initializers.{name}()"
                       "(random.key(0), (3, 4))\n    ")
    return factory


glorot_uniform = _preset("glorot_uniform", 1.0, "fan_avg", "uniform", "Glorot/Xavier uniform")
glorot_normal = _preset("glorot_normal", 1.0, "fan_avg", "truncated_normal",
                        "Glorot/Xavier normal")
lecun_uniform = _preset("lecun_uniform", 1.0, "fan_in", "uniform", "LeCun uniform")
lecun_normal = _preset("lecun_normal", 1.0, "fan_in", "truncated_normal", "LeCun normal")
he_uniform = _preset("he_uniform", 2.0, "fan_in", "uniform", "He/Kaiming uniform")
he_normal = _preset("he_normal", 2.0, "fan_in", "truncated_normal", "He/Kaiming normal")
xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


def orthogonal(scale: Any = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """An initializer of (semi-)orthogonal matrices: ``column_axis`` against all other axes.

    Example:
        >>> w = initializers.orthogonal()(random.key(0), (3, 3))
    """
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        jnp = _jnp()
        shape = canonical_shape(shape)
        dtype = _dtype(dtype)
        if len(shape) < 2:
            raise ValueError("orthogonal initializer requires at least a 2D shape")
        if any(d == 0 for d in shape):
            return jnp.zeros(shape, dtype=dtype)
        n_cols = shape[column_axis]
        n_rows = math.prod(shape) // n_cols
        q = random.orthogonal(key, n_rows, (), dtype, n_cols)
        q = jnp.reshape(q, tuple(np.delete(shape, column_axis)) + (n_cols,))
        return jnp.array(scale, dtype) * jnp.moveaxis(q, -1, column_axis)
    return init


def delta_orthogonal(scale: Any = 1.0, column_axis: int = -1,
                     dtype: Any = None) -> Initializer:
    """An initializer for 1-3 d convolution kernels: an orthogonal matrix at the center tap.

    The kernel shape is ``(*spatial, fan_in, fan_out)`` (3 to 5 dimensions, fan_in <= fan_out);
    every other tap is zero (Xiao et al. 2018).

    Example:
        >>> w = initializers.delta_orthogonal()(random.key(0), (3, 3, 4))
    """
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        jnp = _jnp()
        shape = canonical_shape(shape)
        dtype = _dtype(dtype)
        if len(shape) not in (3, 4, 5):
            raise ValueError("Delta orthogonal initializer requires a 3D, 4D or 5D shape.")
        if shape[-1] < shape[-2]:
            raise ValueError("`fan_in` must be less or equal than `fan_out`. ")
        center = orthogonal(scale=scale, column_axis=column_axis, dtype=dtype)(key, shape[-2:])
        taps = tuple((k - 1) // 2 for k in shape[:-2])
        return jnp.zeros(shape, dtype=dtype).at[(*taps, ...)].set(center)
    return init


__all__ = ["constant", "delta_orthogonal", "glorot_normal", "glorot_uniform", "he_normal",
           "he_uniform", "kaiming_normal", "kaiming_uniform", "lecun_normal", "lecun_uniform",
           "normal", "ones", "orthogonal", "truncated_normal", "uniform", "variance_scaling",
           "xavier_normal", "xavier_uniform", "zeros"]
