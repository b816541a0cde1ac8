"""Typed PRNG keys (``random.key``) against jax.random: bits, shapes, dtype, transformations."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember import random as er
from ember.random.key_array import PRNGKeyArray


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    np.testing.assert_array_equal(a, b)


def _same_keys(a, b, jax):
    assert isinstance(a, PRNGKeyArray)
    assert a.shape == b.shape and str(a.dtype) == str(b.dtype) == "key<fry>"
    _same(er.key_data(a), jax.random.key_data(b))


def test_key_seed_data_repr_and_dtype(jax):
    jr = jax.random
    for seed in (0, 42, -1, 2 ** 31 + 3):
        _same_keys(er.key(seed), jr.key(seed), jax)
        _same(er.key_data(er.key(seed)), er.PRNGKey(seed))  # same data as the legacy key
    k, jk = er.key(7), jr.key(7)
    ks, jks = er.split(k, 4), jr.split(jk, 4)
    assert repr(k) == repr(jk) and repr(ks) == repr(jks) and str(ks) == str(jks)
    assert (k.shape, k.ndim, k.size, ks.shape, len(ks)) == ((), 0, 1, (4,), 4)
    assert repr(k.dtype) == repr(jk.dtype) and k.dtype == er.key_dtype() == ks.dtype
    assert jnp.issubdtype(k.dtype, ember.dtypes.prng_key)
    assert jnp.issubdtype(k.dtype, ember.dtypes.extended)
    assert ember.dtypes.issubdtype(k.dtype, ember.dtypes.prng_key)
    assert not jnp.issubdtype(k.dtype, jnp.integer) and not jnp.issubdtype(jnp.uint32,
                                                                           ember.dtypes.prng_key)
    assert er.key_impl(k) == jr.key_impl(jk) == "threefry2x32"
    assert er.key_impl(er.PRNGKey(0)) == "threefry2x32"
    data = np.asarray(jr.key_data(jks))
    _same_keys(er.wrap_key_data(data), jr.wrap_key_data(data), jax)
    _same(er.key_data(er.PRNGKey(3)), jr.key_data(jr.PRNGKey(3)))  # legacy data: itself
    _same_keys(er.key(5, impl="threefry2x32"), jr.key(5, impl="threefry2x32"), jax)
    _same_keys(er.wrap_key_data(data, dtype=er.key_dtype()), jr.wrap_key_data(data), jax)
    _same_keys(er.clone(k), jr.clone(jk), jax)


def test_key_indexing_reshape_compare(jax):
    jr = jax.random
    ks, jks = er.split(er.key(1), (2, 3)), jr.split(jr.key(1), (2, 3))
    for f in (lambda a: a[1], lambda a: a[:, 1:], lambda a: a[..., None], lambda a: a[None],
              lambda a: a[0, 2], lambda a: a.reshape(3, 2), lambda a: a.reshape(-1),
              lambda a: a.T, lambda a: a[np.array([1, 0])], lambda a: a.ravel()):
        _same_keys(f(ks), f(jks), jax)
    _same_keys(list(ks[0])[2], list(jks[0])[2], jax)
    _same(ks == ks[0, 0], jks == jks[0, 0])
    _same(ks != ks[:, :1], jks != jks[:, :1])
    assert bool(er.key(0) == er.key(0)) and not bool(er.key(0) == er.key(1))


def test_key_arrays_in_jnp_functions_that_move_elements(jax):
    # As in JAX, jnp's stacking, reshaping, selecting and indexing functions take key
    # arrays; eager, under jit and under vmap.
    ks, jks = er.split(er.key(1), 4), jax.random.split(jax.random.key(1), 4)
    mask = np.array([True, False, False, True])
    cases = [
        lambda m, a: m.stack([a, a[::-1]]), lambda m, a: m.concatenate([a, a[:2]]),
        lambda m, a: m.where(mask, a, a[::-1]), lambda m, a: m.reshape(a, (2, 2)),
        lambda m, a: m.take(a, np.array([3, 0])), lambda m, a: m.expand_dims(a, 0),
        lambda m, a: m.squeeze(a[None]), lambda m, a: m.transpose(a.reshape(2, 2)),
        lambda m, a: m.broadcast_to(a[0], (3,)), lambda m, a: m.ravel(a.reshape(2, 2)),
        lambda m, a: m.swapaxes(a.reshape(2, 2), 0, 1), lambda m, a: m.flip(a),
        lambda m, a: m.roll(a, 1), lambda m, a: m.tile(a, 2), lambda m, a: m.repeat(a, 2),
        lambda m, a: m.split(a, 2)[1], lambda m, a: m.asarray(a), lambda m, a: m.copy(a),
        lambda m, a: m.hstack([a, a]), lambda m, a: m.vstack([a, a]),
        lambda m, a: m.moveaxis(a.reshape(2, 2), 0, 1), lambda m, a: m.atleast_2d(a),
        lambda m, a: m.take_along_axis(a, np.array([2, 2, 0, 1]), axis=0),
        lambda m, a: m.select([mask], [a], a[::-1]),
        lambda m, a: a.at[1].set(a[3]), lambda m, a: a.take(np.array([1, 1])),
        lambda m, a: a.swapaxes(0, 0),
    ]
    for f in cases:
        expected = f(jax.numpy, jks)
        _same_keys(f(jnp, ks), expected, jax)
        _same_keys(ember.jit(lambda a, f=f: f(jnp, a))(ks), expected, jax)
    stacked = ember.vmap(lambda a: jnp.stack([a, a]))(ks)
    _same_keys(stacked, jax.vmap(lambda a: jax.numpy.stack([a, a]))(jks), jax)
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        jnp.stack([ks, [1, 2]])  # (no key array: the usual error)
    with pytest.raises(TypeError, match="expected a key array"):
        ks.at[0].set(0)
    with pytest.raises(TypeError):
        jnp.sin(ks)  # (arithmetic stays refused)


def test_key_errors(jax):
    jr = jax.random
    k, ks = er.key(0), er.split(er.key(0), 4)
    with pytest.raises(TypeError, match="add does not accept dtypes key<fry>, int32"):
        k + 1
    with pytest.raises(TypeError):
        jr.key(0) + 1  # (the oracle raises too)
    with pytest.raises(TypeError, match="cannot be converted to a NumPy array"):
        np.asarray(k)
    with pytest.raises(TypeError, match="key accepts a scalar seed, but was given a PRNG key"):
        er.key(k)
    with pytest.raises(TypeError, match="PRNGKey accepts a scalar seed"):
        er.PRNGKey(k)
    with pytest.raises(ValueError, match=r"split accepts a single key, but was given a key "
                                         r"array of shape \(4,\) != \(\)"):
        er.split(ks)
    with pytest.raises(ValueError, match="normal accepts a single key"):
        er.normal(ks)
    with pytest.raises(TypeError, match="key_data.dtype = uint32"):
        er.wrap_key_data(np.zeros(2, np.float32))
    with pytest.raises(TypeError, match="key_data.shape to end with"):
        er.wrap_key_data(np.zeros(3, np.uint32))
    with pytest.raises(TypeError, match="already typed"):
        er.wrap_key_data(k)
    with pytest.raises(ValueError, match="unrecognized PRNG implementation"):
        er.key(0, impl="rbg")
    with pytest.raises(ValueError, match="Cannot specify both"):
        er.key(0, impl="threefry2x32", dtype=er.key_dtype())
    with pytest.raises(TypeError, match="unexpected PRNG key type"):
        er.key_data([0, 0])


_SAMPLERS = [
    lambda r, k: r.uniform(k, (5,)),
    lambda r, k: r.normal(k, (2, 3)),
    lambda r, k: r.bits(k, (4,)),
    lambda r, k: r.randint(k, (6,), 0, 9),
    lambda r, k: r.permutation(k, 7),
    lambda r, k: r.bernoulli(k, 0.3, (6,)),
    lambda r, k: r.categorical(k, np.log(np.array([0.2, 0.3, 0.5], np.float32)), shape=(4,)),
    lambda r, k: r.choice(k, 5, (3,), replace=False),
    lambda r, k: r.gumbel(k, (3,)),
]


def test_typed_keys_give_legacy_bits(jax):
    jr = jax.random
    k, legacy, jk = er.key(3), er.PRNGKey(3), jr.key(3)
    for f in _SAMPLERS:
        got = f(er, k)
        _same(got, f(er, legacy))
        np.testing.assert_allclose(np.asarray(got, np.float64),
                                   np.asarray(f(jr, jk), np.float64), rtol=1e-6)
    _same_keys(er.fold_in(k, 9), jr.fold_in(jk, 9), jax)
    _same(er.fold_in(legacy, 9), jr.fold_in(jr.PRNGKey(3), 9))  # (legacy stays legacy)
    assert not isinstance(er.split(legacy), PRNGKeyArray)


def test_keys_through_jit_vmap_and_loops(jax):
    jr = jax.random
    k, jk = er.key(11), jr.key(11)
    ks, jks = er.split(k, 4), jr.split(jk, 4)
    # jit: keys as arguments and results
    _same_keys(ember.jit(lambda k: er.split(k, 3))(k), jr.split(jk, 3), jax)
    _same_keys(ember.jit(lambda k: er.fold_in(k, 2))(k), jr.fold_in(jk, 2), jax)
    _same(ember.jit(lambda k: er.bits(k, (3,)))(k), jr.bits(jk, (3,)))
    out_k, out_x = ember.jit(lambda k: (er.split(k)[0], er.uniform(k)))(k)
    _same_keys(out_k, jr.split(jk)[0], jax)
    # vmap over a key array, results that are keys too
    _same(ember.vmap(lambda k: er.bits(k, (2,)))(ks), jax.vmap(lambda k: jr.bits(k, (2,)))(jks))
    _same_keys(ember.vmap(lambda k: er.split(k))(ks), jax.vmap(lambda k: jr.split(k))(jks), jax)
    _same_keys(ember.jit(ember.vmap(lambda k: er.fold_in(k, 5)))(ks),
               jax.vmap(lambda k: jr.fold_in(k, 5))(jks), jax)

    # fori_loop / scan carries, with split and fold_in inside
    def body(r, lax_):
        def f(i, c):
            key, acc = c
            key, sub = r.split(key)
            return r.fold_in(key, i), acc + r.bits(sub)
        return f

    for run in (lambda f, c: f(c), lambda f, c: ember.jit(f)(c)):
        got_k, got_acc = run(lambda c: lax.fori_loop(0, 3, body(er, lax), c), (k, np.uint32(0)))
        want_k, want_acc = jax.lax.fori_loop(0, 3, body(jr, jax.lax), (jk, np.uint32(0)))
        _same_keys(got_k, want_k, jax)
        _same(got_acc, want_acc)

    def step(r):
        return lambda c, key: (r.fold_in(c, 1), r.bits(key))

    got = lax.scan(step(er), k, ks)
    want = jax.lax.scan(step(jr), jk, jks)
    _same_keys(got[0], want[0], jax)
    _same(got[1], want[1])
    # cond with key operands and results
    got = lax.cond(True, lambda k: er.split(k)[1], lambda k: k, k)
    _same_keys(got, jr.split(jk)[1], jax)
    # tree_util: the key array itself is the leaf, as in JAX
    leaves = ember.tree_util.tree_leaves(ks)
    assert len(leaves) == 1 and leaves[0] is ks
    assert jax.tree_util.tree_leaves(jks)[0].shape == leaves[0].shape == (4,)


def test_comparing_a_key_with_a_number_raises_and_keys_pass_through_jit_bare():
    # As JAX: comparisons need two keys. (A bare key result of jit must not be probed
    # with ``== 0``.)
    key = ember.random.key(3)
    with pytest.raises(TypeError, match="equal does not accept dtypes key<fry>, int32"):
        key == 0  # noqa: B015
    with pytest.raises(TypeError, match="not_equal does not accept"):
        key != 1.0  # noqa: B015
    out = ember.jit(lambda k: k)(key)
    assert bool(out == key) and bool(ember.jit(lambda k: k)(key) == key)


def test_issubdtype_with_key_dtypes_on_either_side():
    # As JAX: a key dtype is a subdtype of itself, of extended and prng_key, and of nothing
    # else; nothing else is a subdtype of it.
    kd = ember.random.key(0).dtype
    assert jnp.issubdtype(kd, kd) and jnp.issubdtype(kd, ember.dtypes.prng_key)
    assert jnp.issubdtype(kd, ember.dtypes.extended)
    assert not jnp.issubdtype(kd, np.dtype("float32")) and not jnp.issubdtype(kd, jnp.integer)
    assert not jnp.issubdtype(np.float32, kd) and not jnp.issubdtype(jnp.uint32, kd)


_LAX_MOVES = {
    "select": lambda l, k, p, i: l.select(p, k, k[::-1]),
    "select_n": lambda l, k, p, i: l.select_n(p, k, k[::-1]),
    "dynamic_slice": lambda l, k, p, i: l.dynamic_slice(k, (1,), (2,)),
    "dynamic_update_slice": lambda l, k, p, i: l.dynamic_update_slice(k, k[:1], (1,)),
    "dynamic_index_in_dim": lambda l, k, p, i: l.dynamic_index_in_dim(k, 1),
    "concatenate": lambda l, k, p, i: l.concatenate([k, k], 0),
    "reshape": lambda l, k, p, i: l.reshape(k, (3, 1)),
    "broadcast": lambda l, k, p, i: l.broadcast(k[0], (2,)),
    "broadcast_in_dim": lambda l, k, p, i: l.broadcast_in_dim(k, (2, 3), (1,)),
    "squeeze": lambda l, k, p, i: l.squeeze(k[None], (0,)),
    "expand_dims": lambda l, k, p, i: l.expand_dims(k, (0,)),
    "transpose": lambda l, k, p, i: l.transpose(k[None], (1, 0)),
    "rev": lambda l, k, p, i: l.rev(k, (0,)),
    "slice": lambda l, k, p, i: l.slice(k, (0,), (2,)),
    "index_take": lambda l, k, p, i: l.index_take(k, (i,), (0,)),
}


@pytest.mark.parametrize("name", sorted(_LAX_MOVES))
def test_lax_functions_that_move_elements_take_keys(jax, name):
    # As in JAX: eagerly and under jit, with JAX's key data.
    f = _LAX_MOVES[name]
    pred, idx = np.array([True, False, True]), np.array([0, 2])
    keys = ember.random.split(ember.random.key(0), 3)
    want = f(jax.lax, jax.random.split(jax.random.key(0), 3), pred, idx)
    for got in (f(ember.lax, keys, pred, idx),
                ember.jit(lambda k: f(ember.lax, k, pred, idx))(keys)):
        assert got.dtype == ember.random.key(0).dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(ember.random.key_data(got)),
                                      np.asarray(jax.random.key_data(want)))
    with pytest.raises(TypeError):  # (functions that compute still refuse keys)
        ember.lax.add(keys, keys)


def test_public_tree_util_shows_key_arrays_as_leaves():
    # As JAX: a key array is one leaf of the user's pytrees, whatever its shape.
    tu = ember.tree_util
    key, keys = er.key(0), er.split(er.key(1), 3)
    state = {"k": key, "ks": keys, "w": jnp.zeros(3)}
    assert tu.tree_leaves(key) == [key]
    leaves, treedef = tu.tree_flatten(state)
    assert leaves[0] is key and leaves[1] is keys and len(leaves) == 3
    assert repr(treedef) == "PyTreeDef({'k': *, 'ks': *, 'w': *})"
    assert tu.tree_structure(key) == tu.tree_structure(1)
    assert tu.tree_map(lambda x: x.shape, state) == {"k": (), "ks": (3,), "w": (3,)}
    assert ember.tree.map(lambda x, y: (x is y), state, state) == {"k": True, "ks": True,
                                                                    "w": True}
    # an is_leaf predicate still applies around the keys
    assert tu.tree_leaves([state, {"a": 1}], is_leaf=lambda x: "a" in x
                          if isinstance(x, dict) else False)[-1] == {"a": 1}
    pairs, _ = tu.tree_flatten_with_path({"k": key})
    assert pairs == [((tu.DictKey("k"),), key)]
    got = tu.tree_map_with_path(lambda p, x: (tu.keystr(p), x.shape), {"k": keys})
    assert got == {"k": ("['k']", (3,))}
    # broadcast and transpose take the full tree's structure with key leaves
    assert tu.tree_broadcast((0, 1), (key, [5, 6])) == (0, [1, 1])
    outer, inner = tu.tree_structure([0, 0]), tu.tree_structure((0, 0))
    firsts, seconds = tu.tree_transpose(outer, inner, [(key, 1), (keys, 2)])
    assert firsts[0] is key and firsts[1] is keys and seconds == [1, 2]
    assert tu.all_leaves([key, 1]) and tu.all_leaves([keys], is_leaf=lambda x: False)
    assert not tu.is_tree_node(type(key)) and not tu.default_registry.is_node(type(key))
    with pytest.raises(ValueError, match="can't tree-flatten type"):
        tu.flatten_one_level(key)
    assert tu.tree_reduce(lambda a, b: a + b.size, [key, keys], 0) == 4
    # ember's own pytrees still see the key data (what the transformations carry)
    from ember import _pytree
    assert np.shape(_pytree.tree_leaves(keys)[0]) == (3, 2)


def test_key_arrays_are_arrays_to_isinstance_and_tree_maps_under_jit():
    key = er.key(4)
    assert isinstance(key, ember.Array) and isinstance(er.split(key), ember.Array)
    assert not isinstance(np.zeros(2), ember.Array)
    seen = []

    @ember.jit
    def step(state):
        seen.append(isinstance(state["k"], ember.Array))
        new = ember.tree_util.tree_map(lambda x: x, state)  # user code: keys are leaves
        k1, k2 = er.split(new["k"])
        return {"k": k1, "x": new["x"] + er.uniform(k2, (2,))}

    state = {"k": key, "x": jnp.zeros(2)}
    out = step(state)
    assert seen == [True]
    k1, k2 = er.split(key)
    assert bool(out["k"] == k1)
    np.testing.assert_array_equal(np.asarray(out["x"]), np.asarray(er.uniform(k2, (2,))))
    # a scan over a state holding keys, then vmap over a batch of keys
    carry, _ = lax.scan(lambda s, _: (step(s), None), state, None, length=3)
    assert carry["k"].shape == () and carry["x"].shape == (2,)
    draws = ember.vmap(lambda k: er.normal(k, ()))(er.split(key, 5))
    want = np.array([float(er.normal(k, ())) for k in er.split(key, 5)], np.float32)
    np.testing.assert_allclose(np.asarray(draws), want, rtol=1e-6)


def test_ember_modules_use_their_own_pytree_view():
    # ember's transformations must flatten key arrays to their data: only the public
    # modules may import ``tree_util`` (which shows keys as leaves).
    import ast
    import pathlib

    def imports_tree_util(tree: ast.AST) -> bool:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "ember.tree_util":
                return True
            if isinstance(node, ast.ImportFrom) and node.module == "ember" and any(
                    a.name == "tree_util" for a in node.names):
                return True
            if isinstance(node, ast.Import) and any(
                    a.name == "ember.tree_util" for a in node.names):
                return True
        return False

    root = pathlib.Path(ember.__file__).parent
    public = {root / "tree_util.py", root / "tree.py", root / "__init__.py"}
    assert imports_tree_util(ast.parse("from ember import (\n    lax,\n    tree_util,\n)"))
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if p not in public and imports_tree_util(ast.parse(p.read_text()))]
    assert offenders == []


def test_negative_vmap_axes_count_the_keys_axes():
    # As JAX: axis -1 of a (3, 4) key array is its axis 1, not the key data's words axis.
    keys = er.split(er.key(0), 12).reshape(3, 4)
    moved = ember.vmap(lambda k: k, in_axes=-1)(keys)
    assert moved.shape == (4, 3) and bool((moved == keys.T).all())
    assert bool((ember.vmap(lambda k: k, in_axes=(-2,))(keys) == keys).all())
    pairs = ember.vmap(lambda k: er.split(k, 2), out_axes=-1)(keys[0])
    assert pairs.shape == (2, 4)
    assert bool((pairs == ember.vmap(lambda k: er.split(k, 2), out_axes=1)(keys[0])).all())
    both = ember.vmap(lambda k: er.split(k[0], 2), in_axes=-1, out_axes=-2)(keys)
    assert both.shape == (4, 2) and bool((both[1] == er.split(keys[0, 1], 2)).all())
    # arrays beside the keys keep their own negative axes
    got = ember.vmap(lambda k, x: (k, x), in_axes=-1)(keys, np.arange(8).reshape(2, 4))
    assert got[0].shape == (4, 3) and got[1].shape == (4, 2)


def test_like_functions_and_cotangents_of_key_arrays():
    keys = er.split(er.key(3), 3)
    # As JAX: the *_like functions give key arrays whose words all hold the fill value...
    for fn, word in [(jnp.zeros_like, 0), (jnp.ones_like, 1), (lambda k: jnp.full_like(k, 7),
                                                               7)]:
        out = fn(keys)
        assert isinstance(out, PRNGKeyArray) and out.shape == (3,)
        np.testing.assert_array_equal(np.asarray(er.key_data(out)), np.full((3, 2), word))
    assert isinstance(ember.jit(jnp.zeros_like)(keys[0]), PRNGKeyArray)
    # ... and arrays of another dtype, given one
    np.testing.assert_array_equal(np.asarray(jnp.zeros_like(keys, dtype=jnp.float32)),
                                  np.zeros(3, np.float32))
    assert jnp.full_like(keys, 2, dtype=jnp.int32).dtype == np.int32
    # The cotangent of a key array is float0 zeros of the keys' shape (allow_int).
    g = ember.grad(lambda w, k: w.sum(), argnums=(0, 1), allow_int=True)(jnp.ones(2), keys)
    assert g[1].dtype == ember.dtypes.float0 and g[1].shape == (3,)
    _, pullback = ember.vjp(lambda w, k: (w * 2).sum(), jnp.ones(2), keys[0])
    cts = pullback(1.0)
    np.testing.assert_array_equal(np.asarray(cts[0]), [2.0, 2.0])
    assert cts[1].dtype == ember.dtypes.float0 and cts[1].shape == ()


def test_shape_dtype_structs_of_keys_in_and_out_of_eval_shape_and_lower(jax):
    # A state holding a key (an init function's output, say) has a struct of the key
    # dtype, as JAX's; such a struct stands in for a key argument.
    key_struct = ember.ShapeDtypeStruct((), er.key(0).dtype)
    assert repr(key_struct) == "ShapeDtypeStruct(shape=(), dtype=key<fry>)"
    assert key_struct == ember.ShapeDtypeStruct((), er.key(1).dtype) and hash(key_struct)

    def init(k):
        k1, k2 = er.split(k)
        return {"key": k1, "keys": er.split(k2, 3), "w": er.normal(k2, (2,))}

    for arg in (er.key(0), key_struct):
        got = ember.eval_shape(init, arg)
        assert got == {"key": key_struct, "keys": ember.ShapeDtypeStruct((3,), key_struct.dtype),
                       "w": ember.ShapeDtypeStruct((2,), jnp.float32)}
        assert ember.jit(init).eval_shape(arg) == got
        assert ember.jit(init).lower(arg).out_info == got
    assert ember.eval_shape(lambda: er.key(0)) == key_struct
    want = jax.eval_shape(lambda k: jax.random.split(k), jax.ShapeDtypeStruct(
        (), jax.random.key(0).dtype))
    got = ember.eval_shape(lambda k: er.split(k), key_struct)
    assert (got.shape, str(got.dtype)) == (want.shape, str(want.dtype))
    # lowered for a struct, compiled code takes real keys
    compiled = ember.jit(lambda k: er.uniform(k, (3,))).lower(key_struct).compile()
    np.testing.assert_array_equal(compiled(er.key(5)), er.uniform(er.key(5), (3,)))
    jaxpr = ember.make_jaxpr(lambda k: er.bits(k, (2,)))(key_struct)
    assert [(v.aval.shape, v.aval.dtype) for v in jaxpr.jaxpr.invars] == [((2,), np.uint32)]
