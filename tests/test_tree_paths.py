"""Key paths (tree_util.*_with_path, keystr, key classes), registration with keys and of
dataclasses, the ``ember.tree`` namespace, ``flatten_util.ravel_pytree`` and the small
top-level additions (float0, jacobian, default_backend, named_scope). Expected values are
written out by hand from JAX 0.10.2's behaviour."""

import collections
import dataclasses
import pickle
from typing import NamedTuple

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import tree_util as tu
from ember.flatten_util import ravel_pytree
from ember.tree_util import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey


class P(NamedTuple):
    x: object
    y: object


class Plain:
    """Registered without keys: its children get FlattenedIndexKey paths."""

    def __init__(self, a, b):
        self.a, self.b = a, b


tu.register_pytree_node(Plain, lambda p: ((p.a, p.b), "aux"), lambda aux, ch: Plain(*ch))


class Keyed:
    def __init__(self, x, y):
        self.x, self.y = x, y


tu.register_pytree_with_keys(
    Keyed,
    lambda k: (((GetAttrKey("x"), k.x), (DictKey("why"), k.y)), "kaux"),
    lambda aux, ch: Keyed(*ch),
)


@tu.register_pytree_with_keys_class
class KeyedClass:
    def __init__(self, v):
        self.v = v

    def tree_flatten_with_keys(self):
        return ((GetAttrKey("v"), self.v),), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


@tu.register_dataclass
@dataclasses.dataclass
class Layer:
    w: object
    b: object
    act: str = dataclasses.field(default="relu", metadata={"static": True})


# --------------------------------------------------------------------------------------------
# Key classes and keystr


def test_key_str_repr_and_fields():
    assert (str(SequenceKey(0)), repr(SequenceKey(0))) == ("[0]", "SequenceKey(idx=0)")
    assert (str(DictKey("a")), repr(DictKey("a"))) == ("['a']", "DictKey(key='a')")
    assert str(DictKey(1)) == "[1]"
    assert (str(GetAttrKey("w")), repr(GetAttrKey("w"))) == (".w", "GetAttrKey(name='w')")
    assert str(FlattenedIndexKey(2)) == "[<flat index 2>]"
    assert repr(FlattenedIndexKey(2)) == "FlattenedIndexKey(key=2)"
    assert SequenceKey(3).idx == 3 and DictKey("k").key == "k"
    assert GetAttrKey("n").name == "n" and FlattenedIndexKey(4).key == 4
    assert SequenceKey.__match_args__ == ("idx",)


def test_keys_are_immutable_hashable_and_typed():
    assert SequenceKey(0) == SequenceKey(0) and hash(SequenceKey(0)) == hash(SequenceKey(0))
    assert SequenceKey(0) != FlattenedIndexKey(0)  # same value, different kind of key
    assert DictKey(0) != SequenceKey(0) and DictKey("a") != "a"
    assert len({DictKey("a"), DictKey("a"), GetAttrKey("a")}) == 2
    with pytest.raises(AttributeError):
        SequenceKey(0).idx = 1
    with pytest.raises(TypeError):
        SequenceKey("a")
    with pytest.raises(TypeError):
        GetAttrKey(1)
    with pytest.raises(TypeError):
        hash(DictKey([1]))  # constructible, but an unhashable key is unhashable
    path = (DictKey("a"), SequenceKey(1), GetAttrKey("x"), FlattenedIndexKey(0))
    assert pickle.loads(pickle.dumps(path)) == path


def test_keystr():
    path = (DictKey("foo"), SequenceKey(1), GetAttrKey("x"), FlattenedIndexKey(2))
    assert tu.keystr(path) == "['foo'][1].x[<flat index 2>]"
    assert tu.keystr(path, simple=True, separator="/") == "foo/1/x/2"
    assert tu.keystr(path, simple=True) == "foo1x2"
    assert tu.keystr(()) == ""
    assert tu.keystr(("a", 1)) == "a1"  # any object: its str()
    with pytest.raises(TypeError):
        tu.keystr(path, True)  # simple and separator are keyword-only


# --------------------------------------------------------------------------------------------
# Paths of built-in and registered nodes


def test_flatten_with_path_builtin_nodes():
    tree = {
        "b": [1, (2, None)],
        "a": P(3, {"z": 4}),
        "c": collections.OrderedDict([("q", 5), ("p", 6)]),
        "d": collections.defaultdict(list, {"n": 7, "m": 8}),
    }
    pairs, treedef = tu.tree_flatten_with_path(tree)
    assert [(tu.keystr(p), x) for p, x in pairs] == [
        ("['a'].x", 3),
        ("['a'].y['z']", 4),
        ("['b'][0]", 1),
        ("['b'][1][0]", 2),
        ("['c']['q']", 5),  # OrderedDict: insertion order
        ("['c']['p']", 6),
        ("['d']['m']", 8),  # defaultdict: sorted keys
        ("['d']['n']", 7),
    ]
    assert pairs[0][0] == (DictKey("a"), GetAttrKey("x"))
    assert pairs[3][0] == (DictKey("b"), SequenceKey(1), SequenceKey(0))
    # Same leaves, order and structure as tree_flatten.
    leaves, expected_def = tu.tree_flatten(tree)
    assert [x for _, x in pairs] == leaves and treedef == expected_def
    assert treedef.unflatten([x for _, x in pairs]) == tree


def test_paths_of_trivial_trees():
    assert tu.tree_leaves_with_path(1) == [((), 1)]
    assert tu.tree_leaves_with_path(None) == []
    assert tu.tree_leaves_with_path([]) == []
    assert tu.tree_leaves_with_path({"a": None, "b": ()}) == []


def test_paths_of_custom_nodes():
    pairs, treedef = tu.tree_flatten_with_path([Plain(1, [2, 3])])
    assert [p for p, _ in pairs] == [
        (SequenceKey(0), FlattenedIndexKey(0)),
        (SequenceKey(0), FlattenedIndexKey(1), SequenceKey(0)),
        (SequenceKey(0), FlattenedIndexKey(1), SequenceKey(1)),
    ]
    assert treedef == tu.tree_structure([Plain(1, [2, 3])])

    pairs, treedef = tu.tree_flatten_with_path({"k": Keyed(1, (2,))})
    assert [(tu.keystr(p), x) for p, x in pairs] == [("['k'].x", 1), ("['k']['why'][0]", 2)]
    assert repr(treedef) == "PyTreeDef({'k': CustomNode(Keyed[kaux], [*, (*,)])})"
    assert tu.tree_map(lambda v: v * 10, Keyed(1, 2)).y == 20  # flatten derived from keys

    assert tu.tree_leaves_with_path(KeyedClass(5)) == [((GetAttrKey("v"),), 5)]
    # Partial: (args, keywords) are children 0 and 1 of a keyless node.
    assert tu.tree_leaves_with_path(tu.Partial(max, 1, k=2)) == [
        ((FlattenedIndexKey(0), SequenceKey(0)), 1),
        ((FlattenedIndexKey(1), DictKey("k")), 2),
    ]


def test_register_pytree_node_flatten_with_keys_func():
    class R:
        def __init__(self, a):
            self.a = a

    tu.register_pytree_node(
        R,
        lambda r: ((r.a,), None),
        lambda aux, ch: R(*ch),
        lambda r: (((DictKey("aa"), r.a),), None),
    )
    assert tu.tree_leaves_with_path(R(3)) == [((DictKey("aa"),), 3)]
    assert tu.tree_leaves(R(3)) == [3]


def test_is_leaf_with_and_without_path():
    tree = {"a": [1, 2], "b": {"c": 3}}
    assert tu.tree_leaves_with_path(tree, is_leaf=lambda x: isinstance(x, list)) == [
        ((DictKey("a"),), [1, 2]),
        ((DictKey("b"), DictKey("c")), 3),
    ]
    by_depth = tu.tree_leaves_with_path(
        tree, is_leaf=lambda p, x: len(p) == 1, is_leaf_takes_path=True
    )
    assert by_depth == [((DictKey("a"),), [1, 2]), ((DictKey("b"),), {"c": 3})]
    pairs, treedef = tu.tree_flatten_with_path(tree, lambda x: isinstance(x, list))
    assert treedef == tu.tree_structure(tree, lambda x: isinstance(x, list))


def test_tree_map_with_path():
    out = tu.tree_map_with_path(
        lambda p, x, y: (tu.keystr(p), x + y), {"a": 1, "b": (2, 3)}, {"a": 10, "b": (20, 30)}
    )
    assert out == {"a": ("['a']", 11), "b": (("['b'][0]", 22), ("['b'][1]", 33))}
    # rest trees may be deeper where tree has leaves
    out = tu.tree_map_with_path(lambda p, x, y: (len(p), y), [1], [{"z": 0}])
    assert out == [(1, {"z": 0})]
    out = tu.tree_map_with_path(
        lambda p, x: tu.keystr(p), {"a": [1, 2]}, is_leaf=lambda x: isinstance(x, list)
    )
    assert out == {"a": "['a']"}
    with pytest.raises(ValueError, match="tree_map_with_path"):
        tu.tree_map_with_path(lambda p, x, y: x, (1, 2), (1, 2, 3))


# --------------------------------------------------------------------------------------------
# register_dataclass, register_static, broadcast, reduce_associative


def test_register_dataclass_inferred_fields():
    layer = Layer(1, [2, 3])
    pairs, treedef = tu.tree_flatten_with_path(layer)
    assert pairs == [
        ((GetAttrKey("w"),), 1),
        ((GetAttrKey("b"), SequenceKey(0)), 2),
        ((GetAttrKey("b"), SequenceKey(1)), 3),
    ]
    assert repr(treedef) == "PyTreeDef(CustomNode(Layer[('relu',)], [*, [*, *]]))"
    assert tu.tree_map(lambda v: v + 1, layer) == Layer(2, [3, 4])
    assert tu.tree_structure(Layer(0, 0, act="tanh")) != tu.tree_structure(Layer(0, 0))
    # a meta field is static under jit; data fields are traced
    f = ember.jit(lambda m: m.w * 2 if m.act == "relu" else m.w)
    assert float(f(Layer(jnp.float32(3), None))) == 6.0
    assert float(f(Layer(jnp.float32(3), None, act="id"))) == 3.0


def test_register_dataclass_explicit_fields_and_errors():
    @dataclasses.dataclass
    class E:
        a: object
        b: object
        c: object = dataclasses.field(default=0, init=False)
        s: str = "z"

    assert tu.register_dataclass(E, data_fields=["a", "b"], meta_fields=["s"]) is E
    e = E(1, 2)
    assert tu.tree_unflatten(tu.tree_structure(e), [5, 6]) == E(5, 6)

    def fresh():
        @dataclasses.dataclass
        class F:
            a: object
            b: object = 1
            s: str = "z"

        return F

    with pytest.raises(TypeError, match="must both be specified"):
        tu.register_dataclass(fresh(), data_fields=["a"])
    with pytest.raises(ValueError, match="Missing fields: {'b'}"):
        tu.register_dataclass(fresh(), data_fields=["a"], meta_fields=["s"])
    with pytest.raises(ValueError, match="Unexpected fields: {'q'}"):
        tu.register_dataclass(fresh(), data_fields=["a", "b", "q"], meta_fields=["s"])
    with pytest.raises(ValueError, match="must not overlap"):
        tu.register_dataclass(fresh(), data_fields=["a", "b"], meta_fields=["s", "b"])
    F = fresh()
    tu.register_dataclass(F, data_fields=["a"], meta_fields=[], drop_fields=["b", "s"])
    assert tu.tree_leaves(F(1, 2, "q")) == [1]
    with pytest.raises(TypeError, match="not a dataclass"):
        tu.register_dataclass(type("NotDC", (), {}))
    with pytest.raises(ValueError, match="duplicate"):
        tu.register_dataclass(Layer)

    class Obj:  # not a dataclass: explicit fields, rebuilt with keywords
        def __init__(self, a, m):
            self.a, self.m = a, m

    tu.register_dataclass(Obj, ["a"], ["m"])
    pairs, treedef = tu.tree_flatten_with_path(Obj(1, "q"))
    assert pairs == [((GetAttrKey("a"),), 1)]
    assert treedef.unflatten([7]).a == 7 and treedef.unflatten([7]).m == "q"


def test_register_static():
    @tu.register_static
    class Mode(str):
        pass

    assert tu.tree_leaves([Mode("train"), 1]) == [1]
    assert tu.tree_structure(Mode("a")) != tu.tree_structure(Mode("b"))
    f = ember.jit(lambda m, x: x + 1 if m == "add" else x - 1)
    assert int(f(Mode("add"), 1)) == 2 and int(f(Mode("sub"), 1)) == 0


def test_broadcast_and_reduce_associative():
    assert tu.tree_broadcast((1, 2, 3), (0, {"a": 0, "b": 0}, (0, 0))) == (
        1,
        {"a": 2, "b": 2},
        (3, 3),
    )
    with pytest.raises(ValueError):
        tu.tree_broadcast((1, 2), (0, 0, 0))
    calls = []

    def add(a, b):
        calls.append((a, b))
        return a + b

    assert tu.tree_reduce_associative(add, [1, 2, (3, 4, 5)]) == 15
    assert calls == [(1, 2), (4, 5), (3, 9), (3, 12)]  # balanced, left half the smaller
    assert tu.tree_reduce_associative(add, [], identity=0) == 0
    with pytest.raises(TypeError):
        tu.tree_reduce_associative(add, [])


# --------------------------------------------------------------------------------------------
# ember.tree


def test_tree_namespace():
    t = ember.tree
    tree = {"b": (2, 3), "a": [1, None]}
    leaves, treedef = t.flatten(tree)
    assert leaves == [1, 2, 3] and t.leaves(tree) == [1, 2, 3]
    assert t.structure(tree) == treedef and t.unflatten(treedef, [4, 5, 6]) == {
        "b": (5, 6),
        "a": [4, None],
    }
    assert t.map(lambda x, y: x * y, tree, {"b": (10, 10), "a": [10, None]}) == {
        "b": (20, 30),
        "a": [10, None],
    }
    assert t.map(lambda x: x, [1, (2,)], is_leaf=lambda x: isinstance(x, tuple)) == [1, (2,)]
    assert t.all([True, (1,)]) and not t.all([True, 0])
    assert t.reduce(lambda a, b: a + b, tree) == 6 and t.reduce(max, [], 7) == 7
    assert t.reduce_associative(lambda a, b: a + b, tree) == 6
    assert t.transpose(t.structure([0, 0]), None, [(1, 2), (3, 4)]) == ([1, 3], [2, 4])
    assert t.broadcast((1, 2), (0, [0, 0])) == (1, [2, 2])
    pairs, treedef2 = t.flatten_with_path(tree)
    assert [tu.keystr(p) for p, _ in pairs] == ["['a'][0]", "['b'][0]", "['b'][1]"]
    assert treedef2 == treedef
    assert t.leaves_with_path(tree) == pairs
    assert t.map_with_path(lambda p, x: len(p), tree) == {"b": (2, 2), "a": [2, None]}
    with pytest.raises(TypeError):
        t.all(tree, None)  # is_leaf is keyword-only


def test_tree_static_field():
    @tu.register_dataclass
    @dataclasses.dataclass
    class Op:
        x: object
        op: str = ember.tree.static(default="add", metadata={"doc": "d"})

    assert dataclasses.fields(Op)[1].metadata == {"static": True, "doc": "d"}
    assert ember.tree.flatten(Op(1)) == ([1], tu.tree_structure(Op(2)))
    assert repr(tu.tree_structure(Op(1))) == "PyTreeDef(CustomNode(Op[('add',)], [*]))"


# --------------------------------------------------------------------------------------------
# ravel_pytree


def test_ravel_single_dtype():
    tree = {"w": jnp.arange(4.0).reshape(2, 2), "b": jnp.array([10.0, 11.0])}
    flat, unravel = ravel_pytree(tree)
    assert flat.dtype == np.float32
    np.testing.assert_array_equal(flat, [10, 11, 0, 1, 2, 3])  # leaf order: 'b', 'w'
    back = unravel(flat)
    assert back["w"].shape == (2, 2)
    np.testing.assert_array_equal(back["w"], [[0, 1], [2, 3]])
    # one dtype: unravel takes any dtype and keeps it (JAX's dtype-polymorphic unravel)
    ints = unravel(jnp.arange(6, dtype=jnp.int32))
    assert ints["b"].dtype == np.int32
    np.testing.assert_array_equal(ints["w"], [[2, 3], [4, 5]])


def test_ravel_mixed_dtypes_round_trip():
    tree = {
        "a": jnp.ones((2, 2), jnp.int32),
        "b": (jnp.float16(1.5), 2.0),
        "c": np.arange(3, dtype=np.uint8),
        "d": True,
    }
    flat, unravel = ravel_pytree(tree)
    assert flat.dtype == np.float32 and flat.shape == (10,)
    np.testing.assert_array_equal(flat, [1, 1, 1, 1, 1.5, 2, 0, 1, 2, 1])
    back = unravel(flat)
    assert [x.dtype for x in tu.tree_leaves(back)] == [
        np.int32,
        np.float16,
        np.float32,
        np.uint8,
        np.bool_,
    ]
    assert back["a"].shape == (2, 2) and back["b"][0].shape == ()
    np.testing.assert_array_equal(back["c"], [0, 1, 2])
    assert bool(back["d"]) is True
    # int and float: float32; complex wins over float
    assert ravel_pytree((1, 2.0))[0].dtype == np.float32
    assert ravel_pytree([jnp.complex64(1 + 1j), 2.0])[0].dtype == np.complex64
    assert ravel_pytree([jnp.bfloat16(1), jnp.float16(2)])[0].dtype == np.float32


def test_ravel_empty_and_weak_types():
    flat, unravel = ravel_pytree({"a": None, "b": []})
    assert flat.dtype == np.float32 and flat.shape == (0,)
    assert unravel(flat) == {"a": None, "b": []}
    assert ravel_pytree((1, 2))[0].weak_type  # one dtype: no conversion, still weak
    assert not ravel_pytree((1, 2.0))[0].weak_type


def test_unravel_errors():
    _, unravel = ravel_pytree((jnp.arange(3.0), jnp.ones(2)))
    with pytest.raises(ValueError, match=r"shape \(5,\)"):
        unravel(jnp.arange(4.0))
    _, unravel = ravel_pytree((jnp.arange(3.0), jnp.ones(2, jnp.int32)))
    with pytest.raises(TypeError, match="dtype int32, but expected dtype float32"):
        unravel(jnp.arange(5))
    with pytest.raises(TypeError, match="dtype float16"):
        unravel(jnp.ones(5, jnp.float16))
    # float64 NumPy input is canonicalized to float32 (x64 off), as in JAX
    assert unravel(np.arange(5.0))[1].dtype == np.int32


def test_unravel_is_hashable_and_compared_by_value():
    _, u1 = ravel_pytree((jnp.ones(2), jnp.int32(1)))
    _, u2 = ravel_pytree((jnp.zeros(2), jnp.int32(7)))
    _, u3 = ravel_pytree((jnp.zeros(3), jnp.int32(7)))
    assert u1 == u2 and hash(u1) == hash(u2) and u1 != u3


def test_ravel_pytree_under_grad_jit_vmap():
    params = {"a": jnp.arange(3.0), "b": (jnp.float32(2.0), jnp.ones((2, 2)))}

    def loss(p):
        flat, _ = ravel_pytree(p)
        return jnp.sum(flat**2)

    g = ember.jit(ember.grad(loss))(params)
    np.testing.assert_allclose(g["a"], [0, 2, 4])
    np.testing.assert_allclose(g["b"][0], 4.0)
    np.testing.assert_allclose(g["b"][1], np.full((2, 2), 2.0))

    # gradient through unravel, in vector form
    flat, unravel = ravel_pytree(params)

    def loss_flat(v):
        p = unravel(v)
        return jnp.sum(p["a"] * 3.0) + p["b"][0] ** 2

    gv = ember.jit(ember.grad(loss_flat))(flat)
    np.testing.assert_allclose(gv, [3, 3, 3, 4, 0, 0, 0, 0])

    batched = ember.vmap(lambda t: ravel_pytree(t)[0])({"a": jnp.ones((3, 2)), "b": jnp.zeros(3)})
    np.testing.assert_array_equal(batched, np.tile([1, 1, 0], (3, 1)))
    out = ember.vmap(unravel)(jnp.ones((2, 8)))
    assert out["b"][1].shape == (2, 2, 2)


# --------------------------------------------------------------------------------------------
# Top-level additions


def test_top_level_additions():
    assert ember.float0 == ember.dtypes.float0
    assert ember.default_backend() == "cpu"
    x = jnp.array([1.0, 2.0])
    np.testing.assert_allclose(ember.jacobian(lambda v: v**2)(x), np.diag([2.0, 4.0]))
    for name in ["tree", "flatten_util", "float0", "jacobian", "default_backend", "named_scope"]:
        assert name in ember.__all__

    with ember.named_scope("layer") as scope:
        assert scope is None

    @ember.jit
    @ember.named_scope("double")
    def double(v):
        return v * 2

    np.testing.assert_array_equal(double(x), [2.0, 4.0])
    np.testing.assert_array_equal(double(x), [2.0, 4.0])  # the decorator is reusable
    with pytest.raises(TypeError, match="must be a string"):
        ember.named_scope(3)
