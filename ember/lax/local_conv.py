"""``conv_general_dilated_local``: the unshared (locally connected) convolution.

Each output location has its own kernel: the input's patches (``conv_general_dilated_patches``)
are contracted with the kernel over the fused (channel, tap) dimension, batched over the output
spatial locations. Composed of existing primitives, so its derivatives and batching follow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ember import core
from ember.lax import base
from ember.lax.convolution import conv_dimension_numbers, conv_general_dilated_patches
from ember.lax.dot import canonicalize_precision, dot_general
from ember.lax.shape import transpose

_FN = "conv_general_dilated_local"


def conv_general_dilated_local(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                               filter_shape: Sequence[int],
                               lhs_dilation: Sequence[int] | None = None,
                               rhs_dilation: Sequence[int] | None = None,
                               dimension_numbers: Any = None, precision: Any = None) -> Any:
    """Unshared convolution: a separate kernel at every output spatial location.

    Args:
        lhs: the input, rank ``n + 2``.
        rhs: the kernels, rank ``n + 2``: its spatial dimensions are the *output* spatial
            locations, its ``I`` dimension fuses the input channel with the receptive window
            (``channel * prod(filter_shape) + tap``, taps in ``filter_shape`` order), its
            ``O`` dimension holds the output features.
        window_strides: the ``n`` strides between windows.
        padding: ``'SAME'``, ``'VALID'``, ``'SAME_LOWER'`` or ``n`` ``(low, high)`` pairs.
        filter_shape: the ``n`` sizes of the receptive window, in ``rhs_spec``'s order.
        lhs_dilation: ``n`` input dilation factors (None: 1).
        rhs_dilation: ``n`` window dilation factors (None: 1).
        dimension_numbers: None, a ``ConvDimensionNumbers`` or ``(lhs_spec, rhs_spec,
            out_spec)`` strings (None: ``NCHW``/``OIHW``/``NCHW``).
        precision: None, a ``Precision`` or a pair of them (dot algorithms are refused).

    Returns:
        The convolution, laid out as ``out_spec``.

    Example:
        >>> x = jnp.ones((1, 2, 5))                      # N C W
        >>> k = jnp.ones((4, 2 * 3, 3))                  # O (C*3) out_W
        >>> lax.conv_general_dilated_local(x, k, (1,), "VALID", (3,)).shape
        (1, 4, 3)
    """
    lhs = base.as_operand(lhs, _FN, "lhs")
    rhs = base.as_operand(rhs, _FN, "rhs")
    la, ra = core.get_aval(lhs), core.get_aval(rhs)
    if la.ndim < 2 or ra.ndim != la.ndim:
        raise TypeError(f"{_FN}: lhs and rhs must have the same rank n + 2 >= 2, got lhs shape "
                        f"{la.shape} and rhs shape {ra.shape}")
    c_precision = canonicalize_precision(precision, _FN)
    if c_precision is not None and not isinstance(c_precision, tuple):
        raise ValueError(f"Unsupported precision for {_FN}: {precision}")
    patches = conv_general_dilated_patches(
        lhs, filter_shape, window_strides, padding, lhs_dilation, rhs_dilation,
        dimension_numbers, None if c_precision is None else c_precision[0])
    n = la.ndim - 2
    _, rhs_spec, out_spec = conv_dimension_numbers(la.shape, (1, 1) + tuple(filter_shape),
                                                   dimension_numbers)
    pshape = core.get_aval(patches).shape
    want = (tuple(pshape[d] for d in out_spec[2:]), pshape[out_spec[1]])
    got = (tuple(ra.shape[d] for d in rhs_spec[2:]), ra.shape[rhs_spec[1]])
    if want != got:
        raise TypeError(f"{_FN}: rhs shape {ra.shape} does not match the output spatial shape "
                        f"{want[0]} and the fused input dimension of size {want[1]} "
                        f"(in_channels * prod(filter_shape))")
    # Spatial locations are dot batch dims (in spatial order), then lhs's N, then rhs's O.
    dn = (((out_spec[1],), (rhs_spec[1],)), (tuple(out_spec[2:]), tuple(rhs_spec[2:])))
    out = dot_general(patches, rhs, dn, c_precision)
    perm = [0] * (n + 2)
    perm[out_spec[0]], perm[out_spec[1]] = n, n + 1
    for i in range(n):
        perm[out_spec[2 + i]] = i
    return transpose(out, tuple(perm))


__all__ = ["conv_general_dilated_local"]
