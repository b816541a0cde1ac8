"""The Cauchy distribution (``jax.scipy.stats.cauchy``): median ``loc``, half-width
``scale``."""

from __future__ import annotations

import math

from ember import numpy as jnp
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the Cauchy density.

    Example:
        >>> ember.scipy.stats.cauchy.logpdf(0.)  # -log(pi) = -1.1447299
    """
    x, loc, scale = promote_args_inexact("cauchy.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return -(jnp.log(scale * math.pi) + jnp.log1p(z * z))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Cauchy density (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.cauchy.pdf(0.)  # 1/pi = 0.31830987
    """
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Cauchy CDF, ``1/2 + arctan((x - loc)/scale)/pi``.

    Example:
        >>> ember.scipy.stats.cauchy.cdf(1.)  # 0.75
    """
    x, loc, scale = promote_args_inexact("cauchy.cdf", x, loc, scale)
    return 0.5 + (1.0 / math.pi) * jnp.arctan((x - loc) / scale)


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the Cauchy CDF.

    Example:
        >>> ember.scipy.stats.cauchy.logcdf(1.)  # log(0.75)
    """
    return jnp.log(cdf(x, loc, scale))


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Cauchy survival function (the CDF reflected about ``loc``).

    Example:
        >>> ember.scipy.stats.cauchy.sf(1.)  # 0.25
    """
    x, loc, scale = promote_args_inexact("cauchy.sf", x, loc, scale)
    return cdf(-x, -loc, scale)


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the Cauchy survival function.

    Example:
        >>> ember.scipy.stats.cauchy.logsf(1.)  # log(0.25)
    """
    x, loc, scale = promote_args_inexact("cauchy.logsf", x, loc, scale)
    return logcdf(-x, -loc, scale)


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Cauchy quantile function, ``loc + scale tan(pi (q - 1/2))``.

    Example:
        >>> ember.scipy.stats.cauchy.ppf(0.75)  # 1.0
    """
    q, loc, scale = promote_args_inexact("cauchy.ppf", q, loc, scale)
    return jnp.tan(math.pi * q - math.pi / 2) * scale + loc


def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Cauchy inverse survival function, ``loc + scale tan(pi (1/2 - q))``.

    Example:
        >>> ember.scipy.stats.cauchy.isf(0.25)  # 1.0
    """
    q, loc, scale = promote_args_inexact("cauchy.isf", q, loc, scale)
    return jnp.tan(math.pi / 2 - math.pi * q) * scale + loc
