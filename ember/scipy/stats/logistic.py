"""The logistic distribution (``jax.scipy.stats.logistic``): location ``loc``, scale
``scale``."""

from __future__ import annotations

from ember import numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["cdf", "isf", "logpdf", "pdf", "ppf", "sf"]


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the logistic density, ``-2 log(2 cosh(z/2)) - log(scale)``.

    Example:
        >>> ember.scipy.stats.logistic.logpdf(0.)  # -log(4) = -1.3862944
    """
    x, loc, scale = promote_args_inexact("logistic.logpdf", x, loc, scale)
    half = (x - loc) / scale / 2.0
    return -2.0 * jnp.logaddexp(half, -half) - jnp.log(scale)


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Logistic density (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.logistic.pdf(0.)  # 0.25
    """
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Logistic CDF, ``expit((x - loc)/scale)``.

    Example:
        >>> ember.scipy.stats.logistic.cdf(0.)  # 0.5
    """
    x, loc, scale = promote_args_inexact("logistic.cdf", x, loc, scale)
    return special.expit((x - loc) / scale)


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Logistic survival function, ``expit(-(x - loc)/scale)``.

    Example:
        >>> ember.scipy.stats.logistic.sf(0.)  # 0.5
    """
    x, loc, scale = promote_args_inexact("logistic.sf", x, loc, scale)
    return special.expit(-((x - loc) / scale))


def ppf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Logistic quantile function, ``loc + scale logit(x)``.

    Example:
        >>> ember.scipy.stats.logistic.ppf(0.5)  # 0.0
    """
    x, loc, scale = promote_args_inexact("logistic.ppf", x, loc, scale)
    return special.logit(x) * scale + loc


def isf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Logistic inverse survival function, ``loc - scale logit(x)``.

    Example:
        >>> ember.scipy.stats.logistic.isf(0.5)  # 0.0
    """
    x, loc, scale = promote_args_inexact("logistic.isf", x, loc, scale)
    return -special.logit(x) * scale + loc
