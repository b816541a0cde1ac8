"""Pytrees: nested containers of leaves, flattened to a list of leaves plus a structure.

A pytree is a leaf or a container node whose children are pytrees. Built-in nodes are
``tuple``, ``list``, ``dict`` (children in sorted-key order), namedtuples (any ``tuple``
subclass with ``_fields``), ``None`` (a node with no children), ``collections.OrderedDict``
(insertion order) and ``collections.defaultdict`` (sorted keys). More node types are added
with :func:`register_pytree_node` or :func:`register_pytree_node_class`. Anything else is a
leaf. Semantics follow ``jax.tree_util``.

Example:
    >>> leaves, treedef = tree_flatten((1, {'b': 2, 'a': None}))
    >>> leaves
    [1, 2]
    >>> treedef
    PyTreeDef((*, {'a': None, 'b': *}))
    >>> tree_unflatten(treedef, [10, 20])
    (10, {'a': None, 'b': 20})

Internally a structure is a nested tuple: ``_LEAF`` for a leaf, ``(kind, aux, children)`` for
a node, where ``kind`` is the unique ``_NodeKind`` of the node's type (compared by identity),
``aux`` the node's auxiliary data and ``children`` a tuple of structures. Equality and hashing
of ``PyTreeDef`` are therefore plain tuple equality and hashing.
"""

from __future__ import annotations

import collections
import functools
import operator
from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "Partial",
    "PyTreeDef",
    "all_leaves",
    "register_pytree_node",
    "register_pytree_node_class",
    "tree_all",
    "tree_flatten",
    "tree_leaves",
    "tree_map",
    "tree_reduce",
    "tree_structure",
    "tree_transpose",
    "tree_unflatten",
    "treedef_children",
    "treedef_is_leaf",
    "treedef_tuple",
]


class _Leaf:
    __slots__ = ()

    def __repr__(self) -> str:
        return "*"

    def __reduce__(self):
        return "_LEAF"


_LEAF = _Leaf()
_MISSING = object()


class _NodeKind:
    """How to flatten, rebuild and print one node type. One instance per type."""

    __slots__ = ("type", "flatten", "unflatten", "fmt")

    def __init__(self, type_, flatten, unflatten, fmt):
        self.type = type_
        self.flatten = flatten  # node -> (iterable of children, aux)
        self.unflatten = unflatten  # (aux, list of children) -> node
        self.fmt = fmt  # (aux, list of child strings) -> str

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
_kinds: dict[type, _NodeKind] = {}
_registered: set[type] = set()


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
    )
    _kinds[t] = kind
    return kind


def _flatten_tuple(x):
    return x, None


def _sorted_keys(d) -> tuple:
    try:
        return tuple(sorted(d))
    except TypeError:  # incomparable keys (e.g. int and str): order by type, then repr
        return tuple(sorted(d, key=lambda k: (type(k).__qualname__, repr(k))))


def _flatten_dict(d):
    keys = _sorted_keys(d)
    return [d[k] for k in keys], keys


def _fmt_items(keys, strs) -> str:
    return ", ".join(f"{k!r}: {s}" for k, s in zip(keys, strs))


def _fmt_tuple(aux, strs) -> str:
    return f"({strs[0]},)" if len(strs) == 1 else f"({', '.join(strs)})"


def _flatten_defaultdict(d):
    keys = _sorted_keys(d)
    return [d[k] for k in keys], (d.default_factory, keys)


def _unflatten_defaultdict(aux, children):
    return collections.defaultdict(aux[0], zip(aux[1], children))


def _add_builtin(t, flatten, unflatten, fmt) -> None:
    _kinds[t] = _NodeKind(t, flatten, unflatten, fmt)
    _registered.add(t)


_add_builtin(tuple, _flatten_tuple, lambda aux, ch: tuple(ch), _fmt_tuple)
_add_builtin(list, lambda x: (x, None), lambda aux, ch: ch, lambda aux, s: f"[{', '.join(s)}]")
_add_builtin(
    dict,
    _flatten_dict,
    lambda aux, ch: dict(zip(aux, ch)),
    lambda aux, s: f"{{{_fmt_items(aux, s)}}}",
)
_add_builtin(type(None), lambda x: ((), None), lambda aux, ch: None, lambda aux, s: "None")
_add_builtin(
    collections.OrderedDict,
    lambda d: (list(d.values()), tuple(d)),
    lambda aux, ch: collections.OrderedDict(zip(aux, ch)),
    lambda aux, s: f"OrderedDict({{{_fmt_items(aux, s)}}})",
)
_add_builtin(
    collections.defaultdict,
    _flatten_defaultdict,
    _unflatten_defaultdict,
    lambda aux, s: f"defaultdict({aux[0]!r}, {{{_fmt_items(aux[1], s)}}})",
)

_TUPLE_KIND = _kinds[tuple]


# --------------------------------------------------------------------------------------------
# Flattening (the jit dispatch hot path: keep it lean)


def _flatten(x, leaves: list):
    kind = _kinds.get(type(x))
    if kind is None and (kind := _namedtuple_kind(type(x))) is None:
        leaves.append(x)
        return _LEAF
    children, aux = kind.flatten(x)
    return (kind, aux, tuple([_flatten(c, leaves) for c in children]))


def _flatten_is_leaf(x, leaves: list, is_leaf):
    if is_leaf(x):
        leaves.append(x)
        return _LEAF
    kind = _kinds.get(type(x))
    if kind is None and (kind := _namedtuple_kind(type(x))) is None:
        leaves.append(x)
        return _LEAF
    children, aux = kind.flatten(x)
    return (kind, aux, tuple([_flatten_is_leaf(c, leaves, is_leaf) for c in children]))


def _collect_leaves(x, leaves: list) -> None:
    kind = _kinds.get(type(x))
    if kind is None and (kind := _namedtuple_kind(type(x))) is None:
        leaves.append(x)
        return
    for c in kind.flatten(x)[0]:
        _collect_leaves(c, leaves)


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

    def unflatten(self, leaves: Iterable[Any]) -> Any:
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
            h = self._hash = hash(self._node)
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
        node = _flatten(tree, leaves)
    else:
        node = _flatten_is_leaf(tree, leaves, is_leaf)
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
        _collect_leaves(tree, leaves)
    else:
        _flatten_is_leaf(tree, leaves, is_leaf)
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


def tree_all(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every leaf of a pytree is truthy.

    Example:
        >>> tree_all([True, {'a': 1}]), tree_all((True, 0))
        (True, False)
    """
    return all(tree_leaves(tree, is_leaf))


def tree_transpose(
    outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None, pytree_to_transpose: Any
) -> Any:
    """Turns a tree of structure ``outer`` of trees of structure ``inner`` inside out.

    Args:
        outer_treedef: the outer structure.
        inner_treedef: the inner structure, or None to take it from the first inner tree.
        pytree_to_transpose: the pytree.

    Example:
        >>> outer = tree_structure([0, 0])
        >>> inner = tree_structure({'a': 0, 'b': 0})
        >>> tree_transpose(outer, inner, [{'a': 1, 'b': 2}, {'a': 3, 'b': 4}])
        {'a': [1, 3], 'b': [2, 4]}
    """
    flat = outer_treedef._flatten_up_to(pytree_to_transpose, "tree_transpose")
    if inner_treedef is None:
        if not flat:
            raise ValueError("tree_transpose: cannot infer inner_treedef of an empty outer tree")
        inner_treedef = tree_structure(flat[0])
    inner_leaves = [inner_treedef._flatten_up_to(x, "tree_transpose") for x in flat]
    columns = zip(*inner_leaves) if inner_leaves else [[]] * inner_treedef.num_leaves
    return inner_treedef.unflatten([outer_treedef.unflatten(col) for col in columns])


def all_leaves(iterable: Iterable[Any], is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every element of ``iterable`` is a leaf (``None`` is not a leaf).

    Example:
        >>> all_leaves([1, 2.0, 'x']), all_leaves([1, (2,)]), all_leaves([None])
        (True, False, False)
    """
    if is_leaf is None:
        for x in iterable:
            t = type(x)
            if t in _kinds or (issubclass(t, tuple) and hasattr(t, "_fields")):
                return False
        return True
    items = list(iterable)
    return items == tree_leaves(items, is_leaf)


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
    node = (_TUPLE_KIND, None, tuple(t._node for t in treedefs))
    return PyTreeDef(node, sum(t._num_leaves for t in treedefs))


def register_pytree_node(
    nodetype: type,
    flatten_func: Callable[[Any], tuple[Iterable[Any], Any]],
    unflatten_func: Callable[[Any, Iterable[Any]], Any],
) -> None:
    """Registers a type as a pytree node.

    Args:
        nodetype: the class.
        flatten_func: ``node -> (children, aux_data)``; ``aux_data`` must be hashable and
            comparable with ``==`` (it is part of the treedef).
        unflatten_func: ``(aux_data, children) -> node``; ``children`` is a tuple.

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
    if not isinstance(nodetype, type):
        raise TypeError(f"register_pytree_node: nodetype must be a type, got {nodetype!r}")
    if not callable(flatten_func) or not callable(unflatten_func):
        raise TypeError("register_pytree_node: flatten_func and unflatten_func must be callable")
    if nodetype in _registered:
        raise ValueError(f"register_pytree_node: duplicate registration of {nodetype!r}")
    name = nodetype.__name__
    _kinds[nodetype] = _NodeKind(
        nodetype,
        flatten_func,
        lambda aux, children: unflatten_func(aux, tuple(children)),
        lambda aux, strs: f"CustomNode({name}[{aux!r}], [{', '.join(strs)}])",
    )
    _registered.add(nodetype)


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
            return super().__new__(cls, _HashableCallableShim(func), *args, **kwargs)
        return super().__new__(cls, func, *args, **kwargs)


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, xs: Partial(func, *xs[0], **xs[1]),
)
