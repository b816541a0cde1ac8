"""The truncated normal distribution (``jax.scipy.stats.truncnorm``): a normal with mean
``loc`` and deviation ``scale`` restricted to standardized bounds ``[a, b]`` (NaN for
``a >= b``)."""

from __future__ import annotations

from ember import numpy as jnp
from ember.nn.functions import logsumexp
from ember.scipy import special
from ember.scipy.stats import norm
from ember.scipy.stats._common import Array, ArrayLike, promote_args_inexact

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def _log_sub_exp(x: Array, y: Array) -> Array:
    """``log(exp(x) - exp(y))``."""
    return logsumexp(jnp.stack([x, y]), axis=0,
                     b=jnp.stack([jnp.ones_like(x), -jnp.ones_like(y)]))


def _log_gauss_mass(a: Array, b: Array) -> Array:
    """``log(Phi(b) - Phi(a))`` for ``a <= b``, accurate in both tails and in the middle."""
    a, b = jnp.broadcast_arrays(jnp.asarray(a), jnp.asarray(b))
    right = a > 0
    central = ~((b <= 0) | right)
    # A right-tail interval is mirrored into the left tail, where log_ndtr is accurate.
    lo = jnp.where(right, -b, a)
    hi = jnp.where(right, -a, b)
    tail = _log_sub_exp(special.log_ndtr(hi), special.log_ndtr(lo))
    # An interval around 0 holds most of the mass: 1 - (both tails) avoids cancellation.
    middle = jnp.log1p(-special.ndtr(a) - special.ndtr(-b))
    return jnp.where(central, middle, tail)


def logpdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
           scale: ArrayLike = 1) -> Array:
    """Log of the truncated normal density; -inf outside the bounds.

    Example:
        >>> ember.scipy.stats.truncnorm.logpdf(0., -1., 1.)  # -0.53722346
    """
    x, a, b, loc, scale = promote_args_inexact("truncnorm.logpdf", x, a, b, loc, scale)
    out = norm.logpdf(x, loc, scale) - _log_gauss_mass(a, b)
    z = (x - loc) / scale
    out = jnp.where((z < a) | (z > b), -jnp.inf, out)
    return jnp.where(a >= b, jnp.nan, out)


def pdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
        scale: ArrayLike = 1) -> Array:
    """Truncated normal density (``exp(logpdf)``).

    Example:
        >>> ember.scipy.stats.truncnorm.pdf(0., -1., 1.)  # 0.5843685
    """
    return jnp.exp(logpdf(x, a, b, loc, scale))


def logcdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
           scale: ArrayLike = 1) -> Array:
    """Log of the truncated normal CDF.

    Example:
        >>> ember.scipy.stats.truncnorm.logcdf(0., -1., 1.)  # log(0.5)
    """
    x, a, b, loc, scale = promote_args_inexact("truncnorm.logcdf", x, a, b, loc, scale)
    x, a, b = jnp.broadcast_arrays(x, a, b)
    z = (x - loc) / scale
    total = _log_gauss_mass(a, b)
    log_c = _log_gauss_mass(a, z) - total
    log_s = _log_gauss_mass(z, b) - total
    # Near 1, 1 - sf is the accurate form (as SciPy does).
    out = jnp.where(z > a, log_c, 0.0)  # (a NaN z matches no case: 0, as in JAX)
    out = jnp.where(log_c > -0.1, jnp.log1p(-jnp.exp(log_s)), out)
    out = jnp.where(z <= a, -jnp.inf, out)
    out = jnp.where(z >= b, 0.0, out)
    return jnp.where(a >= b, jnp.nan, out)


def cdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
        scale: ArrayLike = 1) -> Array:
    """Truncated normal CDF (``exp(logcdf)``).

    Example:
        >>> ember.scipy.stats.truncnorm.cdf(0., -1., 1.)  # 0.5
    """
    return jnp.exp(logcdf(x, a, b, loc, scale))


def logsf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
          scale: ArrayLike = 1) -> Array:
    """Log of the truncated normal survival function (the CDF of the mirrored
    distribution).

    Example:
        >>> ember.scipy.stats.truncnorm.logsf(0., -1., 1.)  # log(0.5)
    """
    x, a, b, loc, scale = promote_args_inexact("truncnorm.logsf", x, a, b, loc, scale)
    return logcdf(-x, -b, -a, -loc, scale)


def sf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
       scale: ArrayLike = 1) -> Array:
    """Truncated normal survival function (``exp(logsf)``).

    Example:
        >>> ember.scipy.stats.truncnorm.sf(0., -1., 1.)  # 0.5
    """
    return jnp.exp(logsf(x, a, b, loc, scale))
