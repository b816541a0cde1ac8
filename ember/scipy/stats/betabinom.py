"""The beta-binomial distribution (``jax.scipy.stats.betabinom``): ``n`` trials with a
``Beta(a, b)`` success probability."""

from __future__ import annotations

from ember import numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import Array, ArrayLike, const, promote_args_inexact

__all__ = ["logpmf", "pmf"]


def logpmf(k: ArrayLike, n: ArrayLike, a: ArrayLike, b: ArrayLike,
           loc: ArrayLike = 0) -> Array:
    """Log of the beta-binomial probability mass at ``floor(k)``; -inf outside ``[0, n]``,
    NaN for ``n < 0``, ``a <= 0`` or ``b <= 0``.

    Example:
        >>> ember.scipy.stats.betabinom.logpmf(1, 2, 1., 1.)  # log(1/3) = -1.0986123
    """
    k0, (k, n, a, b, loc) = k, promote_args_inexact("betabinom.logpmf", k, n, a, b, loc)
    y = jnp.floor(k) - loc
    # log C(n, y) = -log(n + 1) - log B(n - y + 1, y + 1)
    one = const(k0, y, 1)
    log_comb = -(jnp.log1p(n) + special.betaln(n - y + one, y + one))
    out = log_comb + special.betaln(y + a, n - y + b) - special.betaln(a, b)
    out = jnp.where((y == 0) & (n == 0), 0.0, out)
    out = jnp.where((y < -loc) | (y > n) | (y + a <= 0), -jnp.inf, out)
    return jnp.where((n < 0) | (a <= 0) | (b <= 0), jnp.nan, out)


def pmf(k: ArrayLike, n: ArrayLike, a: ArrayLike, b: ArrayLike,
        loc: ArrayLike = 0) -> Array:
    """Beta-binomial probability mass (``exp(logpmf)``).

    Example:
        >>> ember.scipy.stats.betabinom.pmf(1, 2, 1., 1.)  # 1/3
    """
    return jnp.exp(logpmf(k, n, a, b, loc))
