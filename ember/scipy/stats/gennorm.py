"""The generalized normal distribution (``jax.scipy.stats.gennorm``), density
``beta / (2 Gamma(1/beta)) exp(-|x|^beta)``."""

from __future__ import annotations

from ember import lax
from ember import numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["cdf", "logpdf", "pdf"]


def logpdf(x: ArrayLike, beta: ArrayLike) -> Array:
    """Log of the generalized normal density.

    Example:
        >>> ember.scipy.stats.gennorm.logpdf(0., 2.)  # -log(pi)/2 = -0.5723649
    """
    x, beta = promote_args_inexact("gennorm.logpdf", x, beta)
    return jnp.log(0.5 * beta) - lax.lgamma(1.0 / beta) - jnp.abs(x) ** beta


def pdf(x: ArrayLike, beta: ArrayLike) -> Array:
    """Generalized normal density (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.gennorm.pdf(0., 1.)  # 0.5
    """
    return jnp.exp(logpdf(x, beta))


def cdf(x: ArrayLike, beta: ArrayLike) -> Array:
    """Generalized normal CDF, ``(1 + sign(x) gammainc(1/beta, |x|^beta)) / 2``.

    Example:
        >>> ember.scipy.stats.gennorm.cdf(0., 2.)  # 0.5
    """
    x, beta = promote_args_inexact("gennorm.cdf", x, beta)
    return 0.5 * (1.0 + jnp.sign(x) * special.gammainc(1.0 / beta, jnp.abs(x) ** beta))
