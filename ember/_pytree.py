"""Pytrees: nested containers of leaves, flattened to a list of leaves plus a structure.

This is ember's own view of pytrees, which its transformations use; users see it through
``ember.tree_util``. The two differ in one respect: a node type registered with
:func:`register_internal_node` (typed PRNG key arrays) is a node here, over its data, so that
``jit``, ``vmap``, ``grad`` and the control-flow primitives carry it as ordinary arrays and
rebuild it around their results, while ``tree_util`` shows it as a leaf, as JAX does.

Which types are nodes, the order of their children and the functions' semantics are those
``tree_util``'s docstring describes (JAX's).

Internally a structure is a nested tuple: ``_LEAF`` for a leaf, ``(kind, aux, children)`` for
a node, where ``kind`` is the unique ``_NodeKind`` of the node's type (compared by identity),
``aux`` the node's auxiliary data and ``children`` a tuple of structures. Equality and hashing
of ``PyTreeDef`` are therefore plain tuple equality and hashing.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import operator
from collections.abc import Callable, Iterable
from typing import Any

from ember.tree_keys import (
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    KeyEntry,
    KeyPath,
    SequenceKey,
    keystr,  # noqa: F401 (re-exported: ember modules take it from here)
)


class _Leaf:
    __slots__ = ()

    def __repr__(self) -> str:
        return "*"

    def __reduce__(self):
        return "_LEAF"


_LEAF = _Leaf()
_MISSING = object()


def _index_keys(flatten: Callable) -> Callable:
    """A ``flatten_with_keys`` for a node type registered without one: the children's keys
    are their positions (``FlattenedIndexKey``), as JAX does."""

    def flatten_with_keys(x):
        children, aux = flatten(x)
        return [(FlattenedIndexKey(i), c) for i, c in enumerate(children)], aux

    return flatten_with_keys


def _sequence_with_keys(x):
    return [(SequenceKey(i), c) for i, c in enumerate(x)], None


def _dict_with_keys(d):
    keys = _sorted_keys(d)
    return [(DictKey(k), d[k]) for k in keys], keys


def _ordered_dict_with_keys(d):
    return [(DictKey(k), v) for k, v in d.items()], tuple(d)


def _defaultdict_with_keys(d):
    children, aux = _flatten_defaultdict(d)
    return [(DictKey(k), c) for k, c in zip(aux[1], children)], aux


class _NodeKind:
    """How to flatten, rebuild and print one node type. One instance per type."""

    __slots__ = ("type", "flatten", "unflatten", "fmt", "flatten_with_keys")

    def __init__(self, type_, flatten, unflatten, fmt, flatten_with_keys=None):
        self.type = type_
        self.flatten = flatten  # node -> (iterable of children, aux)
        self.unflatten = unflatten  # (aux, list of children) -> node
        self.fmt = fmt  # (aux, list of child strings) -> str
        # node -> (iterable of (key, child) pairs, aux), used only by the *_with_path
        # functions; by default each child's key is its FlattenedIndexKey.
        self.flatten_with_keys = flatten_with_keys or _index_keys(flatten)

    def __repr__(self) -> str:
        return f"_NodeKind({self.type.__qualname__})"

    # Kinds are compared by identity, so copies must be the same object.
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        return _kind_of_type, (self.type,)


# type -> kind for every node type: built-ins, registered types, and namedtuple classes
# (added lazily on first sight). _registered holds the types that may not be registered again.
# public_kinds: the same without the types registered by register_internal_node, which the
# public tree_util shows as leaves.
_kinds: dict[type, _NodeKind] = {}
public_kinds: dict[type, _NodeKind] = {}
_registered: set[type] = set()


def _add_kind(kind: _NodeKind, public: bool = True) -> None:
    _kinds[kind.type] = kind
    if public:
        public_kinds[kind.type] = kind


def _kind_of_type(t: type) -> _NodeKind:
    kind = _kinds.get(t)
    if kind is None:
        kind = _namedtuple_kind(t)
        if kind is None:
            raise ValueError(f"{t!r} is not a registered pytree node type")
    return kind


def _namedtuple_kind(t: type) -> _NodeKind | None:
    """The kind of a namedtuple class, created on first sight; None for leaf types."""
    if not (issubclass(t, tuple) and hasattr(t, "_fields")):
        return None
    name = t.__name__
    kind = _NodeKind(
        t,
        _flatten_tuple,
        lambda aux, children: t(*children),
        lambda aux, strs: f"CustomNode(namedtuple[{name}], [{', '.join(strs)}])",
        lambda x: ([(GetAttrKey(f), c) for f, c in zip(t._fields, x)], None),
    )
    _add_kind(kind)
    return kind


def _flatten_tuple(x):
    return x, None


def _sorted_keys(d) -> tuple:
    try:
        return tuple(sorted(d))
    except TypeError as e:  # incomparable keys (e.g. int and str): JAX's ValueError
        raise ValueError(
            f"Comparator raised exception while sorting pytree dictionary keys: {e}"
        ) from None


def _flatten_dict(d):
    keys = _sorted_keys(d)
    return [d[k] for k in keys], keys


def _fmt_items(keys, strs) -> str:
    return ", ".join(f"{k!r}: {s}" for k, s in zip(keys, strs))


def _fmt_tuple(aux, strs) -> str:
    return f"({strs[0]},)" if len(strs) == 1 else f"({', '.join(strs)})"


def _flatten_defaultdict(d):
    keys = tuple(sorted(d))  # (incomparable keys: sorted's TypeError, as in JAX)
    return [d[k] for k in keys], (d.default_factory, keys)


def _fmt_custom(name: str) -> Callable:
    """The ``fmt`` of a node type printed as JAX prints custom nodes: the aux data by
    ``str``, e.g. ``CustomNode(Box[tag], [*])``."""
    return lambda aux, strs: f"CustomNode({name}[{aux}], [{', '.join(strs)}])"


def _unflatten_defaultdict(aux, children):
    return collections.defaultdict(aux[0], zip(aux[1], children))


def _add_builtin(t, flatten, unflatten, fmt, flatten_with_keys) -> None:
    _add_kind(_NodeKind(t, flatten, unflatten, fmt, flatten_with_keys))
    _registered.add(t)


_add_builtin(tuple, _flatten_tuple, lambda aux, ch: tuple(ch), _fmt_tuple, _sequence_with_keys)
_add_builtin(
    list,
    lambda x: (x, None),
    lambda aux, ch: ch,
    lambda aux, s: f"[{', '.join(s)}]",
    _sequence_with_keys,
)
_add_builtin(
    dict,
    _flatten_dict,
    lambda aux, ch: dict(zip(aux, ch)),
    lambda aux, s: f"{{{_fmt_items(aux, s)}}}",
    _dict_with_keys,
)
_add_builtin(
    type(None),
    lambda x: ((), None),
    lambda aux, ch: None,
    lambda aux, s: "None",
    lambda x: ((), None),
)
_add_builtin(
    collections.OrderedDict,
    lambda d: (list(d.values()), tuple(d)),
    lambda aux, ch: collections.OrderedDict(zip(aux, ch)),
    _fmt_custom("OrderedDict"),
    _ordered_dict_with_keys,
)
_add_builtin(
    collections.defaultdict,
    _flatten_defaultdict,
    _unflatten_defaultdict,
    _fmt_custom("defaultdict"),
    _defaultdict_with_keys,
)

_TUPLE_KIND = _kinds[tuple]
_DICT_KIND = _kinds[dict]


# --------------------------------------------------------------------------------------------
# Flattening (the jit dispatch hot path: keep it lean)


def _flatten(x, leaves: list, kinds: dict):
    kind = kinds.get(type(x))
    if kind is None and (kind := _namedtuple_kind(type(x))) is None:
        leaves.append(x)
        return _LEAF
    children, aux = kind.flatten(x)
    return (kind, aux, tuple([_flatten(c, leaves, kinds) for c in children]))


def _bad_is_leaf(r) -> ValueError:
    return ValueError(f"is_leaf predicate returned a non-boolean value {r!r}; expected a boolean")


def _flatten_is_leaf(x, leaves: list, is_leaf, kinds: dict):
    r = is_leaf(x)
    if r is True:
        leaves.append(x)
        return _LEAF
    if r is not False and r is not None:  # (None means False, as in JAX; truthy 1 is an error)
        raise _bad_is_leaf(r)
    kind = kinds.get(type(x))
    if kind is None and (kind := _namedtuple_kind(type(x))) is None:
        leaves.append(x)
        return _LEAF
    children, aux = kind.flatten(x)
    return (kind, aux, tuple([_flatten_is_leaf(c, leaves, is_leaf, kinds) for c in children]))


def _collect_leaves(x, leaves: list, kinds: dict) -> None:
    kind = kinds.get(type(x))
    if kind is None and (kind := _namedtuple_kind(type(x))) is None:
        leaves.append(x)
        return
    for c in kind.flatten(x)[0]:
        _collect_leaves(c, leaves, kinds)


def _flatten_with_path(x, path: tuple, out: list, is_leaf, kinds: dict):
    """Like ``_flatten``, collecting ``(path, leaf)`` pairs. Kept apart from ``_flatten``
    so that the jit dispatch path never builds keys; the structure it returns is the same
    as ``_flatten``'s (a node type registered with keys flattens to the same aux data)."""
    if is_leaf is not None:
        r = is_leaf(path, x)
        if r is True:
            out.append((path, x))
            return _LEAF
        if r is not False and r is not None:
            raise _bad_is_leaf(r)
    kind = kinds.get(type(x))
    if kind is None and (kind := _namedtuple_kind(type(x))) is None:
        out.append((path, x))
        return _LEAF
    pairs, aux = kind.flatten_with_keys(x)
    return (kind, aux,
            tuple([_flatten_with_path(c, (*path, k), out, is_leaf, kinds) for k, c in pairs]))


def _unflatten(node, it):
    if node is _LEAF:
        return next(it)
    kind, aux, children = node
    return kind.unflatten(aux, [_unflatten(c, it) for c in children])


def _count_leaves(node) -> int:
    if node is _LEAF:
        return 1
    return sum([_count_leaves(c) for c in node[2]])


def _count_nodes(node) -> int:
    if node is _LEAF:
        return 1
    return 1 + sum([_count_nodes(c) for c in node[2]])


def _skeleton(node):
    """``node`` without its aux data: what a treedef hashes when the aux data cannot be."""
    if node is _LEAF:
        return node
    return (node[0], tuple([_skeleton(c) for c in node[2]]))


def _compose(node, inner):
    if node is _LEAF:
        return inner
    kind, aux, children = node
    return (kind, aux, tuple([_compose(c, inner) for c in children]))


def _fmt(node) -> str:
    if node is _LEAF:
        return "*"
    kind, aux, children = node
    return kind.fmt(aux, [_fmt(c) for c in children])


def _short_repr(x, limit: int = 80) -> str:
    try:
        r = repr(x)
    except Exception:  # a repr that fails must not hide the real error
        r = f"<{type(x).__name__}>"
    return r if len(r) <= limit else r[: limit - 3] + "..."


class PyTreeDef:
    """The structure of a pytree: its node types, auxiliary data and where the leaves go.

    Treedefs are immutable, hashable and compared structurally, so they can be used as cache
    keys. Obtain one from :func:`tree_flatten` or :func:`tree_structure`.

    Example:
        >>> treedef = tree_structure({'a': 1, 'b': [2, 3]})
        >>> treedef
        PyTreeDef({'a': *, 'b': [*, *]})
        >>> treedef.num_leaves, treedef.num_nodes
        (3, 5)
        >>> treedef.unflatten([4, 5, 6])
        {'a': 4, 'b': [5, 6]}
    """

    __slots__ = ("_node", "_num_leaves", "_hash")

    def __init__(self, node, num_leaves: int | None = None):
        self._node = node
        self._num_leaves = _count_leaves(node) if num_leaves is None else num_leaves
        self._hash: int | None = None

    @property
    def num_leaves(self) -> int:
        """Number of leaves in the structure."""
        return self._num_leaves

    @property
    def num_nodes(self) -> int:
        """Number of nodes in the structure, leaves and ``None`` nodes included."""
        return _count_nodes(self._node)

    def children(self) -> list[PyTreeDef]:
        """The treedefs of the root's children (empty for a leaf).

        Example:
            >>> tree_structure((1, [2, 3])).children()
            [PyTreeDef(*), PyTreeDef([*, *])]
        """
        if self._node is _LEAF:
            return []
        return [PyTreeDef(c) for c in self._node[2]]

    def node_data(self) -> tuple[type, Any] | None:
        """The root's node type and aux data, ``None`` for a leaf (as in JAX: a dict's
        aux data is its sorted keys, as a list).

        Example:
            >>> tree_structure({'b': 1, 'a': 2}).node_data()
            (<class 'dict'>, ['a', 'b'])
        """
        if self._node is _LEAF:
            return None
        kind, aux, _ = self._node
        return kind.type, list(aux) if kind is _DICT_KIND else aux

    def compose(self, inner: PyTreeDef, /) -> PyTreeDef:
        """The structure of a tree of this structure whose leaves are trees of ``inner``'s.

        Example:
            >>> tree_structure((1, 2)).compose(tree_structure([1, None]))
            PyTreeDef(([*, None], [*, None]))
        """
        if type(inner) is not PyTreeDef:
            raise TypeError(f"compose: inner must be a PyTreeDef, got {type(inner).__name__}")
        return PyTreeDef(_compose(self._node, inner._node), self._num_leaves * inner._num_leaves)

    def unflatten(self, leaves: Iterable[Any], /) -> Any:
        """Builds a pytree of this structure from ``leaves`` (in flattening order).

        Raises:
            ValueError: if the number of leaves does not match ``num_leaves``.

        Example:
            >>> tree_structure((1, 2)).unflatten(['a', 'b'])
            ('a', 'b')
        """
        if type(leaves) is not list and type(leaves) is not tuple:
            leaves = list(leaves)
        if len(leaves) != self._num_leaves:
            raise ValueError(
                f"tree_unflatten: {self!r} expects {self._num_leaves} leaves, got {len(leaves)}"
            )
        return _unflatten(self._node, iter(leaves))

    def flatten_up_to(self, tree: Any) -> list[Any]:
        """Flattens ``tree`` down to this structure's leaves, which may be whole subtrees.

        Raises:
            ValueError: if ``tree`` does not have this structure as a prefix; the message
                shows both structures.

        Example:
            >>> tree_structure((1, 2)).flatten_up_to(([1, 2], {'a': 3}))
            [[1, 2], {'a': 3}]
        """
        return self._flatten_up_to(tree, "flatten_up_to")

    def _flatten_up_to(self, tree, caller: str) -> list:
        out: list = []
        try:
            _up_to(self._node, tree, out)
        except _Mismatch as e:
            try:
                other = repr(tree_structure(tree))
            except Exception:
                other = f"<unflattenable {type(tree).__name__}>"
            raise ValueError(
                f"{caller}: tree structures do not match: {self!r} vs {other} ({e.args[0]})"
            ) from None
        return out

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not PyTreeDef:
            return NotImplemented
        return self._num_leaves == other._num_leaves and self._node == other._node

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            try:
                h = hash(self._node)
            except TypeError:  # unhashable aux data (a list, ...): hash the rest, as JAX does
                h = hash(_skeleton(self._node))
            self._hash = h
        return h

    def __repr__(self) -> str:
        return f"PyTreeDef({_fmt(self._node)})"

    def __reduce__(self):
        return PyTreeDef, (self._node, self._num_leaves)


class _Mismatch(Exception):
    pass


def _up_to(node, x, out: list) -> None:
    if node is _LEAF:
        out.append(x)
        return
    kind, aux, children = node
    if type(x) is not kind.type:
        raise _Mismatch(
            f"expected a {kind.type.__name__} node, got {type(x).__name__} {_short_repr(x)}"
        )
    xs, x_aux = kind.flatten(x)
    if x_aux != aux:
        raise _Mismatch(
            f"{kind.type.__name__} node data differ: expected {_short_repr(aux)}, "
            f"got {_short_repr(x_aux)}"
        )
    xs = list(xs)
    if len(xs) != len(children):
        raise _Mismatch(
            f"expected a {kind.type.__name__} with {len(children)} children, "
            f"got {len(xs)}: {_short_repr(x)}"
        )
    for c, sub in zip(children, xs):
        _up_to(c, sub, out)


# --------------------------------------------------------------------------------------------
# Public functions


def tree_flatten(
    tree: Any, is_leaf: Callable[[Any], bool] | None = None
) -> tuple[list[Any], PyTreeDef]:
    """Flattens a pytree into its leaves and its structure.

    Args:
        tree: the pytree.
        is_leaf: optional predicate; a subtree for which it returns True is a leaf.

    Returns:
        ``(leaves, treedef)``, leaves in depth-first, left-to-right (sorted-key) order.

    Example:
        >>> tree_flatten([1, (2, None), {'x': 3}])
        ([1, 2, 3], PyTreeDef([*, (*, None), {'x': *}]))
    """
    leaves: list = []
    if is_leaf is None:
        node = _flatten(tree, leaves, _kinds)
    else:
        node = _flatten_is_leaf(tree, leaves, is_leaf, _kinds)
    return leaves, PyTreeDef(node, len(leaves))


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    """Builds a pytree with structure ``treedef`` from ``leaves``.

    Raises:
        ValueError: if the number of leaves does not match ``treedef.num_leaves``.

    Example:
        >>> leaves, treedef = tree_flatten({'a': 1, 'b': (2, 3)})
        >>> tree_unflatten(treedef, [x * 10 for x in leaves])
        {'a': 10, 'b': (20, 30)}
    """
    return treedef.unflatten(leaves)


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """The leaves of a pytree, in flattening order.

    Example:
        >>> tree_leaves([None, 1, {'b': 3, 'a': 2}])
        [1, 2, 3]
    """
    leaves: list = []
    if is_leaf is None:
        _collect_leaves(tree, leaves, _kinds)
    else:
        _flatten_is_leaf(tree, leaves, is_leaf, _kinds)
    return leaves


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    """The structure of a pytree.

    Example:
        >>> tree_structure((1, [2, None]))
        PyTreeDef((*, [*, None]))
    """
    return tree_flatten(tree, is_leaf)[1]


def tree_map(
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """Applies ``f`` to the leaves of ``tree`` (and the matching subtrees of ``rest``).

    Args:
        f: function of ``1 + len(rest)`` arguments.
        tree: the pytree whose structure the result has.
        *rest: pytrees having ``tree``'s structure as a prefix; where ``tree`` has a leaf,
            ``f`` receives the whole corresponding subtree.
        is_leaf: optional predicate marking extra leaves of ``tree``.

    Raises:
        ValueError: if a tree in ``rest`` does not match ``tree``'s structure.

    Example:
        >>> tree_map(lambda x, y: x + y, {'a': 1, 'b': (2, 3)}, {'a': 10, 'b': (20, 30)})
        {'a': 11, 'b': (22, 33)}
    """
    leaves, treedef = tree_flatten(tree, is_leaf)
    if not rest:
        return treedef.unflatten([f(x) for x in leaves])
    others = [treedef._flatten_up_to(r, "tree_map") for r in rest]
    return treedef.unflatten([f(*xs) for xs in zip(leaves, *others)])


def tree_flatten_with_path(
    tree: Any,
    is_leaf: Callable[..., bool] | None = None,
    is_leaf_takes_path: bool = False,
) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """Flattens a pytree like :func:`tree_flatten`, pairing each leaf with its key path.

    A path is a tuple of keys, one per node on the way from the root: ``SequenceKey`` for
    tuple and list elements, ``DictKey`` for dict entries, ``GetAttrKey`` for namedtuple
    and dataclass fields, ``FlattenedIndexKey`` for the children of custom nodes registered
    without keys (see :func:`register_pytree_with_keys`).

    Args:
        tree: the pytree.
        is_leaf: optional predicate; a subtree for which it returns True is a leaf. It is
            called as ``is_leaf(x)``, or as ``is_leaf(path, x)`` if ``is_leaf_takes_path``.
        is_leaf_takes_path: whether ``is_leaf`` takes the subtree's path first.

    Returns:
        ``([(path, leaf), ...], treedef)``, in the order of :func:`tree_flatten`.

    Example:
        >>> pairs, treedef = tree_flatten_with_path({'a': [1, 2], 'b': 3})
        >>> [(keystr(path), leaf) for path, leaf in pairs]
        [("['a'][0]", 1), ("['a'][1]", 2), ("['b']", 3)]
    """
    return _tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path, _kinds)


def _tree_flatten_with_path(tree: Any, is_leaf, is_leaf_takes_path: bool, kinds: dict):
    if is_leaf is not None and not is_leaf_takes_path:
        leaf_pred = is_leaf
        is_leaf = lambda path, x: leaf_pred(x)
    pairs: list = []
    node = _flatten_with_path(tree, (), pairs, is_leaf, kinds)
    return pairs, PyTreeDef(node, len(pairs))


def tree_leaves_with_path(
    tree: Any,
    is_leaf: Callable[..., bool] | None = None,
    is_leaf_takes_path: bool = False,
) -> list[tuple[KeyPath, Any]]:
    """The ``(path, leaf)`` pairs of a pytree (see :func:`tree_flatten_with_path`).

    Example:
        >>> tree_leaves_with_path((1, {'k': 2}))
        [((SequenceKey(idx=0),), 1), ((SequenceKey(idx=1), DictKey(key='k')), 2)]
    """
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_map_with_path(
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[..., bool] | None = None,
    is_leaf_takes_path: bool = False,
) -> Any:
    """Like :func:`tree_map`, but ``f`` receives each leaf's key path first.

    Args:
        f: function of ``2 + len(rest)`` arguments: ``f(path, x, *xs)``.
        tree: the pytree whose structure (and paths) the result has.
        *rest: pytrees having ``tree``'s structure as a prefix.
        is_leaf: optional predicate marking extra leaves of ``tree`` (see
            :func:`tree_flatten_with_path`).
        is_leaf_takes_path: whether ``is_leaf`` takes the subtree's path first.

    Raises:
        ValueError: if a tree in ``rest`` does not match ``tree``'s structure.

    Example:
        >>> tree_map_with_path(lambda p, x: f"{keystr(p)}={x}", {'a': 1, 'b': (2,)})
        {'a': "['a']=1", 'b': ("['b'][0]=2",)}
    """
    pairs, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    others = [treedef._flatten_up_to(r, "tree_map_with_path") for r in rest]
    return treedef.unflatten([f(path, x, *xs) for (path, x), *xs in zip(pairs, *others)])


def tree_reduce(
    function: Callable[[Any, Any], Any],
    tree: Any,
    initializer: Any = _MISSING,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """Reduces the leaves of a pytree with a binary ``function``, like ``functools.reduce``.

    Example:
        >>> tree_reduce(lambda a, b: a + b, {'a': 1, 'b': [2, 3]})
        6
        >>> tree_reduce(max, [], initializer=0)
        0
    """
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _MISSING:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree: Any, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every leaf of a pytree is truthy.

    Example:
        >>> tree_all([True, {'a': 1}]), tree_all((True, 0))
        (True, False)
    """
    return all(tree_leaves(tree, is_leaf))


def tree_reduce_associative(
    operation: Callable[[Any, Any], Any],
    tree: Any,
    *,
    identity: Any = _MISSING,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """Reduces the leaves with an associative ``operation`` as a balanced binary tree
    (depth log2 of the number of leaves), as JAX does: for floating-point sums the
    rounding differs from :func:`tree_reduce`'s left-to-right order.

    Raises:
        TypeError: if the tree has no leaves and no ``identity`` is given.

    Example:
        >>> tree_reduce_associative(lambda a, b: a + b, [1, 2, (3, 4)])
        10
        >>> tree_reduce_associative(max, [], identity=0)
        0
    """
    return _reduce_balanced(operation, tree_leaves(tree, is_leaf), identity)


def _reduce_balanced(operation: Callable[[Any, Any], Any], leaves: list, identity: Any) -> Any:
    """``tree_reduce_associative`` of the given leaves."""
    if not leaves:
        if identity is _MISSING:
            raise TypeError(
                "tree_reduce_associative: the tree has no leaves; pass identity= to reduce it"
            )
        return identity

    def reduce(lo: int, hi: int):
        if hi - lo == 1:
            return leaves[lo]
        mid = (lo + hi) // 2  # (the left half is the smaller one, as in JAX)
        return operation(reduce(lo, mid), reduce(mid, hi))

    return reduce(0, len(leaves))


def tree_broadcast(
    prefix_tree: Any, full_tree: Any, is_leaf: Callable[[Any], bool] | None = None
) -> Any:
    """Broadcasts each leaf of ``prefix_tree`` to every leaf of the matching subtree of
    ``full_tree`` (whose structure the result has).

    Args:
        prefix_tree: a pytree whose structure is a prefix of ``full_tree``'s.
        full_tree: the pytree whose structure the result has.
        is_leaf: optional predicate marking extra leaves of ``prefix_tree``.

    Raises:
        ValueError: if ``prefix_tree`` is not a prefix of ``full_tree``.

    Example:
        >>> tree_broadcast((1, 2), (0, {'a': 0, 'b': [0, 0]}))
        (1, {'a': 2, 'b': [2, 2]})
    """
    return _broadcast(prefix_tree, full_tree, is_leaf, tree_flatten)


def _broadcast(prefix_tree: Any, full_tree: Any, is_leaf, flatten: Callable) -> Any:
    """``tree_broadcast`` with the view of pytrees that ``flatten`` takes."""
    prefix_leaves, prefix_def = flatten(prefix_tree, is_leaf)
    subtrees = prefix_def._flatten_up_to(full_tree, "tree_broadcast")
    leaves: list = []
    for x, sub in zip(prefix_leaves, subtrees):
        leaves.extend([x] * flatten(sub)[1].num_leaves)
    return flatten(full_tree)[1].unflatten(leaves)


def tree_transpose(
    outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None, pytree_to_transpose: Any
) -> Any:
    """Turns a tree of structure ``outer`` of trees of structure ``inner`` inside out.

    As in JAX, only the number of leaves is checked: the tree is flattened whole and its
    leaves taken ``inner_treedef.num_leaves`` at a time, so an inner tree may have another
    structure (or be a prefix of ``inner_treedef``) as long as the counts agree.

    Args:
        outer_treedef: the outer structure.
        inner_treedef: the inner structure, or None to take it from the first inner tree.
        pytree_to_transpose: the pytree.

    Raises:
        TypeError: if the tree does not have ``outer * inner`` leaves.

    Example:
        >>> outer = tree_structure([0, 0])
        >>> inner = tree_structure({'a': 0, 'b': 0})
        >>> tree_transpose(outer, inner, [{'a': 1, 'b': 2}, {'a': 3, 'b': 4}])
        {'a': [1, 3], 'b': [2, 4]}
    """
    return _transpose(outer_treedef, inner_treedef, pytree_to_transpose, tree_flatten)


def _transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None,
               pytree_to_transpose: Any, flatten: Callable) -> Any:
    """``tree_transpose`` with the view of pytrees that ``flatten`` takes."""
    leaves, treedef = flatten(pytree_to_transpose)
    if inner_treedef is None:
        subtrees = outer_treedef._flatten_up_to(pytree_to_transpose, "tree_transpose")
        if not subtrees:
            raise ValueError("tree_transpose: cannot infer inner_treedef of an empty outer tree")
        inner_treedef = flatten(subtrees[0])[1]
    n_inner, n_outer = inner_treedef.num_leaves, outer_treedef.num_leaves
    if len(leaves) != n_inner * n_outer:
        raise TypeError(
            f"tree_transpose: Mismatch\n{treedef}\n != \n{outer_treedef.compose(inner_treedef)}"
        )
    columns = [leaves[i::n_inner] for i in range(n_inner)]
    return inner_treedef.unflatten([outer_treedef.unflatten(col) for col in columns])


def all_leaves(iterable: Iterable[Any], is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every element of ``iterable`` is a leaf (``None`` is not a leaf).

    Example:
        >>> all_leaves([1, 2.0, 'x']), all_leaves([1, (2,)]), all_leaves([None])
        (True, False, False)
    """
    return _all_leaves(iterable, is_leaf, _kinds)


def _all_leaves(iterable: Iterable[Any], is_leaf, kinds: dict) -> bool:
    if is_leaf is None:
        for x in iterable:
            t = type(x)
            if t in kinds or (issubclass(t, tuple) and hasattr(t, "_fields")):
                return False
        return True
    items = list(iterable)
    leaves: list = []
    _flatten_is_leaf(items, leaves, is_leaf, kinds)
    # (identity, not ==: comparing arrays with == would be elementwise)
    return len(leaves) == len(items) and all(a is b for a, b in zip(items, leaves))


def is_tree_node(typ: type) -> bool:
    """Whether ``typ`` is a pytree node type: built in, registered, or a namedtuple class.

    Example:
        >>> is_tree_node(dict), is_tree_node(int)
        (True, False)
    """
    return typ in _kinds or _namedtuple_kind(typ) is not None


def _node_kind(tree: Any, caller: str, kinds: dict) -> _NodeKind:
    kind = kinds.get(type(tree))
    if kind is None and (kind := _namedtuple_kind(type(tree))) is None:
        raise ValueError(f"{caller}: can't tree-flatten type: {type(tree)}")
    return kind


def flatten_one_level(tree: Any) -> tuple[Iterable[Any], Any]:
    """The children and aux data of the node ``tree`` (its subtrees are not flattened).

    Raises:
        ValueError: if ``tree`` is a leaf.

    Example:
        >>> flatten_one_level({'b': [1], 'a': 2})
        ([2, [1]], ('a', 'b'))
    """
    return _node_kind(tree, "flatten_one_level", _kinds).flatten(tree)


def flatten_one_level_with_keys(tree: Any) -> tuple[Iterable[tuple[KeyEntry, Any]], Any]:
    """The ``(key, child)`` pairs and aux data of the node ``tree``.

    Raises:
        ValueError: if ``tree`` is a leaf.

    Example:
        >>> flatten_one_level_with_keys((1, 2))
        ([(SequenceKey(idx=0), 1), (SequenceKey(idx=1), 2)], None)
    """
    return _node_kind(tree, "flatten_one_level_with_keys", _kinds).flatten_with_keys(tree)


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """Whether ``treedef`` has a single node, as in JAX (True for a leaf and for ``None``).

    Example:
        >>> treedef_is_leaf(tree_structure(1)), treedef_is_leaf(tree_structure((1,)))
        (True, False)
    """
    node = treedef._node
    return node is _LEAF or not node[2]


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    """The treedefs of the root's children.

    Example:
        >>> treedef_children(tree_structure({'a': 1, 'b': (2,)}))
        [PyTreeDef(*), PyTreeDef((*,))]
    """
    return treedef.children()


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    """The treedef of a tuple whose children have the given structures.

    Example:
        >>> treedef_tuple([tree_structure(1), tree_structure([1, 2])])
        PyTreeDef((*, [*, *]))
    """
    treedefs = list(treedefs)
    for t in treedefs:
        if type(t) is not PyTreeDef:
            raise TypeError(f"treedef_tuple: expected PyTreeDefs, got {type(t).__name__}")
    node = (_TUPLE_KIND, None, tuple(t._node for t in treedefs))
    return PyTreeDef(node, sum(t._num_leaves for t in treedefs))


def _checked_flatten(flatten_func: Callable, name: str) -> Callable:
    """``flatten_func``, checked to return a ``(children, aux_data)`` pair with iterable
    children: a clear ValueError (JAX's class) instead of an unpacking error, or leaves
    silently taken from the wrong element."""

    def flatten(x):
        out = flatten_func(x)
        if type(out) is not tuple or len(out) != 2:
            raise ValueError(
                f"the flatten function of pytree node type {name} must return a "
                f"(children, aux_data) tuple, got {_short_repr(out)}"
            )
        children = out[0]
        if type(children) is not tuple and type(children) is not list:
            try:
                iter(children)
            except TypeError:
                raise ValueError(
                    f"the flatten function of pytree node type {name} must return a "
                    f"(children, aux_data) tuple whose children are iterable, got "
                    f"{_short_repr(out)}"
                ) from None
        return out

    return flatten


def register_pytree_node(
    nodetype: type,
    flatten_func: Callable[[Any], tuple[Iterable[Any], Any]],
    unflatten_func: Callable[[Any, Iterable[Any]], Any],
    flatten_with_keys_func: Callable[[Any], tuple[Iterable[tuple[Any, Any]], Any]] | None = None,
) -> None:
    """Registers a type as a pytree node.

    Args:
        nodetype: the class.
        flatten_func: ``node -> (children, aux_data)``; ``aux_data`` must be hashable and
            comparable with ``==`` (it is part of the treedef).
        unflatten_func: ``(aux_data, children) -> node``; ``children`` is a tuple.
        flatten_with_keys_func: optional ``node -> ((key, child) pairs, aux_data)``, with
            the children and aux data of ``flatten_func``: the keys of the children in key
            paths (:func:`tree_flatten_with_path`). Without it the keys are
            ``FlattenedIndexKey(i)``.

    Raises:
        ValueError: if ``nodetype`` is already registered (built-in node types included).

    Example:
        >>> class Point:
        ...     def __init__(self, x, y):
        ...         self.x, self.y = x, y
        >>> register_pytree_node(Point, lambda p: ((p.x, p.y), None),
        ...                      lambda aux, ch: Point(*ch))
        >>> tree_leaves([Point(1, 2), 3])
        [1, 2, 3]
    """
    _check_node_type(nodetype, "register_pytree_node")
    if not callable(flatten_func) or not callable(unflatten_func):
        raise TypeError("register_pytree_node: flatten_func and unflatten_func must be callable")
    if flatten_with_keys_func is not None and not callable(flatten_with_keys_func):
        raise TypeError("register_pytree_node: flatten_with_keys_func must be callable")
    flatten = _checked_flatten(flatten_func, nodetype.__name__)
    _register_node(nodetype, flatten, unflatten_func, flatten_with_keys_func)


def _check_node_type(nodetype: Any, caller: str) -> None:
    if not isinstance(nodetype, type):
        raise TypeError(f"{caller}: nodetype must be a type, got {nodetype!r}")
    if nodetype in _registered:
        raise ValueError(f"{caller}: duplicate registration of {nodetype!r}")


def _register_node(nodetype: type, flatten, unflatten, flatten_with_keys,
                   public: bool = True) -> None:
    """Registers a node type (checked by ``_check_node_type``) whose flatten function is
    known to be well-formed; ``public=False``: a leaf type to the public ``tree_util``."""
    kind = _NodeKind(
        nodetype,
        flatten,
        lambda aux, children: unflatten(aux, tuple(children)),
        _fmt_custom(nodetype.__name__),
        flatten_with_keys,
    )
    _add_kind(kind, public)
    _registered.add(nodetype)


def register_internal_node(nodetype: type, flatten: Callable, unflatten: Callable) -> None:
    """Registers ``nodetype`` as a node of ember's own pytrees that users see as a leaf.

    ``flatten``/``unflatten`` are as for :func:`register_pytree_node` (and trusted to be
    well-formed). The public ``tree_util`` functions treat the type as a leaf type.
    """
    _check_node_type(nodetype, "register_internal_node")
    _register_node(nodetype, flatten, unflatten, None, public=False)


def register_pytree_node_class(cls: type) -> type:
    """Class decorator registering ``cls`` via its ``tree_flatten`` / ``tree_unflatten``.

    ``cls.tree_flatten(self)`` returns ``(children, aux_data)`` and the classmethod
    ``cls.tree_unflatten(aux_data, children)`` rebuilds an instance.

    Example:
        >>> @register_pytree_node_class
        ... class Box:
        ...     def __init__(self, v):
        ...         self.v = v
        ...     def tree_flatten(self):
        ...         return (self.v,), None
        ...     @classmethod
        ...     def tree_unflatten(cls, aux, children):
        ...         return cls(*children)
        >>> tree_map(lambda x: x + 1, Box(1)).v
        2
    """
    register_pytree_node(cls, operator.methodcaller("tree_flatten"), cls.tree_unflatten)
    return cls


def register_pytree_with_keys(
    nodetype: type,
    flatten_with_keys: Callable[[Any], tuple[Iterable[tuple[Any, Any]], Any]],
    unflatten_func: Callable[[Any, Iterable[Any]], Any],
    flatten_func: Callable[[Any], tuple[Iterable[Any], Any]] | None = None,
) -> None:
    """Registers a type as a pytree node whose children have keys in key paths.

    Args:
        nodetype: the class.
        flatten_with_keys: ``node -> ((key, child) pairs, aux_data)``.
        unflatten_func: ``(aux_data, children) -> node``.
        flatten_func: optional ``node -> (children, aux_data)`` giving the same children
            and aux data; it spares the functions without paths (and jit's dispatch)
            building keys. Derived from ``flatten_with_keys`` when omitted.

    Example:
        >>> class Pt:
        ...     def __init__(self, x, y):
        ...         self.x, self.y = x, y
        >>> register_pytree_with_keys(
        ...     Pt, lambda p: (((GetAttrKey('x'), p.x), (GetAttrKey('y'), p.y)), None),
        ...     lambda aux, ch: Pt(*ch))
        >>> [keystr(path) for path, _ in tree_leaves_with_path([Pt(1, 2)])]
        ['[0].x', '[0].y']
    """
    if flatten_func is None:

        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux

    register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_with_keys_class(cls: type) -> type:
    """Class decorator registering ``cls`` via its ``tree_flatten_with_keys`` method and
    ``tree_unflatten`` classmethod (and its ``tree_flatten`` method, if it has one).

    Example:
        >>> @register_pytree_with_keys_class
        ... class Named:
        ...     def __init__(self, v):
        ...         self.v = v
        ...     def tree_flatten_with_keys(self):
        ...         return ((GetAttrKey('v'), self.v),), None
        ...     @classmethod
        ...     def tree_unflatten(cls, aux, children):
        ...         return cls(*children)
        >>> tree_leaves_with_path(Named(1))
        [((GetAttrKey(name='v'),), 1)]
    """
    flatten_func = operator.methodcaller("tree_flatten") if hasattr(cls, "tree_flatten") else None
    register_pytree_with_keys(
        cls, operator.methodcaller("tree_flatten_with_keys"), cls.tree_unflatten, flatten_func
    )
    return cls


def register_dataclass(
    nodetype: type,
    data_fields: Iterable[str] | None = None,
    meta_fields: Iterable[str] | None = None,
    drop_fields: Iterable[str] = (),
) -> type:
    """Registers a dataclass-like type as a pytree node; usable as a class decorator.

    Data fields are the children (keyed ``GetAttrKey(name)``); meta fields are static: the
    tuple of their values is the node's aux data, part of the treedef (so jit recompiles
    when they change: they must be hashable). Nodes are rebuilt with
    ``nodetype(**fields)``. For a dataclass both lists may be omitted: fields are data
    unless marked ``field(metadata={'static': True})`` (see ``ember.tree.static``).

    Args:
        nodetype: the class.
        data_fields: names of the data fields.
        meta_fields: names of the meta fields.
        drop_fields: dataclass fields (``init=True``) left out of the node.

    Raises:
        TypeError: if only one of ``data_fields``/``meta_fields`` is given, or neither is
            for a class that is not a dataclass.
        ValueError: if the fields of a dataclass are not exactly its ``init`` fields
            (less ``drop_fields``), or if data and meta fields overlap.

    Example:
        >>> import dataclasses
        >>> @register_dataclass
        ... @dataclasses.dataclass
        ... class Params:
        ...     w: Any
        ...     name: str = dataclasses.field(default='p', metadata={'static': True})
        >>> tree_flatten(Params(1))
        ([1], PyTreeDef(CustomNode(Params[('p',)], [*])))
    """
    if data_fields is None or meta_fields is None:
        if (data_fields is None) != (meta_fields is None):
            raise TypeError(
                "register_dataclass: data_fields and meta_fields must both be specified when "
                f"either is specified. Got data_fields={data_fields!r} "
                f"meta_fields={meta_fields!r}."
            )
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(
                "register_dataclass: data_fields and meta_fields are required when nodetype "
                f"is not a dataclass. Got nodetype={nodetype!r}."
            )
        fields = dataclasses.fields(nodetype)
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    # Tuples: the closures below must not see later changes to the caller's lists.
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    if dataclasses.is_dataclass(nodetype):
        init_fields = {f.name for f in dataclasses.fields(nodetype) if f.init}
        init_fields.difference_update(drop_fields)
        given = {*data_fields, *meta_fields}
        if given != init_fields:
            msg = (
                "register_dataclass: data_fields and meta_fields must include all dataclass "
                "fields with ``init=True`` and only them."
            )
            if missing := init_fields - given:
                msg += (
                    f" Missing fields: {missing}. Add them to drop_fields to suppress this error."
                )
            if unexpected := given - init_fields:
                msg += f" Unexpected fields: {unexpected}."
            raise ValueError(msg)
    if overlap := set(data_fields) & set(meta_fields):
        raise ValueError(
            "register_dataclass: data_fields and meta_fields must not overlap. Overlapping "
            f"fields: {overlap}."
        )
    keys = tuple(GetAttrKey(name) for name in data_fields)

    def flatten(x):
        return [getattr(x, n) for n in data_fields], tuple(getattr(x, n) for n in meta_fields)

    def flatten_with_keys(x):
        children, aux = flatten(x)
        return list(zip(keys, children)), aux

    def unflatten(meta, data):
        return nodetype(**dict(zip(meta_fields, meta)), **dict(zip(data_fields, data)))

    _check_node_type(nodetype, "register_dataclass")
    _register_node(nodetype, flatten, unflatten, flatten_with_keys)
    return nodetype


def register_static(cls: type) -> type:
    """Class decorator registering ``cls`` as a pytree node with no children: an instance
    is its own aux data, so it passes through ``jit`` as a static value (it must be
    hashable).

    Example:
        >>> @register_static
        ... class Mode(str):
        ...     pass
        >>> tree_leaves([Mode('train'), 1])
        [1]
    """
    _check_node_type(cls, "register_static")
    _register_node(cls, lambda x: ((), x), lambda x, children: x, None)
    return cls


class _HashableCallableShim:
    """Calls, hashes and compares as the callable it wraps (see ``Partial.__new__``)."""

    def __init__(self, fun: Callable):
        self.fun = fun

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fun(*args, **kwargs)

    def __hash__(self) -> int:
        return hash(self.fun)

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, _HashableCallableShim):
            return self.fun == other.fun
        return self.fun == other

    def __repr__(self) -> str:
        return f"_HashableCallableShim({self.fun!r})"


class Partial(functools.partial):
    """A ``functools.partial`` that is a pytree: its bound arguments and keywords are the
    children and the function is static auxiliary data, so a ``Partial`` can pass in and
    out of transformed functions (``jit``, ``vmap``, custom_vjp residuals), as in JAX.

    Example:
        >>> import ember
        >>> import ember.numpy as jnp
        >>> add_one = Partial(jnp.add, 1)
        >>> tree_leaves(add_one)
        [1]
        >>> ember.jit(lambda f, x: f(x))(add_one, 2)
        Array(3, dtype=int32, weak_type=True)
    """

    def __new__(cls, func: Callable, *args: Any, **kwargs: Any):
        # functools.partial.__new__ merges a partial ``func``'s arguments into the new one;
        # box it so that exactly the arguments given here are the pytree's children.
        if isinstance(func, functools.partial):
            shim = _HashableCallableShim(func)
            out = super().__new__(cls, shim, *args, **kwargs)
            # (only now: given earlier, they would be merged in too) the boxed partial's
            # parts stay visible as ``p.func.func``, ``p.func.args``, as in JAX
            shim.func, shim.args, shim.keywords = func.func, func.args, func.keywords
            return out
        return super().__new__(cls, func, *args, **kwargs)


_register_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, xs: Partial(func, *xs[0], **xs[1]),
    None,
)
