"""Statistics and numerical helpers: cov, corrcoef, trapezoid, interp, histogram, ...

Everything is composed of ``ember.numpy`` and ``lax`` operations, so it traces, jits, vmaps
and differentiates. Arguments that decide output shapes (``bins`` as an integer, ``ddof``,
``rowvar``, the ``left``/``right`` strings, ``density``) must be concrete.
"""

from __future__ import annotations

import builtins
import operator
from typing import Any

import numpy as np

from ember import core, dtypes, lax
from ember.numpy._util import (
    broadcast_shapes,
    canonicalize_axis,
    check_arraylike,
    ensure_array,
    promote_dtypes_inexact,
)
from ember.numpy.counting import bincount
from ember.numpy.creation import diagonal, full, linspace, ones_like, zeros
from ember.numpy.index_functions import ravel_multi_index, take
from ember.numpy.misc import astype, diff
from ember.numpy.products import dot
from ember.numpy.reductions import amax, amin, average
from ember.numpy.reductions import sum as _sum
from ember.numpy.shape import atleast_2d, concatenate, expand_dims, moveaxis, squeeze
from ember.numpy.sorting import searchsorted
from ember.numpy.ufuncs import (
    absolute,
    add,
    clip,
    conj,
    greater,
    imag,
    less,
    multiply,
    real,
    remainder,
    sqrt,
    subtract,
    true_divide,
    where,
)

# ---------------------------------------------------------------- helpers


def _inexact_dtype_arg(fn: str, dtype: Any) -> np.dtype | None:
    """A requested result dtype: None, or a (canonical) floating or complex dtype."""
    if dtype is None:
        return None
    try:
        dt = dtypes.dtype(dtype)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{fn}: invalid dtype {dtype!r}: {e}") from None
    if not dtypes.is_inexact(dt):
        raise ValueError(f"{fn}: dtype must be a subclass of float or complex; got "
                         f"dtype={dtype!r}")
    return dtypes.canonicalize_dtype(dt)


def _observation_weights(name: str, w: Any, n: int) -> Any:
    """A 1-D weight vector of length ``n`` (cov's fweights / aweights), made non-negative."""
    check_arraylike("cov", w)
    w = ensure_array(w)
    if w.ndim > 1:
        raise RuntimeError(f"cov: cannot handle multidimensional {name}")
    if w.ndim == 0 or w.shape[0] != n:
        raise RuntimeError(f"cov: incompatible numbers of samples and {name}: {n} samples, "
                           f"{name} of shape {w.shape}")
    if name == "fweights" and not dtypes.is_integer(w.dtype):
        raise TypeError(f"cov: fweights must be integer, got dtype {w.dtype}")
    # Like JAX: the sign is dropped (NumPy rejects negative weights, which cannot be
    # checked on traced values).
    return absolute(w)


def _ddof_arg(ddof: Any) -> Any:
    """cov's ddof: a Python number when concrete, else a traced real scalar."""
    if isinstance(ddof, core.Tracer) and ddof.to_concrete_value() is None:
        if ddof.ndim != 0 or not dtypes.issubdtype(ddof.dtype, np.number) or \
                dtypes.is_complex(ddof.dtype):
            raise TypeError(f"cov: ddof must be a real scalar, got {ddof.aval}")
        return ddof
    value = core.concrete_or_error(ddof)
    if isinstance(value, (bool, np.bool_)) or np.ndim(value) != 0 or not (
            np.issubdtype(np.asarray(value).dtype, np.integer)
            or np.issubdtype(np.asarray(value).dtype, np.floating)):
        raise TypeError(f"cov: ddof must be a real scalar, got {ddof!r}")
    return np.asarray(value).item()


# ---------------------------------------------------------------- cov / corrcoef


def cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False,
        ddof: int | None = None, fweights: Any = None, aweights: Any = None,
        dtype: Any = None) -> Any:
    """Covariance matrix of the variables in ``m`` (and ``y``), optionally weighted.

    With ``rowvar`` (the default) each row of ``m`` is a variable and each column an
    observation; otherwise the reverse. ``y`` adds further variables. The result is divided
    by ``N - ddof`` (``ddof`` defaults to 1, or 0 with ``bias``); ``fweights`` (integer
    repeat counts) and ``aweights`` (relative importances) weight the observations. A single
    variable gives a scalar. Integer and boolean inputs give the default float dtype.

    Example:
        >>> jnp.cov(jnp.array([[0., 1., 2.], [2., 1., 0.]]))
        Array([[ 1., -1.],
               [-1.,  1.]], dtype=float32)
    """
    if y is None:
        check_arraylike("cov", m)
        (m,) = promote_dtypes_inexact(m)
    else:
        check_arraylike("cov", m, y)
        m, y = promote_dtypes_inexact(m, y)
        if y.ndim > 2:
            raise ValueError(f"cov: y has more than 2 dimensions (shape {y.shape})")
        if m.ndim and y.ndim and m.ndim != y.ndim:
            # Like JAX, arguments of different ranks must broadcast together.
            try:
                broadcast_shapes(m.shape, y.shape)
            except ValueError:
                raise ValueError(f"cov: m and y have incompatible shapes for broadcasting: "
                                 f"{m.shape} and {y.shape}") from None
    if m.ndim > 2:
        raise ValueError(f"cov: m has more than 2 dimensions (shape {m.shape})")
    dt = _inexact_dtype_arg("cov", dtype)
    rowvar = bool(core.concrete_or_error(rowvar, "cov: 'rowvar' must be concrete"))

    x = atleast_2d(m)
    if not rowvar and m.ndim != 1:
        x = lax.transpose(x, (1, 0))
    if x.shape[0] == 0:
        return zeros((0, 0), dtypes.default_float_dtype())
    if y is not None:
        y2 = atleast_2d(y)
        if not rowvar and y2.shape[0] != 1:
            y2 = lax.transpose(y2, (1, 0))
        if y2.shape[1] != x.shape[1]:
            raise TypeError(f"cov: m and y must have the same number of observations, got "
                            f"{x.shape[1]} and {y2.shape[1]}")
        x = concatenate((x, y2), axis=0)
    nvars, nobs = x.shape
    if nobs == 0:
        return full(() if nvars == 1 else (nvars, nvars), np.nan, x.dtype)

    if ddof is None:
        bias = core.concrete_or_error(bias, "cov: 'bias' must be concrete")
        ddof = 1 if bias == 0 else 0
    ddof = _ddof_arg(ddof)

    w = None
    if fweights is not None:
        w = _observation_weights("fweights", fweights, nobs)
    if aweights is not None:
        aweights = _observation_weights("aweights", aweights, nobs)
        w = aweights if w is None else multiply(w, aweights)
    if dt is not None:
        x = astype(x, dt)
        w = None if w is None else astype(w, dt)

    avg, w_sum = average(x, axis=1, weights=w, returned=True)
    w_sum = w_sum[0]
    static_ddof = not isinstance(ddof, core.Tracer)
    if w is None:
        norm = nobs - ddof if static_ddof else subtract(nobs, ddof)
    elif static_ddof and ddof == 0:
        norm = w_sum
    elif aweights is None:
        norm = subtract(w_sum, ddof)
    else:
        norm = subtract(w_sum, true_divide(multiply(ddof, _sum(multiply(w, aweights))), w_sum))

    x = subtract(x, expand_dims(avg, 1))
    xw = x if w is None else multiply(x, expand_dims(w, 0))
    prod = dot(x, lax.transpose(conj(xw), (1, 0)))
    return squeeze(true_divide(prod, norm))


def corrcoef(x: Any, y: Any = None, rowvar: bool = True, dtype: Any = None) -> Any:
    """Pearson correlation coefficients: ``cov(x, y)`` normalized by the standard deviations.

    The entries are clipped to [-1, 1] (real and imaginary parts separately for complex
    inputs). A single variable gives a scalar: 1, or NaN where its variance is 0 or NaN.

    Example:
        >>> jnp.corrcoef(jnp.array([[0., 1., 2.], [2., 1., 0.]]))
        Array([[ 1., -1.],
               [-1.,  1.]], dtype=float32)
    """
    check_arraylike("corrcoef", x)
    _inexact_dtype_arg("corrcoef", dtype)
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return true_divide(c, c)  # NaN for 0/0, inf/inf and NaN; 1 otherwise
    stddev = astype(sqrt(real(diagonal(c))), c.dtype)
    c = true_divide(true_divide(c, expand_dims(stddev, 1)), expand_dims(stddev, 0))
    re = clip(real(c), -1, 1)
    if dtypes.is_complex(c.dtype):
        return lax.complex(re, clip(imag(c), -1, 1))
    return re


# ---------------------------------------------------------------- trapezoid


def trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Any:
    """Integral of ``y`` along ``axis`` by the composite trapezoidal rule.

    The samples lie at ``x`` (1-D along ``axis``, or broadcastable to ``y``) or, without
    ``x``, ``dx`` apart. An empty axis integrates to 0 (as in NumPy).

    Example:
        >>> jnp.trapezoid(jnp.array([1., 2., 3.]), x=jnp.array([0., 1., 3.]))
        Array(6.5, dtype=float32)
    """
    if x is None:
        check_arraylike("trapezoid", y, dx)
        (y,) = promote_dtypes_inexact(y)
        if y.ndim == 0:
            raise ValueError("trapezoid: y must be at least one-dimensional, got a scalar")
        ax = canonicalize_axis("trapezoid", axis, y.ndim)
        d = ensure_array(dx)
        if d.ndim > y.ndim:
            raise ValueError(f"trapezoid: dx of shape {d.shape} has more dimensions than y "
                             f"of shape {y.shape}")
        if d.ndim > 0:
            d = moveaxis(expand_dims(d, tuple(range(y.ndim - d.ndim))), ax, -1)
    else:
        check_arraylike("trapezoid", y, x)
        y, x = promote_dtypes_inexact(y, x)
        if y.ndim == 0:
            raise ValueError("trapezoid: y must be at least one-dimensional, got a scalar")
        ax = canonicalize_axis("trapezoid", axis, y.ndim)
        if x.ndim == 1:
            if x.shape[0] != y.shape[ax]:
                raise ValueError(f"trapezoid: x of length {x.shape[0]} does not match y's "
                                 f"axis {ax} of length {y.shape[ax]}")
            d = diff(x)
        elif x.ndim == 0:
            raise ValueError("trapezoid: x must be at least one-dimensional, got a scalar")
        else:
            xax = canonicalize_axis("trapezoid", axis, x.ndim)
            d = moveaxis(diff(x, axis=xax), xax, -1)
    y = moveaxis(y, ax, -1)
    n = y.shape[-1]
    if n > 0 and (d.ndim == 0 or d.shape[-1] == 1):
        # Constant spacing: dx * (sum(y) - (y[0] + y[-1]) / 2).
        step = d if d.ndim == 0 else lax.index_in_dim(d, 0, axis=d.ndim - 1, keepdims=False)
        ends = lax.add(lax.index_in_dim(y, 0, axis=y.ndim - 1, keepdims=False),
                       lax.index_in_dim(y, n - 1, axis=y.ndim - 1, keepdims=False))
        return multiply(step, subtract(_sum(y, axis=-1), multiply(0.5, ends)))
    hi = lax.slice_in_dim(y, min(1, n), n, axis=y.ndim - 1)
    lo = lax.slice_in_dim(y, 0, max(n - 1, 0), axis=y.ndim - 1)
    return multiply(0.5, _sum(multiply(d, lax.add(hi, lo)), axis=-1))


# ---------------------------------------------------------------- interp


def _side_arg(name: str, value: Any) -> bool:
    """Whether ``left``/``right`` asks for linear extrapolation (only 'extrapolate')."""
    if isinstance(value, str):
        if value != "extrapolate":
            raise ValueError(f"interp: the only valid string value of '{name}' is "
                             f"'extrapolate', got {value!r}")
        return True
    if value is not None:
        check_arraylike("interp", value)
    return False


def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None,
           period: Any = None) -> Any:
    """Piecewise-linear interpolation of the points ``(xp, fp)`` at ``x``.

    ``xp`` must be increasing (not checked). Below ``xp[0]`` the result is ``left``
    (default ``fp[0]``), above ``xp[-1]`` it is ``right`` (default ``fp[-1]``); either may
    be ``'extrapolate'`` to continue the end segment. With ``period``, ``x`` and ``xp`` are
    angles of that period (``xp`` need not be sorted) and ``left``/``right`` are ignored.

    Example:
        >>> jnp.interp(jnp.array([0.5, 3.]), jnp.array([0., 1., 2.]), jnp.array([0., 10., 0.]))
        Array([5., 0.], dtype=float32)
    """
    check_arraylike("interp", x, xp, fp)
    xp_shape, fp_shape = np.shape(xp), np.shape(fp)
    if xp_shape != fp_shape or len(xp_shape) != 1:
        raise ValueError(f"interp: xp and fp must be one-dimensional arrays of equal size, "
                         f"got shapes {xp_shape} and {fp_shape}")
    if xp_shape[0] == 0:
        raise ValueError("interp: xp and fp must not be empty")
    x, xp = promote_dtypes_inexact(x, xp)
    (fp,) = promote_dtypes_inexact(fp)
    extrapolate_left = _side_arg("left", left)
    extrapolate_right = _side_arg("right", right)
    if dtypes.is_complex(x.dtype):
        raise ValueError("interp: complex x values are not supported")

    if period is not None:
        check_arraylike("interp", period)
        if np.ndim(period) != 0:
            raise ValueError(f"interp: period must be a scalar, got shape {np.shape(period)}")
        period = absolute(period)
        x = remainder(x, period)
        xp = remainder(xp, period)
        xp, fp = lax.sort_key_val(xp, fp)
        n = xp.shape[0]
        # One wrapped-around point on either side closes the circle.
        xp = concatenate([subtract(lax.slice_in_dim(xp, n - 1, n), period), xp,
                          add(lax.slice_in_dim(xp, 0, 1), period)])
        fp = concatenate([lax.slice_in_dim(fp, n - 1, n), fp, lax.slice_in_dim(fp, 0, 1)])

    n = xp.shape[0]
    # i: the right end of x's segment (1 <= i <= n-1); take(mode="clip") serves n == 1.
    i = clip(searchsorted(xp, x, side="right"), 1, max(n - 1, 1))
    j = subtract(i, 1)
    xp_i, xp_j = take(xp, i, mode="clip"), take(xp, j, mode="clip")
    fp_i, fp_j = take(fp, i, mode="clip"), take(fp, j, mode="clip")
    df = subtract(fp_i, fp_j)
    dxp = subtract(xp_i, xp_j)
    delta = subtract(x, xp_j)
    eps = float(dtypes.finfo(xp.dtype).eps)
    # Segments shorter than eps**2 (the spacing of eps) take the left value: no 0/0, and no
    # NaN gradients through the unused branch.
    flat = lax.le(lax.abs(dxp), lax.full_like(dxp, eps * eps))
    safe = where(flat, lax.full_like(dxp, 1), dxp)
    f = where(flat, fp_j, add(fp_j, multiply(true_divide(delta, safe), df)))

    if period is None:
        if not extrapolate_left:
            lval = lax.index_in_dim(fp, 0, keepdims=False) if left is None else left
            f = where(less(x, lax.index_in_dim(xp, 0, keepdims=False)), lval, f)
        if not extrapolate_right:
            rval = lax.index_in_dim(fp, n - 1, keepdims=False) if right is None else right
            f = where(greater(x, lax.index_in_dim(xp, n - 1, keepdims=False)), rval, f)
    return f


# ---------------------------------------------------------------- histogram


def _bin_count(bins: Any) -> int:
    bins = core.concrete_or_error(
        bins, "histogram_bin_edges: an integer 'bins' must be concrete (pass an array of edges "
              "to use traced values)")
    try:
        count = operator.index(bins)
    except TypeError:
        raise TypeError(f"histogram_bin_edges: bins must be an integer or a 1-D array of "
                        f"edges, got {bins!r}") from None
    if count < 0:
        raise ValueError(f"histogram_bin_edges: the number of bins must be non-negative, got "
                         f"{count}")
    return count


def _range_bounds(rng: Any, dt: np.dtype) -> tuple[Any, Any]:
    if isinstance(rng, (tuple, list)):
        parts = list(rng)
        check_arraylike("histogram_bin_edges", *parts)
        if len(parts) != 2 or any(np.ndim(p) != 0 for p in parts):
            raise ValueError(f"histogram_bin_edges: range must be None or a pair of scalars, "
                             f"got {rng!r}")
        lo, hi = (lax.convert_element_type(ensure_array(p), dt, False) for p in parts)
        return lo, hi
    check_arraylike("histogram_bin_edges", rng)
    r = ensure_array(rng)
    if r.shape != (2,):
        raise ValueError(f"histogram_bin_edges: range must be None or a pair of scalars, got "
                         f"an array of shape {r.shape}")
    r = lax.convert_element_type(r, dt, False)
    return lax.index_in_dim(r, 0, keepdims=False), lax.index_in_dim(r, 1, keepdims=False)


def histogram_bin_edges(a: Any, bins: Any = 10, range: Any = None,  # noqa: A002
                        weights: Any = None) -> Any:
    """Edges of the bins ``histogram`` uses: ``bins + 1`` evenly spaced edges over ``range``.

    ``range`` defaults to ``(a.min(), a.max())``; an empty range is widened by 0.5 either
    side. A 1-D ``bins`` array is returned as the edges (in ``a``'s floating dtype).
    ``weights`` is accepted for NumPy compatibility and does not affect the edges (as in
    NumPy, where only the string ``bins`` estimators, which are not supported, use it).

    Example:
        >>> jnp.histogram_bin_edges(jnp.array([1., 2., 5.]), bins=4)
        Array([1., 2., 3., 4., 5.], dtype=float32)
    """
    del weights  # only the string bin estimators use it
    if isinstance(bins, str):
        raise NotImplementedError("histogram_bin_edges: string values for 'bins' are not "
                                  "supported")
    check_arraylike("histogram_bin_edges", a, bins)
    arr = ensure_array(a)
    dt = dtypes.to_inexact_dtype(arr.dtype)
    if np.ndim(bins) == 1:
        return lax.convert_element_type(ensure_array(bins), dt, False)
    count = _bin_count(bins)
    if range is None:
        lo = lax.convert_element_type(amin(arr), dt, False)
        hi = lax.convert_element_type(amax(arr), dt, False)
    else:
        lo, hi = _range_bounds(range, dt)
    same = lax.eq(lo, hi)
    half = lax.full_like(lo, 0.5)
    lo, hi = where(same, lax.sub(lo, half), lo), where(same, lax.add(hi, half), hi)
    return linspace(lo, hi, count + 1, dtype=dt)


def histogram(a: Any, bins: Any = 10, range: Any = None,  # noqa: A002
              weights: Any = None, density: bool | None = None) -> tuple[Any, Any]:
    """Histogram of ``a`` (flattened): the per-bin counts (or weight sums) and the bin edges.

    ``bins`` is a number of equal bins over ``range`` (see ``histogram_bin_edges``) or a
    1-D array of increasing edges. Bins are half-open ``[e_i, e_i+1)`` except the last,
    which includes its right edge; values outside the edges (and NaNs) are not counted.
    With ``density`` the counts are divided by the total and the bin widths.

    Example:
        >>> jnp.histogram(jnp.array([1., 2., 2., 4.]), bins=3)[0]
        Array([1., 2., 1.], dtype=float32)
    """
    if weights is None:
        check_arraylike("histogram", a, bins)
        (a,) = promote_dtypes_inexact(a)
        weights = ones_like(a)
    else:
        check_arraylike("histogram", a, bins, weights)
        if np.shape(a) != np.shape(weights):
            raise ValueError(f"histogram: weights should have the same shape as a, got "
                             f"{np.shape(weights)} and {np.shape(a)}")
        a, weights = promote_dtypes_inexact(a, weights)
    edges = histogram_bin_edges(a, bins, range)
    nedges = edges.shape[0]
    if nedges == 0:
        raise ValueError("histogram: bins must contain at least one edge")
    flat_a = lax.reshape(a, (a.size,))
    flat_w = lax.reshape(weights, (weights.size,))
    idx = searchsorted(edges, flat_a, side="right")
    last = lax.index_in_dim(edges, nedges - 1, keepdims=False)
    idx = where(lax.eq(flat_a, lax.convert_element_type(last, flat_a.dtype)), nedges - 1, idx)
    # (Index 0 is below the first edge; index nedges, past the last, is dropped.)
    counts = lax.slice_in_dim(bincount(idx, flat_w, length=nedges), 1, nedges)
    density = core.concrete_or_error(density, "histogram: 'density' must be concrete")
    if density:
        counts = true_divide(true_divide(counts, diff(edges)), _sum(counts))
    return counts, edges


def histogramdd(sample: Any, bins: Any = 10, range: Any = None,  # noqa: A002
                weights: Any = None, density: bool | None = None) -> tuple[Any, list]:
    """Histogram of ``N`` points in ``D`` dimensions (``sample`` of shape ``(N, D)``): the
    counts (or weight sums) on a ``D``-dimensional grid of bins and the edges per dimension.

    ``bins`` is one bin count or edge array for every dimension, or a sequence of them (one
    per dimension); ``range`` a sequence of ``(low, high)`` pairs or Nones. Bins are half-open
    except the last of each dimension; points outside the edges are not counted.

    Example:
        >>> jnp.histogramdd(jnp.array([[0., 0.], [1., 1.], [1., 0.]]), bins=2)[0]
        Array([[1, 0],
               [1, 1]], dtype=int32)
    """
    if weights is None:
        check_arraylike("histogramdd", sample)
        (sample,) = promote_dtypes_inexact(ensure_array(sample))
    else:
        check_arraylike("histogramdd", sample, weights)
        if np.shape(weights) != np.shape(sample)[:1]:
            raise ValueError(f"histogramdd: weights should have one entry per sample (shape "
                             f"{np.shape(sample)[:1]}), got shape {np.shape(weights)}")
        sample, weights = promote_dtypes_inexact(ensure_array(sample), ensure_array(weights))
    if sample.ndim != 2:
        raise ValueError(f"histogramdd: sample must have shape (N, D), got {sample.shape}")
    n_dims = sample.shape[1]
    if range is not None and (len(range) != n_dims or any(
            r is not None and np.shape(r)[0] != 2 for r in range)):
        raise ValueError(f"histogramdd: for sample of shape {sample.shape}, range must be a "
                         f"sequence of {n_dims} pairs or Nones, got {range!r}")
    try:
        per_dim = list(bins)
    except TypeError:  # one bin count for every dimension
        per_dim = [bins] * n_dims
    else:
        if len(per_dim) != n_dims:
            raise ValueError(f"histogramdd: bins needs one entry per dimension ({n_dims}), "
                             f"got {len(per_dim)}")
    edges, cells = [], []
    for i, b in enumerate(per_dim):
        column = sample[:, i]
        e = histogram_bin_edges(column, b, None if range is None else range[i], weights)
        idx = searchsorted(e, column, side="right")
        # (The last edge belongs to the last bin; 0 and len(e) collect the outliers.)
        idx = where(lax.eq(column, e[-1]), idx - 1, idx)
        edges.append(e)
        cells.append(idx)
    shape = tuple(e.shape[0] + 1 for e in edges)
    flat = ravel_multi_index(tuple(cells), shape, mode="clip")
    hist = bincount(flat, weights, length=int(np.prod(shape)))
    hist = lax.reshape(hist, shape)[(slice(1, -1),) * n_dims]
    density = core.concrete_or_error(density, "histogramdd: 'density' must be concrete")
    if density:
        hist = true_divide(astype(hist, sample.dtype), _sum(hist))
        for i, e in enumerate(edges):  # divided by each dimension's bin widths
            hist = true_divide(hist, expand_dims(diff(e), tuple(
                d for d in builtins.range(n_dims) if d != i)))
    return hist, edges


def histogram2d(x: Any, y: Any, bins: Any = 10, range: Any = None,  # noqa: A002
                weights: Any = None, density: bool | None = None) -> tuple[Any, Any, Any]:
    """Histogram of the points ``(x[i], y[i])``: counts on a 2-D grid and the edges along x
    and y (see ``histogramdd``; ``bins`` may also be one edge array for both axes).

    Example:
        >>> jnp.histogram2d(jnp.array([0., 1., 1.]), jnp.array([0., 1., 0.]), bins=2)[0]
        Array([[1, 0],
               [1, 1]], dtype=int32)
    """
    check_arraylike("histogram2d", x, y)
    try:
        n = len(bins)
    except TypeError:
        n = 1
    if n not in (1, 2):  # one edge array for both axes
        bins = [ensure_array(bins), ensure_array(bins)]
    x, y = ensure_array(x), ensure_array(y)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"histogram2d: x and y must be 1-D arrays of one length, got shapes "
                         f"{x.shape} and {y.shape}")
    sample = lax.concatenate([lax.reshape(x, (x.shape[0], 1)),
                              lax.reshape(y, (y.shape[0], 1))], 1)
    hist, edges = histogramdd(sample, bins, range, weights, density)
    return hist, edges[0], edges[1]


__all__ = ["cov", "corrcoef", "trapezoid", "interp", "histogram_bin_edges", "histogram",
           "histogramdd", "histogram2d"]
