"""Array creation and shape manipulation as JAX has them (differences found by a differential
hunt against JAX 0.10; expected values are NumPy's, closed forms, or JAX's written as literals).
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp


def _weak(x) -> bool:
    return x.aval.weak_type


# ---------------------------------------------------------------- array / copy


@pytest.mark.parametrize("order", ["C", "F", "A"])
def test_array_orders_other_than_k_are_not_implemented(order):
    # JAX: NotImplementedError("Only implemented for order='K'"), for copy too.
    with pytest.raises(NotImplementedError, match="order"):
        jnp.array([1, 2], order=order)
    with pytest.raises(NotImplementedError, match="order"):
        jnp.asarray([1, 2], order=order)
    with pytest.raises(NotImplementedError, match="order"):
        jnp.copy(jnp.ones(2), order=order)
    np.testing.assert_array_equal(jnp.array([1, 2], order="K"), [1, 2])


# ---------------------------------------------------------------- geomspace


def test_geomspace_zero_or_opposite_signs_give_nans_as_jax():
    # JAX's formula divides by sign(start): no error, NaNs everywhere.
    for start, stop in [(0, 1000.0), (-1, 1000.0)]:
        for s in (start, jnp.array(float(start))):
            out = jnp.geomspace(s, stop, 4)
            assert out.shape == (4,) and out.dtype == np.float32
            assert np.isnan(np.asarray(out)).all()


def test_geomspace_complex_bounds():
    out = jnp.geomspace(1j, 1000j, 4)
    assert out.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(out), np.geomspace(1j, 1000j, 4), rtol=1e-5)


def test_geomspace_array_bounds_keep_the_endpoints():
    # (The traced formula used to lose the endpoints: 1000.0001, or 999 for an integer dtype.)
    out = jnp.geomspace(jnp.array(2.0), 1000.0, 7)
    assert np.asarray(out)[[0, -1]].tolist() == [2.0, 1000.0]  # as JAX
    out = jnp.geomspace(jnp.array(1), jnp.array(1000), 4, dtype=jnp.int32)
    np.testing.assert_array_equal(out, [1, 10, 100, 1000])
    out = ember.jit(lambda a, b: jnp.geomspace(a, b, 3, axis=-1))(jnp.ones(2),
                                                                  jnp.array([4.0, 9.0]))
    np.testing.assert_allclose(np.asarray(out), [[1, 2, 4], [1, 3, 9]], rtol=1e-6)


# ---------------------------------------------------------------- eye / tri / diagonal


def test_eye_and_tri_take_a_traced_k():
    for k in (-1, 0, 2):
        np.testing.assert_array_equal(ember.jit(lambda k: jnp.eye(3, 4, k=k))(k),
                                      np.eye(3, 4, k, dtype=np.float32))
        np.testing.assert_array_equal(ember.jit(lambda k: jnp.tri(3, 4, k=k))(k),
                                      np.tri(3, 4, k, dtype=np.float32))
    out = ember.vmap(lambda k: jnp.eye(2, k=k, dtype=jnp.int32))(jnp.array([0, 1]))
    np.testing.assert_array_equal(out, [np.eye(2, k=0), np.eye(2, k=1)])


def test_eye_and_tri_error_classes_follow_jax():
    with pytest.raises(ValueError, match="eye"):
        jnp.eye(2, k=1.0)
    with pytest.raises(ValueError, match="eye"):
        jnp.eye(-1)
    with pytest.raises(TypeError, match="tri"):
        jnp.tri(-1)
    with pytest.raises(TypeError, match="tri"):
        jnp.tri(2, k=1.0)


def test_diagonal_and_diagflat_weak_types():
    # JAX: diagflat is never weak; the diagonal of a square 2-d (non-bool) array with offset 0
    # is not weak either (a platform-dependent branch); other diagonals keep the weak type.
    w = jnp.broadcast_to(jnp.asarray(2.0), (3, 3))
    assert _weak(w)
    assert not _weak(jnp.diagonal(w)) and not _weak(jnp.diag(w))
    assert _weak(jnp.diagonal(w, 1))
    assert _weak(jnp.diagonal(jnp.broadcast_to(jnp.asarray(2.0), (3, 4))))
    assert _weak(jnp.diagonal(jnp.broadcast_to(jnp.asarray(2.0), (2, 3, 3))))
    assert not _weak(jnp.diagflat(jnp.asarray(2.0)))
    assert not _weak(jnp.diagflat(w))
    np.testing.assert_array_equal(jnp.diagonal(w), [2.0, 2.0, 2.0])


# ---------------------------------------------------------------- meshgrid / indices


def test_meshgrid_copy_false_is_an_error():
    with pytest.raises(ValueError, match="copy"):
        jnp.meshgrid(jnp.arange(3), copy=False)


def test_indices_bad_dimensions_are_type_errors():
    with pytest.raises(TypeError, match="indices"):
        jnp.indices(3)
    with pytest.raises(TypeError, match="indices"):
        jnp.indices((-1, 2))
    np.testing.assert_array_equal(jnp.indices(np.array([2, 3])), np.indices((2, 3)))


# ---------------------------------------------------------------- reshape / transpose / ...


def test_reshape_has_no_newshape_keyword():
    with pytest.raises(TypeError):
        jnp.reshape(jnp.ones(4), newshape=(2, 2))
    assert jnp.reshape(jnp.ones(4), shape=(2, 2)).shape == (2, 2)


def test_shape_error_classes_follow_jax():
    x = jnp.ones((2, 3, 4))
    with pytest.raises(ValueError):  # out of bounds axis
        jnp.transpose(x, (0, 1, 3))
    with pytest.raises(TypeError):  # not a permutation
        jnp.transpose(x, (0, 1, 1))
    with pytest.raises(TypeError):  # repeated source axis
        jnp.moveaxis(x, (0, 0), (1, 2))
    with pytest.raises(TypeError):
        jnp.broadcast_to(jnp.ones(3), (-1, 3))
    with pytest.raises(TypeError):
        jnp.broadcast_shapes((-1,), (3,))
    assert jnp.transpose(x, (-1, 0, 1)).shape == (4, 2, 3)


# ---------------------------------------------------------------- repeat / split / flip


def test_repeat_total_repeat_length_with_traced_repeats():
    # JAX's algorithm: a long total repeats the element after the last counted one.
    a = jnp.arange(3)
    f = ember.jit(lambda r: jnp.repeat(a, r, total_repeat_length=5))
    np.testing.assert_array_equal(f(jnp.array([1, 2, 0])), [0, 1, 1, 2, 2])
    np.testing.assert_array_equal(f(jnp.array([2, 2, 2])), [0, 0, 1, 1, 2])
    np.testing.assert_array_equal(f(jnp.array([0, 0, 0])), [2, 2, 2, 2, 2])
    g = ember.jit(lambda r: jnp.repeat(a, r, total_repeat_length=6))
    np.testing.assert_array_equal(g(2), [0, 0, 1, 1, 2, 2])
    x = jnp.arange(6).reshape(2, 3)
    out = ember.vmap(lambda r: jnp.repeat(x, r, axis=1, total_repeat_length=4))(
        jnp.array([[1, 2, 1], [0, 0, 4]]))
    np.testing.assert_array_equal(out, [[[0, 1, 1, 2], [3, 4, 4, 5]],
                                        [[2, 2, 2, 2], [5, 5, 5, 5]]])


def test_repeat_total_repeat_length_concrete_edge_cases():
    a = jnp.arange(3)
    # (These were [0 1 1 1 1] and a ValueError.)
    np.testing.assert_array_equal(
        jnp.repeat(a, jnp.array([1, 2, 0]), total_repeat_length=5), [0, 1, 1, 2, 2])
    np.testing.assert_array_equal(
        jnp.repeat(a, jnp.array([0, 0, 0]), total_repeat_length=2), [2, 2])
    np.testing.assert_array_equal(
        jnp.repeat(a, jnp.array([2, 2, 2]), total_repeat_length=4), [0, 0, 1, 1])
    np.testing.assert_array_equal(jnp.repeat(jnp.array(5), 3, total_repeat_length=2), [5, 5])
    assert jnp.repeat(jnp.ones((0, 2)), 2, axis=0, total_repeat_length=3).shape == (0, 2)
    with pytest.raises(TypeError):
        jnp.repeat(a, 2, total_repeat_length=-1)


def test_repeat_rejects_list_repeats():
    with pytest.raises(TypeError, match="repeat"):
        jnp.repeat(jnp.arange(3), [1, 2, 1])
    np.testing.assert_array_equal(jnp.repeat(jnp.arange(3), np.array([1, 0, 2])), [0, 2, 2])


def test_vsplit_splits_1d_arrays():
    parts = jnp.vsplit(jnp.arange(4), [1])
    assert [p.tolist() for p in parts] == [[0], [1, 2, 3]]


def test_flip_repeated_axis_is_a_type_error():
    with pytest.raises(TypeError, match="flip"):
        jnp.flip(jnp.ones((2, 2)), (0, 0))
    with pytest.raises(TypeError, match="flip"):
        jnp.flip(jnp.ones((2, 2)), (0, -2))


# ---------------------------------------------------------------- pad


_B = np.array([[1.0, 5.0, 2.0, 8.0], [3.0, -1.0, 7.0, 4.0], [0.5, 2.5, 9.0, 6.0]], np.float32)


@pytest.mark.parametrize("mode", ["maximum", "minimum", "mean", "median"])
@pytest.mark.parametrize("pw", [1, ((1, 2), (0, 3))])
def test_pad_statistic_modes_match_numpy(mode, pw):
    np.testing.assert_allclose(np.asarray(jnp.pad(jnp.asarray(_B), pw, mode=mode)),
                               np.pad(_B, pw, mode=mode), rtol=1e-6)
    np.testing.assert_allclose(
        np.asarray(jnp.pad(jnp.asarray(_B), pw, mode=mode, stat_length=((1, 2), (3, 10)))),
        np.pad(_B, pw, mode=mode, stat_length=((1, 2), (3, 10))), rtol=1e-6)


def test_pad_statistic_modes_round_integers_and_keep_weak_types():
    x = np.array([1, 2, 3, 4], np.int32)
    # (the mean 2.5 rounds half to even, as in JAX and NumPy; medians 1.5 and 3.5 too)
    np.testing.assert_array_equal(jnp.pad(jnp.asarray(x), 1, mode="mean"), [2, 1, 2, 3, 4, 2])
    np.testing.assert_array_equal(jnp.pad(jnp.asarray(x), 1, mode="median", stat_length=2),
                                  [2, 1, 2, 3, 4, 4])
    w = jnp.broadcast_to(jnp.asarray(2.0), (3,))
    assert _weak(jnp.pad(w, 1, mode="maximum")) and _weak(jnp.pad(w, 1, mode="linear_ramp"))
    with pytest.raises(ValueError, match="stat_length"):
        jnp.pad(jnp.asarray(_B), 1, mode="mean", stat_length=0)
    with pytest.raises(ValueError, match="unsupported keyword"):
        jnp.pad(jnp.asarray(_B), 1, mode="mean", end_values=0)


@pytest.mark.parametrize("pw", [1, (2, 3), 5])
def test_pad_linear_ramp_matches_numpy(pw):
    np.testing.assert_allclose(np.asarray(jnp.pad(jnp.asarray(_B), pw, mode="linear_ramp")),
                               np.pad(_B, pw, mode="linear_ramp"), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        np.asarray(jnp.pad(jnp.asarray(_B), pw, mode="linear_ramp", end_values=(5, -2))),
        np.pad(_B, pw, mode="linear_ramp", end_values=(5, -2)), rtol=1e-6, atol=1e-6)
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    np.testing.assert_array_equal(jnp.pad(jnp.asarray(a), pw, mode="linear_ramp"),
                                  np.pad(a, pw, mode="linear_ramp"))


@pytest.mark.parametrize("mode", ["reflect", "symmetric"])
@pytest.mark.parametrize("pw", [(2, 3), 7, ((5, 9), (11, 2))])
def test_pad_reflect_type_odd_matches_numpy(mode, pw):
    np.testing.assert_array_equal(
        jnp.pad(jnp.asarray(_B), pw, mode=mode, reflect_type="odd"),
        np.pad(_B, pw, mode=mode, reflect_type="odd"))
    for x in (np.array([3.0], np.float32), np.array([3.0, 5.0], np.float32)):
        np.testing.assert_array_equal(jnp.pad(jnp.asarray(x), 5, mode=mode, reflect_type="odd"),
                                      np.pad(x, 5, mode=mode, reflect_type="odd"))
    with pytest.raises(ValueError, match="reflect_type"):
        jnp.pad(jnp.ones(3), 1, mode=mode, reflect_type="xx")


def test_pad_with_a_function_and_under_transformations():
    def fill(v, pw, axis, kwargs):
        return v.at[:pw[0]].set(kwargs.get("val", 9)).at[v.shape[0] - pw[1]:].set(-1)

    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    np.testing.assert_array_equal(jnp.pad(jnp.asarray(a), ((1, 2), (2, 1)), mode=fill, val=4),
                                  np.pad(a, ((1, 2), (2, 1)), mode=_numpy_fill, val=4))
    g = ember.grad(lambda x: jnp.pad(x, 2, mode="mean").sum())(jnp.asarray(_B))
    # Padding the rows adds 4 column means of 3 rows: 4/3 of the sum; padding the columns then
    # adds 4 row means of 4 columns: the sum again. So the total is 2 * (1 + 4/3) * sum(x).
    np.testing.assert_allclose(np.asarray(g), 2 * (1 + 4 / 3), rtol=1e-6)
    out = ember.vmap(lambda x: jnp.pad(x, 2, mode="symmetric", reflect_type="odd"))(
        jnp.asarray(_B))
    np.testing.assert_array_equal(out, [np.pad(r, 2, mode="symmetric", reflect_type="odd")
                                        for r in _B])


def _numpy_fill(v, pw, axis, kwargs):  # (NumPy's callables fill in place)
    v[:pw[0]] = kwargs.get("val", 9)
    v[v.shape[0] - pw[1]:] = -1


# ---------------------------------------------------------------- iinfo / finfo


def test_iinfo_and_finfo_of_python_scalar_values():
    # JAX (np.iinfo): a Python int value means NumPy's int64; finfo of a value is a TypeError.
    assert jnp.iinfo(1).max == 2**63 - 1 and jnp.iinfo(1).dtype == np.int64
    assert jnp.iinfo(jnp.int8).max == 127 and jnp.iinfo(int).bits == 64
    for value in (1.0, 1j, 1):
        with pytest.raises(TypeError, match="finfo"):
            jnp.finfo(value)
    assert jnp.finfo(np.float16(1)).bits == 16
    with pytest.raises(ValueError, match="iinfo"):
        jnp.iinfo(1.0)
