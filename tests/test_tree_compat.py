"""Pytree behaviours checked against JAX 0.10: each expected value below is what
``jax.tree_util`` / ``jax.tree`` / ``jax.flatten_util`` gave for the same call (written in as
literals, so this file needs no jax)."""

import collections

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import tree_util as tu


class Tagged:
    """A custom node whose aux data (``tag``) may be anything, unhashable included."""

    def __init__(self, value, tag):
        self.value, self.tag = value, tag

    def __repr__(self):
        return f"Tagged({self.value!r}, {self.tag!r})"


tu.register_pytree_node(Tagged, lambda t: ((t.value,), t.tag), lambda tag, ch: Tagged(ch[0], tag))


# --- dict keys ------------------------------------------------------------------------------


@pytest.mark.parametrize("tree", [{1: 1, "a": 2}, {None: 1, 2: 2}, {1j: 1, 2j: 2}])
def test_incomparable_dict_keys_raise_value_error(tree):
    with pytest.raises(ValueError, match="sorting pytree dictionary keys"):
        tu.tree_leaves(tree)
    with pytest.raises(ValueError, match="sorting pytree dictionary keys"):
        tu.tree_structure(tree)


def test_incomparable_defaultdict_keys_raise_type_error():
    with pytest.raises(TypeError):  # (JAX: sorted's own TypeError)
        tu.tree_leaves(collections.defaultdict(int, {1: 1, "a": 2}))
    # OrderedDict keeps insertion order: nothing to sort
    assert tu.tree_leaves(collections.OrderedDict({1: 1, "a": 2})) == [1, 2]


# --- treedef text ---------------------------------------------------------------------------


def test_repr_of_ordered_dict_defaultdict_and_custom_nodes():
    od = collections.OrderedDict([("b", 1), ("a", 2)])
    assert repr(tu.tree_structure(od)) == "PyTreeDef(CustomNode(OrderedDict[('b', 'a')], [*, *]))"
    dd = collections.defaultdict(list, {"b": 1, "a": 2})
    assert (
        str(tu.tree_structure(dd))
        == "PyTreeDef(CustomNode(defaultdict[(<class 'list'>, ('a', 'b'))], [*, *]))"
    )
    assert (
        repr(tu.tree_structure(collections.defaultdict(None, {"b": 1})))
        == "PyTreeDef(CustomNode(defaultdict[(None, ('b',))], [*]))"
    )
    # aux data printed with str, not repr
    assert repr(tu.tree_structure(Tagged(1, "aux"))) == "PyTreeDef(CustomNode(Tagged[aux], [*]))"
    assert repr(tu.tree_structure([Tagged((1, 2), ("p",))])) == (
        "PyTreeDef([CustomNode(Tagged[('p',)], [(*, *)])])"
    )


# --- treedef methods ------------------------------------------------------------------------


def test_node_data():
    assert tu.tree_structure(1).node_data() is None
    assert tu.tree_structure(None).node_data() == (type(None), None)
    assert tu.tree_structure((1, 2)).node_data() == (tuple, None)
    assert tu.tree_structure([1]).node_data() == (list, None)
    nd = tu.tree_structure({10: 1, 2: 2}).node_data()
    assert nd == (dict, [2, 10]) and type(nd[1]) is list
    assert tu.tree_structure({}).node_data() == (dict, [])
    od = collections.OrderedDict([("b", 1), ("a", 2)])
    assert tu.tree_structure(od).node_data() == (collections.OrderedDict, ("b", "a"))
    dd = collections.defaultdict(list, {"b": 1, "a": 2})
    assert tu.tree_structure(dd).node_data() == (collections.defaultdict, (list, ("a", "b")))
    assert tu.tree_structure(Tagged(1, "aux")).node_data() == (Tagged, "aux")


def test_compose():
    outer, inner = tu.tree_structure((1, 2)), tu.tree_structure({"a": 1, "b": None})
    composed = outer.compose(inner)
    assert repr(composed) == "PyTreeDef(({'a': *, 'b': None}, {'a': *, 'b': None}))"
    assert composed == tu.tree_structure(({"a": 0, "b": None}, {"a": 0, "b": None}))
    assert composed.num_leaves == 2
    assert tu.tree_structure(None).compose(tu.tree_structure([1])) == tu.tree_structure(None)
    assert tu.tree_structure(1).compose(tu.tree_structure([1])) == tu.tree_structure([1])


def test_unhashable_aux_data_treedef_hashes_and_passes_through_jit():
    t1, t2 = tu.tree_structure(Tagged(1, ["x"])), tu.tree_structure(Tagged(2, ["x"]))
    assert t1 == t2 and hash(t1) == hash(t2)
    assert t1 != tu.tree_structure(Tagged(1, ["y"]))
    f = ember.jit(lambda t: t.value * len(t.tag))
    assert float(f(Tagged(np.float32(2), ["x", "y"]))) == 4.0
    assert float(f(Tagged(np.float32(3), ["x", "y"]))) == 6.0
    out = ember.jit(lambda x: Tagged(x, ["q"]))(1.0)
    assert out.tag == ["q"] and float(out.value) == 1.0


# --- is_leaf --------------------------------------------------------------------------------


@pytest.mark.parametrize("result", [1, 0.0, np.True_, np.False_])
def test_is_leaf_must_return_a_bool(result):
    pred = lambda *args: result  # noqa: E731
    with pytest.raises(ValueError, match="non-boolean"):
        tu.tree_flatten((1, [2]), is_leaf=pred)
    with pytest.raises(ValueError, match="non-boolean"):
        tu.tree_leaves((1, [2]), is_leaf=pred)
    with pytest.raises(ValueError, match="non-boolean"):
        tu.tree_map(lambda x: x, (1, [2]), is_leaf=pred)
    with pytest.raises(ValueError, match="non-boolean"):
        tu.tree_flatten_with_path((1, [2]), is_leaf=pred)
    with pytest.raises(ValueError, match="non-boolean"):
        tu.tree_flatten_with_path((1, [2]), is_leaf=pred, is_leaf_takes_path=True)


def test_is_leaf_returning_none_means_false():
    assert tu.tree_leaves((1, [2]), is_leaf=lambda x: None) == [1, 2]
    pairs, _ = tu.tree_flatten_with_path((1, [2]), is_leaf=lambda x: None)
    assert [leaf for _, leaf in pairs] == [1, 2]


def test_all_leaves_with_is_leaf_compares_by_identity():
    a, b = np.zeros(2), np.zeros(2)
    assert tu.all_leaves([a, (b,)], is_leaf=lambda x: False) is False
    assert tu.all_leaves([a, (b,)], is_leaf=lambda x: isinstance(x, tuple)) is True
    assert tu.all_leaves([a, None], is_leaf=lambda x: x is None) is True


def test_tree_all_is_leaf_is_keyword_only():
    with pytest.raises(TypeError):
        tu.tree_all([1, 0], lambda x: False)
    assert tu.tree_all([(1,), (0,)], is_leaf=lambda x: isinstance(x, tuple)) is True
    assert ember.tree.all([(1,), (0,)], is_leaf=lambda x: isinstance(x, tuple)) is True


# --- tree_transpose -------------------------------------------------------------------------


def test_tree_transpose_checks_only_the_number_of_leaves():
    outer = tu.tree_structure([0, 0, 0])
    # an inner tree may be deeper than inner_treedef: its leaves are taken in order
    got = tu.tree_transpose(outer, tu.tree_structure((0, 0)), [(1, [2]), (3, [4]), (5, [6])])
    assert got == ([1, 3, 5], [2, 4, 6])
    # or have another structure with as many leaves
    got = tu.tree_transpose(outer, tu.tree_structure((0, 0)), [{"a": 1, "b": 2}] * 3)
    assert got == ([1, 1, 1], [2, 2, 2])
    assert ember.tree.transpose(outer, None, [(1, 2), (3, 4), (5, 6)]) == ([1, 3, 5], [2, 4, 6])
    with pytest.raises(TypeError, match="Mismatch"):
        tu.tree_transpose(tu.tree_structure((0, 0)), tu.tree_structure({"a": 0}), [{"a": 1}] * 3)


# --- new functions --------------------------------------------------------------------------


def test_is_tree_node():
    Point = collections.namedtuple("Point", "x y")

    class DictSub(dict):
        pass

    nodes = [tuple, list, dict, type(None), collections.OrderedDict, Point, tu.Partial, Tagged]
    assert all(tu.is_tree_node(t) for t in nodes)
    assert not any(tu.is_tree_node(t) for t in (int, str, np.ndarray, DictSub))


def test_flatten_one_level():
    children, aux = tu.flatten_one_level({"b": [1], "a": 2})
    assert list(children) == [2, [1]] and aux == ("a", "b")
    children, aux = tu.flatten_one_level((1, (2, 3)))
    assert list(children) == [1, (2, 3)] and aux is None
    assert list(tu.flatten_one_level(None)[0]) == []
    children, aux = tu.flatten_one_level(collections.OrderedDict([("b", 1), ("a", 2)]))
    assert list(children) == [1, 2] and aux == ("b", "a")
    children, aux = tu.flatten_one_level(Tagged([1], "t"))
    assert list(children) == [[1]] and aux == "t"
    with pytest.raises(ValueError, match="can't tree-flatten"):
        tu.flatten_one_level(1)
    pairs, aux = tu.flatten_one_level_with_keys({"b": 1, "a": 2})
    assert list(pairs) == [(tu.DictKey("a"), 2), (tu.DictKey("b"), 1)] and aux == ("a", "b")
    pairs, _ = tu.flatten_one_level_with_keys((5,))
    assert list(pairs) == [(tu.SequenceKey(0), 5)]
    with pytest.raises(ValueError, match="can't tree-flatten"):
        tu.flatten_one_level_with_keys(jnp.ones(2))


# --- key classes ----------------------------------------------------------------------------


def test_key_classes_take_their_field_names_as_keywords():
    keys = (
        tu.DictKey(key="a"),
        tu.SequenceKey(idx=1),
        tu.GetAttrKey(name="n"),
        tu.FlattenedIndexKey(key=2),
    )
    assert [repr(k) for k in keys] == [
        "DictKey(key='a')",
        "SequenceKey(idx=1)",
        "GetAttrKey(name='n')",
        "FlattenedIndexKey(key=2)",
    ]
    assert keys[0] == tu.DictKey("a") and tu.keystr(keys) == "['a'][1].n[<flat index 2>]"


# --- Partial --------------------------------------------------------------------------------


def test_partial_of_a_partial_keeps_the_inner_parts_visible():
    def add3(a, b, c=0):
        return a + b + c

    p = tu.Partial(tu.Partial(add3, 1, c=5), 2)
    assert p.args == (2,) and p.keywords == {}
    assert p.func.func is add3 and p.func.args == (1,) and p.func.keywords == {"c": 5}
    assert tu.tree_leaves(p) == [2] and p() == 8
    assert tu.tree_map(lambda x: x * 10, p)() == 26


# --- registration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flatten", [lambda x: 5, lambda x: ((1, 2), None, 3), lambda x: (5, None), lambda x: [(1,), 2]]
)
def test_malformed_flatten_function_raises_value_error(flatten):
    class Bad:
        pass

    tu.register_pytree_node(Bad, flatten, lambda aux, children: Bad())
    for fn in (tu.tree_leaves, tu.tree_flatten, tu.tree_structure):
        with pytest.raises(ValueError, match=r"Bad must return a \(children, aux_data\) tuple"):
            fn([Bad()])
    # a generator of children is fine
    class Gen:
        pass

    tu.register_pytree_node(Gen, lambda x: ((c for c in (1, 2)), None), lambda aux, ch: Gen())
    assert tu.tree_leaves(Gen()) == [1, 2]


# --- ravel_pytree ---------------------------------------------------------------------------


@pytest.mark.parametrize("arg", [None, "ab", [1.0, 2.0], (1.0, 2.0)])
@pytest.mark.parametrize("leaves", [(np.float32(1), np.float32(2)), (np.float32(1), np.int32(2))])
def test_unravel_rejects_non_arrays_with_type_error(arg, leaves):
    from ember.flatten_util import ravel_pytree

    flat, unravel = ravel_pytree(leaves)
    with pytest.raises(TypeError, match="unravel"):
        unravel(arg)
    assert [float(x) for x in unravel(np.asarray(flat))] == [1.0, 2.0]


def test_treedef_argument_checks():
    td = tu.tree_structure((1, 2))
    with pytest.raises(TypeError):  # (positional-only, as in JAX)
        td.unflatten(leaves=[1, 2])
    assert td.unflatten([3, 4]) == (3, 4)
    with pytest.raises(TypeError, match="treedef_tuple"):
        tu.treedef_tuple([1, 2])
    with pytest.raises(TypeError, match="compose"):
        td.compose((1,))
