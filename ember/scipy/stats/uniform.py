"""The uniform distribution (``jax.scipy.stats.uniform``) on ``[loc, loc + scale]``."""

from __future__ import annotations

from ember import numpy as jnp
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["cdf", "logpdf", "pdf", "ppf"]


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the uniform density, ``-log(scale)`` inside the interval, -inf outside.

    Example:
        >>> ember.scipy.stats.uniform.logpdf(0.5, 0., 2.)  # -log(2) = -0.6931472
    """
    x, loc, scale = promote_args_inexact("uniform.logpdf", x, loc, scale)
    out = -jnp.log(scale)
    return jnp.where((x > loc + scale) | (x < loc), -jnp.inf, out)


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Uniform density (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.uniform.pdf(0.5)  # 1.0
    """
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Uniform CDF, ``(x - loc)/scale`` clipped to ``[0, 1]`` (a NaN ``x`` gives 0, as in
    JAX).

    Example:
        >>> ember.scipy.stats.uniform.cdf(0.25)  # 0.25
    """
    x, loc, scale = promote_args_inexact("uniform.cdf", x, loc, scale)
    zero, one = jnp.array(0, x.dtype), jnp.array(1, x.dtype)
    hi = loc + scale
    inside = (x >= loc) & (x <= hi)
    out = jnp.where(inside, (x - loc) / scale, zero)
    return jnp.where(x < loc, zero, jnp.where(x > hi, one, out))


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Uniform quantile function, ``loc + scale q``; NaN outside ``[0, 1]``.

    Example:
        >>> ember.scipy.stats.uniform.ppf(0.25, 0., 2.)  # 0.5
    """
    q, loc, scale = promote_args_inexact("uniform.ppf", q, loc, scale)
    out = loc + scale * q
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), jnp.nan, out)
