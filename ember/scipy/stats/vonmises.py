"""The von Mises distribution (``jax.scipy.stats.vonmises``) on the circle, concentration
``kappa`` (NaN for ``kappa <= 0``)."""

from __future__ import annotations

import math

from ember import numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x: ArrayLike, kappa: ArrayLike) -> Array:
    """Log of the von Mises density, ``kappa (cos x - 1) - log(2 pi i0e(kappa))``.

    Example:
        >>> ember.scipy.stats.vonmises.logpdf(0., 1.)  # -1.0737915
    """
    x, kappa = promote_args_inexact("vonmises.logpdf", x, kappa)
    out = kappa * (jnp.cos(x) - 1.0) - jnp.log(2 * math.pi * special.i0e(kappa))
    return jnp.where(kappa > 0, out, jnp.nan)


def pdf(x: ArrayLike, kappa: ArrayLike) -> Array:
    """Von Mises density (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.vonmises.pdf(0., 1.)  # 0.34171045
    """
    return jnp.exp(logpdf(x, kappa))
