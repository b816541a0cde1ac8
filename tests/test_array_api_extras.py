"""vecdot, matvec, vecmat, rollaxis, unstack, iscomplex and isreal: what the op records cannot
express (keyword arguments, complex conjugation, negative axes, Python scalars, bad input),
checked against NumPy, and against JAX where it is installed (a test-only oracle).
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from tests.op_records.array_api_extras import RECORDS

C64 = np.complex64


def _crand(rng, shape):
    return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(C64)


def _close(actual, expected, tol=1e-5):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=tol, atol=tol)


# ---------------------------------------------------------------- vecdot


@pytest.mark.parametrize("axis,sa,sb", [
    (-1, (4, 3), (3,)), (0, (3, 4), (3, 1)), (1, (2, 3, 4), (1, 3, 4)),
    (-2, (2, 3, 4), (3, 4)), (-3, (3, 2, 4), (3, 1, 1)), (2, (1, 2, 5), (3, 1, 5)),
])
def test_vecdot_axis(axis, sa, sb):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=sa).astype(np.float32), rng.normal(size=sb).astype(np.float32)
    out = jnp.vecdot(a, b, axis=axis)
    assert out.shape == np.vecdot(a, b, axis=axis).shape
    _close(out, np.vecdot(a, b, axis=axis))


@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((2, 3), (3,)), ((4, 1, 3), (5, 3)),
                                   ((0, 3), (3,)), ((2, 0), (2, 0))])
def test_vecdot_conjugates_x1(sa, sb):
    rng = np.random.default_rng(1)
    a, b = _crand(rng, sa), _crand(rng, sb)
    out = jnp.vecdot(a, b)
    assert out.dtype == C64
    _close(out, np.vecdot(a, b))
    _close(out, np.sum(np.conj(a) * b, axis=-1))
    # Conjugation is of x1 only: swapping the operands conjugates the result.
    _close(jnp.vecdot(b, a), np.conj(np.vecdot(a, b)))


def test_vecdot_complex_with_real():
    rng = np.random.default_rng(2)
    a, b = _crand(rng, (2, 3)), rng.normal(size=3).astype(np.float32)
    _close(jnp.vecdot(a, b), np.vecdot(a, b))
    _close(jnp.vecdot(b, a), np.vecdot(b, a))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.float16, "bfloat16", np.bool_])
def test_vecdot_preferred_element_type(dtype):
    rng = np.random.default_rng(3)
    a = (rng.integers(0, 2, size=(2, 4)) * 100).astype(dtype)  # int8 100*100 overflows
    b = (rng.integers(0, 2, size=4) * 100).astype(dtype)
    out = jnp.vecdot(a, b, preferred_element_type=np.float32)
    assert out.dtype == np.float32 and not out.aval.weak_type
    _close(out, np.vecdot(a.astype(np.float32), b.astype(np.float32)))


def test_vecdot_preferred_element_type_int():
    a = np.full((3,), 100, np.int8)
    out = jnp.vecdot(a, a, preferred_element_type=np.int32)
    assert out.dtype == np.int32 and int(out) == 30000
    assert jnp.vecdot(a, a).dtype == np.int8


@pytest.mark.parametrize("precision", [None, "highest", lax.Precision.HIGHEST,
                                       ("highest", "default"), "bfloat16"])
def test_vecdot_precision(precision):
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(2, 5)).astype(np.float32), rng.normal(size=5).astype(np.float32)
    tol = 2e-2 if precision == "bfloat16" else 1e-5
    _close(jnp.vecdot(a, b, precision=precision), np.vecdot(a, b), tol)
    jaxpr = str(ember.make_jaxpr(lambda x, y: jnp.vecdot(x, y, precision=precision))(a, b))
    assert "dot_general" in jaxpr


def test_vecdot_bad_precision():
    with pytest.raises(ValueError, match="precision"):
        jnp.vecdot(jnp.ones(3), jnp.ones(3), precision="bogus")


# ---------------------------------------------------------------- matvec / vecmat


@pytest.mark.parametrize("sa,sb", [((2, 3), (3,)), ((5, 2, 3), (3,)), ((2, 3), (4, 3)),
                                   ((1, 2, 3), (4, 3)), ((0, 2, 3), (1, 3)), ((2, 0), (0,))])
def test_matvec_complex_not_conjugated(sa, sb):
    rng = np.random.default_rng(5)
    a, b = _crand(rng, sa), _crand(rng, sb)
    out = jnp.matvec(a, b)
    assert out.dtype == C64 and out.shape == np.matvec(a, b).shape
    _close(out, np.matvec(a, b))
    _close(out, np.einsum("...ij,...j->...i", a, b))


@pytest.mark.parametrize("sa,sb", [((2,), (2, 3)), ((4, 2), (2, 3)), ((2,), (4, 2, 3)),
                                   ((4, 2), (5, 1, 2, 3)), ((0,), (0, 3)), ((3,), (3, 0))])
def test_vecmat_conjugates_x1(sa, sb):
    rng = np.random.default_rng(6)
    a, b = _crand(rng, sa), _crand(rng, sb)
    out = jnp.vecmat(a, b)
    assert out.dtype == C64 and out.shape == np.vecmat(a, b).shape
    _close(out, np.vecmat(a, b))
    _close(out, np.einsum("...i,...ij->...j", np.conj(a), b))


def test_matvec_vecmat_promotion():
    a = np.arange(6, dtype=np.int8).reshape(2, 3)
    out = jnp.matvec(a, np.ones(3, np.float32))
    assert out.dtype == np.float32
    _close(out, [3.0, 12.0])
    out = jnp.vecmat(np.ones(2, np.uint8), a)
    assert out.dtype == np.int16
    np.testing.assert_array_equal(out, [3, 5, 7])


# ---------------------------------------------------------------- rollaxis / unstack


@pytest.mark.parametrize("axis", range(-4, 4))
@pytest.mark.parametrize("start", range(-4, 5))
def test_rollaxis_all_axes(axis, start):
    x = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5).astype(np.float32)
    out = jnp.rollaxis(x, axis, start)
    expected = np.rollaxis(x, axis, start)
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)


def test_rollaxis_keywords_and_numpy_ints():
    x = np.zeros((2, 3, 4))
    assert jnp.rollaxis(x, axis=2, start=1).shape == (2, 4, 3)
    assert jnp.rollaxis(x, np.int64(-1), start=np.int32(0)).shape == (4, 2, 3)


@pytest.mark.parametrize("axis", range(-3, 3))
def test_unstack_all_axes(axis):
    x = np.arange(24).reshape(2, 3, 4).astype(np.int32)
    out = jnp.unstack(x, axis=axis)
    expected = np.unstack(x, axis=axis)
    assert isinstance(out, tuple) and len(out) == len(expected)
    for o, e in zip(out, expected):
        assert o.shape == e.shape and o.dtype == e.dtype
        np.testing.assert_array_equal(o, e)


def test_unstack_empty_axis():
    assert jnp.unstack(jnp.ones((0, 3))) == ()
    assert [t.shape for t in jnp.unstack(jnp.ones((2, 0)))] == [(0,), (0,)]


def test_unstack_vmap_jit_grad():
    x = jnp.asarray(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    # vmap over axis 1: each example (3,) unstacks into 3 scalars, stacked to (4,) each.
    outs = ember.vmap(lambda v: jnp.unstack(v), in_axes=1)(x)
    assert len(outs) == 3
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(o, np.asarray(x)[i])
    outs = ember.jit(lambda v: jnp.unstack(v, axis=-1))(x)
    np.testing.assert_array_equal(outs[2], np.asarray(x)[:, 2])
    g = ember.grad(lambda v: jnp.unstack(v, axis=1)[1].sum() * 2.0)(x)
    expected = np.zeros((3, 4), np.float32)
    expected[:, 1] = 2.0
    np.testing.assert_array_equal(g, expected)


# ---------------------------------------------------------------- iscomplex / isreal


@pytest.mark.parametrize("x", [1.0, 3, True, 1j, 2 + 0j, np.float64(2.0), np.complex64(1j),
                               np.array([1 + 0j, 2j, 0j, -1 - 1j]), np.arange(4),
                               np.ones((2, 0), np.float32)])
def test_iscomplex_isreal(x):
    np.testing.assert_array_equal(jnp.iscomplex(x), np.iscomplex(x))
    np.testing.assert_array_equal(jnp.isreal(x), np.isreal(x))
    assert jnp.iscomplex(x).dtype == np.bool_ and jnp.isreal(x).dtype == np.bool_
    assert jnp.iscomplex(x).shape == np.shape(x)


def test_iscomplex_weak_types():
    # As in JAX: a Python number gives a weakly typed bool; arrays and Python bools do not.
    assert jnp.iscomplex(1.0).aval.weak_type and jnp.isreal(1j).aval.weak_type
    assert not jnp.isreal(True).aval.weak_type
    assert not jnp.isreal(jnp.ones(3)).aval.weak_type


def test_iscomplex_traced():
    z = jnp.asarray(np.array([1 + 1j, 2 + 0j], C64))
    np.testing.assert_array_equal(ember.jit(jnp.iscomplex)(z), [True, False])
    np.testing.assert_array_equal(ember.vmap(jnp.isreal)(z), [False, True])


# ---------------------------------------------------------------- autodiff through complex


def test_vecdot_complex_grad():
    rng = np.random.default_rng(7)
    ar, ai, b = (rng.normal(size=3).astype(np.float32) for _ in range(3))

    def f(re, im):
        return jnp.real(jnp.vecdot(lax.complex(re, im), b))  # sum(re * b)

    gr, gi = ember.grad(f, argnums=(0, 1))(ar, ai)
    _close(gr, b)
    _close(gi, np.zeros(3))

    def h(re, im):
        return jnp.imag(jnp.vecdot(lax.complex(re, im), b))  # -sum(im * b)

    _close(ember.grad(h, argnums=1)(ar, ai), -b)


# ---------------------------------------------------------------- bad input

_ERRORS = [
    # (callable, error class, message fragment)
    (lambda: jnp.vecdot(jnp.ones(3), jnp.ones(4)), ValueError, "vecdot"),
    (lambda: jnp.vecdot(jnp.ones((3, 2)), jnp.ones(3)), ValueError, "vecdot"),
    (lambda: jnp.vecdot(jnp.ones((2, 3)), jnp.ones((4, 3))), ValueError, "vecdot"),
    (lambda: jnp.vecdot(jnp.ones((2, 3)), jnp.ones(3), axis=2), IndexError, "vecdot"),
    (lambda: jnp.vecdot(jnp.ones(3), 2.0), IndexError, "vecdot"),
    (lambda: jnp.vecdot([1.0, 2.0], jnp.ones(2)), TypeError, "vecdot"),
    (lambda: jnp.vecdot(jnp.ones(3), jnp.ones(3), axis=1.0), TypeError, "vecdot"),
    (lambda: jnp.matvec(jnp.ones((2, 3)), jnp.ones(4)), ValueError, "matvec"),
    (lambda: jnp.matvec(jnp.ones(3), jnp.ones(3)), ValueError, "matvec"),
    (lambda: jnp.matvec(jnp.ones((2, 3)), 1.0), ValueError, "matvec"),
    (lambda: jnp.matvec(jnp.ones((5, 2, 3)), jnp.ones((4, 3))), ValueError, "matvec"),
    (lambda: jnp.matvec(jnp.ones((2, 3)), [1.0, 2.0, 3.0]), TypeError, "matvec"),
    (lambda: jnp.vecmat(jnp.ones(2), jnp.ones((3, 4))), ValueError, "vecmat"),
    (lambda: jnp.vecmat(jnp.ones(()), jnp.ones((3, 4))), ValueError, "vecmat"),
    (lambda: jnp.vecmat(jnp.ones(2), jnp.ones(2)), ValueError, "vecmat"),
    (lambda: jnp.vecmat(jnp.ones((3, 2)), jnp.ones((4, 2, 3))), ValueError, "vecmat"),
    (lambda: jnp.rollaxis(jnp.ones((2, 3, 4)), 3), ValueError, "rollaxis"),
    (lambda: jnp.rollaxis(jnp.ones((2, 3, 4)), -4), ValueError, "rollaxis"),
    (lambda: jnp.rollaxis(jnp.ones((2, 3, 4)), 0, 4), ValueError, "rollaxis"),
    (lambda: jnp.rollaxis(jnp.ones((2, 3, 4)), 1, -4), ValueError, "rollaxis"),
    (lambda: jnp.rollaxis(jnp.ones((2, 3, 4)), 1, 1.0), TypeError, "rollaxis"),
    (lambda: jnp.rollaxis(jnp.ones((2, 3, 4)), 1.0, 1), TypeError, "rollaxis"),
    (lambda: jnp.rollaxis(2.0, 0), ValueError, "rollaxis"),
    (lambda: jnp.rollaxis([1, 2], 0), TypeError, "rollaxis"),
    (lambda: jnp.unstack(jnp.ones(())), ValueError, "unstack"),
    (lambda: jnp.unstack(jnp.ones((2, 3)), axis=2), ValueError, "unstack"),
    (lambda: jnp.unstack(jnp.ones((2, 3)), axis=-3), ValueError, "unstack"),
    (lambda: jnp.unstack(jnp.ones((2, 3)), axis=1.0), TypeError, "unstack"),
    (lambda: jnp.unstack([1, 2]), TypeError, "unstack"),
    (lambda: jnp.iscomplex([1.0]), TypeError, "iscomplex"),
    (lambda: jnp.isreal((1.0, 2.0)), TypeError, "isreal"),
]


@pytest.mark.parametrize("i", range(len(_ERRORS)))
def test_bad_input(i):
    fn, cls, name = _ERRORS[i]
    with pytest.raises(cls, match=name):
        fn()


def test_rollaxis_start_must_be_concrete():
    with pytest.raises(Exception, match="start"):
        ember.jit(lambda x, s: jnp.rollaxis(x, 0, s))(jnp.ones((2, 3)), 1)


# ---------------------------------------------------------------- JAX oracle


@pytest.fixture(scope="module")
def oracle():
    pytest.importorskip("jax")
    from tests import test_jax_oracle

    return test_jax_oracle


@pytest.mark.parametrize("i", range(len(_ERRORS)))
def test_bad_input_error_class_matches_jax(i, oracle):
    """Where JAX raises, ember raises the same class (or a subclass)."""
    fn = _ERRORS[i][0]
    j_fn = oracle.jax_counterpart(fn)
    assert oracle.compare_calls(fn, j_fn, [], []) == []


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: r.name)
def test_records_match_jax_every_shape(rec, oracle):
    """The record oracle runs a few shapes per record; here every dtype x every shape."""
    for dtype in rec.dtypes:
        for shapes in rec.shapes:
            diffs = oracle.record_diffs(rec, dtype, shapes)
            assert not diffs, (np.dtype(dtype).name, shapes, diffs)


_KW_CASES = [
    lambda: jnp.vecdot(jnp.ones((3, 2)), jnp.arange(3.0), axis=0),
    lambda: jnp.vecdot(np.ones((2, 3), np.int8), np.ones(3, np.int8),
                       preferred_element_type=np.float32),
    lambda: jnp.vecdot(np.ones(3, np.float32), np.ones(3, np.float32),
                       preferred_element_type=np.float16),
    lambda: jnp.vecdot(np.ones(3), np.ones(3), precision="highest"),
    lambda: jnp.vecdot(np.array([1 + 2j, 3j], C64), np.array([2 - 1j, 1 + 1j], C64)),
    lambda: jnp.vecmat(np.array([1 + 2j, 3j], C64), np.array([[1j], [2.0]], C64)),
    lambda: jnp.matvec(np.array([[1 + 2j, 3j]], C64), np.array([1j, 2.0], C64)),
    lambda: jnp.vecdot(jnp.broadcast_to(jnp.asarray(2.0), (3,)), jnp.ones(3, np.int8)),
    lambda: jnp.vecmat(jnp.broadcast_to(jnp.asarray(2.0), (2,)),
                       jnp.broadcast_to(jnp.asarray(1.0), (2, 3))),
    lambda: jnp.rollaxis(jnp.ones((2, 3, 4)), -1, -2),
    lambda: jnp.rollaxis(jnp.broadcast_to(jnp.asarray(2.0), (2, 3)), 1),
    lambda: jnp.unstack(jnp.ones((2, 3)), axis=-1),
    lambda: jnp.unstack(jnp.broadcast_to(jnp.asarray(2.0), (2, 3))),
    lambda: jnp.unstack(jnp.ones((0, 3))),
    lambda: jnp.iscomplex(1.0),
    lambda: jnp.isreal(1j),
    lambda: jnp.isreal(True),
    lambda: jnp.iscomplex(np.complex64(2)),
    lambda: jnp.isreal(np.array([1 + 0j, 2j])),
]


@pytest.mark.parametrize("i", range(len(_KW_CASES)))
def test_keyword_and_scalar_cases_match_jax(i, oracle):
    fn = _KW_CASES[i]
    assert oracle.compare_calls(fn, oracle.jax_counterpart(fn), [], []) == []
