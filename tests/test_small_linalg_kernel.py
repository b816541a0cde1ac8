"""The CPU backend's native kernels for batches of small matrices
(``ember.backends.cpu.small_linalg_kernel``) against ``ember.lax._small_batch``'s NumPy code
(and so LAPACK's choices): pivots, permutations, zero pivots, NaN and inf, every triangular
solve flag, failed Cholesky factors, and the parallel split of large batches."""

import itertools

import numpy as np
import pytest

from ember.backends.cpu import small_linalg_kernel as slk
from ember.compiler.evaluator import CUSTOM_CALL_TARGETS
from ember.lax import _small_batch as sb


def _tol(dt):
    return 1e-4 if np.dtype(dt) == np.float32 else 1e-11


def _numpy(fn, *args, **kw):
    """``fn`` run with the native kernels unregistered: ``_small_batch``'s NumPy code."""
    saved = CUSTOM_CALL_TARGETS.pop(sb.NATIVE_TARGET)
    try:
        with np.errstate(all="ignore"):
            return fn(*args, **kw)
    finally:
        CUSTOM_CALL_TARGETS[sb.NATIVE_TARGET] = saved


def _native_available(dt):
    return slk.kernel("getrf", np.dtype(dt)) is not None


pytestmark = pytest.mark.skipif(not _native_available(np.float32),
                                reason="no native code on this host")


def test_registered_under_the_name_small_batch_uses():
    assert slk.NATIVE_TARGET == sb.NATIVE_TARGET
    assert CUSTOM_CALL_TARGETS[sb.NATIVE_TARGET] is slk.run


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (4, 4), (7, 7), (16, 16), (5, 3),
                                   (3, 5)])
def test_getrf_matches_numpy_code(dt, shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40,) + shape).astype(dt)
    x[0, :, 0] = 0  # a zero pivot: its column left unscaled
    x[1] = 0
    x[2, -1, 0] = np.nan  # the first NaN is the pivot
    x[3, 0, 0] = np.inf
    x[4, :, 0] = 2.0  # ties: the first largest
    x[5, :, 0] = -x[5, :, 0]
    got = slk.run("getrf", x)
    want = _numpy(sb.getrf, x)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
    np.testing.assert_array_equal(got[1], want[1])  # the same pivots
    np.testing.assert_array_equal(got[2], want[2])
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want[0]))
    np.testing.assert_allclose(got[0], want[0], rtol=_tol(dt), atol=_tol(dt))


@pytest.mark.parametrize("nb", [1, 15, 16, 17, 33])
def test_getrf_lane_groups_and_tail_match(nb):
    """Batches around the lane width: whole groups of 16 and the scalar loop's rest."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((nb, 3, 3)).astype(np.float32)
    x[nb // 2, 0, 0] = np.nan
    x[-1, :, 1] = 0
    got, want = slk.run("getrf", x), _numpy(sb.getrf, x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_getrf_keeps_batch_dims_and_input_and_reconstructs():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 5, 4, 4))
    keep = x.copy()
    lu, piv, perm = slk.run("getrf", x)
    np.testing.assert_array_equal(x, keep)
    assert lu.shape == x.shape and piv.shape == (3, 5, 4) and perm.shape == (3, 5, 4)
    low = np.tril(lu, -1) + np.eye(4)
    rows = np.take_along_axis(x, perm[..., None], axis=-2)
    np.testing.assert_allclose(low @ np.triu(lu), rows, atol=1e-12)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 3, 4, 16])
def test_trsm_every_flag_matches_numpy_code(dt, n):
    rng = np.random.default_rng(2)
    a = (rng.standard_normal((20, n, n)) + 3 * np.eye(n)).astype(dt)
    a[2, 0, 0] = 0  # a zero diagonal entry: infinities/NaNs
    a[3, -1, -1] = np.nan
    for left, lower, tr, unit in itertools.product([True, False], repeat=4):
        b = rng.standard_normal((20, n, 3) if left else (20, 3, n)).astype(dt)
        kw = dict(left_side=left, lower=lower, transpose_a=tr, conjugate_a=False,
                  unit_diagonal=unit)
        with np.errstate(all="ignore"):
            got = sb.trsm(a, b, **kw)
        want = _numpy(sb.trsm, a, b, **kw)
        assert got.dtype == dt and got.shape == b.shape
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=str(kw))
        np.testing.assert_allclose(got, want, rtol=_tol(dt), atol=_tol(dt), err_msg=str(kw))


def test_trsm_against_numpy_solve():
    rng = np.random.default_rng(3)
    t = np.tril(rng.standard_normal((50, 6, 6))) + 4 * np.eye(6)
    x = rng.standard_normal((50, 6, 2))
    got = slk.run("trsm", t, x.copy(), lower=True, unit=False)
    np.testing.assert_allclose(got, np.linalg.solve(t, x), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 5, 16])
def test_potrf_matches_numpy_code(dt, n):
    rng = np.random.default_rng(4)
    g = rng.standard_normal((20, n, n))
    s = (g @ np.swapaxes(g, -1, -2) + n * np.eye(n)).astype(dt)
    s[..., np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] = 7.0  # never read, kept
    s[1] = -s[1]  # not positive definite: all NaN
    s[2, -1, -1] = np.nan  # a NaN pivot propagates without failing
    got = slk.run("potrf", s)
    want = _numpy(sb.potrf, s)
    assert got.dtype == dt
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=_tol(dt), atol=_tol(dt))
    assert np.isnan(got[1]).all() and not np.isnan(got[0]).any()


def test_large_batches_split_across_threads_match():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((20000, 8, 8)).astype(np.float32)
    assert x.shape[0] * 8 ** 3 >= slk.PARALLEL_MIN_WORK
    got = slk.run("getrf", x)
    want = _numpy(sb.getrf, x)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)
    s = x @ np.swapaxes(x, -1, -2) + 8 * np.eye(8, dtype=np.float32)
    np.testing.assert_allclose(slk.run("potrf", s), _numpy(sb.potrf, s), rtol=1e-4,
                               atol=1e-4)


def test_unsupported_operands_answer_none_and_bad_names_raise():
    assert slk.run("getrf", np.zeros((10, 17, 17))) is None  # over MAX_DIM
    assert slk.run("getrf", np.zeros((10, 3, 3), np.complex64)) is None
    assert slk.run("getrf", np.zeros((10, 3, 3), np.int32)) is None
    assert slk.run("potrf", np.zeros((10, 3, 4))) is None  # not square
    t = np.zeros((4, 3, 3))
    assert slk.run("trsm", t, np.zeros((4, 3, 2), np.float32), lower=True, unit=True) is None
    assert slk.run("trsm", t, np.zeros((5, 3, 2)), lower=True, unit=True) is None
    with pytest.raises(ValueError, match="unknown kernel"):
        slk.run("geqrf", np.zeros((2, 3, 3)))
    got = slk.run("getrf", np.zeros((0, 3, 3)))  # an empty batch
    assert got[0].shape == (0, 3, 3) and got[1].shape == (0, 3)
