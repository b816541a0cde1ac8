"""Records for ember.numpy statistics: cov, corrcoef, trapezoid, interp, histogram,
histogramdd, histogram2d."""

import numpy as np

import ember.numpy as jnp
from tests.op_records.base import OpRecord, bfloat16, on_floats

F32, F16 = np.dtype("float32"), np.dtype("float16")
I32, I8, U8, B = (np.dtype(t) for t in ("int32", "int8", "uint8", "bool"))
LOWP = (F16, bfloat16)
INTS = (I32, I8, U8)

# Float results of integer inputs are compared with a float32 tolerance (the by-dtype
# tolerance of an integer input is 0, i.e. exact).
F32_TOL = 2e-5



def _records(name, fn, ref, shapes, *, lowp_tol=None, ints=INTS + (B,), lowp=LOWP, **kw):
    """Two records: float32 and the integer/bool dtypes (float results, float32 tolerance),
    and the 16-bit floats (their own tolerance)."""
    ref = on_floats(ref)
    out = [OpRecord(name, fn, ref, (F32,) + tuple(ints), shapes, tol=F32_TOL, **kw)]
    if lowp:
        kw.pop("differentiable", None)
        out.append(OpRecord(f"{name}[lowp]", fn, ref, tuple(lowp), shapes, tol=lowp_tol, **kw))
    return out


# ---------------------------------------------------------------- cov / corrcoef

COV_SHAPES = (((3, 5),), ((5,),), ((1, 4),), ((),), ((4, 2),))
# No observations (a constant NaN result) or no variables (an empty result): not
# differentiable records (finite differences of a NaN constant are NaN, its derivative 0).
EMPTY_SHAPES = (((2, 0),), ((0, 3),), ((0,),), ((1, 0),), ((0, 0),))
COV_Y_SHAPES = (((3, 5), (2, 5)), ((5,), (5,)), ((5,), (2, 5)), ((2, 4), (4,)))
CORR_SHAPES = (((3, 5),), ((5,),), ((4, 6),), ((2, 1),))


def _np_cov_weights(m, f, a):
    return np.cov(m, fweights=f.astype(np.int64), aweights=a)


# ---------------------------------------------------------------- trapezoid

TRAP_SHAPES = (((5,),), ((2, 3),), ((1, 4, 3),), ((0, 3),), ((3, 1),), ((2, 2),))
TRAP_X_SHAPES = (((5,), (5,)), ((2, 3), (3,)), ((2, 3), (2, 3)), ((4, 1), (1,)))
TRAP_X_AX0_SHAPES = (((4, 3), (4,)), ((4, 3), (4, 3)), ((2, 0), (2,)))


# ---------------------------------------------------------------- interp

INTERP_SHAPES = (((7,), (5,), (5,)), ((2, 3), (4,), (4,)), ((), (3,), (3,)), ((0,), (2,), (2,)),
                 ((4,), (1,), (1,)))
INTERP_GRID = np.arange(-4, 6, 2)  # sorted, distinct sample points for integer records


def _np_interp_sorted(x, xp, fp):
    return np.interp(x, np.sort(xp), fp)


def _np_interp_grid(x, fp):
    return np.interp(x, INTERP_GRID, fp)


# ---------------------------------------------------------------- histogram

HIST_SHAPES = (((6,),), ((2, 5),), ((3, 2, 2),), ((1,),))


def _flat(hist_and_edges):
    """histogramdd's ``(hist, [edges, ...])`` as one flat tuple (edges differ in length)."""
    hist, edges = hist_and_edges
    return (hist, *edges)


def _np_histogram(bins, **kw):
    return lambda a: np.histogram(a, bins, **kw)


RECORDS = [
    *_records("cov", jnp.cov, np.cov, COV_SHAPES, lowp_tol=3e-2, differentiable=True),
    *_records("cov_rowvar_false", lambda m: jnp.cov(m, rowvar=False),
              lambda m: np.cov(m, rowvar=False), COV_SHAPES, lowp_tol=3e-2,
              differentiable=True),
    *_records("cov_empty", jnp.cov, np.cov, EMPTY_SHAPES),
    *_records("cov_empty_rowvar_false", lambda m: jnp.cov(m, rowvar=False),
              lambda m: np.cov(m, rowvar=False), EMPTY_SHAPES),
    *_records("cov_y", jnp.cov, np.cov, COV_Y_SHAPES, lowp_tol=3e-2, differentiable=True),
    OpRecord("cov_bias", lambda m: jnp.cov(m, bias=True), lambda m: np.cov(m, bias=True),
             (F32, I32), (((3, 5),), ((5,),), ((1, 1),)), tol=F32_TOL, differentiable=True),
    *_records("cov_weights", lambda m, f, a: jnp.cov(m, fweights=f, aweights=a),
              _np_cov_weights, (((3, 5), (5,), (5,)), ((4,), (4,), (4,))), ints=(I32,),
              lowp=(F16,), lowp_tol=3e-2, arg_dtypes={1: I32},
              arg_rngs={1: "positive", 2: "positive"}, differentiable=True),
    *_records("corrcoef", jnp.corrcoef, np.corrcoef, CORR_SHAPES, lowp_tol=5e-2,
              differentiable=True),
    *_records("corrcoef_empty", jnp.corrcoef, np.corrcoef, EMPTY_SHAPES),
    *_records("corrcoef_y_rowvar_false", lambda x, y: jnp.corrcoef(x, y, rowvar=False),
              lambda x, y: np.corrcoef(x, y, rowvar=False),
              (((5, 2), (5, 3)), ((6, 1), (6, 2))), lowp_tol=5e-2, differentiable=True),
    # trapezoid
    *_records("trapezoid", jnp.trapezoid, np.trapezoid, TRAP_SHAPES, lowp_tol=3e-2,
              differentiable=True),
    *_records("trapezoid_axis0_dx", lambda y: jnp.trapezoid(y, dx=0.5, axis=0),
              lambda y: np.trapezoid(y, dx=0.5, axis=0), TRAP_SHAPES[:4], lowp_tol=3e-2,
              differentiable=True),
    *_records("trapezoid_x", lambda y, x: jnp.trapezoid(y, x),
              lambda y, x: np.trapezoid(y, x), TRAP_X_SHAPES, lowp_tol=5e-2,
              differentiable=True),
    *_records("trapezoid_x_axis0", lambda y, x: jnp.trapezoid(y, x, axis=0),
              lambda y, x: np.trapezoid(y, x, axis=0), TRAP_X_AX0_SHAPES, lowp_tol=5e-2,
              differentiable=True),
    # interp (bfloat16 is checked in tests/test_statistics.py: JAX 0.10 rejects it)
    OpRecord("interp", lambda x, xp, fp: jnp.interp(x, jnp.sort(xp), fp), _np_interp_sorted,
             (F32, F16), INTERP_SHAPES, differentiable=True),
    OpRecord("interp_grid", lambda x, fp: jnp.interp(x, jnp.arange(-4, 6, 2), fp),
             _np_interp_grid, (I32, I8, U8, F32),
             (((7,), (5,)), ((2, 6), (5,)), ((), (5,)), ((0,), (5,))), tol=F32_TOL,
             differentiable=True),
    OpRecord("interp_left_right", lambda x, xp, fp: jnp.interp(x, jnp.sort(xp), fp, left=-1.0,
                                                               right=2),
             lambda x, xp, fp: np.interp(x, np.sort(xp), fp, left=-1.0, right=2),
             (F32, F16), (((9,), (4,), (4,)), ((3, 3), (2,), (2,))), rng="small",
             arg_rngs={0: "default"}, differentiable=True),
    # histogram (float32 and integer data: 16-bit edges round differently from NumPy's
    # float64 ones; tests/test_statistics.py compares those with JAX)
    OpRecord("histogram_bin_edges", lambda a: jnp.histogram_bin_edges(a, 6),
             on_floats(lambda a: np.histogram_bin_edges(a, 6)), (F32,) + INTS + (B,),
             HIST_SHAPES, tol=F32_TOL, differentiable=True),
    OpRecord("histogram_bin_edges[lowp]", lambda a: jnp.histogram_bin_edges(a, 6),
             lambda a: np.histogram_bin_edges(a, 6), LOWP, HIST_SHAPES),
    OpRecord("histogram", lambda a: jnp.histogram(a, 4), on_floats(_np_histogram(4)),
             (F32,) + INTS + (B,),
             HIST_SHAPES, tol=F32_TOL),
    OpRecord("histogram_range", lambda a: jnp.histogram(a, 8, range=(-4.0, 4.0)),
             _np_histogram(8, range=(-4.0, 4.0)), (F32,) + INTS,
             HIST_SHAPES + (((0,),), ((2, 0),)), tol=F32_TOL),
    OpRecord("histogram_weights_density",
             lambda a, w: jnp.histogram(a, 4, weights=w, density=True),
             lambda a, w: np.histogram(a, 4, weights=w, density=True),
             (F32, F16, bfloat16), (((8,), (8,)), ((2, 5), (2, 5))), tol=3e-2,
             arg_dtypes={0: I32}, arg_rngs={1: "positive"}, differentiable=True),
    OpRecord("histogram_bins_array", lambda a, b: jnp.histogram(a, jnp.sort(b)),
             lambda a, b: np.histogram(a, np.sort(b)), (F32, I32),
             (((10,), (4,)), ((2, 5), (3,)), ((0,), (2,)), ((6,), (1,))), tol=F32_TOL),
    # histogramdd / histogram2d (counts of float32 points; weights give float sums)
    OpRecord("histogramdd", lambda s: _flat(jnp.histogramdd(s, (3, 4))),
             lambda s: _flat(np.histogramdd(s, (3, 4))), (F32,), (((12, 2),), ((5, 2),), ((1, 2),)),
             tol=F32_TOL),
    OpRecord("histogramdd_weights_range",
             lambda s, w: _flat(jnp.histogramdd(s, 3, range=[(-2.0, 2.0)] * 3, weights=w)),
             lambda s, w: _flat(np.histogramdd(s, 3, range=[(-2.0, 2.0)] * 3, weights=w)),
             (F32,),
             (((10, 3), (10,)), ((0, 3), (0,))), tol=F32_TOL, differentiable=True),
    OpRecord("histogram2d", lambda x, y: jnp.histogram2d(x, y, bins=(2, 5)),
             lambda x, y: np.histogram2d(x, y, bins=(2, 5)), (F32,),
             (((9,), (9,)), ((3,), (3,))), tol=F32_TOL),
]
