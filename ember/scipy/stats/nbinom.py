"""The negative binomial distribution (``jax.scipy.stats.nbinom``): failures before the
``n``-th success, success probability ``p``."""

from __future__ import annotations

from ember import numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import Array, ArrayLike, const, promote_args_inexact

__all__ = ["logpmf", "pmf"]


def logpmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Log of the negative binomial probability mass; -inf below ``loc``.

    Example:
        >>> ember.scipy.stats.nbinom.logpmf(0, 1, 0.5)  # log(0.5) = -0.6931472
    """
    k0, (k, n, p, loc) = k, promote_args_inexact("nbinom.logpmf", k, n, p, loc)
    y, one = k - loc, const(k0, k, 1)
    log_comb = special.gammaln(y + n) - special.gammaln(n) - special.gammaln(y + one)
    out = log_comb + (special.xlogy(n, p) + special.xlogy(y, one - p))
    return jnp.where(k < loc, -jnp.inf, out)


def pmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Negative binomial probability mass (``exp(logpmf)``).

    Example:
        >>> ember.scipy.stats.nbinom.pmf(0, 1, 0.5)  # 0.5
    """
    return jnp.exp(logpmf(k, n, p, loc))
