"""The normal distribution (``jax.scipy.stats.norm``): mean ``loc``, standard deviation
``scale``."""

from __future__ import annotations

import math

from ember import lax
from ember import numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the normal probability density at ``x``.

    Args:
        x: points; loc: mean; scale: standard deviation (all broadcast together).

    Example:
        >>> ember.scipy.stats.norm.logpdf(0.)  # -0.9189385 = -log(2 pi) / 2
    """
    x, loc, scale = promote_args_inexact("norm.logpdf", x, loc, scale)
    var = lax.square(scale)
    # -(log(2 pi var) + (x - loc)^2 / var) / 2
    return (jnp.log(var * (2 * math.pi)) + lax.square(x - loc) / var) / -2.0


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Normal probability density at ``x`` (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.norm.pdf(0.)  # 0.3989423
    """
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Normal cumulative distribution function ``P(X <= x)``.

    Example:
        >>> ember.scipy.stats.norm.cdf(0.)  # 0.5
    """
    x, loc, scale = promote_args_inexact("norm.cdf", x, loc, scale)
    return special.ndtr((x - loc) / scale)


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the normal CDF, accurate far into the left tail.

    Example:
        >>> ember.scipy.stats.norm.logcdf(-20.)  # -203.91715
    """
    x, loc, scale = promote_args_inexact("norm.logcdf", x, loc, scale)
    return special.log_ndtr((x - loc) / scale)


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Normal survival function ``P(X > x)``.

    Example:
        >>> ember.scipy.stats.norm.sf(1.)  # 0.15865526
    """
    x, loc, scale = promote_args_inexact("norm.sf", x, loc, scale)
    return cdf(-x, -loc, scale)


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the normal survival function, accurate far into the right tail.

    Example:
        >>> ember.scipy.stats.norm.logsf(20.)  # -203.91715
    """
    x, loc, scale = promote_args_inexact("norm.logsf", x, loc, scale)
    return logcdf(-x, -loc, scale)


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Normal quantile function (inverse of ``cdf``).

    Example:
        >>> ember.scipy.stats.norm.ppf(0.975)  # 1.959964
    """
    return jnp.asarray(special.ndtri(q) * scale + loc, float)


def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Normal inverse survival function (inverse of ``sf``).

    Example:
        >>> ember.scipy.stats.norm.isf(0.025)  # 1.959964
    """
    return ppf(1.0 - jnp.asarray(q), loc, scale)
