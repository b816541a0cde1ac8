"""``ember.experimental.shard_map``: JAX's earlier ``shard_map`` signature (``mesh``
positional, ``check_rep`` for ``check_vma``); see ``ember.shard_map``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember import _sharding_api

__all__ = ["shard_map"]


def shard_map(f: Callable, mesh: Any, in_specs: Any, out_specs: Any,
              check_rep: bool = True, auto: Any = frozenset()) -> Callable:
    """``ember.shard_map(f, mesh=mesh, in_specs=..., out_specs=..., check_vma=check_rep)``;
    ``auto`` names mesh axes left automatic (the others are manual).

    Example:
        >>> from ember.experimental.shard_map import shard_map
        >>> mesh = ember.make_mesh((1,), ('x',))
        >>> shard_map(lambda a: lax.psum(a, 'x'), mesh, P('x'), P())(jnp.ones(2))
        Array([1., 1.], dtype=float32)
    """
    auto = frozenset(auto)
    manual = frozenset(n for n in mesh.axis_names if n not in auto)
    return _sharding_api.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                                   axis_names=manual if auto else frozenset(),
                                   check_vma=check_rep)
