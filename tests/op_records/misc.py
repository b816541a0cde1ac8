"""Records for ember.numpy misc functions (astype, isclose, diff, ...) and scalar types."""

import numpy as np

import ember.numpy as jnp
from tests.op_records.base import BINARY_SHAPES, FLOATS, UNARY_SHAPES, OpRecord

F32, I32, I8, U8, B = (np.dtype(t) for t in ("float32", "int32", "int8", "uint8", "bool"))
ALL = FLOATS + (I32, I8, U8, B)
NUM = FLOATS + (I32, I8, U8)
DIFF_SHAPES = (((5,),), ((2, 3),), ((0,),), ((1,),), ((3, 0),))


def _cast(x, dt):
    """NumPy cast with XLA's float-to-int rule: truncate, NaN -> 0, saturate out of range."""
    dt = np.dtype(dt)
    if x.dtype.kind == "f" and dt.kind in "iu":
        info = np.iinfo(dt)
        return np.clip(np.trunc(np.nan_to_num(x, nan=0.0)), info.min, info.max).astype(dt)
    return x.astype(dt)


def _astype(dt):
    return OpRecord(f"astype[{np.dtype(dt).name}]", lambda x: jnp.astype(x, dt),
                    lambda x: _cast(x, dt), ALL, UNARY_SHAPES, out_dtype=lambda d: np.dtype(dt),
                    differentiable=np.dtype(dt) == np.float32)


def _scalar_type(name, dt):
    return OpRecord(f"scalar_type[{name}]", getattr(jnp, name), lambda x: _cast(x, dt), ALL,
                    UNARY_SHAPES, out_dtype=lambda d: np.dtype(dt))


def _np_nan_to_num_log(x):
    return np.nan_to_num(np.log(x))


RECORDS = [
    _astype(np.float32), _astype(np.int32), _astype(np.int8), _astype(np.bool_),
    _astype(np.float16),
    OpRecord("astype[method]", lambda x: x.astype(jnp.int32), lambda x: _cast(x, np.int32),
             ALL, UNARY_SHAPES, out_dtype=lambda d: I32),
    _scalar_type("float32", np.float32), _scalar_type("int32", np.int32),
    _scalar_type("bool_", np.bool_), _scalar_type("uint8", np.uint8),
    _scalar_type("float64", np.float32),
    OpRecord("isclose", jnp.isclose, np.isclose, ALL, BINARY_SHAPES, out_dtype=lambda d: B),
    OpRecord("isclose[self]", lambda x: jnp.isclose(x, x), lambda x: np.isclose(x, x), ALL,
             UNARY_SHAPES),
    OpRecord("allclose", jnp.allclose, np.allclose, ALL, BINARY_SHAPES),
    OpRecord("allclose[self]", lambda x: jnp.allclose(x, x), lambda x: np.allclose(x, x), ALL,
             UNARY_SHAPES),
    OpRecord("array_equal", jnp.array_equal, np.array_equal, ALL,
             (((3,), (3,)), ((2, 3), (3,)), ((), ()), ((0,), (0,)))),
    OpRecord("array_equal[self]", lambda x: jnp.array_equal(x, x),
             lambda x: np.array_equal(x, x), ALL, UNARY_SHAPES),
    OpRecord("array_equiv", jnp.array_equiv, np.array_equiv, ALL,
             (((3,), (3,)), ((2, 3), (3,)), ((2, 3), (2,)), ((0,), (1,)))),
    OpRecord("nan_to_num", jnp.nan_to_num, np.nan_to_num, ALL, UNARY_SHAPES,
             differentiable=True),
    OpRecord("nan_to_num[log]", lambda x: jnp.nan_to_num(jnp.log(x)), _np_nan_to_num_log,
             (F32,), UNARY_SHAPES, differentiable=True),
    OpRecord("diff", jnp.diff, np.diff, ALL, DIFF_SHAPES, differentiable=True),
    OpRecord("diff[n2_axis0]", lambda x: jnp.diff(x, 2, axis=0),
             lambda x: np.diff(x, 2, axis=0), NUM, (((5,),), ((4, 3),), ((1, 2),), ((0, 2),)),
             differentiable=True),
    OpRecord("diff[prepend_append]", lambda x, p, a: jnp.diff(x, prepend=p, append=a),
             lambda x, p, a: np.diff(x, prepend=p, append=a), NUM,
             (((4,), (), (2,)), ((2, 3), (2, 1), ()), ((0,), (1,), (1,))), differentiable=True),
    OpRecord("ediff1d", jnp.ediff1d, np.ediff1d, NUM, UNARY_SHAPES, differentiable=True),
    OpRecord("ediff1d[ends]", lambda x, b, e: jnp.ediff1d(x, to_end=e, to_begin=b),
             lambda x, b, e: np.ediff1d(x, to_end=e, to_begin=b), NUM,
             (((4,), (), (2,)), ((2, 3), (2,), ()), ((0,), (1,), (1,))), differentiable=True),
    OpRecord("append", jnp.append, np.append, ALL, BINARY_SHAPES, differentiable=True),
    OpRecord("append[axis0]", lambda a, b: jnp.append(a, b, axis=0),
             lambda a, b: np.append(a, b, axis=0), ALL,
             (((2, 3), (1, 3)), ((0, 3), (2, 3)), ((2,), (3,))), differentiable=True),
]
