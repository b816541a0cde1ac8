"""The exponential distribution (``jax.scipy.stats.expon``): start ``loc``, mean
``loc + scale``."""

from __future__ import annotations

from ember import numpy as jnp
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the exponential density; -inf below ``loc``.

    Example:
        >>> ember.scipy.stats.expon.logpdf(2.)  # -2.0
    """
    x, loc, scale = promote_args_inexact("expon.logpdf", x, loc, scale)
    out = -((x - loc) / scale + jnp.log(scale))
    return jnp.where(x < loc, -jnp.inf, out)


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Exponential density (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.expon.pdf(0.)  # 1.0
    """
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Exponential CDF, ``1 - exp(-(x - loc)/scale)`` (0 below ``loc``).

    Example:
        >>> ember.scipy.stats.expon.cdf(1.)  # 0.63212055
    """
    x, loc, scale = promote_args_inexact("expon.cdf", x, loc, scale)
    t = (loc - x) / scale
    return jnp.where(x < loc, jnp.zeros_like(t), -jnp.expm1(t))


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the exponential survival function, ``-(x - loc)/scale`` (0 below ``loc``).

    Example:
        >>> ember.scipy.stats.expon.logsf(2.)  # -2.0
    """
    x, loc, scale = promote_args_inexact("expon.sf", x, loc, scale)
    t = (loc - x) / scale
    return jnp.where(x < loc, jnp.zeros_like(t), t)


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Exponential survival function (``exp(logsf)``).

    Example:
        >>> ember.scipy.stats.expon.sf(1.)  # 0.36787945
    """
    return jnp.exp(logsf(x, loc, scale))


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the exponential CDF, ``log1p(-sf)``.

    Example:
        >>> ember.scipy.stats.expon.logcdf(1.)  # -0.45867515
    """
    return jnp.log1p(-sf(x, loc, scale))


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Exponential quantile function, ``loc - scale log1p(-q)``; NaN outside ``[0, 1]``.

    Example:
        >>> ember.scipy.stats.expon.ppf(0.5)  # log(2) = 0.6931472
    """
    q, loc, scale = promote_args_inexact("expon.ppf", q, loc, scale)
    out = loc - scale * jnp.log1p(-q)
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), jnp.nan, out)
