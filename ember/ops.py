"""ember.ops: segment reductions (``segment_sum``, ``segment_prod``, ``segment_max``,
``segment_min``), as ``jax.ops``.

Each is a scatter of ``data`` into an output filled with the reduction's identity, so empty
segments hold the identity (0, 1, the lowest and the highest value of the dtype) and
out-of-range segment ids are dropped (``mode`` 'fill'/'drop', the default) or clamped
('clip'). Negative ids are out of range; they do not count from the end.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember import core, dtypes

__all__ = ["segment_sum", "segment_prod", "segment_max", "segment_min"]


def _identity(kind: str, dtype: np.dtype) -> Any:
    if kind == "add":
        return 0
    if kind == "mul":
        return 1
    if dtype == dtypes.bool_:
        return kind == "min"
    if dtypes.is_integer(dtype):
        info = np.iinfo(dtype)
        return info.max if kind == "min" else info.min
    return np.inf if kind == "min" else -np.inf


def _num_segments(name: str, num_segments: Any, segment_ids: Any) -> int:
    if num_segments is None:
        if isinstance(segment_ids, core.Tracer):
            raise core.ConcretizationTypeError(
                f"{name}: the num_segments argument must be given when segment_ids is traced "
                "(under jit, vmap or grad); pass it as a static Python integer.")
        ids = np.asarray(segment_ids)
        num_segments = int(ids.max()) + 1 if ids.size else 0
    if isinstance(num_segments, core.Tracer):
        raise core.ConcretizationTypeError(
            f"{name}: num_segments must be a concrete integer, got a traced value.")
    if isinstance(num_segments, bool) or not isinstance(num_segments, (int, np.integer)):
        raise TypeError(f"{name}: num_segments must be an integer, got {num_segments!r}")
    if num_segments < 0:
        raise ValueError("num_segments must be non-negative.")
    return int(num_segments)


def _segment_update(name: str, kind: str, data: Any, segment_ids: Any, num_segments: Any,
                    indices_are_sorted: bool, unique_indices: bool, bucket_size: Any,
                    mode: Any) -> Any:
    for arg, v in (("data", data), ("segment_ids", segment_ids)):
        if isinstance(v, (list, tuple)):
            raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(v).__name__}"
                            f" at position {0 if arg == 'data' else 1}.")
    data = jnp.asarray(data)
    segment_ids = jnp.asarray(segment_ids)
    if not dtypes.is_integer(segment_ids.dtype):
        raise TypeError(f"{name}: segment_ids must be an integer array, got {segment_ids.dtype}")
    if segment_ids.ndim < 1 or segment_ids.shape != data.shape[:segment_ids.ndim]:
        raise ValueError(f"{name}: segment_ids of shape {segment_ids.shape} must be a prefix of "
                         f"the shape of data {data.shape}")
    n = _num_segments(name, num_segments, segment_ids)
    mode = "fill" if mode is None else mode
    trailing = data.shape[segment_ids.ndim:]
    fill = _identity(kind, data.dtype)
    if bucket_size is None:
        out = jnp.full((n,) + trailing, fill, dtype=data.dtype)
        return getattr(out.at[segment_ids], kind)(
            data, indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
            mode=mode, wrap_negative_indices=False)
    # Buckets of ``bucket_size`` consecutive entries are reduced separately, then combined:
    # shorter accumulation chains (better rounding for long sums and products).
    if segment_ids.ndim != 1:
        raise ValueError(f"{name}: bucket_size needs one-dimensional segment_ids")
    bucket_size = int(bucket_size)
    if bucket_size <= 0:
        raise ValueError(f"{name}: bucket_size must be positive, got {bucket_size}")
    m = segment_ids.shape[0]
    nb = -(-m // bucket_size)
    out = jnp.full((nb, n) + trailing, fill, dtype=data.dtype)
    bucket = jnp.arange(m) // bucket_size
    out = getattr(out.at[bucket, segment_ids], kind)(
        data, indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
        wrap_negative_indices=False)
    reducer = {"add": jnp.sum, "mul": jnp.prod, "max": jnp.max, "min": jnp.min}[kind]
    return reducer(out, axis=0).astype(data.dtype)


_DOC = """The {what} of the entries of ``data`` within each segment.

    Args:
        data: the values; its leading ``segment_ids.ndim`` dimensions are indexed by segment.
        segment_ids: integer segment of each entry (ids outside ``[0, num_segments)`` are
            dropped unless ``mode='clip'``).
        num_segments: the number of segments (static). Default ``max(segment_ids) + 1``,
            which needs concrete ``segment_ids``.
        indices_are_sorted: whether ``segment_ids`` is sorted (a hint).
        unique_indices: whether ``segment_ids`` has no repeats (a hint).
        bucket_size: reduce buckets of this many entries separately, then combine them.
        mode: out-of-bounds handling, a ``lax.GatherScatterMode`` or its name.

    Returns:
        An array of shape ``(num_segments,) + data.shape[segment_ids.ndim:]``; empty
        segments hold {empty}.

    Example:
        >>> ember.ops.{name}(jnp.arange(6), jnp.array([0, 0, 1, 1, 2, 2]), num_segments=4)
        {example}
    """


def _make(name: str, kind: str, what: str, empty: str, example: str):
    def fn(data: Any, segment_ids: Any, num_segments: int | None = None,
           indices_are_sorted: bool = False, unique_indices: bool = False,
           bucket_size: int | None = None, mode: Any = None) -> Any:
        return _segment_update(name, kind, data, segment_ids, num_segments,
                               indices_are_sorted, unique_indices, bucket_size, mode)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = _DOC.format(what=what, empty=empty, name=name, example=example)
    return fn


segment_sum = _make("segment_sum", "add", "sum", "0", "Array([1, 5, 9, 0], dtype=int32)")
segment_prod = _make("segment_prod", "mul", "product", "1",
                     "Array([ 0,  6, 20,  1], dtype=int32)")
segment_max = _make("segment_max", "max", "maximum",
                    "the lowest value of the dtype (-inf for floats)",
                    "Array([          1,           3,           5, -2147483648], dtype=int32)")
segment_min = _make("segment_min", "min", "minimum",
                    "the highest value of the dtype (+inf for floats)",
                    "Array([         0,          2,          4, 2147483647], dtype=int32)")
