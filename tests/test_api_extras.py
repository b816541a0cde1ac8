"""Top-level API that JAX programs use besides the transformations: ensure_compile_time_eval,
typeof, device and process queries, named_call, custom_gradient, closure_convert and
linear_transpose. References are closed forms and explicit matrices."""

import functools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import core


def test_ensure_compile_time_eval_runs_concrete_operations_at_trace_time():
    seen = []

    @ember.jit
    def f(x):
        with ember.ensure_compile_time_eval():
            n = jnp.arange(4).sum()
            seen.append(type(n))
            y = jnp.sin(x)  # traced operand: staged as usual
        return x * int(n) + y

    np.testing.assert_allclose(float(f(1.0)), 6.0 + np.sin(1.0), rtol=1e-6)
    assert seen == [ember.Array] and not isinstance(seen[0], core.Tracer)
    text = str(ember.make_jaxpr(f)(1.0))
    assert "sin" in text and "6.0" in text and "iota" not in text and "reduce_sum" not in text
    # outside the block, operations on constants are staged again
    def g(x):
        with ember.ensure_compile_time_eval():
            pass
        return x + jnp.arange(3).sum()
    assert "reduce_sum" in str(ember.make_jaxpr(g)(1.0))
    with pytest.raises(ember.errors.ConcretizationTypeError):
        ember.jit(lambda x: int(jnp.arange(4).sum()) * x)(1.0)


def test_typeof_is_the_abstract_value_printed_as_in_jax():
    t = ember.typeof(jnp.ones((2, 3)))
    assert (t.shape, t.dtype, t.weak_type) == ((2, 3), np.float32, False)
    assert (repr(t), str(t)) == ("ShapedArray(float32[2,3])", "float32[2,3]")
    w = ember.typeof(1.0)
    assert (repr(w), str(w)) == ("ShapedArray(float32[], weak_type=True)", "~float32[]")
    seen = []
    ember.jit(lambda x: seen.append(ember.typeof(x)) or x)(np.zeros(4, np.int32))
    assert str(seen[0]) == "int32[4]"
    with pytest.raises(TypeError, match="typeof"):
        ember.typeof("text")


def test_one_process_with_one_cpu_device():
    assert ember.device_count() == ember.local_device_count() == 1
    assert ember.local_devices() == ember.devices() == [ember.devices()[0]]
    assert (ember.process_index(), ember.process_count()) == (0, 1)
    assert ember.default_backend() == "cpu" and ember.device_count("cpu") == 1
    with pytest.raises(ValueError, match="process_index"):
        ember.local_devices(process_index=1)
    with pytest.raises(RuntimeError, match="backend"):
        ember.device_count("gpu")
    with ember.default_device(ember.devices()[0]):
        assert float(jnp.ones(2).sum()) == 2.0
    with pytest.raises(ValueError, match="default_device"), ember.default_device(3):
        pass
    text = ember.print_environment_info(return_string=True)
    assert text.startswith(f"ember:    {ember.__version__}\n") and "numpy:" in text


def test_named_call_and_named_scope_call_through():
    g = ember.named_call(lambda x: x * 3.0, name="triple")
    assert float(ember.jit(g)(2.0)) == 6.0 and float(ember.grad(g)(2.0)) == 3.0
    with pytest.raises(TypeError):
        ember.named_call(3)
    with ember.named_scope("block"):
        assert float(jnp.asarray(2.0) * 2) == 4.0


# ---------------------------------------------------------------- custom_gradient


@ember.custom_gradient
def _scaled_sin(x):
    return jnp.sin(x), lambda g: (g * 10.0 * jnp.cos(x),)


@ember.custom_gradient
def _product(x, y):
    return x * y, lambda g: (g * y * 3.0, g * x)


def test_custom_gradient_uses_the_rule_under_every_transformation():
    x = np.array([0.5, 1.0, 2.0], np.float32)
    want = 10.0 * np.cos(x)
    np.testing.assert_allclose(np.asarray(_scaled_sin(x)), np.sin(x), rtol=1e-6)
    for grad in (ember.grad(lambda x: _scaled_sin(x).sum()),
                 ember.jit(ember.grad(lambda x: _scaled_sin(x).sum())),
                 ember.grad(ember.jit(lambda x: _scaled_sin(x).sum())),
                 ember.grad(lambda x: ember.vmap(_scaled_sin)(x).sum())):
        np.testing.assert_allclose(np.asarray(grad(x)), want, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(ember.vmap(ember.grad(_scaled_sin))(x)), want,
                               rtol=1e-5)
    gx, gy = ember.grad(_product, argnums=(0, 1))(2.0, 5.0)
    assert (float(gx), float(gy)) == (15.0, 2.0)


def test_custom_gradient_rule_with_one_value_and_a_pytree_output():
    @ember.custom_gradient
    def f(x):
        return {"a": x * 2.0, "b": x}, lambda ct: 7.0 * ct["a"] + ct["b"]

    assert float(ember.grad(lambda x: f(x)["a"] + f(x)["b"])(1.0)) == 8.0


# ---------------------------------------------------------------- closure_convert


def _solve_pattern(obj, x0):
    converted, consts = ember.closure_convert(obj, x0)
    return _twice_objective(converted, x0, *consts)


@functools.partial(ember.custom_vjp, nondiff_argnums=(0,))
def _twice_objective(obj, x0, *args):
    return 2.0 * obj(x0, *args)


def _fwd(obj, x0, *args):
    return _twice_objective(obj, x0, *args), (x0, args)


def _bwd(obj, res, g):
    x0, args = res
    cts = ember.vjp(obj, x0, *args)[1](g)
    return tuple(2.0 * c for c in cts)


_twice_objective.defvjp(_fwd, _bwd)


def test_closure_convert_makes_traced_closures_arguments():
    x0 = np.array([1.0, 2.0], np.float32)

    def outer(a):  # d/da of 2 * (sum(x0 * a))**2 = 4 * sum(x0 * a) * sum(x0)
        return _solve_pattern(lambda x: jnp.sum(x * a) ** 2, x0)

    for grad in (ember.grad(outer), ember.jit(ember.grad(outer))):
        assert float(grad(1.5)) == pytest.approx(4 * 4.5 * 3.0, rel=1e-6)
    converted, consts = ember.closure_convert(lambda x: x * 3.0, 1.0)
    assert consts == [] and float(converted(2.0)) == 6.0
    seen = []

    def traced(a):
        conv, hoisted = ember.closure_convert(lambda x, n: x * a + n, 1.0, 2)
        seen.append(len(hoisted))
        return conv(2.0, 5, *hoisted)

    assert float(ember.jit(traced)(3.0)) == 11.0 and seen == [1]
    with pytest.raises(TypeError, match="closure_convert"):
        converted((1.0, 2.0))


# ---------------------------------------------------------------- linear_transpose


def test_linear_transpose_is_the_matrix_transpose():
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    f_t = ember.linear_transpose(lambda x: {"y": jnp.dot(m, x)},
                                 ember.ShapeDtypeStruct((3,), np.float32))
    (got,) = f_t({"y": np.array([1.0, -1.0], np.float32)})
    np.testing.assert_array_equal(np.asarray(got), m.T @ np.array([1.0, -1.0]))
    f_t = ember.linear_transpose(lambda x, y: 0.5 * x - 0.5 * y, 1.0, 2.0)
    assert [float(v) for v in f_t(1.0)] == [0.5, -0.5]
    # results take the primals' dtypes
    c_t = ember.linear_transpose(lambda x: x * 2.0, np.zeros(2, np.complex64))
    assert c_t(np.ones(2, np.complex64))[0].dtype == np.complex64
    # As JAX: integer -> integer functions transpose too; a mix of kinds is a TypeError;
    # fun is traced and its jaxpr transposed, so a non-linear operation has no rule.
    i_t = ember.linear_transpose(lambda x: 3 * x[::-1], np.zeros(2, np.int32))
    (got,) = i_t(np.array([1, 5], np.int32))
    assert got.dtype == np.int32 and got.tolist() == [15, 3]
    with pytest.raises(TypeError, match="and integer -> integer functions"):
        ember.linear_transpose(lambda x: x.astype(np.float32), np.zeros(2, np.int32))
    with pytest.raises(NotImplementedError, match="Transpose rule .* for 'sin'"):
        ember.linear_transpose(jnp.sin, 1.0)(1.0)


def test_linear_transpose_checks_cotangents_with_type_errors():
    # As in JAX: a cotangent whose tree, shape or dtype differs from fun's output is a
    # TypeError (vjp's pullback raises ValueError for the same mistakes).
    f_t = ember.linear_transpose(lambda x: (x[:2] * 2.0, jnp.sum(x)), np.ones(3, np.float32))
    got = f_t((np.array([1.0, 2.0], np.float32), 3.0))  # a Python float fits float32
    np.testing.assert_array_equal(got[0], [5.0, 7.0, 3.0])
    with pytest.raises(TypeError, match="cotangent tree does not match"):
        f_t([np.ones(2, np.float32), 3.0])
    with pytest.raises(TypeError, match="cotangent type does not match"):
        f_t((np.ones(3, np.float32), 3.0))
    with pytest.raises(TypeError, match="cotangent type does not match"):
        f_t((np.ones(2, np.float16), 3.0))
