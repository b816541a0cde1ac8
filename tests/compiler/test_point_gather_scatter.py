"""Gathers and scatters of single positions along some dims and whole extents along the rest
(``x[i]``, ``jnp.take``, ``x.at[i].add``) take a direct NumPy path in ``eval_structural``;
it must agree exactly with the general coordinate-grid path on random dimension numbers,
out-of-bounds and duplicate indices included."""

import itertools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.compiler import eval_structural as ES


def general(monkeypatch, fn, *args, **kwargs):
    with monkeypatch.context() as m:
        m.setattr(ES, "_point_indices", lambda *a, **k: None)
        m.setattr(ES, "_take_along_one_axis", lambda *a, **k: None)
        return fn(*args, **kwargs)


def random_case(rng):
    rank = int(rng.integers(1, 4))
    shape = tuple(int(d) for d in rng.integers(1, 5, rank))
    if rank >= 2 and rng.random() < 0.4:
        index_map = (0, 1)
    else:
        index_map = (int(rng.integers(0, rank)),)
    batch = tuple(int(d) for d in rng.integers(0, 4, int(rng.integers(0, 3))))
    dtype = rng.choice([np.int32, np.int64, np.int8, np.uint8, np.uint32])
    low = 0 if np.dtype(dtype).kind == "u" else -3
    idx = np.stack([rng.integers(low, shape[d] + 3, batch) for d in index_map], axis=-1)
    return shape, index_map, batch, idx.astype(dtype)


def assert_same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.ascontiguousarray(got).view(np.uint8),
                                  np.ascontiguousarray(want).view(np.uint8))


@pytest.mark.parametrize("seed", range(40))
def test_point_gather_matches_the_general_path(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    shape, index_map, batch, idx = random_case(rng)
    operand = rng.normal(size=shape).astype(np.float32)
    kept = [d for d in range(len(shape)) if d not in index_map]
    out_rank = len(batch) + len(kept)
    offset_dims = tuple(sorted(rng.choice(out_rank, len(kept), replace=False).tolist()))
    kwargs = dict(offset_dims=offset_dims, collapsed_slice_dims=tuple(sorted(index_map)),
                  start_index_map=index_map,
                  slice_sizes=tuple(1 if d in index_map else shape[d] for d in range(len(shape))),
                  fill=None if seed % 3 else np.float32(-7.5))
    assert ES._point_indices(idx, shape, index_map, kwargs["collapsed_slice_dims"], (),
                             [shape[d] for d in kept]) is not None
    got = ES.gather_windows(operand, idx, **kwargs)
    want = general(monkeypatch, ES.gather_windows, operand, idx, **kwargs)
    assert_same(got, want)


@pytest.mark.parametrize("seed", range(30))
def test_gathers_of_one_axis_take_and_match_the_general_path(seed, monkeypatch):
    # x[i], x[:, i], jnp.take(x, i, axis=d) with clamped starts: np.take(..., mode="clip")
    rng = np.random.default_rng(200 + seed)
    rank = int(rng.integers(1, 4))
    shape = tuple(int(d) for d in rng.integers(1, 5, rank))
    d = int(rng.integers(0, rank))
    batch = tuple(int(n) for n in rng.integers(0, 4, int(rng.integers(0, 3))))
    dtype = rng.choice([np.int32, np.int64, np.int8, np.uint8, np.uint32, np.int16])
    low = 0 if np.dtype(dtype).kind == "u" else -9
    idx = rng.integers(low, shape[d] + 9, batch + (1,)).astype(dtype)  # (out of range too)
    operand = rng.normal(size=shape).astype(np.float32)
    nb = len(batch)
    kwargs = dict(offset_dims=tuple(range(d)) + tuple(range(d + nb, nb + rank - 1)),
                  collapsed_slice_dims=(d,), start_index_map=(d,),
                  slice_sizes=tuple(1 if k == d else shape[k] for k in range(rank)), fill=None)
    assert ES._take_along_one_axis(operand, idx, kwargs["offset_dims"], (d,), (d,), (),
                                   kwargs["slice_sizes"], None) is not None
    got = ES.gather_windows(operand, idx, **kwargs)
    want = general(monkeypatch, ES.gather_windows, operand, idx, **kwargs)
    assert_same(got, want)
    # Not a take: a fill value, another output layout, a partial window, uint64 indices.
    for change in (dict(fill=np.float32(1.0)),
                   dict(slice_sizes=tuple(1 for _ in shape))
                   if any(shape[k] > 1 for k in range(rank) if k != d)
                   else dict(fill=np.float32(2.0))):
        args = {**kwargs, **change}
        assert ES._take_along_one_axis(operand, idx, args["offset_dims"], (d,), (d,), (),
                                       args["slice_sizes"], args["fill"]) is None
    assert ES._take_along_one_axis(operand, idx.astype(np.uint64), kwargs["offset_dims"],
                                   (d,), (d,), (), kwargs["slice_sizes"], None) is None


@pytest.mark.parametrize("seed", range(40))
def test_point_scatter_matches_the_general_path(seed, monkeypatch):
    rng = np.random.default_rng(100 + seed)
    shape, index_map, batch, idx = random_case(rng)
    operand = rng.normal(size=shape).astype(np.float32)
    kept = [d for d in range(len(shape)) if d not in index_map]
    upd_rank = len(batch) + len(kept)
    window_dims = tuple(sorted(rng.choice(upd_rank, len(kept), replace=False).tolist()))
    upd_shape = [0] * upd_rank
    batch_it, kept_it = iter(batch), iter(shape[d] for d in kept)
    for i in range(upd_rank):
        upd_shape[i] = next(kept_it) if i in window_dims else next(batch_it)
    updates = rng.normal(size=upd_shape).astype(np.float32)
    combine = [None, np.add, np.maximum, np.multiply][seed % 4]
    kwargs = dict(update_window_dims=window_dims,
                  inserted_window_dims=tuple(sorted(index_map)),
                  scatter_dims_to_operand_dims=index_map, clip=bool(seed % 5 == 0),
                  combine=combine)
    assert ES._point_indices(idx, shape, index_map, kwargs["inserted_window_dims"], (),
                             [shape[d] for d in kept]) is not None
    got = ES.scatter_windows(operand, idx, updates, **kwargs)
    want = general(monkeypatch, ES.scatter_windows, operand, idx, updates, **kwargs)
    assert_same(got, want)


def test_other_shapes_are_not_point_indices():
    idx = np.zeros((3, 1), np.int32)
    # a window smaller than the dim, a batching dim, an empty operand, 64-bit unsigned
    assert ES._point_indices(idx, (4, 5), (0,), (0,), (), [3]) is None
    assert ES._point_indices(idx, (4, 5), (0,), (0,), (1,), [5]) is None
    assert ES._point_indices(idx, (0, 5), (0,), (0,), (), [5]) is None
    assert ES._point_indices(idx.astype(np.uint64), (4, 5), (0,), (0,), (), [5]) is None
    # several index dims that are not a leading run
    assert ES._point_indices(np.zeros((3, 2), np.int32), (4, 5, 6), (1, 2), (1, 2), (),
                             [4]) is None
    assert ES._point_indices(idx, (4, 5), (0,), (0,), (), [5]) is not None


def test_jitted_indexing_matches_numpy_on_both_backends():
    rng = np.random.default_rng(0)
    table = rng.normal(size=(50, 8)).astype(np.float32)
    idx = rng.integers(0, 50, 300).astype(np.int32)
    vals = rng.normal(size=(300, 8)).astype(np.float32)
    want_take = table[idx]
    want_add = table.copy()
    np.add.at(want_add, idx, vals)
    want_set = table.copy()
    for i, v in zip(idx, vals):  # (in order: the last duplicate wins)
        want_set[i] = v
    for backend in ("cpu", "interpreter"):
        f = ember.jit(lambda t, i, v: (jnp.take(t, i, axis=0), t.at[i].add(v), t.at[i].set(v),
                                       t[:, 3][i]), backend=backend)
        got = [np.asarray(g) for g in f(table, idx, vals)]
        for g, w in zip(got, [want_take, want_add, want_set, table[:, 3][idx]]):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("mode", ["clip", "fill", "drop", "promise_in_bounds"])
def test_out_of_bounds_modes_follow_jax(mode):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    i = np.array([0, 5, -1, -6, 3], np.int32)
    for backend, (kind, fn) in itertools.product(("cpu", "interpreter"), [
            ("get", lambda x, i: x.at[i].get(mode=mode if mode != "drop" else "fill")),
            ("add", lambda x, i: x.at[i].add(1.0, mode=mode if mode != "fill" else "drop"))]):
        got = np.asarray(ember.jit(fn, backend=backend)(x, i))
        n = x.shape[0]
        if kind == "get":
            if mode == "clip" or mode == "promise_in_bounds":
                want = x[np.clip(np.where(i < 0, i + n, i), 0, n - 1)]
            else:
                j = np.where(i < 0, i + n, i)
                want = np.where(((j >= 0) & (j < n))[:, None], x[np.clip(j, 0, n - 1)], np.nan)
        else:
            want = x.copy()
            j = np.where(i < 0, i + n, i)
            for jj in j:  # (promise_in_bounds: XLA's scatter drops, as JAX's does)
                if mode == "clip":
                    want[np.clip(jj, 0, n - 1)] += 1.0
                elif 0 <= jj < n:
                    want[jj] += 1.0
        np.testing.assert_array_equal(got, want, err_msg=f"{backend} {kind} {mode}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("combine", [np.add, np.multiply])
def test_row_updates_combine_in_rounds_with_ufunc_at_bits(dtype, combine):
    # (windows of whole rows combine round by round, each position's k-th update in round
    # k: the same values in the same order per element as ``ufunc.at``)
    rng = np.random.default_rng(11)
    target = rng.standard_normal((300, 70)).astype(dtype)
    index = rng.integers(0, 300, 900)
    index[:40] = 7  # (one row updated 40 times and more)
    values = (rng.standard_normal((900, 70)) * 3).astype(dtype)
    if dtype != np.int32:
        values[::17, 3] = -0.0
        values[5, 5] = np.nan
    want = target.copy()
    combine.at(want, index, values)
    got = target.copy()
    assert ES._combine_by_rounds(combine, got, index, values)
    assert_same(got, want)


def test_rounds_decline_where_ufunc_at_is_better():
    target = np.zeros((4, 3), np.float32)
    assert not ES._combine_by_rounds(np.add, target, np.zeros(50, np.int64),
                                     np.ones((50, 3), np.float32))  # (50 rounds of 3)
    assert not ES._combine_by_rounds(np.add, np.zeros(4), np.array([0, 1]), np.ones(2))


def test_eager_row_scatter_add_matches_numpy():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((1000, 256)).astype(np.float32)
    idx = rng.integers(0, 1000, 700).astype(np.int32)
    upd = rng.standard_normal((700, 256)).astype(np.float32)
    want = x.copy()
    np.add.at(want, idx, upd)
    assert_same(np.asarray(jnp.asarray(x).at[idx].add(upd)), want)
