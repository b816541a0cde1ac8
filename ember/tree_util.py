"""Pytrees as users see them (``jax.tree_util``): nested containers of leaves, flattened to
a list of leaves plus a structure.

A pytree is a leaf or a container node whose children are pytrees. Built-in nodes are
``tuple``, ``list``, ``dict`` (children in sorted-key order), namedtuples (any ``tuple``
subclass with ``_fields``), ``None`` (a node with no children), ``collections.OrderedDict``
(insertion order) and ``collections.defaultdict`` (sorted keys). More node types are added
with :func:`register_pytree_node` or :func:`register_pytree_node_class`. Anything else is a
leaf, typed PRNG key arrays (``random.key``) included. Semantics follow ``jax.tree_util``.

Example:
    >>> leaves, treedef = tree_flatten((1, {'b': 2, 'a': None}))
    >>> leaves
    [1, 2]
    >>> treedef
    PyTreeDef((*, {'a': None, 'b': *}))
    >>> tree_unflatten(treedef, [10, 20])
    (10, {'a': None, 'b': 20})

The implementation, and ember's own view of pytrees, is :mod:`ember._pytree`. ember's
transformations flatten a key array to its ``uint32`` key data there, so that they carry it as
an ordinary array; the functions here show it whole. Node registrations are shared.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from ember import _pytree
from ember._pytree import (
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    KeyEntry,
    KeyPath,
    Partial,
    PyTreeDef,
    SequenceKey,
    keystr,
    register_dataclass,
    register_pytree_node,
    register_pytree_node_class,
    register_pytree_with_keys,
    register_pytree_with_keys_class,
    register_static,
    tree_unflatten,
    treedef_children,
    treedef_is_leaf,
    treedef_tuple,
)

__all__ = [
    "DictKey",
    "PyTreeRegistry",
    "default_registry",
    "FlattenedIndexKey",
    "GetAttrKey",
    "KeyEntry",
    "KeyPath",
    "Partial",
    "PyTreeDef",
    "SequenceKey",
    "all_leaves",
    "flatten_one_level",
    "flatten_one_level_with_keys",
    "is_tree_node",
    "keystr",
    "register_dataclass",
    "register_pytree_node",
    "register_pytree_node_class",
    "register_pytree_with_keys",
    "register_pytree_with_keys_class",
    "register_static",
    "tree_all",
    "tree_broadcast",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_map",
    "tree_map_with_path",
    "tree_reduce",
    "tree_reduce_associative",
    "tree_structure",
    "tree_transpose",
    "tree_unflatten",
    "treedef_children",
    "treedef_is_leaf",
    "treedef_tuple",
]

# The node kinds of the public view (a dict of ``_pytree``'s that grows with registrations).
_kinds = _pytree.public_kinds


def _documented_as(implementation: Callable) -> Callable:
    """Gives the decorated public function ``implementation``'s docstring."""
    def decorate(f: Callable) -> Callable:
        f.__doc__ = implementation.__doc__
        return f
    return decorate


@_documented_as(_pytree.tree_flatten)
def tree_flatten(
    tree: Any, is_leaf: Callable[[Any], bool] | None = None
) -> tuple[list[Any], PyTreeDef]:
    leaves: list = []
    if is_leaf is None:
        node = _pytree._flatten(tree, leaves, _kinds)
    else:
        node = _pytree._flatten_is_leaf(tree, leaves, is_leaf, _kinds)
    return leaves, PyTreeDef(node, len(leaves))


@_documented_as(_pytree.tree_leaves)
def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    leaves: list = []
    if is_leaf is None:
        _pytree._collect_leaves(tree, leaves, _kinds)
    else:
        _pytree._flatten_is_leaf(tree, leaves, is_leaf, _kinds)
    return leaves


@_documented_as(_pytree.tree_structure)
def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    return tree_flatten(tree, is_leaf)[1]


@_documented_as(_pytree.tree_map)
def tree_map(
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    leaves, treedef = tree_flatten(tree, is_leaf)
    if not rest:
        return treedef.unflatten([f(x) for x in leaves])
    others = [treedef._flatten_up_to(r, "tree_map") for r in rest]
    return treedef.unflatten([f(*xs) for xs in zip(leaves, *others)])


@_documented_as(_pytree.tree_flatten_with_path)
def tree_flatten_with_path(
    tree: Any,
    is_leaf: Callable[..., bool] | None = None,
    is_leaf_takes_path: bool = False,
) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    return _pytree._tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path, _kinds)


@_documented_as(_pytree.tree_leaves_with_path)
def tree_leaves_with_path(
    tree: Any,
    is_leaf: Callable[..., bool] | None = None,
    is_leaf_takes_path: bool = False,
) -> list[tuple[KeyPath, Any]]:
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


@_documented_as(_pytree.tree_map_with_path)
def tree_map_with_path(
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[..., bool] | None = None,
    is_leaf_takes_path: bool = False,
) -> Any:
    pairs, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    others = [treedef._flatten_up_to(r, "tree_map_with_path") for r in rest]
    return treedef.unflatten([f(path, x, *xs) for (path, x), *xs in zip(pairs, *others)])


@_documented_as(_pytree.tree_reduce)
def tree_reduce(
    function: Callable[[Any, Any], Any],
    tree: Any,
    initializer: Any = _pytree._MISSING,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _pytree._MISSING:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


@_documented_as(_pytree.tree_all)
def tree_all(tree: Any, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    return all(tree_leaves(tree, is_leaf))


@_documented_as(_pytree.tree_reduce_associative)
def tree_reduce_associative(
    operation: Callable[[Any, Any], Any],
    tree: Any,
    *,
    identity: Any = _pytree._MISSING,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    return _pytree._reduce_balanced(operation, tree_leaves(tree, is_leaf), identity)


@_documented_as(_pytree.tree_broadcast)
def tree_broadcast(
    prefix_tree: Any, full_tree: Any, is_leaf: Callable[[Any], bool] | None = None
) -> Any:
    return _pytree._broadcast(prefix_tree, full_tree, is_leaf, tree_flatten)


@_documented_as(_pytree.tree_transpose)
def tree_transpose(
    outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None, pytree_to_transpose: Any
) -> Any:
    return _pytree._transpose(outer_treedef, inner_treedef, pytree_to_transpose, tree_flatten)


@_documented_as(_pytree.all_leaves)
def all_leaves(iterable: Iterable[Any], is_leaf: Callable[[Any], bool] | None = None) -> bool:
    return _pytree._all_leaves(iterable, is_leaf, _kinds)


@_documented_as(_pytree.is_tree_node)
def is_tree_node(typ: type) -> bool:
    return typ in _kinds or _pytree._namedtuple_kind(typ) is not None


@_documented_as(_pytree.flatten_one_level)
def flatten_one_level(tree: Any) -> tuple[Iterable[Any], Any]:
    return _pytree._node_kind(tree, "flatten_one_level", _kinds).flatten(tree)


@_documented_as(_pytree.flatten_one_level_with_keys)
def flatten_one_level_with_keys(tree: Any) -> tuple[Iterable[tuple[KeyEntry, Any]], Any]:
    kind = _pytree._node_kind(tree, "flatten_one_level_with_keys", _kinds)
    return kind.flatten_with_keys(tree)


class PyTreeRegistry:
    """The registry of pytree node types, as an object (``jax.tree_util.default_registry``):
    its methods are the module's functions."""

    def flatten(self, tree: Any, leaf_predicate: Callable[[Any], bool] | None = None
                ) -> tuple[list[Any], PyTreeDef]:
        return tree_flatten(tree, is_leaf=leaf_predicate)

    def flatten_one_level(self, tree: Any) -> tuple[Iterable[Any], Any]:
        return flatten_one_level(tree)

    def flatten_one_level_with_keys(self, tree: Any) -> tuple[Iterable[Any], Any]:
        return flatten_one_level_with_keys(tree)

    def flatten_with_path(self, tree: Any, leaf_predicate: Callable[[Any], bool] | None = None
                          ) -> tuple[list[tuple[Any, Any]], PyTreeDef]:
        return tree_flatten_with_path(tree, is_leaf=leaf_predicate)

    def is_node(self, typ: type) -> bool:
        return is_tree_node(typ)

    def register_node(self, type: type, to_iterable: Callable, from_iterable: Callable,  # noqa: A002
                      to_iterable_with_keys: Callable | None = None) -> None:
        register_pytree_node(type, to_iterable, from_iterable, to_iterable_with_keys)

    def register_dataclass_node(self, type: type, data_fields: list[str],  # noqa: A002
                                meta_fields: list[str]) -> None:
        register_dataclass(type, data_fields, meta_fields)


default_registry = PyTreeRegistry()
