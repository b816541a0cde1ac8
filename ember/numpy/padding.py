"""``pad``: every NumPy mode (constant, edge, wrap, reflect and symmetric with either
``reflect_type``, linear_ramp, maximum/minimum/mean/median with ``stat_length``, empty, and a
function), written on lax ``pad``, slices and concatenation so that it traces, differentiates
and vmaps; the pad widths and mode arguments are static.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ember import core, dtypes, lax
from ember.core import Tracer
from ember.numpy._util import array_arg as _arr
from ember.numpy.shape import _slice


def _pad_width(fn: str, pad_width: Any, nd: int, arg: str = "pad_width") -> np.ndarray:
    pw = core.concrete_or_error(pad_width, f"{fn}: {arg} must be concrete")
    try:
        arr = np.asarray(pw)
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: {arg} must be an int or a sequence of int pairs, got "
                        f"{pad_width!r}") from None
    if arr.size and arr.dtype.kind not in "iu":
        raise TypeError(f"{fn}: {arg} must contain integers, got {pad_width!r}")
    try:
        arr = np.broadcast_to(arr.astype(np.int64), (nd, 2))
    except ValueError:
        raise ValueError(f"{fn}: {arg} {pad_width!r} cannot be broadcast to the shape "
                         f"({nd}, 2) of an array of rank {nd}") from None
    if np.any(arr < 0):
        raise ValueError(f"{fn}: {arg} must be non-negative, got {pad_width!r}")
    return arr


def _periodic_pad(x: Any, ax: int, lo: int, hi: int, period: Any) -> Any:
    """Pads by reading output position i (relative to the start of x) from period[i % p]."""
    p = core.get_aval(period).shape[ax]
    n = core.get_aval(x).shape[ax]
    start = (-lo) % p
    length = lo + n + hi
    copies = -(-(start + length) // p)
    tiled = lax.concatenate([period] * copies, ax) if copies > 1 else period
    return _slice(tiled, ax, start, start + length)


def _pad_axis(x: Any, ax: int, lo: int, hi: int, mode: str, fn: str,
              reflect_type: str = "even", option: Any = None) -> Any:
    shp = core.get_aval(x).shape
    n = shp[ax]
    if lo == 0 and hi == 0:
        return x
    if n == 0:
        raise ValueError(f"{fn}: can't extend empty axis {ax} using modes other than "
                         f"'constant' or 'empty'")
    if mode in _PAD_STATS:
        return _pad_stat(x, ax, lo, hi, mode, option)
    if mode == "linear_ramp":
        return _pad_ramp(x, ax, lo, hi, option)
    if reflect_type == "odd" and mode in ("reflect", "symmetric"):
        return _pad_reflect_odd(x, ax, lo, hi, mode)
    if mode == "edge" or (mode == "reflect" and n == 1):
        def edge(count, s):
            tshape = shp[:ax] + (count,) + shp[ax + 1:]
            return lax.broadcast_in_dim(_slice(x, ax, s, s + 1), tshape, tuple(range(len(shp))))
        parts = ([edge(lo, 0)] if lo else []) + [x] + ([edge(hi, n - 1)] if hi else [])
        return lax.concatenate(parts, ax)
    short = _short_mirror_pad(x, ax, lo, hi, mode)
    if short is not None:
        return short
    if mode == "wrap":
        period = x
    elif mode == "symmetric":
        period = lax.concatenate([x, lax.rev(x, (ax,))], ax)
    else:  # reflect: x then its reversed interior
        period = lax.concatenate([x, lax.rev(_slice(x, ax, 1, n - 1), (ax,))], ax) \
            if n > 2 else x
    return _periodic_pad(x, ax, lo, hi, period)


def _short_mirror_pad(x: Any, ax: int, lo: int, hi: int, mode: str) -> Any:
    """'wrap', 'symmetric' or 'reflect' padding no wider than one period's worth of x: x
    between its (reversed, except for 'wrap') end pieces, or None for wider padding. (The
    periodic form tiles whole periods, which costs a kernel several copies of x.)"""
    n = core.get_aval(x).shape[ax]
    if builtins.max(lo, hi) > (n - 1 if mode == "reflect" else n):
        return None
    if mode == "wrap":
        before, after = _slice(x, ax, n - lo, n), _slice(x, ax, 0, hi)
    else:
        skip = 1 if mode == "reflect" else 0  # (reflect leaves out the edge element)
        before = lax.rev(_slice(x, ax, skip, skip + lo), (ax,))
        after = lax.rev(_slice(x, ax, n - skip - hi, n - skip), (ax,))
    parts = ([before] if lo else []) + [x] + ([after] if hi else [])
    return lax.concatenate(parts, ax)


def _repeat_along(x: Any, ax: int, count: int) -> Any:
    """``x`` (of size 1 along ``ax``) broadcast to size ``count`` there."""
    shp = core.get_aval(x).shape
    return lax.broadcast_in_dim(x, shp[:ax] + (count,) + shp[ax + 1:], tuple(range(len(shp))))


def _pad_stat(x: Any, ax: int, lo: int, hi: int, mode: str, lengths: Any) -> Any:
    """JAX's 'maximum'/'minimum'/'mean'/'median' modes: the statistic of the whole axis or of
    its first/last ``stat_length`` elements, rounded for integer arrays."""
    from ember.numpy import reductions  # (imports that would be circular at the top)
    from ember.numpy.ufuncs import round as _round
    stat = {"maximum": reductions.max, "minimum": reductions.min, "mean": reductions.mean,
            "median": reductions.median}[mode]
    aval = core.get_aval(x)
    n = aval.shape[ax]
    if lengths is None:
        before = after = stat(x, axis=ax, keepdims=True)
    else:
        lb, la = (builtins.min(int(v), n) for v in lengths)
        if lb == 0 or la == 0:
            raise ValueError("pad: stat_length of 0 yields no value for padding")
        before = stat(_slice(x, ax, 0, lb), axis=ax, keepdims=True)
        after = stat(_slice(x, ax, n - la, n), axis=ax, keepdims=True)
    parts = []
    for value, count in ((before, lo), (after, hi)):
        if dtypes.is_integer(aval.dtype):
            value = _round(value)
        value = lax.convert_element_type(value, aval.dtype, aval.weak_type)
        parts.append(_repeat_along(value, ax, count))
    return lax.concatenate([parts[0], x, parts[1]], ax)


def _pad_ramp(x: Any, ax: int, lo: int, hi: int, end_values: Any) -> Any:
    """JAX's 'linear_ramp' mode: linspace from each end value to the edge (exclusive)."""
    from ember.numpy.creation import linspace  # (creation imports this module)
    aval = core.get_aval(x)
    n = aval.shape[ax]
    ramps = []
    for end, count, at in ((end_values[0], lo, 0), (end_values[1], hi, n - 1)):
        edge = lax.squeeze(_slice(x, ax, at, at + 1), (ax,))
        ramp = linspace(end, edge, count, endpoint=False, dtype=aval.dtype, axis=ax)
        ramps.append(lax.convert_element_type(ramp, aval.dtype, aval.weak_type))
    return lax.concatenate([ramps[0], x, lax.rev(ramps[1], (ax,))], ax)


def _pad_reflect_odd(x: Any, ax: int, lo: int, hi: int, mode: str) -> Any:
    """'reflect'/'symmetric' with reflect_type='odd' (values mirrored through the edge:
    ``2 * edge - x``), chunk by chunk as JAX builds it."""
    n = core.get_aval(x).shape[ax]
    offset = 1 if mode == "reflect" and n > 1 else 0
    for before, padding in ((True, lo), (False, hi)):
        m = core.get_aval(x).shape[ax]
        edge = _slice(x, ax, 0, 1) if before else _slice(x, ax, m - 1, m)
        while padding > 0:
            cur = builtins.min(padding, n - offset)
            padding -= cur
            m = core.get_aval(x).shape[ax]
            start = offset if before else m - cur - offset
            piece = lax.rev(_slice(x, ax, start, start + cur), (ax,))
            twice = _repeat_along(lax.add(edge, edge), ax, cur)
            piece = lax.sub(twice, piece)
            if n > 1:
                edge = _slice(piece, ax, 0, 1) if before else _slice(piece, ax, cur - 1, cur)
            x = lax.concatenate([piece, x] if before else [x, piece], ax)
    return x


def _pad_pairs(fn: str, values: Any, nd: int, arg: str) -> np.ndarray:
    """Per-axis (before, after) values (``end_values``), broadcast as NumPy does."""
    values = np.asarray(core.concrete_or_error(values, f"{fn}: {arg} must be concrete"))
    try:
        return np.broadcast_to(values, (nd, 2))
    except ValueError:
        raise ValueError(f"{fn}: {arg} {values!r} cannot be broadcast to the shape ({nd}, 2) "
                         f"of an array of rank {nd}") from None


_PAD_STATS = ("maximum", "minimum", "mean", "median")
_PAD_KWARGS = {"constant": {"constant_values"}, "edge": set(), "wrap": set(), "empty": set(),
               "linear_ramp": {"end_values"}, "reflect": {"reflect_type"},
               "symmetric": {"reflect_type"}, **{m: {"stat_length"} for m in _PAD_STATS}}
_PAD_MODES = tuple(_PAD_KWARGS)


def pad(array: Any, pad_width: Any, mode: str = "constant", **kwargs: Any) -> Any:
    """Pads an array; modes 'constant' (``constant_values``), 'edge', 'linear_ramp'
    (``end_values``), 'maximum', 'minimum', 'mean', 'median' (``stat_length``), 'reflect',
    'symmetric' (``reflect_type``), 'wrap', 'empty' (zeros), or a function as NumPy's.

    Example:
        >>> jnp.pad(jnp.array([1, 2]), (1, 2), mode="edge")
        Array([1, 1, 2, 2, 2], dtype=int32)
    """
    array = _arr("pad", array)
    aval = core.get_aval(array)
    if callable(mode):  # mode(vector, (before, after), axis, kwargs) fills each padded vector
        from ember.numpy.index_tricks import apply_along_axis  # (index_tricks imports this)
        widths = _pad_width("pad", pad_width, aval.ndim)
        out = pad(array, widths)
        for ax in range(aval.ndim):
            out = apply_along_axis(mode, ax, out, tuple(int(w) for w in widths[ax]), ax, kwargs)
        return out
    if not isinstance(mode, str) or mode not in _PAD_MODES:
        raise NotImplementedError(f"pad: unimplemented padding mode {mode!r}; supported modes "
                                  f"are {_PAD_MODES}")
    bad = set(kwargs) - _PAD_KWARGS[mode]
    if bad:
        raise ValueError(f"pad: unsupported keyword arguments for mode {mode!r}: {sorted(bad)}")
    reflect_type = kwargs.get("reflect_type", "even")
    if reflect_type not in ("even", "odd"):
        raise ValueError(f"pad: reflect_type must be 'even' or 'odd', got {reflect_type!r}")
    widths = _pad_width("pad", pad_width, aval.ndim)
    if mode in ("constant", "empty"):
        cv = kwargs.get("constant_values", 0)
        if isinstance(cv, Tracer) or hasattr(cv, "aval") and np.ndim(cv) == 0 and \
                not isinstance(cv, np.ndarray):
            cv_val = lax.convert_element_type(cv, aval.dtype)
            return lax.pad(array, cv_val, [(int(lo), int(hi), 0) for lo, hi in widths])
        cvs = np.asarray(cv)
        try:
            cvs = np.broadcast_to(cvs, (aval.ndim, 2))
        except ValueError:
            raise ValueError(f"pad: constant_values {cv!r} cannot be broadcast to the shape "
                             f"({aval.ndim}, 2)") from None
        if aval.ndim and np.all(cvs == cvs.flat[0]) or aval.ndim == 0:
            value = cvs.flat[0] if cvs.size else 0
            pv = lax.convert_element_type(np.asarray(value), aval.dtype)
            return lax.pad(array, pv, [(int(lo), int(hi), 0) for lo, hi in widths])
        for ax in range(aval.ndim):
            for side, value in enumerate(cvs[ax]):
                cfg = [(0, 0, 0)] * aval.ndim
                cfg[ax] = (int(widths[ax][0]), 0, 0) if side == 0 else (0, int(widths[ax][1]), 0)
                array = lax.pad(array, lax.convert_element_type(np.asarray(value), aval.dtype),
                                cfg)
        return array
    options = [None] * aval.ndim  # (end_values or stat_length pairs, per axis)
    if mode == "linear_ramp":
        options = _pad_pairs("pad", kwargs.get("end_values", 0), aval.ndim, "end_values")
    elif mode in _PAD_STATS and kwargs.get("stat_length") is not None:
        options = _pad_width("pad", kwargs["stat_length"], aval.ndim, "stat_length")
    for ax in range(aval.ndim):
        array = _pad_axis(array, ax, int(widths[ax][0]), int(widths[ax][1]), mode, "pad",
                          reflect_type, options[ax])
    return array


__all__ = ["pad"]
