"""The Array protocol against JAX's: operators with every kind of operand, conversions,
properties and methods, on concrete arrays and on tracers (values written as literals, taken
from JAX 0.10)."""

import copy
import operator
import pickle
import warnings

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import errors


def _check(x, dtype, weak=False, value=None):
    assert x.dtype == np.dtype(dtype), (x.dtype, dtype)
    assert x.aval.weak_type is weak
    if value is not None:
        np.testing.assert_array_equal(np.asarray(x), np.asarray(value))


# ---------------------------------------------------------------- binary operators


@pytest.mark.parametrize("op", [operator.eq, operator.ne])
@pytest.mark.parametrize("other", [[1, 2, 3], (1, 2, 3)])
def test_equality_with_list_or_tuple_raises(op, other):
    x = jnp.arange(3)
    with pytest.raises(TypeError, match="unsupported operand"):
        op(x, other)
    with pytest.raises(TypeError, match="unsupported operand"):
        op(other, x)
    with pytest.raises(TypeError, match="unsupported operand"):
        ember.jit(lambda x: op(x, other))(x)


@pytest.mark.parametrize("other", [{}, {1}])
def test_equality_with_dict_or_set_raises(other):
    with pytest.raises(TypeError, match="unsupported operand"):
        jnp.arange(3) == other  # noqa: B015
    with pytest.raises(TypeError, match="unsupported operand"):
        jnp.arange(3) != other  # noqa: B015


def test_reflected_operators_other_than_add_and_mul_defer_for_lists():
    x = jnp.ones(2)
    assert x.__rmatmul__([1.0, 2.0]) is NotImplemented
    assert x.__rsub__([1.0, 2.0]) is NotImplemented
    with pytest.raises(TypeError, match="unsupported operand"):
        x.__rmul__([1.0, 2.0])


def test_equality_with_other_objects_is_false():
    x = jnp.arange(3)
    assert (x == "a") is False and (x != None) is True  # noqa: E711
    assert (x == object()) is False


def test_bool_operands_become_int32_under_x64(x64):
    # JAX's to_numeric_dtype: a bool becomes int32, whatever the default integer.
    b = jnp.array([True, False, True])
    _check(b // True, np.int32, value=[1, 0, 1])
    _check(b % b, np.int32, value=[0, 0, 0])
    _check(b << b, np.int32, value=[2, 0, 2])
    _check(b >> b, np.int32, value=[0, 0, 0])
    _check(b ** b, np.int32, value=[1, 1, 1])
    _check(jnp.square(jnp.array(True)), np.int32, value=1)


def test_power_with_a_concrete_integer_exponent_keeps_the_base_dtype(x64):
    # As for a Python int, a NumPy integer or a concrete 0-d integer array exponent is an
    # integer_pow in the base's dtype.
    u = jnp.arange(3, dtype=np.uint8)
    _check(u ** np.int8(2), np.uint8, value=[0, 1, 4])
    _check(u ** np.int64(2), np.uint8, value=[0, 1, 4])
    _check(u ** jnp.array(2), np.uint8, value=[0, 1, 4])
    _check(u ** np.array(2), np.uint8, value=[0, 1, 4])
    _check(jnp.asarray(2.0) ** np.int64(3), np.float64, weak=True, value=8.0)
    _check(jnp.array([True, False]) ** np.uint8(2), np.int32, value=[1, 0])
    _check(jnp.arange(3, dtype=np.int32) ** np.int64(2), np.int32, value=[0, 1, 4])
    # (An array exponent still promotes.)
    _check(u ** jnp.arange(3), np.int64, value=[1, 1, 4])


def test_integer_power_of_arrays_is_strong(x64):
    b = jnp.array([True, False, True])
    _check(3 ** b, np.int64, value=[3, 1, 3])
    _check(ember.jit(lambda y: 3 ** y)(2), np.int64, value=9)


# ---------------------------------------------------------------- conversions of tracers


def _raises_in_jit(fn, arg, error):
    with pytest.raises(error) as info:
        ember.jit(fn)(arg)
    return info.value


@pytest.mark.parametrize("conv", [bool, int, float, complex, operator.index])
def test_tracer_conversion_checks_the_shape_first(conv):
    # NumPy's errors for a non-scalar (JAX checks the shape before concreteness)...
    error = ValueError if conv is bool else TypeError
    err = _raises_in_jit(conv, jnp.ones(3, np.int32), error)
    assert not isinstance(err, errors.ConcretizationTypeError)
    if conv is bool:
        _raises_in_jit(conv, jnp.ones(0), ValueError)


def test_tracer_conversion_errors_of_scalars():
    x = jnp.array(1, np.int32)
    _raises_in_jit(bool, x, errors.TracerBoolConversionError)
    _raises_in_jit(operator.index, x, errors.TracerIntegerConversionError)
    for conv in (int, float, complex):
        _raises_in_jit(conv, x, errors.ConcretizationTypeError)
    # operator.index of a float scalar: the plain TypeError.
    err = _raises_in_jit(operator.index, jnp.array(1.0), TypeError)
    assert not isinstance(err, errors.TracerIntegerConversionError)


def test_conversions_under_grad():
    # A JVP tracer has a concrete value for bool/int/index and item(), never for float()
    # or complex() (JAX 0.10).
    x = jnp.array(2.0)
    assert float(ember.grad(lambda x: x.item() * x)(x)) == 2.0
    assert float(ember.grad(lambda x: int(x) * x)(x)) == 2.0
    assert float(ember.grad(lambda x: x if x > 1 else -x)(x)) == 1.0
    with pytest.raises(errors.ConcretizationTypeError):
        ember.grad(lambda x: float(x) * x)(x)
    with pytest.raises(errors.ConcretizationTypeError):
        ember.grad(lambda x: complex(x).real * x)(x)


@pytest.mark.parametrize("method", ["tobytes", "devices", "unsafe_buffer_pointer",
                                    "__dlpack__", "tolist", "addressable_data", "delete",
                                    "is_deleted"])
def test_tracer_methods_of_concrete_arrays_raise(method):
    args = (0,) if method == "addressable_data" else ()
    _raises_in_jit(lambda x: getattr(x, method)(*args), jnp.ones(3),
                   errors.ConcretizationTypeError)


@pytest.mark.parametrize("prop", ["is_fully_replicated", "is_fully_addressable"])
def test_tracer_properties_of_concrete_arrays_raise(prop):
    with pytest.raises(errors.ConcretizationTypeError):
        ember.vmap(lambda x: (getattr(x, prop), x)[1])(jnp.ones(3))


def test_tracer_cannot_be_pickled():
    _raises_in_jit(pickle.dumps, jnp.ones(3), errors.ConcretizationTypeError)


def test_tracer_copies_and_sizes():
    def f(x):
        assert x.nbytes == 12 and x.itemsize == 4
        return x.copy() + copy.copy(x) + copy.deepcopy(x)
    _check(ember.jit(f)(jnp.arange(3.0)), np.float32, value=[0.0, 3.0, 6.0])


def test_reversed_tracer():
    out = ember.jit(lambda x: jnp.stack(list(reversed(x))))(jnp.arange(3.0))
    _check(out, np.float32, value=[2.0, 1.0, 0.0])
    _raises_in_jit(lambda x: list(reversed(x)), jnp.array(1.0), IndexError)


# ---------------------------------------------------------------- containment, flat, format


@pytest.mark.parametrize("jit", [False, True])
def test_contains(jit):
    # (``in`` converts the result with bool(), so under jit call ``__contains__``.)
    wrap = ember.jit if jit else (lambda f: f)
    x = jnp.array([1, 2, 3])
    assert 2 in x and 5.0 not in x
    assert wrap(lambda x: x.__contains__(2))(x)
    assert not wrap(lambda x: x.__contains__(5.0))(x)
    with pytest.raises(ValueError, match="one-dimensional"):
        wrap(lambda x: x.__contains__(1))(jnp.array(1))
    with pytest.raises(ValueError, match="one-dimensional"):
        wrap(lambda x: x.__contains__(1))(jnp.ones((2, 2)))
    with pytest.raises(ValueError, match="scalar"):
        wrap(lambda x: x.__contains__(jnp.ones(2)))(x)
    with pytest.raises(TypeError):
        wrap(lambda x: x.__contains__("a"))(x)
    with pytest.raises(TypeError, match="requires ndarray or scalar"):
        wrap(lambda x: x.__contains__([1]))(x)
    with pytest.raises(errors.TracerBoolConversionError):
        ember.jit(lambda x: 2 in x)(x)


def test_flat_is_not_implemented():
    with pytest.raises(NotImplementedError, match="flatten"):
        jnp.ones(3).flat  # noqa: B018
    with pytest.raises(NotImplementedError):
        ember.jit(lambda x: x.flat)(jnp.ones(3))


def test_format():
    assert f"{jnp.array(1.5):.3f}" == "1.500"
    assert f"{jnp.array(7, np.int32):03d}" == "007"
    assert f"{jnp.array([1, 2])}" == "[1 2]"
    with pytest.raises(TypeError):
        f"{jnp.array([1.0, 2.0]):>20}"  # noqa: B018 (a spec on a non-scalar: NumPy's error)


# ---------------------------------------------------------------- interoperability


def test_dlpack():
    x = jnp.arange(3.0)
    assert x.__dlpack_device__() == (1, 0)
    y = np.from_dlpack(x)
    assert y.dtype == np.float32 and not y.flags.writeable
    np.testing.assert_array_equal(y, [0.0, 1.0, 2.0])
    _check(jnp.from_dlpack(np.arange(3, dtype=np.int16)), np.int16, value=[0, 1, 2])
    _check(jnp.from_dlpack(x), np.float32, value=[0.0, 1.0, 2.0])


def test_array_namespace():
    x = jnp.ones(2)
    assert x.__array_namespace__() is jnp
    assert x.__array_namespace__(api_version="2024.12") is jnp
    assert jnp.__array_api_version__ == "2024.12"
    with pytest.raises(ValueError):
        x.__array_namespace__(api_version="2021.12")


def test_choose_and_argpartition_methods():
    idx = jnp.array([0, 1, 0])
    _check(idx.choose([jnp.arange(3.0), -jnp.arange(3.0)]), np.float32, value=[0.0, -1.0, 2.0])
    out = jnp.array([3.0, 1.0, 2.0]).argpartition(1)
    assert int(out[1]) == 2 and out.dtype == np.int32


# ---------------------------------------------------------------- methods


def test_astype_keywords_and_none():
    x = jnp.arange(3)
    _check(x.astype(None), np.float32, value=[0.0, 1.0, 2.0])  # (NumPy's dtype(None))
    _check(x.astype(np.int16, copy=True, device=ember.devices()[0]), np.int16, value=[0, 1, 2])
    _check(ember.jit(lambda x: x.astype("float16", copy=True))(x), np.float16)


def test_astype_complex_to_real_warns():
    z = jnp.array([1 + 2j], np.complex64)
    with pytest.warns(DeprecationWarning, match="complex to real"):
        _check(z.astype(np.float32), np.float32, value=[1.0])
    with pytest.warns(DeprecationWarning):
        jnp.astype(z, np.int32)


def test_reshape_and_ravel_orders():
    x = jnp.arange(6.0).reshape(2, 3)
    _check(x.reshape(3, 2, order="F"), np.float32, value=[[0.0, 4.0], [3.0, 2.0], [1.0, 5.0]])
    _check(x.ravel(order="F"), np.float32, value=[0.0, 3.0, 1.0, 4.0, 2.0, 5.0])
    with pytest.raises(NotImplementedError):
        x.reshape((3, 2), order="A")
    with pytest.raises(NotImplementedError):
        x.ravel(order="K")
    with pytest.raises(ValueError, match="order"):
        x.reshape((3, 2), order="X")


@pytest.mark.parametrize("fn", [jnp.sort, jnp.argsort, lambda x, **k: x.sort(**k),
                                lambda x, **k: x.argsort(**k)])
def test_sort_kind_is_refused(fn):
    with pytest.raises(TypeError, match="kind"):
        fn(jnp.array([3, 1, 2]), kind="stable")


def test_byteswap():
    x = jnp.arange(3, dtype=np.int32)
    _check(x.byteswap(), np.int32, value=[0, 16777216, 33554432])
    _check(ember.jit(lambda x: x.byteswap().byteswap())(x), np.int32, value=[0, 1, 2])
    z = np.array([1 + 2j, -3.5j], np.complex64)
    np.testing.assert_array_equal(np.asarray(jnp.asarray(z).byteswap()), z.byteswap())
    np.testing.assert_array_equal(np.asarray(jnp.array([1, 2], np.uint8).byteswap()), [1, 2])


def test_device_methods():
    x = jnp.arange(3)
    assert x.is_fully_addressable and x.is_fully_replicated
    _check(x.to_device(ember.devices()[0]), np.int32, value=[0, 1, 2])


# ---------------------------------------------------------------- printing


def test_repr_dtype_that_does_not_fit_stays_on_the_last_line():
    # JAX separates the dtype by len("Array(") spaces instead of a line break.
    assert repr(jnp.arange(5.0) / 3) == (
        "Array([0.        , 0.33333334, 0.6666667 , 1.        , 1.3333334 ],      "
        "dtype=float32)")
    x = jnp.arange(60, dtype=np.int32).reshape(3, 20).astype(np.complex64)
    assert repr(x).endswith("58.+0.j, 59.+0.j]],      dtype=complex64)")


# ---------------------------------------------------------------- array creation from arrays


def test_array_of_a_list_of_tracers_is_not_weak():
    out = ember.jit(lambda x: jnp.array([x, 1.0]))(2.0)
    _check(out, np.float32, weak=False, value=[2.0, 1.0])
    out = ember.jit(lambda x: jnp.asarray((x, x)))(2)
    _check(out, np.int32, weak=False, value=[2, 2])
    _check(ember.jit(jnp.array)(2.0), np.float32, weak=True, value=2.0)


class _HasJaxArray:
    def __init__(self, value):
        self.value = value

    def __jax_array__(self):
        return jnp.asarray(self.value)


def test_jax_array_protocol_in_operators_and_asarray():
    a = _HasJaxArray([1.0, 2.0])
    x = jnp.ones(2)
    _check(x + a, np.float32, value=[2.0, 3.0])
    _check(a * x, np.float32, value=[1.0, 2.0])
    _check(x == a, np.bool_, value=[True, False])
    _check(jnp.asarray(a), np.float32, value=[1.0, 2.0])
    _check(jnp.array(a, dtype=np.int32), np.int32, value=[1, 2])
    _check(ember.jit(lambda x: x - a)(x), np.float32, value=[0.0, -1.0])


def test_at_update_with_values_that_do_not_cast_safely_warns():
    x = jnp.arange(3)
    with pytest.warns(FutureWarning, match="scatter inputs have incompatible types") as rec:
        _check(x.at[0].set(2.5), np.int32, value=[2, 1, 2])
    assert rec[0].filename == __file__
    with pytest.warns(FutureWarning):
        x.at[0].divide(2.0)
    with pytest.warns(FutureWarning):
        jnp.ones(3, np.float16).at[0].add(jnp.ones((), np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x.at[0].set(2)  # (a weak int fits)
        jnp.arange(3, dtype=np.uint8).at[0].set(300)
        jnp.ones(3).at[0].set(np.float64(2.0))  # (canonicalized to float32)
        jnp.asarray(2.0).at[()].add(jnp.float16(1))  # (float16 fits a weak float32)
        jnp.ones(3, np.float16).at[0].set(2.5)  # (a weak float fits float16)


def test_delete():
    x = jnp.ones(3)
    assert not x.is_deleted()
    x.delete()
    assert x.is_deleted() and x.is_ready() and x.shape == (3,)
    for use in (lambda: x + 1, lambda: np.asarray(x), lambda: x.block_until_ready(),
                lambda: ember.jit(lambda y: y * 2)(x), lambda: repr(x)):
        with pytest.raises(RuntimeError, match="deleted"):
            use()
    y = ember.jit(lambda a: a * 2)(jnp.ones(4))  # (possibly still being computed)
    y.delete()
    with pytest.raises(RuntimeError, match="deleted"):
        y.sum()
