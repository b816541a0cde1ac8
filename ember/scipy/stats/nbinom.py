"""The negative binomial distribution (``jax.scipy.stats.nbinom``): failures before the
``n``-th success, success probability ``p``."""

from __future__ import annotations

from ember import numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["logpmf", "pmf"]


def logpmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Log of the negative binomial probability mass; -inf below ``loc``.

    Example:
        >>> ember.scipy.stats.nbinom.logpmf(0, 1, 0.5)  # log(0.5) = -0.6931472
    """
    k, n, p, loc = promote_args_inexact("nbinom.logpmf", k, n, p, loc)
    y = k - loc
    log_comb = special.gammaln(y + n) - special.gammaln(n) - special.gammaln(y + 1.0)
    out = log_comb + (special.xlogy(n, p) + special.xlogy(y, 1.0 - p))
    return jnp.where(k < loc, -jnp.inf, out)


def pmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Negative binomial probability mass (``exp(logpmf)``).

    Example:
        >>> ember.scipy.stats.nbinom.pmf(0, 1, 0.5)  # 0.5
    """
    return jnp.exp(logpmf(k, n, p, loc))
