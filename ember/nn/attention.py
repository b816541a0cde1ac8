"""``dot_product_attention`` (JAX's ``implementation='xla'`` semantics, grouped-query heads)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import dtypes, lax
from ember import numpy as jnp
from ember.nn.functions import logsumexp, softmax

Array = Any
ArrayLike = Any

__all__ = ["dot_product_attention"]


def _ensure_4d(t: ArrayLike) -> Array:
    t = jnp.asarray(t)
    if t.ndim < 4:
        t = jnp.expand_dims(t, tuple(range(4 - t.ndim)))
    return t


def _check(t: Array | None, shape: Sequence[int], dtype: Any, name: str) -> None:
    if t is None:
        return
    if t.ndim != len(shape):
        raise ValueError(f"{name} ndim should be {len(shape)}, but got {t.ndim}")
    if dtype is not None and np.dtype(t.dtype) != np.dtype(dtype):
        raise ValueError(f"{name} dtype should be {np.dtype(dtype)}, but got {t.dtype}")
    for want, got in zip(shape, t.shape):
        if want != -1 and want != got:
            raise ValueError(f"{name} shape should be {tuple(shape)}: but got {t.shape}")


def _large_negative(dtype: Any) -> Array:
    # Finite in float32 (the softmax's dtype) even for float64 logits.
    big = min(float(dtypes.finfo(dtype).max), float(np.finfo(np.float32).max))
    return jnp.asarray(-0.7 * big, dtype=dtype)


def _grouped(t: Array | None, K: int, G: int) -> Array | None:
    """A (B, N|1, T, S) bias or mask as (B, K|1, G|1, T, S) to broadcast against logits."""
    if t is None:
        return None
    tB, tN, tT, tS = t.shape
    if tN == 1:
        return t[:, :, None]
    if tN != K * G:
        raise ValueError(f"dot_product_attention: bias/mask head dimension {tN} should be 1 or "
                         f"the number of query heads {K * G}")
    return jnp.reshape(t, (tB, K, G, tT, tS))


def dot_product_attention(query: ArrayLike, key: ArrayLike, value: ArrayLike,
                          bias: ArrayLike | None = None, mask: ArrayLike | None = None, *,
                          scale: float | None = None, is_causal: bool = False,
                          query_seq_lengths: ArrayLike | None = None,
                          key_value_seq_lengths: ArrayLike | None = None,
                          local_window_size: int | tuple[int, int] | None = None,
                          implementation: str | None = None,
                          return_residual: bool = False) -> Array | tuple[Array, Array]:
    """Scaled dot-product attention, ``softmax(scale * Q K^T + bias, masked) V``.

    Shapes use B batch, T query length, S key length, N query heads, K key/value heads (N a
    multiple of K: grouped-query attention), H head size; leading B (and N) may be omitted.

    Args:
        query: (B, T, N, H). key, value: (B, S, K, H).
        bias: added to the logits, broadcastable to (B, N, T, S).
        mask: boolean, broadcastable to (B, N, T, S); False positions are excluded.
        scale: logit scale (default ``1/sqrt(H)``).
        is_causal: exclude keys after each query (lower-triangular mask).
        query_seq_lengths, key_value_seq_lengths: int32 (B,) valid lengths (padding masks).
        local_window_size: ``(left, right)`` (or one int for both) sliding-window mask.
        implementation: ``None`` or ``'xla'`` (``'cudnn'`` needs a GPU).
        return_residual: also return the logsumexp of the masked logits, (B, T, N).

    Returns:
        The attention output with the shape of ``query`` (and the residual if asked).

    Example:
        >>> q = jnp.ones((1, 2, 1, 4))
        >>> ember.nn.dot_product_attention(q, q, q).shape
        (1, 2, 1, 4)
    """
    if implementation not in (None, "xla"):
        if implementation == "cudnn":
            raise ValueError("dot_product_attention: implementation='cudnn' needs a GPU; "
                             "use 'xla' or None")
        raise ValueError(f"Unsupported implementation option: {implementation}")
    output_shape = jnp.asarray(query).shape
    q, k, v = _ensure_4d(query), _ensure_4d(key), _ensure_4d(value)
    bias = _ensure_4d(bias) if bias is not None else None
    mask = _ensure_4d(mask) if mask is not None else None
    q_len = jnp.asarray(query_seq_lengths) if query_seq_lengths is not None else None
    kv_len = jnp.asarray(key_value_seq_lengths) if key_value_seq_lengths is not None else None
    if isinstance(local_window_size, int):
        local_window_size = (local_window_size, local_window_size)
    B, S, K, H = k.shape
    _check(v, [B, S, K, H], k.dtype, "value")
    _check(q, [B, -1, -1, H], k.dtype, "query")
    _check(mask, [-1] * 4, np.bool_, "mask")
    _check(bias, [-1] * 4, None, "bias")
    _check(q_len, [B], np.int32, "query_seq_lengths")
    _check(kv_len, [B], np.int32, "key_value_seq_lengths")
    T, N = q.shape[1], q.shape[2]
    if N % K != 0:
        raise ValueError("The number of query heads must be a multiple of key/value heads, "
                         f"but got {N} vs {K}")
    G = N // K
    scale = 1.0 / np.sqrt(H) if scale is None else scale

    qg = jnp.reshape(q, (B, T, K, G, H))
    logits_dtype = jnp.promote_types(q.dtype, np.float32)
    logits = jnp.einsum("BTKGH,BSKH->BKGTS", qg, k, preferred_element_type=logits_dtype)
    logits = logits * jnp.array(scale, dtype=logits.dtype)
    if bias is not None:
        logits = (logits + _grouped(bias, K, G)).astype(logits.dtype)

    keep = None

    def both(a, b):
        return b if a is None else jnp.logical_and(a, b)

    if mask is not None:
        keep = both(keep, _grouped(mask, K, G))
    if is_causal:
        keep = both(keep, jnp.tril(jnp.ones((T, S), dtype=bool)))
    if local_window_size is not None:
        left, right = local_window_size
        qpos = jnp.arange(T)[:, None]
        kpos = jnp.arange(S)[None, :]
        keep = both(keep, (qpos <= kpos + left) & (qpos >= kpos - right))
    if q_len is not None or kv_len is not None:
        pad = jnp.ones((B, 1, 1, T, S), dtype=bool)
        if q_len is not None:
            pad = pad & (jnp.arange(T)[None, :, None] < q_len[:, None, None])[:, None, None]
        if kv_len is not None:
            pad = pad & (jnp.arange(S)[None, None, :] < kv_len[:, None, None])[:, None, None]
        keep = both(keep, pad)
    if keep is not None:
        keep = jnp.broadcast_to(keep, logits.shape)
        logits = jnp.where(keep, logits, _large_negative(logits.dtype))

    # The softmax is always computed in float32.
    logits32 = logits.astype(np.float32)
    probs = softmax(logits32, axis=-1).astype(k.dtype)
    encoded = jnp.einsum("BKGTS,BSKH->BTKGH", probs, v)
    if q_len is not None:
        valid = jnp.arange(T)[None, :] < q_len[:, None]
        encoded = encoded * valid[:, :, None, None, None].astype(encoded.dtype)
    out = jnp.reshape(encoded, output_shape)
    if return_residual:
        lse = logsumexp(logits32, axis=-1).astype(k.dtype)  # (B, K, G, T)
        lse = jnp.reshape(jnp.transpose(lse, (0, 3, 1, 2)), (B, T, N))
        return out, jnp.reshape(lax.stop_gradient(lse), output_shape[:-1])
    return out
