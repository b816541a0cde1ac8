"""Batching rules of the reduction and slicing primitives: vmap vs a Python loop.

Each test maps a lax-level function (mostly a direct ``bind`` of one primitive, so no other
primitive's rule is involved) over a batch axis placed at the front, in the middle or at the
end of its arguments, with every mapped/unmapped combination of operands, and compares the
result with the unbatched function applied to each batch element in a Python loop and
stacked. Index operands include negative and out-of-range values, so the clamping (CLIP),
filling and dropping (FILL_OR_DROP) semantics must survive batching.
"""

import itertools

import numpy as np
import pytest

import ember
from ember.lax import elementwise as E
from ember.lax import reduction as R
from ember.lax import shape as S
from ember.lax import slicing as L
from ember.lax.slicing import GatherDimensionNumbers as GDN
from ember.lax.slicing import GatherScatterMode
from ember.lax.slicing import ScatterDimensionNumbers as SDN

B = 3
CLIP, FILL, PROMISE = (GatherScatterMode.CLIP, GatherScatterMode.FILL_OR_DROP,
                       GatherScatterMode.PROMISE_IN_BOUNDS)


# ---------------------------------------------------------------- helpers


def _example(rng, shape, dtype, lo=-5, hi=6):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(dtype, np.unsignedinteger):
        lo = max(lo, 0)
    return rng.integers(lo, hi, shape).astype(dtype)


def _stack_at(examples, axis):
    return np.stack(examples, axis=axis)


def _take(a, b, axis):
    return a if axis is None else np.take(a, b, axis=axis)


def check_vmap(f, args, in_axes, *, jit=False, size=None):
    """``vmap(f, in_axes)(*args)`` equals ``f`` on each batch element, stacked (same dtype;
    values exact, floats within a few ulps)."""
    fn = ember.vmap(f, in_axes=in_axes, axis_size=size)
    if jit:
        fn = ember.jit(fn)
    with np.errstate(all="ignore"):
        got = np.asarray(fn(*args))
    n = size if size is not None else next(
        np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    with np.errstate(all="ignore"):
        per = [np.asarray(f(*[_take(a, b, ax) for a, ax in zip(args, in_axes)]))
               for b in range(n)]
    expected = np.stack(per)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    if np.issubdtype(got.dtype, np.inexact):
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                                   rtol=2e-3 if got.dtype.itemsize == 2 else 1e-6,
                                   atol=0, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)
    return got


def _missing_rules(*prims):
    return [p.name for p in prims if p.batch is None]


# Rules that run inside a vmapped function when a rule of this file moves or materializes a
# batch dim (the shape and elementwise rules land separately).
_HELPER_PRIMS = (S.transpose_p, S.broadcast_in_dim_p, S.concatenate_p, E.clamp_p,
                 E.convert_element_type_p)
needs_helper_rules = pytest.mark.skipif(
    bool(_missing_rules(*_HELPER_PRIMS)),
    reason=f"needs batching rules of {_missing_rules(*_HELPER_PRIMS)}")


# ---------------------------------------------------------------- reductions

_REDUCE = {"sum": R.reduce_sum_p, "prod": R.reduce_prod_p, "max": R.reduce_max_p,
           "min": R.reduce_min_p, "and": R.reduce_and_p, "or": R.reduce_or_p,
           "xor": R.reduce_xor_p}
_REDUCE_DTYPES = {"sum": (np.float32, np.int32, np.float16),
                  "prod": (np.float32, np.int8, np.float16),
                  "max": (np.float32, np.int32, np.bool_, np.float16),
                  "min": (np.float32, np.uint8, np.bool_),
                  "and": (np.int32, np.bool_), "or": (np.uint8, np.bool_),
                  "xor": (np.int16, np.bool_)}


@pytest.mark.parametrize("name,dtype", [(n, d) for n, ds in _REDUCE_DTYPES.items() for d in ds],
                         ids=lambda v: v if isinstance(v, str) else np.dtype(v).name)
@pytest.mark.parametrize("axes", [(), (0,), (1,), (2,), (0, 2), (2, 0), (0, 1, 2)],
                         ids=str)
@pytest.mark.parametrize("bdim", [0, 1, 3])
def test_reduce(name, dtype, axes, bdim):
    rng = np.random.default_rng(0)
    x = _stack_at([_example(rng, (2, 3, 4), dtype, -3, 4) for _ in range(B)], bdim)
    check_vmap(lambda v: _REDUCE[name].bind(v, axes=axes), [x], (bdim,))


@pytest.mark.parametrize("name", ["sum", "max", "min", "prod", "or"])
def test_reduce_empty(name):
    # A size-0 reduced axis gives the identity; a size-0 batch gives an empty result.
    dt = np.bool_ if name == "or" else np.float32
    x = np.zeros((B, 0, 4), dt)
    check_vmap(lambda v: _REDUCE[name].bind(v, axes=(0,)), [x], (0,))
    check_vmap(lambda v: _REDUCE[name].bind(v, axes=(1,)), [np.zeros((2, B, 0), dt)], (1,))
    out = ember.vmap(lambda v: _REDUCE[name].bind(v, axes=(1,)))(np.zeros((0, 2, 4), dt))
    assert out.shape == (0, 2)


@pytest.mark.parametrize("prim", [R.argmax_p, R.argmin_p], ids=lambda p: p.name)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.float16])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("bdim", [0, 1, 2])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int8])
def test_argminmax(prim, dtype, axis, bdim, index_dtype):
    rng = np.random.default_rng(1)
    xs = [_example(rng, (4, 5), dtype, -2, 3) for _ in range(B)]  # many ties
    if dtype == np.float32:
        xs[1][1, 2] = np.nan  # the first NaN wins
    x = _stack_at(xs, bdim)
    check_vmap(lambda v: prim.bind(v, axes=(axis,), index_dtype=np.dtype(index_dtype)), [x],
               (bdim,))


_CUM = [R.cumsum_p, R.cumprod_p, R.cummax_p, R.cummin_p, R.cumlogsumexp_p]


@pytest.mark.parametrize("prim", _CUM, ids=lambda p: p.name)
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("bdim", [0, 2, 3])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative(prim, axis, bdim, reverse):
    rng = np.random.default_rng(2)
    x = _stack_at([rng.standard_normal((2, 3, 4)).astype(np.float32) for _ in range(B)], bdim)
    check_vmap(lambda v: prim.bind(v, axis=axis, reverse=reverse), [x], (bdim,))


@pytest.mark.parametrize("prim,dtype", [(R.cumsum_p, np.int32), (R.cumprod_p, np.int8),
                                        (R.cummax_p, np.uint8), (R.cummin_p, np.float16),
                                        (R.cumlogsumexp_p, np.float16)],
                         ids=lambda v: getattr(v, "name", None) or np.dtype(v).name)
def test_cumulative_dtypes(prim, dtype):
    rng = np.random.default_rng(3)
    x = _stack_at([_example(rng, (5, 2), dtype, -3, 4) for _ in range(B)], 1)
    check_vmap(lambda v: prim.bind(v, axis=0, reverse=True), [x], (1,))
    check_vmap(lambda v: prim.bind(v, axis=0, reverse=False), [np.zeros((B, 0, 2), dtype)],
               (0,))


def test_reduction_rules_under_jit():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, B, 5)).astype(np.float32)
    check_vmap(lambda v: R.reduce_max_p.bind(v, axes=(0,)), [x], (1,), jit=True)
    check_vmap(lambda v: R.argmin_p.bind(v, axes=(1,), index_dtype=np.dtype(np.int32)), [x],
               (1,), jit=True)
    check_vmap(lambda v: R.cumsum_p.bind(v, axis=1, reverse=True), [x], (1,), jit=True)


def test_nested_vmap_reductions():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, B, 4, 5)).astype(np.float32)

    def f(v):  # v: (4, 5)
        return R.reduce_sum_p.bind(R.cumsum_p.bind(v, axis=1, reverse=False), axes=(0,))

    got = ember.vmap(ember.vmap(f))(x)
    expected = np.stack([np.stack([np.asarray(f(x[i, j])) for j in range(B)])
                         for i in range(2)])
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-6)


# ---------------------------------------------------------------- slice


@pytest.mark.parametrize("strides", [None, (2, 1, 3)], ids=["unit", "strided"])
@pytest.mark.parametrize("bdim", [0, 1, 3])
def test_slice(strides, bdim):
    rng = np.random.default_rng(6)
    x = _stack_at([rng.standard_normal((5, 4, 7)).astype(np.float32) for _ in range(B)], bdim)
    check_vmap(lambda v: L.slice_p.bind(v, start_indices=(1, 0, 2), limit_indices=(5, 3, 7),
                                        strides=strides), [x], (bdim,))
    check_vmap(lambda v: L.slice_p.bind(v, start_indices=(2, 0, 0), limit_indices=(2, 4, 7),
                                        strides=strides), [x], (bdim,))  # empty


# ---------------------------------------------------------------- dynamic_slice


def _ds(sizes):
    def f(x, i, j):
        return L.dynamic_slice_p.bind(x, i, j, slice_sizes=sizes)
    return f


# Start indices cover the clamped range: negative (clamped to 0) and past the end.
_STARTS = [-3, 0, 1, 4, 9]


@pytest.mark.parametrize("mapped", [m for m in itertools.product([0, 1], repeat=3) if any(m)],
                         ids=lambda m: "".join("m" if v else "u" for v in m))
@pytest.mark.parametrize("bdim", [0, 1, 2])
@pytest.mark.parametrize("idx_dtypes", [(np.int32, np.int32), (np.int8, np.int32),
                                        (np.uint8, np.int16)], ids=str)
def test_dynamic_slice(mapped, bdim, idx_dtypes):
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal((5, 6)).astype(np.float32) for _ in range(B)]
    mx, mi, mj = mapped
    di, dj = idx_dtypes
    x = _stack_at(xs, bdim) if mx else xs[0]
    i = np.array(rng.choice(_STARTS, B), dtype=np.int64)
    j = np.array(rng.choice(_STARTS, B), dtype=np.int64)
    if np.dtype(di).kind == "u":
        i = np.abs(i)
    args = [x, i.astype(di) if mi else di(i[0] % 7), j.astype(dj) if mj else dj(j[0])]
    in_axes = (bdim if mx else None, 0 if mi else None, 0 if mj else None)
    check_vmap(_ds((2, 3)), args, in_axes)
    check_vmap(_ds((5, 0)), args, in_axes)


def test_dynamic_slice_every_start_clamps_like_the_loop():
    # One batch element per start pair: all clamping cases at once, dtype int8 operand.
    x = np.arange(30, dtype=np.int8).reshape(5, 6)
    starts = np.array(list(itertools.product(_STARTS, repeat=2)), np.int32)
    check_vmap(_ds((3, 4)), [x, starts[:, 0], starts[:, 1]], (None, 0, 0))
    check_vmap(_ds((3, 4)), [x, starts[:, 0], starts[:, 1]], (None, 0, 0), jit=True)


@pytest.mark.parametrize("dtype", [np.bool_, np.float16, np.uint32])
def test_dynamic_slice_dtypes_under_jit(dtype):
    rng = np.random.default_rng(8)
    x = _stack_at([_example(rng, (4, 5), dtype) for _ in range(B)], 2)
    i = np.array([-1, 2, 7], np.int32)
    check_vmap(_ds((2, 2)), [x, i, np.int32(1)], (2, 0, None), jit=True)
    check_vmap(_ds((2, 2)), [x, np.int32(3), np.int32(1)], (2, None, None), jit=True)


# ---------------------------------------------------------------- dynamic_update_slice


def _dus(x, u, i, j):
    return L.dynamic_update_slice_p.bind(x, u, i, j)


@pytest.mark.parametrize("mapped", [m for m in itertools.product([0, 1], repeat=4) if any(m)],
                         ids=lambda m: "".join("m" if v else "u" for v in m))
@pytest.mark.parametrize("where", ["front", "back"])
def test_dynamic_update_slice(mapped, where):
    rng = np.random.default_rng(9)
    mx, mu, mi, mj = mapped
    xs = [rng.standard_normal((5, 6)).astype(np.float32) for _ in range(B)]
    us = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(B)]
    dx, du = (0, 0) if where == "front" else (2, 1)
    i = np.array(rng.choice(_STARTS, B), np.int32)
    j = np.array(rng.choice(_STARTS, B), np.int32)
    args = [_stack_at(xs, dx) if mx else xs[0], _stack_at(us, du) if mu else us[0],
            i if mi else i[0], j if mj else j[0]]
    in_axes = (dx if mx else None, du if mu else None, 0 if mi else None, 0 if mj else None)
    check_vmap(_dus, args, in_axes)


def test_dynamic_update_slice_every_start_and_jit():
    x = np.arange(30, dtype=np.int32).reshape(5, 6)
    u = -np.arange(12, dtype=np.int32).reshape(3, 4)
    starts = np.array(list(itertools.product(_STARTS, repeat=2)), np.int32)
    for jit in (False, True):
        check_vmap(_dus, [x, u, starts[:, 0], starts[:, 1]], (None, None, 0, 0), jit=jit)
    us = np.stack([u, u + 100, u - 100])
    check_vmap(_dus, [x, us, np.int32(4), np.int32(-1)], (None, 0, None, None), jit=True)


@pytest.mark.parametrize("dtype", [np.bool_, np.float16, np.uint8])
def test_dynamic_update_slice_dtypes_and_empty(dtype):
    rng = np.random.default_rng(10)
    x = _stack_at([_example(rng, (4, 5), dtype) for _ in range(B)], 1)
    u = _example(rng, (2, 2), dtype)
    i = np.array([-2, 1, 3], np.int8)
    j = np.array([0, 9, 2], np.int32)
    check_vmap(_dus, [x, u, i, j], (1, None, 0, 0))
    check_vmap(_dus, [x, np.zeros((0, 2), dtype), i, j], (1, None, 0, 0))
    check_vmap(_dus, [np.zeros((B, 0, 2), dtype), np.zeros((0, 2), dtype), i, j],
               (0, None, 0, 0))


# ---------------------------------------------------------------- gather

# name -> (operand shape, indices shape, dimension numbers, slice sizes); indices index the
# last dimension's entries into the operand dims of start_index_map.
_GATHERS = {
    "rows": ((5, 3), (4, 1), GDN((1,), (0,), (0,)), (1, 3)),
    "elements": ((4, 5), (3, 2), GDN((), (0, 1), (0, 1)), (1, 1)),
    "windows": ((6, 5), (2, 2), GDN((1, 2), (), (1, 0)), (3, 2)),
    "batching_dims": ((3, 5), (3, 2, 1), GDN((), (1,), (1,), (0,), (0,)), (1, 1)),
    "offset_in_middle": ((5, 4), (2, 3, 1), GDN((1,), (0,), (0,)), (1, 4)),
    "no_index_dims": ((4, 3), (2, 0), GDN((1, 2), (), ()), (2, 3)),
}


def _indices(rng, shape, operand_shape, dn, dtype=np.int32):
    # Roughly a third out of range (negative or past the end) to exercise clip/fill.
    hi = max(operand_shape[d] for d in dn.start_index_map) if dn.start_index_map else 1
    return rng.integers(-3, hi + 3, shape).astype(dtype)


def _gather_fn(dn, sizes, mode, fill_value=None):
    def f(x, idx):
        return L.gather_p.bind(x, idx, dimension_numbers=dn, slice_sizes=sizes,
                               indices_are_sorted=False, unique_indices=False, mode=mode,
                               fill_value=fill_value)
    return f


def _gather_args(config, mapped, where, seed, dtype=np.float32):
    op_shape, ix_shape, dn, sizes = _GATHERS[config]
    rng = np.random.default_rng(seed)
    mo, mi = mapped
    ops = [_example(rng, op_shape, dtype, -50, 50) for _ in range(B)]
    ixs = [_indices(rng, ix_shape, op_shape, _GATHERS[config][2]) for _ in range(B)]
    do = 0 if where == "front" else len(op_shape)
    di = 0 if where == "front" else len(ix_shape)  # after the index vector dim
    if where == "middle":
        do, di = 1, len(ix_shape) - 1
    args = [_stack_at(ops, do) if mo else ops[0], _stack_at(ixs, di) if mi else ixs[0]]
    return args, (do if mo else None, di if mi else None), dn, sizes


_MAPPED2 = [(1, 0), (0, 1), (1, 1)]


@pytest.mark.parametrize("config", list(_GATHERS))
@pytest.mark.parametrize("mode,fill", [(CLIP, None), (FILL, None), (FILL, 0.5),
                                       (PROMISE, None)], ids=["clip", "fill", "fill0.5",
                                                              "promise"])
@pytest.mark.parametrize("mapped", _MAPPED2, ids=["op", "idx", "both"])
@pytest.mark.parametrize("where", ["front", "middle", "back"])
def test_gather(config, mode, fill, mapped, where):
    args, in_axes, dn, sizes = _gather_args(config, mapped, where, seed=11)
    check_vmap(_gather_fn(dn, sizes, mode, fill), args, in_axes)


@pytest.mark.parametrize("config", ["rows", "windows", "batching_dims"])
@pytest.mark.parametrize("mapped", _MAPPED2, ids=["op", "idx", "both"])
@pytest.mark.parametrize("mode", [CLIP, FILL], ids=["clip", "fill"])
def test_gather_under_jit(config, mapped, mode):
    args, in_axes, dn, sizes = _gather_args(config, mapped, "back", seed=12)
    check_vmap(_gather_fn(dn, sizes, mode), args, in_axes, jit=True)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint32, np.float16])
@pytest.mark.parametrize("mapped", _MAPPED2, ids=["op", "idx", "both"])
def test_gather_dtypes(dtype, mapped):
    args, in_axes, dn, sizes = _gather_args("rows", mapped, "middle", seed=13, dtype=dtype)
    check_vmap(_gather_fn(dn, sizes, FILL), args, in_axes)
    check_vmap(_gather_fn(dn, sizes, CLIP), args, in_axes)


def test_gather_empty():
    dn, sizes = _GATHERS["rows"][2:]
    x = np.arange(2 * 15, dtype=np.float32).reshape(2, 5, 3)
    no_rows = np.zeros((2, 0, 1), np.int32)
    check_vmap(_gather_fn(dn, sizes, CLIP), [x, no_rows], (0, 0))
    check_vmap(_gather_fn(dn, sizes, FILL), [x[0], no_rows], (None, 0))
    # A size-0 batch.
    out = ember.vmap(_gather_fn(dn, sizes, CLIP))(np.zeros((0, 5, 3), np.float32),
                                                   np.zeros((0, 4, 1), np.int32))
    assert out.shape == (0, 4, 3)
    out = ember.jit(ember.vmap(_gather_fn(dn, sizes, FILL)))(np.zeros((0, 5, 3), np.float32),
                                                             np.zeros((0, 4, 1), np.int32))
    assert out.shape == (0, 4, 3)


def test_gather_both_mapped_uses_batching_dims():
    dn, sizes = _GATHERS["rows"][2:]
    jaxpr = ember.make_jaxpr(ember.vmap(_gather_fn(dn, sizes, CLIP)))(
        np.zeros((B, 5, 3), np.float32), np.zeros((B, 4, 1), np.int32))
    text = str(jaxpr)
    assert "operand_batching_dims=(0,)" in text and "start_indices_batching_dims=(0,)" in text
    assert text.count("gather") == 1


def test_gather_both_mapped_matches_jax():
    jax = pytest.importorskip("jax")
    args, in_axes, dn, sizes = _gather_args("windows", (1, 1), "back", seed=14)
    for mode, jmode in ((CLIP, "clip"), (FILL, "fill")):
        got = ember.vmap(_gather_fn(dn, sizes, mode), in_axes=in_axes)(*args)
        jdn = jax.lax.GatherDimensionNumbers(offset_dims=dn.offset_dims,
                                             collapsed_slice_dims=dn.collapsed_slice_dims,
                                             start_index_map=dn.start_index_map)
        expected = jax.vmap(lambda x, i, jdn=jdn, jmode=jmode: jax.lax.gather(
            x, i, jdn, sizes, mode=jmode), in_axes=in_axes)(*args)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))


# ---------------------------------------------------------------- scatter

# name -> (operand shape, indices shape, updates shape, dimension numbers)
_SCATTERS = {
    "rows": ((5, 3), (4, 1), (4, 3), SDN((1,), (0,), (0,))),
    "elements": ((4, 5), (3, 2), (3,), SDN((), (0, 1), (0, 1))),
    "windows": ((6, 5), (2, 1), (2, 6, 2), SDN((1, 2), (), (1,))),
    "batching_dims": ((3, 5), (3, 2, 1), (3, 2), SDN((), (1,), (1,), (0,), (0,))),
    "two_index_dims": ((5,), (2, 3, 1), (2, 3), SDN((), (0,), (0,))),
}
_SCATTER_PRIMS = [L.scatter_p, L.scatter_add_p, L.scatter_mul_p, L.scatter_min_p,
                  L.scatter_max_p]


def _scatter_fn(prim, dn, mode):
    def f(x, idx, upd):
        return prim.bind(x, idx, upd, dimension_numbers=dn, indices_are_sorted=False,
                         unique_indices=False, mode=mode, update_jaxpr=None,
                         update_consts=())
    return f


def _scatter_args(config, mapped, where, seed, dtype=np.float32):
    op_shape, ix_shape, up_shape, dn = _SCATTERS[config]
    rng = np.random.default_rng(seed)
    lo, hi = (0, 3) if dtype == np.bool_ else (-4, 5)  # small values: products stay exact
    ops = [_example(rng, op_shape, dtype, lo, hi) for _ in range(B)]
    ixs = [_indices(rng, ix_shape, op_shape, GDN((), (), dn.scatter_dims_to_operand_dims))
           for _ in range(B)]
    ups = [_example(rng, up_shape, dtype, lo, hi) for _ in range(B)]
    axes = {"front": (0, 0, 0), "back": (len(op_shape), len(ix_shape), len(up_shape)),
            "middle": (1, len(ix_shape) - 1, len(up_shape) - 1)}[where]
    args, in_axes = [], []
    for m, vals, ax in zip(mapped, (ops, ixs, ups), axes):
        args.append(_stack_at(vals, ax) if m else vals[0])
        in_axes.append(ax if m else None)
    return args, tuple(in_axes), dn


_MAPPED3 = [m for m in itertools.product([0, 1], repeat=3) if any(m)]


@pytest.mark.parametrize("prim", _SCATTER_PRIMS, ids=lambda p: p.name)
@pytest.mark.parametrize("config", list(_SCATTERS))
@pytest.mark.parametrize("mapped", _MAPPED3,
                         ids=lambda m: "".join("m" if v else "u" for v in m))
@pytest.mark.parametrize("mode", [CLIP, FILL], ids=["clip", "drop"])
def test_scatter(prim, config, mapped, mode):
    # A deterministic spread of batch-dim positions over the cases.
    where = ["front", "middle", "back"][(len(prim.name) + len(config) + 2 * mapped[0]
                                         + mapped[1]) % 3]
    args, in_axes, dn = _scatter_args(config, mapped, where, seed=15)
    check_vmap(_scatter_fn(prim, dn, mode), args, in_axes)


@pytest.mark.parametrize("where", ["front", "middle", "back"])
@pytest.mark.parametrize("mapped", _MAPPED3,
                         ids=lambda m: "".join("m" if v else "u" for v in m))
def test_scatter_add_positions(where, mapped):
    args, in_axes, dn = _scatter_args("rows", mapped, where, seed=16, dtype=np.int32)
    check_vmap(_scatter_fn(L.scatter_add_p, dn, FILL), args, in_axes)


@pytest.mark.parametrize("prim", _SCATTER_PRIMS, ids=lambda p: p.name)
@pytest.mark.parametrize("mapped", [(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 1)],
                         ids=lambda m: "".join("m" if v else "u" for v in m))
def test_scatter_under_jit(prim, mapped):
    args, in_axes, dn = _scatter_args("windows", mapped, "back", seed=17)
    check_vmap(_scatter_fn(prim, dn, FILL), args, in_axes, jit=True)
    args, in_axes, dn = _scatter_args("batching_dims", mapped, "front", seed=17)
    check_vmap(_scatter_fn(prim, dn, CLIP), args, in_axes, jit=True)


@pytest.mark.parametrize("prim,dtype", [(L.scatter_p, np.bool_), (L.scatter_add_p, np.int8),
                                        (L.scatter_mul_p, np.float16),
                                        (L.scatter_min_p, np.uint32),
                                        (L.scatter_max_p, np.bool_),
                                        (L.scatter_add_p, np.float16)],
                         ids=lambda v: getattr(v, "name", None) or np.dtype(v).name)
def test_scatter_dtypes(prim, dtype):
    for mapped in ((1, 0, 1), (0, 1, 0), (1, 1, 1)):
        args, in_axes, dn = _scatter_args("rows", mapped, "middle", seed=18, dtype=dtype)
        check_vmap(_scatter_fn(prim, dn, FILL), args, in_axes)
        check_vmap(_scatter_fn(prim, dn, CLIP), args, in_axes)


def test_scatter_empty():
    dn = _SCATTERS["rows"][3]
    x = np.ones((B, 5, 3), np.float32)
    check_vmap(_scatter_fn(L.scatter_add_p, dn, FILL),
               [x, np.zeros((B, 0, 1), np.int32), np.zeros((0, 3), np.float32)], (0, 0, None))
    out = ember.vmap(_scatter_fn(L.scatter_p, dn, FILL))(
        np.zeros((0, 5, 3), np.float32), np.zeros((0, 4, 1), np.int32),
        np.zeros((0, 4, 3), np.float32))
    assert out.shape == (0, 5, 3)


# ---------------------------------------------------------------- nested vmap


def test_nested_vmap_gather_scatter_all_mapped():
    # Inner rules bind a gather/scatter with batching dims; the outer rules add another.
    rng = np.random.default_rng(19)
    dn, sizes = _GATHERS["windows"][2:]
    x = rng.standard_normal((2, B, 6, 5)).astype(np.float32)
    idx = rng.integers(-2, 8, (2, B, 2, 2)).astype(np.int32)
    g = _gather_fn(dn, sizes, FILL)
    got = ember.vmap(ember.vmap(g))(x, idx)
    expected = np.stack([np.stack([np.asarray(g(x[a, b], idx[a, b])) for b in range(B)])
                         for a in range(2)])
    np.testing.assert_array_equal(np.asarray(got), expected)

    sdn = _SCATTERS["windows"][3]
    sidx = rng.integers(-2, 6, (2, B, 2, 1)).astype(np.int32)
    upd = rng.integers(-3, 4, (2, B, 2, 6, 2)).astype(np.float32)
    s = _scatter_fn(L.scatter_add_p, sdn, CLIP)
    for jit in (False, True):
        fn = ember.vmap(ember.vmap(s))
        got = (ember.jit(fn) if jit else fn)(x, sidx, upd)
        expected = np.stack([np.stack([np.asarray(s(x[a, b], sidx[a, b], upd[a, b]))
                                       for b in range(B)]) for a in range(2)])
        np.testing.assert_array_equal(np.asarray(got), expected)


@needs_helper_rules
@pytest.mark.parametrize("kind", ["gather", "scatter", "dynamic_slice", "dus"])
def test_nested_vmap_mixed_axes(kind):
    # Outer vmap over axis 1 of some arguments only, inner over the last axis: the inner
    # rules' transposes and broadcasts are batched by the outer trace.
    rng = np.random.default_rng(20)
    if kind == "gather":
        dn, sizes = _GATHERS["rows"][2:]
        f, x = _gather_fn(dn, sizes, CLIP), rng.standard_normal((5, 2, 3, B)).astype(np.float32)
        idx = rng.integers(-2, 8, (4, 1, 2)).astype(np.int32)
        args, outer, inner = [x, idx], (1, 2), (2, None)
    elif kind == "scatter":
        dn = _SCATTERS["rows"][3]
        f = _scatter_fn(L.scatter_max_p, dn, FILL)
        x = rng.standard_normal((5, 3, 2, B)).astype(np.float32)
        idx = rng.integers(-2, 8, (4, 1, 2)).astype(np.int32)
        upd = rng.standard_normal((4, 3)).astype(np.float32)
        args, outer, inner = [x, idx, upd], (2, 2, None), (2, None, None)
    elif kind == "dynamic_slice":
        f = _ds((2, 2))
        x = rng.standard_normal((5, 2, 6, B)).astype(np.float32)
        i = rng.integers(-3, 9, (2, B)).astype(np.int32)
        args, outer, inner = [x, i, np.int32(2)], (1, 0, None), (2, 0, None)
    else:
        f = _dus
        x = rng.standard_normal((5, 2, 6)).astype(np.float32)
        u = rng.standard_normal((B, 2, 3)).astype(np.float32)
        i = rng.integers(-3, 9, (B, 2)).astype(np.int32)
        args, outer, inner = [x, u, i, np.int32(4)], (1, None, 1, None), (None, 0, 0, None)
    nested = ember.vmap(ember.vmap(f, in_axes=inner), in_axes=outer)
    got = np.asarray(nested(*args))
    n_out = next(np.shape(a)[ax] for a, ax in zip(args, outer) if ax is not None)
    rows = []
    for a in range(n_out):
        sub = [_take(v, a, ax) for v, ax in zip(args, outer)]
        n_in = next(np.shape(v)[ax] for v, ax in zip(sub, inner) if ax is not None)
        rows.append(np.stack([np.asarray(f(*[_take(v, b, ax) for v, ax in zip(sub, inner)]))
                              for b in range(n_in)]))
    np.testing.assert_array_equal(got, np.stack(rows))


# ---------------------------------------------------------------- with autodiff


def test_vmap_of_grad_of_gather():
    # The gather's transpose (a scatter-add) is batched: operand, indices or both mapped.
    dn, sizes = _GATHERS["windows"][2:]
    g = _gather_fn(dn, sizes, FILL)
    f = ember.grad(lambda v, idx: R.reduce_sum_p.bind(g(v, idx), axes=(0, 1, 2)))
    rng = np.random.default_rng(21)
    x = rng.standard_normal((B, 6, 5)).astype(np.float32)
    idx = rng.integers(-2, 8, (B, 2, 2)).astype(np.int32)
    check_vmap(f, [x, idx], (0, 0))
    check_vmap(f, [x[0], idx], (None, 0))
    check_vmap(f, [x, idx[0]], (0, None))


def test_grad_of_vmap_with_mapped_starts():
    # Mapped starts turn dynamic_slice into a gather and dynamic_update_slice into a scatter
    # (unique indices), both of which must transpose correctly.
    rng = np.random.default_rng(22)
    x = rng.standard_normal((B, 5, 6)).astype(np.float32)
    u = rng.standard_normal((B, 2, 3)).astype(np.float32)
    i = np.array([-2, 1, 9], np.int32)

    def ds(v, a):
        return L.dynamic_slice_p.bind(v, a, np.int32(2), slice_sizes=(2, 3))

    def dus(v, w, a):
        return L.dynamic_update_slice_p.bind(v, w, a, np.int32(4))

    def total(y, axes):
        return R.reduce_sum_p.bind(E.mul(y, y), axes=axes)

    got = ember.grad(lambda v: total(ember.vmap(ds)(v, i), (0, 1, 2)))(x)
    ref = [ember.grad(lambda v, b=b: total(ds(v, i[b]), (0, 1)))(x[b]) for b in range(B)]
    np.testing.assert_array_equal(np.asarray(got), np.stack([np.asarray(r) for r in ref]))
    gx, gu = ember.grad(lambda v, w: total(ember.vmap(dus)(v, w, i), (0, 1, 2)),
                        argnums=(0, 1))(x, u)
    for b in range(B):
        rx, ru = ember.grad(lambda v, w, b=b: total(dus(v, w, i[b]), (0, 1)),
                            argnums=(0, 1))(x[b], u[b])
        np.testing.assert_array_equal(np.asarray(gx)[b], np.asarray(rx))
        np.testing.assert_array_equal(np.asarray(gu)[b], np.asarray(ru))


# ---------------------------------------------------------------- coverage


def test_every_primitive_of_these_files_has_a_batching_rule():
    prims = [getattr(m, n) for m in (R, L) for n in m.__all__ if n.endswith("_p")]
    assert len(prims) == 14 + 10
    assert _missing_rules(*prims) == []
