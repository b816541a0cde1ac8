"""Targeted tests: scalar types, dtype helpers, isclose/allclose, nan_to_num, diff, astype."""

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as jnp

BF16 = np.dtype(ml_dtypes.bfloat16)
nan, inf = np.nan, np.inf


# ---------------------------------------------------------------- scalar types


@pytest.mark.parametrize("name,expected", [
    ("bool_", "bool"), ("bool", "bool"), ("int8", "int8"), ("int16", "int16"),
    ("int32", "int32"), ("int64", "int32"), ("uint8", "uint8"), ("uint16", "uint16"),
    ("uint32", "uint32"), ("uint64", "uint32"), ("float16", "float16"),
    ("bfloat16", "bfloat16"), ("float32", "float32"), ("float64", "float32"),
    ("complex64", "complex64"), ("complex128", "complex64"), ("int_", "int32"),
    ("uint", "uint32"), ("float_", "float32"), ("complex_", "complex64"),
    ("single", "float32"), ("double", "float32"), ("half", "float16"),
])
def test_scalar_type_callables(name, expected):
    t = getattr(jnp, name)
    x = t(1)
    assert isinstance(x, ember.Array) and x.dtype == np.dtype(expected) and x.shape == ()
    assert not x.weak_type
    assert jnp.zeros(2, t).dtype == np.dtype(expected)


def test_scalar_types_behave_like_dtypes():
    assert np.dtype(jnp.float32) == np.float32 and np.dtype(jnp.bfloat16) == BF16
    assert jnp.dtype(jnp.int8) == np.int8 and jnp.dtype("float32") == np.float32
    v = jnp.int32([1, 2])
    assert v.dtype == np.int32 and v.shape == (2,)
    np.testing.assert_array_equal(np.asarray(jnp.int8(np.array([1.7, -1.7]))), [1, -1])
    assert jnp.float32(1.5).item() == 1.5
    assert not isinstance(jnp.float32(1.0), jnp.float32)
    assert isinstance(np.float32(1.0), jnp.float32)
    assert jnp.float32 == np.float32 and jnp.float32 != np.float16
    assert {jnp.float32: 1}[np.float32] == 1
    assert jnp.ones(2).astype(jnp.bfloat16).dtype == BF16
    assert jnp.ndarray is ember.Array and isinstance(jnp.ones(2), jnp.ndarray)
    assert jnp.newaxis is None and jnp.pi == np.pi and jnp.e == np.e
    assert np.isinf(jnp.inf) and np.isnan(jnp.nan) and jnp.euler_gamma == np.euler_gamma
    traced = ember.make_jaxpr(lambda x: jnp.int32(x))(jnp.ones(3))
    assert "convert_element_type" in str(traced)


def test_finfo_iinfo():
    fb = jnp.finfo(jnp.bfloat16)
    assert fb.eps == 2.0 ** -7 and float(fb.max) == float(ml_dtypes.finfo(BF16).max)
    assert fb.bits == 16
    f16 = jnp.finfo(np.float16)
    assert f16.eps == np.finfo(np.float16).eps and f16.max == np.finfo(np.float16).max
    assert jnp.finfo(jnp.float32).tiny == np.finfo(np.float32).tiny
    assert jnp.finfo(jnp.ones(2)).eps == np.finfo(np.float32).eps
    assert jnp.iinfo(jnp.int8).min == -128 and jnp.iinfo(jnp.uint16).max == 65535
    assert jnp.iinfo(np.int32).max == 2 ** 31 - 1
    with pytest.raises(ValueError, match="finfo: data type int32 is not inexact"):
        jnp.finfo(jnp.int32)
    with pytest.raises(ValueError, match="iinfo: invalid integer data type float32"):
        jnp.iinfo(jnp.float32)


@pytest.mark.parametrize("args,expected", [
    ((jnp.int8, 1.0), "float32"), ((jnp.int8, 1), "int8"), ((jnp.int8, jnp.uint8), "int16"),
    ((jnp.bfloat16, jnp.float16), "float32"), ((jnp.bfloat16, 1.0), "bfloat16"),
    ((jnp.float64,), "float32"), ((jnp.bool_, 1), "int32"), ((jnp.bool_, jnp.bool_), "bool"),
    ((np.ones(2, np.int32), 2.5), "float32"), ((1, 2.0), "float32"), ((1, 1j), "complex64"),
    ((jnp.uint32, jnp.int32), "int32"), ((jnp.uint8, np.float16), "float16"),
    ((jnp.int32, jnp.float32), "float32"), ((jnp.ones(2, jnp.float16), 3), "float16"),
    ((jnp.complex64, jnp.float16), "complex64"),
])
def test_result_type(args, expected):
    assert jnp.result_type(*args) == np.dtype(expected)


def test_promote_types_and_can_cast():
    assert jnp.promote_types(jnp.int8, jnp.uint8) == np.int16
    assert jnp.promote_types(np.float64, np.float32) == np.float64
    assert jnp.promote_types(jnp.bfloat16, np.float16) == np.float32
    assert jnp.promote_types(int, jnp.int8) == np.int8
    assert jnp.promote_types(jnp.bool_, jnp.bool_) == np.bool_
    assert jnp.can_cast(jnp.int8, jnp.int32) and not jnp.can_cast(jnp.int32, jnp.int8)
    assert jnp.can_cast(jnp.bfloat16, jnp.float32) and not jnp.can_cast(jnp.float32, BF16)
    assert jnp.can_cast(jnp.float32, jnp.int8, casting="unsafe")
    with pytest.raises(ValueError, match="can_cast: casting must be one of"):
        jnp.can_cast(jnp.int8, jnp.int32, casting="bogus")
    with pytest.raises(TypeError, match="promote_types: dtype object"):
        jnp.promote_types(np.dtype(object), jnp.int8)


_KINDS = ["floating", "integer", "inexact", "number", "signedinteger", "unsignedinteger",
          "complexfloating", "bool_", "generic"]
_ISSUB = {
    "float32": [1, 0, 1, 1, 0, 0, 0, 0, 1], "bfloat16": [1, 0, 1, 1, 0, 0, 0, 0, 1],
    "float16": [1, 0, 1, 1, 0, 0, 0, 0, 1], "int8": [0, 1, 0, 1, 1, 0, 0, 0, 1],
    "int32": [0, 1, 0, 1, 1, 0, 0, 0, 1], "uint8": [0, 1, 0, 1, 0, 1, 0, 0, 1],
    "uint32": [0, 1, 0, 1, 0, 1, 0, 0, 1], "bool_": [0, 0, 0, 0, 0, 0, 0, 1, 1],
    "complex64": [0, 0, 1, 1, 0, 0, 1, 0, 1],
}


@pytest.mark.parametrize("name", sorted(_ISSUB))
def test_issubdtype_table(name):
    for kind, want in zip(_KINDS, _ISSUB[name]):
        for a in (getattr(jnp, name), np.dtype(getattr(jnp, name))):
            got = jnp.issubdtype(a, getattr(jnp, kind))
            assert type(got) is bool and got == bool(want), (name, kind)


def test_issubdtype_of_abstract_kinds():
    # The abstract classes are kinds of dtypes, not dtypes: NumPy's class hierarchy answers.
    assert jnp.issubdtype(jnp.floating, jnp.inexact) and jnp.issubdtype(np.integer, np.integer)
    assert jnp.issubdtype(np.number, np.generic) and jnp.issubdtype(np.signedinteger, np.integer)
    assert not jnp.issubdtype(np.floating, np.integer)
    assert not jnp.issubdtype(jnp.floating, jnp.float32)


def test_issubdtype_specific_types():
    assert jnp.issubdtype(jnp.bfloat16, jnp.bfloat16)
    assert not jnp.issubdtype(jnp.float32, jnp.bfloat16)
    assert not jnp.issubdtype(jnp.bfloat16, jnp.float32)
    assert jnp.issubdtype(jnp.float32, np.float32) and jnp.issubdtype("int8", jnp.int8)
    assert not jnp.issubdtype(None, jnp.floating)
    assert jnp.isdtype(jnp.float32, "real floating") and jnp.isdtype(BF16, "real floating")
    assert jnp.isdtype(jnp.int8, ("bool", "signed integer"))
    assert not jnp.isdtype(jnp.uint8, "signed integer") and jnp.isdtype(jnp.uint8, jnp.uint8)


def test_object_predicates():
    assert jnp.iscomplexobj(jnp.ones(2, jnp.complex64)) and jnp.iscomplexobj(1j)
    assert not jnp.iscomplexobj(jnp.ones(2)) and jnp.isrealobj(np.ones(2))
    assert jnp.isscalar(1.0) and jnp.isscalar(np.float32(1)) and jnp.isscalar(jnp.float32(1))
    assert not jnp.isscalar(jnp.ones(2)) and not jnp.isscalar([1.0])


# ---------------------------------------------------------------- isclose / allclose


A = np.array([1.0, nan, inf, -inf, inf, 1.0, 0.0, nan, 1e10, 1.0], np.float32)
B = np.array([1.0 + 1e-7, nan, inf, inf, 1.0, nan, 1e-9, 1.0, 1.00001e10, 1.1], np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
@pytest.mark.parametrize("equal_nan", [False, True])
def test_isclose_nan_inf(dtype, equal_nan):
    with np.errstate(over="ignore"):
        a, b = A.astype(dtype), B.astype(dtype)
    out = jnp.isclose(a, b, equal_nan=equal_nan)
    assert out.dtype == np.bool_
    expected = np.isclose(a.astype(np.float32), b.astype(np.float32), equal_nan=equal_nan)
    np.testing.assert_array_equal(np.asarray(out), expected)


def test_isclose_tolerances_and_ints():
    a = np.array([1.0, 2.0, 3.0], np.float32)
    b = np.array([1.05, 2.5, 3.0], np.float32)
    for rtol, atol in [(0.0, 0.1), (0.1, 0.0), (0.0, 0.0), (0.3, 0.0)]:
        np.testing.assert_array_equal(np.asarray(jnp.isclose(a, b, rtol=rtol, atol=atol)),
                                      np.isclose(a, b, rtol=rtol, atol=atol))
    ints = jnp.isclose(np.array([1, 2, 3]), np.array([1, 3, 3]))
    np.testing.assert_array_equal(np.asarray(ints), [True, False, True])
    assert jnp.isclose(np.int32(1), 1.0 + 1e-9).dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(jnp.isclose(a, 3.0)), [False, False, True])


def test_allclose():
    assert bool(jnp.allclose(A, A, equal_nan=True)) and not bool(jnp.allclose(A, A))
    assert bool(jnp.allclose(np.ones(3), np.ones(3) + 1e-9))
    assert not bool(jnp.allclose(np.ones(3), np.ones(3) + 1e-3))
    assert bool(jnp.allclose(np.ones((2, 3)), np.ones(3)))
    assert jnp.allclose(np.ones(3), np.ones(3)).shape == ()
    with pytest.raises(TypeError, match="isclose got incompatible shapes"):
        jnp.allclose(np.ones(3), np.ones(4))


def test_array_equal_equiv():
    assert bool(jnp.array_equal(np.arange(3), np.arange(3)))
    assert not bool(jnp.array_equal(np.arange(3), np.arange(4)))
    assert not bool(jnp.array_equal(np.ones((2, 3)), np.ones(3)))
    assert not bool(jnp.array_equal(A, A)) and bool(jnp.array_equal(A, A, equal_nan=True))
    assert bool(jnp.array_equal([1, 2], np.array([1.0, 2.0])))
    assert bool(jnp.array_equiv(np.ones((2, 3)), np.ones(3)))
    assert not bool(jnp.array_equiv(np.ones((2, 3)), np.ones(2)))
    assert not bool(jnp.array_equiv(np.ones(3), np.array([1.0, 2.0, 1.0])))


# ---------------------------------------------------------------- nan_to_num, diff, astype


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
def test_nan_to_num(dtype):
    x = np.array([nan, inf, -inf, 1.5, -2.0], dtype)
    fi = ml_dtypes.finfo(dtype)
    out = jnp.nan_to_num(x)
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(np.asarray(out).astype(np.float64),
                                  np.array([0.0, fi.max, fi.min, 1.5, -2.0], dtype)
                                  .astype(np.float64))
    out = jnp.nan_to_num(x, nan=7.0, posinf=9.0, neginf=-9.0)
    np.testing.assert_array_equal(np.asarray(out).astype(np.float64), [7, 9, -9, 1.5, -2])
    i = np.array([1, 2], np.int32)
    np.testing.assert_array_equal(np.asarray(jnp.nan_to_num(i)), i)


def test_nan_to_num_complex():
    x = np.array([complex(nan, inf), complex(1, -inf)], np.complex64)
    np.testing.assert_array_equal(np.asarray(jnp.nan_to_num(x)), np.nan_to_num(x))


def test_diff_prepend_append():
    x = np.array([[1, 4, 9, 16], [2, 3, 5, 8]], np.int32)
    for kw in [dict(), dict(n=2), dict(n=0), dict(n=5), dict(axis=0),
               dict(prepend=0), dict(append=np.array([[1], [2]])), dict(prepend=1, append=2),
               dict(prepend=np.zeros((1, 4), np.int32), axis=0), dict(n=2, prepend=3)]:
        out = jnp.diff(x, **kw)
        np.testing.assert_array_equal(np.asarray(out), np.diff(x, **kw), err_msg=str(kw))
    b = np.array([True, False, False, True])
    np.testing.assert_array_equal(np.asarray(jnp.diff(b)), np.diff(b))
    f = np.array([1.0, 2.5, 2.0], np.float32)
    np.testing.assert_allclose(np.asarray(jnp.diff(f, append=0.5)), np.diff(f, append=0.5))
    assert jnp.diff(f, prepend=np.int8(0)).dtype == np.float32


def test_ediff1d_append():
    x = np.array([[1, 2], [4, 7]], np.int32)
    np.testing.assert_array_equal(np.asarray(jnp.ediff1d(x, to_end=np.array([9, 9]),
                                                         to_begin=0)),
                                  np.ediff1d(x, to_end=[9, 9], to_begin=0))
    np.testing.assert_array_equal(np.asarray(jnp.append(x, np.array([5]))),
                                  np.append(x, [5]))
    np.testing.assert_array_equal(np.asarray(jnp.append(x, x, axis=1)), np.append(x, x, 1))


def test_astype_semantics():
    x = np.array([1.7, -1.7, nan, 3e9, -3e9, 0.5], np.float32)
    np.testing.assert_array_equal(np.asarray(jnp.astype(x, jnp.int32)),
                                  [1, -1, 0, 2 ** 31 - 1, -2 ** 31, 0])
    np.testing.assert_array_equal(np.asarray(jnp.ones(2).astype(bool)), [True, True])
    np.testing.assert_array_equal(np.asarray(jnp.astype(np.array([0.0, 0.1, nan]), "bool")),
                                  [False, True, True])
    assert jnp.astype(np.ones(2, np.int32), jnp.float64).dtype == np.float32
    assert not jnp.astype(jnp.asarray(2.0), jnp.float32).weak_type


BAD_CALLS = [
    (lambda: jnp.astype(jnp.ones(2), "not_a_dtype"), TypeError,
     r"astype: invalid dtype 'not_a_dtype'"),
    (lambda: jnp.astype(jnp.ones(2), object), TypeError, r"astype: invalid dtype"),
    (lambda: jnp.ones(2).astype(np.str_), TypeError, r"astype: invalid dtype"),
    (lambda: jnp.diff(jnp.ones(3), n=-1), ValueError,
     r"diff: order n must be non-negative but got -1"),
    (lambda: jnp.diff(jnp.ones(3), n=1.5), TypeError, r"diff: order n must be an integer"),
    (lambda: jnp.diff(jnp.ones(()), n=1), ValueError, r"diff: input must be at least one"),
    (lambda: jnp.diff(jnp.ones(3), axis=2), ValueError, r"diff: axis 2 is out of bounds"),
    (lambda: jnp.diff([1, 2]), TypeError, r"diff requires ndarray"),
    (lambda: jnp.isclose([1.0], [1.0]), TypeError, r"isclose requires ndarray"),
    (lambda: jnp.nan_to_num([1.0]), TypeError, r"nan_to_num requires ndarray"),
    (lambda: jnp.isdtype(jnp.float32, "reals"), ValueError, r"isdtype: unknown kind 'reals'"),
]


@pytest.mark.parametrize("call,exc,match", BAD_CALLS)
def test_bad_calls(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_python_types_mean_numpys_64_bit_types_in_finfo_iinfo_can_cast():
    # As in JAX (whatever jax_enable_x64 says): float is float64 here, int is int64.
    assert jnp.finfo(float).dtype == np.float64 and jnp.finfo(float).eps == np.finfo(float).eps
    assert jnp.iinfo(int).max == 2**63 - 1
    assert jnp.can_cast(int, float) and jnp.can_cast("int32", float)
    assert not jnp.can_cast(float, "float32") and not jnp.can_cast(int, "int32")
    assert jnp.finfo(jnp.float32).dtype == np.float32
