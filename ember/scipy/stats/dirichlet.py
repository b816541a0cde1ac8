"""The Dirichlet distribution (``jax.scipy.stats.dirichlet``) over the simplex, with
concentrations ``alpha`` (the first axis of ``x`` runs over the categories)."""

from __future__ import annotations

from ember import numpy as jnp
from ember.numpy._util import check_arraylike, promote_dtypes_inexact
from ember.scipy import special
from ember.scipy.stats._common import Array, ArrayLike

__all__ = ["logpdf", "pdf"]


def logpdf(x: ArrayLike, alpha: ArrayLike) -> Array:
    """Log of the Dirichlet density; -inf off the simplex.

    Args:
        x: points of shape ``(K, ...)`` or ``(K - 1, ...)`` (the last coordinate is then
            ``1 - sum``).
        alpha: concentrations, shape ``(K,)``.

    Example:
        >>> ember.scipy.stats.dirichlet.logpdf(jnp.array([0.2, 0.8]), jnp.array([1., 1.]))
        ... # 0.0
    """
    check_arraylike("dirichlet.logpdf", x, alpha)
    x, alpha = promote_dtypes_inexact(x, alpha)
    if alpha.ndim != 1:
        raise ValueError(f"dirichlet.logpdf: `alpha` must be one-dimensional; got "
                         f"alpha.shape={alpha.shape}")
    k = alpha.shape[0]
    if x.ndim == 0 or x.shape[0] not in (k, k - 1):
        raise ValueError("dirichlet.logpdf: `x` must have either the same number of entries "
                         f"as `alpha` or one entry fewer; got x.shape={x.shape}, "
                         f"alpha.shape={alpha.shape}")
    if x.shape[0] != k:
        x = jnp.concatenate([x, 1.0 - x.sum(0, keepdims=True)], axis=0)
    log_norm = jnp.sum(special.gammaln(alpha)) - special.gammaln(jnp.sum(alpha))
    a = alpha.reshape(alpha.shape + (1,) * (x.ndim - 1))
    out = jnp.sum(special.xlogy(a - 1.0, x), axis=0) - log_norm
    on_simplex = jnp.all(x > 0, axis=0) & (jnp.abs(jnp.sum(x, axis=0) - 1) < 1e-6)
    return jnp.where(on_simplex, out, -jnp.inf)


def pdf(x: ArrayLike, alpha: ArrayLike) -> Array:
    """Dirichlet density (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.dirichlet.pdf(jnp.array([0.2, 0.8]), jnp.array([2., 1.]))
        ... # 0.4
    """
    return jnp.exp(logpdf(x, alpha))
