"""Collectives over vmap's named axes (ember.lax.parallel) against JAX as the oracle."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 3)).astype(np.float32)
X3 = RNG.standard_normal((4, 4, 2)).astype(np.float32)


def _both(jax, fn, *args, in_axes=0, jit=False, **vmap_kw):
    """``fn(lax_module)`` vmapped with axis_name 'i' under ember and JAX."""
    outs = []
    for mod, lx in ((ember, lax), (jax, jax.lax)):
        f = mod.vmap(fn(lx), in_axes=in_axes, axis_name="i", **vmap_kw)
        if jit:
            f = mod.jit(f)
        outs.append(f(*args))
    return outs


def _close(a, b, rtol=1e-6):
    la, lb = ember.tree_util.tree_leaves(a), ember.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for u, v in zip(la, lb):
        u, v = np.asarray(u), np.asarray(v)
        assert u.shape == v.shape and u.dtype == v.dtype, (u.shape, v.shape, u.dtype, v.dtype)
        np.testing.assert_allclose(u, v, rtol=rtol, atol=1e-6)


CASES = {
    "psum": lambda lx: lambda x: lx.psum(x, "i"),
    "pmean": lambda lx: lambda x: lx.pmean(x, "i"),
    "pmax": lambda lx: lambda x: lx.pmax(x, "i"),
    "pmin": lambda lx: lambda x: lx.pmin(x, "i"),
    "normalize": lambda lx: lambda x: x / lx.psum(x * x, "i"),
    "all_gather": lambda lx: lambda x: lx.all_gather(x, "i"),
    "all_gather_axis1": lambda lx: lambda x: lx.all_gather(x, "i", axis=1),
    "all_gather_tiled": lambda lx: lambda x: lx.all_gather(x, "i", tiled=True),
    "all_gather_tiled_neg": lambda lx: lambda x: lx.all_gather(x, "i", axis=-1, tiled=True),
    "axis_index": lambda lx: lambda x: x * lx.axis_index("i"),
    "axis_size": lambda lx: lambda x: x * lx.axis_size("i"),
    "ppermute_cyclic": lambda lx: lambda x: lx.ppermute(x, "i", [(k, (k + 1) % 4)
                                                                  for k in range(4)]),
    "pshuffle": lambda lx: lambda x: lx.pshuffle(x, "i", [2, 0, 3, 1]),
    "psum_pytree": lambda lx: lambda x: lx.psum({"a": x, "b": (2 * x, 3.0)}, "i"),
    "psum_unmapped": lambda lx: lambda x: lx.psum(jnp.ones(3) if lx is lax else
                                                  __import__("jax").numpy.ones(3), "i"),
    "psum_int": lambda lx: lambda x: lx.psum(2, "i"),
    "psum_bool": lambda lx: lambda x: lx.psum(x > 0, "i"),
    "pmean_int": lambda lx: lambda x: lx.pmean((x > 0).astype("int32"), "i"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_jax(jax, name):
    mine, ref = _both(jax, CASES[name], X)
    _close(mine, ref)
    assert ember.tree_util.tree_structure(mine) == ember.tree_util.tree_structure(ref) or \
        name == "psum_pytree"


@pytest.mark.parametrize("name", ["psum", "all_gather_tiled", "ppermute_cyclic", "axis_index"])
def test_jit_outside_and_inside(jax, name):
    ref = jax.vmap(CASES[name](jax.lax), axis_name="i")(X)
    _close(ember.jit(ember.vmap(CASES[name](lax), axis_name="i"))(X), ref)
    _close(ember.vmap(ember.jit(CASES[name](lax)), axis_name="i")(X), ref)


A2A = {
    "a2a_00": lambda lx: lambda x: lx.all_to_all(x, "i", 0, 0),
    "a2a_01": lambda lx: lambda x: lx.all_to_all(x, "i", 0, 1),
    "a2a_10": lambda lx: lambda x: lx.all_to_all(jnp.swapaxes(x, 0, 1) if lx is lax else
                                                 x.swapaxes(0, 1), "i", 1, 0),
    "a2a_tiled": lambda lx: lambda x: lx.all_to_all(x, "i", 0, 1, tiled=True),
    "pswapaxes": lambda lx: lambda x: lx.pswapaxes(x, "i", 0),
    "psum_scatter": lambda lx: lambda x: lx.psum_scatter(x, "i"),
    "psum_scatter_tiled": lambda lx: lambda x: lx.psum_scatter(x, "i", scatter_dimension=1,
                                                               tiled=True),
}


@pytest.mark.parametrize("name", sorted(A2A))
def test_all_to_all_and_scatter(jax, name):
    x = RNG.standard_normal((4, 4, 8)).astype(np.float32)
    mine, ref = _both(jax, A2A[name], x)
    _close(mine, ref)


def test_in_axes_and_unmapped_operands(jax):
    fn = lambda lx: lambda x, y: (lx.all_gather(y, "i", axis=1), lx.psum(x, "i"),
                                  lx.psum_scatter(y, "i", tiled=True))
    y = RNG.standard_normal((4, 2)).astype(np.float32)
    mine, ref = _both(jax, fn, X3, y, in_axes=(1, None))
    _close(mine, ref)
    # (JAX refuses a partial ppermute under vmap, and gives an
    # all_to_all of one a wrong shape: compare with the operand mapped explicitly.)
    yy = np.broadcast_to(y, (4, 4, 2))
    ref = jax.vmap(lambda v: jax.lax.all_to_all(v, "i", 0, 1), axis_name="i")(yy)
    _close(ember.vmap(lambda v: lax.all_to_all(y, "i", 0, 1), axis_name="i")(yy), ref)
    out = ember.vmap(lambda v: lax.ppermute(y, "i", [(1, 0)]), axis_name="i")(X3)
    np.testing.assert_array_equal(out, np.stack([y if k == 0 else 0 * y for k in range(4)]))


def test_nested_vmaps_and_tuple_names(jax):
    x = RNG.standard_normal((3, 2, 5)).astype(np.float32)

    def fn(lx):
        def inner(v):
            return (lx.psum(v, ("i", "j")), lx.psum(v, "i"), lx.pmean(v, "j"),
                    lx.axis_index(("i", "j")), lx.axis_index(("j", "i")),
                    lx.all_gather(v, "i"), lx.pmax(v, ("j", "i")))
        return inner

    outs = []
    for mod, lx in ((ember, lax), (jax, jax.lax)):
        f = mod.vmap(mod.vmap(fn(lx), axis_name="j"), axis_name="i")
        outs.append(mod.jit(f)(x))
        # The other nesting order gives the same names the other way round.
        g = mod.vmap(mod.vmap(fn(lx), axis_name="i", in_axes=1), axis_name="j", in_axes=1)
        outs.append(mod.jit(g)(x))
    _close(outs[0], outs[2])
    _close(outs[1], outs[3], rtol=1e-5)


def test_shadowed_name_uses_the_inner_vmap():
    f = ember.vmap(ember.vmap(lambda v: lax.psum(v, "i"), axis_name="i"), axis_name="i")
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(f(x), np.broadcast_to(x.sum(1, keepdims=True), (2, 3)))


GRADS = {
    "psum": lambda lx: lambda x: (lx.psum(x, "i") ** 2).sum(),
    "pmean": lambda lx: lambda x: jnp_sin(lx)(lx.pmean(x, "i")).sum(),
    "all_gather": lambda lx: lambda x: (lx.all_gather(x, "i") ** 3).sum(),
    "all_gather_tiled": lambda lx: lambda x: (lx.all_gather(x, "i", tiled=True, axis=1) *
                                              lx.axis_index("i")).sum(),
    "ppermute": lambda lx: lambda x: (lx.ppermute(x * x, "i", [(0, 2), (2, 1), (1, 3), (3, 0)]) *
                                      lx.axis_index("i")).sum(),
    "psum_scatter": lambda lx: lambda x: (lx.psum_scatter(x, "i", scatter_dimension=1,
                                                          tiled=True) ** 2).sum(),
    "all_to_all": lambda lx: lambda x: (lx.all_to_all(x * x, "i", 0, 0) *
                                        (1 + lx.axis_index("i"))).sum(),
}


def jnp_sin(lx):
    return lax.sin if lx is lax else __import__("jax").numpy.sin


@pytest.mark.parametrize("name", sorted(GRADS))
def test_grads_match_jax(jax, name):
    x = RNG.standard_normal((4, 4, 8)).astype(np.float32)
    # grad inside the vmap (transposes the collective) and vmap inside the grad.
    for wrap in ("inside", "outside"):
        outs = []
        for mod, lx in ((ember, lax), (jax, jax.lax)):
            f = GRADS[name](lx)
            if wrap == "inside":
                g = mod.vmap(mod.grad(f), axis_name="i")
            else:
                g = mod.grad(lambda v, mod=mod, f=f: mod.vmap(f, axis_name="i")(v).sum())
            outs.append(mod.jit(g)(x))
        _close(outs[0], outs[1], rtol=1e-5)


def test_all_to_all_grads_by_finite_differences():
    # (JAX's own transpose of an untiled all_to_all with split_axis != concat_axis fails.)
    from ember.test_util import check_grads
    x = RNG.standard_normal((4, 4, 3)).astype(np.float32)
    w = np.arange(48.0, dtype=np.float32).reshape(4, 3, 4) / 10
    f = ember.vmap(lambda v, w: lax.all_to_all(v * v, "i", 0, 1) * w, axis_name="i")
    check_grads(lambda v: f(v, w), (x,), order=2, modes=("fwd", "rev"), rtol=2e-2)


def test_jvp_under_vmap(jax):
    t = RNG.standard_normal(X.shape).astype(np.float32)
    outs = []
    for mod, lx in ((ember, lax), (jax, jax.lax)):
        def f(x, t, mod=mod, lx=lx):
            return mod.jvp(lambda v: lx.all_gather(lx.psum(v, "i") * v, "i"), (x,), (t,))
        outs.append(mod.vmap(f, axis_name="i")(X, t))
    _close(outs[0], outs[1], rtol=1e-5)


def test_collective_in_scan_and_jit_without_mapped_operands(jax):
    def fn(lx, mod):
        def body(c, v):
            return c + lx.psum(v, "i"), lx.axis_index("i") + c.astype("int32")
        return lambda x: (mod.lax.scan(body, 0.0, x),
                          mod.jit(lambda: lx.psum(1.0, "i") + lx.axis_index("i"))())
    mine = ember.vmap(fn(lax, ember), axis_name="i")(X)
    ref = jax.vmap(fn(jax.lax, jax), axis_name="i")(X)
    _close(mine, ref)


def test_jaxpr_text():
    seen = []

    def f(x):
        seen.append(str(ember.make_jaxpr(lambda y: (lax.psum(y, "i"), lax.axis_index("i"),
                                                      lax.ppermute(y, "i", [(0, 1), (1, 0)])))(x)))
        return x
    ember.vmap(f, axis_name="i")(np.ones((2, 3), np.float32))
    assert seen[0] == (
        "{ lambda ; a:f32[3]. let\n"
        "    b:f32[3] = psum[axes=('i',) axis_index_groups=None] a\n"
        "    c:i32[] = axis_index[axis_name=i] \n"
        "    d:f32[3] = ppermute[axis_name=('i',) perm=((0, 1), (1, 0))] a\n"
        "  in (b, c, d) }")


def test_extend_axis_env_and_jaxpr_of_all_gather():
    text = str(ember.make_jaxpr(lambda y: lax.all_gather(y, "i", tiled=True),
                                axis_env=[("i", 2)])(np.ones(3, np.float32)))
    assert "f32[6] = all_gather[\n      all_gather_dimension=0\n      axis_index_groups=None\n" \
           "      axis_name=('i',)\n      axis_size=2\n      tiled=True\n    ] a" in text


@pytest.mark.parametrize("call", [
    lambda: lax.psum(1.0, "i"),
    lambda: lax.pmean(jnp.ones(2), "i"),
    lambda: lax.all_gather(jnp.ones(2), "i"),
    lambda: lax.axis_size("i"),
    lambda: lax.psum_scatter(jnp.ones(2), "i"),
    lambda: lax.all_to_all(jnp.ones(2), "i", 0, 0),
])
def test_unbound_name_eager(call):
    with pytest.raises(NameError, match="^unbound axis name: i$"):
        call()


@pytest.mark.parametrize("fn, api", [
    (lambda x: lax.psum(x, "i"), "psum"), (lambda x: lax.pmax(x, "i"), "psum"),
    (lambda x: lax.axis_index("i") + x, "axis_index"),
    (lambda x: lax.ppermute(x, "i", [(0, 1)]), "ppermute"),
])
def test_unbound_name_traced(fn, api):
    msg = f"Found an unbound axis name: i. To fix this, please call {api} under"
    with pytest.raises(NameError, match=msg):
        ember.jit(fn)(1.0)
    # A name bound by another vmap is still unbound.
    with pytest.raises(NameError, match=msg):
        ember.vmap(ember.jit(fn), axis_name="j")(jnp.ones(2))


def test_bad_arguments():
    v = lambda f: ember.vmap(f, axis_name="i")(jnp.ones((3, 3)))
    with pytest.raises(NotImplementedError, match="axis_index_groups not supported"):
        v(lambda x: lax.psum(x, "i", axis_index_groups=[[0, 1], [2]]))
    with pytest.raises(ValueError, match="axis_index_groups must cover all indices"):
        v(lambda x: lax.psum(x, "i", axis_index_groups=[[0, 1], [1]]))
    with pytest.raises(ValueError, match="does not represent a permutation"):
        v(lambda x: lax.pshuffle(x, "i", [0, 0, 1]))
    with pytest.raises(ValueError, match="sources and destinations must be unique"):
        v(lambda x: lax.ppermute(x, "i", [(0, 1), (2, 1)]))
    with pytest.raises(ValueError, match="all_to_all requires the size of the mapped axis"):
        v(lambda x: lax.all_to_all(jnp.ones(2), "i", 0, 0))
    with pytest.raises(ValueError, match="must match shard count 3"):
        v(lambda x: lax.psum_scatter(jnp.ones(2), "i"))
    with pytest.raises(ValueError, match="must be divisible by shard_count 3"):
        v(lambda x: lax.psum_scatter(jnp.ones(4), "i", tiled=True))
    with pytest.raises(ValueError, match="Allowed `to`"):
        v(lambda x: lax.all_gather(x, "i", to="bad"))


def test_ppermute_partial_fills_zeros_and_pbroadcast():
    x = np.arange(3.0, dtype=np.float32)
    out = ember.vmap(lambda v: lax.ppermute(v, "i", [(0, 2)]), axis_name="i")(x)
    np.testing.assert_array_equal(out, [0.0, 0.0, 0.0 + x[0]])
    out = ember.vmap(lambda v: lax.pbroadcast(v, "i", 2), axis_name="i")(x)
    np.testing.assert_array_equal(out, [2.0, 2.0, 2.0])
    g = ember.vmap(ember.grad(lambda v: lax.pbroadcast(v, "i", 1) * 2.0), axis_name="i")(x)
    np.testing.assert_array_equal(g, [0.0, 6.0, 0.0])  # every member's use flows to member 1


def test_spmd_axis_name_still_accepted():
    out = ember.vmap(lambda v: lax.psum(v, "i"), axis_name="i", spmd_axis_name="d")(
        jnp.arange(3.0))
    np.testing.assert_array_equal(out, [3.0, 3.0, 3.0])


def test_pmax_has_no_derivative_inside_the_vmap_as_in_jax(jax):
    x = np.arange(3.0, dtype=np.float32)
    for mod, lx in ((ember, lax), (jax, jax.lax)):
        with pytest.raises(NotImplementedError, match="Differentiation rule for 'pmax'"):
            mod.vmap(mod.grad(lambda v, lx=lx: lx.pmax(v, "i")), axis_name="i")(x)
    # Outside the vmap it is a reduction, with the reduction's derivative.
    g = ember.grad(lambda v: ember.vmap(lambda u: lax.pmax(u, "i"), axis_name="i")(v).sum())
    np.testing.assert_array_equal(g(x), [0.0, 0.0, 3.0])


def test_jit_cache_holds_the_bound_axis_sizes():
    # A jit traced under a named vmap of one size is not reused under another size, nor
    # outside any vmap (where the name is unbound).
    f = ember.jit(lambda x: lax.all_gather(x, "i").sum(0))
    for n in (3, 4, 3):
        x = jnp.arange(n * 2.0).reshape(n, 2)
        out = ember.vmap(f, axis_name="i")(x)
        np.testing.assert_array_equal(out, np.broadcast_to(np.asarray(x).sum(0), (n, 2)))
    with pytest.raises(NameError, match="unbound axis name: i"):
        f(jnp.ones(2))
