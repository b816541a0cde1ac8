"""The binomial distribution (``jax.scipy.stats.binom``): ``n`` trials with success
probability ``p``."""

from __future__ import annotations

from ember import numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["logpmf", "pmf"]


def logpmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Log of the binomial probability mass; -inf outside ``[loc, loc + n]``.

    Example:
        >>> ember.scipy.stats.binom.logpmf(1, 2, 0.5)  # log(0.5) = -0.6931472
    """
    k, n, p, loc = promote_args_inexact("binom.logpmf", k, n, p, loc)
    y = k - loc
    log_comb = special.gammaln(n + 1.0) - (special.gammaln(y + 1.0)
                                           + special.gammaln(n - y + 1.0))
    log_lin = special.xlogy(y, p) + special.xlog1py(n - y, -p)
    # A certain outcome (p = 0 or 1, or n = 0) has probability exactly 1.
    out = jnp.where(((y == 0) & (n == 0)) | (log_lin == 0), 0.0, log_comb + log_lin)
    return jnp.where((k >= loc) & (k < loc + n + 1.0), out, -jnp.inf)


def pmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Binomial probability mass (``exp(logpmf)``).

    Example:
        >>> ember.scipy.stats.binom.pmf(1, 2, 0.5)  # 0.5
    """
    return jnp.exp(logpmf(k, n, p, loc))
