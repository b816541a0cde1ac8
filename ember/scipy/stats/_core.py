"""``mode``, ``rankdata`` and ``sem`` (``jax.scipy.stats``' array statistics).

``mode`` and ``rankdata`` sort once and find runs of equal values with cumulative max/min
scans, so they trace, jit and vmap with static shapes.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ember import dtypes, lax
from ember import numpy as jnp
from ember.numpy._util import canonicalize_axis, check_arraylike, promote_args_inexact
from ember.scipy.stats._common import Array, ArrayLike

__all__ = ["ModeResult", "mode", "rankdata", "sem"]


class ModeResult(NamedTuple):
    """The result of :func:`mode`: the most common value and how often it occurs."""

    mode: Array
    count: Array


def _check_nan_policy(fn: str, nan_policy: str) -> None:
    if nan_policy not in ("propagate", "omit", "raise"):
        raise ValueError(f"Illegal nan_policy value {nan_policy!r}; expected one of "
                         "{'propagate', 'omit', 'raise'}")
    if nan_policy == "omit":
        raise NotImplementedError(f"{fn}: logic for `nan_policy` of omit is not implemented")
    if nan_policy == "raise":
        raise NotImplementedError(
            f"{fn}: nan_policy='raise' would need to inspect the values; check for NaNs "
            f"outside of `{fn}`.")


def _runs(s: Array) -> tuple[Array, Array, Array]:
    """For ``s`` sorted along its last axis (2-D): whether each element starts a run of
    equal values (NaNs count as equal), and the first and last index of its run."""
    differs = s[:, 1:] != s[:, :-1]
    if jnp.issubdtype(s.dtype, np.inexact):
        differs = differs & ~(jnp.isnan(s[:, 1:]) & jnp.isnan(s[:, :-1]))
    edge = jnp.ones((s.shape[0], 1), bool)
    new = jnp.concatenate([edge, differs], axis=1)
    last = jnp.concatenate([differs, edge], axis=1)
    idx = lax.broadcasted_iota(np.int32, s.shape, 1)
    start = lax.cummax(jnp.where(new, idx, 0), axis=1)
    end = lax.cummin(jnp.where(last, idx, s.shape[1]), axis=1, reverse=True)
    return new, start, end


def mode(a: ArrayLike, axis: int | None = 0, nan_policy: str = "propagate",
         keepdims: bool = False) -> ModeResult:
    """The most common value along ``axis`` (the smallest one on ties) and its count.

    Args:
        a: input array.
        axis: the axis to reduce; None for the flattened array.
        nan_policy: only ``'propagate'`` is supported (NaNs count as one value).
        keepdims: keep the reduced axis with length 1.

    Returns:
        A ``ModeResult(mode, count)``.

    Example:
        >>> ember.scipy.stats.mode(jnp.array([1, 2, 2, 3]))  # ModeResult(mode=2, count=2)
    """
    check_arraylike("mode", a)
    x = jnp.atleast_1d(a)
    _check_nan_policy("mode", nan_policy)
    if axis is None:
        out_shape = (1,) * x.ndim if keepdims else ()
        x = x.ravel()[:, None]
    else:
        axis = canonicalize_axis("mode", axis, x.ndim)
        out_shape = tuple(1 if i == axis else d for i, d in enumerate(x.shape)
                          if keepdims or i != axis)
        x = jnp.moveaxis(x, axis, 0)
        x = x.reshape(x.shape[0], math.prod(x.shape[1:]))
    if x.shape[0] == 0:  # nothing to count: NaN, with a float count of 0, as JAX
        fdt = dtypes.canonicalize_dtype(np.float64)
        return ModeResult(jnp.full(out_shape, np.nan, fdt), jnp.zeros(out_shape, fdt))
    s = jnp.sort(x.T, axis=-1)  # (columns, n)
    _, start, end = _runs(s)
    # The count of each run, stored at its last element (0 elsewhere); argmax takes the
    # first maximum, i.e. the smallest of the most common values.
    is_last = end == lax.broadcasted_iota(np.int32, s.shape, 1)
    counts = jnp.where(is_last, end - start + 1, 0)
    best = jnp.argmax(counts, axis=-1)
    vals = jnp.take_along_axis(s, best[:, None], axis=-1)[:, 0]
    cnt = jnp.max(counts, axis=-1).astype(dtypes.canonicalize_dtype(np.int64))
    return ModeResult(vals.reshape(out_shape), cnt.reshape(out_shape))


def _rank_rows(a: Array, method: str) -> Array:
    """Ranks along the last axis of a 2-D ``a``."""
    out_dtype = dtypes.canonicalize_dtype(np.float64)
    order = jnp.argsort(a, axis=-1, stable=True)
    inv = jnp.argsort(order, axis=-1, stable=True)  # each element's place in sorted order
    if method == "ordinal":
        ranks = (inv + 1).astype(out_dtype)
    else:
        new, start, end = _runs(jnp.take_along_axis(a, order, axis=-1))
        sorted_ranks = {
            "dense": lambda: jnp.cumsum(new, axis=-1).astype(out_dtype),
            "min": lambda: (start + 1).astype(out_dtype),
            "max": lambda: (end + 1).astype(out_dtype),
            "average": lambda: 0.5 * (start + end + 2).astype(out_dtype),
        }[method]()
        ranks = jnp.take_along_axis(sorted_ranks, inv, axis=-1)
    has_nan = jnp.any(jnp.isnan(a), axis=-1, keepdims=True)
    return jnp.where(has_nan, jnp.array(np.nan, out_dtype), ranks)


def rankdata(a: ArrayLike, method: str = "average", *, axis: int | None = None,
             nan_policy: str = "propagate") -> Array:
    """Ranks of the data, 1-based, with ties resolved by ``method``.

    Args:
        a: input array.
        method: ``'average'``, ``'min'``, ``'max'``, ``'dense'`` or ``'ordinal'``.
        axis: rank along this axis; None ranks the flattened array.
        nan_policy: only ``'propagate'`` (a slice holding a NaN ranks as all NaN).

    Returns:
        Float ranks (the default float dtype), shaped like ``a`` (flat when ``axis`` is
        None).

    Example:
        >>> ember.scipy.stats.rankdata(jnp.array([3, 1, 3, 2]))  # [3.5, 1., 3.5, 2.]
    """
    check_arraylike("rankdata", a)
    _check_nan_policy("rankdata", nan_policy)
    if method not in ("average", "min", "max", "dense", "ordinal"):
        raise ValueError(f"unknown method '{method}'")
    a = jnp.asarray(a)
    if axis is None:
        return _rank_rows(a.ravel()[None, :], method)[0]
    axis = canonicalize_axis("rankdata", axis, a.ndim)
    moved = jnp.moveaxis(a, axis, -1)
    ranks = _rank_rows(moved.reshape(-1, moved.shape[-1]), method)
    return jnp.moveaxis(ranks.reshape(moved.shape), -1, axis)


def sem(a: ArrayLike, axis: int | None = 0, ddof: int = 1, nan_policy: str = "propagate",
        *, keepdims: bool = False) -> Array:
    """Standard error of the mean, ``std(a, ddof) / sqrt(count)``.

    Args:
        a: input array.
        axis: axis to reduce (None: all elements).
        ddof: delta degrees of freedom of the standard deviation.
        nan_policy: ``'propagate'`` or ``'omit'`` (ignore NaNs).
        keepdims: keep the reduced axis with length 1.

    Example:
        >>> ember.scipy.stats.sem(jnp.array([1., 2., 3., 4.]))  # 0.6454972
    """
    b, = promote_args_inexact("sem", a)
    if nan_policy == "propagate":
        size = b.size if axis is None else b.shape[axis]
        return b.std(axis, ddof=ddof, keepdims=keepdims) / jnp.sqrt(size).astype(b.dtype)
    if nan_policy == "omit":
        count = (~jnp.isnan(b)).sum(axis, keepdims=keepdims)
        return (jnp.nanstd(b, axis, ddof=ddof, keepdims=keepdims)
                / jnp.sqrt(count).astype(b.dtype))
    raise ValueError(f"{nan_policy} is not supported")
