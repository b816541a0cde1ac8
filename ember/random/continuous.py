"""Continuous samplers built on ``uniform``/``normal`` (JAX's formulas, see ``distributions``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import dtypes, lax
from ember.numpy._eager_jit import jit_when_large
from ember.random.distributions import (
    _broadcast_shapes,
    _check_arraylike,
    _check_shape,
    _float_dtype,
    _jnp,
    _uniform,
    uniform,
)
from ember.random.keys import canonical_shape, check_key, split_data, user_dtype


def _safe_cast_check(name: str, dtype: Any, *args: Any) -> None:
    # JAX refuses parameters whose dtype cannot be cast safely to the sample dtype.
    for a in args:
        if dtypes.is_python_scalar(a):
            continue
        adt = dtypes.dtype(a)
        if not dtypes.can_cast(adt, dtype, "safe") and not (
                dtypes.issubdtype(adt, np.integer) and dtypes.issubdtype(dtype, np.floating)):
            from ember.dtypes import TypePromotionError
            raise TypePromotionError(f"In arguments to {name}, cannot safely cast argument of "
                                     f"type {adt} to {dtype}")


def _normal_real(key, shape, dtype):
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = _uniform(key, shape, dtype, np.array(lo, dtype), np.array(1.0, dtype))
    return lax.mul(lax.full(shape, np.sqrt(2), dtype), lax.erf_inv(u))


@jit_when_large('shape', 'dtype', shape="shape")
def normal(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Standard normal samples (real, or complex with unit variance).

    Args:
        key: a PRNG key.
        shape: the result shape. Default ``()``.
        dtype: a float or complex dtype (default float32, float64 under x64).

    Returns:
        A ``dtype`` array of ``shape``.

    Example:
        >>> random.normal(random.PRNGKey(0), (2,))
    """
    key = check_key("normal", key)
    shape = canonical_shape(shape)
    dtype = _float_dtype("normal", dtype, np.inexact, "a float or complex")
    return _normal(key, shape, dtype)


def _normal(key, shape, dtype):
    if dtypes.issubdtype(dtype, np.complexfloating):
        ks = split_data(key, (2,))
        real = np.array(0, dtype).real.dtype
        re = _normal_real(ks[0], shape, real).astype(dtype)
        im = _normal_real(ks[1], shape, real).astype(dtype)
        return (re + 1j * im) / np.array(np.sqrt(2), dtype)
    return _normal_real(key, shape, dtype)


@jit_when_large('shape', 'dtype', shape="shape")
def truncated_normal(key: Any, lower: Any, upper: Any, shape: Sequence[int] | None = None,
                     dtype: Any = None) -> Any:
    """Normal samples truncated to ``(lower, upper)``.

    Args:
        key: a PRNG key.
        lower, upper: the bounds, broadcast to ``shape``.
        shape: the result shape (default: the bounds' broadcast shape).
        dtype: a float dtype.

    Example:
        >>> random.truncated_normal(random.PRNGKey(0), -1.0, 1.0, (3,))
    """
    jnp = _jnp()
    if shape is not None:
        shape = canonical_shape(shape)
    key = check_key("truncated_normal", key)
    dtype = _float_dtype("truncated_normal", dtype)
    if shape is None:
        shape = tuple(np.broadcast_shapes(np.shape(lower), np.shape(upper)))
    else:
        _check_shape("truncated_normal", shape, np.shape(lower), np.shape(upper))
    sqrt2 = np.array(np.sqrt(2), dtype)
    lower = lax.convert_element_type(lower, dtype)
    upper = lax.convert_element_type(upper, dtype)
    a = lax.erf(lower / sqrt2)
    b = lax.erf(upper / sqrt2)
    u = _uniform(key, shape, dtype, a, b)
    out = sqrt2 * lax.erf_inv(u)
    inf = np.array(np.inf, dtype)
    return jnp.clip(out, lax.nextafter(lax.stop_gradient(lower), inf),
                    lax.nextafter(lax.stop_gradient(upper), -inf))


def _simple(name: str, body):
    def sampler(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
        key = check_key(name, key)
        dtype = _float_dtype(name, dtype)
        shape = canonical_shape(shape)
        _check_shape(name, shape)
        return body(key, shape, dtype)
    sampler.__name__ = sampler.__qualname__ = name
    return sampler


def _exponential(key, shape, dtype):
    return lax.neg(lax.log1p(lax.neg(_uniform(key, shape, dtype, 0.0, 1.0))))


def _laplace(key, shape, dtype):
    u = _uniform(key, shape, dtype, -1.0 + dtypes.finfo(dtype).epsneg, 1.0)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


def _logistic(key, shape, dtype):
    x = _uniform(key, shape, dtype, dtypes.finfo(dtype).tiny, 1.0)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


def _cauchy(key, shape, dtype):
    u = _uniform(key, shape, dtype, dtypes.finfo(dtype).eps, 1.0)
    return lax.tan(lax.mul(np.array(np.pi, dtype), lax.sub(u, np.array(0.5, dtype))))


exponential = _simple("exponential", _exponential)
exponential.__doc__ = """Exponential samples (rate 1): ``-log1p(-u)``.

    Example:
        >>> random.exponential(random.PRNGKey(0), (3,))
    """
laplace = _simple("laplace", _laplace)
laplace.__doc__ = """Laplace samples (location 0, scale 1).

    Example:
        >>> random.laplace(random.PRNGKey(0), (3,))
    """
logistic = _simple("logistic", _logistic)
logistic.__doc__ = """Logistic samples: ``log(u) - log1p(-u)``.

    Example:
        >>> random.logistic(random.PRNGKey(0), (3,))
    """
cauchy = _simple("cauchy", _cauchy)
cauchy.__doc__ = """Standard Cauchy samples: ``tan(pi * (u - 1/2))``.

    Example:
        >>> random.cauchy(random.PRNGKey(0), (3,))
    """


@jit_when_large('shape', 'dtype', 'mode', shape="shape")
def gumbel(key: Any, shape: Sequence[int] = (), dtype: Any = None,
           mode: str | None = None) -> Any:
    """Standard Gumbel samples: ``-log(-log(u))``.

    Args:
        key: a PRNG key.
        shape: the result shape. Default ``()``.
        dtype: a float dtype.
        mode: ``'low'`` (default) or ``'high'`` (finer resolution near 1).

    Example:
        >>> random.gumbel(random.PRNGKey(0), (3,))
    """
    jnp = _jnp()
    key = check_key("gumbel", key)
    dtype = _float_dtype("gumbel", dtype)
    shape = canonical_shape(shape)
    if mode is None:
        mode = "low"
    if mode not in ("highest", "high", "low"):
        raise ValueError(f"Must provide valid mode for gumbel got: {mode}")
    if mode == "highest":
        raise NotImplementedError("gumbel: mode='highest' is not supported by ember yet")
    info = dtypes.finfo(dtype)
    if mode == "high":
        u = _uniform(key, (2, *shape), dtype, 0.0, 1.0)
        high, low = u[0], u[1]
        x = jnp.where(high >= 0.5, high,
                      high + np.array(2.0 ** -info.nmant, dtype) * low + np.array(info.tiny, dtype))
        return -jnp.log(-jnp.log1p(-x))
    return -jnp.log(-jnp.log(_uniform(key, shape, dtype, info.tiny, 1.0)))


def categorical(key: Any, logits: Any, axis: int = -1, shape: Sequence[int] | None = None,
                replace: bool = True, mode: str | None = None) -> Any:
    """Samples of categories with unnormalized log-probabilities ``logits`` along ``axis``.

    Args:
        key: a PRNG key.
        logits: log-probabilities (up to a constant).
        axis: the categories' axis. Default -1.
        shape: the result shape: a prefix of sample dims followed by ``logits``' batch shape.
        replace: draw with replacement. Default True.
        mode: the gumbel mode.

    Returns:
        Integer indices into ``axis``.

    Example:
        >>> random.categorical(random.PRNGKey(0), jnp.log(jnp.array([0.2, 0.8])), shape=(4,))
    """
    jnp = _jnp()
    key = check_key("categorical", key)
    _check_arraylike("categorical", logits)
    logits = jnp.asarray(logits)
    batch_shape = tuple(np.delete(logits.shape, axis))
    if shape is None:
        shape = batch_shape
    else:
        shape = canonical_shape(shape)
        _check_shape("categorical", shape, batch_shape)
    prefix = shape[:len(shape) - len(batch_shape)]
    if replace:
        if axis >= 0:
            axis -= logits.ndim
        lshape = list(shape[len(shape) - len(batch_shape):])
        lshape.insert(axis % logits.ndim, logits.shape[axis])
        g = gumbel(key, (*prefix, *lshape), logits.dtype, mode=mode)
        return jnp.argmax(g + lax.expand_dims(logits, tuple(range(len(prefix)))), axis=axis)
    logits = logits + gumbel(key, logits.shape, logits.dtype, mode=mode)
    k = math.prod(prefix)
    if k > logits.shape[axis]:
        raise ValueError(f"Number of samples without replacement ({k}) cannot exceed number "
                         f"of categories ({logits.shape[axis]}).")
    _, idx = lax.top_k(jnp.moveaxis(logits, axis, -1), k)
    return lax.reshape(idx, shape, (idx.ndim - 1, *range(idx.ndim - 1)))


def multivariate_normal(key: Any, mean: Any, cov: Any, shape: Sequence[int] | None = None,
                        dtype: Any = None, method: str = "cholesky") -> Any:
    """Multivariate normal samples ``mean + factor @ z`` (factor from ``method``).

    Args:
        key: a PRNG key.
        mean: ``(..., n)`` means.
        cov: ``(..., n, n)`` covariances.
        shape: the batch shape (default: the broadcast batch shapes of mean and cov).
        dtype: a float dtype (default: mean's).
        method: ``'cholesky'`` (default), ``'eigh'`` or ``'svd'``.

    Example:
        >>> random.multivariate_normal(random.PRNGKey(0), jnp.zeros(2), jnp.eye(2))
    """
    jnp = _jnp()
    key = check_key("multivariate_normal", key)
    mean, cov = jnp.asarray(mean), jnp.asarray(cov)
    common = dtypes.to_inexact_dtype(dtypes.result_type(mean, cov))
    mean, cov = mean.astype(common), cov.astype(common)
    if method not in {"svd", "eigh", "cholesky"}:
        raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
    dtype = mean.dtype if dtype is None else user_dtype(dtype, float)
    if not dtypes.issubdtype(dtype, np.floating):
        raise ValueError("dtype argument to `multivariate_normal` must be a float dtype, "
                         f"got {dtype}")
    if not mean.ndim >= 1:
        raise ValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == "
                         f"{mean.ndim}")
    if not cov.ndim >= 2:
        raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == "
                         f"{cov.ndim}")
    n = mean.shape[-1]
    if cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, "
                         f"but got cov.shape == {cov.shape}.")
    if shape is None:
        shape = tuple(np.broadcast_shapes(mean.shape[:-1], cov.shape[:-2]))
    else:
        shape = canonical_shape(shape)
        _check_shape("normal", shape, mean.shape[:-1], cov.shape[:-2])
    from ember.numpy import linalg  # (the linalg worker's module)
    if method == "svd":
        u, s, _ = linalg.svd(cov)
        factor = u * jnp.sqrt(s[..., None, :])
    elif method == "eigh":
        w, v = linalg.eigh(cov)
        factor = v * jnp.sqrt(w[..., None, :])
    else:
        factor = linalg.cholesky(cov)
    z = normal(key, shape + mean.shape[-1:], dtype)
    return mean + jnp.einsum("...ij,...j->...i", factor, z)


# ------------------------------------------------------- transforms of uniform/normal

def _params(name, key, dtype, shape, *params, default=float):
    key = check_key(name, key)
    dtype = _float_dtype(name, user_dtype(dtype, default))
    shape = _broadcast_shapes(name, shape, *params)
    _safe_cast_check(name, dtype, *params)
    return key, dtype, shape


def pareto(key: Any, b: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Pareto samples with shape parameter ``b``: ``exp(e / b)``, ``e`` exponential.

    Example:
        >>> random.pareto(random.PRNGKey(0), 3.0, (2,))
    """
    key, dtype, shape = _params("pareto", key, dtype, shape, b)
    b = lax.convert_element_type(b, dtype)
    return lax.exp(_exponential(key, shape, dtype) / b)


def rayleigh(key: Any, scale: Any, shape: Sequence[int] | None = None,
             dtype: Any = None) -> Any:
    """Rayleigh samples: ``scale * sqrt(-2 log u)``.

    Example:
        >>> random.rayleigh(random.PRNGKey(0), 1.0, (2,))
    """
    jnp = _jnp()
    key, dtype, shape = _params("rayleigh", key, dtype, shape, scale)
    u = _uniform(key, shape, dtype, 0.0, 1.0)
    scale = jnp.broadcast_to(jnp.asarray(scale).astype(dtype), shape)
    return lax.mul(scale, lax.sqrt(lax.mul(lax.log(u), lax.full(shape, -2, dtype))))


def wald(key: Any, mean: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Wald (inverse Gaussian) samples with ``mean`` (and scale 1).

    Example:
        >>> random.wald(random.PRNGKey(0), 1.0, (2,))
    """
    jnp = _jnp()
    key, dtype, shape = _params("wald", key, dtype, shape, mean)
    ks = split_data(key, (2,))
    mean = jnp.broadcast_to(jnp.asarray(mean).astype(dtype), shape)
    v = _normal_real(ks[0], shape, dtype)
    z = _uniform(ks[1], shape, dtype, 0.0, 1.0)
    y = lax.integer_pow(v, 2)
    y_sq = lax.integer_pow(y, 2)
    mean_sq = lax.integer_pow(mean, 2)
    sqrt_term = lax.sqrt(4 * mean * y + mean_sq * y_sq)
    x = mean + mean_sq * y / 2 - mean / 2 * sqrt_term
    return lax.select(lax.le(z, mean / (mean + x)), x, mean_sq / x)


def triangular(key: Any, left: Any, mode: Any, right: Any,
               shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Triangular samples on ``[left, right]`` with peak ``mode``.

    Example:
        >>> random.triangular(random.PRNGKey(0), 0.0, 0.5, 1.0, (2,))
    """
    jnp = _jnp()
    key, dtype, shape = _params("triangular", key, dtype, shape, left, mode, right)
    left, right, mode = (jnp.broadcast_to(lax.convert_element_type(v, dtype), shape)
                         for v in (left, right, mode))
    fc = (mode - left) / (right - left)
    u = _uniform(key, shape, dtype, 0.0, 1.0)
    out1 = left + lax.sqrt(u * (right - left) * (mode - left))
    out2 = right - lax.sqrt((1 - u) * (right - left) * (right - mode))
    return lax.select(u < fc, out1, out2)


_ONE = np.float32(1)


def lognormal(key: Any, sigma: Any = _ONE, shape: Sequence[int] | None = None,
              dtype: Any = None) -> Any:
    """Log-normal samples: ``exp(sigma * normal)``.

    Example:
        >>> random.lognormal(random.PRNGKey(0), 0.5, (2,))
    """
    key = check_key("lognormal", key)
    dtype = _float_dtype("lognormal", dtype, np.inexact, "a float or complex")
    shape = _broadcast_shapes("lognormal", shape, sigma)
    _safe_cast_check("lognormal", dtype, sigma)
    sigma = lax.convert_element_type(sigma, dtype)
    return lax.exp(_normal(key, shape, dtype) * sigma)


def weibull_min(key: Any, scale: Any, concentration: Any, shape: Sequence[int] = (),
                dtype: Any = None) -> Any:
    """Weibull samples: ``(-log1p(-u)) ** (1 / concentration) * scale``.

    Example:
        >>> random.weibull_min(random.PRNGKey(0), 1.0, 2.0, (2,))
    """
    jnp = _jnp()
    key = check_key("weibull_min", key)
    dtype = _float_dtype("weibull_min", dtype)
    shape = canonical_shape(shape)
    u = uniform(key, shape, dtype, 0, 1)
    return jnp.power(-jnp.log1p(-u), 1.0 / concentration) * scale


def maxwell(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Maxwell samples: the norm of 3 standard normals.

    Example:
        >>> random.maxwell(random.PRNGKey(0), (2,))
    """
    jnp = _jnp()
    key = check_key("maxwell", key)
    dtype = _float_dtype("maxwell", dtype)
    shape = canonical_shape(shape)
    z = _normal_real(key, shape + (3,), dtype)
    return jnp.sqrt(jnp.sum(z * z, axis=-1))


def double_sided_maxwell(key: Any, loc: Any, scale: Any, shape: Sequence[int] = (),
                         dtype: Any = None) -> Any:
    """Double-sided Maxwell samples: a Maxwell sample with a random sign, scaled and shifted.

    Example:
        >>> random.double_sided_maxwell(random.PRNGKey(0), 0.0, 1.0, (2,))
    """
    key = check_key("double_sided_maxwell", key)
    dtype = _float_dtype("double_sided_maxwell", dtype)
    shape = canonical_shape(shape)
    pshape = tuple(np.broadcast_shapes(np.shape(loc), np.shape(scale)))
    if not shape:
        shape = pshape
    shape = shape + pshape
    ks = split_data(key, (2,))
    from ember.random.distributions import rademacher
    m = maxwell(ks[0], shape, dtype)
    sign = rademacher(ks[1], shape, dtype)
    return sign * m * scale + loc


def geometric(key: Any, p: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Geometric samples (trials until the first success, >= 1).

    Example:
        >>> random.geometric(random.PRNGKey(0), 0.3, (2,))
    """
    jnp = _jnp()
    key = check_key("geometric", key)
    dtype = user_dtype(dtype, int)
    if not dtypes.issubdtype(dtype, np.integer):
        raise ValueError(f"dtype argument to `geometric` must be an int dtype, got {dtype}")
    shape = _broadcast_shapes("geometric", shape, p)
    _check_arraylike("geometric", p)
    p = jnp.asarray(p)
    if not dtypes.issubdtype(p.dtype, np.inexact):
        p = p.astype(dtypes.to_inexact_dtype(p.dtype))
    u = _uniform(key, shape, p.dtype, 0.0, 1.0)
    u = jnp.where(u == 0, 1, u)
    log_one_minus_p = jnp.broadcast_to(lax.log1p(-p), shape)
    g = lax.floor(lax.div(lax.log(u), log_one_minus_p)) + 1
    return g.astype(dtype)


__all__ = ["categorical", "cauchy", "double_sided_maxwell", "exponential", "geometric",
           "gumbel", "laplace", "lognormal", "logistic", "maxwell", "multivariate_normal",
           "normal", "pareto", "rayleigh", "triangular", "truncated_normal", "wald",
           "weibull_min"]
