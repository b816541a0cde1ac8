"""The Pareto distribution (``jax.scipy.stats.pareto``): shape ``b``, support
``x >= loc + scale``."""

from __future__ import annotations

from ember import numpy as jnp
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the Pareto density; -inf below ``loc + scale``.

    Example:
        >>> ember.scipy.stats.pareto.logpdf(1., 2.)  # log(2) = 0.6931472
    """
    x, b, loc, scale = promote_args_inexact("pareto.logpdf", x, b, loc, scale)
    z = (x - loc) / scale
    out = -(jnp.log(scale / b) + (b + 1.0) * jnp.log(z))
    return jnp.where(x < loc + scale, -jnp.inf, out)


def pdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Pareto density (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.pareto.pdf(1., 2.)  # 2.0
    """
    return jnp.exp(logpdf(x, b, loc, scale))


def cdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Pareto CDF, ``1 - z^-b`` (0 below ``loc + scale``).

    Example:
        >>> ember.scipy.stats.pareto.cdf(2., 1.)  # 0.5
    """
    x, b, loc, scale = promote_args_inexact("pareto.cdf", x, b, loc, scale)
    out = 1.0 - jnp.power((x - loc) / scale, -b)
    return jnp.where(x < loc + scale, 0.0, out)


def logcdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the Pareto CDF, ``log1p(-z^-b)``.

    Example:
        >>> ember.scipy.stats.pareto.logcdf(2., 1.)  # log(0.5)
    """
    x, b, loc, scale = promote_args_inexact("pareto.logcdf", x, b, loc, scale)
    out = jnp.log1p(-jnp.power((x - loc) / scale, -b))
    return jnp.where(x < loc + scale, -jnp.inf, out)


def logsf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the Pareto survival function, ``-b log z`` (0 below ``loc + scale``).

    Example:
        >>> ember.scipy.stats.pareto.logsf(2., 1.)  # log(0.5)
    """
    x, b, loc, scale = promote_args_inexact("pareto.logsf", x, b, loc, scale)
    out = -(b * jnp.log((x - loc) / scale))
    return jnp.where(x < loc + scale, 0.0, out)


def sf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Pareto survival function (``exp(logsf)``).

    Example:
        >>> ember.scipy.stats.pareto.sf(2., 1.)  # 0.5
    """
    return jnp.exp(logsf(x, b, loc, scale))


def ppf(q: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Pareto quantile function, ``loc + scale (1 - q)^(-1/b)``; NaN outside ``[0, 1]``.

    Example:
        >>> ember.scipy.stats.pareto.ppf(0.5, 1.)  # 2.0
    """
    q, b, loc, scale = promote_args_inexact("pareto.ppf", q, b, loc, scale)
    out = loc + scale * jnp.power(1.0 - q, -(1.0 / b))
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), jnp.nan, out)
