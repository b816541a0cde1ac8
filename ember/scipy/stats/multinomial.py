"""The multinomial distribution (``jax.scipy.stats.multinomial``): counts ``x`` (last axis
over categories) of ``n`` draws with probabilities ``p``."""

from __future__ import annotations

import numpy as np

from ember import numpy as jnp
from ember.numpy._util import promote_args_inexact, promote_args_numeric
from ember.scipy import special
from ember.scipy.stats._common import Array, ArrayLike

__all__ = ["logpmf", "pmf"]


def logpmf(x: ArrayLike, n: ArrayLike, p: ArrayLike) -> Array:
    """Log of the multinomial probability mass; -inf where the counts do not sum to ``n``.

    Args:
        x: integer counts, categories along the last axis.
        n: integer number of draws.
        p: category probabilities, last axis.

    Example:
        >>> ember.scipy.stats.multinomial.logpmf(jnp.array([1, 1]), 2, jnp.array([.5, .5]))
        ... # log(0.5) = -0.6931472
    """
    p, = promote_args_inexact("multinomial.logpmf", p)
    x, n = promote_args_numeric("multinomial.logpmf", x, n)
    if not jnp.issubdtype(x.dtype, np.integer):
        raise ValueError(f"multinomial.logpmf: x and n must be of integer type; got "
                         f"x.dtype={x.dtype}, n.dtype={n.dtype}")
    x = x.astype(p.dtype)
    n = n.astype(p.dtype)
    out = special.gammaln(n + 1) + jnp.sum(special.xlogy(x, p) - special.gammaln(x + 1),
                                           axis=-1)
    # (JAX compares the total over all of x, not per row.)
    return jnp.where(jnp.sum(x) == n, out, -jnp.inf)


def pmf(x: ArrayLike, n: ArrayLike, p: ArrayLike) -> Array:
    """Multinomial probability mass (``exp(logpmf)``).

    Example:
        >>> ember.scipy.stats.multinomial.pmf(jnp.array([1, 1]), 2, jnp.array([.5, .5]))
        ... # 0.5
    """
    return jnp.exp(logpmf(x, n, p))
