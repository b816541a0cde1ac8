"""The left-skewed Gumbel distribution (``jax.scipy.stats.gumbel_l``), the distribution of a
minimum; NaN for ``scale <= 0``."""

from __future__ import annotations

from ember import numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _z(fn: str, x: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> tuple[Array, Array]:
    x, loc, scale = promote_args_inexact(fn, x, loc, scale)
    return (x - loc) / scale, scale


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the left Gumbel density, ``z - exp(z) - log(scale)``.

    Example:
        >>> ember.scipy.stats.gumbel_l.logpdf(0.)  # -1.0
    """
    z, scale = _z("gumbel_l.logpdf", x, loc, scale)
    out = special.xlogy(-1.0, scale) + (z - jnp.exp(z))
    return jnp.where(scale > 0, out, jnp.nan)


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Left Gumbel density (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.gumbel_l.pdf(0.)  # exp(-1) = 0.36787945
    """
    return jnp.exp(logpdf(x, loc, scale))


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the left Gumbel CDF, ``log(1 - exp(-exp(z)))`` computed with ``expm1``.

    Example:
        >>> ember.scipy.stats.gumbel_l.logcdf(0.)  # -0.45867515
    """
    z, scale = _z("gumbel_l.logcdf", x, loc, scale)
    return jnp.where(scale > 0, jnp.log(-jnp.expm1(-jnp.exp(z))), jnp.nan)


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Left Gumbel CDF (``exp(logcdf)``).

    Example:
        >>> ember.scipy.stats.gumbel_l.cdf(0.)  # 0.63212055
    """
    return jnp.exp(logcdf(x, loc, scale))


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the left Gumbel survival function, ``-exp(z)``.

    Example:
        >>> ember.scipy.stats.gumbel_l.logsf(0.)  # -1.0
    """
    z, scale = _z("gumbel_l.logsf", x, loc, scale)
    return jnp.where(scale > 0, -jnp.exp(z), jnp.nan)


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Left Gumbel survival function (``exp(logsf)``).

    Example:
        >>> ember.scipy.stats.gumbel_l.sf(0.)  # 0.36787945
    """
    return jnp.exp(logsf(x, loc, scale))


def ppf(p: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Left Gumbel quantile function, ``loc + scale log(-log(1 - p))``; NaN outside
    ``(0, 1)``.

    Example:
        >>> ember.scipy.stats.gumbel_l.ppf(0.5)  # -0.36651292
    """
    p, loc, scale = promote_args_inexact("gumbel_l.ppf", p, loc, scale)
    out = loc + scale * jnp.log(special.xlog1py(-1.0, -p))
    return jnp.where((p > 0) & (p < 1), out, jnp.nan)
