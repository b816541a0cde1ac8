"""ember.export (jax.export) and ember.stages (jax.stages)."""

import collections
import json
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import export, stages

_CONST = np.linspace(0.0, 1.0, 2000, dtype=np.float32)  # (hoisted: passed as an argument)


def _fun(x, y):
    return {"a": jnp.sin(x) * y + 0.25,
            "b": (jnp.sum(_CONST * x[0]) + jnp.float32(2.5), x.astype(jnp.bfloat16) * 3)}


def _specs():
    return (ember.ShapeDtypeStruct((3,), np.float32), ember.ShapeDtypeStruct((), np.float32))


def _expected(x, y):
    return {"a": np.sin(x) * y + 0.25,
            "b": (np.sum(_CONST.astype(np.float64) * x[0]) + 2.5,
                  (x.astype(ml_dtypes.bfloat16) * ml_dtypes.bfloat16(3)))}


def _check(out, x, y):
    want = _expected(x, y)
    np.testing.assert_allclose(np.asarray(out["a"]), want["a"], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(out["b"][0]), want["b"][0], rtol=1e-5)
    assert out["b"][1].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(np.asarray(out["b"][1]), want["b"][1])


@pytest.fixture(scope="module")
def exported():
    return export.export(ember.jit(_fun))(*_specs())


def test_fields(exported):
    assert exported.fun_name == "_fun"
    assert exported.in_avals == (ember.core.ShapedArray((3,), np.float32),
                                 ember.core.ShapedArray((), np.float32))
    assert [a.dtype for a in exported.out_avals] == [np.float32, np.float32,
                                                     np.dtype(ml_dtypes.bfloat16)]
    assert str(exported.in_tree) == "PyTreeDef(((*, *), {}))"
    assert str(exported.out_tree) == "PyTreeDef({'a': *, 'b': (*, *)})"
    assert exported.platforms == ("cpu",) and exported.nr_devices == 1
    assert exported.in_shardings_hlo == (None, None)
    assert exported.out_shardings_hlo == (None, None, None)
    version = export.maximum_supported_calling_convention_version
    assert exported.calling_convention_version == version
    assert str(exported) == "Exported(fun_name=_fun, ...)"
    assert "HloModule" in exported.mlir_module() and "sine" in exported.mlir_module()
    assert export.default_export_platform() == "cpu"
    assert str(export.DisabledSafetyCheck.custom_call("t")) == "custom_call:t"
    assert export.DisabledSafetyCheck.custom_call("t").is_custom_call() == "t"


def test_call_eager_and_jit(exported):
    x, y = np.array([0.5, -1.0, 2.0], np.float32), np.float32(1.5)
    _check(exported.call(x, y), x, y)
    _check(ember.jit(exported.call)(x, y), x, y)
    # Composed with other ops under jit, the call is one step of the program.
    out = ember.jit(lambda x: exported.call(x * 2, 1.0)["a"] - 1)(x)
    np.testing.assert_allclose(out, np.sin(2 * x) + 0.25 - 1, rtol=1e-6)


def test_round_trip_in_process(exported):
    blob = exported.serialize()
    assert isinstance(blob, (bytes, bytearray))
    back = export.deserialize(blob)
    assert back == exported  # (every compared field: trees, avals, module, platforms...)
    assert back.in_tree == exported.in_tree and back.out_tree == exported.out_tree
    assert not back.has_vjp()
    x, y = np.array([3.0, 0.0, -0.5], np.float32), np.float32(-2.0)
    _check(back.call(x, y), x, y)


def test_round_trip_fresh_process(exported, tmp_path):
    path = tmp_path / "fun.bin"
    path.write_bytes(bytes(exported.serialize(vjp_order=1)))
    script = textwrap.dedent(f"""
        import json, numpy as np, ember
        from ember import export
        exp = export.deserialize(open({str(path)!r}, "rb").read())
        x = np.array([0.5, 1.0, 2.0], np.float32)
        out = exp.call(x, np.float32(2.0))
        g = ember.grad(lambda x: exp.call(x, 2.0)["a"].sum())(x)
        print(json.dumps([np.asarray(out["a"]).tolist(), np.asarray(g).tolist()]))
    """)
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    a, g = json.loads(res.stdout.strip().splitlines()[-1])
    x = np.array([0.5, 1.0, 2.0], np.float32)
    np.testing.assert_allclose(a, np.sin(x) * 2 + 0.25, rtol=1e-6)
    np.testing.assert_allclose(g, 2 * np.cos(x), rtol=1e-6)


def test_grad_through_vjp():
    f = ember.jit(lambda x, k: (jnp.sin(x) * k.astype(jnp.float32), k + 1))
    exp = export.export(f)(np.ones(3, np.float32), np.ones(3, np.int32))
    vjp = exp.vjp()
    assert vjp.in_avals[:3] == (*exp.in_avals, exp.out_avals[0])
    assert vjp.in_avals[3].dtype == ember.dtypes.float0
    assert str(vjp.in_tree) == "PyTreeDef(((*, *, *, *), {}))"
    x, k = np.array([0.1, 0.2, 0.3], np.float32), np.array([1, 2, 3], np.int32)
    want = np.cos(x) * k
    back = export.deserialize(exp.serialize(vjp_order=1))
    for e in (exp, back):
        loss = lambda x, e=e: e.call(x, k)[0].sum()  # noqa: E731
        np.testing.assert_allclose(ember.grad(loss)(x), want, rtol=1e-6)
        np.testing.assert_allclose(ember.jit(ember.grad(loss))(x), want, rtol=1e-6)
    # Second order needs vjp_order=2; without a serialized VJP, grad fails as in JAX.
    h = export.export(ember.jit(lambda x: jnp.sin(x) * x))(1.0)
    h2 = export.deserialize(h.serialize(vjp_order=2))
    np.testing.assert_allclose(ember.grad(ember.grad(h2.call))(0.7),
                               2 * np.cos(0.7) - 0.7 * np.sin(0.7), rtol=1e-5)
    with pytest.raises(ValueError, match="No VJP is available"):
        ember.grad(export.deserialize(h.serialize()).call)(0.7)
    with pytest.raises(TypeError, match="custom_vjp"):
        ember.jvp(h.call, (1.0,), (1.0,))


def test_vmap_not_supported(exported):
    with pytest.raises(NotImplementedError, match="call_exported"):
        ember.vmap(exported.call)(jnp.ones((2, 3)), jnp.ones(2))
    with pytest.raises(NotImplementedError, match="call_exported"):
        ember.vmap(ember.jit(exported.call), in_axes=(0, None))(jnp.ones((2, 3)), 1.0)


def test_pytrees_and_registration():
    Point = collections.namedtuple("Point", "x y")
    f = ember.jit(lambda p, d, *, z: [Point(p.y, p.x * z), None, d["q"]])
    args = (Point(1.0, 2.0), collections.OrderedDict(q=jnp.ones(2), a=3.0))
    exp = export.export(f)(*args, z=4.0)
    with pytest.raises(ValueError, match="unregistered type"):
        exp.serialize()
    export.register_namedtuple_serialization(Point, serialized_name="test_export.Point")
    with pytest.raises(ValueError, match="Duplicate serialization"):
        export.register_namedtuple_serialization(Point, serialized_name="other")
    back = export.deserialize(exp.serialize())
    assert back.in_tree == exp.in_tree and back.out_tree == exp.out_tree
    out = back.call(*args, z=4.0)
    assert type(out[0]) is Point and out[1] is None
    np.testing.assert_allclose([out[0].x, out[0].y], [2.0, 4.0])
    np.testing.assert_allclose(out[2], np.ones(2))


def test_custom_node_serialization():
    class Box:
        def __init__(self, v, tag):
            self.v, self.tag = v, tag

    ember.tree_util.register_pytree_node(Box, lambda b: ((b.v,), b.tag),
                                         lambda tag, ch: Box(ch[0], tag))
    export.register_pytree_node_serialization(
        Box, serialized_name="test_export.Box", serialize_auxdata=lambda t: t.encode(),
        deserialize_auxdata=lambda b: b.decode())
    exp = export.export(ember.jit(lambda b: Box(b.v + 1, b.tag)))(Box(1.0, "hi"))
    back = export.deserialize(exp.serialize())
    assert back.out_tree == exp.out_tree
    out = back.call(Box(2.0, "hi"))
    assert out.tag == "hi" and float(out.v) == 3.0


def test_bad_calls(exported):
    with pytest.raises(ValueError, match=r"Shape mismatch for args\[0\].shape\[0\]"):
        exported.call(np.ones(4, np.float32), 1.0)
    with pytest.raises(ValueError, match=r"Dtype mismatch for args\[0\]"):
        exported.call(np.ones(3, np.int32), 1.0)
    with pytest.raises(ValueError, match=r"Rank mismatch for args\[0\]"):
        exported.call(np.ones((3, 1), np.float32), 1.0)
    with pytest.raises(ValueError, match="same pytree structure"):
        exported.call((np.ones(3, np.float32),), 1.0)
    with pytest.raises(ValueError, match="must be the result of `jit`"):
        export.export(jnp.sin)(1.0)
    with pytest.raises(ValueError, match="custom calls"):  # (host callbacks are Python state)
        out = ember.ShapeDtypeStruct((), np.float32)
        export.export(ember.jit(lambda x: ember.pure_callback(np.sin, out, x)))(1.0)
    with pytest.raises(NotImplementedError, match="shape polymorphism"):
        export.symbolic_shape("b, 3")
    assert not export.is_symbolic_dim(3)


def test_platform_check():
    tpu = export.export(ember.jit(jnp.cos), platforms=["tpu"])(1.0)
    with pytest.raises(ValueError, match=r"exported for platforms '\('tpu',\)'"):
        tpu.call(1.0)
    ok = export.export(ember.jit(jnp.cos), platforms=["tpu"],
                       disabled_checks=[export.DisabledSafetyCheck.platform()])(1.0)
    back = export.deserialize(ok.serialize())
    assert back.disabled_safety_checks == (export.DisabledSafetyCheck.platform(),)
    np.testing.assert_allclose(back.call(0.5), np.cos(0.5), rtol=1e-6)
    both = export.export(ember.jit(jnp.cos), platforms=["tpu", "cpu"])(1.0)
    np.testing.assert_allclose(both.call(0.5), np.cos(0.5), rtol=1e-6)


def test_bad_bytes(exported):
    blob = bytes(exported.serialize())
    corrupt = [b"", b"garbage", blob[:40], blob[:-5], blob.replace(b"sine", b"sinx"),
               blob.replace(b"float32", b"floatXX", 1), blob[:13] + b"\x07" + blob[14:],
               blob.replace(b'"in_tree"', b'"in_treX"')]
    for bad in corrupt:
        with pytest.raises(ValueError):
            export.deserialize(bad)
    with pytest.raises(TypeError):
        export.deserialize("text")


def test_compared_with_jax(jax):
    from jax import export as jexport
    f = lambda x, k, *, s: ({"o": x * s, "n": (k * 2,)}, x.sum())  # noqa: E731
    args = (np.ones((2, 3), np.float32), np.ones(4, np.int32))
    ours = export.export(ember.jit(f))(*args, s=2.0)
    theirs = jexport.export(jax.jit(f))(*args, s=2.0)
    assert ours.fun_name == theirs.fun_name
    assert str(ours.in_tree) == str(theirs.in_tree)
    assert str(ours.out_tree) == str(theirs.out_tree)
    assert [str(a) for a in ours.in_avals] == [str(a) for a in theirs.in_avals]
    assert [str(a) for a in ours.out_avals] == [str(a) for a in theirs.out_avals]
    assert ours.platforms == theirs.platforms and ours.nr_devices == theirs.nr_devices
    assert ours.calling_convention_version == theirs.calling_convention_version
    ov, tv = ours.vjp(), theirs.vjp()
    assert ov.fun_name == tv.fun_name and str(ov.in_tree) == str(tv.in_tree)
    assert [(a.shape, a.dtype.name) for a in ov.in_avals] == \
        [(a.shape, a.dtype.name) for a in tv.in_avals]
    assert (export.minimum_supported_calling_convention_version,
            export.maximum_supported_calling_convention_version) == \
        (jexport.minimum_supported_calling_convention_version,
         jexport.maximum_supported_calling_convention_version)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    a, b = ours.call(x, args[1], s=3.0), theirs.call(x, args[1], s=3.0)
    np.testing.assert_allclose(a[0]["o"], b[0]["o"])
    np.testing.assert_allclose(a[1], b[1])


def test_stages():
    f = ember.jit(lambda x: x * 2)
    assert isinstance(f, stages.Wrapped) and not isinstance(jnp.sin, stages.Wrapped)
    traced = f.trace(1.0)
    assert isinstance(traced, stages.Traced)
    lowered = traced.lower()
    assert isinstance(lowered, stages.Lowered)
    assert isinstance(lowered.compile(), stages.Compiled)
    info = traced.args_info[0][0]
    assert isinstance(info, stages.ArgInfo) and info.shape == () and not info.donated
    assert stages.CompilerOptions == dict[str, str | bool]
