"""ember.jit: caching and retracing, static arguments, pjit, lower/compile, dumps, logs."""

import functools
import gc
import logging
import os
import weakref

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import errors
from ember.jaxpr import eval_jaxpr


def _counting(fn):
    """``fn`` wrapped so that ``wrapper.traces`` counts how often it runs (= traces)."""
    def wrapper(*args, **kwargs):
        wrapper.traces += 1
        return fn(*args, **kwargs)
    wrapper.traces = 0
    return wrapper


# --------------------------------------------------------------------------- cache / retrace


def test_same_signature_does_not_retrace():
    f = _counting(lambda x: x * 2.0 + 1.0)
    jf = ember.jit(f)
    x = jnp.arange(3.0)
    np.testing.assert_array_equal(jf(x), [1.0, 3.0, 5.0])
    np.testing.assert_array_equal(jf(x + 1), [3.0, 5.0, 7.0])
    np.testing.assert_array_equal(jf(np.arange(3.0, dtype=np.float32)), [1.0, 3.0, 5.0])
    assert f.traces == 1
    jf(jnp.arange(4.0))  # new shape
    assert f.traces == 2
    jf(jnp.arange(3))  # new dtype
    assert f.traces == 3
    jf(jnp.arange(3.0))
    assert f.traces == 3
    assert jf._cache_size() == 3


def test_weak_type_is_part_of_the_signature():
    f = _counting(lambda x: x + 1)
    jf = ember.jit(f)
    out = jf(2.0)
    assert out.weak_type and out.dtype == np.float32
    out = jf(jnp.float32(2.0))
    assert not out.weak_type and out.dtype == np.float32
    assert f.traces == 2


def test_jit_in_a_loop_reuses_the_cache():
    f = _counting(lambda x: jnp.sin(x))
    for i in range(5):
        ember.jit(f)(jnp.ones(3) * i)
    assert f.traces == 1
    # Naming the default backend is the same cache; different options are different caches.
    ember.jit(f, backend="cpu")(jnp.ones(3))
    assert f.traces == 1
    ember.jit(f, donate_argnums=0)(jnp.ones(3))
    assert f.traces == 2
    ember.jit(f, backend="interpreter")(jnp.ones(3))
    assert f.traces == 3


def test_new_lambdas_retrace():
    traces = []
    for _ in range(3):
        ember.jit(lambda x: (traces.append(1), x + 1)[1])(jnp.ones(2))
    assert len(traces) == 3


def test_new_partials_get_new_entries():
    f = _counting(lambda x, y: x * y)
    for _ in range(3):
        np.testing.assert_array_equal(ember.jit(functools.partial(f, y=2.0))(jnp.ones(2)),
                                      [2.0, 2.0])
    assert f.traces == 3


def test_clear_caches():
    f = _counting(lambda x: x - 1)
    jf = ember.jit(f)
    jf(jnp.ones(2))
    ember.clear_caches()
    jf(jnp.ones(2))
    assert f.traces == 2


# --------------------------------------------------------------------------- static arguments


def test_static_argnums():
    def f(x, n):
        f.traces += 1
        for _ in range(n):
            x = x * 2
        return x
    f.traces = 0
    jf = ember.jit(f, static_argnums=1)
    np.testing.assert_array_equal(jf(jnp.ones(2), 3), [8.0, 8.0])
    np.testing.assert_array_equal(jf(jnp.ones(2), 3), [8.0, 8.0])
    assert f.traces == 1
    np.testing.assert_array_equal(jf(jnp.ones(2), 1), [2.0, 2.0])
    assert f.traces == 2
    # static_argnums also makes the argument static when passed by keyword.
    np.testing.assert_array_equal(jf(jnp.ones(2), n=3), [8.0, 8.0])


def test_static_argnames_and_partial_decorator():
    traces = []

    @functools.partial(ember.jit, static_argnames="mode")
    def f(x, mode="double"):
        traces.append(mode)
        return x * 2 if mode == "double" else x * 3
    np.testing.assert_array_equal(f(jnp.ones(2)), [2.0, 2.0])
    np.testing.assert_array_equal(f(jnp.ones(2), mode="triple"), [3.0, 3.0])
    np.testing.assert_array_equal(f(jnp.ones(2), mode="triple"), [3.0, 3.0])
    # static_argnames also makes the argument static when passed positionally.
    np.testing.assert_array_equal(f(jnp.ones(2), "triple"), [3.0, 3.0])
    assert traces == ["double", "triple", "triple"]  # default, keyword, positional


def test_negative_static_argnums():
    jf = ember.jit(lambda x, shape: jnp.reshape(x, shape), static_argnums=-1)
    assert jf(jnp.arange(6.0), (2, 3)).shape == (2, 3)


def test_unhashable_static_argument_names_it():
    jf = ember.jit(lambda x, shape: jnp.reshape(x, shape), static_argnums=1)
    with pytest.raises(ValueError, match="static argument 'shape'.*not hashable"):
        jf(jnp.arange(6.0), [2, 3])
    jg = ember.jit(lambda x, axes=None: x.sum(axes), static_argnames="axes")
    with pytest.raises(ValueError, match="'axes' of type list"):
        jg(jnp.ones((2, 2)), axes=[0])


def test_invalid_dynamic_argument_names_it():
    jf = ember.jit(lambda x, mode: x)
    with pytest.raises(TypeError, match="argument 'mode' of type str"):
        jf(jnp.ones(2), "fast")


def _signature_namer(fun):
    import inspect
    params = list(inspect.signature(fun).parameters.values())
    positional = [p.name for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    varargs = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), "args")
    return lambda i: positional[i] if i < len(positional) else f"{varargs}[{i - len(positional)}]"


def _wrapped(x, y):
    return x


@functools.wraps(_wrapped)
def _wrapper(*a):
    return a[0]


@pytest.mark.parametrize("fun", [
    lambda x: x,
    lambda x, y=1, *rest, z, **kw: x,
    lambda a, b, /, c, *more: a,
    lambda *xs: xs,
    lambda: 0,
    _wrapper,  # (follows __wrapped__: x, y)
    functools.partial(lambda x, y: x, 1),
])
def test_argument_names_come_from_the_signature(fun):
    from ember.api import _positional_namer
    namer, want = _positional_namer(fun), _signature_namer(fun)
    assert [namer(i) for i in range(5)] == [want(i) for i in range(5)]


# ------------------------------------------------------------------- pytrees, kwargs, dtypes


def test_pytrees_in_and_out():
    @ember.jit
    def f(params, x):
        return {"y": params["w"] * x + params["b"], "aux": (x.sum(), None)}
    out = f({"w": jnp.ones(3) * 2, "b": 1.0}, jnp.arange(3.0))
    assert set(out) == {"y", "aux"}
    np.testing.assert_array_equal(out["y"], [1.0, 3.0, 5.0])
    assert float(out["aux"][0]) == 3.0 and out["aux"][1] is None


def test_keyword_arguments_are_dynamic():
    f = _counting(lambda x, scale=1.0: x * scale)
    jf = ember.jit(f)
    np.testing.assert_array_equal(jf(jnp.ones(2), scale=3.0), [3.0, 3.0])
    np.testing.assert_array_equal(jf(jnp.ones(2), scale=4.0), [4.0, 4.0])
    assert f.traces == 1
    np.testing.assert_array_equal(jf(x=jnp.ones(2), scale=jnp.ones(2)), [1.0, 1.0])


def test_output_weak_types_match_eager():
    f = lambda x, y: (x * 2, x + y, jnp.float32(1.0) + x)  # noqa: E731
    for args in [(1.0, 2), (jnp.float32(1.0), 2.0), (jnp.ones(2), 3)]:
        eager = [jnp.asarray(e) for e in f(*args)]  # Python floats become weak f32
        jitted = ember.jit(f)(*args)
        for e, j in zip(eager, jitted):
            assert (j.dtype, j.weak_type, j.shape) == (e.dtype, e.weak_type, e.shape)
            np.testing.assert_array_equal(j, e)


def test_constant_and_passthrough_outputs():
    out = ember.jit(lambda x: (x, 2.0, jnp.arange(3)))(jnp.ones(2))
    np.testing.assert_array_equal(out[0], [1.0, 1.0])
    assert out[1].weak_type and float(out[1]) == 2.0
    np.testing.assert_array_equal(out[2], [0, 1, 2])


def test_captured_large_constant_is_hoisted():
    table = jnp.arange(5000.0)
    out = ember.jit(lambda i: table * i)(2.0)
    np.testing.assert_array_equal(out, np.arange(5000.0, dtype=np.float32) * 2)


def test_x64_on_and_off():
    x = np.arange(3)
    assert ember.jit(lambda x: x + 1)(x).dtype == np.int32
    ember.config.update("jax_enable_x64", True)
    try:
        out = ember.jit(lambda x: x + 1)(x)
        assert out.dtype == np.int64
        np.testing.assert_array_equal(out, [1, 2, 3])
        assert ember.jit(lambda x: x * 0.5)(np.ones(2)).dtype == np.float64
    finally:
        ember.config.update("jax_enable_x64", False)
    assert ember.jit(lambda x: x + 1)(x).dtype == np.int32


def test_x64_flag_is_part_of_the_key():
    f = _counting(lambda x: x + 1)
    jf = ember.jit(f)
    jf(1)
    ember.config.update("jax_enable_x64", True)
    try:
        assert jf(1).dtype == np.int64
    finally:
        ember.config.update("jax_enable_x64", False)
    assert jf(1).dtype == np.int32
    assert f.traces == 2


def test_method_decoration():
    class Model:
        def __init__(self, k):
            self.k = k

        @functools.partial(ember.jit, static_argnums=0)
        def apply(self, x):
            return x * self.k
    # self is static: hashable by identity.
    np.testing.assert_array_equal(Model(3).apply(jnp.ones(2)), [3.0, 3.0])


# --------------------------------------------------------------------------- pjit


def test_nested_jit_is_a_pjit_equation():
    def f(x):
        return jnp.sin(x) * 2.0
    jaxpr = ember.make_jaxpr(lambda x: ember.jit(f)(x) + 1.0)(jnp.ones(3))
    assert str(jaxpr) == (
        "{ lambda ; a:f32[3]. let\n"
        "    b:f32[3] = jit[\n"
        "      name=f\n"
        "      jaxpr={ lambda ; a:f32[3]. let\n"  # (as JAX: named as the operands/results)
        "          c:f32[3] = sin a\n"
        "          b:f32[3] = mul c 2.0:f32[]\n"
        "        in (b,) }\n"
        "    ] a\n"
        "    d:f32[3] = add b 1.0:f32[]\n"
        "  in (d,) }")
    # Evaluating that jaxpr eagerly runs pjit's impl (compile and run the inner jaxpr).
    out, = eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, jnp.arange(3.0))
    np.testing.assert_allclose(out, np.sin(np.arange(3.0)) * 2 + 1, rtol=1e-6)


def test_nested_jit_compiles_inlined():
    inner = _counting(lambda x: jnp.exp(x))
    outer = ember.jit(lambda x: ember.jit(inner)(x) - ember.jit(inner)(x * 2))
    x = jnp.linspace(0.0, 1.0, 5)
    np.testing.assert_allclose(outer(x), np.exp(np.asarray(x)) - np.exp(np.asarray(x) * 2),
                               rtol=1e-6)
    assert inner.traces == 1  # both inner calls share one signature
    # The inner jaxpr traced under the outer trace is reused at top level: no retrace.
    ember.jit(inner)(x)
    assert inner.traces == 1


def test_nested_jit_closing_over_an_outer_tracer():
    def outer(x, y):
        return ember.jit(lambda z: z * y)(x)  # y is a tracer of the outer trace
    jaxpr = ember.make_jaxpr(outer)(jnp.ones(2), 3.0)
    eqn = jaxpr.eqns[0]
    assert eqn.primitive.name == "jit" and len(eqn.invars) == 2
    np.testing.assert_array_equal(ember.jit(outer)(jnp.ones(2), 3.0), [3.0, 3.0])
    np.testing.assert_array_equal(ember.jit(outer)(jnp.ones(2), 4.0), [4.0, 4.0])


# ------------------------------------------------------------------- eval_shape, disable_jit


def test_eval_shape():
    def f(x, y):
        return {"s": x @ y, "m": x.mean()}
    out = ember.eval_shape(f, ember.ShapeDtypeStruct((2, 3), np.float32), jnp.ones((3, 4)))
    assert out["s"] == ember.ShapeDtypeStruct((2, 4), np.float32)
    assert out["m"].shape == () and out["m"].dtype == np.float32
    weak = ember.eval_shape(lambda x: x * 2, 1.0)
    assert weak.weak_type and repr(weak) == (
        "ShapeDtypeStruct(shape=(), dtype=float32, weak_type=True)")
    f_counted = _counting(lambda x: x + 1)
    assert ember.jit(f_counted).eval_shape(jnp.ones(4)).shape == (4,)


def test_eval_shape_computes_nothing():
    calls = []

    def f(x):
        calls.append(type(x).__name__)
        return x.sum()
    ember.eval_shape(f, ember.ShapeDtypeStruct((1000, 1000), np.float32))
    assert calls == ["JaxprTracer"]


def test_disable_jit_runs_op_by_op():
    seen = []

    @ember.jit
    def f(x):
        seen.append(type(x).__name__)
        return x + 1
    with ember.disable_jit():
        np.testing.assert_array_equal(f(jnp.ones(2)), [2.0, 2.0])
        np.testing.assert_array_equal(f(jnp.ones(2)), [2.0, 2.0])
    assert seen == ["Array", "Array"]
    f(jnp.ones(2))
    assert seen[-1] == "JaxprTracer"
    ember.config.update("jax_disable_jit", True)
    try:
        f(jnp.ones(2))
        assert seen[-1] == "Array"
    finally:
        ember.config.update("jax_disable_jit", False)


# --------------------------------------------------------------------------- lower / compile


def test_lower_and_compile():
    def f(x, y):
        return jnp.exp(x) * y + 1.0
    lowered = ember.jit(f).lower(ember.ShapeDtypeStruct((4,), np.float32), jnp.ones(4))
    text = lowered.as_text()
    assert text.startswith("HloModule jit_f")
    assert "exponential" in text and "fusion" not in text
    assert lowered.out_info == ember.ShapeDtypeStruct((4,), np.float32)
    compiled = lowered.compile()
    optimized = compiled.as_text()
    assert "fusion" in optimized and "exponential" in optimized
    x = jnp.arange(4.0)
    np.testing.assert_allclose(compiled(x, jnp.ones(4) * 2), np.exp(np.arange(4.0)) * 2 + 1,
                               rtol=1e-6)
    with pytest.raises(TypeError, match="argument 'x' changed from f32\\[4\\] to f32\\[5\\]"):
        compiled(jnp.ones(5), jnp.ones(4))


def test_compiled_cost_and_memory_analysis():
    n = 1000
    compiled = ember.jit(lambda x, y: jnp.sum(x * y)).lower(jnp.ones(n), jnp.ones(n)).compile()
    cost = compiled.cost_analysis()
    assert {"flops", "bytes accessed", "transcendentals"} <= set(cost)
    assert cost["flops"] >= 2 * n - 1
    assert cost["bytes accessed"] >= 2 * n * 4
    memory = compiled.memory_analysis()
    assert memory.peak_bytes >= 4
    assert memory.argument_size_in_bytes == 2 * n * 4
    assert memory.output_size_in_bytes == 4


def test_lower_with_static_arguments():
    lowered = ember.jit(lambda x, n: x * n, static_argnums=1).lower(jnp.ones(2), 3)
    compiled = lowered.compile()
    np.testing.assert_array_equal(compiled(jnp.ones(2)), [3.0, 3.0])


# --------------------------------------------------------------------------- debugging


def test_dump_to_writes_jaxpr_and_every_pass(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))

    def my_fn(x):
        return jnp.tanh(x) + 0.0
    ember.jit(my_fn)(jnp.ones(3))
    files = sorted(os.listdir(tmp_path))
    jaxprs = [f for f in files if f.endswith(".jaxpr.txt")]
    assert len(jaxprs) == 1 and jaxprs[0].startswith("jit_my_fn.")
    prefix = jaxprs[0][:-len("jaxpr.txt")]
    assert "tanh" in (tmp_path / jaxprs[0]).read_text()
    hlo = [f for f in files if f.endswith(".hlo.txt")]
    assert all(f.startswith(prefix) for f in hlo)
    before = [f for f in hlo if "before_optimizations" in f]
    assert len(before) == 1 and "HloModule" in (tmp_path / before[0]).read_text()
    assert any("after_fusion" in f for f in hlo) and any("after_dce" in f for f in hlo)
    assert len(hlo) >= 3


def test_log_compiles_names_the_changed_argument(caplog):
    def scale(x, y):
        return x * y
    jf = ember.jit(scale)
    ember.config.update("jax_log_compiles", True)
    try:
        with caplog.at_level(logging.WARNING, logger="ember"):
            jf(jnp.ones(3), 2.0)
            jf(jnp.ones(3), 5.0)  # cache hit: nothing logged
            assert len(caplog.records) == 1
            assert "Compiling jit(scale)" in caplog.text and "x: f32[3]" in caplog.text
            jf(jnp.ones(4), 2.0)
    finally:
        ember.config.update("jax_log_compiles", False)
    assert "argument 'x' changed from f32[3] to f32[4]" in caplog.text
    assert all(r.name == "ember" for r in caplog.records)


def test_no_logs_by_default(caplog):
    with caplog.at_level(logging.DEBUG, logger="ember"):
        ember.jit(lambda x: x * 3)(jnp.ones(2))
    assert not caplog.records


# --------------------------------------------------------------------------- tracer errors


def test_python_if_on_traced_value_names_the_argument():
    @ember.jit
    def f(x, threshold):
        if x.sum() > threshold:
            return x
        return -x
    with pytest.raises(errors.TracerBoolConversionError) as info:
        f(jnp.ones(3), 1.0)
    message = str(info.value)
    assert "'x'" in message and "static_argnums" in message and "lax.cond" in message


def test_concretization_error_inside_jit():
    f = ember.jit(lambda x, n: jnp.zeros(int(n)) + x)
    with pytest.raises(errors.ConcretizationTypeError, match="'n'"):
        f(1.0, 3)
    # Marking it static is the fix.
    g = ember.jit(lambda x, n: jnp.zeros(int(n)) + x, static_argnums=1)
    np.testing.assert_array_equal(g(1.0, 3), [1.0, 1.0, 1.0])


def test_float_of_traced_value_inside_jit():
    with pytest.raises(errors.ConcretizationTypeError, match="'y'"):
        ember.jit(lambda x, y: x * float(y))(1.0, 2.0)


def test_jit_rejects_non_callables():
    with pytest.raises(TypeError, match="expected a callable"):
        ember.jit(3)
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        ember.jit(lambda x: x, backend="tpu")


def test_cpu_backend_is_the_default_and_agrees_with_the_interpreter():
    assert ember.backends.get_backend().name == "cpu"
    x = jnp.linspace(-2.0, 2.0, 7)
    cpu = ember.jit(lambda x: jnp.sin(x) * 2, backend="cpu")(x)
    ref = ember.jit(lambda x: jnp.sin(x) * 2, backend="interpreter")(x)
    np.testing.assert_allclose(cpu, ref, rtol=1e-6)


def test_cache_goes_away_with_the_function():
    f = lambda x: x + 1  # noqa: E731
    jf = ember.jit(f)
    jf(jnp.ones(2))
    ref = weakref.ref(jf._cache)
    del f, jf
    gc.collect()
    assert ref() is None


def test_cached_call_takes_positional_arrays_and_scalars_alike():
    f = _counting(lambda x, y: x * y)
    jf = ember.jit(f)
    for _ in range(3):
        np.testing.assert_array_equal(jf(jnp.ones(2), 3.0), [3.0, 3.0])
        np.testing.assert_array_equal(jf(jnp.ones(2), jnp.float32(3.0)), [3.0, 3.0])
    assert f.traces == 2  # weak and strong y


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_jit_divides_by_a_broadcast_as_a_reciprocal_multiplication(backend):
    """As XLA does (so as JAX computes): ``x / c`` is ``x * (1 / c)`` for a constant and
    ``x / broadcast(v)`` is ``x * broadcast(1 / v)``; a same-shape division stays exact."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 40)).astype(np.float32)
    v = (rng.random((32, 1)) + 0.5).astype(np.float32)
    w = (rng.random((32, 40)) + 0.5).astype(np.float32)
    by_three = np.asarray(ember.jit(lambda x: x / 3.0, backend=backend)(x))
    np.testing.assert_array_equal(by_three, x * (np.float32(1) / np.float32(3)))
    assert np.any(by_three != x / np.float32(3))  # the rewrite is visible in the last bit
    by_rows = np.asarray(ember.jit(lambda x, v: x / v, backend=backend)(x, v))
    np.testing.assert_array_equal(by_rows, x * (np.float32(1) / v))
    same_shape = np.asarray(ember.jit(lambda x, w: x / w, backend=backend)(x, w))
    np.testing.assert_array_equal(same_shape, x / w)


def test_float0_values_cross_the_jit_boundary():
    # Integer primals' tangents and cotangents are float0 (no data): jit returns them as
    # NumPy float0 zeros and takes them as arguments, compiling only the rest.
    from ember import dtypes
    grad_x, grad_i = ember.jit(ember.grad(lambda x, i: x * i, argnums=(0, 1),
                                          allow_int=True))(1.5, 2)
    assert float(grad_x) == 2.0
    assert isinstance(grad_i, np.ndarray) and grad_i.dtype == dtypes.float0
    assert grad_i.shape == ()
    ct_x, ct_i = ember.jit(lambda x, i: ember.vjp(lambda x, i: x * i, x, i)[1](x))(
        jnp.ones(3), jnp.arange(3))
    np.testing.assert_array_equal(np.asarray(ct_x), [0.0, 1.0, 2.0])
    assert ct_i.dtype == dtypes.float0 and ct_i.shape == (3,)
    (_, flags), (_, flag_tangents) = ember.jit(
        lambda x: ember.jvp(lambda x: (x * 2, x > 1), (x,), (x,)))(jnp.arange(3.0))
    np.testing.assert_array_equal(np.asarray(flags), [False, False, True])
    assert flag_tangents.dtype == dtypes.float0 and flag_tangents.shape == (3,)
    x, z = ember.jit(lambda x, z: (x * 2, z))(3.0, np.zeros(4, dtypes.float0))
    assert float(x) == 6.0 and z.dtype == dtypes.float0 and z.shape == (4,)
    per_example = ember.jit(ember.vmap(ember.grad(lambda x, i: x * i, argnums=(0, 1),
                                                  allow_int=True)))(jnp.ones(2), jnp.arange(2))
    np.testing.assert_array_equal(np.asarray(per_example[0]), [0.0, 1.0])
    assert per_example[1].dtype == dtypes.float0 and per_example[1].shape == (2,)


def test_a_compiled_function_takes_only_its_dynamic_arguments():
    # As in JAX: the static arguments given to ``lower`` are compiled in.
    scale = ember.jit(lambda x, n: x * n, static_argnums=1).lower(jnp.ones(3), 2).compile()
    np.testing.assert_array_equal(np.asarray(scale(jnp.arange(3.0))), [0.0, 2.0, 4.0])
    with pytest.raises(TypeError, match="do not match"):
        scale(jnp.ones(3), 2)
    middle = ember.jit(lambda a, n, b, k=1: (a * n + b) * k, static_argnums=1,
                       static_argnames="k").lower(1.0, 5, 2.0, k=3).compile()
    assert float(middle(2.0, 1.0)) == 33.0
    with pytest.raises(TypeError, match="do not match"):
        middle(2.0, 1.0, k=3)


def test_static_arguments_the_function_does_not_have_are_value_errors():
    with pytest.raises(ValueError, match="static_argnums"):
        ember.jit(lambda x: x, static_argnums=3)
    with pytest.raises(ValueError, match="static_argnums"):
        ember.jit(lambda x, y: x, static_argnums=-3)
    with pytest.raises(ValueError, match=r"static_argnames names \['foo'\]"):
        ember.jit(lambda x: x, static_argnames=("foo",))
    # Variadic functions take any position or name.
    assert float(ember.jit(lambda *a: a[0] * a[2], static_argnums=2)(3.0, 1.0, 2)) == 6.0
    assert float(ember.jit(lambda x, **k: x * k["n"], static_argnames="n")(3.0, n=2)) == 6.0


def test_jax_keywords_without_effect_are_accepted():
    f = ember.jit(lambda x, y: x + y, donate_argnames="x", keep_unused=True, inline=True)
    assert float(f(1.0, 2.0)) == 3.0
    g = functools.partial(ember.jit, donate_argnames=("y",), inline=True)(lambda x, y: x * y)
    assert float(g(2.0, 3.0)) == 6.0


@pytest.mark.parametrize("name", ["identity", "plus_zero", "pair", "reshape", "astype"])
def test_a_callers_numpy_argument_stays_writeable_and_unshared(name):
    # JAX copies NumPy arguments: ember reads them in place, but must neither freeze the
    # caller's array nor return it (or a view) as an output.
    f = {"identity": lambda x: x, "plus_zero": lambda x: x + 0,
         "pair": lambda x: (x, 2 * x), "reshape": lambda x: x.reshape(1, 3),
         "astype": lambda x: x.astype(jnp.float32)}[name]
    jitted = ember.jit(f)
    for call in range(2):  # (the second call takes the cached-call fast path)
        buf = np.zeros(3, np.float32)
        out = jitted(buf)
        first = out[0] if isinstance(out, tuple) else out
        assert buf.flags.writeable
        buf[0] = 7.0
        assert float(np.asarray(first).ravel()[0]) == 0.0, call


def test_numpy_and_array_arguments_mix_on_repeated_calls():
    # Canonical NumPy arrays take the cached-call fast path from the second call; float64
    # arrays (x64 off) are converted on every call, and results stay float32.
    f = ember.jit(lambda x, y: x * y + 1)
    a64, a32, arr = np.arange(3.0), np.arange(3, dtype=np.float32), jnp.full(3, 2, jnp.float32)
    for _ in range(3):
        for x, y in [(a64, arr), (a32, arr), (arr, a32), (a32, a32), (arr, arr)]:
            out = f(x, y)
            assert out.dtype == np.float32
            np.testing.assert_array_equal(out, np.asarray(x) * np.asarray(y) + 1)
    assert f._cache.compiles == 1  # (one signature: float32[3] twice)


def test_scalar_arguments_on_repeated_calls():
    # Python and NumPy scalars take the cached-call fast path from the second call, with
    # the slow path's dtypes, weak types and errors.
    f = ember.jit(lambda x, y: x * y + 1)
    for _ in range(3):
        for x, y, dtype, weak in [(2.0, 3.0, np.float32, True), (2, 3, np.int32, True),
                                  (True, 3, np.int32, True), (2.0, np.float32(3), np.float32,
                                                              False),
                                  (np.int32(2), 3, np.int32, False), (1j, 2.0, np.complex64,
                                                                      True)]:
            out = f(x, y)
            assert (out.dtype, out.aval.weak_type) == (dtype, weak)
            assert out == x * y + 1
        with pytest.raises(OverflowError):
            f(2**40, 1)
        assert f(2.5, np.float64(2.0)) == 6.0  # (float64 converted: x64 is off)


def test_jit_reads_a_numpy_argument_when_called():
    # A large call would be queued; the caller may overwrite its array right after it.
    f = ember.jit(lambda x: x * 2)
    a = np.ones(4_000_000, np.float32)
    f(a).block_until_ready()
    out = f(a)
    a[:] = 5.0
    np.testing.assert_array_equal(np.asarray(out)[:3], [2.0, 2.0, 2.0])
    compiled = ember.jit(lambda x: x * 2).lower(a).compile()
    out = compiled(a)
    a[:] = 7.0
    np.testing.assert_array_equal(np.asarray(out)[:3], [10.0, 10.0, 10.0])


def test_container_arguments_on_repeated_calls():
    # Tuples, lists, dicts and None take the cached-call fast path from the second call;
    # every call must still give the slow path's answer, retrace on a new structure, and
    # read NumPy leaves when called.
    f = ember.jit(lambda p, x: (p["w"] * x + p["b"][0] + p["b"][1], [p["w"], None]))
    w, x = jnp.arange(3, dtype=jnp.float32), np.ones(3, np.float32)
    for _ in range(3):
        for b in [(1.0, 2.0), (np.float32(1), jnp.float32(2)), [1.0, 2.0]]:
            out, (w_out, none) = f({"b": b, "w": w, "extra": None}, x)
            np.testing.assert_array_equal(out, np.arange(3) + 3.0)
            assert out.dtype == np.float32 and none is None
            np.testing.assert_array_equal(w_out, w)
    # (float weak scalars twice, float32 scalar and Array, a list instead of a tuple)
    assert f._cache.compiles == 3
    buf = np.zeros(3, np.float32)
    out, _ = f({"b": (1.0, 2.0), "w": buf, "extra": None}, x)
    buf[:] = 5.0  # (after the call: the result holds the values of the call)
    np.testing.assert_array_equal(out, [3.0, 3.0, 3.0])
    assert f._cache.compiles == 3
    with pytest.raises(ValueError, match="sorting pytree dictionary keys"):
        f({"b": (1.0, 2.0), "w": w, 1: None}, x)


def test_static_and_keyword_arguments_on_repeated_calls():
    f = ember.jit(lambda x, n, *, scale, shift: x * n * scale + shift,
                  static_argnums=1, static_argnames="shift")
    x = jnp.ones(2)
    for _ in range(3):
        np.testing.assert_array_equal(f(x, 2, scale=3.0, shift=1), [7.0, 7.0])
        np.testing.assert_array_equal(f(x, 3, shift=1, scale=jnp.float32(3)), [10.0, 10.0])
        np.testing.assert_array_equal(f(x, True, scale=3.0, shift=2), [5.0, 5.0])
        np.testing.assert_array_equal(f(scale=1.0, shift=0, n=1.5, x=x), [1.5, 1.5])
    # (n=2, n=3 with a strong scale, n=True (its type differs from 1's), keywords only)
    assert f._cache.compiles == 4
    g = ember.jit(lambda x, n: x * len(n), static_argnums=-1)
    with pytest.raises(ValueError, match="hashable"):
        g(x, [1, 2])
    for _ in range(2):
        np.testing.assert_array_equal(g(x, (1, 2)), [2.0, 2.0])
        np.testing.assert_array_equal(g(x, (1, 2, 3)), [3.0, 3.0])
        with pytest.raises(ValueError, match="greater than or equal to -len"):
            g(x=x, n=(1, 2))  # (as JAX: a negative index needs positional arguments)
    assert g._cache.compiles == 2


def test_fast_path_keys_tell_positional_containers_from_keywords():
    # f(x, {"y": a}) and f(x, y=a) have the same leaves in the same order: their cached
    # calls must still be told apart.
    f = ember.jit(lambda x, y=None, **kw: (x, y, kw))
    x, a = jnp.ones(2), jnp.zeros(2)
    for _ in range(3):
        _, y, kw = f(x, {"y": a})
        assert isinstance(y, dict) and kw == {}
        _, y, kw = f(x, y=a)
        assert type(y) is ember.Array and kw == {}
        _, y, kw = f(x, z={"y": a})
        assert y is None and isinstance(kw["z"], dict)
