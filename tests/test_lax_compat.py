"""ember.lax against jax.lax: dtype rules, edge values and errors found by a differential hunt.

Expected values are literals computed with JAX 0.10.2 (CPU) or closed forms; jax is not
imported here.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ember
from ember import lax

BF16 = ml_dtypes.bfloat16
_F = [1.5, 2.5, 100.25]


def _both(fn, *args):
    """``fn(*args)`` eagerly and under jit (the two must agree)."""
    eager = fn(*args)
    jitted = ember.jit(fn)(*args)
    for e, j in zip(ember.tree_util.tree_leaves(eager), ember.tree_util.tree_leaves(jitted)):
        assert e.dtype == j.dtype
        np.testing.assert_array_equal(np.asarray(e), np.asarray(j))
    return eager


# ---------------------------------------------------------------- dot_general dtypes


@pytest.mark.parametrize("lhs,rhs,pet,dtype,value", [
    # Mixed operand dtypes: the more precise one is the result; both operands are
    # converted to the output dtype before the product (as XLA's CPU backend does).
    (np.float32(_F), np.float16(_F), None, np.float32, 10058.5625),
    (np.float16(_F), np.array(_F, BF16), None, BF16, 9984.0),
    (np.float32(_F), np.int8([100, 100, -7]), None, np.float32, -301.75),
    (np.int8([100, 100, -7]), np.uint8([200, 100, 7]), None, np.int8, -1),
    (np.int8([100, 100, -7]), np.array([True, True, False]), None, np.int8, -56),
    (np.float32(_F), np.float16(_F), np.int32, np.int32, 10005),
    (np.float32(_F), np.float16(_F), np.int8, np.int8, 21),
    # One operand dtype: a more precise output upcasts the operands ...
    (np.int8([100, 100, -7]), np.int8([100, 100, -7]), np.int32, np.int32, 20049),
    (np.int8([100, 100, -7]), np.int8([100, 100, -7]), np.float32, np.float32, 20049.0),
    (np.array(_F, BF16), np.array(_F, BF16), np.float32, np.float32, 10008.5),
    (np.float16(_F), np.float16(_F), BF16, BF16, 9984.0),
    (np.uint8([200, 100, 7]), np.uint8([200, 100, 7]), np.int16, np.int16, -15487),
    # ... a less precise one converts the product (float to int saturates).
    (np.float32(_F), np.float32(_F), np.int32, np.int32, 10058),
    (np.float32(_F), np.float32(_F), np.int8, np.int8, 127),
    (np.float32(_F), np.float32(_F), BF16, BF16, 10048.0),
    (np.float16(_F), np.float16(_F), np.int32, np.int32, 10056),
    (np.int8([100, 100, -7]), np.int8([100, 100, -7]), None, np.int8, 81),
])
def test_dot_mixed_dtypes_and_preferred_element_type(lhs, rhs, pet, dtype, value):
    out = _both(lambda a, b: lax.dot(a, b, preferred_element_type=pet), lhs, rhs)
    assert out.dtype == np.dtype(dtype)
    assert np.asarray(out).item() == value


def test_dot_preferred_element_type_narrower_than_integer_result_raises():
    with pytest.raises(TypeError, match="must not be narrower"):
        lax.dot(np.int32([1, 2]), np.int32([3, 4]), preferred_element_type=np.int8)
    with pytest.raises(TypeError, match="must not be narrower"):
        lax.dot(np.int8([1, 2]), np.int8([3, 4]), preferred_element_type=np.bool_)


def test_dot_weak_type_and_bad_shapes():
    dn = (((), ()), ((), ()))
    out = lax.dot_general(2.0, 3.0, dn, preferred_element_type=np.float32)
    assert out.aval.weak_type  # weak when both operands are, as in JAX
    with pytest.raises(ValueError, match="dot"):
        lax.dot(np.ones((2, 2, 2), np.float32), np.ones((2, 2), np.float32))


def test_dot_mixed_dtypes_grad_and_vmap():
    x = np.float16([[1.5, 2.0], [3.0, 4.0]])
    y = np.float32([[0.5, -1.0], [2.0, 3.0]])
    gx, gy = ember.grad(lambda x, y: lax.dot(x, y).sum(), argnums=(0, 1))(x, y)
    assert gx.dtype == np.float16 and gy.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(gx), np.float16([[-0.5, 5.0], [-0.5, 5.0]]))
    np.testing.assert_array_equal(np.asarray(gy), np.float32([[4.5, 4.5], [6.0, 6.0]]))
    v = ember.vmap(lambda a, b: lax.dot(a, b))(x, y)
    assert v.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(v), np.float32([-1.25, 18.0]))


# ---------------------------------------------------------------- elementwise dtype rules


def test_conj_rejects_half_floats_and_abs_rejects_unsigned():
    for dt in (np.float16, BF16):
        with pytest.raises(TypeError, match="conj"):
            lax.conj(np.ones(2, dt))
    assert lax.conj(np.float32([1.0])).dtype == np.complex64
    for dt in (np.uint8, np.uint32):
        with pytest.raises(TypeError, match="abs"):
            lax.abs(np.ones(2, dt))
    np.testing.assert_array_equal(np.asarray(lax.abs(np.int8([-3, -128]))),
                                  np.int8([3, -128]))


def test_stop_gradient_converts_every_leaf():
    out = lax.stop_gradient({"i": np.int64([1, 2]), "s": 2, "b": np.array([True])})
    assert type(out["i"]) is type(out["s"]) is ember.Array
    assert out["i"].dtype == np.int32 and not out["i"].aval.weak_type
    assert out["s"].dtype == np.int32 and out["s"].aval.weak_type
    assert "stop_gradient" in str(ember.make_jaxpr(lax.stop_gradient)(np.int32(1)))


def test_clamp_weak_only_when_every_operand_is():
    assert not lax.clamp(np.float32(0), 0.5, np.float32(1)).aval.weak_type
    assert lax.clamp(0.0, 0.5, 1.0).aval.weak_type
    assert not lax.clamp(0.0, np.float32([2.0]), 1.0).aval.weak_type


def test_reduce_precision_and_integer_pow_exponent_types():
    with pytest.raises(TypeError, match="exponent_bits"):
        lax.reduce_precision(np.float32([1.0]), 5.0, 2)
    with pytest.raises(ValueError, match="exponent_bits"):
        lax.reduce_precision(np.float32([1.0]), 0, 2)
    # JAX accepts an integral float exponent; a fractional one is a TypeError.
    assert np.asarray(lax.integer_pow(np.float32([2.0]), 3.0)).tolist() == [8.0]
    with pytest.raises(TypeError, match="integer_pow"):
        lax.integer_pow(np.float32([2.0]), 2.5)


# ---------------------------------------------------------------- sort


def test_sort_complex_keys_lexicographic():
    nan = np.nan
    x = np.complex64([1 + 2j, complex(1, nan), complex(nan, 0), -1 + 0j, 1 + 1j,
                      complex(-np.inf, 5)])
    # (JAX 0.10.2: real part, then imaginary part; NaN parts sort last.)
    want = np.complex64([complex(-np.inf, 5), -1 + 0j, 1 + 1j, 1 + 2j, complex(1, nan),
                         complex(nan, 0)])
    out = _both(lambda a: lax.sort(a), x)
    np.testing.assert_array_equal(np.asarray(out), want)
    k, v = _both(lambda a: lax.sort_key_val(a, np.arange(6, dtype=np.int32)), x)
    np.testing.assert_array_equal(np.asarray(v), [5, 3, 4, 0, 1, 2])
    # A complex second key breaks the ties of the first.
    _, _, idx = lax.sort((np.int32([1, 0, 1, 0]), np.complex64([2j, 1j, 1j, 2]),
                          np.arange(4, dtype=np.int32)), num_keys=2)
    np.testing.assert_array_equal(np.asarray(idx), [1, 3, 2, 0])


# ---------------------------------------------------------------- equal-rank broadcasting


def test_binary_ops_broadcast_size_one_dimensions():
    # JAX 0.10's lax broadcasts operands of one rank along their dimensions of size 1.
    a = np.float32([[1.0, 2.0, 3.0]])
    b = np.float32([[10.0], [20.0]])
    out = _both(lambda x, y: lax.add(x, y), a, b)
    np.testing.assert_array_equal(np.asarray(out), a + b)
    out = _both(lambda x, y: lax.lt(x, y), np.int32([[1, 5]]), np.int32([[2], [6]]))
    np.testing.assert_array_equal(np.asarray(out), [[True, False], [True, True]])
    out = _both(lambda x, y: lax.pow(x, y), a, np.float32([[2.0], [0.5]]))
    np.testing.assert_allclose(np.asarray(out), a ** np.float32([[2.0], [0.5]]), rtol=1e-6)
    with pytest.raises(TypeError, match="incompatible shapes"):
        lax.mul(np.ones((2, 3), np.float32), np.ones((3, 3), np.float32))
    with pytest.raises(TypeError, match="same number of dimensions"):
        lax.mul(np.ones((2, 3), np.float32), np.ones(3, np.float32))


def test_size_one_broadcasting_grad_and_vmap():
    a = np.float32([[1.0, 2.0, 3.0]])
    b = np.float32([[2.0], [4.0]])
    ga, gb = ember.grad(lambda x, y: lax.div(x, y).sum(), argnums=(0, 1))(a, b)
    assert ga.shape == (1, 3) and gb.shape == (2, 1)
    np.testing.assert_allclose(np.asarray(ga), [[0.75, 0.75, 0.75]])
    np.testing.assert_allclose(np.asarray(gb), [[-1.5], [-0.375]])
    ga, gb = ember.grad(lambda x, y: lax.sub(x, y).sum(), argnums=(0, 1))(a, b)
    np.testing.assert_array_equal(np.asarray(ga), [[2.0, 2.0, 2.0]])
    np.testing.assert_array_equal(np.asarray(gb), [[-3.0], [-3.0]])
    v = ember.vmap(lambda x, y: lax.mul(x, y), in_axes=(None, 0))(a, np.float32([[[1.0], [2.0]]]))
    np.testing.assert_array_equal(np.asarray(v), [[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]]])
