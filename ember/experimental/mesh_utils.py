"""``ember.experimental.mesh_utils``: device grids for ``Mesh`` (ember has one device)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember.runtime.array import devices as _devices

__all__ = ["create_device_mesh", "create_hybrid_device_mesh"]


def _grid(shape: tuple, devices: Sequence[Any] | None) -> np.ndarray:
    devs = list(_devices() if devices is None else devices)
    if len(devs) != math.prod(shape):
        raise ValueError(f"Number of devices {len(devs)} must equal the product of "
                         f"mesh_shape {shape}")
    grid = np.empty(shape, dtype=object)
    grid.flat[:] = devs
    return grid


def create_device_mesh(mesh_shape: Sequence[int], devices: Sequence[Any] | None = None, *,
                       contiguous_submeshes: bool = False,
                       allow_split_physical_axes: bool = False) -> np.ndarray:
    """An array of shape ``mesh_shape`` of the devices (their count must be its product).

    Example:
        >>> from ember.experimental import mesh_utils
        >>> mesh_utils.create_device_mesh((1, 1)).shape
        (1, 1)
    """
    return _grid(tuple(int(s) for s in mesh_shape), devices)


def create_hybrid_device_mesh(mesh_shape: Sequence[int], dcn_mesh_shape: Sequence[int],
                              devices: Sequence[Any] | None = None, *,
                              process_is_granule: bool = False,
                              should_sort_granules_by_key: bool = True,
                              allow_split_physical_axes: bool = False) -> np.ndarray:
    """A device array for a mesh spanning slices: per-slice ``mesh_shape`` times
    ``dcn_mesh_shape`` (elementwise) devices; with one device both must be all ones.

    Example:
        >>> mesh_utils.create_hybrid_device_mesh((1,), (1,)).shape
        (1,)
    """
    mesh_shape, dcn = tuple(mesh_shape), tuple(dcn_mesh_shape)
    if len(mesh_shape) != len(dcn):
        raise ValueError(f"create_hybrid_device_mesh: mesh_shape {mesh_shape} and "
                         f"dcn_mesh_shape {dcn} must have the same length")
    return _grid(tuple(int(a) * int(b) for a, b in zip(mesh_shape, dcn)), devices)
