"""Records for the Array API / NumPy 2 extras: vecdot, matvec, vecmat, rollaxis, unstack,
iscomplex and isreal.

Complex inputs are built inside the record from real arguments (the argument generators only
draw real values), and complex results are returned as (real, imag) pairs so that the
NumPy comparison sees both parts.
"""

import numpy as np

import ember.numpy as jnp
from ember import lax
from tests.op_records.base import ALL, FLOATS, OpRecord, bfloat16

F32, F16, I32, I8, U8, B = (np.dtype(t) for t in
                            ("float32", "float16", "int32", "int8", "uint8", "bool"))
DOT_DTYPES = FLOATS + (I32, I8, U8, B)

VECDOT_SHAPES = (
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (4, 3)), ((2, 1, 3), (4, 3)), ((2, 1, 3), (1, 5, 3)),
    ((0, 3), (3,)), ((2, 0), (2, 0)), ((0,), (0,)),
)
MATVEC_SHAPES = (
    ((2, 3), (3,)), ((5, 2, 3), (3,)), ((2, 3), (4, 3)), ((1, 2, 3), (4, 3)),
    ((3, 1, 2, 3), (5, 3)), ((0, 3), (3,)), ((2, 0), (0,)), ((0, 2, 3), (1, 3)),
)
VECMAT_SHAPES = (
    ((2,), (2, 3)), ((4, 2), (2, 3)), ((2,), (4, 2, 3)), ((4, 2), (5, 1, 2, 3)),
    ((0,), (0, 3)), ((3,), (3, 0)), ((0, 2), (2, 3)),
)
ROLL_SHAPES = (((2, 3, 4),), ((0, 3, 4),), ((1, 2, 3, 4),))


def _complex(re, im):
    return lax.complex(re, im)


def _parts(z):
    return jnp.real(z), jnp.imag(z)


def _np_parts(z):
    return np.real(z), np.imag(z)


def _vecdot_c(ar, ai, br, bi):
    return _parts(jnp.vecdot(_complex(ar, ai), _complex(br, bi)))


def _np_vecdot_c(ar, ai, br, bi):
    return _np_parts(np.vecdot(ar + 1j * ai, br + 1j * bi))


def _vecmat_c(ar, ai, br, bi):
    return _parts(jnp.vecmat(_complex(ar, ai), _complex(br, bi)))


def _np_vecmat_c(ar, ai, br, bi):
    return _np_parts(np.vecmat(ar + 1j * ai, br + 1j * bi))


def _matvec_c(ar, ai, br, bi):
    return _parts(jnp.matvec(_complex(ar, ai), _complex(br, bi)))


def _np_matvec_c(ar, ai, br, bi):
    return _np_parts(np.matvec(ar + 1j * ai, br + 1j * bi))


def _roll(axis, start):
    return OpRecord(f"rollaxis[{axis},{start}]", lambda a: jnp.rollaxis(a, axis, start),
                    lambda a: np.rollaxis(a, axis, start), ALL, ROLL_SHAPES,
                    differentiable=True)


# Imaginary parts in {-1, 0, 1} (int32 "unit" draws), so some elements are real.
_IM = {"arg_dtypes": {1: I32}, "arg_rngs": {1: "unit"}}

RECORDS = [
    OpRecord("vecdot", jnp.vecdot, np.vecdot, DOT_DTYPES, VECDOT_SHAPES, differentiable=True),
    OpRecord("vecdot[axis=0]", lambda a, b: jnp.vecdot(a, b, axis=0),
             lambda a, b: np.vecdot(a, b, axis=0), DOT_DTYPES,
             (((3, 2), (3, 2)), ((3, 2), (3,)), ((3, 1, 4), (3, 5, 1)), ((0, 2), (0, 2))),
             differentiable=True),
    OpRecord("vecdot[axis=-2]", lambda a, b: jnp.vecdot(a, b, axis=-2),
             lambda a, b: np.vecdot(a, b, axis=-2), (F32, I32),
             (((2, 3, 4), (3, 4)), ((3, 1), (2, 3, 5))), differentiable=True),
    OpRecord("vecdot[preferred]",
             lambda a, b: jnp.vecdot(a, b, preferred_element_type=np.float32),
             lambda a, b: np.vecdot(a.astype(np.float32), b.astype(np.float32)),
             (F16, bfloat16, I8, U8, B), (((2, 3), (3,)), ((4,), (2, 4))),
             out_dtype=lambda d: F32),
    OpRecord("vecdot[mixed]", jnp.vecdot, np.vecdot, (I8,), (((2, 3), (3,)),),
             arg_dtypes={1: F32}, out_dtype=lambda d: F32),
    OpRecord("vecdot[complex]", _vecdot_c, _np_vecdot_c, (F32,),
             (((3,), (3,), (3,), (3,)), ((2, 3), (2, 3), (4, 1, 3), (4, 1, 3))),
             differentiable=True),
    OpRecord("matvec", jnp.matvec, np.matvec, DOT_DTYPES, MATVEC_SHAPES, differentiable=True),
    OpRecord("matvec[mixed]", jnp.matvec, np.matvec, (I8,), (((2, 3), (3,)),),
             arg_dtypes={1: F32}, out_dtype=lambda d: F32),
    OpRecord("matvec[complex]", _matvec_c, _np_matvec_c, (F32,),
             (((2, 3), (2, 3), (3,), (3,)), ((4, 2, 3), (4, 2, 3), (1, 3), (1, 3))),
             differentiable=True),
    OpRecord("vecmat", jnp.vecmat, np.vecmat, DOT_DTYPES, VECMAT_SHAPES, differentiable=True),
    OpRecord("vecmat[mixed]", jnp.vecmat, np.vecmat, (F32,), (((2,), (2, 3)),),
             arg_dtypes={1: I8}, out_dtype=lambda d: F32),
    OpRecord("vecmat[complex]", _vecmat_c, _np_vecmat_c, (F32,),
             (((2,), (2,), (2, 3), (2, 3)), ((4, 2), (4, 2), (5, 1, 2, 3), (5, 1, 2, 3))),
             differentiable=True),
    _roll(2, 0), _roll(0, 3), _roll(-1, -2), _roll(1, -3), _roll(1, 1), _roll(2, 3),
    OpRecord("unstack", jnp.unstack, np.unstack, ALL, (((2, 3),), ((3,),), ((2, 0),),
                                                       ((1, 2, 3),)), differentiable=True),
    OpRecord("unstack[axis=1]", lambda x: jnp.unstack(x, axis=1),
             lambda x: np.unstack(x, axis=1), ALL, (((2, 3),), ((4, 2, 3),)),
             differentiable=True),
    OpRecord("unstack[axis=-1]", lambda x: jnp.unstack(x, axis=-1),
             lambda x: np.unstack(x, axis=-1), ALL, (((2, 3),), ((4, 2, 3),), ((0, 2),)),
             differentiable=True),
    OpRecord("iscomplex", jnp.iscomplex, np.iscomplex, ALL, (((),), ((5,),), ((2, 3),),
                                                             ((0,),))),
    OpRecord("isreal", jnp.isreal, np.isreal, ALL, (((),), ((5,),), ((2, 3),), ((0,),))),
    OpRecord("iscomplex[complex]", lambda re, im: jnp.iscomplex(re + 1j * im),
             lambda re, im: np.iscomplex(re + 1j * im), (F32,), (((6,), (6,)), ((2, 3), (3,))),
             **_IM),
    OpRecord("isreal[complex]", lambda re, im: jnp.isreal(re + 1j * im),
             lambda re, im: np.isreal(re + 1j * im), (F32,), (((6,), (6,)), ((2, 3), (3,))),
             **_IM),
]
