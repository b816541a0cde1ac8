"""More of ``jax.scipy.special``: the Box-Cox transforms and ``bessel_jn`` (Bessel functions of
the first kind of integer order, by Miller's backward recurrence), written on lax and
``ember.numpy`` so they trace, jit, vmap and differentiate.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ember import core, lax
from ember import numpy as jnp
from ember.numpy._util import promote_args_inexact

Array = Any
ArrayLike = Any

__all__ = ["bessel_jn", "boxcox", "boxcox1p"]


def _real(fn: str, *args: ArrayLike) -> list[Array]:
    out = promote_args_inexact(fn, *args)
    if jnp.issubdtype(out[0].dtype, np.complexfloating):
        raise TypeError(f"{fn} does not accept dtype {np.dtype(out[0].dtype)}. Accepted "
                        "dtypes are subtypes of floating.")
    return out


def _boxcox_of_log(log_x: Array, lmbda: Array) -> Array:
    # (x**l - 1) / l as expm1(l log x) / l: no cancellation for small l; log x at l == 0.
    zero = lmbda == 0
    safe = jnp.where(zero, jnp.ones_like(lmbda), lmbda)
    return jnp.where(zero, log_x, jnp.expm1(safe * log_x) / safe)


def boxcox(x: ArrayLike, lmbda: ArrayLike) -> Array:
    """The Box-Cox transform ``(x**lmbda - 1) / lmbda``, ``log(x)`` at ``lmbda == 0``
    (NaN for negative ``x``).

    Args:
        x: positive input.
        lmbda: the power.

    Example:
        >>> ember.scipy.special.boxcox(jnp.array([1., 4.]), 0.5)
        Array([0., 2.], dtype=float32)
    """
    x, lmbda = _real("boxcox", x, lmbda)
    return _boxcox_of_log(jnp.log(x), lmbda)


def boxcox1p(x: ArrayLike, lmbda: ArrayLike) -> Array:
    """The Box-Cox transform of ``1 + x``, accurate for small ``x`` (NaN for ``x < -1``).

    Args:
        x: input greater than -1.
        lmbda: the power.

    Example:
        >>> ember.scipy.special.boxcox1p(jnp.array([0., 3.]), 0.5)
        Array([0., 2.], dtype=float32)
    """
    x, lmbda = _real("boxcox1p", x, lmbda)
    return _boxcox_of_log(jnp.log1p(x), lmbda)


_RESCALE = 1e4  # backward-recurrence values are scaled back to 1 past this (float32 range,
# with room for the second-order tangents, which grow like (n / z)**2 times the values)


def _bessel_jn_miller(z: Array, v: int, n_iter: int) -> Array:
    """J_0..J_v at z != 0 by Miller's algorithm: the recurrence
    f_{k-1} = 2k/z f_k - f_{k+1} run downward from k = n_iter with an arbitrary tiny start,
    then normalized by J_0 + 2 (J_2 + J_4 + ...) = 1. Values are rescaled whenever they grow
    past ``_RESCALE`` (the result is a ratio: any scale cancels), so float32 does not overflow."""
    f_next = jnp.zeros_like(z)   # f_{k+1}
    f_cur = jnp.full_like(z, 1e-30)  # f_k
    norm = jnp.zeros_like(z)
    kept: list[Array | None] = [None] * (v + 1)
    for k in range(n_iter, 0, -1):
        f_prev = (2.0 * k) * f_cur / z - f_next
        f_next, f_cur = f_cur, f_prev  # now f_cur = f_{k-1}
        if (k - 1) % 2 == 0 and k - 1 > 0:
            norm = norm + 2.0 * f_cur
        if k - 1 <= v:
            kept[k - 1] = f_cur
        # Rescale everything carried (and the orders already kept) together.
        big = jnp.abs(f_cur) > _RESCALE
        scale = jnp.where(big, 1.0 / jnp.where(big, jnp.abs(f_cur), 1.0), 1.0)
        f_cur, f_next, norm = f_cur * scale, f_next * scale, norm * scale
        kept = [None if j is None else j * scale for j in kept]
    if n_iter <= v:  # orders above the start are 0 in this truncation
        kept = [jnp.zeros_like(z) if j is None else j for j in kept]
    norm = norm + f_cur  # + f_0
    return jnp.stack(kept) / norm


def bessel_jn(z: ArrayLike, *, v: int, n_iter: int = 50) -> Array:
    """Bessel functions of the first kind ``J_0(z), ..., J_v(z)`` of real ``z``.

    Args:
        z: real input.
        v: the highest order (a concrete non-negative integer).
        n_iter: where the backward recurrence starts (more for larger ``|z|``: it must
            exceed ``|z|`` comfortably).

    Returns:
        An array of shape ``(v + 1, *z.shape)``, row ``k`` holding ``J_k(z)``.

    Example:
        >>> ember.scipy.special.bessel_jn(jnp.array([1.]), v=1)
        Array([[0.7651977 ],
               [0.44005057]], dtype=float32)
    """
    z = jnp.asarray(z)
    (z,) = promote_args_inexact("bessel_jn", z)
    if jnp.issubdtype(z.dtype, np.complexfloating):
        raise ValueError("complex input not supported.")
    try:
        v = operator.index(core.concrete_or_error(v, "Argument v of bessel_jn."))
        n_iter = operator.index(core.concrete_or_error(n_iter, "Argument n_iter of bessel_jn."))
    except TypeError:
        raise TypeError(f"bessel_jn: v and n_iter must be integers, got v={v!r}, "
                        f"n_iter={n_iter!r}") from None
    if v < 0:
        raise ValueError(f"bessel_jn: v must be non-negative, got {v}")
    if n_iter < 1:
        raise ValueError(f"bessel_jn: n_iter must be positive, got {n_iter}")
    # J_k(-z) = (-1)^k J_k(z); at z == 0, J_0 = 1 and the others vanish.
    az = jnp.abs(z)
    zero = az == 0
    vals = _bessel_jn_miller(jnp.where(zero, jnp.ones_like(az), az), v, n_iter)
    signs = np.array([(-1.0) ** k for k in range(v + 1)]).reshape((v + 1,) + (1,) * z.ndim)
    vals = jnp.where(z < 0, vals * signs.astype(z.dtype), vals)
    at_zero = np.eye(v + 1, 1).reshape((v + 1,) + (1,) * z.ndim).astype(z.dtype)
    return lax.convert_element_type(jnp.where(zero, at_zero, vals), z.dtype)
