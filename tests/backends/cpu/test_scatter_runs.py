"""Scatter maximum/minimum into scalar windows (``segment_max``, ``x.at[i].max(u)``): blocks
of updates that all go to one position are combined as a tree, the others one at a time, in
order. Either way each position ends at the maximum (minimum) of its updates under XLA's
order: a NaN wins, -0 is below +0; compared bit for bit with a loop in Python and with JAX."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.cpu import scatter_kernel

rng = np.random.default_rng(5)
BLOCK = scatter_kernel.BLOCK


def _key(x: float) -> tuple:
    """A total order of non-NaN reals with -0 below +0."""
    return (x, not np.signbit(x))


def _reference(num, ids, values, is_max, init):
    out = np.full(num, init, values.dtype)
    for i, v in zip(ids.tolist(), values):
        if not 0 <= i < num:
            continue  # out-of-bounds updates are dropped
        cur = out[i]
        if np.isnan(cur) or np.isnan(v):
            out[i] = cur if np.isnan(cur) else v
        elif (_key(v) > _key(cur)) == is_max and _key(v) != _key(cur):
            out[i] = v
    return out


def _ids(n, num, mean_run, sort=True):
    """``n`` segment ids in [0, num), runs of about ``mean_run``, a few out of bounds."""
    ids = np.sort(rng.integers(0, max(1, n // mean_run), n)) % num if sort \
        else rng.integers(0, num, n)
    ids = ids.astype(np.int32)
    ids[rng.integers(0, n, 3)] = [-1, num, num + 5]
    return np.sort(ids) if sort else ids


def _values(n, dtype=np.float32):
    v = rng.standard_normal(n).astype(dtype)
    v[rng.integers(0, n, n // 50)] = 0.0
    v[rng.integers(0, n, n // 50)] = -0.0
    return v


def _same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint8), want[~nan].view(np.uint8))


@pytest.mark.parametrize("is_max", [True, False])
@pytest.mark.parametrize("mean_run", [1, 3, 10, 1000])
@pytest.mark.parametrize("sort", [True, False])
def test_segment_max_min_match_a_loop(is_max, mean_run, sort):
    n, num = 20 * BLOCK + 7, 50  # (a tail of updates after the last whole block)
    ids, v = _ids(n, num, mean_run, sort), _values(n)
    op = ember.ops.segment_max if is_max else ember.ops.segment_min
    got = ember.jit(lambda v, i: op(v, i, num_segments=num, indices_are_sorted=sort))(v, ids)
    init = -np.inf if is_max else np.inf
    _same_bits(got, _reference(num, ids, v, is_max, np.float32(init)))


@pytest.mark.parametrize("is_max", [True, False])
def test_nans_propagate_from_any_block_position(is_max):
    n, num = 8 * BLOCK, 3
    ids = np.repeat(np.arange(num, dtype=np.int32), [3 * BLOCK, 4 * BLOCK, BLOCK])
    v = _values(n)
    for at in (5, 3 * BLOCK + 2 * BLOCK - 1):  # in segment 0 and in segment 1's third block
        v[at] = np.nan
    x = np.zeros(num, np.float32)
    f = ember.jit(lambda x, v, i: x.at[i].max(v) if is_max else x.at[i].min(v))
    got = np.asarray(f(x, v, ids))
    assert np.isnan(got[:2]).all() and not np.isnan(got[2])
    _same_bits(got, _reference(num, ids, v, is_max, np.float32(0)))


def test_signed_zeros_in_one_block():
    ids = np.zeros(BLOCK, np.int32)
    for values, want_max, want_min in (([-0.0, 0.0], 0.0, -0.0), ([0.0, -0.0], 0.0, -0.0)):
        v = np.resize(np.array(values, np.float32), BLOCK)
        x = np.full(1, -0.0, np.float32)
        got_max = np.asarray(ember.jit(lambda x, v, i: x.at[i].max(v))(x, v, ids))
        got_min = np.asarray(ember.jit(lambda x, v, i: x.at[i].min(v))(x, v, ids))
        assert np.signbit(got_max[0]) == np.signbit(want_max)
        assert np.signbit(got_min[0]) == np.signbit(want_min)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int8, np.float16])
def test_other_dtypes(dtype):
    n, num = 9 * BLOCK + 1, 6
    ids = _ids(n, num, 40)
    v = (rng.integers(0, 200, n) if np.dtype(dtype).kind in "iu"
         else rng.standard_normal(n)).astype(dtype)
    got = ember.jit(lambda v, i: ember.ops.segment_max(v, i, num_segments=num))(v, ids)
    init = np.iinfo(dtype).min if np.dtype(dtype).kind in "iu" else -np.inf
    _same_bits(got, _reference(num, ids, v, True, np.asarray(init, dtype)))


def test_two_dimensional_scalar_windows():
    rows, cols = np.sort(rng.integers(0, 4, (6, BLOCK + 3))), np.zeros((6, BLOCK + 3), int)
    rows, cols = rows.astype(np.int32), cols.astype(np.int32)
    u = _values(rows.size).reshape(rows.shape)
    x = np.full((4, 2), -np.inf, np.float32)
    got = ember.jit(lambda x, u, r, c: x.at[r, c].max(u))(x, u, rows, cols)
    want = x.copy()
    want[:, 0] = _reference(4, rows.ravel(), u.ravel(), True, np.float32(-np.inf))
    _same_bits(got, want)


@pytest.mark.parametrize("mean_run", [3, 1000])
def test_segment_max_matches_jax(mean_run):
    jax = pytest.importorskip("jax")
    n, num = 40 * BLOCK + 5, 30
    ids, v = _ids(n, num, mean_run), _values(n)
    v[rng.integers(0, n, 4)] = np.nan
    for sort in (True, False):
        for name in ("segment_max", "segment_min"):
            def f(ops, v, i, name=name, sort=sort):
                return getattr(ops, name)(v, i, num_segments=num, indices_are_sorted=sort)
            got = ember.jit(lambda v, i: f(ember.ops, v, i))(v, ids)
            want = jax.jit(lambda v, i: f(jax.ops, v, i))(v, ids)
            _same_bits(got, np.asarray(want))


def test_segment_sum_keeps_its_order():
    n, num = 30 * BLOCK, 7
    ids, v = _ids(n, num, 100), _values(n)
    got = np.asarray(ember.jit(lambda v, i: jnp.zeros(num, jnp.float32).at[i].add(v))(v, ids))
    want = np.zeros(num, np.float32)
    for i, x in zip(ids.tolist(), v):
        if -num <= i < num:  # (``at`` counts negative ids from the end)
            want[i] = np.float32(want[i] + x)
    np.testing.assert_array_equal(got, want)
