"""The chi-squared distribution (``jax.scipy.stats.chi2``): ``df`` degrees of freedom,
location ``loc``, scale ``scale``."""

from __future__ import annotations

import math

from ember import lax
from ember import numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the chi-squared density; -inf below ``loc``.

    Example:
        >>> ember.scipy.stats.chi2.logpdf(1., 2.)  # -log(2) - 1/2 = -1.1931472
    """
    x, df, loc, scale = promote_args_inexact("chi2.logpdf", x, df, loc, scale)
    y = (x - loc) / scale
    k = df / 2.0
    kernel = (k - 1.0) * jnp.log(y) - y / 2.0
    log_norm = -(lax.lgamma(k) + df * math.log(2.0) / 2.0)
    return jnp.where(x < loc, -jnp.inf, log_norm - jnp.log(scale) + kernel)


def pdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Chi-squared density (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.chi2.pdf(1., 2.)  # exp(-1/2) / 2 = 0.30326533
    """
    return jnp.exp(logpdf(x, df, loc, scale))


def _half_y(x: Array, loc: Array, scale: Array) -> Array:
    return jnp.clip((x - loc) / (scale * 2.0), 0.0, jnp.inf)


def cdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Chi-squared CDF, ``gammainc(df/2, (x-loc)/(2 scale))``.

    Example:
        >>> ember.scipy.stats.chi2.cdf(2., 2.)  # 1 - exp(-1) = 0.6321206
    """
    x, df, loc, scale = promote_args_inexact("chi2.cdf", x, df, loc, scale)
    return special.gammainc(df / 2.0, _half_y(x, loc, scale))


def logcdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the chi-squared CDF.

    Example:
        >>> ember.scipy.stats.chi2.logcdf(2., 2.)  # -0.45867515
    """
    return jnp.log(cdf(x, df, loc, scale))


def sf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Chi-squared survival function, ``gammaincc(df/2, (x-loc)/(2 scale))``.

    Example:
        >>> ember.scipy.stats.chi2.sf(2., 2.)  # exp(-1) = 0.36787945
    """
    x, df, loc, scale = promote_args_inexact("chi2.sf", x, df, loc, scale)
    return special.gammaincc(df / 2.0, _half_y(x, loc, scale))


def logsf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the chi-squared survival function.

    Example:
        >>> ember.scipy.stats.chi2.logsf(2., 2.)  # -1.0
    """
    return jnp.log(sf(x, df, loc, scale))
