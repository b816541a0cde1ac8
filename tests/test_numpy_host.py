"""jnp's host-side helpers: load/save, fromstring, print options, the impure constructors."""

import ml_dtypes
import numpy as np
import pytest

import ember.numpy as jnp


def test_save_and_load_round_trip_bfloat16_included(tmp_path):
    path = str(tmp_path / "a.npy")
    jnp.save(path, jnp.arange(3))
    got = jnp.load(path)
    assert type(got).__name__ == "Array" and got.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), [0, 1, 2])
    np.save(path, np.array([1.5, -2.0], ml_dtypes.bfloat16))
    got = jnp.load(path)
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(np.asarray(got, np.float32), [1.5, -2.0])
    archive = str(tmp_path / "b.npz")
    jnp.savez(archive, x=np.ones(2))
    assert float(jnp.load(archive)["x"].sum()) == 2.0  # (an archive stays NumPy's)


def test_fromstring_and_the_impure_constructors():
    got = jnp.fromstring("1, 2, 3", dtype=np.float32, sep=",")
    np.testing.assert_array_equal(np.asarray(got), [1.0, 2.0, 3.0])
    assert got.dtype == np.float32
    for fn in (jnp.fromiter, jnp.fromfile):
        with pytest.raises(NotImplementedError, match="non-pure"):
            fn(iter([1, 2]), np.float32)


def test_print_options_apply_to_arrays():
    x = jnp.asarray(np.array([1.23456, 2.5], np.float32))
    with jnp.printoptions(precision=2):
        assert repr(x) == "Array([1.23, 2.5 ], dtype=float32)"
        assert jnp.get_printoptions()["precision"] == 2
    assert jnp.get_printoptions()["precision"] == 8
    assert jnp.iterable(x) and not jnp.iterable(3)
    assert issubclass(jnp.ComplexWarning, Warning)
