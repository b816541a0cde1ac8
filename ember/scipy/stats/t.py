"""Student's t distribution (``jax.scipy.stats.t``): ``df`` degrees of freedom, location
``loc``, scale ``scale``."""

from __future__ import annotations

import math

from ember import lax
from ember import numpy as jnp
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of Student's t density.

    Example:
        >>> ember.scipy.stats.t.logpdf(0., 1.)  # -log(pi) = -1.1447299
    """
    x, df, loc, scale = promote_args_inexact("t.logpdf", x, df, loc, scale)
    z = (x - loc) / scale
    half_df = df / 2.0
    half_df1 = half_df + 0.5
    # log normalizer: lgamma(df/2) + log(pi df scale^2)/2 - lgamma((df+1)/2)
    log_norm = (lax.lgamma(half_df) + jnp.log(scale * scale * math.pi * df) / 2.0
                - lax.lgamma(half_df1))
    return -(log_norm + half_df1 * jnp.log1p(z * z / df))


def pdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Student's t density (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.t.pdf(0., 1.)  # 1/pi = 0.31830987
    """
    return jnp.exp(logpdf(x, df, loc, scale))
