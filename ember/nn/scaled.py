"""Block-scaled matrix products (microscaling formats): jax.nn's ``scaled_matmul``,
``scaled_dot_general`` and ``get_scaled_dot_general_config``.

ember has no float8/float4 array types, so quantization is emulated: values are rounded to
the grid of the config's data type (round to nearest even, saturated to its largest finite
value) and block scales to their scale type, all held in float32; the product is then the
exact float32 product of those values, which is what a float8 kernel accumulating in float32
computes. A config's ``data_type``/``scale_type`` are the ml_dtypes types JAX names.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, Literal

import ml_dtypes
import numpy as np

import ember.numpy as jnp
from ember import lax
from ember.custom_derivatives import custom_vjp
from ember.lax.dot import canonicalize_dimension_numbers

_F32 = np.dtype(np.float32)


@dataclasses.dataclass
class BlockScaleConfig:
    """How an operand is quantized: blocks of ``block_size`` contracting elements share one
    scale of ``scale_type``; elements are rounded to ``data_type``."""

    mode: str
    block_size: int
    data_type: Any
    scale_type: Any
    global_scale: Any
    infer_only: bool


def get_scaled_dot_general_config(mode: Literal["nvfp4", "mxfp8"],
                                  global_scale: Any = None) -> BlockScaleConfig:
    """The quantization config of ``mode`` for ``scaled_dot_general``.

    Args:
        mode: ``'mxfp8'`` (float8_e4m3fn data, power-of-two float8_e8m0fnu scales, blocks of
            32) or ``'nvfp4'`` (float4_e2m1fn data, float8_e4m3fn scales, blocks of 16, and a
            float32 ``global_scale``, default 1).
        global_scale: nvfp4's extra per-tensor scale, a float32 array of shape (1,).

    Example:
        >>> jax.nn.get_scaled_dot_general_config('mxfp8').block_size
        32
    """
    if mode == "nvfp4":
        return BlockScaleConfig(
            mode="nvfp4", block_size=16, data_type=np.dtype(ml_dtypes.float4_e2m1fn),
            scale_type=np.dtype(ml_dtypes.float8_e4m3fn),
            global_scale=jnp.ones((1,), np.float32) if global_scale is None else global_scale,
            infer_only=False)
    if mode == "mxfp8":
        return BlockScaleConfig(
            mode="mxfp8", block_size=32, data_type=np.dtype(ml_dtypes.float8_e4m3fn),
            scale_type=np.dtype(ml_dtypes.float8_e8m0fnu), global_scale=None,
            infer_only=False)
    raise ValueError(f"Unsupported mode: {mode}")


# ---------------------------------------------------------------- scaled_matmul


def _repeat_last(s: Any, k: int) -> Any:
    """Block scales ``[..., kb]`` expanded to ``[..., k]`` (each repeated ``k // kb`` times)."""
    kb = s.shape[-1]
    wide = lax.broadcast_in_dim(s, s.shape + (k // kb,), tuple(range(s.ndim)))
    return lax.reshape(wide, s.shape[:-1] + (k,))


def scaled_matmul(lhs: Any, rhs: Any, lhs_scales: Any, rhs_scales: Any,
                  preferred_element_type: Any = np.float32) -> Any:
    """Block-scaled batched matmul ``einsum('BMK,BNK->BMN', lhs * ls, rhs * rs)``, where each
    scale entry covers ``K // K_scale`` consecutive contracting elements. Computed in float32.

    Args:
        lhs: ``(B, M, K)``.
        rhs: ``(B, N, K)``.
        lhs_scales: ``(B, M, K_a)``, ``K`` a multiple of ``K_a``.
        rhs_scales: ``(B, N, K_b)``, ``K`` a multiple of ``K_b``.
        preferred_element_type: the result dtype (default float32).

    Returns:
        ``(B, M, N)``.

    Example:
        >>> a = jnp.array([1., 2., 3.]).reshape(1, 1, 3)
        >>> b = jnp.array([4., 5., 6.]).reshape(1, 1, 3)
        >>> s = jnp.full((1, 1, 1), 0.5)
        >>> jax.nn.scaled_matmul(a, b, s, s)
        Array([[[8.]]], dtype=float32)
    """
    a, b, sa, sb = (jnp.asarray(x) for x in (lhs, rhs, lhs_scales, rhs_scales))
    if not all(x.ndim == 3 for x in (a, b, sa, sb)):
        raise ValueError("scaled_matmul requires all inputs to be 3-dimensional arrays")
    (ba, m, ka), (bb, n, kb) = a.shape, b.shape
    if ka != kb or ba != bb:
        raise ValueError("scaled_matmul requires inputs a and b to have matching batch (B) "
                         f"and contract (K) dimensions, but got shapes {a.shape} and "
                         f"{b.shape}")
    if sa.shape[2] != sb.shape[2] or sa.shape[0] != sb.shape[0]:
        raise ValueError("scaled_matmul requires scales to have matching batch (B) and "
                         f"contract (K) dimensions, but got shapes {sa.shape} and "
                         f"{sb.shape}")
    if sa.shape[1] != m or sb.shape[1] != n:
        raise ValueError("scaled_matmul requires scales to match non-contract dimensions of "
                         f"inputs, but got shapes a: {a.shape}, b: {b.shape}, a_scales: "
                         f"{sa.shape}, b_scales: {sb.shape}")
    if sa.shape[0] != ba or sa.shape[2] == 0 or ka % sa.shape[2]:
        raise ValueError(f"scaled_matmul requires the scales' batch size to match and K "
                         f"({ka}) to be a multiple of the scales' K ({sa.shape[2]})")
    out_dtype = np.dtype(jnp.dtype(preferred_element_type))
    a = a.astype(_F32) * _repeat_last(sa.astype(_F32), ka)
    b = b.astype(_F32) * _repeat_last(sb.astype(_F32), ka)
    out = lax.dot_general(a, b, (((2,), (2,)), ((0,), (0,))), preferred_element_type=_F32)
    return out.astype(out_dtype)


# ---------------------------------------------------------------- quantization (emulated)


def _round_to(x: Any, dtype: np.dtype) -> Any:
    """float32 ``x`` rounded to the nearest value of the float format ``dtype`` (ties to
    even), saturated at its largest finite value."""
    info = ml_dtypes.finfo(dtype)
    big = float(info.max)
    x = jnp.clip(x, -big, big)
    _, e = jnp.frexp(x)                                   # |x| = f * 2**e, f in [0.5, 1)
    e = jnp.maximum(e - 1, int(info.minexp))              # subnormals share the lowest ulp
    ulp = jnp.ldexp(jnp.ones_like(x), e - int(info.nmant))
    return jnp.clip(jnp.round(x / ulp) * ulp, -big, big)


def _pow2_round_up(x: Any, near_zero: float) -> Any:
    """float8_e8m0fnu's rounding of a positive float32 scale: up to a power of two (values
    already powers of two, float32 subnormals at most 2**-127, and 2**127 stay)."""
    bits = lax.bitcast_convert_type(x.astype(_F32), np.uint32)
    exp = lax.shift_right_logical(bits, np.uint32(23))
    mant = bits & np.uint32(0x7FFFFF)
    up = (mant > 0) & (exp != 0xFE) & ~((exp == 0) & (mant <= 0x400000))
    exp = jnp.where(up, exp + np.uint32(1), exp)
    val = lax.bitcast_convert_type(lax.shift_left(exp, np.uint32(23)), np.float32)
    return jnp.where(val == 0, np.float32(near_zero), val)


def _quantize(x: Any, config: BlockScaleConfig) -> tuple[Any, Any]:
    """``x`` of shape (B, M, K) as (rounded values, per-block scales (B, M, K / block))."""
    b, m, k = x.shape
    bs = config.block_size
    if k < bs or k % bs:
        raise ValueError(f"scaled_dot_general: the contracting size {k} must be a multiple of "
                         f"the block size {bs} of mode {config.mode!r}")
    dt = np.dtype(config.data_type)
    big = float(ml_dtypes.finfo(dt).max)
    x = x.reshape(b, m, k // bs, bs).astype(_F32)
    if config.mode == "mxfp8":
        amax = jnp.max(jnp.abs(x), axis=-1, keepdims=True) / np.float32(big)
        scales = _pow2_round_up(amax, 2.0 ** -127)
    elif config.mode == "nvfp4":
        x = x / jnp.asarray(config.global_scale, _F32)
        scale_max = float(ml_dtypes.finfo(np.dtype(config.scale_type)).max)
        amax = jnp.max(jnp.abs(x), axis=-1, keepdims=True) / np.float32(big)
        scales = _round_to(jnp.clip(amax, 0, scale_max), np.dtype(config.scale_type))
    else:
        raise ValueError(f"Unrecognized mode: {config.mode}.")
    q = _round_to(x / scales, dt)
    return q.reshape(b, m, k), scales.reshape(b, m, k // bs)


# ---------------------------------------------------------------- scaled_dot_general


def _to_3d(x: Any, contract: Sequence[int], batch: Sequence[int]) -> Any:
    """``x`` transposed to (batch, free, contracting) and flattened to (B, M, K)."""
    free = [d for d in range(x.ndim) if d not in contract and d not in batch]
    order = sorted(batch) + free + sorted(contract)
    sizes = [math.prod(x.shape[d] for d in ds) for ds in (batch, free, contract)]
    return jnp.transpose(x, order).reshape(sizes)


def _free_shape(x: Any, contract: Sequence[int], batch: Sequence[int]) -> list[int]:
    return [x.shape[d] for d in range(x.ndim) if d not in contract and d not in batch]


def _quantized_dot(x: Any, y: Any, x_dims: tuple, y_dims: tuple, out_dtype: np.dtype,
                   x_config: BlockScaleConfig, y_config: BlockScaleConfig,
                   quantize: bool = True) -> Any:
    """(B, Mx, Ny)-shaped product of x and y, normalized by ``(contract, batch)`` dims."""
    x3, y3 = _to_3d(x, *x_dims), _to_3d(y, *y_dims)
    if not quantize:
        return lax.dot_general(x3, y3, (((2,), (2,)), ((0,), (0,))),
                               preferred_element_type=out_dtype)
    (xq, xs), (yq, ys) = _quantize(x3, x_config), _quantize(y3, y_config)
    nv = x_config.mode == "nvfp4"
    out = scaled_matmul(xq, yq, xs, ys, _F32 if nv else out_dtype)
    if nv:
        out = out * (jnp.asarray(x_config.global_scale, _F32)
                     * jnp.asarray(y_config.global_scale, _F32))
    return out.astype(out_dtype)


def _sdg_impl(lhs, rhs, dn, out_dtype, configs):
    (lc, rc), (lb, rb) = dn
    out = _quantized_dot(lhs, rhs, (lc, lb), (rc, rb), out_dtype, configs[0], configs[1])
    shape = [lhs.shape[d] for d in lb] + _free_shape(lhs, lc, lb) + _free_shape(rhs, rc, rb)
    return out.reshape(shape)


def _sdg_grad(g, x, y, x_dims, y_dims, out_dtype, configs, swap):
    """Cotangent of ``x`` (dims ``x_dims = (contract, batch)``) from ``g``."""
    (xc, yc), (xb, yb) = (x_dims[0], y_dims[0]), (x_dims[1], y_dims[1])
    x_free = [d for d in range(x.ndim) if d not in xc and d not in xb]
    y_free = [d for d in range(y.ndim) if d not in yc and d not in yb]
    nb = len(xb)
    g_batch = list(range(nb))
    if swap:
        g_y = list(range(nb, nb + len(y_free)))
    else:
        g_y = list(range(nb + len(x_free), nb + len(x_free) + len(y_free)))
    quantize = configs[0].mode != "nvfp4"
    out = _quantized_dot(g, y, (g_y, g_batch), (y_free, yb), out_dtype, configs[0], configs[1],
                         quantize)
    g_free = [d for d in range(g.ndim) if d not in g_y and d not in g_batch]
    shape = ([g.shape[d] for d in g_batch] + [g.shape[d] for d in g_free]
             + [y.shape[d] for d in sorted(yc)])
    out = out.reshape(shape)
    # (batch, x free, x contracting in the order of y's sorted contracting dims) -> x order
    yc_sorted = sorted(yc)
    xc_by_y = [xc[list(yc).index(d)] for d in yc_sorted]
    perm = np.argsort(list(xb) + x_free + xc_by_y)
    return jnp.transpose(out, tuple(int(p) for p in perm)).astype(x.dtype)


def _sdg_fn(dn: tuple, out_dtype: np.dtype, configs: tuple) -> Any:
    """The quantized product for fixed dimension numbers, dtype and configs, with JAX's
    backward pass (cotangents quantized with ``configs[2]``)."""
    @custom_vjp
    def sdg(lhs, rhs):
        return _sdg_impl(lhs, rhs, dn, out_dtype, configs)

    def fwd(lhs, rhs):
        return _sdg_impl(lhs, rhs, dn, out_dtype, configs), (lhs, rhs)

    def bwd(res, g):
        lhs, rhs = res
        (lc, rc), (lb, rb) = dn
        g_lhs = _sdg_grad(g, lhs, rhs, (lc, lb), (rc, rb), out_dtype,
                          [configs[2], configs[1]], swap=False)
        g_rhs = _sdg_grad(g, rhs, lhs, (rc, rb), (lc, lb), out_dtype,
                          [configs[2], configs[0]], swap=True)
        if configs[2].mode == "nvfp4":
            # Straight-through estimator: inputs clipped by the quantization get no gradient.
            def keep(x, c):
                big = (float(ml_dtypes.finfo(np.dtype(c.data_type)).max)
                       * float(ml_dtypes.finfo(np.dtype(c.scale_type)).max))
                return jnp.abs(x) <= jnp.asarray(c.global_scale, _F32) * big
            g_lhs = jnp.where(keep(lhs, configs[0]), g_lhs, 0)
            g_rhs = jnp.where(keep(rhs, configs[1]), g_rhs, 0)
        return g_lhs, g_rhs

    sdg.defvjp(fwd, bwd)
    return sdg


def scaled_dot_general(lhs: Any, rhs: Any, dimension_numbers: Any,
                       preferred_element_type: Any = np.float32,
                       configs: list[BlockScaleConfig] | None = None,
                       implementation: Any = None) -> Any:
    """``dot_general`` of block-quantized operands: each operand is quantized with its config
    (``configs[0]`` for lhs, ``configs[1]`` for rhs; ``configs[2]`` quantizes the output
    cotangent in the backward pass) and the quantized values are multiplied with their scales.
    Without ``configs`` this is ``lax.dot_general``.

    Args:
        lhs, rhs: float arrays.
        dimension_numbers: ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``.
        preferred_element_type: the result dtype: float32 (default), bfloat16 or float16.
        configs: three ``BlockScaleConfig`` (see ``get_scaled_dot_general_config``), or None.
        implementation: ignored (deprecated in JAX).

    Example:
        >>> cfg = [jax.nn.get_scaled_dot_general_config('mxfp8')] * 3
        >>> x = jnp.ones((2, 4, 64))
        >>> jax.nn.scaled_dot_general(x, x, (((2,), (2,)), ((0,), (0,))), configs=cfg).shape
        (2, 4, 4)
    """
    if configs is None:
        return lax.dot_general(lhs, rhs, dimension_numbers,
                               preferred_element_type=preferred_element_type)
    out_dtype = np.dtype(jnp.dtype(preferred_element_type))
    if out_dtype not in (np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16),
                         np.dtype(np.float16)):
        raise TypeError("Only support preferred_element_type in (f32, bf16, f16), but got "
                        f"{out_dtype}")
    if len(configs) != 3:
        raise ValueError(f"scaled_dot_general: configs must hold 3 BlockScaleConfig (lhs, "
                         f"rhs, gradient), got {len(configs)}")
    lhs, rhs = jnp.asarray(lhs), jnp.asarray(rhs)
    (lc, rc), (lb, rb) = canonicalize_dimension_numbers(dimension_numbers,
                                                        "scaled_dot_general")
    squeeze = not lb
    if squeeze:  # one unit batch dim, as the batched kernel needs
        lhs, rhs = lhs[..., None], rhs[..., None]
        lb, rb = (lhs.ndim - 1,), (rhs.ndim - 1,)
    out = _sdg_fn(((lc, rc), (lb, rb)), out_dtype, tuple(configs))(lhs, rhs)
    return out[0] if squeeze else out


__all__ = ["get_scaled_dot_general_config", "scaled_dot_general", "scaled_matmul"]
