"""Shape helpers of convolutions: conv_shape_tuple, conv_general_shape_tuple, ...

Pure shape arithmetic on Python integers, as JAX's helpers of the same names (no tracing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ember.lax.convolution import (
    ConvDimensionNumbers,
    _conv_transpose_padding,
    _spec_from_string,
    padtype_to_pads,
)

__all__ = ["conv_shape_tuple", "conv_general_shape_tuple", "conv_transpose_shape_tuple",
           "conv_general_permutations"]


def _ints(xs: Sequence[Any]) -> tuple[int, ...]:
    return tuple(int(x) for x in xs)


def conv_general_permutations(dimension_numbers: Any) -> tuple[tuple[int, ...], ...]:
    """The (lhs, rhs, out) permutations of a triple of layout strings, relative to the
    canonical ``(N, C, spatial...)`` / ``(O, I, spatial...)`` orders.

    Example:
        >>> lax.conv_general_permutations(("NHWC", "HWIO", "NHWC"))
        ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    """
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return tuple(_ints(s) for s in dimension_numbers)
    if (not isinstance(dimension_numbers, (tuple, list)) or len(dimension_numbers) != 3
            or not all(isinstance(s, str) for s in dimension_numbers)):
        raise TypeError("conv_general_permutations: dimension_numbers must be a tuple of three "
                        f"strings such as ('NHWC', 'HWIO', 'NHWC'), got {dimension_numbers!r}")
    lhs, rhs, out = dimension_numbers
    if not len(lhs) == len(rhs) == len(out):
        raise TypeError("conv_general_permutations: the three dimension_numbers strings must "
                        f"have the same length, got {tuple(dimension_numbers)}")
    return tuple(_spec_from_string(dimension_numbers))


def conv_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                     strides: Sequence[int], pads: Any,
                     batch_group_count: int = 1) -> tuple[int, ...]:
    """The output shape of a convolution with operands in canonical (NC..., OI...) layout.

    ``pads`` is a padding string ('SAME', 'VALID', 'SAME_LOWER') or ``(low, high)`` pairs.

    Example:
        >>> lax.conv_shape_tuple((2, 3, 10, 10), (4, 3, 3, 3), (1, 1), "SAME")
        (2, 4, 10, 10)
    """
    lhs_shape, rhs_shape, strides = _ints(lhs_shape), _ints(rhs_shape), _ints(strides)
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError("Wrong number of explicit pads for convolution: expected "
                        f"{len(lhs_shape) - 2}, got {len(pads)}.")
    padded = [n + int(lo) + int(hi) for n, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(p < 0 for p in padded):
        raise ValueError("Negative padding is larger than the size of the corresponding "
                         f"dimension: got padding={pads} for lhs_shape[2:]={lhs_shape[2:]}")
    # A window that does not fit gives size 0 (JAX's stride_dim).
    space = tuple(max(0, (p - k) // s + 1)
                  for p, k, s in zip(padded, rhs_shape[2:], strides))
    batch = lhs_shape[0]
    if batch_group_count > 1:
        if batch % batch_group_count:
            raise ValueError(f"conv_shape_tuple: lhs batch dimension {batch} is not a "
                             f"multiple of batch_group_count={batch_group_count}")
        batch //= batch_group_count
    return (batch, rhs_shape[0]) + space


def _permute(shape: Sequence[int], perm: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(shape[i]) for i in perm)


def _unpermute(shape: Sequence[int], perm: Sequence[int]) -> tuple[int, ...]:
    out = [0] * len(perm)
    for d, i in zip(shape, perm):
        out[i] = d
    return tuple(out)


def conv_general_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                             window_strides: Sequence[int], padding: Any,
                             dimension_numbers: Any) -> tuple[int, ...]:
    """The output shape of a convolution with operand layouts given by
    ``dimension_numbers`` (e.g. ``('NHWC', 'HWIO', 'NHWC')``).

    Example:
        >>> lax.conv_general_shape_tuple((2, 10, 10, 3), (3, 3, 3, 4), (1, 1), "VALID",
        ...                              ("NHWC", "HWIO", "NHWC"))
        (2, 8, 8, 4)
    """
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    out = conv_shape_tuple(_permute(lhs_shape, lhs_perm), _permute(rhs_shape, rhs_perm),
                           window_strides, padding)
    return _unpermute(out, out_perm)


def conv_transpose_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                               window_strides: Sequence[int], padding: Any,
                               dimension_numbers: Any) -> tuple[int, ...]:
    """The output shape of ``lax.conv_transpose`` with these operands and settings.

    Example:
        >>> lax.conv_transpose_shape_tuple((2, 3, 10, 10), (4, 3, 3, 3), (2, 2), "SAME",
        ...                                ("NCHW", "OIHW", "NCHW"))
        (2, 4, 20, 20)
    """
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    lhs_t, rhs_t = _permute(lhs_shape, lhs_perm), _permute(rhs_shape, rhs_perm)
    strides = _ints(window_strides)
    if isinstance(padding, str):
        padding = [_conv_transpose_padding(k, s, padding) for k, s in zip(rhs_t[2:], strides)]
    space = tuple((i - 1) * s - k + 2 + int(lo) + int(hi)
                  for i, k, s, (lo, hi) in zip(lhs_t[2:], rhs_t[2:], strides, padding))
    return _unpermute((lhs_t[0], rhs_t[0]) + space, out_perm)
