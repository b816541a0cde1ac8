"""Shape primitives: broadcast_in_dim, reshape (more are added beside them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import core
from ember.lax import base
from ember.lax.base import check_shape, standard_primitive

# ---------------------------------------------------------------- broadcast_in_dim


def _broadcast_in_dim_impl(x, *, shape, broadcast_dimensions):
    expanded = [1] * len(shape)
    for src, dst in enumerate(broadcast_dimensions):
        expanded[dst] = x.shape[src]
    return np.broadcast_to(np.reshape(x, expanded), shape)


def _broadcast_in_dim_shape(x, *, shape, broadcast_dimensions):
    name = "broadcast_in_dim"
    if len(broadcast_dimensions) != x.ndim:
        raise TypeError(f"{name}: broadcast_dimensions {broadcast_dimensions} must have one "
                        f"entry per operand dimension (operand shape {x.shape})")
    if any(not 0 <= d < len(shape) for d in broadcast_dimensions):
        raise TypeError(f"{name}: broadcast_dimensions {broadcast_dimensions} out of range "
                        f"for target shape {shape}")
    if list(broadcast_dimensions) != sorted(set(broadcast_dimensions)):
        raise TypeError(f"{name}: broadcast_dimensions {broadcast_dimensions} must be strictly "
                        "increasing")
    for src, dst in enumerate(broadcast_dimensions):
        if x.shape[src] not in (1, shape[dst]):
            raise TypeError(f"{name}: operand dimension {src} of size {x.shape[src]} cannot "
                            f"be broadcast to size {shape[dst]} (operand shape {x.shape}, "
                            f"target shape {shape})")
    return shape


broadcast_in_dim_p = standard_primitive(
    "broadcast_in_dim", _broadcast_in_dim_impl, _broadcast_in_dim_shape,
    lambda x, **_: x.dtype)


def broadcast_in_dim(operand: Any, shape: Sequence[int],
                     broadcast_dimensions: Sequence[int]) -> Any:
    """Broadcasts ``operand`` to ``shape``; operand dim i maps to ``broadcast_dimensions[i]``.

    Example:
        >>> lax.broadcast_in_dim(jnp.ones(3), (2, 3), (1,)).shape
        (2, 3)
    """
    operand = base.as_operand(operand, "broadcast_in_dim")
    shape = check_shape("broadcast_in_dim", "shape", shape)
    dims = tuple(int(d) for d in broadcast_dimensions)
    aval = core.get_aval(operand)
    if aval.shape == shape and dims == tuple(range(len(shape))) and \
            not isinstance(operand, (int, float, complex, np.ndarray, np.generic)):
        return operand
    return broadcast_in_dim_p.bind(operand, shape=shape, broadcast_dimensions=dims)


def broadcast(operand: Any, sizes: Sequence[int]) -> Any:
    """Adds leading dimensions of the given sizes."""
    aval = core.get_aval(base.as_operand(operand, "broadcast"))
    sizes = check_shape("broadcast", "sizes", sizes)
    dims = tuple(range(len(sizes), len(sizes) + aval.ndim))
    return broadcast_in_dim(operand, sizes + aval.shape, dims)


def broadcast_to_shape(operand: Any, shape: Sequence[int]) -> Any:
    """NumPy-style broadcast (trailing alignment) of ``operand`` to ``shape``."""
    aval = core.get_aval(operand)
    shape = tuple(shape)
    if aval.shape == shape:
        return operand
    nlead = len(shape) - aval.ndim
    if nlead < 0:
        raise ValueError(f"cannot broadcast an array of shape {aval.shape} to {shape}")
    return broadcast_in_dim(operand, shape, tuple(range(nlead, len(shape))))


# ---------------------------------------------------------------- reshape


def _reshape_shape(x, *, new_sizes, dimensions):
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise TypeError(f"reshape total size must be unchanged, got new_sizes {new_sizes} for "
                        f"shape {x.shape}.")
    if dimensions is not None and sorted(dimensions) != list(range(x.ndim)):
        raise TypeError(f"reshape dimensions must be a permutation of the operand dimensions, "
                        f"got {dimensions} for shape {x.shape}")
    return tuple(new_sizes)


def _reshape_impl(x, *, new_sizes, dimensions):
    if dimensions is not None:
        x = np.transpose(x, dimensions)
    return np.reshape(x, new_sizes)


reshape_p = standard_primitive("reshape", _reshape_impl, _reshape_shape, lambda x, **_: x.dtype)


def reshape(operand: Any, new_sizes: Sequence[int],
            dimensions: Sequence[int] | None = None) -> Any:
    """Reshapes ``operand`` (row-major), optionally transposing by ``dimensions`` first.

    Example:
        >>> lax.reshape(jnp.arange(6), (2, 3)).shape
        (2, 3)
    """
    operand = base.as_operand(operand, "reshape")
    new_sizes = check_shape("reshape", "new_sizes", new_sizes)
    dims = None if dimensions is None else tuple(int(d) for d in dimensions)
    aval = core.get_aval(operand)
    if dims is not None and dims == tuple(range(aval.ndim)):
        dims = None
    if aval.shape == new_sizes and dims is None and hasattr(operand, "aval"):
        return operand
    return reshape_p.bind(operand, new_sizes=new_sizes, dimensions=dims)
