"""Correctness of the tracing fast paths (the abstract-eval cache, the inlined trace loops).

The jaxprs of a few representative programs must stay exactly what the tracer produced before
the fast paths existed: their texts are pinned by digest (recorded from the slower tracer; on
a mismatch the test prints the new text). The cache must never change a result or an error.
"""

import hashlib

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import core, lax
from ember.interpreters import partial_eval as pe
from tests.test_autodiff import _mlp_loss

_RNG = np.random.default_rng(0)


def _f32(*shape):
    return _RNG.standard_normal(shape).astype(np.float32)


def _mlp_step():
    grad_fn = ember.value_and_grad(lambda params, x, y: _mlp_loss(jnp, params, x, y))

    def step(params, x, y):
        value, grads = grad_fn(params, x, y)
        return value, ember.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)

    sizes = (8, 16, 16, 4)
    params = [(_f32(i, o), np.zeros(o, np.float32)) for i, o in zip(sizes[:-1], sizes[1:])]
    return step, (params, _f32(5, 8), np.eye(4, dtype=np.float32)[[0, 1, 2, 3, 0]])


def _attention_grad():
    def attend(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / 8.0
        return jnp.einsum("bhqk,bhkd->bhqd", ember.nn.softmax(s, axis=-1), v)

    f = ember.grad(lambda q, k, v: attend(q, k, v).sum(), argnums=(0, 1, 2))
    return f, tuple(_f32(2, 3, 6, 4) for _ in range(3))


def _cnn_step():
    dn = ("NHWC", "HWIO", "NHWC")

    def loss(p, x):
        h = jnp.maximum(lax.conv_general_dilated(x, p[0], (1, 1), "SAME",
                                                 dimension_numbers=dn), 0.0)
        h = lax.conv_general_dilated(h, p[1], (1, 1), "SAME", dimension_numbers=dn)
        h = lax.reduce_window(jnp.maximum(h, 0.0), -jnp.inf, lax.max, (1, 2, 2, 1),
                              (1, 2, 2, 1), "VALID")
        return jnp.mean(h * h)

    return ember.value_and_grad(loss), ((_f32(3, 3, 1, 4), _f32(3, 3, 4, 4)), _f32(2, 6, 6, 1))


def _loops():
    def f(h, xs, w):
        def step(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h.sum()
        h, ys = lax.scan(step, h, xs)
        z = lax.fori_loop(0, 3, lambda i, c: c * 0.5 + i, h)
        return z.sum() + ys.sum()

    def g(h, xs, w):
        dw = ember.grad(f, argnums=2)(h, xs, w)
        return lax.while_loop(lambda c: c[1] < 5, lambda c: (c[0] * 0.5 + 1.0, c[1] + 1),
                              (dw, 0))[0]

    return g, (_f32(2, 4), _f32(5, 2, 4), _f32(4, 4))


def _vmap_grad():
    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    return ember.vmap(ember.grad(loss), in_axes=(None, 0)), (_f32(4, 4), _f32(6, 3, 4))


# sha256 of str(make_jaxpr(f)(*args)), recorded before the fast paths (commit 74c3124).
_PROGRAMS = {
    "mlp_step": (_mlp_step,
                   "ef64dcce4ad01f149ce8cdfeb6aa7c1e8993fa9dde044d58f2a80740c8b923ca"),
    "attention_grad": (_attention_grad,
                   "35c3db0a4b8f05adfbefc9545b9b02cd87aee48a0af78cc79b4c76f1d60d3ba9"),
    "cnn_step": (_cnn_step,
                   "bc30cd2f9c17fc6ff421cda7f9d97be53170b3f90fa6f8ea3eb58eb5812def51"),
    "loops": (_loops,
                   "50621d624ceea8f446311a0cd0d399d3af4f64a678e9c3055e7adc4ec5bfbafb"),
    "vmap_grad": (_vmap_grad,
                   "8a752848ab9d0bb6ba7fe4c0534329a44bab51b166c6cdc300cac59b23dc39b2"),
}


def _text(name):
    f, args = _PROGRAMS[name][0]()
    return str(ember.make_jaxpr(f)(*args))


@pytest.mark.parametrize("name", sorted(_PROGRAMS))
def test_jaxpr_text_unchanged(name):
    pe._aval_cache.clear()
    cold = _text(name)
    hot = _text(name)  # (now every abstract eval is a cache hit)
    assert hot == cold
    digest = hashlib.sha256(cold.encode()).hexdigest()
    assert digest == _PROGRAMS[name][1], cold


def test_traced_program_still_computes_the_same_values():
    step, (params, x, y) = _mlp_step()
    eager_loss, eager_params = step(params, x, y)
    jit_loss, jit_params = ember.jit(step)(params, x, y)
    np.testing.assert_allclose(np.asarray(jit_loss), np.asarray(eager_loss), rtol=1e-5)
    for a, b in zip(ember.tree_util.tree_leaves(jit_params),
                    ember.tree_util.tree_leaves(eager_params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def _probe_primitive(rule):
    """A staged-only primitive whose abstract eval is ``rule``, counting its calls."""
    prim = core.Primitive("trace_speed_probe")
    calls = []

    def abstract_eval(x, **params):
        calls.append(params)
        return rule(x, **params)

    prim.def_abstract_eval(abstract_eval)
    return prim, calls


def test_cache_hits_for_equal_avals_and_params():
    prim, calls = _probe_primitive(lambda x, k: x)
    f = ember.make_jaxpr(lambda x: prim.bind(prim.bind(x, k=(1, 2)), k=(1, 2)))
    assert str(f(np.ones(3, np.float32))).count("trace_speed_probe") == 2
    assert len(calls) == 1
    f(np.ones(4, np.float32))  # another shape: another entry
    assert len(calls) == 2


@pytest.mark.parametrize("values", [(1, True, 1.0), ((1,), (True,), (1.0,)),
                                    (np.dtype("int32"), "int32", None)])
def test_cache_keeps_equal_values_of_other_types_apart(values):
    # 1 == True == 1.0 in Python; a rule may still treat them differently.
    prim, calls = _probe_primitive(
        lambda x, k: core.ShapedArray(x.shape, x.dtype, weak_type=type(k) is bool))
    for v in values:
        text = str(ember.make_jaxpr(lambda x, v=v: prim.bind(x, k=v))(np.ones(2)))
        assert "trace_speed_probe" in text
    assert len(calls) == len(values)


def test_non_plain_params_are_not_cached():
    prim, calls = _probe_primitive(lambda x, k: x)
    for k in ([1, 2], (1.5, 2), lambda: None):
        ember.make_jaxpr(lambda x, k=k: prim.bind(prim.bind(x, k=k), k=k))(np.ones(2))
    assert len(calls) == 6
    assert not any(key[0] is prim.abstract_eval for key in pe._aval_cache)


def test_errors_are_raised_every_time():
    prim, calls = _probe_primitive(lambda x, k: (_ for _ in ()).throw(TypeError(f"bad k={k}")))
    for _ in range(2):
        with pytest.raises(TypeError, match="bad k=3"):
            ember.make_jaxpr(lambda x: prim.bind(x, k=3))(np.ones(2))
    assert len(calls) == 2
    for _ in range(2):  # and a lax rule's own message, after a good call filled the cache
        ember.make_jaxpr(lambda x: lax.reshape(x, (2, 3)))(np.ones(6, np.float32))
        with pytest.raises(TypeError, match="reshape"):
            ember.make_jaxpr(lambda x: lax.reshape(x, (4, 3)))(np.ones(6, np.float32))


def test_redefined_rule_and_config_change_miss_the_cache(x64):
    prim, calls = _probe_primitive(lambda x, k: x)
    ember.make_jaxpr(lambda x: prim.bind(x, k=1))(np.ones(2, np.float32))
    ember.config.update("jax_enable_x64", False)
    ember.make_jaxpr(lambda x: prim.bind(x, k=1))(np.ones(2, np.float32))
    assert len(calls) == 2  # (x64 on, then off)
    prim.def_abstract_eval(lambda x, k: core.ShapedArray((7,), x.dtype))
    text = str(ember.make_jaxpr(lambda x: prim.bind(x, k=1))(np.ones(2, np.float32)))
    assert "f32[7]" in text


def test_multiple_results_and_debug_origin():
    prim = core.MultipleResultsPrimitive("trace_speed_pair")
    prim.def_abstract_eval(lambda x: [x, core.ShapedArray((), x.dtype)])
    for _ in range(2):
        text = str(ember.make_jaxpr(lambda x: prim.bind(x))(np.ones(3, np.float32)))
        assert "b:f32[3] c:f32[] = trace_speed_pair a" in text

    def f(x):
        (y, s) = prim.bind(x * 2.0)
        if s > 0:  # a traced bool: the error names the argument the value derives from
            return y
        return y

    for _ in range(2):
        with pytest.raises(ember.errors.TracerBoolConversionError, match="argument 'x'"):
            ember.jit(f)(np.ones(3, np.float32))


@pytest.mark.parametrize("transform", ["jvp", "grad", "vmap", "vmap_unmapped"])
def test_current_trace_restored_after_a_failing_rule(transform):
    prim = core.Primitive("trace_speed_fails")
    prim.def_impl(lambda x: (_ for _ in ()).throw(ValueError("impl failed")))
    prim.def_abstract_eval(lambda x: (_ for _ in ()).throw(ValueError("abstract eval failed")))
    prim.def_jvp(lambda primals, tangents: (_ for _ in ()).throw(ValueError("jvp failed")))
    prim.def_batching(lambda vals, dims: (_ for _ in ()).throw(ValueError("batch failed")))
    x = np.ones(3, np.float32)
    runs = {
        "jvp": lambda: ember.jvp(lambda x: prim.bind(x), (x,), (x,)),
        "grad": lambda: ember.grad(lambda x: prim.bind(jnp.sin(x)).sum())(x),
        "vmap": lambda: ember.vmap(lambda x: prim.bind(x))(x),
        # (an operand that is not mapped goes straight to the parent trace: eager here)
        "vmap_unmapped": lambda: ember.vmap(lambda x: prim.bind(np.ones(2)) + x)(x),
    }
    expected = {"jvp": "jvp failed", "grad": "jvp failed", "vmap": "batch failed",
                "vmap_unmapped": "abstract eval failed"}
    before = core.current_trace()
    with pytest.raises(ValueError, match=expected[transform]):
        runs[transform]()
    assert core.current_trace() is before and core.is_eval_context()
    assert float(jnp.sum(jnp.sin(x))) == pytest.approx(3 * np.sin(1.0), rel=1e-6)


@pytest.mark.parametrize("shape, message", [
    ((2, -3), "must be non-negative"), ((2, True), "must contain only integers"),
    ((2.0, 3), "must contain only integers"), (5, "must be a sequence of integers")])
def test_shape_checks_keep_their_errors(shape, message):
    x = np.ones(6, np.float32)
    with pytest.raises(TypeError, match=message):
        ember.make_jaxpr(lambda x: lax.broadcast_in_dim(x, shape, (0,)))(x)
    assert lax.broadcast_in_dim(x, (np.int64(2), 6), (1,)).shape == (2, 6)
    np.testing.assert_array_equal(np.asarray(lax.broadcast_in_dim(x, (2, 6), (1,))),
                                  np.broadcast_to(x, (2, 6)))


def test_rules_reading_bound_axis_names_are_not_cached():
    # axis_index's abstract eval checks that its name is bound: after a traced call with the
    # name bound, the same call without it must still raise.
    x = np.ones(3, np.float32)
    f = lambda x: lax.axis_index("i") + x  # noqa: E731
    text = str(ember.make_jaxpr(f, axis_env=[("i", 3)])(x))
    assert "axis_index[axis_name=i]" in text
    with pytest.raises(NameError, match="unbound axis name: i"):
        ember.make_jaxpr(f)(x)
    np.testing.assert_array_equal(np.asarray(ember.vmap(lambda v: f(v[0]), axis_name="i")(
        x.reshape(3, 1))), np.arange(3, dtype=np.float32) + 1)
