"""Records for the reduction and cumulative functions (ember.numpy and lax)."""

import numpy as np

import ember.numpy as jnp
from ember import lax
from tests.op_records.base import ALL, BOOLS, FLOATS, INTS, NUMERIC, OpRecord

I32 = np.dtype("int32")
F32 = np.dtype("float32")
SIGNED = (np.dtype("int32"), np.dtype("int8"))
# bfloat16 is left out where results hold NaNs: assert_array_equal can't match bfloat16 NaNs.
NAN_FLOATS = (F32, np.dtype("float16"))

# Shape sets by the axes a record reduces over.
ANY_SHAPES = (((),), ((0,),), ((5,),), ((2, 3),), ((1, 4, 3),))
AX0_SHAPES = (((5,),), ((0,),), ((2, 3),), ((0, 3),))
LAST_SHAPES = (((5,),), ((2, 3),), ((1, 4, 3),), ((3, 0),))
AX02_SHAPES = (((1, 4, 3),), ((2, 0, 3),))
NONEMPTY_ANY = (((),), ((5,),), ((2, 3),), ((1, 4, 3),))
NONEMPTY_AX0 = (((5,),), ((2, 3),), ((1, 4, 3),), ((4, 0),))
NONEMPTY_LAST = (((5,),), ((2, 3),), ((1, 4, 3),), ((0, 3),))


def _int_sum_dtype(dt):
    if dt == np.bool_:
        return I32
    if dt.kind == "u":
        return np.dtype("uint32") if dt.itemsize < 4 else dt
    if dt.kind == "i":
        return I32 if dt.itemsize < 4 else dt
    return dt


def _cum_dtype(dt):
    """jnp.cumsum/cumprod keep the input dtype (int8 stays int8, like JAX); bools widen."""
    return I32 if dt == np.bool_ else dt


def _float_dtype(dt):
    return dt if dt.kind == "f" or str(dt) == "bfloat16" else F32


def _recs(name, fn, ref, dts, configs, **kw):
    """One record per axis configuration: configs = [(suffix, kwargs, shapes)]."""
    return [OpRecord(f"{name}{suffix}", (lambda f, k: lambda x: f(x, **k))(fn, kwargs),
                     (lambda f, k: lambda x: f(x, **k))(ref, kwargs), dts, shapes, **kw)
            for suffix, kwargs, shapes in configs]


SUM_CONFIGS = [
    ("", {}, ANY_SHAPES),
    ("_axis0", {"axis": 0}, AX0_SHAPES),
    ("_axis-1_keepdims", {"axis": -1, "keepdims": True}, LAST_SHAPES),
    ("_axis02", {"axis": (0, 2)}, AX02_SHAPES),
]
NONEMPTY_CONFIGS = [
    ("", {}, NONEMPTY_ANY),
    ("_axis0", {"axis": 0}, NONEMPTY_AX0),
    ("_axis-1_keepdims", {"axis": -1, "keepdims": True}, NONEMPTY_LAST),
    ("_axis02", {"axis": (0, 2)}, (((1, 4, 3),), ((2, 1, 3),))),
]
ARG_CONFIGS = [
    ("", {}, NONEMPTY_ANY),
    ("_axis0", {"axis": 0}, NONEMPTY_AX0),
    ("_axis-1_keepdims", {"axis": -1, "keepdims": True}, NONEMPTY_LAST),
]
CUM_CONFIGS = [
    ("", {}, ANY_SHAPES),
    ("_axis0", {"axis": 0}, AX0_SHAPES),
    ("_axis-1", {"axis": -1}, LAST_SHAPES),
]


def _nan_data(x):
    # Put NaNs into float test data (deterministically) for the nan-functions.
    x = np.array(x, copy=True)
    if x.dtype.kind in "fV" and x.size:
        x.reshape(-1)[::3] = np.nan
    return x


def _nan_fn(f):
    def fn(x, **k):
        if x.dtype.kind in "iub":
            return f(x, **k)
        mask = np.zeros(x.shape, bool)
        mask.reshape(-1)[::3] = True  # the same places as _nan_data, with primitives
        return f(lax.select(jnp.asarray(mask), lax.full(x.shape, np.nan, x.dtype), x), **k)
    return fn


def _nan_ref(f):
    return lambda x, **k: f(_nan_data(x), **k)


RECORDS = [
    *_recs("sum", jnp.sum, np.sum, ALL, SUM_CONFIGS, out_dtype=_int_sum_dtype,
           differentiable=True),
    *_recs("prod", jnp.prod, np.prod, NUMERIC + BOOLS, SUM_CONFIGS[:3], rng="small",
           out_dtype=_int_sum_dtype, differentiable=True),
    *_recs("max", jnp.max, np.max, ALL, NONEMPTY_CONFIGS, out_dtype=lambda d: d,
           differentiable=True),
    *_recs("min", jnp.min, np.min, ALL, NONEMPTY_CONFIGS[:3], out_dtype=lambda d: d,
           differentiable=True),
    *_recs("max_initial", lambda x, **k: jnp.max(x, initial=-3, **k),
           lambda x, **k: np.max(x, initial=-3, **k), FLOATS + SIGNED, SUM_CONFIGS[:2],
           differentiable=True),
    *_recs("min_where", lambda x, **k: jnp.min(x, initial=4, where=x > 0, **k),
           lambda x, **k: np.min(x, initial=4, where=x > 0, **k), FLOATS + SIGNED,
           SUM_CONFIGS[:3], differentiable=True),
    *_recs("sum_where", lambda x, **k: jnp.sum(x, where=x > 0, **k),
           lambda x, **k: np.sum(x, where=x > 0, **k), FLOATS + SIGNED, SUM_CONFIGS[:3],
           differentiable=True),
    *_recs("all", jnp.all, np.all, ALL, SUM_CONFIGS),
    *_recs("any", jnp.any, np.any, ALL, SUM_CONFIGS),
    *_recs("count_nonzero", jnp.count_nonzero, np.count_nonzero, ALL, SUM_CONFIGS[:3],
           out_dtype=lambda d: I32),
    *_recs("argmax", jnp.argmax, np.argmax, ALL, ARG_CONFIGS, out_dtype=lambda d: I32),
    *_recs("argmin", jnp.argmin, np.argmin, ALL, ARG_CONFIGS, out_dtype=lambda d: I32),
    *_recs("ptp", jnp.ptp, np.ptp, FLOATS + SIGNED, NONEMPTY_CONFIGS[:3], differentiable=True),
    *_recs("mean", jnp.mean, np.mean, FLOATS, NONEMPTY_CONFIGS, out_dtype=lambda d: d,
           differentiable=True),
    *_recs("mean_int", jnp.mean, np.mean, INTS + BOOLS, NONEMPTY_CONFIGS[:2], tol=1e-6,
           out_dtype=lambda d: F32),
    *_recs("var", jnp.var, np.var, FLOATS, NONEMPTY_CONFIGS[:3], differentiable=True),
    *_recs("var_ddof1", lambda x, **k: jnp.var(x, ddof=1, **k),
           lambda x, **k: np.var(x, ddof=1, **k), NAN_FLOATS, [NONEMPTY_CONFIGS[1]],
           differentiable=True),
    *_recs("var_int", jnp.var, np.var, SIGNED, NONEMPTY_CONFIGS[:2], tol=1e-5,
           out_dtype=lambda d: F32),
    *_recs("std", jnp.std, np.std, FLOATS, NONEMPTY_CONFIGS[:3], differentiable=True),
    *_recs("std_correction", lambda x, **k: jnp.std(x, correction=1, **k),
           lambda x, **k: np.std(x, ddof=1, **k), (F32,), [NONEMPTY_CONFIGS[2]],
           differentiable=True),
    *_recs("median", jnp.median, np.median, FLOATS, NONEMPTY_CONFIGS[:3],
           differentiable=True),
    *_recs("median_int", jnp.median, np.median, SIGNED, NONEMPTY_CONFIGS[:2], tol=1e-6),
    *_recs("quantile", lambda x, **k: jnp.quantile(x, 0.3, **k),
           lambda x, **k: np.quantile(x, 0.3, **k), FLOATS, NONEMPTY_CONFIGS[:3],
           differentiable=True),
    *[r for m in ("lower", "higher", "nearest", "midpoint")
      for r in _recs(f"quantile_{m}", lambda x, m=m, **k: jnp.quantile(x, 0.4, method=m, **k),
                     lambda x, m=m, **k: np.quantile(x, 0.4, method=m, **k), (F32,),
                     NONEMPTY_CONFIGS[1:2], differentiable=True)],
    *_recs("quantile_vec", lambda x, **k: jnp.quantile(x, jnp.asarray(
        np.array([0.0, 0.25, 1.0], np.float32)), **k),
        lambda x, **k: np.quantile(x, np.array([0.0, 0.25, 1.0]), **k), (F32,),
        NONEMPTY_CONFIGS[:3], differentiable=True),
    *_recs("percentile", lambda x, **k: jnp.percentile(x, 75, **k),
           lambda x, **k: np.percentile(x, 75, **k), (F32,), NONEMPTY_CONFIGS[:2],
           differentiable=True),
    *_recs("average", jnp.average, np.average, FLOATS,
           [(s, k, sh[:3]) for s, k, sh in NONEMPTY_CONFIGS[:3]], differentiable=True),
    OpRecord("average_weights", lambda x, w: jnp.average(x, axis=1, weights=w),
             lambda x, w: np.average(x, axis=1, weights=w), FLOATS,
             (((2, 3), (3,)), ((4, 3), (4, 3))), arg_rngs={1: "positive"},
             differentiable=True),
    *_recs("nansum", _nan_fn(jnp.nansum), _nan_ref(np.nansum), FLOATS + SIGNED,
           SUM_CONFIGS[:3], differentiable=True),
    *_recs("nanprod", _nan_fn(jnp.nanprod), _nan_ref(np.nanprod), FLOATS, SUM_CONFIGS[:3],
           rng="small", differentiable=True),
    *_recs("nanmax", _nan_fn(jnp.nanmax), _nan_ref(np.nanmax), NAN_FLOATS + SIGNED,
           NONEMPTY_CONFIGS[1:3]),
    *_recs("nanmin", _nan_fn(jnp.nanmin), _nan_ref(np.nanmin), NAN_FLOATS + SIGNED,
           NONEMPTY_CONFIGS[1:3]),
    *_recs("nanmean", _nan_fn(jnp.nanmean), _nan_ref(np.nanmean), NAN_FLOATS,
           NONEMPTY_CONFIGS[1:3]),
    *_recs("nanvar", _nan_fn(jnp.nanvar), _nan_ref(np.nanvar), NAN_FLOATS, NONEMPTY_CONFIGS[1:3]),
    *_recs("nanstd", _nan_fn(jnp.nanstd), _nan_ref(np.nanstd), NAN_FLOATS, NONEMPTY_CONFIGS[1:3]),
    *_recs("nanargmax", _nan_fn(jnp.nanargmax), _nan_ref(np.nanargmax), (F32, I32),
           [(s, k, ((((5,),), ((3, 4),)))) for s, k, _ in ARG_CONFIGS[1:]]),
    *_recs("nanargmin", _nan_fn(jnp.nanargmin), _nan_ref(np.nanargmin), (F32, I32),
           [(s, k, ((((5,),), ((3, 4),)))) for s, k, _ in ARG_CONFIGS[1:]]),
    *_recs("nanmedian", _nan_fn(jnp.nanmedian), _nan_ref(np.nanmedian), (F32,),
           [(s, k, ((((5,),), ((3, 4),)))) for s, k, _ in NONEMPTY_CONFIGS[1:3]],
           differentiable=True),
    *_recs("nanquantile", _nan_fn(lambda x, **k: jnp.nanquantile(x, 0.3, **k)),
           _nan_ref(lambda x, **k: np.nanquantile(x, 0.3, **k)), (F32,),
           [(s, k, ((((5,),), ((3, 4),)))) for s, k, _ in NONEMPTY_CONFIGS[1:3]],
           differentiable=True),
    *_recs("cumsum", jnp.cumsum, np.cumsum, ALL, CUM_CONFIGS, out_dtype=_cum_dtype,
           differentiable=True),
    *_recs("cumprod", jnp.cumprod, np.cumprod, NUMERIC, CUM_CONFIGS, rng="small",
           out_dtype=_cum_dtype, differentiable=True),
    *_recs("nancumsum", _nan_fn(jnp.nancumsum), _nan_ref(np.nancumsum), FLOATS,
           CUM_CONFIGS[1:], differentiable=True),
    *_recs("nancumprod", _nan_fn(jnp.nancumprod), _nan_ref(np.nancumprod), (F32,),
           CUM_CONFIGS[1:], rng="small", differentiable=True),
    *_recs("cumulative_sum", lambda x, **k: jnp.cumulative_sum(x, include_initial=True, **k),
           lambda x, **k: np.cumulative_sum(x, include_initial=True, **k), NUMERIC,
           [("", {"axis": 0}, AX0_SHAPES)], differentiable=True),
    *_recs("cumulative_prod", jnp.cumulative_prod, np.cumulative_prod, (F32, I32),
           [("", {"axis": -1}, LAST_SHAPES)], rng="small", differentiable=True),
]

# ---------------------------------------------------------------- lax primitives

_LAX_AXES = [("_0", (0,), AX0_SHAPES), ("_02", (0, 2), AX02_SHAPES),
             ("_all", None, ANY_SHAPES)]


def _lax_reduce(name, lax_fn, np_fn, dts, **kw):
    out = []
    for suffix, axes, shapes in _LAX_AXES:
        def fn(x, axes=axes):
            return lax_fn(x, tuple(range(x.ndim)) if axes is None else axes)

        def ref(x, axes=axes):
            return np_fn(x, axis=tuple(range(x.ndim)) if axes is None else axes)
        out.append(OpRecord(f"lax.{name}{suffix}", fn, ref, dts, shapes, kind="lax",
                            out_dtype=lambda d: d, **kw))
    return out


def _np_and(x, axis):
    return np.all(x, axis=axis) if x.dtype == np.bool_ else np.bitwise_and.reduce(
        x, axis=axis, initial=np.array(-1).astype(x.dtype))


def _np_or(x, axis):
    return np.any(x, axis=axis) if x.dtype == np.bool_ else np.bitwise_or.reduce(
        x, axis=axis, initial=0)


def _np_xor(x, axis):
    if x.dtype == np.bool_:
        return np.sum(x, axis=axis) % 2 == 1
    return np.bitwise_xor.reduce(x, axis=axis, initial=0).astype(x.dtype)


def _np_max(x, axis):
    init = -np.inf if x.dtype.kind == "f" else (
        False if x.dtype == np.bool_ else np.iinfo(x.dtype).min)
    return np.max(x, axis=axis, initial=init)


def _np_min(x, axis):
    init = np.inf if x.dtype.kind == "f" else (
        True if x.dtype == np.bool_ else np.iinfo(x.dtype).max)
    return np.min(x, axis=axis, initial=init)


def _np_cumlogsumexp(x, axis, reverse=False):
    x = x.astype(np.float64)
    if reverse:
        return np.flip(np.logaddexp.accumulate(np.flip(x, axis), axis=axis), axis)
    return np.logaddexp.accumulate(x, axis=axis)


def _np_cum(ufunc):
    def ref(x, axis, reverse=False):
        if reverse:
            return np.flip(ufunc.accumulate(np.flip(x, axis), axis=axis), axis)
        return ufunc.accumulate(x, axis=axis)
    return ref


def _top_k_ref(x, k):
    idx = np.argsort(-x.astype(np.float64), axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, idx, axis=-1), idx


LAX_RECORDS = [
    *_lax_reduce("reduce_sum", lax.reduce_sum, np.sum, NUMERIC, differentiable=True),
    *_lax_reduce("reduce_prod", lax.reduce_prod, np.prod, NUMERIC, rng="small",
                 differentiable=True),
    *_lax_reduce("reduce_max", lax.reduce_max, _np_max, ALL, differentiable=True),
    *_lax_reduce("reduce_min", lax.reduce_min, _np_min, ALL, differentiable=True),
    *_lax_reduce("reduce_and", lax.reduce_and, _np_and, INTS + BOOLS),
    *_lax_reduce("reduce_or", lax.reduce_or, _np_or, INTS + BOOLS),
    *_lax_reduce("reduce_xor", lax.reduce_xor, _np_xor, INTS + BOOLS),
    OpRecord("lax.argmax", lambda x: lax.argmax(x, x.ndim - 1, np.int32),
             lambda x: np.argmax(x, axis=-1), ALL, NONEMPTY_LAST[:3], kind="lax",
             out_dtype=lambda d: I32),
    OpRecord("lax.argmin_axis0", lambda x: lax.argmin(x, 0, np.int32),
             lambda x: np.argmin(x, axis=0), ALL, NONEMPTY_AX0, kind="lax",
             out_dtype=lambda d: I32),
    *[OpRecord(f"lax.{name}{'_rev' if rev else ''}",
               (lambda f, r: lambda x: f(x, axis=x.ndim - 1, reverse=r))(fn, rev),
               (lambda f, r: lambda x: f(x, x.ndim - 1, r))(ref, rev), dts, LAST_SHAPES,
               kind="lax", out_dtype=lambda d: d, differentiable=diff, **kw)
      for name, fn, ref, dts, diff, kw in [
          ("cumsum", lax.cumsum, _np_cum(np.add), NUMERIC, True, {}),
          ("cumprod", lax.cumprod, _np_cum(np.multiply), NUMERIC, True, {"rng": "small"}),
          ("cummax", lax.cummax, _np_cum(np.maximum), NUMERIC, True, {}),
          ("cummin", lax.cummin, _np_cum(np.minimum), NUMERIC, True, {}),
          ("cumlogsumexp", lax.cumlogsumexp, _np_cumlogsumexp, FLOATS, True, {}),
      ] for rev in (False, True)],
]

RECORDS += LAX_RECORDS
