"""``gather`` and ``dynamic_slice`` compile to native kernels (index arithmetic with clamped
window starts); they must agree exactly with the NumPy evaluator on random dimension
numbers, index types and out-of-bounds starts."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends import get_backend
from ember.backends.cpu.executable import KernelPlan, LibraryPlan
from ember.compiler.evaluator import evaluate_computation
from ember.compiler.hlo import Builder, Module, Shape

INDEX_DTYPES = [np.int8, np.int32, np.int64, np.uint8, np.uint32]


def compile_and_compare(build, args):
    """Builds ``main(args...)`` with ``build(builder, params)``; runs it natively and in the
    evaluator. Returns the native run's plan steps."""
    m = Module("m")
    b = Builder(m, "main")
    params = [b.parameter(i, Shape(a.dtype, a.shape)) for i, a in enumerate(args)]
    b.build(build(b, params), entry=True)
    exe = get_backend("cpu").compile(m)
    got = exe.execute(args)
    want = evaluate_computation(m.entry, args)
    want = list(want) if isinstance(want, tuple) else [want]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
    return exe.program.steps


def random_indices(rng, n_index, high):
    """(batch dims, index vector dim, index array): index vectors of ``n_index`` entries in
    [-4, high) (from 0 for unsigned types), the vector dim anywhere or implicit."""
    batch = [int(d) for d in rng.integers(1, 4, int(rng.integers(0, 3)))]
    implicit = n_index == 1 and rng.random() < 0.5
    vector_dim = len(batch) if implicit else int(rng.integers(0, len(batch) + 1))
    shape = list(batch)
    if not implicit:
        shape.insert(vector_dim, n_index)
    dtype = np.dtype(rng.choice(INDEX_DTYPES))
    low = 0 if dtype.kind == "u" else -4
    return batch, vector_dim, rng.integers(low, high, shape).astype(dtype)


def random_gather(rng):
    rank = int(rng.integers(1, 4))
    dims = [int(d) for d in rng.integers(1, 6, rank)]
    n_index = int(rng.integers(1, rank + 1))
    index_map = [int(d) for d in rng.permutation(rank)[:n_index]]
    sizes = [int(rng.integers(0, d + 1)) for d in dims]
    collapsed = sorted(d for d in index_map if rng.random() < 0.6)
    for d in collapsed:
        sizes[d] = 1
    batch, vector_dim, indices = random_indices(rng, n_index, max(dims) + 4)
    out_rank = len(batch) + rank - len(collapsed)
    offset_dims = sorted(int(d) for d in rng.choice(out_rank, rank - len(collapsed),
                                                    replace=False))
    attrs = dict(offset_dims=tuple(offset_dims), collapsed_slice_dims=tuple(collapsed),
                 start_index_map=tuple(index_map), operand_batching_dims=(),
                 start_indices_batching_dims=(), index_vector_dim=vector_dim,
                 slice_sizes=tuple(sizes), indices_are_sorted=False)
    operand = rng.normal(size=dims).astype(np.float32)
    return operand, indices, attrs


@pytest.mark.parametrize("seed", range(60))
def test_native_gather_matches_the_evaluator(seed):
    rng = np.random.default_rng(seed)
    operand, indices, attrs = random_gather(rng)
    steps = compile_and_compare(lambda b, p: b.op("gather", p[0], p[1], **attrs),
                                [operand, indices])
    assert [type(s) for s in steps] == [KernelPlan]


@pytest.mark.parametrize("seed", range(20))
def test_native_dynamic_slice_matches_the_evaluator(seed):
    rng = np.random.default_rng(1000 + seed)
    dims = [int(d) for d in rng.integers(1, 7, int(rng.integers(1, 4)))]
    sizes = tuple(int(rng.integers(0, d + 1)) for d in dims)
    operand = rng.integers(-100, 100, dims).astype(np.int32)
    dtype = np.dtype(rng.choice(INDEX_DTYPES))
    low = 0 if dtype.kind == "u" else -5
    starts = [np.asarray(rng.integers(low, d + 5), dtype) for d in dims]
    steps = compile_and_compare(
        lambda b, p: b.op("dynamic_slice", *p, slice_sizes=sizes), [operand, *starts])
    assert [type(s) for s in steps] == [KernelPlan]


def test_64_bit_unsigned_indices_stay_library_steps():
    operand = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    indices = np.array([[1], [7]], np.uint64)
    steps = compile_and_compare(lambda b, p: b.op(
        "gather", p[0], p[1], offset_dims=(1, 2), collapsed_slice_dims=(1,),
        start_index_map=(1,), operand_batching_dims=(), start_indices_batching_dims=(),
        index_vector_dim=1, slice_sizes=(2, 1, 4), indices_are_sorted=False),
        [operand, indices])
    assert [type(s) for s in steps] == [LibraryPlan]


@pytest.mark.parametrize("vector_dim", [0, 1, 2])
def test_native_gather_with_batching_dims(vector_dim):
    # operand (batch 3, 5, 4); indices hold a batch dim of 3 and 2 index vectors per batch
    rng = np.random.default_rng(vector_dim)
    operand = rng.normal(size=(3, 5, 4)).astype(np.float32)
    shape = [3, 2]
    shape.insert(vector_dim, 1)
    indices = rng.integers(-2, 7, shape).astype(np.int32)
    batch_dim = 0 if vector_dim > 0 else 1
    steps = compile_and_compare(lambda b, p: b.op(
        "gather", p[0], p[1], offset_dims=(2,), collapsed_slice_dims=(1,),
        start_index_map=(1,), operand_batching_dims=(0,),
        start_indices_batching_dims=(batch_dim,), index_vector_dim=vector_dim,
        slice_sizes=(1, 1, 4), indices_are_sorted=False), [operand, indices])
    assert [type(s) for s in steps] == [KernelPlan]


def test_vmapped_indexing_matches_numpy():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(8, 50)).astype(np.float32)
    i = rng.integers(0, 50, (8, 6)).astype(np.int32)
    f = ember.jit(ember.vmap(lambda row, idx: jnp.exp(row[idx]) + 1.0))
    np.testing.assert_allclose(np.asarray(f(x, i)),
                               np.exp(np.take_along_axis(x, i, axis=1)) + 1.0, rtol=1e-6)
    g = ember.jit(lambda a, b: jnp.take_along_axis(a, b, axis=1) * 2.0)
    np.testing.assert_array_equal(np.asarray(g(x, i)), np.take_along_axis(x, i, axis=1) * 2)


def test_jitted_indexing_runs_natively_and_matches_numpy():
    rng = np.random.default_rng(0)
    table = rng.normal(size=(1000, 64)).astype(np.float32)
    idx = rng.integers(-1000, 1000, 5000).astype(np.int32)
    f = ember.jit(lambda t, i, s: (jnp.take(t, i, axis=0), t[i, 3],
                                   lax.dynamic_slice(t, (s, 5), (7, 9))))
    rows, col, window = f(table, idx, np.int32(995))
    np.testing.assert_array_equal(np.asarray(rows), table[idx])
    np.testing.assert_array_equal(np.asarray(col), table[idx, 3])
    np.testing.assert_array_equal(np.asarray(window), table[993:1000, 5:14])
    plan = f._cache.last.executable.executable.program
    assert not any(type(s) is LibraryPlan for s in plan.steps)


def update_computation(m, kind, dtype):
    b = Builder(m, f"update_{kind}")
    cur, upd = b.parameter(0, Shape(dtype, ())), b.parameter(1, Shape(dtype, ()))
    if kind == "set":
        return b.build(upd)
    if kind == "custom":  # not a ufunc: the evaluator applies it one element at a time
        return b.build(b.op("subtract", b.op("multiply", cur, b.constant(np.asarray(2, dtype))),
                            upd))
    return b.build(b.op(kind, cur, upd))


def random_scatter(rng):
    rank = int(rng.integers(1, 4))
    dims = [int(d) for d in rng.integers(1, 6, rank)]
    n_index = int(rng.integers(1, rank + 1))
    index_map = [int(d) for d in rng.permutation(rank)[:n_index]]
    inserted = sorted(d for d in index_map if rng.random() < 0.6)
    kept = [d for d in range(rank) if d not in inserted]
    window = [int(rng.integers(0, dims[d] + 1)) for d in kept]
    batch, vector_dim, indices = random_indices(rng, n_index, max(dims) + 2)
    upd_rank = len(batch) + len(kept)
    window_dims = sorted(int(d) for d in rng.choice(upd_rank, len(kept), replace=False))
    upd_shape, b_it, w_it = [], iter(batch), iter(window)
    for i in range(upd_rank):
        upd_shape.append(next(w_it) if i in window_dims else next(b_it))
    attrs = dict(update_window_dims=tuple(window_dims), inserted_window_dims=tuple(inserted),
                 scatter_dims_to_operand_dims=tuple(index_map), input_batching_dims=(),
                 scatter_indices_batching_dims=(), index_vector_dim=vector_dim,
                 indices_are_sorted=False, unique_indices=False)
    return dims, indices, upd_shape, attrs


@pytest.mark.parametrize("seed", range(60))
def test_native_scatter_matches_the_evaluator(seed):
    rng = np.random.default_rng(2000 + seed)
    dims, indices, upd_shape, attrs = random_scatter(rng)
    kind = ["add", "set", "maximum", "multiply", "custom"][seed % 5]
    dtype = np.dtype(np.float32 if seed % 3 else np.int32)
    operand = rng.normal(size=dims).astype(dtype) if dtype.kind == "f" else \
        rng.integers(-9, 9, dims).astype(dtype)
    updates = rng.normal(size=upd_shape).astype(dtype) if dtype.kind == "f" else \
        rng.integers(-9, 9, upd_shape).astype(dtype)
    m = Module("m")
    body = update_computation(m, kind, dtype)
    b = Builder(m, "main")
    ps = [b.parameter(i, Shape(x.dtype, x.shape)) for i, x in
          enumerate([operand, indices, updates])]
    b.build(b.op("scatter", *ps, calls=[body], **attrs), entry=True)
    exe = get_backend("cpu").compile(m)
    assert [type(s) for s in exe.program.steps] == [KernelPlan]
    got, = exe.execute([operand, indices, updates])
    want = evaluate_computation(m.entry, [operand, indices, updates])
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), np.ascontiguousarray(want).view(np.uint8))


@pytest.mark.parametrize("vector_dim", [0, 1, 2])
@pytest.mark.parametrize("kind", ["add", "set", "maximum"])
@pytest.mark.parametrize("operand_batch", [0, 1])
def test_native_scatter_with_batching_dims(vector_dim, kind, operand_batch):
    # operand with a batch dim of 3 (first or second) beside dims 5 and 4; indices hold the
    # batch dim and 2 index vectors per batch element (some out of bounds: dropped)
    rng = np.random.default_rng(10 * vector_dim + operand_batch)
    dims = [5, 4]
    dims.insert(operand_batch, 3)
    operand = rng.normal(size=dims).astype(np.float32)
    shape = [3, 2]
    shape.insert(vector_dim, 1)
    indices = rng.integers(-2, 7, shape).astype(np.int32)
    batch_dim = 0 if vector_dim > 0 else 1
    updates = rng.normal(size=(3, 2, 4)).astype(np.float32)
    row = 1 if operand_batch == 0 else 0  # (the indexed operand dim, 5 long)
    m = Module("m")
    body = update_computation(m, kind, np.dtype(np.float32))
    b = Builder(m, "main")
    ps = [b.parameter(i, Shape(x.dtype, x.shape)) for i, x in
          enumerate([operand, indices, updates])]
    b.build(b.op("scatter", *ps, calls=[body], update_window_dims=(2,),
                 inserted_window_dims=(row,), scatter_dims_to_operand_dims=(row,),
                 input_batching_dims=(operand_batch,),
                 scatter_indices_batching_dims=(batch_dim,), index_vector_dim=vector_dim,
                 indices_are_sorted=False, unique_indices=False), entry=True)
    exe = get_backend("cpu").compile(m)
    assert [type(s) for s in exe.program.steps] == [KernelPlan]
    got, = exe.execute([operand, indices, updates])
    want = evaluate_computation(m.entry, [operand, indices, updates])
    np.testing.assert_array_equal(got, want)
    # and a slow loop: batch element i's updates land in its own slice only
    loop = operand.copy()
    flat = indices.reshape(3, 2)
    for i in range(3):
        for j in range(2):
            r = flat[i, j]
            if 0 <= r < 5:
                at = (i, r) if operand_batch == 0 else (r, i)
                cur, upd = loop[at], updates[i, j]
                loop[at] = {"add": cur + upd, "set": upd, "maximum": np.maximum(cur, upd)}[kind]
    np.testing.assert_array_equal(got, loop)


def test_jitted_scatters_match_numpy():
    rng = np.random.default_rng(5)
    v = rng.normal(size=20000).astype(np.float32)
    i = rng.integers(-10, 1010, 20000).astype(np.int32)
    f = ember.jit(lambda v, i: (jnp.zeros(1000, jnp.float32).at[i].add(v, mode="drop"),
                                jnp.full(1000, -np.inf, jnp.float32).at[i].max(v, mode="drop")))
    sums, maxes = f(v, i)
    j = np.where(i < 0, i + 1000, i)  # (negative indices count from the end, as in NumPy)
    ok = (j >= 0) & (j < 1000)
    want = np.zeros(1000, np.float32)
    np.add.at(want, j[ok], v[ok])
    np.testing.assert_array_equal(np.asarray(sums), want)
    want_max = np.full(1000, -np.inf, np.float32)
    np.maximum.at(want_max, j[ok], v[ok])
    np.testing.assert_array_equal(np.asarray(maxes), want_max)
    plan = f._cache.last.executable.executable.program
    assert not any(type(s) is LibraryPlan for s in plan.steps)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_take_along_axis_compiles_to_index_arithmetic(tmp_path, monkeypatch, axis):
    # The other dims are the gather's batch dims (their positions were constants the size
    # of the result, then iotas concatenated into index vectors), and the reshapes dropping
    # the index vector's unit dim keep their multi-index (they went through a linear index:
    # a division per element, 5x slower).
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    rng = np.random.default_rng(axis)
    x = rng.standard_normal((6, 40, 33)).astype(np.float32)
    shape = list(x.shape)
    shape[axis] = 5
    i = rng.integers(-x.shape[axis], x.shape[axis], shape).astype(np.int32)
    f = ember.jit(lambda a, b: jnp.take_along_axis(a, b, axis=axis))
    np.testing.assert_array_equal(np.asarray(f(x, i)), np.take_along_axis(x, i, axis=axis))
    lowered = f.lower(x, i).compile().as_text()
    assert "operand_batching_dims={}" not in lowered and "concatenate" not in lowered
    assert "s32[6,40,33]" not in lowered.split("ENTRY")[1]
    kernel = open(next(tmp_path.glob("*.llvm.ll"))).read()
    assert "udiv" not in kernel and "urem" not in kernel


@pytest.mark.parametrize("src,dst", [((4, 1, 6), (4, 6)), ((4, 6), (1, 4, 1, 6, 1)),
                                     ((1, 24, 1), (4, 6)), ((2, 1, 3, 4), (6, 1, 4)),
                                     ((5, 1), (5,)), ((3, 4, 1), (12, 1))])
def test_reshapes_around_unit_dims_match_the_evaluator(src, dst):
    # A reshape inside a transposing loop nest: its index mapping is exercised per element.
    rng = np.random.default_rng(len(src) * 10 + len(dst))
    x = rng.standard_normal(src).astype(np.float32)
    y = rng.standard_normal(dst[::-1]).astype(np.float32)

    def build(b, ps):
        r = b.op("reshape", b.op("negate", ps[0]), shape=Shape(np.dtype(np.float32), dst))
        t = b.op("transpose", ps[1], permutation=tuple(range(len(dst)))[::-1])
        return b.op("add", r, t)
    compile_and_compare(build, [x, y])
