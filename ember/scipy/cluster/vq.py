"""``jax.scipy.cluster.vq``: assigning observations to the nearest code-book entry."""

from __future__ import annotations

from typing import Any

from ember import numpy as jnp
from ember.numpy._util import check_arraylike, promote_dtypes_inexact

Array = Any
ArrayLike = Any

__all__ = ["vq"]


def vq(obs: ArrayLike, code_book: ArrayLike,
       check_finite: bool = True) -> tuple[Array, Array]:
    """Assigns each observation to its nearest code (``scipy.cluster.vq.vq``).

    Args:
        obs: observations, shape ``(M,)`` or ``(M, N)`` (M observations of N features).
        code_book: codes of the same rank, shape ``(K,)`` or ``(K, N)``.
        check_finite: accepted for SciPy compatibility and ignored (as in JAX).

    Returns:
        ``(code, dist)``: for each observation the index of the nearest code (int32) and the
        Euclidean distance to it (real, the inputs' inexact precision).

    Example:
        >>> code, dist = ember.scipy.cluster.vq.vq(jnp.array([[0., 0.], [3., 4.]]),
        ...                                        jnp.array([[1., 0.], [3., 3.]]))
        >>> code, dist
        (Array([0, 1], dtype=int32), Array([1., 1.], dtype=float32))
    """
    del check_finite  # (JAX ignores it too: the check would need concrete values)
    check_arraylike("scipy.cluster.vq.vq", obs, code_book)
    obs, code_book = promote_dtypes_inexact(obs, code_book)
    if obs.ndim != code_book.ndim:
        raise ValueError("Observation and code_book should have the same rank")
    if obs.ndim == 1:
        obs, code_book = obs[:, None], code_book[:, None]
    if obs.ndim != 2:
        raise ValueError("ndim different than 1 or 2 are not supported")
    if obs.shape[1] != code_book.shape[1]:
        raise ValueError(f"scipy.cluster.vq.vq: obs has {obs.shape[1]} features but "
                         f"code_book has {code_book.shape[1]}")
    # (M, K) distances; |.| keeps complex inputs' distances real, as a norm does.
    dist = jnp.sqrt(jnp.sum(jnp.abs(obs[:, None, :] - code_book[None, :, :]) ** 2, axis=-1))
    code = jnp.argmin(dist, axis=-1)
    return code, jnp.take_along_axis(dist, code[:, None], axis=-1)[:, 0]
