"""Records for ember.numpy's window functions and numeric helpers: bartlett, blackman, hamming,
hanning, kaiser, i0, spacing, unwrap, gradient, bitwise_count, packbits, unpackbits,
sort_complex.

Windows take no array argument: their records take one unused scalar (as the creation
records do) and return the windows of several sizes at once. Edge cases, keyword errors,
i0's accuracy and the 16-bit spacing rules are in tests/test_windows.py.
"""

import numpy as np

import ember.numpy as jnp
from tests.op_records.base import OpRecord, bfloat16, on_floats

F32, F16 = np.dtype("float32"), np.dtype("float16")
I32, I8, U8, U32, B = (np.dtype(t) for t in ("int32", "int8", "uint8", "uint32", "bool"))
LOWP = (F16, bfloat16)
INTS = (I32, I8, U8, U32)
SCALAR = (((),),)
F32_TOL = 2e-5  # float results of integer inputs (the by-dtype tolerance of ints is exact)
SIZES = (0, 1, 2, 3, 8)



def _np_windows(name):
    return lambda x: tuple(getattr(np, name)(m) for m in SIZES)


# ---------------------------------------------------------------- i0 / kaiser


def _np_i0(x):
    return np.i0(x.astype(np.float64))


def _np_kaiser(beta):
    return np.i0(beta.astype(np.float64) * np.sqrt(1 - ((np.arange(7) - 3.0) / 3.0) ** 2)) / \
        np.i0(beta.astype(np.float64))


# ---------------------------------------------------------------- spacing


def _np_spacing_f32(x):
    return np.spacing(x.astype(np.float32))


def _np_spacing_f16(x):
    return np.spacing(x.astype(np.float16))


def _np_spacing_bf16(x):
    # JAX's rule: the step away from zero (NumPy's own rule for float32 and float64).
    x = x.astype(bfloat16)
    inf = np.full(x.shape, np.inf, bfloat16)
    return np.nextafter(x, np.copysign(inf, x.astype(np.float32)).astype(bfloat16)) - x


# ---------------------------------------------------------------- gradient

COORDS5 = np.array([0.0, 0.5, 1.5, 1.75, 3.0])
GRAD_SHAPES = (((5,),), ((3, 4),), ((2, 3, 2),), ((2,),))


def _np_gradient_coords(f, d):
    return np.gradient(f, np.cumsum(d))


# ---------------------------------------------------------------- bits

PACK_SHAPES = (((10,),), ((3, 10),), ((16,),), ((0,),), ((2, 3, 5),), ((),))
UNPACK_SHAPES = (((3,),), ((2, 2),), ((0,),), ((),), ((2, 3, 1),))


def _np_unpack(**kw):
    return lambda a: np.unpackbits((a.astype(np.int64) * 41).astype(np.uint8), **kw)


def _np_sort_real(x):
    return np.sort(x.astype(np.float64), axis=-1).astype(np.complex128)


def _np_sort_complex(re, im):
    return np.sort_complex(np.round(re).astype(np.float64) + 1j * im.astype(np.float64))


def _sort_complex_parts(re, im):
    # The eager-vs-NumPy test compares floats: return both parts to check the imaginary one.
    out = jnp.sort_complex(jnp.round(re) + 1j * im)
    return jnp.real(out), jnp.imag(out)


def _np_sort_complex_parts(re, im):
    out = _np_sort_complex(re, im)
    return out.real, out.imag


RECORDS = [
    # windows: no array argument, several sizes at once (0 and 1 are special cases)
    OpRecord("bartlett", lambda x: tuple(jnp.bartlett(m) for m in SIZES),
             _np_windows("bartlett"), (F32,), SCALAR, out_dtype=lambda d: F32),
    OpRecord("blackman", lambda x: tuple(jnp.blackman(m) for m in SIZES),
             _np_windows("blackman"), (F32,), SCALAR),
    OpRecord("hamming", lambda x: tuple(jnp.hamming(m) for m in SIZES),
             _np_windows("hamming"), (F32,), SCALAR),
    OpRecord("hanning", lambda x: tuple(jnp.hanning(m) for m in SIZES),
             _np_windows("hanning"), (F32,), SCALAR),
    OpRecord("kaiser", lambda beta: jnp.kaiser(7, beta), on_floats(_np_kaiser),
             (F32, I32, B), (((),), ((7,),), ((1,),)), tol=F32_TOL,
             out_dtype=lambda d: F32, differentiable=True),
    OpRecord("kaiser[lowp]", lambda beta: jnp.kaiser(7, beta), _np_kaiser, LOWP,
             (((),), ((7,),)), out_dtype=lambda d: F32),
    # i0 (and its derivative I1, checked by the gradient tests)
    OpRecord("i0", jnp.i0, _np_i0, (F32, I32, U8, B),
             (((),), ((0,),), ((5,),), ((2, 3),), ((1, 4, 3),)), tol=F32_TOL,
             out_dtype=lambda d: F32, differentiable=True),
    OpRecord("i0[lowp]", jnp.i0, _np_i0, LOWP, (((5,),), ((2, 3),)),
             out_dtype=lambda d: d),
    OpRecord("i0_large", lambda x: jnp.i0(x * 6.0), lambda x: np.i0(x.astype(np.float64) * 6),
             (F32,), (((7,),), ((3, 4),)), differentiable=True),
    # spacing (no derivative, as in JAX: nextafter has none)
    OpRecord("spacing", jnp.spacing, _np_spacing_f32, (F32,) + INTS + (B,),
             (((),), ((0,),), ((5,),), ((2, 3),)), out_dtype=lambda d: F32),
    OpRecord("spacing[f16]", jnp.spacing, _np_spacing_f16, (F16,), (((5,),), ((2, 3),)),
             tol=0.0, out_dtype=lambda d: F16),
    OpRecord("spacing[bf16]", jnp.spacing, _np_spacing_bf16, (bfloat16,),
             (((5,),), ((2, 3),)), tol=0.0, out_dtype=lambda d: bfloat16),
    # unwrap
    OpRecord("unwrap", jnp.unwrap, on_floats(np.unwrap), (F32,) + INTS + (B,),
             (((8,),), ((2, 6),), ((3, 4, 2),), ((0,),), ((1,),), ((3, 0),)), tol=F32_TOL,
             differentiable=True),
    OpRecord("unwrap[lowp]", jnp.unwrap, np.unwrap, LOWP, (((8,),), ((2, 6),)), tol=5e-2),
    OpRecord("unwrap_axis0_period", lambda p: jnp.unwrap(p, axis=0, period=4.0),
             on_floats(lambda p: np.unwrap(p, axis=0, period=4.0)), (F32, I32),
             (((6, 3),), ((5,),), ((4, 2, 2),)), tol=F32_TOL, differentiable=True),
    OpRecord("unwrap_discont", lambda p: jnp.unwrap(p, discont=4.0, axis=1),
             on_floats(lambda p: np.unwrap(p, discont=4.0, axis=1)), (F32, I8),
             (((3, 7),), ((2, 5, 2),)), tol=F32_TOL, differentiable=True),
    OpRecord("unwrap_int_period", lambda p: jnp.unwrap(p, period=8),
             lambda p: np.unwrap(p.astype(np.int64), period=8).astype(p.dtype), (I32, I8),
             (((9,),), ((3, 6),)), out_dtype=lambda d: d),
    # gradient
    OpRecord("gradient", jnp.gradient, on_floats(np.gradient), (F32,) + INTS + (B,),
             GRAD_SHAPES, tol=F32_TOL, differentiable=True),
    OpRecord("gradient[lowp]", jnp.gradient, np.gradient, LOWP, GRAD_SHAPES[:2]),
    OpRecord("gradient_spacing_axis", lambda f: jnp.gradient(f, 0.5, axis=1),
             on_floats(lambda f: np.gradient(f, 0.5, axis=1)), (F32, I32),
             (((3, 4),), ((2, 5, 2),)), tol=F32_TOL, differentiable=True),
    OpRecord("gradient_per_axis", lambda f: jnp.gradient(f, 2.0, COORDS5[:4], axis=(1, 0)),
             on_floats(lambda f: np.gradient(f, 2.0, COORDS5[:4], axis=(1, 0))), (F32, F16),
             (((4, 3),), ((4, 6),)), tol=5e-3, differentiable=True),
    OpRecord("gradient_coords", lambda f: jnp.gradient(f, COORDS5),
             on_floats(lambda f: np.gradient(f, COORDS5)), (F32, I32, F16), (((5,),),),
             tol=5e-3, differentiable=True),
    OpRecord("gradient_traced_coords", lambda f, d: jnp.gradient(f, jnp.cumsum(d)),
             _np_gradient_coords, (F32,), (((6,), (6,)), ((2,), (2,))),
             arg_rngs={1: "ge1"}, tol=1e-4, differentiable=True),
    # bits
    OpRecord("bitwise_count", jnp.bitwise_count, np.bitwise_count, INTS + (B,),
             (((),), ((0,),), ((5,),), ((2, 3),)), rng="default",
             out_dtype=lambda d: U8),
    OpRecord("bitwise_count_extremes", lambda x: jnp.bitwise_count(x * 37 - 100),
             lambda x: np.bitwise_count((x.astype(np.int64) * 37 - 100).astype(x.dtype)),
             (I32, I8, U8, U32), (((12,),), ((3, 4),)), out_dtype=lambda d: U8),
    OpRecord("packbits", jnp.packbits, np.packbits, (I32, U8, B), PACK_SHAPES,
             out_dtype=lambda d: U8),
    OpRecord("packbits_axis_little", lambda a: jnp.packbits(a, axis=-1, bitorder="little"),
             lambda a: np.packbits(a, axis=-1, bitorder="little"), (B, I32, U8),
             PACK_SHAPES[:5], out_dtype=lambda d: U8),
    OpRecord("packbits_axis0", lambda a: jnp.packbits(a, axis=0),
             lambda a: np.packbits(a, axis=0), (B, I8), (((3, 10),), ((9, 2),), ((0, 2),))),
    OpRecord("unpackbits", lambda a: jnp.unpackbits(a * 41), _np_unpack(), (U8,),
             UNPACK_SHAPES, out_dtype=lambda d: U8),
    OpRecord("unpackbits_count", lambda a: jnp.unpackbits(a * 41, count=11),
             _np_unpack(count=11), (U8,), UNPACK_SHAPES[:4]),
    OpRecord("unpackbits_count_negative", lambda a: jnp.unpackbits(a * 41, count=-3),
             _np_unpack(count=-3), (U8,), (((3,),), ((2, 2),), ((1,),))),
    OpRecord("unpackbits_axis_little_pad",
             lambda a: jnp.unpackbits(a * 41, axis=1, count=20, bitorder="little"),
             _np_unpack(axis=1, count=20, bitorder="little"), (U8,),
             (((2, 2),), ((3, 1, 2),), ((2, 1),))),
    # sort_complex: real inputs become complex; complex ones sort by (real, imag)
    OpRecord("sort_complex", jnp.sort_complex, _np_sort_real, (F32,) + LOWP + INTS + (B,),
             (((5,),), ((2, 4),), ((0,),), ((3, 1, 2),)), tol=F32_TOL,
             out_dtype=lambda d: np.dtype("complex64")),
    OpRecord("sort_complex_complex",
             lambda re, im: jnp.sort_complex(jnp.round(re) + 1j * im), _np_sort_complex,
             (F32,), (((6,), (6,)), ((2, 5), (2, 5)), ((0,), (0,))), tol=F32_TOL,
             out_dtype=lambda d: np.dtype("complex64")),
    OpRecord("sort_complex_parts", _sort_complex_parts, _np_sort_complex_parts, (F32,),
             (((6,), (6,)), ((2, 5), (2, 5))), tol=F32_TOL, differentiable=True),
]
