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
