"""JAX's sharding API on ember's one device: meshes, specs, shardings, device_put,
with_sharding_constraint, shard_map with collectives, mesh/multihost utils, jit's shardings.
JAX (one CPU device, meshes of ``Auto`` axes) is the oracle for reprs, results and errors."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember import sharding as shd
from ember.sharding import AxisType, Mesh, NamedSharding
from ember.sharding import PartitionSpec as P


def _mesh(mod, names=("x", "y"), types=None):
    types = types or (mod.sharding.AxisType.Auto,) * len(names)
    return mod.make_mesh((1,) * len(names), names, axis_types=types)


def _both(jax):
    """(ember, jax) meshes of Auto axes 'x', 'y'."""
    return _mesh(ember, types=(AxisType.Auto,) * 2), _mesh(jax)


def _jsharding(jax, jm, *spec):
    return jax.sharding.NamedSharding(jm, jax.sharding.PartitionSpec(*spec))


X = np.arange(12.0, dtype=np.float32).reshape(4, 3)


# --------------------------------------------------------------------------- objects


def test_partition_spec_matches_jax(jax):
    JP = jax.sharding.PartitionSpec
    cases = [("x", None), (("x", "y"),), (), (["x", "y"], None), (("x",),), (None,)]
    for args in cases:
        assert repr(P(*args)) == repr(JP(*args))
        assert len(P(*args)) == len(JP(*args))
        assert list(P(*args)) == list(JP(*args))
    assert repr(P(P.UNCONSTRAINED, "x")) == repr(JP(JP.UNCONSTRAINED, "x"))
    assert repr(P("x", unreduced={"y"})) == repr(JP("x", unreduced={"y"}))
    assert (P("x") == P("x", None)) == (JP("x") == JP("x", None)) is False
    assert P(("x",)) == P("x") and hash(P("x", "y")) == hash(P("x", "y"))
    assert (P("x") == ("x",)) is (JP("x") == ("x",)) is False
    assert repr(P("x") + P("y")) == repr(JP("x") + JP("y"))


def test_mesh_matches_jax(jax):
    m, jm = _both(jax)
    assert repr(m) == repr(jm) and str(m) == str(jm)
    assert m.shape == jm.shape and m.size == jm.size and m.axis_sizes == jm.axis_sizes
    assert m.axis_names == jm.axis_names and m.empty == jm.empty
    np.testing.assert_array_equal(m.device_ids, jm.device_ids)
    assert m.devices.shape == jm.devices.shape and m.devices.flat[0] == ember.devices()[0]
    assert repr(m.abstract_mesh) == repr(jm.abstract_mesh)
    assert m == Mesh(np.array(ember.devices()).reshape(1, 1), ("x", "y"))
    assert hash(m) == hash(Mesh(np.array(ember.devices()).reshape(1, 1), ("x", "y")))
    em = ember.make_mesh((1,), ("x",))
    assert repr(em) == repr(jax.make_mesh((1,), ("x",)))  # (Explicit by default)
    empty = Mesh(np.empty((), object), ())
    assert repr(empty) == repr(jax.sharding.Mesh(np.empty((), object), ()))
    assert empty.empty and str(empty) == "Mesh()"
    assert repr(shd.AbstractMesh((1,), ("x",))) == repr(jax.sharding.AbstractMesh((1,), ("x",)))
    assert repr(AxisType.Explicit) == repr(jax.sharding.AxisType.Explicit)


def test_set_mesh_and_abstract_mesh(jax):
    m, jm = _both(jax)
    assert repr(shd.get_abstract_mesh()) == repr(jax.sharding.get_abstract_mesh())
    with ember.set_mesh(m) as got, jax.set_mesh(jm):
        assert got is m
        assert repr(shd.get_abstract_mesh()) == repr(jax.sharding.get_abstract_mesh())
    assert shd.get_abstract_mesh().empty
    with pytest.warns(DeprecationWarning), m:  # (the older context: no context mesh)
        assert shd.get_mesh().empty
        assert shd.resolve_sharding(P("x"), "test") == NamedSharding(m, P("x"))
    assert shd.get_mesh().empty


def test_named_sharding_matches_jax(jax):
    m, jm = _both(jax)
    JS, JP = jax.sharding.NamedSharding, jax.sharding.PartitionSpec
    for spec in [("x",), ("x", "y"), (), (None, "y"), (("x", "y"),)]:
        s, js = NamedSharding(m, P(*spec)), JS(jm, JP(*spec))
        assert repr(s) == repr(js)
        assert s.shard_shape((4, 3)) == js.shard_shape((4, 3))
        assert list(s.devices_indices_map((4, 3)).values()) == \
            list(js.devices_indices_map((4, 3)).values())
        assert list(s.addressable_devices_indices_map((4, 3)).values()) == \
            list(js.addressable_devices_indices_map((4, 3)).values())
        assert (s.is_fully_replicated, s.is_fully_addressable, s.num_devices,
                s.memory_kind) == (js.is_fully_replicated, js.is_fully_addressable,
                                   js.num_devices, js.memory_kind)
        assert len(s.device_set) == len(js.device_set) == 1
    s = NamedSharding(m, P("x"))
    assert s.spec == P("x") and s.mesh is m and s.addressable_devices == {ember.devices()[0]}
    assert repr(s.with_memory_kind("pinned_host")) == repr(
        JS(jm, JP("x")).with_memory_kind("pinned_host"))
    assert s == NamedSharding(m, P("x")) and s != NamedSharding(m, P("x", None))
    single = ember.numpy.ones(2).sharding
    assert s.is_equivalent_to(single, 2)
    assert repr(single) == repr(jax.numpy.ones(2).sharding)
    assert single == shd.SingleDeviceSharding(ember.devices()[0])
    assert shd.make_single_device_sharding(ember.devices()[0]) == single


def _raises_like(jax_fn, ember_fn):
    with pytest.raises(Exception) as expected:
        jax_fn()
    cls = ValueError if type(expected.value).__name__ == "DuplicateSpecError" else \
        type(expected.value)
    with pytest.raises(cls) as got:
        ember_fn()
    return str(expected.value), str(got.value)


def test_bad_specs_raise_as_jax(jax):
    m, jm = _both(jax)
    JS, JP = jax.sharding.NamedSharding, jax.sharding.PartitionSpec
    want, got = _raises_like(lambda: JS(jm, JP("z")), lambda: NamedSharding(m, P("z")))
    assert got == want
    want, got = _raises_like(lambda: JS(jm, JP("x", "x")), lambda: NamedSharding(m, P("x", "x")))
    assert got == want
    with pytest.raises(shd.DuplicateSpecError):
        NamedSharding(m, P(("x", "x")))
    want, got = _raises_like(
        lambda: jax.lax.with_sharding_constraint(jax.numpy.ones(3), JS(jm, JP("x", "y"))),
        lambda: lax.with_sharding_constraint(jnp.ones(3), NamedSharding(m, P("x", "y"))))
    assert got == want
    want, got = _raises_like(
        lambda: jax.lax.with_sharding_constraint(jax.numpy.ones(3), JP("x")),
        lambda: lax.with_sharding_constraint(jnp.ones(3), P("x")))
    assert got == want  # (a bare spec needs a context mesh: RuntimeError)
    want, got = _raises_like(lambda: jax.device_put(jax.numpy.ones(3), "x"),
                             lambda: ember.device_put(jnp.ones(3), "x"))
    assert got == want
    want, got = _raises_like(lambda: jax.make_mesh((2,), ("x",)),
                             lambda: ember.make_mesh((2,), ("x",)))
    assert got == want
    want, got = _raises_like(lambda: jax.make_mesh((1,), ("x", "y")),
                             lambda: ember.make_mesh((1,), ("x", "y")))
    assert got == want
    with pytest.raises(ValueError, match="rank at least 2"):
        ember.device_put(jnp.ones(3), NamedSharding(m, P("x", "y")))
    with pytest.raises(ValueError, match="memory kind"):
        NamedSharding(m, P(), memory_kind="bogus")
    with pytest.raises(TypeError, match="PartitionSpec"):
        NamedSharding(m, "x")


# --------------------------------------------------------------------------- arrays


def test_device_put_and_array_sharding(jax):
    m, jm = _both(jax)
    s, js = NamedSharding(m, P("x")), _jsharding(jax, jm, "x")
    x = jnp.asarray(X)
    assert repr(x.sharding) == repr(jax.numpy.asarray(X).sharding)
    assert not x.committed
    y, jy = ember.device_put(x, s), jax.device_put(X, js)
    assert repr(y.sharding) == repr(jy.sharding) and y.committed
    np.testing.assert_array_equal(y, X)
    assert x.sharding == x.sharding and repr(x.sharding).startswith("SingleDevice")
    (sh,), (jsh,) = y.addressable_shards, jy.addressable_shards
    assert (sh.device, sh.index, sh.replica_id) == (ember.devices()[0], jsh.index, jsh.replica_id)
    np.testing.assert_array_equal(sh.data, jsh.data)
    assert len(y.global_shards) == 1 and y.format.sharding == s
    # A pytree prefix of shardings; a device commits too.
    a, b = ember.device_put((X, {"k": X[0]}), (s, None))
    assert a.sharding == s and not b["k"].committed
    assert ember.device_put(X, ember.devices()[0]).committed
    with ember.set_mesh(m), jax.set_mesh(jm):
        assert ember.sharding.reshard(x, P("x")).sharding.spec == P("x")
        JP = jax.sharding.PartitionSpec
        got = shd.auto_axes(lambda a: a * 2, out_sharding=P("x"))(x)
        want = jax.sharding.auto_axes(lambda a: a * 2, out_sharding=JP("x"))(
            jax.numpy.asarray(X))
        np.testing.assert_array_equal(got, want)
        got = shd.explicit_axes(lambda a: a + 1, in_sharding=P("x"))(x)
        np.testing.assert_array_equal(got, X + 1)
    np.testing.assert_array_equal(ember.device_put(x, s) * 2, X * 2)


def test_make_array_helpers(jax):
    m, jm = _both(jax)
    s, js = NamedSharding(m, P("x")), _jsharding(jax, jm, "x")
    calls, jcalls = [], []
    a = ember.make_array_from_callback((4, 3), s, lambda i: calls.append(i) or X[i])
    ja = jax.make_array_from_callback((4, 3), js, lambda i: jcalls.append(i) or X[i])
    np.testing.assert_array_equal(a, ja)
    assert calls == jcalls and a.sharding == s
    b = ember.make_array_from_single_device_arrays((4, 3), s, [jnp.asarray(X)])
    np.testing.assert_array_equal(b, X)
    c = ember.make_array_from_process_local_data(s, X)
    jc = jax.make_array_from_process_local_data(js, X)
    np.testing.assert_array_equal(c, jc)
    assert c.shape == jc.shape
    with pytest.raises(ValueError):
        ember.make_array_from_single_device_arrays((4, 3), s, [X, X])


# ------------------------------------------------------------------- with_sharding_constraint


def _jaxpr_text(mod, f, *args):
    return str(mod.make_jaxpr(f)(*args))


def test_sharding_constraint_jaxpr_matches_jax(jax):
    m, jm = _both(jax)
    s, js = NamedSharding(m, P("x")), _jsharding(jax, jm, "x")
    text = _jaxpr_text(ember, lambda x: lax.with_sharding_constraint(x * 2, s), X)
    want = _jaxpr_text(jax, lambda x: jax.lax.with_sharding_constraint(x * 2, js), X)
    assert text == want
    text = _jaxpr_text(ember, ember.vmap(lambda x: lax.with_sharding_constraint(x * 2, s)), X)
    want = _jaxpr_text(jax, jax.vmap(lambda x: jax.lax.with_sharding_constraint(x * 2, js)), X)
    assert text == want
    with ember.set_mesh(m), jax.set_mesh(jm):
        text = _jaxpr_text(ember, lambda x: lax.with_sharding_constraint(x, P("x")), X)
        want = _jaxpr_text(jax, lambda x: jax.lax.with_sharding_constraint(
            x, jax.sharding.PartitionSpec("x")), X)
    assert text == want
    # JAX's older ``with mesh:``: bare specs name that mesh, recorded as the context mesh.
    with pytest.warns(DeprecationWarning), m, jm:
        text = _jaxpr_text(ember, lambda x: lax.with_sharding_constraint(x, P("x")), X)
        want = _jaxpr_text(jax, lambda x: jax.lax.with_sharding_constraint(
            x, jax.sharding.PartitionSpec("x")), X)
        assert repr(shd.get_abstract_mesh()) == repr(jax.sharding.get_abstract_mesh())
    assert text == want
    # The cotangent is constrained too (JAX's grad jaxpr differs by its own reshard ops).
    grad_text = _jaxpr_text(ember, ember.grad(
        lambda x: lax.with_sharding_constraint(x * 2, s).sum()), X)
    assert grad_text.count("sharding_constraint[") == 2


def test_sharding_constraint_under_transforms(jax):
    m = _mesh(ember, types=(AxisType.Auto,) * 2)
    s = NamedSharding(m, P("x"))

    def f(x):
        y = lax.with_sharding_constraint(jnp.sin(x) * x, s)
        return (y ** 2).sum()

    def jf(x):
        return ((jax.numpy.sin(x) * x) ** 2).sum()

    np.testing.assert_allclose(ember.grad(f)(X), jax.grad(jf)(X), rtol=1e-5)
    np.testing.assert_allclose(ember.jit(ember.grad(f))(X), jax.grad(jf)(X), rtol=1e-5)
    np.testing.assert_allclose(ember.vmap(ember.grad(f))(X), jax.vmap(jax.grad(jf))(X),
                               rtol=1e-5)
    np.testing.assert_allclose(ember.jit(ember.vmap(f))(X), jax.vmap(jf)(X), rtol=1e-5)
    tree = lax.with_sharding_constraint({"a": X, "b": (X, X[0])}, {"a": s, "b": None})
    assert tree["a"].sharding == s
    np.testing.assert_array_equal(tree["b"][1], X[0])
    ember.test_util.check_grads(lambda x: lax.with_sharding_constraint(x * x, s), (X / 10,),
                                order=2, modes=("fwd", "rev"))


# --------------------------------------------------------------------------- shard_map


_SHARD_MAP_CASES = {
    "psum": (lambda lx: lambda a: lx.psum(a, "x"), "x", ()),
    "psum_xy": (lambda lx: lambda a: lx.psum(a, ("x", "y")), ("x", "y"), ()),
    "pmean": (lambda lx: lambda a: lx.pmean(a, "y") * 3, "x", "x"),
    "pmax": (lambda lx: lambda a: lx.pmax(a, "x") - lx.pmin(a, "x"), "x", ()),
    "axis_index": (lambda lx: lambda a: a + lx.axis_index("x") + 1, "x", "x"),
    "all_gather": (lambda lx: lambda a: lx.all_gather(a, "x"), "x", "x"),
    "all_gather_tiled": (lambda lx: lambda a: lx.all_gather(a, "x", tiled=True, axis=1),
                         "x", "x"),
    "ppermute": (lambda lx: lambda a: lx.ppermute(a, "x", [(0, 0)]), "x", "x"),
    "psum_scatter": (lambda lx: lambda a: lx.psum_scatter(a, "x", tiled=True), None, "x"),
    "axis_size": (lambda lx: lambda a: a * lx.axis_size("x"), "x", "x"),
}


@pytest.mark.parametrize("case", sorted(_SHARD_MAP_CASES))
def test_shard_map_collectives_match_jax(jax, case):
    m, jm = _both(jax)
    body, i, o = _SHARD_MAP_CASES[case]
    spec = lambda mod, e: mod.sharding.PartitionSpec(*((e,) if not isinstance(e, tuple) else e))  # noqa: E731
    f = ember.shard_map(body(lax), mesh=m, in_specs=spec(ember, i), out_specs=spec(ember, o))
    jf = jax.shard_map(body(jax.lax), mesh=jm, in_specs=spec(jax, i), out_specs=spec(jax, o))
    want = jf(X)
    got = f(jnp.asarray(X))
    np.testing.assert_allclose(got, want)
    assert got.shape == want.shape and repr(got.sharding) == repr(want.sharding)
    np.testing.assert_allclose(ember.jit(f)(X), want)


def test_shard_map_transforms_and_pytrees(jax):
    m, jm = _both(jax)
    JP = jax.sharding.PartitionSpec
    f = ember.shard_map(lambda a: lax.psum(jnp.sin(a), "x"), mesh=m, in_specs=P("x"),
                        out_specs=P())
    jf = jax.shard_map(lambda a: jax.lax.psum(jax.numpy.sin(a), "x"), mesh=jm,
                       in_specs=JP("x"), out_specs=JP())
    np.testing.assert_allclose(ember.grad(lambda a: f(a).sum())(X),
                               jax.grad(lambda a: jf(a).sum())(X), rtol=1e-6)
    np.testing.assert_allclose(ember.vmap(f)(X), jax.vmap(jf)(X), rtol=1e-6)
    np.testing.assert_allclose(ember.jit(ember.grad(lambda a: f(a).sum()))(X),
                               jax.grad(lambda a: jf(a).sum())(X), rtol=1e-6)
    # A closed-over traced value, several arguments and outputs, a decorator.
    c = np.float32(3.0)
    g = lambda c: ember.shard_map(lambda a, b: {"s": a * c + b, "t": lax.psum(b, "y")},  # noqa: E731
                                  mesh=m, in_specs=(P("x"), P()),
                                  out_specs={"s": P("x"), "t": P()})(X, X[0])
    out = g(c)
    np.testing.assert_allclose(out["s"], X * 3 + X[0])
    np.testing.assert_allclose(out["t"], X[0])
    assert float(ember.grad(lambda c: g(c)["s"].sum())(c)) == pytest.approx(X.sum())

    @ember.shard_map(mesh=m, in_specs=P("x"), out_specs=P("x"))
    def inc(a):
        return a + 1
    np.testing.assert_array_equal(inc(X), X + 1)
    # The old signature, and psum inside scan and an inner jit (no false vma error).
    from ember.experimental.shard_map import shard_map
    np.testing.assert_array_equal(shard_map(lambda a: lax.psum(a, "x"), m, P("x"), P())(X), X)
    scan_f = lambda a: lax.scan(lambda c, r: (c + lax.psum(r, "x"), None),  # noqa: E731
                                jnp.zeros(3), a)[0]
    np.testing.assert_allclose(ember.shard_map(scan_f, mesh=m, in_specs=P("x"),
                                               out_specs=P())(X), X.sum(0))
    cond_f = lambda a: lax.cond(a.sum() > 0, lambda v: lax.psum(v, "x"),  # noqa: E731
                                lambda v: lax.pmax(v, "x"), a)
    np.testing.assert_array_equal(ember.shard_map(cond_f, mesh=m, in_specs=P("x"),
                                                  out_specs=P())(X), X)
    jit_f = ember.shard_map(ember.jit(lambda a: lax.psum(a, "x")), mesh=m, in_specs=P("x"),
                            out_specs=P())
    np.testing.assert_array_equal(jit_f(X), X)
    with ember.set_mesh(m):
        np.testing.assert_array_equal(
            ember.shard_map(lambda a: a * 2, in_specs=P("x"), out_specs=P("x"))(X), X * 2)


def test_shard_map_errors_match_jax(jax):
    m, jm = _both(jax)
    JP = jax.sharding.PartitionSpec

    def both(fn, i, o, **kw):
        return _raises_like(
            lambda: jax.shard_map(fn, mesh=jm, in_specs=i(JP), out_specs=o(JP), **kw)(X),
            lambda: ember.shard_map(fn, mesh=m, in_specs=i(P), out_specs=o(P), **kw)(X))

    def ident(a):
        return a

    def total(a):
        return a.sum()

    # Varying over 'x' but out_specs says replicated (JAX names an internal wrapper).
    want, got = both(ident, lambda p: p("x"), lambda p: p())
    assert got == want.replace("'_rem_singleton'", "'ident'")
    np.testing.assert_array_equal(ember.shard_map(ident, mesh=m, in_specs=P("x"),
                                                  out_specs=P(), check_vma=False)(X), X)
    want, got = both(ident, lambda p: p("z"), lambda p: p())
    assert got.replace("'y', 'x'", "'x', 'y'") == want.replace("'y', 'x'", "'x', 'y'")
    want, got = both(total, lambda p: p("x"), lambda p: p("x"))
    assert got == want
    want, got = both(ident, lambda p: p("x", "y", None), lambda p: p())
    assert "too long" in got and "has rank 2 (and 2 < 3)" in got
    with pytest.raises(ValueError, match="prefix"):
        ember.shard_map(ident, mesh=m, in_specs=(P("x"), P("x")), out_specs=P("x"))(X)
    with pytest.raises(NameError, match="unbound axis name: q"):
        ember.shard_map(lambda a: lax.psum(a, "q"), mesh=m, in_specs=P("x"),
                        out_specs=P())(X)
    for jfn, efn in [
            (lambda: jax.shard_map(ident, in_specs=JP(), out_specs=JP())(X),
             lambda: ember.shard_map(ident, in_specs=P(), out_specs=P())(X)),
            (lambda: jax.shard_map(3, in_specs=JP(), out_specs=JP()),
             lambda: ember.shard_map(3, in_specs=P(), out_specs=P())),
            (lambda: jax.shard_map(ident, mesh=jm, in_specs="x", out_specs=JP())(X),
             lambda: ember.shard_map(ident, mesh=m, in_specs="x", out_specs=P())(X)),
            (lambda: jax.shard_map(ident, mesh=jm, in_specs=JP(), out_specs=JP(),
                                   axis_names={"q"})(X),
             lambda: ember.shard_map(ident, mesh=m, in_specs=P(), out_specs=P(),
                                     axis_names={"q"})(X))]:
        want, got = _raises_like(jfn, efn)
        assert got.replace("'y', 'x'", "'x', 'y'") == want.replace("'y', 'x'", "'x', 'y'")


# --------------------------------------------------------------------------- utils


def test_mesh_and_multihost_utils(jax):
    from jax.experimental import mesh_utils as jmu
    from jax.experimental import multihost_utils as jmh

    from ember.experimental import mesh_utils, multihost_utils
    assert mesh_utils.create_device_mesh((1, 1)).shape == jmu.create_device_mesh((1, 1)).shape
    assert mesh_utils.create_hybrid_device_mesh((1,), (1,)).shape == (1,)
    want, got = _raises_like(lambda: jmu.create_device_mesh((2,)),
                             lambda: mesh_utils.create_device_mesh((2,)))
    assert got == want
    for tiled in (False, True):
        want = jmh.process_allgather(jax.numpy.asarray(X), tiled=tiled)
        got = multihost_utils.process_allgather(jnp.asarray(X), tiled=tiled)
        assert type(got) is np.ndarray and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(multihost_utils.broadcast_one_to_all(X),
                                  jmh.broadcast_one_to_all(X))
    multihost_utils.sync_global_devices("here")
    m, jm = _both(jax)
    g = multihost_utils.host_local_array_to_global_array(X, m, P("x"))
    jg = jmh.host_local_array_to_global_array(X, jm, jax.sharding.PartitionSpec("x"))
    np.testing.assert_array_equal(g, jg)
    assert repr(g.sharding) == repr(jg.sharding)
    back = multihost_utils.global_array_to_host_local_array(g, m, P("x"))
    np.testing.assert_array_equal(back, X)


# --------------------------------------------------------------------------- jit's shardings


def test_jit_sharding_helpers(jax):
    from ember._sharding_api import check_jit_args, check_jit_shardings, place_outputs
    m, jm = _both(jax)
    JS, JP = jax.sharding.NamedSharding, jax.sharding.PartitionSpec
    s = NamedSharding(m, P("x"))
    check_jit_shardings(s, (s, None, P()))
    want, got = _raises_like(lambda: jax.jit(lambda x: x, in_shardings="x"),
                             lambda: check_jit_shardings("x", None))
    assert got == want
    want, got = _raises_like(lambda: jax.jit(lambda x: x, out_shardings=3),
                             lambda: check_jit_shardings(None, 3))
    assert got == want
    want, got = _raises_like(
        lambda: jax.jit(lambda x: x, in_shardings=JS(jm, JP("x", "y")))(jax.numpy.ones(3)),
        lambda: check_jit_args((jnp.ones(3),), NamedSharding(m, P("x", "y"))))
    assert "is incompatible with its sharding annotation" in got and want.endswith(
        got.split(": ", 1)[1])
    want, got = _raises_like(
        lambda: jax.jit(lambda x: x, in_shardings=(JS(jm, JP()),) * 2)(jax.numpy.ones(3)),
        lambda: check_jit_args((jnp.ones(3),), (s, s)))
    assert got.split("got a tuple")[0] == want.split("got a tuple")[0]
    want, got = _raises_like(
        lambda: jax.jit(lambda x: x, in_shardings=JP("x"))(jax.numpy.ones(3)),
        lambda: check_jit_args((jnp.ones(3),), P("x")))
    assert got.replace("in_shardings", "") == want.replace("in_shardings", "")
    want_out = jax.jit(lambda x: (x * 2, x), out_shardings=(JS(jm, JP("x")), None))(X)
    out = place_outputs(ember.jit(lambda x: (x * 2, x))(X), (s, None))
    assert repr(out[0].sharding) == repr(want_out[0].sharding)
    np.testing.assert_array_equal(out[0], want_out[0])
    with pytest.raises(ValueError, match="rank at least 1"):
        place_outputs(jnp.float32(1), s)


def test_sharded_jit_wrapper(jax):
    from ember._sharding_api import with_jit_shardings
    m, jm = _both(jax)
    s, js = NamedSharding(m, P("x")), _jsharding(jax, jm, "x")
    f = lambda x, y: {"a": x * y, "b": x}  # noqa: E731
    jitted = ember.jit(f)
    assert with_jit_shardings(jitted, None, None) is jitted
    g = with_jit_shardings(jitted, (s, None), {"a": s, "b": None})
    jg = jax.jit(f, in_shardings=(js, None), out_shardings={"a": js, "b": None})
    got, want = g(X, X), jg(X, X)
    np.testing.assert_array_equal(got["a"], want["a"])
    assert repr(got["a"].sharding) == repr(want["a"].sharding)
    np.testing.assert_allclose(ember.grad(lambda x: g(x, X)["a"].sum())(X), X)
    with pytest.raises(ValueError, match="rank at least 2"):
        with_jit_shardings(jitted, NamedSharding(m, P("x", "y")), None)(jnp.ones(3), 1.0)
    with pytest.raises(TypeError, match="out_shardings leaf"):
        with_jit_shardings(jitted, None, "x")


def test_jit_out_shardings_end_to_end(jax):
    m = _mesh(ember, types=(AxisType.Auto,) * 2)
    s = NamedSharding(m, P("x"))
    f = ember.jit(lambda x: x * 2, in_shardings=s, out_shardings=s)
    out = f(X)
    assert out.sharding == s
    np.testing.assert_array_equal(np.asarray(out), np.asarray(X) * 2)
    assert "mul" in str(f.trace(X).jaxpr)  # (the stages are the jitted function's)
    # inside another trace the shardings pass through
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda x: f(x) + 1)(X)),
                                  np.asarray(X) * 2 + 1)
    np.testing.assert_array_equal(np.asarray(ember.grad(lambda x: f(x).sum())(X)),
                                  np.full(np.shape(X), 2.0))
    with pytest.raises(TypeError):
        ember.jit(lambda x: x, in_shardings="x")
    with pytest.raises(ValueError, match="both a device and a backend"):
        ember.jit(lambda x: x, device=ember.devices()[0], backend="cpu")


def test_tracer_sharding_error_matches_jax(jax):
    def message(lib, np_lib):
        with pytest.raises(AttributeError) as info:
            lib.jit(lambda x: x.sharding)(np_lib.ones(2))
        return str(info.value)
    assert message(ember, jnp) == message(jax, jax.numpy)
