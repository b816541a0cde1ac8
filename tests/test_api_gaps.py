"""Top-level API gaps: checkpoint policies, custom_batching, pmap, dlpack and small names,
checked against JAX (the oracle) and NumPy."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.ad_checkpoint import checkpoint_name
from ember.lax.dot import dot_general_p

# --------------------------------------------------------------------- checkpoint policies


def _count(jaxpr, name):
    """How many ``name`` equations ``jaxpr`` holds, nested jaxprs included."""
    n = 0
    for e in jaxpr.eqns:
        n += e.primitive.name == name
        for v in e.params.values():
            for sub in v if isinstance(v, (list, tuple)) else [v]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    n += _count(inner, name)
    return n


def _three_layers(np_mod, cn):
    def f(W, x):
        y = cn(np_mod.sin(W @ x), "a")
        z = cn(np_mod.sin(W @ y), "b")
        return np_mod.sum(np_mod.sin(W @ z))
    return f


_POLICIES = [("everything_saveable", ()), ("nothing_saveable", ()), ("dots_saveable", ()),
             ("checkpoint_dots", ()), ("dots_with_no_batch_dims_saveable", ()),
             ("save_only_these_names", ("a",)), ("save_any_names_but_these", ("a",)),
             ("save_anything_except_these_names", ("a",))]


@pytest.mark.parametrize("name,args", _POLICIES)
def test_checkpoint_policy_counts_and_values_match_jax(jax, name, args):
    import jax.ad_checkpoint as jad
    W = (np.arange(9.0).reshape(3, 3) / 10).astype(np.float32)
    x = np.linspace(-1, 1, 3).astype(np.float32)
    got = []
    for lib, np_mod, cn in [(ember, jnp, checkpoint_name),
                            (jax, jax.numpy, jad.checkpoint_name)]:
        policy = getattr(lib.checkpoint_policies, name)
        policy = policy(*args) if args else policy
        g = lib.grad(lib.checkpoint(_three_layers(np_mod, cn), policy=policy))
        j = lib.make_jaxpr(g)(W, x).jaxpr
        got.append(([_count(j, p) for p in ("sin", "cos", "dot_general")], np.asarray(g(W, x))))
    assert got[0][0] == got[1][0]
    np.testing.assert_allclose(got[0][1], got[1][1], rtol=1e-5, atol=1e-6)


def test_checkpoint_policy_saves_residuals():
    f = ember.checkpoint(lambda x: jnp.sin(jnp.sin(jnp.sin(x))),
                         policy=ember.checkpoint_policies.everything_saveable)
    j = ember.make_jaxpr(ember.grad(f))(1.0).jaxpr
    remat = [e for e in j.eqns if e.primitive.name == "remat2"]
    assert len(remat) == 1 and _count(remat[0].params["jaxpr"].jaxpr, "sin") == 0
    assert _count(j, "sin") == 3  # (nothing recomputed)
    none = ember.make_jaxpr(ember.grad(ember.checkpoint(lambda x: jnp.sin(jnp.sin(x)))))(1.0)
    assert _count(none.jaxpr, "sin") == 3  # (two forward, sin x recomputed)
    np.testing.assert_allclose(ember.grad(f)(1.0),
                               np.cos(np.sin(np.sin(1.0))) * np.cos(np.sin(1.0)) * np.cos(1.0),
                               rtol=1e-6)


def test_checkpoint_policy_under_jit_vmap_and_second_order(jax):
    cp = ember.checkpoint_policies
    W = np.full((3, 3), 0.1, np.float32)
    xs = np.linspace(0, 1, 6).reshape(2, 3).astype(np.float32)

    def make(lib, np_mod, policy):
        f = lambda W, x: np_mod.sum(np_mod.sin(W @ np_mod.sin(W @ x)))  # noqa: E731
        g = lib.grad(lib.checkpoint(f, policy=policy))
        return lib.vmap(g, (None, 0)), lib.grad(lambda W, x: g(W, x).sum())
    ev, eh = make(ember, jnp, cp.dots_saveable)
    jv, jh = make(jax, jax.numpy, jax.checkpoint_policies.dots_saveable)
    np.testing.assert_allclose(ember.jit(ev)(W, xs), jv(W, xs), rtol=1e-5)
    np.testing.assert_allclose(ember.jit(eh)(W, xs[0]), jh(W, xs[0]), rtol=1e-5)


def test_checkpoint_name_and_offload_policies():
    x = jnp.arange(3.0)
    assert checkpoint_name({"a": x}, "n")["a"] is not None
    np.testing.assert_array_equal(checkpoint_name(x, "n"), x)
    cp = ember.checkpoint_policies
    pol = cp.offload_dot_with_no_batch_dims("device", "pinned_host")
    pol2 = cp.save_and_offload_only_these_names(
        names_which_can_be_saved=["a"], names_which_can_be_offloaded=["b"],
        offload_src="device", offload_dst="pinned_host")
    for p in (pol, pol2):
        g = ember.grad(ember.checkpoint(_three_layers(jnp, checkpoint_name), policy=p))
        np.testing.assert_allclose(
            g(jnp.eye(3), x),
            ember.grad(_three_layers(jnp, checkpoint_name))(jnp.eye(3), x), rtol=1e-6)
    with pytest.raises(ValueError, match="exclusive"):
        cp.save_and_offload_only_these_names(
            names_which_can_be_saved=["a"], names_which_can_be_offloaded=["a"],
            offload_src="device", offload_dst="pinned_host")
    both = cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("a"))
    assert _count(ember.make_jaxpr(ember.grad(ember.checkpoint(
        _three_layers(jnp, checkpoint_name), policy=both)))(jnp.eye(3), x).jaxpr, "sin") == 4
    with pytest.raises(ValueError, match="booleans"):
        cp.save_from_both_policies(pol, cp.dots_saveable)(
            dot_general_p, dimension_numbers=(((0,), (0,)), ((), ())))
    with pytest.raises(TypeError, match="policy"):
        ember.checkpoint(jnp.sin, policy=3)


# --------------------------------------------------------------------- custom_batching


def _custom(lib, np_mod):
    @lib.custom_batching.custom_vmap
    def f(x, y):
        return np_mod.sin(x) * y

    @f.def_vmap
    def rule(axis_size, in_batched, x, y):
        return np_mod.cos(x) * y, in_batched[0] or in_batched[1]  # (tells the rule ran)
    return f


def _summed(np_mod):
    return lambda a, b: np_mod.sum(a) * b


def test_custom_vmap_matches_jax(jax):
    x = np.linspace(0, 1, 3).astype(np.float32)
    y = np.float32(2.0)
    res = []
    for lib, np_mod in [(ember, jnp), (jax, jax.numpy)]:
        f = _custom(lib, np_mod)
        s = lib.custom_batching.sequential_vmap(_summed(np_mod))
        res.append([
            f(x, y), lib.vmap(f, (0, None))(x, y), lib.jit(lib.vmap(f, (0, None)))(x, y),
            lib.vmap(lib.vmap(f, (0, None)), (None, 0))(x, x),
            *lib.jvp(f, (x, y), (x, y)),
            *lib.vmap(lambda a, b, f=f, lib=lib: lib.jvp(f, (a, y), (b, y)), (0, None))(x, x[0]),
            *lib.vmap(lambda a, b, f=f, lib=lib: lib.jvp(f, (a, y), (b, y)), (None, 0))(x[0], x),
            lib.jacfwd(lambda a, f=f, lib=lib: lib.vmap(f, (0, None))(a, y))(x),
            lib.vmap(s, (0, None))(x.reshape(3, 1) + x, y), lib.jit(lib.vmap(s, (None, 0)))(x, x),
        ])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(res[0][1], np.cos(x) * y, rtol=1e-6)  # (the rule ran)


def test_custom_vmap_closure_and_errors():
    from ember.custom_batching import custom_vmap, sequential_vmap
    x = jnp.arange(3.0)

    def g(c):
        f = custom_vmap(lambda a: a * c)
        f.def_vmap(lambda n, b, a: (a * c + 1.0, b[0]))
        return f(x).sum(), ember.vmap(f)(x).sum()
    np.testing.assert_allclose(ember.jvp(g, (2.0,), (1.0,))[1], (3.0, 3.0))
    f = _custom(ember, jnp)
    with pytest.raises(ValueError, match="Linearization failed"):
        ember.grad(f)(1.0, 2.0)
    with pytest.raises(ValueError, match="Linearization failed"):
        ember.grad(sequential_vmap(jnp.sin))(1.0)
    with pytest.raises(AttributeError, match="No batching rule"):
        custom_vmap(lambda a: a)(1.0)
    k = custom_vmap(lambda a: a)
    k.def_vmap(lambda n, b, a: (a, [True]))
    with pytest.raises(ValueError, match="do not match"):
        ember.vmap(k)(x)
    k.def_vmap(lambda n, b, a: ((a,), (True,)))
    with pytest.raises(ValueError, match="original custom-vmapped"):
        ember.vmap(k)(x)
    with pytest.raises(TypeError, match="positional-only"):
        f(y=1.0)


# --------------------------------------------------------------------- pmap


def test_pmap_matches_jax(jax):
    from ember import lax
    x = np.arange(6.0, dtype=np.float32).reshape(1, 6)
    res = []
    for lib, lx in [(ember, lax), (jax, jax.lax)]:
        res.append([
            lib.pmap(lambda v, lx=lx: v / lx.psum(v, "i"), axis_name="i")(x),
            lib.pmap(lambda v, lx=lx: lx.all_gather(v, "i"), axis_name="i")(x),
            lib.pmap(lambda v, lx=lx: lx.axis_index("i") + v, axis_name="i")(x),
            lib.pmap(lambda v, n: v * n, static_broadcasted_argnums=1)(x, 3),
            lib.pmap(lambda v: v + 1, in_axes=1)(x.T),
            *lib.pmap(lambda v: (v, v.sum()), out_axes=(1, None))(x),
            lib.pmap(lambda v, w: v * w, in_axes=(0, None))(x, x[0]),
            lib.pmap(lambda v: v, devices=lib.devices())(x),
        ])
    for a, b in zip(*res):
        assert type(a) is ember.Array
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_pmap_errors_and_grad():
    with pytest.raises(ValueError, match="requires 2 logical devices, but only 1"):
        ember.pmap(lambda v: v)(jnp.ones((2, 3)))
    with pytest.raises(ValueError, match="at least one argument with a mapped axis"):
        ember.pmap(lambda v: v, in_axes=None)(jnp.ones(3))
    with pytest.raises(TypeError, match="callable"):
        ember.pmap(3)
    g = ember.grad(lambda v: ember.pmap(lambda u: jnp.sin(u))(v).sum())(jnp.ones((1, 3)))
    np.testing.assert_allclose(g, np.cos(np.ones((1, 3))), rtol=1e-6)
    calls = []
    f = ember.pmap(lambda v: calls.append(1) or v * 2)
    f(jnp.ones((1, 2)))
    f(jnp.ones((1, 2)))
    assert len(calls) == 1  # (compiled once)


# --------------------------------------------------------------------- dlpack


class _Producer:
    """A minimal DLPack producer that is not a NumPy array."""

    def __init__(self, a, device=(1, 0)):
        self.a, self.device = a, device

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.device


def test_dlpack_roundtrip_and_errors(jax):
    from ember import dlpack
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    x = dlpack.from_dlpack(_Producer(a))
    assert type(x) is ember.Array and x.dtype == np.int16
    a[0, 0] = 7  # (a copy: the producer's later writes do not show)
    np.testing.assert_array_equal(x, np.arange(6).reshape(2, 3))
    y = dlpack.from_dlpack(np.linspace(0, 1, 4))
    assert y.dtype == jax.dlpack.from_dlpack(np.linspace(0, 1, 4)).dtype == np.float32
    np.testing.assert_array_equal(np.from_dlpack(jnp.arange(3.0)), [0.0, 1.0, 2.0])
    # (JAX consumes with the DLPack protocol before 1.0, which cannot mark a buffer
    # read-only: it gets a copy)
    np.testing.assert_array_equal(jax.dlpack.from_dlpack(jnp.arange(3.0)), [0.0, 1.0, 2.0])
    legacy = jnp.arange(3.0).__dlpack__()
    assert type(legacy).__name__ == "PyCapsule"
    with pytest.raises(BufferError, match="read-only"):
        jnp.arange(3.0).__dlpack__(copy=False)
    for dt in [np.float32, jnp.bfloat16, np.complex64, np.bool_, "U3", np.object_]:
        assert dlpack.is_supported_dtype(dt) == jax.dlpack.is_supported_dtype(dt)
    with pytest.raises(TypeError, match="__dlpack__ and __dlpack_device__"):
        dlpack.from_dlpack([1, 2])
    with pytest.raises(ValueError, match="device type 2"):
        dlpack.from_dlpack(_Producer(a, (2, 0)))


# --------------------------------------------------------------------- small names


def test_small_names_match_jax(jax):
    import ml_dtypes
    for name in ["JAXTypeError", "JAXIndexError", "KeyReuseError", "JaxprTypeError",
                 "InconclusiveDimensionOperation"]:
        ours, theirs = getattr(ember.errors, name), getattr(jax.errors, name)
        for base in (TypeError, IndexError, Exception):
            assert issubclass(ours, base) == issubclass(theirs, base), name
    assert issubclass(ember.errors.KeyReuseError, ember.errors.JAXTypeError)
    from ember.jaxpr import JaxprTypeError
    assert ember.errors.JaxprTypeError is JaxprTypeError
    for t in [np.float32, np.bool_, ml_dtypes.int4, ml_dtypes.uint2, ml_dtypes.float4_e2m1fn,
              ml_dtypes.bfloat16, np.complex128, np.uint8]:
        assert ember.dtypes.itemsize_bits(t) == jax.dtypes.itemsize_bits(t), t
    for v in [1.0, 1, True, 1j, np.int32(1), np.uint8(3), jnp.ones(2, jnp.bfloat16),
              jnp.ones(2, jnp.complex64)]:
        assert ember.dtypes.scalar_type_of(v) is jax.dtypes.scalar_type_of(np.asarray(v)
                                                                         if hasattr(v, "aval")
                                                                         else v), v
    leaves, tree = ember.tree_util.default_registry.flatten({"a": (1, [2])})
    assert leaves == [1, 2] and tree == ember.tree_util.tree_structure({"a": (1, [2])})
    assert ember.tree_util.default_registry.flatten((1, None), lambda x: x is None)[0] == [
        1, None]
    assert isinstance(ember.devices()[0], ember.Device)


def test_live_arrays_and_debug_log(capsys, caplog):
    import logging
    x = jnp.arange(3.0)
    y = ember.jit(lambda v: v * 2)(x)
    live = ember.live_arrays()
    assert any(a is x for a in live) and any(a is y for a in live)
    assert all(type(a) is ember.Array for a in live)
    with caplog.at_level(logging.INFO, logger="ember.debug"):
        ember.jit(lambda v: ember.debug.log("v={}", v))(x)
        ember.vmap(lambda v: ember.debug.log("e={e}", e=v))(jnp.arange(2))
        ember.effects_barrier()
    assert [r.getMessage() for r in caplog.records] == ["v=[0. 1. 2.]", "e=0", "e=1"]
    ember.debug.visualize_array_sharding(jnp.ones((2, 3)))
    assert "CPU 0" in capsys.readouterr().out
    with pytest.raises(ValueError, match="concrete"):
        ember.jit(ember.debug.visualize_array_sharding)(jnp.ones(2))
