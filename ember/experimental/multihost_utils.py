"""``ember.experimental.multihost_utils``: helpers for programs run by several processes.

ember runs as one process on one device, so each helper is what JAX computes with one
process: gathers add (or keep) the process axis of size 1, broadcasts return their input.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import _pytree
from ember.runtime.array import Array
from ember.runtime.array import device_put as _device_put

__all__ = ["broadcast_one_to_all", "global_array_to_host_local_array",
           "host_local_array_to_global_array", "process_allgather", "sync_global_devices"]


def broadcast_one_to_all(in_tree: Any, is_source: bool | None = None) -> Any:
    """Process 0's values for every process (one process: ``in_tree`` as arrays).

    Example:
        >>> from ember.experimental import multihost_utils
        >>> multihost_utils.broadcast_one_to_all(np.ones(2))
        Array([1., 1.], dtype=float32)
    """
    return _pytree.tree_map(lambda x: _device_put(np.asarray(x)), in_tree)


def sync_global_devices(name: str) -> None:
    """Waits until every process reaches this point (one process: returns at once)."""
    if not isinstance(name, str):
        raise TypeError(f"sync_global_devices: name must be a string, got {name!r}")


def process_allgather(in_tree: Any, tiled: bool = False) -> Any:
    """Every process's values as NumPy arrays, stacked along a new leading process axis
    (``tiled=False``) or concatenated along the first axis (``tiled=True``).

    Example:
        >>> multihost_utils.process_allgather(jnp.ones(2)).shape
        (1, 2)
    """
    def gather(x):
        value = np.asarray(x)
        return value if tiled else value[None]
    return _pytree.tree_map(gather, in_tree)


def _check_specs(local_inputs: Any, global_mesh: Any, pspecs: Any, api: str) -> list:
    from ember.sharding import Mesh, broadcast_shardings
    if not isinstance(global_mesh, Mesh):
        raise TypeError(f"{api}: global_mesh must be a jax.sharding.Mesh, got {global_mesh!r}")
    return broadcast_shardings(pspecs, local_inputs, api, "pspecs")


def host_local_array_to_global_array(local_inputs: Any, global_mesh: Any,
                                     pspecs: Any) -> Any:
    """This process's arrays as global arrays sharded as ``pspecs`` over ``global_mesh``
    (one process: the same values, carrying ``NamedSharding(global_mesh, spec)``)."""
    from ember.sharding import NamedSharding, PartitionSpec, placed
    specs = _check_specs(local_inputs, global_mesh, pspecs, "host_local_array_to_global_array")
    leaves, treedef = _pytree.tree_flatten(local_inputs)
    outs = []
    for x, spec in zip(leaves, specs):
        s = NamedSharding(global_mesh, spec if spec is not None else PartitionSpec())
        out = x if type(x) is Array else _device_put(np.asarray(x))
        s.check_rank(out.ndim, "host_local_array_to_global_array args")
        outs.append(placed(out, s))
    return _pytree.tree_unflatten(treedef, outs)


def global_array_to_host_local_array(global_inputs: Any, global_mesh: Any,
                                     pspecs: Any) -> Any:
    """Global arrays as this process's local arrays (one process: the same values, over
    the mesh's local devices)."""
    return host_local_array_to_global_array(global_inputs, global_mesh, pspecs)
