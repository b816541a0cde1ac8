"""Lowering + HLO evaluation of the shape, slicing, gather/scatter and sorting primitives.

Each case traces ``f``, lowers the jaxpr, runs the entry computation with the NumPy HLO
evaluator and requires exactly the eager result (same dtype, shape and bits).
"""

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.compiler.evaluator import evaluate_computation
from ember.compiler.hlo import Builder, Instruction, Module, Shape
from ember.compiler.lower import lower_closed_jaxpr
from ember.compiler.verifier import verify_module

BF16 = np.dtype(ml_dtypes.bfloat16)
RNG = np.random.default_rng(0)


def lowered_eval(f, *args):
    closed = ember.make_jaxpr(f)(*args)
    lowered = lower_closed_jaxpr(closed)
    verify_module(lowered.module)
    values = [np.asarray(a) for a in args] + [np.asarray(c) for c in lowered.hoisted_consts]
    return evaluate_computation(lowered.module.entry, values)


def check(f, *args):
    got = lowered_eval(f, *args)
    want = f(*args)
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    assert isinstance(got, tuple) and len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        g = np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        if g.dtype in (BF16, np.float16):
            g, w = g.astype(np.float32), w.astype(np.float32)
        np.testing.assert_array_equal(g, w)  # NaNs compare equal here
        if np.issubdtype(g.dtype, np.floating):  # and so do -0.0 and 0.0: check the signs
            np.testing.assert_array_equal(np.signbit(g), np.signbit(w))


def arr(shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return jnp.asarray(RNG.random(shape) < 0.5)
    if np.issubdtype(dtype, np.integer):
        return jnp.asarray(RNG.integers(0, 50, shape).astype(dtype))
    if np.issubdtype(dtype, np.complexfloating):
        return jnp.asarray((RNG.normal(size=shape) + 1j * RNG.normal(size=shape)).astype(dtype))
    return jnp.asarray(RNG.normal(size=shape).astype(dtype))


DTYPES = [np.float32, np.int32, np.bool_, BF16, np.uint8]

# ----------------------------------------------------------------------------- shape ops


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,out,dims", [
    ((), (2, 3), ()), ((3,), (2, 3), (1,)), ((1, 3), (4, 3), (0, 1)),
    ((0, 3), (2, 0, 3), (1, 2)), ((2, 1), (2, 5, 3), (0, 2))])
def test_broadcast_in_dim(dtype, shape, out, dims):
    check(lambda x: lax.broadcast_in_dim(x, out, dims), arr(shape, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_reshape_squeeze_expand_transpose_rev(dtype):
    x = arr((2, 3, 4), dtype)
    check(lambda x: lax.reshape(x, (6, 4)), x)
    check(lambda x: lax.reshape(x, (4, 6), dimensions=(2, 0, 1)), x)
    check(lambda x: lax.squeeze(x[:1, :, 2:3], (0, 2)), x)
    check(lambda x: lax.expand_dims(x, (0, 2)), x)
    check(lambda x: lax.transpose(x, (2, 0, 1)), x)
    check(lambda x: lax.rev(x, (0, 2)), x)
    check(lambda x: lax.reshape(x, (0, 5)), arr((5, 0), dtype))
    check(lambda x: lax.reshape(x, (1, 1)), arr((), dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,config", [
    ((3, 4), [(1, 2, 0), (0, 1, 0)]), ((3, 4), [(-1, 1, 2), (1, -2, 0)]),
    ((4,), [(-2, -1, 1)]), ((0, 2), [(1, 1, 3), (2, 0, 1)]), ((), []),
    ((2,), [(-3, 0, 2)])])
def test_pad(dtype, shape, config):
    x = arr(shape, dtype)
    check(lambda x: lax.pad(x, np.asarray(1, dtype), config), x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_concatenate(dtype):
    a, b, c = arr((2, 3), dtype), arr((2, 0), dtype), arr((2, 1), dtype)
    check(lambda a, b, c: lax.concatenate([a, b, c, a], 1), a, b, c)
    check(lambda a: lax.concatenate([a, a], 0), a)


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.uint8, np.int8, BF16, np.float16])
def test_iota(dtype):
    check(lambda: lax.iota(dtype, 7))
    check(lambda: lax.broadcasted_iota(dtype, (2, 3, 4), 1))
    check(lambda: lax.broadcasted_iota(dtype, (0, 3), 1))


# ----------------------------------------------------------------------------- slicing


@pytest.mark.parametrize("dtype", DTYPES)
def test_slice(dtype):
    x = arr((5, 6), dtype)
    check(lambda x: lax.slice(x, (1, 0), (4, 6), (2, 4)), x)
    check(lambda x: lax.slice(x, (2, 3), (2, 5)), x)
    check(lambda x: x[::-2, 1:-1], x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("i,j", [(0, 0), (3, 2), (-1, 1), (9, -9), (-100, 100)])
def test_dynamic_slice_and_update(dtype, i, j):
    x, u = arr((5, 6), dtype), arr((2, 3), dtype)
    i, j = jnp.int32(i), jnp.int32(j)
    check(lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3)), x, i, j)
    check(lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j)), x, u, i, j)
    check(lambda x, i: lax.dynamic_slice(x, (i, 2), (0, 4)), x, i)


def test_dynamic_slice_mixed_index_types_and_rank0():
    # (``lax.dynamic_slice`` refuses mixed index types, as JAX's; the primitives, which
    # ember's own code may bind so, lower them)
    from ember.lax.slicing import dynamic_slice_p, dynamic_update_slice_p
    x = arr((6, 4), np.float32)
    for i in (np.uint8(200), np.uint32(3), np.uint32(2**32 - 1)):
        i, j = jnp.asarray(i), jnp.asarray(np.int32(-1))
        check(lambda x, i, j: dynamic_slice_p.bind(x, i, j, slice_sizes=(2, 2)), x, i, j)
        check(lambda x, i, j: dynamic_update_slice_p.bind(x, x[:1, :3], i, j), x, i, j)
        with pytest.raises(TypeError, match="same type"):
            lax.dynamic_slice(x, (i, j), (2, 2))
    s = arr((), np.int32)
    check(lambda s: lax.dynamic_slice(s, (), ()), s)
    check(lambda x, i: lax.dynamic_index_in_dim(x, i, 1, keepdims=False), x, jnp.int32(7))


GATHER_DN = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                       start_index_map=(0,))


@pytest.mark.parametrize("mode", ["clip", "fill", "promise_in_bounds"])
@pytest.mark.parametrize("dtype", DTYPES + [np.complex64])
def test_gather_modes(mode, dtype):
    x = arr((5, 3), dtype)
    idx = jnp.array([[0], [4], [5], [-1], [2], [100]], jnp.int32)
    check(lambda x, i: lax.gather(x, i, GATHER_DN, (1, 3), mode=mode), x, idx)
    dn = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(),
                                    start_index_map=(0, 1))
    idx2 = jnp.array([[0, 0], [4, 1], [3, 2], [-1, 0], [1, 1]], jnp.int32)
    check(lambda x, i: lax.gather(x, i, dn, (2, 2), mode=mode), x, idx2)


def test_gather_fill_value_and_index_types():
    x = arr((300, 2), np.float32)
    for dt in (np.int8, np.uint8, np.int16, np.uint32):
        info = np.iinfo(dt)
        idx = jnp.asarray(np.array([[0], [info.max], [max(info.min, -3)], [5]], dt))
        check(lambda x, i: lax.gather(x, i, GATHER_DN, (1, 2), mode="fill"), x, idx)
        check(lambda x, i: lax.gather(x, i, GATHER_DN, (1, 2), mode="clip"), x, idx)
    xi = arr((4, 2), np.int32)
    idx = jnp.array([[1], [9]], jnp.int32)
    check(lambda x, i: lax.gather(x, i, GATHER_DN, (1, 2), mode="fill", fill_value=7), xi, idx)
    check(lambda x, i: lax.gather(x, i, GATHER_DN, (1, 2), mode="fill"), xi, idx)
    xb = arr((4, 2), np.bool_)
    check(lambda x, i: lax.gather(x, i, GATHER_DN, (1, 2), mode="fill"), xb, idx)


def test_gather_batching_dims_size0_and_rank0():
    x = arr((3, 5, 2), np.float32)
    dn = lax.GatherDimensionNumbers(offset_dims=(2,), collapsed_slice_dims=(1,),
                                    start_index_map=(1,), operand_batching_dims=(0,),
                                    start_indices_batching_dims=(0,))
    idx = jnp.array([[[0], [4]], [[7], [2]], [[-2], [1]]], jnp.int32)
    for mode in ("clip", "fill"):
        check(lambda x, i, mode=mode: lax.gather(x, i, dn, (1, 1, 2), mode=mode), x, idx)
    empty = jnp.zeros((0, 1), jnp.int32)
    check(lambda x, i: lax.gather(x, i, GATHER_DN, (1, 3)), arr((5, 3), np.float32), empty)
    scalar_dn = lax.GatherDimensionNumbers((), (), ())
    check(lambda x, i: lax.gather(x, i, scalar_dn, ()), arr((), np.int32),
          jnp.zeros((3, 0), jnp.int32))


SCATTERS = [lax.scatter, lax.scatter_add, lax.scatter_mul, lax.scatter_min, lax.scatter_max]
SCATTER_DN = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                         scatter_dims_to_operand_dims=(0,))


@pytest.mark.parametrize("mode", ["clip", "drop", "promise_in_bounds"])
@pytest.mark.parametrize("op", SCATTERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.uint8, np.complex64])
def test_scatter_ops(op, mode, dtype):
    x = arr((5, 3), dtype)
    idx = jnp.array([[0], [4], [5], [-1], [2], [2], [100]], jnp.int32)
    upd = arr((7, 3), dtype)
    if dtype == np.bool_ and op in (lax.scatter_add, lax.scatter_mul):
        with pytest.raises(TypeError, match="bool"):  # (as in JAX)
            op(x, idx, upd, SCATTER_DN, mode=mode)
        return
    check(lambda x, i, u: op(x, i, u, SCATTER_DN, mode=mode), x, idx, upd)
    # Windows wider than one row: partially out-of-bounds windows are dropped or clamped.
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1, 2), inserted_window_dims=(),
                                     scatter_dims_to_operand_dims=(0, 1))
    idx2 = jnp.array([[0, 0], [4, 1], [3, 1], [-1, 0], [3, 2]], jnp.int32)
    upd2 = arr((5, 2, 2), dtype)
    check(lambda x, i, u: op(x, i, u, dn, mode=mode), x, idx2, upd2)


def test_scatter_batching_rank0_and_small_index_types():
    x = arr((3, 5), np.float32)
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(1,),
                                     scatter_dims_to_operand_dims=(1,),
                                     operand_batching_dims=(0,),
                                     scatter_indices_batching_dims=(0,))
    idx = jnp.array([[[0], [4]], [[7], [4]], [[-2], [1]]], jnp.int32)
    upd = arr((3, 2), np.float32)
    for mode in ("clip", "drop"):
        check(lambda x, i, u, mode=mode: lax.scatter_add(x, i, u, dn, mode=mode), x, idx, upd)
    s = arr((), np.float32)
    dn0 = lax.ScatterDimensionNumbers((), (), ())
    check(lambda s, u: lax.scatter_add(s, jnp.zeros((3, 0), jnp.int32), u, dn0), s,
          arr((3,), np.float32))
    big = arr((300, 2), np.float32)
    for dt in (np.int8, np.uint8):
        i8 = jnp.asarray(np.array([[np.iinfo(dt).max], [0], [max(np.iinfo(dt).min, -1)]], dt))
        for mode in ("clip", "drop"):
            check(lambda x, i, u, mode=mode: lax.scatter(x, i, u, SCATTER_DN, mode=mode), big,
                  i8, arr((3, 2), np.float32))


# ----------------------------------------------------------------------------- sorting


SPECIAL = np.array([3., np.nan, -0., 0., 1., np.nan, -2., np.inf, -np.inf, 0., 1., -0.],
                   np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.int32, np.uint8, np.bool_])
def test_sort_one_operand(dtype):
    x = jnp.asarray(SPECIAL.astype(dtype)) if np.issubdtype(dtype, np.floating) or \
        dtype == BF16 else arr((12,), dtype)
    check(lambda x: lax.sort(x), x)
    y = arr((3, 4, 5), dtype)
    check(lambda y: lax.sort(y, dimension=1), y)
    check(lambda y: lax.sort(y, dimension=0), y)
    check(lambda y: lax.sort(y), arr((2, 0), dtype))


def test_sort_multiple_operands_and_keys():
    k1 = jnp.asarray(RNG.integers(0, 3, (4, 40)).astype(np.int32))
    k2 = jnp.asarray(np.where(RNG.random((4, 40)) < 0.2, np.nan,
                              RNG.integers(0, 3, (4, 40))).astype(np.float32))
    v = jnp.asarray(RNG.normal(size=(4, 40)).astype(np.float32))
    for num_keys in (1, 2, 3):
        check(lambda a, b, c, nk=num_keys: lax.sort((a, b, c), dimension=1, num_keys=nk),
              k1, k2, v)
    check(lambda a, b: lax.sort_key_val(a, b, dimension=0), k2, v)
    check(lambda a: lax.sort(a, is_stable=False), k2)


def test_sort_long_rows_match_eager():
    x = jnp.asarray(RNG.integers(0, 20, (3, 1000)).astype(np.float32))
    check(lambda x: jnp.argsort(x, axis=-1), x)
    check(lambda x: lax.sort(x, dimension=0), x.T)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, BF16])
def test_top_k(dtype):
    x = jnp.asarray(SPECIAL.astype(dtype)) if dtype in (np.float32, BF16) else arr((12,), dtype)
    for k in (0, 1, 5, 12):
        check(lambda x, k=k: lax.top_k(x, k), x)
    check(lambda y: lax.top_k(y, 3), arr((2, 3, 6), dtype))


# ----------------------------------------------------------------------------- numpy level


def test_numpy_indexing():
    x = arr((4, 5, 3), np.float32)
    check(lambda x: x[1, ::-1, None, 1:], x)
    check(lambda x, i: x[i], x, jnp.array([0, 3, -1, -4]))
    check(lambda x, i: x[:, i, 1], x, jnp.array([[0, 4], [2, 2]]))
    check(lambda x, i, j: x[i, 2:, j], x, jnp.array([1, 3]), jnp.array([0, 2]))
    check(lambda x, i: x[i], x, jnp.int32(2))
    check(lambda x, i: jnp.take(x, i, axis=1, mode="wrap"), x, jnp.array([7, -1]))
    check(lambda x, i: jnp.take(x, i, axis=1, mode="fill", fill_value=-1.0), x,
          jnp.array([7, -9, 1]))


def test_numpy_at_updates():
    x = arr((5, 3), np.float32)
    i = jnp.array([0, 2, 0, 7, -1])
    u = arr((5, 3), np.float32)
    check(lambda x, i, u: x.at[i].set(u), x, i, u)
    check(lambda x, i, u: x.at[i].add(u), x, i, u)
    check(lambda x, i, u: x.at[i].multiply(u), x, i, u)
    check(lambda x, i, u: x.at[i].min(u), x, i, u)
    check(lambda x, i, u: x.at[i].max(u), x, i, u)
    check(lambda x, i: x.at[i, 1].add(1.0, mode="clip"), x, i)
    check(lambda x, i: x.at[i].get(mode="fill", fill_value=0.5), x, i)
    check(lambda x: x.at[1:3, ::2].set(0.0), x)


def test_numpy_sorting_and_shape_functions():
    x = jnp.asarray(np.where(RNG.random((4, 9)) < 0.2, np.nan,
                             RNG.integers(-3, 3, (4, 9))).astype(np.float32))
    check(lambda x: jnp.sort(x, axis=0), x)
    check(lambda x: jnp.argsort(x, axis=1), x)
    check(lambda x: jnp.argsort(x, axis=1, descending=True), x)
    check(lambda x: jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1), x)
    check(lambda x: jnp.lexsort((x[0], x[1])), x)
    for mode in ("constant", "edge", "reflect", "wrap", "symmetric"):
        check(lambda x, mode=mode: jnp.pad(x, ((1, 2), (3, 0)), mode=mode), x)
    check(lambda x: jnp.roll(x, 3, axis=1), x)
    check(lambda x: jnp.roll(x, -5), x)
    check(lambda x: jnp.concatenate([x, x[:1], jnp.zeros((0, 9), x.dtype)]), x)
    check(lambda x: jnp.flip(jnp.swapaxes(x, 0, 1), 0).reshape(-1), x)


# ----------------------------------------------------------------------------- evaluator only


def _scalar(dtype):
    return Shape(np.dtype(dtype), ())


def test_gather_explicit_index_vector_dim():
    # index_vector_dim 0 instead of last: index vectors are columns.
    m = Module("m")
    b = Builder(m, "main")
    x = b.parameter(0, Shape(np.float32, (4, 5)))
    idx = b.parameter(1, Shape(np.int32, (2, 3)))
    g = b.op("gather", x, idx, offset_dims=(), collapsed_slice_dims=(0, 1),
             operand_batching_dims=(), start_indices_batching_dims=(), start_index_map=(0, 1),
             index_vector_dim=0, slice_sizes=(1, 1), indices_are_sorted=False)
    b.build(g, entry=True)
    xv = np.arange(20, dtype=np.float32).reshape(4, 5)
    iv = np.array([[0, 3, 9], [1, 4, -2]], np.int32)
    got = evaluate_computation(m.entry, [xv, iv])
    rows, cols = np.clip(iv[0], 0, 3), np.clip(iv[1], 0, 4)
    np.testing.assert_array_equal(got, xv[rows, cols])


def test_scatter_general_update_computation():
    m = Module("m")
    ub = Builder(m, "update")
    cur, upd = ub.parameter(0, _scalar(np.int32)), ub.parameter(1, _scalar(np.int32))
    fn = ub.build(ub.op("subtract", ub.op("multiply", cur, ub.constant(np.int32(2))), upd))
    b = Builder(m, "main")
    x = b.parameter(0, Shape(np.int32, (4,)))
    idx = b.parameter(1, Shape(np.int32, (5, 1)))
    u = b.parameter(2, Shape(np.int32, (5,)))
    s = b.op("scatter", x, idx, u, calls=[fn], update_window_dims=(),
             inserted_window_dims=(0,), input_batching_dims=(),
             scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=(0,),
             index_vector_dim=1, indices_are_sorted=False, unique_indices=False)
    b.build(s, entry=True)
    xv, iv, uv = np.arange(4, dtype=np.int32), np.array([[1], [3], [1], [4], [-1]], np.int32), \
        np.array([5, 6, 7, 8, 9], np.int32)
    want = xv.copy()
    for i, v in zip(iv[:, 0], uv):
        if 0 <= i < 4:
            want[i] = want[i] * 2 - v
    got = evaluate_computation(m.entry, [xv, iv, uv])
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def test_scatter_variadic_general_path():
    # Two operands updated together: (a, b) <- (a + ua, max(b, ub)); built by hand since the
    # lowering only emits single-operand scatters.
    m = Module("m")
    ub = Builder(m, "update")
    a, bb, ua, ubb = (ub.parameter(i, _scalar(np.float32)) for i in range(4))
    fn = ub.build(ub.op("tuple", ub.op("add", a, ua), ub.op("maximum", bb, ubb)))
    x, y = np.zeros(3, np.float32), np.full(3, -1.0, np.float32)
    iv = np.array([[2], [0], [2], [3]], np.int32)
    uxa, uyb = np.array([1, 2, 3, 4], np.float32), np.array([5, -7, 2, 9], np.float32)
    f32 = Shape(np.float32, (3,))
    params = [Instruction("parameter", [], s, {"index": i}, (), f"p{i}") for i, s in
              enumerate([f32, f32, Shape(np.int32, (4, 1)), Shape(np.float32, (4,)),
                         Shape(np.float32, (4,))])]
    inst = Instruction("scatter", [params[0], params[1], params[2], params[3], params[4]],
                       Shape.tuple([f32, f32]),
                       dict(update_window_dims=(), inserted_window_dims=(0,),
                            input_batching_dims=(), scatter_indices_batching_dims=(),
                            scatter_dims_to_operand_dims=(0,), index_vector_dim=1,
                            indices_are_sorted=False, unique_indices=False), [fn], "s")
    from ember.compiler.evaluator import evaluate_instruction
    gx, gy = evaluate_instruction(inst, [x, y, iv, uxa, uyb])
    np.testing.assert_array_equal(gx, [2, 0, 4])
    np.testing.assert_array_equal(gy, [-1, -1, 5])


def _sort_module(comparator_via_call: bool):
    m = Module("m")
    inner = Builder(m, "less")
    p = [inner.parameter(i, _scalar(np.float32)) for i in range(2)]
    less = inner.build(inner.op("compare", p[0], p[1], comparison_direction="GT"))
    cb = Builder(m, "cmp")
    q = [cb.parameter(i, _scalar(t)) for i, t in enumerate([np.float32] * 2 + [np.int32] * 2)]
    if comparator_via_call:
        root = cb.op("call", q[0], q[1], calls=[less])
    else:
        root = cb.op("compare", q[0], q[1], comparison_direction="GT")
    cmp = cb.build(root)
    b = Builder(m, "main")
    x = b.parameter(0, Shape(np.float32, (3, 50)))
    i = b.parameter(1, Shape(np.int32, (3, 50)))
    s = b.op("sort", x, i, calls=[cmp], dimension=1, is_stable=True)
    b.build(s, entry=True)
    return m


def test_sort_general_comparator_paths_agree():
    xv = RNG.integers(0, 6, (3, 50)).astype(np.float32)
    iv = np.broadcast_to(np.arange(50, dtype=np.int32), (3, 50))
    fast = evaluate_computation(_sort_module(False).entry, [xv, iv])
    slow = evaluate_computation(_sort_module(True).entry, [xv, iv])
    order = np.argsort(-xv, axis=1, kind="stable")
    for got in (fast, slow):
        np.testing.assert_array_equal(got[0], np.take_along_axis(xv, order, 1))
        np.testing.assert_array_equal(got[1], order)
