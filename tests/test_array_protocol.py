"""The Array protocol against JAX's: operators with every kind of operand, conversions,
properties and methods, on concrete arrays and on tracers (values written as literals, taken
from JAX 0.10)."""

import operator

import numpy as np
import pytest

import ember
import ember.numpy as jnp


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
