import collections
import copy
import pickle
import re
from typing import NamedTuple

import numpy as np
import pytest

from ember import tree_util as tu


class Point(NamedTuple):
    x: object
    y: object


Pair = collections.namedtuple("Pair", ["first", "second"])


class Custom:
    """Registered with register_pytree_node; aux data is `name`."""

    def __init__(self, a, b, name="c"):
        self.a, self.b, self.name = a, b, name

    def __eq__(self, other):
        return type(other) is Custom and (self.a, self.b, self.name) == (
            other.a,
            other.b,
            other.name,
        )

    __hash__ = None


tu.register_pytree_node(
    Custom, lambda c: ((c.a, c.b), c.name), lambda name, ch: Custom(ch[0], ch[1], name)
)


@tu.register_pytree_node_class
class Box:
    def __init__(self, value, tag=None):
        self.value, self.tag = value, tag

    def tree_flatten(self):
        return (self.value,), self.tag

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, tag=aux)

    def __eq__(self, other):
        return type(other) is Box and (self.value, self.tag) == (other.value, other.tag)

    __hash__ = None


def _stable_id(value):
    """A test id without object addresses (the same in every process, as pytest-xdist needs)."""
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))


ROUND_TRIP_TREES = [
    1,
    "leaf",
    None,
    (),
    [],
    {},
    (1,),
    [1, 2],
    (1, [2, (3, 4)], {"a": 5}),
    {"b": 1, "a": [2, None, 3], "c": {"z": (), "y": 4}},
    [[], (), {}, None, [[]]],
    Point(1, (2, 3)),
    Pair([1, 2], {"k": 3}),
    Point(Point(1, 2), None),
    collections.OrderedDict([("b", 1), ("a", (2, 3))]),
    collections.defaultdict(list, {"b": 1, "a": [2]}),
    Custom(1, [2, 3], name="n"),
    Box({"v": Box(1, tag="inner")}, tag=("outer", 1)),
    [Custom(Box(1), None), Point(Custom(2, 3), 4)],
]


@pytest.mark.parametrize("tree", ROUND_TRIP_TREES, ids=_stable_id)
def test_round_trip(tree):
    leaves, treedef = tu.tree_flatten(tree)
    rebuilt = tu.tree_unflatten(treedef, leaves)
    assert rebuilt == tree
    assert type(rebuilt) is type(tree)
    assert treedef.num_leaves == len(leaves)
    assert tu.tree_leaves(tree) == leaves
    assert tu.tree_structure(tree) == treedef
    # rebuilding from a generator and a tuple works as well
    assert tu.tree_unflatten(treedef, iter(leaves)) == tree
    assert tu.tree_unflatten(treedef, tuple(leaves)) == tree
    # identity tree_map rebuilds the same tree, and multi-tree map matches itself
    assert tu.tree_map(lambda x: x, tree) == tree
    assert tu.tree_map(lambda x, y: x, tree, tree) == tree


def test_leaf_order():
    tree = {"b": [3, 4], "a": (1, 2), "c": {"e": 6, "d": 5}}
    assert tu.tree_leaves(tree) == [1, 2, 3, 4, 5, 6]
    assert tu.tree_leaves([1, (2, [3, 4]), 5]) == [1, 2, 3, 4, 5]


def test_none_is_empty_node():
    assert tu.tree_leaves([None, 1]) == [1]
    assert tu.tree_leaves(None) == []
    leaves, treedef = tu.tree_flatten(None)
    assert leaves == [] and treedef.num_leaves == 0 and treedef.num_nodes == 1
    assert tu.tree_unflatten(treedef, []) is None
    assert tu.tree_map(lambda x: x + 1, [None, 1, {"a": None}]) == [None, 2, {"a": None}]
    assert tu.tree_structure(None) != tu.tree_structure(1)


def test_leaves_of_other_types():
    arr = np.arange(3)
    obj = object()
    tree = [arr, 1.5, 2, "s", obj, b"b", np.float32(1)]
    leaves = tu.tree_leaves(tree)
    assert len(leaves) == 7 and leaves[0] is arr and leaves[4] is obj

    # subclasses of dict/list are leaves (exact types only), namedtuples are not
    class MyDict(dict):
        pass

    class MyList(list):
        pass

    assert tu.tree_leaves([MyDict(a=1), MyList([1, 2])]) == [MyDict(a=1), MyList([1, 2])]


def test_dict_key_order():
    d = {"c": 3, "a": 1, "b": 2}
    leaves, treedef = tu.tree_flatten(d)
    assert leaves == [1, 2, 3]
    rebuilt = tu.tree_unflatten(treedef, leaves)
    assert list(rebuilt) == ["a", "b", "c"]
    assert tu.tree_structure({"a": 1, "b": 2}) == tu.tree_structure({"b": 2, "a": 1})
    assert list(tu.tree_map(lambda x: x, d)) == ["a", "b", "c"]
    # integer keys sort numerically; incomparable keys are an error, as in JAX
    assert tu.tree_leaves({10: "x", 2: "y"}) == ["y", "x"]
    with pytest.raises(ValueError, match="sorting pytree dictionary keys"):
        tu.tree_flatten({1: "int", "a": "str"})


def test_ordered_dict_keeps_insertion_order():
    od = collections.OrderedDict([("b", 1), ("a", 2)])
    leaves, treedef = tu.tree_flatten(od)
    assert leaves == [1, 2]
    rebuilt = tu.tree_unflatten(treedef, leaves)
    assert type(rebuilt) is collections.OrderedDict and list(rebuilt) == ["b", "a"]
    assert treedef != tu.tree_structure(collections.OrderedDict([("a", 2), ("b", 1)]))
    assert treedef != tu.tree_structure({"b": 1, "a": 2})


def test_defaultdict_keeps_factory():
    dd = collections.defaultdict(list, {"b": 1, "a": 2})
    leaves, treedef = tu.tree_flatten(dd)
    assert leaves == [2, 1]
    rebuilt = tu.tree_unflatten(treedef, leaves)
    assert type(rebuilt) is collections.defaultdict and rebuilt.default_factory is list
    assert rebuilt["missing"] == []
    assert treedef != tu.tree_structure(collections.defaultdict(dict, {"b": 1, "a": 2}))


def test_namedtuple_rebuilt_with_its_class():
    p = Point(1, [2, 3])
    out = tu.tree_map(lambda v: v * 10, p)
    assert type(out) is Point and out == Point(10, [20, 30])
    q = tu.tree_map(lambda v: v, Pair(1, 2))
    assert type(q) is Pair
    # a namedtuple is a different node type from a tuple and from another namedtuple
    assert tu.tree_structure(Point(1, 2)) != tu.tree_structure((1, 2))
    assert tu.tree_structure(Point(1, 2)) != tu.tree_structure(Pair(1, 2))
    assert tu.tree_structure(Point(1, 2)) == tu.tree_structure(Point(3, 4))

    class Sub(Point):  # a subclass of a namedtuple class is its own node type
        pass

    s = tu.tree_map(lambda v: v + 1, Sub(1, 2))
    assert type(s) is Sub and s == (2, 3)


def test_custom_node_register_pytree_node():
    c = Custom(1, (2, 3), name="hello")
    leaves, treedef = tu.tree_flatten(c)
    assert leaves == [1, 2, 3]
    out = tu.tree_unflatten(treedef, [4, 5, 6])
    assert out == Custom(4, (5, 6), name="hello")
    assert tu.tree_map(lambda x: -x, c) == Custom(-1, (-2, -3), name="hello")


def test_custom_node_register_pytree_node_class():
    b = Box([1, Box(2, tag="t")], tag="outer")
    assert tu.tree_leaves(b) == [1, 2]
    out = tu.tree_map(lambda x: x * 2, b)
    assert out == Box([2, Box(4, tag="t")], tag="outer")


def test_register_pytree_node_class_returns_class():
    class Local:
        def __init__(self, v):
            self.v = v

        def tree_flatten(self):
            return [self.v], None

        @classmethod
        def tree_unflatten(cls, aux, children):
            assert isinstance(children, tuple)
            return cls(*children)

    assert tu.register_pytree_node_class(Local) is Local
    assert tu.tree_map(lambda x: x + 1, Local(1)).v == 2


def test_double_registration_raises():
    with pytest.raises(ValueError, match="Custom"):
        tu.register_pytree_node(Custom, lambda c: ((), None), lambda aux, ch: Custom(0, 0))
    with pytest.raises(ValueError):
        tu.register_pytree_node_class(Box)
    for builtin in (tuple, list, dict, type(None)):
        with pytest.raises(ValueError):
            tu.register_pytree_node(builtin, lambda x: ((), None), lambda aux, ch: None)


def test_register_rejects_non_types():
    with pytest.raises(TypeError):
        tu.register_pytree_node("not a type", lambda x: ((), None), lambda aux, ch: None)


def test_tree_map_multiple_trees():
    a = {"x": 1, "y": (2, 3)}
    b = {"x": 10, "y": (20, 30)}
    c = {"x": 100, "y": (200, 300)}
    assert tu.tree_map(lambda p, q: p + q, a, b) == {"x": 11, "y": (22, 33)}
    assert tu.tree_map(lambda p, q, r: p + q + r, a, b, c) == {"x": 111, "y": (222, 333)}


def test_tree_map_prefix_trees():
    # where the first tree has a leaf, the other trees may have whole subtrees
    out = tu.tree_map(lambda x, sub: (x, sub), [1, 2], [(3, 4), {"a": 5}])
    assert out == [(1, (3, 4)), (2, {"a": 5})]


def test_is_leaf():
    tree = [(1, 2), {"a": (3, 4)}, 5]
    leaves = tu.tree_leaves(tree, is_leaf=lambda x: isinstance(x, tuple))
    assert leaves == [(1, 2), (3, 4), 5]
    leaves, treedef = tu.tree_flatten(tree, is_leaf=lambda x: isinstance(x, tuple))
    assert treedef == tu.tree_structure([0, {"a": 0}, 0])
    assert tu.tree_map(len, tree[:2], is_leaf=lambda x: isinstance(x, tuple)) == [2, {"a": 2}]
    # is_leaf sees None too, which makes None a leaf
    assert tu.tree_leaves([None, 1], is_leaf=lambda x: x is None) == [None, 1]
    # is_leaf at the root
    assert tu.tree_leaves((1, 2), is_leaf=lambda x: True) == [(1, 2)]
    assert repr(tu.tree_structure((1, 2), is_leaf=lambda x: True)) == "PyTreeDef(*)"


def test_treedef_equality_and_hash():
    t1 = tu.tree_structure({"a": 1, "b": (2, None)})
    t2 = tu.tree_structure({"b": ("x", None), "a": np.zeros(3)})
    assert t1 == t2 and hash(t1) == hash(t2)
    assert len({t1, t2}) == 1
    different = [
        tu.tree_structure({"a": 1, "c": (2, None)}),  # key
        tu.tree_structure({"a": 1, "b": (2, 3)}),  # None vs leaf
        tu.tree_structure({"a": 1, "b": [2, None]}),  # list vs tuple
        tu.tree_structure({"a": 1, "b": (2,)}),  # arity
        tu.tree_structure([1, (2, None)]),
    ]
    for d in different:
        assert t1 != d
    assert len({t1, *different}) == len(different) + 1
    assert tu.tree_structure(()) != tu.tree_structure([])
    assert tu.tree_structure(()) != tu.tree_structure(None)
    assert tu.tree_structure(1) == tu.tree_structure("a")
    assert t1 != "not a treedef"


def test_treedef_custom_aux_data_equality():
    t1 = tu.tree_structure(Custom(1, 2, name="a"))
    t2 = tu.tree_structure(Custom(3, 4, name="a"))
    t3 = tu.tree_structure(Custom(1, 2, name="b"))
    assert t1 == t2 and hash(t1) == hash(t2)
    assert t1 != t3
    assert tu.tree_structure(Box(1, tag=1)) != tu.tree_structure(Box(1, tag=2))


def test_treedef_as_cache_key():
    cache = {}
    for i in range(3):
        cache.setdefault(tu.tree_structure((np.float32(i), [i, {"k": i}])), []).append(i)
    assert list(cache.values()) == [[0, 1, 2]]


def test_treedef_copy_and_pickle():
    t = tu.tree_structure([1, {"a": Point(1, None)}, collections.OrderedDict(b=2)])
    assert copy.copy(t) == t and copy.deepcopy(t) == t
    assert hash(copy.deepcopy(t)) == hash(t)
    assert pickle.loads(pickle.dumps(t)) == t


@pytest.mark.parametrize(
    "tree, expected",
    [
        (1, "PyTreeDef(*)"),
        (None, "PyTreeDef(None)"),
        ((), "PyTreeDef(())"),
        ([], "PyTreeDef([])"),
        ({}, "PyTreeDef({})"),
        ((1,), "PyTreeDef((*,))"),
        ((1, 2), "PyTreeDef((*, *))"),
        ([1, (2, 3)], "PyTreeDef([*, (*, *)])"),
        ({"a": 1, "b": [2, 3]}, "PyTreeDef({'a': *, 'b': [*, *]})"),
        ((1, {"a": 2, "b": None}), "PyTreeDef((*, {'a': *, 'b': None}))"),
        ({"b": 1, "a": 2}, "PyTreeDef({'a': *, 'b': *})"),
        ({1: None, 0: [None]}, "PyTreeDef({0: [None], 1: None})"),
        ([None, [], ()], "PyTreeDef([None, [], ()])"),
    ],
)
def test_repr_standard_containers(tree, expected):
    assert repr(tu.tree_structure(tree)) == expected


def test_repr_other_nodes():
    assert (
        repr(tu.tree_structure(Point(1, 2))) == "PyTreeDef(CustomNode(namedtuple[Point], [*, *]))"
    )
    assert repr(tu.tree_structure(Custom(1, None, name="n"))) == (
        "PyTreeDef(CustomNode(Custom[n], [*, None]))"  # (aux data by str, as in JAX)
    )
    assert repr(tu.tree_structure(Box(1))) == "PyTreeDef(CustomNode(Box[None], [*]))"
    od = collections.OrderedDict([("b", 1), ("a", 2)])
    assert repr(tu.tree_structure(od)) == "PyTreeDef(CustomNode(OrderedDict[('b', 'a')], [*, *]))"


def test_num_leaves_num_nodes_children():
    t = tu.tree_structure((1, [2, None], {"a": 3}))
    assert t.num_leaves == 3
    assert t.num_nodes == 7  # tuple, leaf, list, leaf, None, dict, leaf
    assert t.children() == [
        tu.tree_structure(0),
        tu.tree_structure([0, None]),
        tu.tree_structure({"a": 0}),
    ]
    assert [c.num_leaves for c in t.children()] == [1, 1, 1]
    assert tu.treedef_children(t) == t.children()
    assert tu.tree_structure(1).children() == []
    assert tu.tree_structure(1).num_nodes == 1


def test_treedef_is_leaf():
    assert tu.treedef_is_leaf(tu.tree_structure(1))
    assert not tu.treedef_is_leaf(tu.tree_structure((1,)))
    assert not tu.treedef_is_leaf(tu.tree_structure([1, 2]))
    # as in JAX: a single-node structure (None, an empty container) counts as a leaf treedef
    assert tu.treedef_is_leaf(tu.tree_structure(None))


def test_all_leaves():
    assert tu.all_leaves([1, 2.0, np.ones(2), "s"])
    assert not tu.all_leaves([1, (2,)])
    assert not tu.all_leaves([None])
    assert not tu.all_leaves([Point(1, 2)])
    assert not tu.all_leaves([Box(1)])
    assert tu.all_leaves([(1, 2)], is_leaf=lambda x: isinstance(x, tuple))


def test_tree_reduce_and_tree_all():
    tree = {"a": 1, "b": [2, 3, None]}
    assert tu.tree_reduce(lambda a, b: a + b, tree) == 6
    assert tu.tree_reduce(lambda a, b: a + b, tree, 10) == 16
    assert tu.tree_reduce(lambda a, b: a + b, [], initializer=0) == 0
    with pytest.raises(TypeError):
        tu.tree_reduce(lambda a, b: a + b, [])
    assert tu.tree_all([True, {"a": 1}, None])
    assert not tu.tree_all([True, (0,)])
    assert tu.tree_all([])


def test_tree_transpose():
    outer = tu.tree_structure([0, 0, 0])
    inner = tu.tree_structure({"a": 0, "b": 0})
    tree = [{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"a": 5, "b": 6}]
    expected = {"a": [1, 3, 5], "b": [2, 4, 6]}
    assert tu.tree_transpose(outer, inner, tree) == expected
    assert tu.tree_transpose(outer, None, tree) == expected
    with pytest.raises(TypeError, match="Mismatch"):  # (5 leaves, not 3 x 2: JAX's TypeError)
        tu.tree_transpose(outer, inner, [{"a": 1, "b": 2}, {"a": 3}, {"a": 5, "b": 6}])


def test_treedef_tuple():
    t = tu.treedef_tuple([tu.tree_structure(1), tu.tree_structure({"a": 1, "b": 2})])
    assert t == tu.tree_structure((0, {"a": 0, "b": 0}))
    assert t.num_leaves == 3


def _assert_mismatch(fn, first, second):
    with pytest.raises(ValueError) as info:
        fn()
    msg = str(info.value)
    assert repr(tu.tree_structure(first)) in msg
    assert repr(tu.tree_structure(second)) in msg
    return msg


@pytest.mark.parametrize(
    "first, second",
    [
        ((1, 2), [1, 2]),  # tuple vs list
        ((1, 2), (1, 2, 3)),  # arity
        ([1, 2], [1]),
        ({"a": 1, "b": 2}, {"a": 1, "c": 2}),  # keys
        ({"a": 1}, {"a": 1, "b": 2}),
        ([None, 1], [2, 1]),  # None vs leaf
        ((1, (2, 3)), (1, 4)),  # node vs leaf
        (Point(1, 2), (1, 2)),  # namedtuple vs tuple
        (Point(1, 2), Pair(1, 2)),
        (Custom(1, 2, name="a"), Custom(1, 2, name="b")),  # aux data
        (Box(1), [1]),
    ],
    ids=_stable_id,
)
def test_mismatch_errors_show_both_structures(first, second):
    msg = _assert_mismatch(lambda: tu.tree_map(lambda x, y: x, first, second), first, second)
    assert "tree_map" in msg
    treedef = tu.tree_structure(first)
    _assert_mismatch(lambda: treedef.flatten_up_to(second), first, second)
    # the mismatching tree may also come third
    _assert_mismatch(lambda: tu.tree_map(lambda x, y, z: x, first, first, second), first, second)


def test_flatten_up_to():
    treedef = tu.tree_structure((0, {"a": 0, "b": 0}))
    assert treedef.flatten_up_to(([1], {"a": (2, 3), "b": None})) == [[1], (2, 3), None]
    assert treedef.flatten_up_to((1, {"b": 3, "a": 2})) == [1, 2, 3]


def test_unflatten_wrong_leaf_count():
    treedef = tu.tree_structure({"a": 1, "b": (2, 3)})
    for leaves in ([1, 2], [1, 2, 3, 4], []):
        with pytest.raises(ValueError) as info:
            tu.tree_unflatten(treedef, leaves)
        msg = str(info.value)
        assert repr(treedef) in msg
        assert "3" in msg and str(len(leaves)) in msg
    with pytest.raises(ValueError):
        treedef.unflatten(iter([1, 2]))
