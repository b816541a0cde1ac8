"""The right-skewed Gumbel distribution (``jax.scipy.stats.gumbel_r``), the distribution of
a maximum; NaN for ``scale <= 0``."""

from __future__ import annotations

from ember import numpy as jnp
from ember.nn import log1mexp
from ember.scipy import special
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _z(fn: str, x: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> tuple[Array, Array]:
    x, loc, scale = promote_args_inexact(fn, x, loc, scale)
    return (x - loc) / scale, scale


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the right Gumbel density, ``-(z + exp(-z)) - log(scale)``.

    Example:
        >>> ember.scipy.stats.gumbel_r.logpdf(0.)  # -1.0
    """
    z, scale = _z("gumbel_r.logpdf", x, loc, scale)
    out = special.xlogy(-1.0, scale) - (z + jnp.exp(-z))
    return jnp.where(scale > 0, out, jnp.nan)


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Right Gumbel density (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.gumbel_r.pdf(0.)  # 0.36787945
    """
    return jnp.exp(logpdf(x, loc, scale))


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the right Gumbel CDF, ``-exp(-z)``.

    Example:
        >>> ember.scipy.stats.gumbel_r.logcdf(0.)  # -1.0
    """
    z, scale = _z("gumbel_r.logcdf", x, loc, scale)
    return jnp.where(scale > 0, -jnp.exp(-z), jnp.nan)


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Right Gumbel CDF (``exp(logcdf)``).

    Example:
        >>> ember.scipy.stats.gumbel_r.cdf(0.)  # 0.36787945
    """
    return jnp.exp(logcdf(x, loc, scale))


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Right Gumbel survival function, ``1 - exp(-exp(-z))``.

    Example:
        >>> ember.scipy.stats.gumbel_r.sf(0.)  # 0.63212055
    """
    z, scale = _z("gumbel_r.sf", x, loc, scale)
    return jnp.where(scale > 0, 1.0 - jnp.exp(-jnp.exp(-z)), jnp.nan)


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the right Gumbel survival function, ``log1mexp(exp(-z))``.

    Example:
        >>> ember.scipy.stats.gumbel_r.logsf(0.)  # -0.45867515
    """
    z, scale = _z("gumbel_r.logsf", x, loc, scale)
    return jnp.where(scale > 0, log1mexp(jnp.exp(-z)), jnp.nan)


def ppf(p: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Right Gumbel quantile function, ``loc - scale log(-log p)``; NaN outside ``(0, 1)``.

    Example:
        >>> ember.scipy.stats.gumbel_r.ppf(0.5)  # 0.36651292
    """
    p, loc, scale = promote_args_inexact("gumbel_r.ppf", p, loc, scale)
    out = loc - scale * jnp.log(special.xlogy(-1.0, p))
    return jnp.where((p > 0) & (p < 1), out, jnp.nan)
