"""The Poisson distribution (``jax.scipy.stats.poisson``) with mean ``mu``."""

from __future__ import annotations

import math

from ember import numpy as jnp
from ember.numpy._util import check_arraylike, promote_dtypes_inexact
from ember.scipy import special
from ember.scipy.stats._common import Array, ArrayLike, const, promote_args_inexact

__all__ = ["cdf", "entropy", "logpmf", "pmf"]


def logpmf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Log of the Poisson probability mass; -inf below ``loc`` and at non-integer ``k``.

    Example:
        >>> ember.scipy.stats.poisson.logpmf(0, 2.)  # -2.0
    """
    k, mu, loc = promote_args_inexact("poisson.logpmf", k, mu, loc)
    y = k - loc
    out = special.xlogy(y, mu) - special.gammaln(y + 1.0) - mu
    return jnp.where((y < 0) | (jnp.round(k) != k), -jnp.inf, out)


def pmf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Poisson probability mass (``exp(logpmf)``).

    Example:
        >>> ember.scipy.stats.poisson.pmf(0, 2.)  # exp(-2) = 0.13533528
    """
    return jnp.exp(logpmf(k, mu, loc))


def cdf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Poisson CDF, ``gammaincc(floor(k - loc) + 1, mu)`` (0 below ``loc``).

    Example:
        >>> ember.scipy.stats.poisson.cdf(0, 2.)  # exp(-2) = 0.13533528
    """
    k0, (k, mu, loc) = k, promote_args_inexact("poisson.cdf", k, mu, loc)
    y = k - loc
    out = special.gammaincc(jnp.floor(1.0 + y), mu)
    return jnp.where(y < 0, const(k0, k, 0), out)


def _entropy_sum(mu: Array, kmax: int, upper: Array) -> Array:
    """``-sum p log p`` over ``k < min(kmax, upper)``, for each of the flat ``mu``."""
    k = jnp.arange(kmax, dtype=mu.dtype)[:, None]
    p = jnp.where(k < upper[None, :], pmf(k, mu), 0.0)
    return jnp.sum(special.entr(p), axis=0)


def entropy(mu: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Entropy of the Poisson distribution (``loc`` shifts it and so changes nothing).

    Summed exactly for ``mu < 100`` (over a fixed number of terms, so it traces), and the
    asymptotic ``log(2 pi e mu)/2 - 1/(12 mu)`` beyond.

    Example:
        >>> ember.scipy.stats.poisson.entropy(1.)  # 1.3048422
    """
    check_arraylike("poisson.entropy", mu, loc)
    mu, loc = promote_dtypes_inexact(mu, loc)
    shape = jnp.broadcast_shapes(mu.shape, loc.shape)
    m = jnp.ravel(mu)
    small = _entropy_sum(m, 35, jnp.ceil(m + 20))
    medium = _entropy_sum(m, 250, jnp.ceil(m + 10 * jnp.sqrt(m) + 20))
    large = 0.5 * jnp.log(2 * math.pi * math.e * m) - 1.0 / (12 * m)
    out = jnp.where(m == 0, 0.0, jnp.where(m < 10, small, jnp.where(m < 100, medium, large)))
    return jnp.broadcast_to(out.reshape(mu.shape), shape)
