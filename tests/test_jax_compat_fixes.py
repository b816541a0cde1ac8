"""Regression tests for differences from JAX: ``x.at[i]`` update shapes, weak types of
``unique``, boolean ``unravel_index``, no floating-point warnings in eager mode, and the
primals ``custom_jvp`` rules see under ``grad`` of a Python scalar."""

import warnings

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax


def _sig(x):
    """(dtype name, weak_type, shape) of an ember or JAX array."""
    return (np.dtype(x.dtype).name, bool(x.weak_type), tuple(x.shape))


# ---------------------------------------------------------------- 1. x.at[idx] update shapes

# (index, update shape): JAX broadcasts the update to x[idx].shape with NumPy's broadcast_to,
# so extra leading dims are rejected even when they are 1.
_AT_REJECTED = [
    (1, (1,)), (1, (1, 1)), (slice(1, 3), (1, 2)), (slice(1, 3), (1, 1, 2)),
    (slice(1, 2), (1, 1)), (slice(None), (1, 5)), (Ellipsis, (1, 5)),
    (slice(1, 3), (2, 1)), (slice(1, 3), (3,)), ((1, None), (1, 1)),
]
_AT_ACCEPTED = [
    (1, ()), (slice(1, 3), ()), (slice(1, 3), (1,)), (slice(1, 3), (2,)),
    ((1, None), (1,)), ((1, None), ()), (slice(5, None), (3,)), (slice(5, None), (1, 1)),
]


@pytest.mark.parametrize("idx,vshape", _AT_REJECTED)
def test_at_set_rejects_extra_leading_dims(idx, vshape):
    x = jnp.zeros(5)
    with pytest.raises(ValueError, match=r"at\[\.\.\.\]\.set"):
        x.at[idx].set(jnp.ones(vshape))


@pytest.mark.parametrize("idx,vshape", _AT_ACCEPTED)
def test_at_set_accepts_broadcastable_updates(idx, vshape):
    out = jnp.zeros(5).at[idx].set(jnp.ones(vshape))
    expected = np.zeros(5)
    expected[idx] = 1.0
    np.testing.assert_array_equal(np.asarray(out), expected)


def test_at_update_shape_rules_all_methods_and_transforms():
    x = jnp.zeros(5)
    v11 = jnp.ones((1, 1))
    for name in ("set", "add", "multiply", "subtract", "divide", "power", "min", "max"):
        with pytest.raises(ValueError, match=name):
            getattr(x.at[1], name)(v11)
    with pytest.raises(ValueError):
        x.at[1].set(np.ones((1, 1)))
    with pytest.raises(ValueError):
        x.at[1].set([[1.0]])
    with pytest.raises(ValueError):
        ember.jit(lambda x, v: x.at[1:3].set(v))(x, jnp.ones((1, 2)))
    with pytest.raises(ValueError):
        ember.vmap(lambda x, v: x.at[1].set(v))(jnp.zeros((3, 5)), jnp.ones((3, 1)))
    # Newaxis dims are part of the indexed shape, as in JAX.
    y = jnp.zeros((2, 3))
    np.testing.assert_array_equal(np.asarray(y.at[None, 0].set(jnp.ones((1, 3)))),
                                  [[1, 1, 1], [0, 0, 0]])
    with pytest.raises(ValueError):
        y.at[None, 0].set(jnp.ones((1, 1, 3)))
    # Nothing indexed: returned unchanged whatever the update's shape (JAX skips the check).
    np.testing.assert_array_equal(np.asarray(x.at[jnp.array([], jnp.int32)].set(jnp.ones(2))),
                                  np.zeros(5))
    np.testing.assert_array_equal(
        np.asarray(ember.vmap(lambda v: jnp.zeros(5).at[1:3].set(v))(jnp.ones((3, 2)))),
        np.tile([0, 1, 1, 0, 0], (3, 1)))


def test_at_update_shapes_match_jax():
    jax = pytest.importorskip("jax")
    jjnp = jax.numpy
    for idx, vshape in _AT_REJECTED + _AT_ACCEPTED:
        try:
            want = np.asarray(jjnp.zeros(5).at[idx].set(jjnp.ones(vshape)))
        except ValueError:
            want = None
        if want is None:
            with pytest.raises(ValueError):
                jnp.zeros(5).at[idx].set(jnp.ones(vshape))
        else:
            got = jnp.zeros(5).at[idx].set(jnp.ones(vshape))
            np.testing.assert_array_equal(np.asarray(got), want)


# ---------------------------------------------------------------- 2. unique keeps weak types


def _weak_vec(value, n):
    return lax.broadcast(jnp.asarray(value), (n,))


def test_unique_keeps_weak_type():
    w = jnp.asarray(3.0)
    assert _sig(jnp.unique(w)) == ("float32", True, (1,))
    assert _sig(jnp.unique(3.0)) == ("float32", True, (1,))
    assert _sig(jnp.unique(_weak_vec(2, 3))) == ("int32", True, (1,))
    vals, idx, inv, cnt = jnp.unique(w, return_index=True, return_inverse=True,
                                     return_counts=True)
    assert _sig(vals) == ("float32", True, (1,))
    assert [_sig(a)[:2] for a in (idx, inv, cnt)] == [("int32", False)] * 3
    assert _sig(jnp.unique(w, size=3)) == ("float32", True, (3,))
    assert _sig(jnp.unique(_weak_vec(2.0, 4), axis=0)) == ("float32", True, (1,))
    assert _sig(ember.jit(lambda x: jnp.unique(x, size=2))(_weak_vec(2.0, 4)))[:2] == \
        ("float32", True)
    # A fill value merged into the values makes them strong (JAX's ``where``) ...
    assert _sig(jnp.unique(w, size=3, fill_value=1)) == ("float32", False, (3,))
    assert _sig(jnp.unique_values(_weak_vec(2.0, 4), size=3, fill_value=1))[:2] == \
        ("float32", False)
    # ... but not when there is nothing to merge it with (JAX's ``full_like``).
    assert _sig(jnp.unique(_weak_vec(2.0, 4)[:0], size=3, fill_value=1))[:2] == \
        ("float32", True)
    assert _sig(jnp.unique(_weak_vec(2.0, 4), size=0, fill_value=1))[:2] == ("float32", True)
    # Strong inputs stay strong.
    assert _sig(jnp.unique(jnp.array([3.0, 1.0]))) == ("float32", False, (2,))
    # Set operations built on unique.
    assert _sig(jnp.union1d(w, _weak_vec(2.0, 4))) == ("float32", True, (2,))
    assert _sig(jnp.setdiff1d(_weak_vec(2.0, 4), w)) == ("float32", True, (1,))
    assert _sig(jnp.setxor1d(w, _weak_vec(2.0, 4))) == ("float32", True, (2,))
    assert _sig(jnp.intersect1d(w, _weak_vec(3.0, 4))) == ("float32", True, (1,))


def test_unique_and_set_ops_weak_types_match_jax():
    jax = pytest.importorskip("jax")
    jjnp, jlax = jax.numpy, jax.lax
    cases = [
        lambda np_, l: np_.unique(np_.asarray(3.0)),
        lambda np_, l: np_.unique(l.broadcast(np_.asarray(2.0), (4,)), size=3,
                                  return_index=True, return_inverse=True, return_counts=True),
        lambda np_, l: np_.unique(l.broadcast(np_.asarray(2.0), (4,)), size=3, fill_value=1),
        lambda np_, l: np_.unique(l.broadcast(np_.asarray(2.0), (4,))[:0], size=2,
                                  fill_value=1),
        lambda np_, l: np_.union1d(np_.asarray(3.0), l.broadcast(np_.asarray(2.0), (4,))),
    ]
    for case in cases:
        want = [_sig(a) for a in jax.tree_util.tree_leaves(case(jjnp, jlax))]
        got = [_sig(a) for a in ember.tree_util.tree_leaves(case(jnp, lax))]
        assert got == want


# ---------------------------------------------------------------- 3. unravel_index of booleans


def test_unravel_index_accepts_booleans():
    out = jnp.unravel_index(True, (3, 4))
    assert [_sig(a) for a in out] == [("int32", True, ())] * 2
    assert [int(a) for a in out] == [0, 1]
    out = jnp.unravel_index(jnp.array([True, False]), (3, 4))
    assert [_sig(a) for a in out] == [("int32", True, (2,))] * 2
    np.testing.assert_array_equal(np.asarray(out[1]), [1, 0])
    out = ember.jit(lambda i: jnp.unravel_index(i, (3, 4)))(np.array([True, False]))
    assert [_sig(a) for a in out] == [("int32", True, (2,))] * 2
    np.testing.assert_array_equal(np.asarray(out[1]), [1, 0])
    out = ember.vmap(lambda i: jnp.unravel_index(i, (3, 4)))(jnp.array([True, False]))
    np.testing.assert_array_equal(np.asarray(out[1]), [1, 0])
    assert jnp.unravel_index(jnp.array([True, False]), ()) == ()


def test_unravel_index_result_dtypes_follow_jax_promotion():
    assert _sig(jnp.unravel_index(5, (3, 4))[0]) == ("int32", True, ())
    assert _sig(jnp.unravel_index(jnp.asarray(5), (3, 4))[0]) == ("int32", True, ())
    assert _sig(jnp.unravel_index(jnp.array([5, 7], jnp.int8), (3, 4))[1]) == \
        ("int8", False, (2,))
    assert _sig(jnp.unravel_index(jnp.array([5], jnp.uint8), (3, 4))[1]) == \
        ("uint8", False, (1,))
    out = jnp.unravel_index(jnp.array([5, 13, -1, -13]), (3, 4))
    assert _sig(out[0]) == ("int32", False, (4,))
    np.testing.assert_array_equal(np.asarray(out[0]), [1, 2, 2, 0])
    np.testing.assert_array_equal(np.asarray(out[1]), [1, 3, 3, 0])
    with pytest.raises(TypeError, match="unravel_index"):
        jnp.unravel_index(jnp.array([1.0]), (3, 4))


def test_unravel_index_matches_jax():
    jax = pytest.importorskip("jax")
    jjnp = jax.numpy
    for idx in (True, np.array([True, False]), 5, np.array([5, 13, -1, -13], np.int32),
                np.array([3, 200], np.uint8)):
        for shape in ((3, 4), (1,)):  # (no zero-size shapes: JAX's results are garbage)
            want = jjnp.unravel_index(idx, shape)
            got = jnp.unravel_index(idx, shape)
            assert [_sig(a) for a in got] == [_sig(a) for a in want], (idx, shape)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


# ---------------------------------------------------------------- 4. no floating-point warnings

_F16 = np.float16
_WARNING_FREE = {
    "f16 exp overflow": lambda: jnp.exp(jnp.array([20.0], _F16)) * jnp.array([100.0], _F16),
    "f16 lax.exp": lambda: lax.exp(jnp.array([20.0], _F16)),
    "f16 cumsum": lambda: jnp.cumsum(jnp.full(10, 60000.0, _F16)),
    "f16 dot": lambda: jnp.dot(jnp.full(3, 60000.0, _F16), jnp.full(3, 60000.0, _F16)),
    "f16 vmap": lambda: ember.vmap(jnp.exp)(jnp.full(3, 20.0, _F16)),
    "f16 grad": lambda: ember.grad(lambda x: (jnp.exp(x) * 100).sum())(jnp.full(3, 20.0, _F16)),
    "f16 linspace": lambda: jnp.linspace(0, 1e6, 3, dtype=_F16),
    "f16 arange": lambda: jnp.arange(0, 1e6, 3e5, dtype=_F16),
    "bf16 exp": lambda: jnp.exp(jnp.array([100.0], jnp.bfloat16)),
    "bf16 log0": lambda: jnp.log(jnp.array([0.0], jnp.bfloat16)),
    "bf16 0/0": lambda: jnp.array([0.0], jnp.bfloat16) / jnp.array([0.0], jnp.bfloat16),
    "f32 log0": lambda: jnp.log(0.0),
    "f32 lax.log0": lambda: lax.log(jnp.zeros(2)),
    "f32 0/0": lambda: jnp.asarray(0.0) / 0.0,
    "f32 lax 0/0": lambda: lax.div(jnp.zeros(2), jnp.zeros(2)),
    "f32 overflow": lambda: jnp.float32(1e38) * 10,
    "f32 sqrt-1": lambda: jnp.sqrt(-1.0),
    "f32 inf-inf": lambda: jnp.array([np.inf]) - np.inf,
    "f32 to int": lambda: jnp.array([np.nan, np.inf]).astype(jnp.int32),
}


@pytest.mark.parametrize("name", list(_WARNING_FREE))
def test_eager_math_never_warns(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):  # the first call takes the ordinary path, later ones the fast path
            _WARNING_FREE[name]()


def test_numpy_error_state_is_restored():
    before = np.geterr()
    jnp.log(jnp.zeros(2))
    lax.exp(jnp.array([20.0], _F16))
    with pytest.raises(TypeError):
        lax.add(jnp.zeros(2), jnp.zeros(2, jnp.int32))
    assert np.geterr() == before
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        np.float32(1e38) * np.float32(10)  # the user's own NumPy code still reports


# ---------------------------------------------------------------- 5. custom_jvp primals under grad


def _recording_custom_jvp(seen):
    @ember.custom_jvp
    def f(x):
        return jnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        seen.append((np.dtype(x.dtype).name, jnp.result_type(x, jnp.float16).name,
                     jnp.finfo(x.dtype).bits))
        return jnp.sin(x), jnp.cos(x) * t

    return f


def test_custom_jvp_primal_of_python_scalar_has_a_dtype():
    seen = []
    f = _recording_custom_jvp(seen)
    g = ember.grad(f)(1.0)
    assert _sig(g) == ("float32", True, ())
    np.testing.assert_allclose(float(g), np.cos(1.0), rtol=1e-6)
    g = ember.grad(f)(np.float64(1.0))  # canonicalized to float32 (strong), as in JAX
    assert _sig(g) == ("float32", False, ())
    assert seen == [("float32", "float16", 32), ("float32", "float32", 32)]

    @ember.custom_vjp
    def h(x):
        return jnp.sin(x)

    h.defvjp(lambda x: (jnp.sin(x), x), lambda x, ct: ((jnp.cos(x) * ct).astype(x.dtype),))
    assert _sig(ember.grad(h)(1.0)) == ("float32", False, ())  # (astype: strong, as in JAX)


def test_custom_jvp_primal_matches_jax():
    jax = pytest.importorskip("jax")
    seen_jax, seen = [], []

    @jax.custom_jvp
    def fj(x):
        return jax.numpy.sin(x)

    @fj.defjvp
    def fj_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        seen_jax.append((np.dtype(x.dtype).name, jax.numpy.result_type(x, np.float16).name,
                         jax.numpy.finfo(x.dtype).bits))
        return jax.numpy.sin(x), jax.numpy.cos(x) * t

    f = _recording_custom_jvp(seen)
    for x in (1.0, np.float64(1.0), np.float32(1.0)):
        assert _sig(ember.grad(f)(x)) == _sig(jax.grad(fj)(x))
        assert _sig(ember.value_and_grad(f)(x)[0]) == _sig(jax.value_and_grad(fj)(x)[0])
    assert seen == seen_jax


# ---------------------------------------------------------------- weak types of derivatives
# (JAX's rules convert pow's operands to the result dtype, and pair a complex cotangent with
# a NumPy zero: these derivatives are not weakly typed even at weakly typed inputs.)


def test_derivatives_of_pow_real_and_imag_are_not_weakly_typed():
    cases = [
        (ember.grad(lambda x: x ** 2.5)(2.0), ("float32", False, ()), 2.5 * 2.0 ** 1.5),
        (ember.grad(lambda x: x ** 0.0)(2.0), ("float32", False, ()), 0.0),
        (ember.jvp(lambda x: x ** 2.5, (2.0,), (1.0,))[1], ("float32", False, ()),
         2.5 * 2.0 ** 1.5),
        (ember.grad(lambda y: 2.0 ** y)(2.0), ("float32", True, ()), 4 * np.log(2.0)),
        (ember.grad(lambda x: x ** 2)(2.0), ("float32", True, ()), 4.0),
        (ember.grad(lambda z: jnp.real(z))(1 + 1j), ("complex64", False, ()), 1.0),
        (ember.grad(lambda z: jnp.imag(z))(1 + 1j), ("complex64", False, ()), -1j),
        (ember.grad(lambda z: jnp.real(jnp.conj(z)))(1 + 1j), ("complex64", False, ()), 1.0),
    ]
    for got, sig, want in cases:
        assert _sig(got) == sig
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_dynamic_slice_start_indices_of_different_integer_types_are_refused():
    x = jnp.zeros((4, 5))
    for fn, args in ((lax.dynamic_slice, ((2, 2),)),
                     (lambda o, s: lax.dynamic_update_slice(o, jnp.ones((2, 2)), s), ())):
        with pytest.raises(TypeError, match="integers of the same type, got: int16, int32"):
            fn(x, (jnp.int16(1), jnp.int32(2)), *args)
        with pytest.raises(TypeError, match="same type"):
            fn(x, (np.int8(1), jnp.int32(2)), *args)
        # (JAX also refuses a Python int beside an int16 index; ember's own callers mix
        # them, so Python ints take any integer type here)
        for starts in ((jnp.int16(1), np.int16(2)), (1, 2), (jnp.int32(1), 2)):
            assert fn(x, starts, *args).shape == ((2, 2) if args else (4, 5))


def test_shape_dtype_struct_records_a_sharding():
    plain = ember.ShapeDtypeStruct((2, 3), jnp.float32)
    assert plain.sharding is None and repr(plain) == "ShapeDtypeStruct(shape=(2, 3), dtype=float32)"
    sharding = ember.sharding.SingleDeviceSharding(ember.devices()[0])
    placed = ember.ShapeDtypeStruct((2, 3), jnp.float32, sharding=sharding)
    assert placed.sharding is sharding and placed != plain and "sharding=" in repr(placed)
    assert placed.update(shape=(4,)).sharding is sharding
    assert placed.update(sharding=None) == ember.ShapeDtypeStruct((2, 3), jnp.float32)
    assert ember.eval_shape(lambda x: x * 2, placed).shape == (2, 3)


def test_lu_returns_a_list_and_scale_and_translate_takes_array_dims():
    out = lax.linalg.lu(jnp.array([[1.0, 2.0], [3.0, 4.0]]))
    assert type(out) is list and len(out) == 3
    image = jnp.arange(16.0).reshape(4, 4)
    args = ((2, 2), jnp.array([0.5, 0.5]), jnp.zeros(2), "linear")
    by_array = ember.image.scale_and_translate(image, args[0], jnp.array([0, 1]), *args[1:])
    by_tuple = ember.image.scale_and_translate(image, args[0], (0, 1), *args[1:])
    np.testing.assert_array_equal(by_array, by_tuple)


def test_discrete_distributions_are_not_weakly_typed_like_jax():
    # (JAX's distributions compute with constants in the argument dtype: a Python float
    # parameter does not make the result weakly typed; poisson.logpmf stays weak in both)
    st = ember.scipy.stats
    k = jnp.array([1, 2])
    calls = [st.bernoulli.ppf(jnp.array([0.0, 0.5, 1.0]), 0.3), st.bernoulli.pmf(k - 1, 0.3),
             st.bernoulli.logpmf(k - 1, 0.3), st.bernoulli.cdf(k - 1, 0.3),
             st.geom.pmf(k, 0.3), st.geom.logpmf(k, 0.3), st.poisson.cdf(k, 2.0),
             st.nbinom.logpmf(k, 5, 0.3), st.betabinom.logpmf(k, 5, 2.0, 3.0)]
    for out in calls:
        assert _sig(out)[:2] == ("float32", False)
    assert _sig(st.poisson.logpmf(k, 2.0))[:2] == ("float32", True)
    np.testing.assert_allclose(st.geom.pmf(k, 0.3), [0.3, 0.21], rtol=1e-6)
    np.testing.assert_allclose(st.bernoulli.ppf(jnp.array([0.0, 0.5, 1.0]), 0.3), [0, 0, 1])
