"""``jax.scipy.integrate``: the composite trapezoidal rule."""

from __future__ import annotations

from typing import Any

from ember import numpy as jnp

Array = Any
ArrayLike = Any

__all__ = ["trapezoid"]


def trapezoid(y: ArrayLike, x: ArrayLike | None = None, dx: ArrayLike = 1.0,
              axis: int = -1) -> Array:
    """Integral of ``y`` along ``axis`` by the composite trapezoidal rule
    (``scipy.integrate.trapezoid``; the same function as ``jnp.trapezoid``).

    Args:
        y: samples of the integrand.
        x: sample positions (1-D along ``axis``, or broadcastable to ``y``); when None the
            samples are ``dx`` apart.
        dx: the spacing of the samples when ``x`` is None.
        axis: the axis to integrate along.

    Returns:
        ``y`` integrated along ``axis`` (that axis removed), in ``y``'s inexact dtype.

    Example:
        >>> ember.scipy.integrate.trapezoid(jnp.array([1., 2., 3.]), dx=0.5)
        Array(2., dtype=float32)
    """
    return jnp.trapezoid(y, x, dx, axis)
