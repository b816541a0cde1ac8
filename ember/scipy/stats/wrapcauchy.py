"""The wrapped Cauchy distribution (``jax.scipy.stats.wrapcauchy``) on ``[0, 2 pi]``, shape
``0 < c < 1`` (NaN otherwise)."""

from __future__ import annotations

import math

from ember import numpy as jnp
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x: ArrayLike, c: ArrayLike) -> Array:
    """Log of the wrapped Cauchy density; -inf outside ``[0, 2 pi]``.

    Example:
        >>> ember.scipy.stats.wrapcauchy.logpdf(0., 0.5)  # log(3 / (2 pi)) = -0.7392
    """
    x, c = promote_args_inexact("wrapcauchy.logpdf", x, c)
    out = (jnp.log(1 - c * c) - math.log(2 * math.pi)
           - jnp.log(1 + c * c - 2 * c * jnp.cos(x)))
    out = jnp.where((x >= 0) & (x <= 2 * math.pi), out, -jnp.inf)
    return jnp.where((c > 0) & (c < 1), out, jnp.nan)


def pdf(x: ArrayLike, c: ArrayLike) -> Array:
    """Wrapped Cauchy density (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.wrapcauchy.pdf(0., 0.5)  # 3 / (2 pi) = 0.4774648
    """
    return jnp.exp(logpdf(x, c))
