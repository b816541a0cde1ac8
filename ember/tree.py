"""``ember.tree``: the short names of the pytree utilities, as ``jax.tree``.

Each function is a thin wrapper over its ``ember.tree_util`` counterpart (``tree.map`` is
``tree_util.tree_map``, ...) with JAX's signature, so code written as
``jax.tree.map(f, params)`` runs unchanged. See :mod:`ember.tree_util` for the semantics.

Example:
    >>> import ember
    >>> ember.tree.map(lambda x: x * 2, {'a': 1, 'b': (2, 3)})
    {'a': 2, 'b': (4, 6)}
    >>> ember.tree.leaves_with_path([1, {'k': 2}])
    [((SequenceKey(idx=0),), 1), ((SequenceKey(idx=1), DictKey(key='k')), 2)]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from ember import tree_util
from ember.tree_util import _MISSING, KeyPath, PyTreeDef

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
    return tree_util.tree_all(tree, is_leaf)


def flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list[Any], PyTreeDef]:
    """``(leaves, treedef)`` of a pytree (``tree_util.tree_flatten``).

    Example:
        >>> flatten({'b': 2, 'a': [1, None]})
        ([1, 2], PyTreeDef({'a': [*, None], 'b': *}))
    """
    return tree_util.tree_flatten(tree, is_leaf)


def leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """The leaves of a pytree, in flattening order (``tree_util.tree_leaves``).

    Example:
        >>> leaves((1, {'b': 3, 'a': 2}))
        [1, 2, 3]
    """
    return tree_util.tree_leaves(tree, is_leaf)


def map(
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """Applies ``f`` leafwise to ``tree`` and the matching subtrees of ``rest``
    (``tree_util.tree_map``).

    Example:
        >>> map(lambda x, y: x + y, (1, [2]), (10, [20]))
        (11, [22])
    """
    return tree_util.tree_map(f, tree, *rest, is_leaf=is_leaf)


def reduce(
    function: Callable[[Any, Any], Any],
    tree: Any,
    initializer: Any = _MISSING,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """Reduces the leaves left to right with ``function`` (``tree_util.tree_reduce``).

    Example:
        >>> reduce(lambda a, b: a + b, [1, (2, 3)], 10)
        16
    """
    return tree_util.tree_reduce(function, tree, initializer, is_leaf)


def reduce_associative(
    operation: Callable[[Any, Any], Any],
    tree: Any,
    *,
    identity: Any = _MISSING,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """Reduces the leaves as a balanced tree of ``operation`` calls
    (``tree_util.tree_reduce_associative``).

    Example:
        >>> reduce_associative(lambda a, b: a + b, [1, 2, 3])
        6
    """
    return tree_util.tree_reduce_associative(operation, tree, identity=identity, is_leaf=is_leaf)


def structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    """The treedef of a pytree (``tree_util.tree_structure``).

    Example:
        >>> structure((1, [2]))
        PyTreeDef((*, [*]))
    """
    return tree_util.tree_structure(tree, is_leaf)


def transpose(
    outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None, pytree_to_transpose: Any
) -> Any:
    """Swaps the outer and inner levels of a tree of trees (``tree_util.tree_transpose``).

    Example:
        >>> transpose(structure([0, 0]), structure((0, 0)), [(1, 2), (3, 4)])
        ([1, 3], [2, 4])
    """
    return tree_util.tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose)


def unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    """Builds a pytree of structure ``treedef`` (``tree_util.tree_unflatten``).

    Example:
        >>> unflatten(structure({'a': 0, 'b': 0}), [1, 2])
        {'a': 1, 'b': 2}
    """
    return tree_util.tree_unflatten(treedef, leaves)


def flatten_with_path(
    tree: Any,
    is_leaf: Callable[..., bool] | None = None,
    is_leaf_takes_path: bool = False,
) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """``([(path, leaf), ...], treedef)`` (``tree_util.tree_flatten_with_path``).

    Example:
        >>> flatten_with_path({'a': 1})
        ([((DictKey(key='a'),), 1)], PyTreeDef({'a': *}))
    """
    return tree_util.tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)


def leaves_with_path(
    tree: Any,
    is_leaf: Callable[..., bool] | None = None,
    is_leaf_takes_path: bool = False,
) -> list[tuple[KeyPath, Any]]:
    """The ``(path, leaf)`` pairs of a pytree (``tree_util.tree_leaves_with_path``).

    Example:
        >>> leaves_with_path((1,))
        [((SequenceKey(idx=0),), 1)]
    """
    return tree_util.tree_leaves_with_path(tree, is_leaf, is_leaf_takes_path)


def map_with_path(
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[..., bool] | None = None,
    is_leaf_takes_path: bool = False,
) -> Any:
    """Like :func:`map`, with each leaf's key path as ``f``'s first argument
    (``tree_util.tree_map_with_path``).

    Example:
        >>> map_with_path(lambda p, x: tree_util.keystr(p), {'a': [0]})
        {'a': ["['a'][0]"]}
    """
    return tree_util.tree_map_with_path(
        f, tree, *rest, is_leaf=is_leaf, is_leaf_takes_path=is_leaf_takes_path
    )


def broadcast(
    prefix_tree: Any, full_tree: Any, is_leaf: Callable[[Any], bool] | None = None
) -> Any:
    """Repeats each leaf of ``prefix_tree`` over its subtree of ``full_tree``
    (``tree_util.tree_broadcast``).

    Example:
        >>> broadcast((1, 2), (0, [0, 0]))
        (1, [2, 2])
    """
    return tree_util.tree_broadcast(prefix_tree, full_tree, is_leaf)


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
