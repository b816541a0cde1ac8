"""Records for the slicing primitives (lax) and ember.numpy indexing (getitem, .at, take, ...).

Index arguments are baked into the lambdas (NumPy constants) or drawn as int32 arrays with the
"default" rng (-5..5), so negative and out-of-bounds indices are exercised; the references
implement clamping (gather, dynamic_slice) and dropping (scatter) with slow loops.
"""

import numpy as np

import ember.numpy as jnp
from ember import lax
from tests.op_records.base import ALL, FLOATS, NUMERIC, OpRecord

I32 = np.dtype("int32")
GDN = lax.GatherDimensionNumbers
SDN = lax.ScatterDimensionNumbers


def _clamp(i, n, size=1):
    i = int(i)
    i = i + n if i < 0 else i
    return min(max(i, 0), n - size)


# ---------------------------------------------------------------- lax references


def _ds_ref(x, i):
    r = _clamp(i, x.shape[0], 2)
    return x[r:r + 2, 1:3]


def _dus_ref(x, u, i):
    out = x.copy()
    r = _clamp(i, x.shape[0], u.shape[0])
    out[r:r + u.shape[0], -u.shape[1]:] = u
    return out


def _dyn_index_ref(x, i):
    return x[:, _clamp(i, x.shape[1])]


def _dyn_update_index_ref(x, u, i):
    out = x.copy()
    out[_clamp(i, x.shape[0])] = u
    return out


_ROWS = np.array([[2], [0], [-1], [7], [1]], np.int32)  # includes out-of-bounds rows


def _rows_ref(x, fill=None):
    out = []
    for (r,) in _ROWS:
        if fill is not None and not 0 <= r < x.shape[0]:
            out.append(np.full(x.shape[1:], fill, x.dtype))
        else:
            out.append(x[min(max(r, 0), x.shape[0] - 1)])
    return np.stack(out)


def _rows_gather(x, mode, fill_value=None):
    n = x.shape[1]
    return lax.gather(x, _ROWS, GDN(offset_dims=(1,), collapsed_slice_dims=(0,),
                                    start_index_map=(0,)), (1, n), mode=mode,
                      fill_value=fill_value)


_WIN = np.array([[0, 0], [1, 2], [3, 3], [-1, 1]], np.int32)


def _window_gather(x):
    # 2x2 windows at (row, col) starts, clamped; output (4, 2, 2)
    return lax.gather(x, _WIN, GDN(offset_dims=(1, 2), collapsed_slice_dims=(),
                                   start_index_map=(0, 1)), (2, 2), mode="clip")


def _window_ref(x):
    out = []
    for r, c in _WIN:
        # lax.gather does not wrap negative indices: it only clamps.
        r, c = min(max(r, 0), x.shape[0] - 2), min(max(c, 0), x.shape[1] - 2)
        out.append(x[r:r + 2, c:c + 2])
    return np.stack(out)


def _batched_gather(x):
    # operand (B, N, K), indices (B, 1): per batch b, x[b, idx[b], :]
    idx = (np.arange(x.shape[0]) % x.shape[1]).astype(np.int32)[:, None]
    return lax.gather(x, idx, GDN(offset_dims=(1,), collapsed_slice_dims=(1,),
                                  start_index_map=(1,), operand_batching_dims=(0,),
                                  start_indices_batching_dims=(0,)),
                      (1, 1, x.shape[2]), mode="clip")


def _batched_ref(x):
    idx = np.arange(x.shape[0]) % x.shape[1]
    return np.stack([x[b, idx[b]] for b in range(x.shape[0])])


_SIDX = np.array([[1], [3], [1], [9], [-1], [0]], np.int32)  # repeats and out-of-bounds


def _scatter(fn):
    return lambda x, u: fn(x, _SIDX, u, SDN(update_window_dims=(1,), inserted_window_dims=(0,),
                                            scatter_dims_to_operand_dims=(0,)))


def _scatter_ref(op):
    def ref(x, u):
        out = x.copy()
        for (r,), row in zip(_SIDX, u):
            if 0 <= r < x.shape[0]:  # out-of-bounds updates are dropped
                out[r] = row if op is None else op(out[r], row)
        return out
    return ref


def _scatter_apply(x):
    return lax.scatter_apply(x, _SIDX, lambda v: v * 2 + 1, SDN((1,), (0,), (0,)),
                             update_shape=(_SIDX.shape[0], x.shape[1]))


def _scatter_apply_ref(x):
    out = x.copy()
    for (r,) in _SIDX:
        if 0 <= r < x.shape[0]:  # applied once per hit; out-of-bounds rows are dropped
            out[r] = out[r] * 2 + 1
    return out


def _index_take(x):
    return lax.index_take(x, (np.array([1, -1, 4], np.int32), np.array([0, 2, -4], np.int32)),
                          (0, 1))


def _index_take_ref(x):
    rows = np.array([1, -1, 4]) % x.shape[0]
    cols = np.array([0, 2, -4]) % x.shape[1]
    return x[rows, cols]


_UIDX = np.array([[2], [0], [5]], np.int32)  # unique (for scatter, whose order is unspecified)


def _scatter_set(x, u):
    return lax.scatter(x, _UIDX, u, SDN((1,), (0,), (0,)))


def _scatter_set_ref(x, u):
    out = x.copy()
    for (r,), row in zip(_UIDX, u):
        if r < x.shape[0]:
            out[r] = row
    return out


# ---------------------------------------------------------------- numpy references


def _take_ref(x, i):
    # JAX's take(mode="clip") clamps negative indices to 0 (no wrapping)
    return np.take(x, np.clip(i, 0, x.shape[1] - 1), axis=1)


def _select_ref(c1, c2, a, b):
    return np.select([c1 > 0, c2 > 0], [a, b], 0)


def _select_fn(c1, c2, a, b):
    return jnp.select([c1 > 0, c2 > 0], [a, b], 0)


def _tal_ref(x, i):
    return np.take_along_axis(x, np.clip(np.where(i < 0, i + x.shape[1], i), 0,
                                         x.shape[1] - 1), axis=1)


def _getitem_dyn_ref(x, i):
    return x[_clamp(i, x.shape[0])]


def _getitem_arr_ref(x, i):
    n = x.shape[1]
    return x[:, np.clip(np.where(i < 0, i + n, i), 0, n - 1)]


def _at_add_ref(x):
    out = x.copy()
    np.add.at(out, np.array([0, 2, 0, 0]), 1)
    return out


_SH2 = (((3, 4),), ((4, 5),))
_SH3 = (((3, 4, 5),), ((2, 3, 4),))

RECORDS = [
    # ------------------------------------------------------------ lax
    OpRecord("lax_slice", lambda x: lax.slice(x, (0, 1), (2, 3)), lambda x: x[0:2, 1:3], ALL,
             _SH2, kind="lax", differentiable=True),
    OpRecord("lax_slice_strided", lambda x: lax.slice(x, (1, 0), (3, 4), (2, 3)),
             lambda x: x[1:3:2, 0:4:3], ALL, _SH2, kind="lax", differentiable=True),
    OpRecord("lax_slice_empty", lambda x: lax.slice(x, (2, 0), (2, 4)), lambda x: x[2:2, 0:4],
             NUMERIC, (((3, 4),), ((3, 5),)), kind="lax"),
    OpRecord("lax_slice_in_dim", lambda x: lax.slice_in_dim(x, 1, -1, axis=1),
             lambda x: x[:, 1:-1], ALL, _SH2, kind="lax", differentiable=True),
    OpRecord("lax_index_in_dim", lambda x: lax.index_in_dim(x, -1, 0, keepdims=False),
             lambda x: x[-1], ALL, _SH2 + (((2,),),), kind="lax", differentiable=True),
    OpRecord("lax_dynamic_slice", lambda x, i: lax.dynamic_slice(x, (i, 1), (2, 2)), _ds_ref,
             ALL, (((4, 5), ()), ((2, 3), ())), kind="lax", arg_dtypes={1: I32},
             differentiable=True),
    OpRecord("lax_dynamic_update_slice",
             lambda x, u, i: lax.dynamic_update_slice(x, u, (i, x.shape[1] - u.shape[1])),
             _dus_ref, ALL, (((4, 5), (2, 3), ()), ((3, 3), (3, 1), ()), ((2, 0), (1, 0), ())),
             kind="lax", arg_dtypes={2: I32}, differentiable=True),
    OpRecord("lax_dynamic_index_in_dim",
             lambda x, i: lax.dynamic_index_in_dim(x, i, axis=1, keepdims=False),
             _dyn_index_ref, ALL, (((3, 4), ()), ((2, 1), ())), kind="lax",
             arg_dtypes={1: I32}, differentiable=True),
    OpRecord("lax_dynamic_update_index_in_dim",
             lambda x, u, i: lax.dynamic_update_index_in_dim(x, u, i, 0),
             _dyn_update_index_ref, ALL, (((3, 4), (4,), ()), ((5,), (), ())), kind="lax",
             arg_dtypes={2: I32}, differentiable=True),
    OpRecord("lax_gather_rows_clip", lambda x: _rows_gather(x, "clip"), _rows_ref, ALL,
             _SH2 + (((2, 0),),), kind="lax", differentiable=True),
    OpRecord("lax_gather_rows_fill", lambda x: _rows_gather(x, "fill", 0),
             lambda x: _rows_ref(x, 0), ALL, _SH2, kind="lax", differentiable=True),
    OpRecord("lax_gather_rows_fill_default", lambda x: _rows_gather(x, "fill"),
             lambda x: _rows_ref(x, np.nan), FLOATS[:2], _SH2, kind="lax"),
    # JAX: mode=None means promise_in_bounds (clamped on CPU), not fill. Not differentiable
    # here: the gradient of an out-of-bounds row is dropped (XLA's scatter), not clamped.
    OpRecord("lax_gather_rows_mode_none", lambda x: _rows_gather(x, None), _rows_ref, ALL,
             _SH2, kind="lax"),
    OpRecord("lax_gather_windows", _window_gather, _window_ref, ALL,
             (((4, 4),), ((5, 3),)), kind="lax", differentiable=True),
    OpRecord("lax_gather_batched", _batched_gather, _batched_ref, NUMERIC,
             (((3, 2, 4),), ((2, 5, 1),)), kind="lax", differentiable=True),
    OpRecord("lax_scatter", _scatter_set, _scatter_set_ref, ALL,
             (((4, 3), (3, 3)), ((6, 2), (3, 2))), kind="lax", differentiable=True),
    OpRecord("lax_scatter_add", _scatter(lax.scatter_add), _scatter_ref(np.add), NUMERIC,
             (((4, 3), (6, 3)), ((5, 1), (6, 1))), kind="lax", differentiable=True),
    # Repeated indices: JAX differentiates scatter_mul only with unique_indices=True.
    OpRecord("lax_scatter_mul", _scatter(lax.scatter_mul), _scatter_ref(np.multiply),
             NUMERIC, (((4, 3), (6, 3)),), kind="lax"),
    OpRecord("lax_scatter_sub", _scatter(lax.scatter_sub), _scatter_ref(np.subtract),
             NUMERIC, (((4, 3), (6, 3)), ((5, 1), (6, 1))), kind="lax", differentiable=True),
    # scatter_apply has no derivative (as in JAX).
    OpRecord("lax_scatter_apply", _scatter_apply, _scatter_apply_ref,
             FLOATS + (I32,), (((4, 3),), ((2, 2),)), kind="lax"),
    OpRecord("lax_index_take", _index_take, _index_take_ref, ALL, (((3, 4),), ((2, 3, 2),)),
             kind="lax", differentiable=True),
    OpRecord("lax_scatter_min", _scatter(lax.scatter_min), _scatter_ref(np.minimum), ALL,
             (((4, 3), (6, 3)),), kind="lax", differentiable=True),
    OpRecord("lax_scatter_max", _scatter(lax.scatter_max), _scatter_ref(np.maximum), ALL,
             (((4, 3), (6, 3)),), kind="lax", differentiable=True),
    # ------------------------------------------------------------ getitem
    OpRecord("getitem_int", lambda x: x[1], lambda x: x[1], ALL, _SH2, differentiable=True),
    OpRecord("getitem_neg_int", lambda x: x[-1, -2], lambda x: x[-1, -2], ALL, _SH2,
             differentiable=True),
    OpRecord("getitem_slice_step", lambda x: x[1::2, ::-1], lambda x: x[1::2, ::-1], ALL,
             _SH2 + (((0, 3),),), differentiable=True),
    OpRecord("getitem_slice_neg_step", lambda x: x[-1:0:-2], lambda x: x[-1:0:-2], ALL,
             (((5,),), ((0,),), ((6, 2),)), differentiable=True),
    OpRecord("getitem_newaxis_ellipsis", lambda x: x[None, ..., 0, None],
             lambda x: x[None, ..., 0, None], ALL, _SH3 + (((2,),),), differentiable=True),
    OpRecord("getitem_full", lambda x: x[...], lambda x: x[...], ALL,
             (((),), ((0,),), ((2, 3),)), differentiable=True),
    OpRecord("getitem_scalar_newaxis", lambda x: x[None], lambda x: x[None], ALL,
             (((),), ((3,),)), differentiable=True),
    OpRecord("getitem_int_array", lambda x: x[np.array([2, 0, -1, 0])],
             lambda x: x[np.array([2, 0, -1, 0])], ALL, _SH2 + (((3,),),), differentiable=True),
    OpRecord("getitem_int_list", lambda x: x[:, [1, 0]], lambda x: x[:, [1, 0]], ALL, _SH2,
             differentiable=True),
    OpRecord("getitem_adv_adjacent", lambda x: x[:, [0, 2], [1, 3]],
             lambda x: x[:, [0, 2], [1, 3]], ALL, _SH3, differentiable=True),
    OpRecord("getitem_adv_separated", lambda x: x[[0, 1], :, [1, 3]],
             lambda x: x[[0, 1], :, [1, 3]], ALL, _SH3, differentiable=True),
    OpRecord("getitem_adv_broadcast", lambda x: x[np.array([[0], [1]]), np.array([0, 2, 1])],
             lambda x: x[np.array([[0], [1]]), np.array([0, 2, 1])], ALL, _SH2,
             differentiable=True),
    OpRecord("getitem_int_and_array", lambda x: x[1, :, [0, 1]],
             lambda x: x[1, :, [0, 1]], ALL, _SH3, differentiable=True),
    OpRecord("getitem_array_slice_newaxis", lambda x: x[[0, 1], None, 1:3],
             lambda x: x[[0, 1], None, 1:3], ALL, _SH2, differentiable=True),
    OpRecord("getitem_empty_array", lambda x: x[np.zeros(0, np.int32)],
             lambda x: x[np.zeros(0, np.int32)], ALL, _SH2 + (((0, 2),),)),
    OpRecord("getitem_bool_mask", lambda x: x[np.arange(x.size).reshape(x.shape) % 3 == 0],
             lambda x: x[np.arange(x.size).reshape(x.shape) % 3 == 0], ALL,
             _SH2 + (((0,),),), differentiable=True),
    OpRecord("getitem_bool_rows", lambda x: x[np.arange(x.shape[0]) % 2 == 0, 1:],
             lambda x: x[np.arange(x.shape[0]) % 2 == 0, 1:], ALL, _SH2, differentiable=True),
    OpRecord("getitem_dynamic_int", lambda x, i: x[i], _getitem_dyn_ref, ALL,
             (((4, 3), ()), ((6,), ())), arg_dtypes={1: I32}, differentiable=True),
    # (Not differentiable here: the random indices go out of bounds, where the gradient is
    # dropped, as in JAX, while the value clamps.)
    OpRecord("getitem_dynamic_array", lambda x, i: x[:, i], _getitem_arr_ref, ALL,
             (((3, 4), (5,)), ((2, 6), (2, 3))), arg_dtypes={1: I32}),
    # (Not differentiable: the value clamps, the gradient of an out-of-bounds read is
    # dropped, as in JAX.)
    OpRecord("getitem_out_of_bounds_clamps", lambda x: x[np.array([0, 7, -9])],
             lambda x: x[np.array([0, x.shape[0] - 1, 0])], ALL, _SH2),
    # ------------------------------------------------------------ .at
    OpRecord("at_set_slice", lambda x: x.at[1:, ::2].set(7),
             lambda x: _np_set(x, np.s_[1:, ::2], 7), ALL, _SH2, differentiable=True),
    OpRecord("at_set_array_values", lambda x, v: x.at[:, [0, 2]].set(v),
             lambda x, v: _np_set(x, np.s_[:, [0, 2]], v), ALL,
             (((3, 4), (3, 2)), ((2, 3), (2,)), ((2, 3), ())), differentiable=True),
    OpRecord("at_add_repeated", lambda x: x.at[np.array([0, 2, 0, 0])].add(1), _at_add_ref,
             NUMERIC, (((4,),), ((3, 2),)), differentiable=True),
    OpRecord("at_add_dynamic", lambda x, i: x.at[i].add(x[0]),
             lambda x, i: _np_dyn_add(x, i), NUMERIC, (((4, 3), ()), ((6,), ())),
             arg_dtypes={1: I32}, differentiable=True),
    OpRecord("at_mul", lambda x: x.at[np.array([1, 1])].multiply(2),
             lambda x: _np_ufunc_at(x, np.multiply, [1, 1], 2), NUMERIC, _SH2,
             differentiable=True),
    OpRecord("at_min", lambda x: x.at[0, 1:].min(0), lambda x: _np_min_at(x), NUMERIC, _SH2,
             differentiable=True),
    OpRecord("at_max", lambda x, v: x.at[np.array([0, 1, 0])].max(v),
             lambda x, v: _np_ufunc_at(x, np.maximum, [0, 1, 0], v), ALL,
             (((3, 4), (3, 4)), ((4,), (3,))), differentiable=True),
    OpRecord("at_set_oob_dropped", lambda x: x.at[np.array([0, 9, -9])].set(5),
             lambda x: _np_set(x, np.s_[[0]], 5), NUMERIC, _SH2, differentiable=True),
    OpRecord("at_get_fill", lambda x: x.at[np.array([1, 9])].get(mode="fill", fill_value=0),
             lambda x: np.stack([x[1], np.zeros_like(x[0])]), NUMERIC, _SH2,
             differentiable=True),
    # ------------------------------------------------------------ numpy functions
    OpRecord("take", lambda x, i: jnp.take(x, i, axis=1, mode="clip"), _take_ref, ALL,
             (((3, 4), (5,)), ((2, 3), (2, 2)), ((2, 3), ()), ((2, 3), (0,))),
             arg_dtypes={1: I32}, differentiable=True),
    OpRecord("take_flat", lambda x: jnp.take(x, np.array([0, -1, 2])),
             lambda x: np.take(x, [0, -1, 2]), ALL, _SH2 + (((3,),),), differentiable=True),
    OpRecord("take_along_axis", lambda x, i: jnp.take_along_axis(x, i, axis=1, mode="clip"),
             _tal_ref, ALL, (((3, 4), (3, 2)), ((3, 4), (1, 5)), ((2, 0), (2, 0))),
             arg_dtypes={1: I32}, differentiable=True),
    OpRecord("select", _select_fn, _select_ref, NUMERIC,
             (((4,), (4,), (4,), (4,)), ((2, 3), (3,), (2, 3), ()), ((), (), (), ())),
             differentiable=True),
    OpRecord("compress", lambda x: jnp.compress(np.array([True, False, True]), x, axis=1),
             lambda x: np.compress([True, False, True], x, axis=1), ALL, _SH2,
             differentiable=True),
    OpRecord("extract", lambda x: jnp.extract(np.arange(x.size).reshape(x.shape) % 2, x),
             lambda x: np.extract(np.arange(x.size).reshape(x.shape) % 2, x), ALL, _SH2,
             differentiable=True),
]


def _np_set(x, idx, v):
    out = x.copy()
    out[idx] = v
    return out


def _np_dyn_add(x, i):
    out = x.copy()
    out[_clamp(i, x.shape[0]) if -x.shape[0] <= int(i) < x.shape[0] else slice(0, 0)] += x[0]
    return out


def _np_ufunc_at(x, ufunc, idx, v):
    out = x.copy()
    v = np.broadcast_to(v, (len(idx),) + x.shape[1:])
    ufunc.at(out, np.array(idx), v)
    return out


def _np_min_at(x):
    out = x.copy()
    out[0, 1:] = np.minimum(out[0, 1:], 0)
    return out
