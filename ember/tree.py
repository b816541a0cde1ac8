"""``ember.tree``: the short names of the pytree utilities, as ``jax.tree``.

Each name is its ``ember.tree_util`` counterpart (``tree.map`` is ``tree_util.tree_map``,
...), so code written as ``jax.tree.map(f, params)`` runs unchanged; only ``all`` differs
(``is_leaf`` keyword-only, as in JAX), and ``static`` marks a dataclass field static. See
:mod:`ember.tree_util` for the semantics.

Example:
    >>> import ember
    >>> ember.tree.map(lambda x: x * 2, {'a': 1, 'b': (2, 3)})
    {'a': 2, 'b': (4, 6)}
    >>> ember.tree.leaves_with_path([1, {'k': 2}])
    [((SequenceKey(idx=0),), 1), ((SequenceKey(idx=1), DictKey(key='k')), 2)]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ember import tree_util

__all__ = [
    "all",
    "broadcast",
    "flatten",
    "flatten_with_path",
    "leaves",
    "leaves_with_path",
    "map",
    "map_with_path",
    "reduce",
    "reduce_associative",
    "static",
    "structure",
    "transpose",
    "unflatten",
]


def all(tree: Any, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every leaf is truthy (``tree_util.tree_all``).

    Example:
        >>> all([True, {'a': 1}])
        True
    """
    return tree_util.tree_all(tree, is_leaf=is_leaf)


# (The same functions: their signatures are jax.tree's.)
broadcast = tree_util.tree_broadcast
flatten = tree_util.tree_flatten
flatten_with_path = tree_util.tree_flatten_with_path
leaves = tree_util.tree_leaves
leaves_with_path = tree_util.tree_leaves_with_path
map = tree_util.tree_map  # noqa: A001 - jax.tree's name
map_with_path = tree_util.tree_map_with_path
reduce = tree_util.tree_reduce
reduce_associative = tree_util.tree_reduce_associative
structure = tree_util.tree_structure
transpose = tree_util.tree_transpose
unflatten = tree_util.tree_unflatten


def static(**kwargs: Any) -> Any:
    """A ``dataclasses.field`` marked static (``metadata={'static': True}``), so that
    ``tree_util.register_dataclass`` makes it a meta field (part of the treedef) instead of
    a child. Takes the arguments of ``dataclasses.field``; given ``metadata`` is kept.

    Example:
        >>> @tree_util.register_dataclass
        ... @dataclasses.dataclass
        ... class Layer:
        ...     w: Any
        ...     act: str = static(default='relu')
        >>> flatten(Layer(1))
        ([1], PyTreeDef(CustomNode(Layer[('relu',)], [*])))
    """
    metadata = {"static": True, **(kwargs.pop("metadata", None) or {})}
    return dataclasses.field(metadata=metadata, **kwargs)
