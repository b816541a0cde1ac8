"""The beta distribution (``jax.scipy.stats.beta``): shapes ``a``, ``b`` on
``[loc, loc + scale]``."""

from __future__ import annotations

from ember import lax
from ember import numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
           scale: ArrayLike = 1) -> Array:
    """Log of the beta density; -inf outside ``[loc, loc + scale]``, NaN for ``a <= 0``,
    ``b <= 0`` or ``scale <= 0``.

    Example:
        >>> ember.scipy.stats.beta.logpdf(0.5, 2., 2.)  # log(1.5) = 0.4054651
    """
    x, a, b, loc, scale = promote_args_inexact("beta.logpdf", x, a, b, loc, scale)
    y = (x - loc) / scale
    log_kernel = special.xlogy(a - 1.0, y) + special.xlog1py(b - 1.0, -y)
    out = log_kernel - special.betaln(a, b) - jnp.log(scale)
    out = jnp.where((x > loc + scale) | (x < loc), -jnp.inf, out)
    return jnp.where((a <= 0) | (b <= 0) | (scale <= 0), jnp.nan, out)


def pdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
        scale: ArrayLike = 1) -> Array:
    """Beta density (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.beta.pdf(0.5, 2., 2.)  # 1.5
    """
    return jnp.exp(logpdf(x, a, b, loc, scale))


def _unit(x: Array, loc: Array, scale: Array) -> Array:
    return lax.clamp(jnp.zeros_like(x), (x - loc) / scale, jnp.ones_like(x))


def cdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
        scale: ArrayLike = 1) -> Array:
    """Beta CDF, the regularized incomplete beta function of the clipped ``(x-loc)/scale``.

    Example:
        >>> ember.scipy.stats.beta.cdf(0.5, 2., 3.)  # 0.6875
    """
    x, a, b, loc, scale = promote_args_inexact("beta.cdf", x, a, b, loc, scale)
    return special.betainc(a, b, _unit(x, loc, scale))


def logcdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
           scale: ArrayLike = 1) -> Array:
    """Log of the beta CDF.

    Example:
        >>> ember.scipy.stats.beta.logcdf(0.5, 2., 3.)  # log(0.6875)
    """
    return jnp.log(cdf(x, a, b, loc, scale))


def sf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
       scale: ArrayLike = 1) -> Array:
    """Beta survival function ``1 - cdf``, computed as ``I(1 - y; b, a)``.

    Example:
        >>> ember.scipy.stats.beta.sf(0.5, 2., 3.)  # 0.3125
    """
    x, a, b, loc, scale = promote_args_inexact("beta.sf", x, a, b, loc, scale)
    return special.betainc(b, a, 1.0 - _unit(x, loc, scale))


def logsf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
          scale: ArrayLike = 1) -> Array:
    """Log of the beta survival function.

    Example:
        >>> ember.scipy.stats.beta.logsf(0.5, 2., 3.)  # log(0.3125)
    """
    return jnp.log(sf(x, a, b, loc, scale))
