"""The Laplace distribution (``jax.scipy.stats.laplace``): median ``loc``, scale
``scale``."""

from __future__ import annotations

from ember import numpy as jnp
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["cdf", "logpdf", "pdf"]


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the Laplace density, ``-|x - loc|/scale - log(2 scale)``.

    Example:
        >>> ember.scipy.stats.laplace.logpdf(0.)  # -log(2) = -0.6931472
    """
    x, loc, scale = promote_args_inexact("laplace.logpdf", x, loc, scale)
    return -(jnp.abs(x - loc) / scale + jnp.log(2.0 * scale))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Laplace density (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.laplace.pdf(0.)  # 0.5
    """
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Laplace CDF: ``exp(z)/2`` for ``z <= 0``, else ``1 - exp(-z)/2``.

    Example:
        >>> ember.scipy.stats.laplace.cdf(0.)  # 0.5
    """
    x, loc, scale = promote_args_inexact("laplace.cdf", x, loc, scale)
    z = (x - loc) / scale
    return jnp.where(z <= 0, 0.5 * jnp.exp(z), 1.0 - 0.5 * jnp.exp(-z))
