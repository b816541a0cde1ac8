"""The multivariate normal distribution (``jax.scipy.stats.multivariate_normal``)."""

from __future__ import annotations

import math

from ember import lax
from ember import numpy as jnp
from ember.numpy._util import check_arraylike, promote_dtypes_inexact
from ember.scipy.stats._common import Array, ArrayLike

__all__ = ["logpdf", "pdf"]


def logpdf(x: ArrayLike, mean: ArrayLike, cov: ArrayLike,
           allow_singular: None = None) -> Array:
    """Log of the multivariate normal density.

    Args:
        x: points, the last axis over the ``n`` dimensions (leading axes broadcast).
        mean: mean, shape ``(..., n)`` (or a scalar for a 1-D normal).
        cov: covariance: a scalar (isotropic) or ``(..., n, n)`` positive definite.
        allow_singular: not supported (must be None).

    Example:
        >>> ember.scipy.stats.multivariate_normal.logpdf(jnp.zeros(2), jnp.zeros(2),
        ...                                              jnp.eye(2))  # -log(2 pi)
    """
    if allow_singular is not None:
        raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf")
    check_arraylike("multivariate_normal.logpdf", x, mean, cov)
    x, mean, cov = promote_dtypes_inexact(x, mean, cov)
    log2pi = math.log(2 * math.pi)
    if not mean.shape:
        return -1 / 2 * jnp.square(x - mean) / cov - 1 / 2 * (log2pi + jnp.log(cov))
    n = mean.shape[-1]
    y = x - mean
    if not cov.shape:
        return (-1 / 2 * jnp.einsum("...i,...i->...", y, y) / cov
                - n / 2 * (log2pi + jnp.log(cov)))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError("multivariate_normal.logpdf got incompatible shapes")
    chol = lax.linalg.cholesky(cov)
    z = jnp.vectorize(
        lambda c, v: lax.linalg.triangular_solve(c, v[:, None], left_side=True,
                                                 lower=True)[:, 0],
        signature="(n,n),(n)->(n)")(chol, y)
    log_det_half = jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)).sum(-1)
    return -1 / 2 * jnp.einsum("...i,...i->...", z, z) - n / 2 * log2pi - log_det_half


def pdf(x: ArrayLike, mean: ArrayLike, cov: ArrayLike) -> Array:
    """Multivariate normal density (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.multivariate_normal.pdf(jnp.zeros(2), jnp.zeros(2),
        ...                                           jnp.eye(2))  # 1/(2 pi)
    """
    return jnp.exp(logpdf(x, mean, cov))
