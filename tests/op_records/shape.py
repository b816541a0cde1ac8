"""Records for the shape functions of ember.numpy and the lax shape primitives."""

import numpy as np

import ember.numpy as jnp
from ember import lax
from tests.op_records.base import ALL, NUMERIC, OpRecord

S1 = (((),), ((0,),), ((5,),), ((2, 3),), ((1, 4, 3),))   # any rank
S2 = (((2, 3),), ((0, 3),), ((1, 4, 3),), ((3, 1),))      # rank >= 2
S3 = (((2, 3, 4),), ((1, 0, 2),), ((3, 1, 2),))           # rank 3
SN = (((0,),), ((5,),), ((2, 3),), ((1, 4, 3),))          # rank >= 1
PAIR = (((2, 3), (4, 3)), ((0, 3), (2, 3)), ((1,), (3,)), ((2, 1, 2), (1, 1, 2)))
SAME = (((2, 3), (2, 3)), ((0,), (0,)), ((4,), (4,)), ((), ()))


def _rec(name, fn, ref, shapes, dtypes=ALL, **kw):
    return OpRecord(name, fn, ref, dtypes, shapes, differentiable=True, **kw)


def _lax(name, fn, ref, shapes, dtypes=ALL, diff=True, **kw):
    return OpRecord(name, fn, ref, dtypes, shapes, kind="lax", differentiable=diff, **kw)


def _np_pad_lax(x, config):
    # Slow reference for lax.pad: place with interior, then crop negative edges.
    out_shape = [lo + hi + n + max(n - 1, 0) * i for n, (lo, hi, i) in zip(x.shape, config)]
    out = np.zeros(out_shape, x.dtype)
    for idx in np.ndindex(*x.shape):
        pos = tuple(lo + j * (i + 1) for j, (lo, hi, i) in zip(idx, config))
        if all(0 <= p < s for p, s in zip(pos, out_shape)):
            out[pos] = x[idx]
    return out


RECORDS = [
    # ---- reshape family
    _rec("reshape", lambda x: jnp.reshape(x, (-1, 1) if x.ndim < 2 else (x.shape[-1], -1)),
         lambda x: np.reshape(x, (-1, 1) if x.ndim < 2 else (x.shape[-1], -1)), S1),
    _rec("reshape_F", lambda x: jnp.reshape(x, (x.shape[-1], -1), order="F"),
         lambda x: np.reshape(x, (x.shape[-1], -1), order="F"), SN[1:]),
    _rec("ravel", jnp.ravel, np.ravel, S1),
    _rec("transpose", jnp.transpose, np.transpose, S1),
    _rec("transpose_axes", lambda x: jnp.transpose(x, (2, 0, -2)),
         lambda x: np.transpose(x, (2, 0, 1)), S3),
    _rec("permute_dims", lambda x: jnp.permute_dims(x, (1, 2, 0)),
         lambda x: np.transpose(x, (1, 2, 0)), S3),
    _rec("matrix_transpose", jnp.matrix_transpose, lambda x: np.swapaxes(x, -1, -2), S2),
    _rec("swapaxes", lambda x: jnp.swapaxes(x, 0, -1), lambda x: np.swapaxes(x, 0, -1), S2),
    _rec("moveaxis", lambda x: jnp.moveaxis(x, (0, 1), (-1, 0)),
         lambda x: np.moveaxis(x, (0, 1), (-1, 0)), S3),
    _rec("expand_dims", lambda x: jnp.expand_dims(x, (0, -1)),
         lambda x: np.expand_dims(x, (0, -1)), S1),
    _rec("squeeze", jnp.squeeze, np.squeeze, S1 + (((1, 1),),)),
    _rec("squeeze_axis", lambda x: jnp.squeeze(x, -1), lambda x: np.squeeze(x, -1),
         (((3, 1),), ((1,),), ((0, 1),))),
    # ---- joining
    _rec("concatenate", lambda x, y: jnp.concatenate([x, y, x]),
         lambda x, y: np.concatenate([x, y, x]), PAIR),
    _rec("concatenate_axis1", lambda x, y: jnp.concatenate((x, y), axis=-1),
         lambda x, y: np.concatenate((x, y), axis=-1),
         (((2, 3), (2, 1)), ((0, 3), (0, 2)), ((2, 1, 0), (2, 1, 3)))),
    _rec("concatenate_axis_none", lambda x, y: jnp.concatenate([x, y], axis=None),
         lambda x, y: np.concatenate([x, y], axis=None), PAIR + (((), (2,)),)),
    _rec("concat", lambda x, y: jnp.concat([x, y]), lambda x, y: np.concatenate([x, y]), PAIR),
    _rec("stack", lambda x, y: jnp.stack([x, y]), lambda x, y: np.stack([x, y]), SAME),
    _rec("stack_axis_last", lambda x, y: jnp.stack([x, y], axis=-1),
         lambda x, y: np.stack([x, y], axis=-1), SAME),
    _rec("hstack", lambda x, y: jnp.hstack([x, y]), lambda x, y: np.hstack([x, y]), SAME),
    _rec("vstack", lambda x, y: jnp.vstack([x, y]), lambda x, y: np.vstack([x, y]), SAME),
    _rec("dstack", lambda x, y: jnp.dstack([x, y]), lambda x, y: np.dstack([x, y]), SAME),
    _rec("column_stack", lambda x, y: jnp.column_stack([x, y]),
         lambda x, y: np.column_stack([x, y]), SAME[:3]),
    # ---- splitting
    _rec("split", lambda x: jnp.split(x, 2, axis=-1), lambda x: np.split(x, 2, axis=-1),
         (((4,),), ((2, 6),), ((0,),))),
    _rec("split_indices", lambda x: jnp.split(x, [1, 3, 3]),
         lambda x: np.split(x, [1, 3, 3]), (((5,),), ((6, 2),), ((3, 0),))),
    _rec("array_split", lambda x: jnp.array_split(x, 3, axis=0),
         lambda x: np.array_split(x, 3, axis=0), (((5,),), ((7, 2),), ((0, 2),), ((2,),))),
    _rec("hsplit", lambda x: jnp.hsplit(x, 2), lambda x: np.hsplit(x, 2),
         (((4,),), ((3, 2),), ((0, 4),))),
    _rec("vsplit", lambda x: jnp.vsplit(x, [1]), lambda x: np.vsplit(x, [1]),
         (((2, 3),), ((4, 1, 2),), ((1, 0),))),
    # ---- tile / repeat
    _rec("tile", lambda x: jnp.tile(x, (2, 1, 3)), lambda x: np.tile(x, (2, 1, 3)), S1),
    _rec("tile_int", lambda x: jnp.tile(x, 2), lambda x: np.tile(x, 2), S1),
    _rec("repeat", lambda x: jnp.repeat(x, 3), lambda x: np.repeat(x, 3), S1),
    _rec("repeat_axis", lambda x: jnp.repeat(x, 2, axis=-1), lambda x: np.repeat(x, 2, axis=-1),
         SN),
    _rec("repeat_array", lambda x: jnp.repeat(x, np.array([2, 0, 1]), axis=-1),
         lambda x: np.repeat(x, [2, 0, 1], axis=-1), (((3,),), ((2, 3),), ((0, 3),))),
    _rec("resize", lambda x: jnp.resize(x, (3, 4)), lambda x: np.resize(x, (3, 4)), S1),
    _rec("dsplit", lambda x: jnp.dsplit(x, [1]), lambda x: np.dsplit(x, [1]), S3),
    # ---- flips / rolls
    _rec("flip", jnp.flip, np.flip, S1),
    _rec("flip_axis", lambda x: jnp.flip(x, (0, -1)), lambda x: np.flip(x, (0, -1)), S2),
    _rec("fliplr", jnp.fliplr, np.fliplr, S2),
    _rec("flipud", jnp.flipud, np.flipud, SN),
    _rec("roll", lambda x: jnp.roll(x, 2), lambda x: np.roll(x, 2), S1),
    _rec("roll_axes", lambda x: jnp.roll(x, (1, -4), (0, -1)),
         lambda x: np.roll(x, (1, -4), (0, -1)), S2),
    _rec("rot90", jnp.rot90, np.rot90, S2),
    _rec("rot90_k3_axes", lambda x: jnp.rot90(x, 3, (-1, 0)),
         lambda x: np.rot90(x, 3, (-1, 0)), S3),
    # ---- pad
    _rec("pad_constant", lambda x: jnp.pad(x, 2), lambda x: np.pad(x, 2), S1),
    _rec("pad_constant_values", lambda x: jnp.pad(x, ((1, 2), (0, 1)), constant_values=3),
         lambda x: np.pad(x, ((1, 2), (0, 1)), constant_values=3), S2[:2] + (((3, 2),),),
         dtypes=NUMERIC),
    _rec("pad_edge", lambda x: jnp.pad(x, (1, 3), mode="edge"),
         lambda x: np.pad(x, (1, 3), mode="edge"), (((), ), ((5,),), ((2, 3),))),
    _rec("pad_reflect", lambda x: jnp.pad(x, (4, 2), mode="reflect"),
         lambda x: np.pad(x, (4, 2), mode="reflect"), (((5,),), ((2, 3),), ((1, 4, 3),))),
    _rec("pad_symmetric", lambda x: jnp.pad(x, ((3, 1),), mode="symmetric"),
         lambda x: np.pad(x, ((3, 1),), mode="symmetric"), (((5,),), ((2, 3),))),
    _rec("pad_wrap", lambda x: jnp.pad(x, 7, mode="wrap"),
         lambda x: np.pad(x, 7, mode="wrap"), (((5,),), ((2, 3),))),
    # ---- broadcasting / atleast
    _rec("broadcast_to", lambda x: jnp.broadcast_to(x, (2,) + x.shape),
         lambda x: np.broadcast_to(x, (2,) + x.shape), S1),
    _rec("broadcast_to_size1", lambda x: jnp.broadcast_to(x, (2, 3, 4)),
         lambda x: np.broadcast_to(x, (2, 3, 4)), (((3, 1),), ((1, 4),), ((),))),
    _rec("broadcast_arrays", jnp.broadcast_arrays, np.broadcast_arrays,
         (((2, 1), (1, 3)), ((), (2, 3)), ((0, 3), (1, 3)))),
    _rec("atleast_1d", jnp.atleast_1d, np.atleast_1d, S1),
    _rec("atleast_2d", jnp.atleast_2d, np.atleast_2d, S1),
    _rec("atleast_3d", jnp.atleast_3d, np.atleast_3d, S1),
    _rec("atleast_2d_multi", jnp.atleast_2d, np.atleast_2d, (((), (3,)),)),
    # ---- lax
    _lax("lax_squeeze", lambda x: lax.squeeze(x, (0, -1)), lambda x: np.squeeze(x, (0, -1)),
         (((1, 3, 1),), ((1, 0, 1),), ((1, 1),))),
    _lax("lax_expand_dims", lambda x: lax.expand_dims(x, (0, 2)),
         lambda x: np.expand_dims(x, (0, 2)), SN),
    _lax("lax_transpose", lambda x: lax.transpose(x, (1, 2, 0)),
         lambda x: np.transpose(x, (1, 2, 0)), S3),
    _lax("lax_rev", lambda x: lax.rev(x, (0,)), lambda x: np.flip(x, 0), SN),
    _lax("lax_pad", lambda x: lax.pad(x, np.zeros((), x.dtype), [(1, 2, 1), (-1, 0, 2)]),
         lambda x: _np_pad_lax(x, [(1, 2, 1), (-1, 0, 2)]), (((2, 3),), ((0, 2),), ((3, 1),))),
    _lax("lax_pad_crop", lambda x: lax.pad(x, np.ones((), x.dtype), [(-2, -1, 0)]),
         lambda x: _np_pad_lax(x, [(-2, -1, 0)]) + 0, (((5,),), ((3,),))),
    _lax("lax_concatenate", lambda x, y: lax.concatenate([x, y], 0),
         lambda x, y: np.concatenate([x, y], 0), PAIR),
    _lax("lax_broadcasted_iota", lambda x: lax.broadcasted_iota(x.dtype, (2, 3), 1),
         lambda x: np.broadcast_to(np.arange(3, dtype=x.dtype), (2, 3)), (((),),),
         dtypes=NUMERIC, diff=False),
    _lax("lax_iota", lambda x: lax.iota(x.dtype, 5), lambda x: np.arange(5).astype(x.dtype),
         (((),),), dtypes=NUMERIC, diff=False),
    _lax("lax_full", lambda x: lax.full((2, 3), x), lambda x: np.full((2, 3), x), (((),),)),
    _lax("lax_full_like", lambda x: lax.full_like(x, 2), lambda x: np.full_like(x, 2), S1,
         dtypes=NUMERIC),
    _lax("lax_broadcast", lambda x: lax.broadcast(x, (2, 1)),
         lambda x: np.broadcast_to(x, (2, 1) + x.shape), S1),
    _lax("lax_broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (3,) + x.shape + (2,),
                                                                tuple(range(1, x.ndim + 1))),
         lambda x: np.broadcast_to(x[..., None], (3,) + x.shape + (2,)), S1),
    _lax("lax_broadcast_to_rank", lambda x: lax.broadcast_to_rank(x, 4),
         lambda x: np.reshape(x, (1,) * (4 - x.ndim) + x.shape), S1),
    _lax("lax_reshape", lambda x: lax.reshape(x, (x.size,)), np.ravel, S1),
    _lax("lax_reshape_dimensions", lambda x: lax.reshape(x, (x.size,), (1, 0)),
         lambda x: np.ravel(x.T), S2[:2] + (((3, 1),),)),
    _lax("lax_collapse", lambda x: lax.collapse(x, 0, 2),
         lambda x: np.reshape(x, (-1,) + x.shape[2:]), S3),
    _lax("lax_split", lambda x: lax.split(x, (1, x.shape[0] - 1)), lambda x: np.split(x, [1]),
         (((3,),), ((2, 3),), ((1, 0),))),
    _lax("lax_split_last", lambda x: lax.split(x, (0, 2, x.shape[-1] - 2), axis=-1),
         lambda x: np.split(x, [0, 2], axis=-1), (((2, 4),), ((3, 2),))),
    _lax("lax_tile", lambda x: lax.tile(x, (2,) + (1,) * (x.ndim - 1)) if x.ndim else
         lax.tile(x, ()), lambda x: np.tile(x, (2,) + (1,) * (x.ndim - 1)) if x.ndim else x,
         S1),
    _lax("lax_tile_2d", lambda x: lax.tile(x, (2, 3)), lambda x: np.tile(x, (2, 3)),
         (((2, 3),), ((0, 2),))),
    _lax("lax_stack", lambda x, y: lax.stack([x, y], axis=-1),
         lambda x, y: np.stack([x, y], -1), SAME),
    _lax("lax_unstack", lambda x: lax.unstack(x, 1), lambda x: tuple(np.moveaxis(x, 1, 0)),
         (((2, 3),), ((1, 4, 3),))),
    _lax("lax_broadcast_like", lambda x, y: lax.broadcast_like(x, y),
         lambda x, y: np.broadcast_to(x, y.shape), (((3, 1), (2, 3, 4)), ((), (2,)))),
]
