"""The Bernoulli distribution (``jax.scipy.stats.bernoulli``): ``P(k=1) = p``."""

from __future__ import annotations

from ember import numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import Array, ArrayLike, const, promote_args_inexact

__all__ = ["cdf", "logpmf", "pmf", "ppf"]


def logpmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Log of the Bernoulli probability mass; -inf for ``k - loc`` outside ``[0, 1]``.

    Example:
        >>> ember.scipy.stats.bernoulli.logpmf(1, 0.25)  # log(0.25) = -1.3862944
    """
    k0, (k, p, loc) = k, promote_args_inexact("bernoulli.logpmf", k, p, loc)
    y = k - loc
    out = special.xlogy(y, p) + special.xlog1py(const(k0, k, 1) - y, -p)
    return jnp.where((y < 0) | (y > 1), -jnp.inf, out)


def pmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Bernoulli probability mass (``exp(logpmf)``).

    Example:
        >>> ember.scipy.stats.bernoulli.pmf(0, 0.25)  # 0.75
    """
    return jnp.exp(logpmf(k, p, loc))


def _bad_p(p: Array) -> Array:
    return jnp.isnan(p) | (p < 0) | (p > 1)


def cdf(k: ArrayLike, p: ArrayLike) -> Array:
    """Bernoulli CDF: 0 below 0, ``1 - p`` on ``[0, 1)``, 1 from 1; NaN for ``p`` outside
    ``[0, 1]``.

    Example:
        >>> ember.scipy.stats.bernoulli.cdf(0.5, 0.25)  # 0.75
    """
    k0, (k, p) = k, promote_args_inexact("bernoulli.cdf", k, p)
    zero, one = const(k0, k, 0), const(k0, k, 1)
    out = jnp.where(k < 0, zero, jnp.where(k < 1, one - p, one))
    # (k = NaN fails every comparison above; it is NaN through the first condition.)
    return jnp.where(jnp.isnan(k) | _bad_p(p), jnp.nan, out)


def ppf(q: ArrayLike, p: ArrayLike) -> Array:
    """Bernoulli quantile function: 0 for ``q <= 1 - p``, else 1; NaN for ``q`` or ``p``
    outside ``[0, 1]``.

    Example:
        >>> ember.scipy.stats.bernoulli.ppf(0.9, 0.25)  # 1.0
    """
    q0, (q, p) = q, promote_args_inexact("bernoulli.ppf", q, p)
    zero, one = const(q0, q, 0), const(q0, q, 1)
    out = jnp.where(q <= one - p, zero, one)
    bad = jnp.isnan(q) | (q < 0) | (q > 1) | _bad_p(p)
    return jnp.where(bad, jnp.nan, out)
