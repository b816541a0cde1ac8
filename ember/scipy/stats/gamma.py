"""The gamma distribution (``jax.scipy.stats.gamma``): shape ``a``, location ``loc``,
scale ``scale``."""

from __future__ import annotations

from ember import numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the gamma density; -inf below ``loc``.

    Example:
        >>> ember.scipy.stats.gamma.logpdf(1., 2.)  # -1.0
    """
    x, a, loc, scale = promote_args_inexact("gamma.logpdf", x, a, loc, scale)
    inside = x >= loc
    # y = 1 outside the support keeps xlogy finite there (and its gradient NaN-free).
    y = jnp.where(inside, (x - loc) / scale, 1.0)
    out = special.xlogy(a - 1.0, y) - y - (special.gammaln(a) + jnp.log(scale))
    return jnp.where(inside, out, -jnp.inf)


def pdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Gamma density (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.gamma.pdf(1., 2.)  # exp(-1) = 0.36787945
    """
    return jnp.exp(logpdf(x, a, loc, scale))


def cdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Gamma CDF, the regularized lower incomplete gamma function.

    Example:
        >>> ember.scipy.stats.gamma.cdf(1., 1.)  # 1 - exp(-1) = 0.6321206
    """
    x, a, loc, scale = promote_args_inexact("gamma.cdf", x, a, loc, scale)
    return special.gammainc(a, jnp.clip((x - loc) / scale, 0.0, jnp.inf))


def logcdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the gamma CDF.

    Example:
        >>> ember.scipy.stats.gamma.logcdf(1., 1.)  # -0.45867515
    """
    return jnp.log(cdf(x, a, loc, scale))


def sf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Gamma survival function, the regularized upper incomplete gamma function.

    Example:
        >>> ember.scipy.stats.gamma.sf(1., 1.)  # exp(-1) = 0.36787945
    """
    x, a, loc, scale = promote_args_inexact("gamma.sf", x, a, loc, scale)
    y = (x - loc) / scale
    return jnp.where(y < 0, 1, special.gammaincc(a, y))


def logsf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the gamma survival function.

    Example:
        >>> ember.scipy.stats.gamma.logsf(1., 1.)  # -1.0
    """
    return jnp.log(sf(x, a, loc, scale))
