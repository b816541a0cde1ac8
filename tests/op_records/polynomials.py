"""Records for ember.numpy polynomials and 1-D convolution.

convolve/correlate (every mode), polyval, polyadd, polysub, polymul, polydiv, polyder,
polyint, poly and vander. trim_zeros (and the trim_leading_zeros options) have data-dependent
output shapes and are not traceable, as in JAX: tests/test_polynomials.py covers them.
"""

import numpy as np

import ember.numpy as jnp
from tests.op_records.base import OpRecord, bfloat16, on_floats

F32, F16 = np.dtype("float32"), np.dtype("float16")
I32, I8, U8, B = (np.dtype(t) for t in ("int32", "int8", "uint8", "bool"))
LOWP = (F16, bfloat16)
INTS = (I32, I8, U8)

# Float results of integer inputs are compared with a float32 tolerance.
F32_TOL = 2e-5



def _records(name, fn, ref, shapes, *, lowp_tol=None, ints=INTS + (B,), **kw):
    """float32 with the integer/bool dtypes (float results), and the 16-bit floats."""
    ref = on_floats(ref)
    out = [OpRecord(name, fn, ref, (F32,) + tuple(ints), shapes, tol=F32_TOL, **kw)]
    kw.pop("differentiable", None)
    out.append(OpRecord(f"{name}[lowp]", fn, ref, LOWP, shapes, tol=lowp_tol, **kw))
    return out


# ---------------------------------------------------------------- convolve / correlate

CONV_SHAPES = (((5,), (3,)), ((3,), (5,)), ((4,), (4,)), ((1,), (1,)), ((7,), (2,)),
               ((2,), (6,)), ((1,), (4,)))


def _np_conv(fn, mode):
    return lambda a, v: getattr(np, fn)(a, v, mode=mode)


def _np_conv_int32(a, v):
    return np.convolve(a.astype(np.int64), v.astype(np.int64)).astype(np.int32)


def _conv_records():
    out = []
    for fn in ("convolve", "correlate"):
        for mode in ("full", "same", "valid"):
            out += _records(f"{fn}_{mode}",
                            (lambda f, m: lambda a, v: getattr(jnp, f)(a, v, mode=m))(fn, mode),
                            _np_conv(fn, mode), CONV_SHAPES, lowp_tol=5e-2, differentiable=True)
    return out


# ---------------------------------------------------------------- polynomial arithmetic

POLYVAL_SHAPES = (((4,), (3,)), ((3, 2), (2,)), ((5,), ()), ((0,), (3,)), ((1,), (2, 3)),
                  ((2, 3), (4, 1)))
ADD_SHAPES = (((3,), (5,)), ((4,), (2,)), ((3,), (3,)), ((1,), (4,)), ((0,), (0,)))
MUL_SHAPES = (((3,), (4,)), ((1,), (1,)), ((0,), (3,)), ((5,), (2,)), ((2,), (0,)))
DIV_SHAPES = (((5,), (2,)), ((4,), (4,)), ((2,), (3,)), ((6,), (3,)), ((1,), (1,)),
              ((0,), (2,)))


def _np_polymul(a, b):
    """A full convolution, an empty operand read as the zero polynomial (as in JAX; NumPy's
    polymul also strips leading zeros)."""
    a = a if a.size else np.zeros(1, a.dtype)
    b = b if b.size else np.zeros(1, b.dtype)
    return np.convolve(a, b)


def long_division(u, v):
    """Long division in float64, keeping the remainder's length (JAX does not trim it)."""
    u = np.asarray(u, np.float64).copy()
    v = np.asarray(v, np.float64)
    m, n = len(u) - 1, len(v) - 1
    q = np.zeros(max(m - n + 1, 1))
    for k in range(m - n + 1):
        q[k] = u[k] / v[0]
        u[k:k + n + 1] -= q[k] * v
    return q, u


# ---------------------------------------------------------------- calculus and construction

DER_SHAPES = (((5,),), ((2,),), ((1,),), ((0,),), ((7,),))
POLY_SHAPES = (((3,),), ((1,),), ((0,),), ((5,),), ((),))
VANDER_SHAPES = (((4,),), ((1,),), ((3,),), ((0,),))  # JAX 0.10 fails on empty uint8 x


RECORDS = [
    *_conv_records(),
    OpRecord("convolve_preferred_int32",
             lambda a, v: jnp.convolve(a, v, preferred_element_type=jnp.int32),
             _np_conv_int32, INTS + (B,), CONV_SHAPES, out_dtype=lambda d: I32),
    # polyval: integers stay integers (and wrap like NumPy's)
    OpRecord("polyval", jnp.polyval, np.polyval, (F32, I32, I8, U8), POLYVAL_SHAPES,
             rng="small", differentiable=True, out_dtype=lambda d: d),
    OpRecord("polyval[lowp]", jnp.polyval, np.polyval, LOWP, POLYVAL_SHAPES, rng="small",
             tol=5e-2),
    OpRecord("polyadd", jnp.polyadd, np.polyadd, (F32, F16, bfloat16) + INTS, ADD_SHAPES,
             differentiable=True, out_dtype=lambda d: d),
    OpRecord("polysub", jnp.polysub, np.polysub, (F32, F16, bfloat16) + INTS, ADD_SHAPES,
             differentiable=True, out_dtype=lambda d: d),
    *_records("polymul", jnp.polymul, _np_polymul, MUL_SHAPES, lowp_tol=5e-2,
              differentiable=True),
    *_records("polydiv", jnp.polydiv, long_division, DIV_SHAPES, ints=(I32, I8),
              lowp_tol=1e-1, arg_rngs={1: "nonzero"}, differentiable=True),
    *_records("polyder", jnp.polyder, np.polyder, DER_SHAPES, lowp_tol=2e-2,
              differentiable=True),
    *_records("polyder_m2", lambda p: jnp.polyder(p, 2), lambda p: np.polyder(p, 2),
              DER_SHAPES, lowp_tol=2e-2, differentiable=True),
    *_records("polyint", jnp.polyint, np.polyint, DER_SHAPES, lowp_tol=2e-2,
              differentiable=True),
    *_records("polyint_m2_k", lambda p, k: jnp.polyint(p, 2, k),
              lambda p, k: np.polyint(p, 2, k),
              (((4,), (2,)), ((1,), (2,)), ((0,), (2,)), ((3,), (1,))), lowp_tol=2e-2,
              differentiable=True),
    *_records("polyint_m3_scalar_k", lambda p, k: jnp.polyint(p, 3, k),
              lambda p, k: np.polyint(p, 3, [k] * 3), (((4,), ()), ((2,), ())),
              lowp_tol=2e-2, differentiable=True),
    *_records("poly", jnp.poly, lambda r: np.poly(np.atleast_1d(r)), POLY_SHAPES,
              lowp_tol=5e-2, differentiable=True),
    OpRecord("vander", jnp.vander, np.vander, (F32, F16, bfloat16) + INTS, VANDER_SHAPES,
             rng="small", differentiable=True, out_dtype=lambda d: d),
    OpRecord("vander_N_increasing", lambda x: jnp.vander(x, 3, increasing=True),
             lambda x: np.vander(x, 3, increasing=True), (F32, I32, I8),
             VANDER_SHAPES, differentiable=True),
]

# roots: eigenvalues of the companion matrix (strip_zeros=False traces; random coefficients
# have no leading zeros; as in JAX the eigenvalue derivative is not twice differentiable, so
# test_linalg_fft_conv_compat checks its first derivative). polyfit: least squares on the
# Vandermonde matrix.
RECORDS += [
    OpRecord("roots", lambda p: jnp.roots(p, strip_zeros=False), np.roots, (F32,),
             (((4,),), ((2,),), ((3,),), ((1,),)), tol=1e-3,
             out_dtype=lambda d: np.dtype("complex64")),
    OpRecord("polyfit_deg2", lambda x, y: jnp.polyfit(x, y, 2), lambda x, y: np.polyfit(x, y, 2),
             (F32,), (((6,), (6,)), ((5,), (5, 3)), ((3,), (3,))), tol=1e-3,
             differentiable=True, out_dtype=lambda d: d),
]
