"""The geometric distribution (``jax.scipy.stats.geom``): trials up to and including the
first success, success probability ``p``."""

from __future__ import annotations

from ember import numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import Array, ArrayLike, const, promote_args_inexact

__all__ = ["logpmf", "pmf"]


def logpmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Log of the geometric probability mass, ``(k-1) log(1-p) + log p``; -inf for
    ``k - loc <= 0``.

    Example:
        >>> ember.scipy.stats.geom.logpmf(2, 0.5)  # log(0.25) = -1.3862944
    """
    k0, (k, p, loc) = k, promote_args_inexact("geom.logpmf", k, p, loc)
    y = k - loc
    out = special.xlog1py(y - const(k0, k, 1), -p) + jnp.log(p)
    return jnp.where(y <= 0, -jnp.inf, out)


def pmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Geometric probability mass (``exp(logpmf)``).

    Example:
        >>> ember.scipy.stats.geom.pmf(2, 0.5)  # 0.25
    """
    return jnp.exp(logpmf(k, p, loc))
