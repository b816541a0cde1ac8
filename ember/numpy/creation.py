"""Array creation: array, asarray, zeros, ones, full, arange, linspace, eye, ..."""

from __future__ import annotations

import builtins
import functools
import inspect
from typing import Any

import numpy as np

from ember import _pytree, core, dtypes, lax
from ember.compiler import eval_elementwise
from ember.core import ShapedArray, Tracer
from ember.numpy import _util, ufuncs
from ember.numpy.shape import broadcast_arrays, broadcast_to, moveaxis, ravel, stack, static_int
from ember.runtime.array import Array, device_buffer, device_empty, device_put


def _takes_device(fn):
    """Adds JAX's keyword-only ``device`` argument to a creation function: a device or a
    ``Sharding`` the result is placed on (``device_put``: its ``.sharding``, committed);
    None leaves it as it is."""
    @functools.wraps(fn)
    def with_device(*args, device=None, **kwargs):
        out = fn(*args, **kwargs)
        return out if device is None else device_put(out, device)

    sig = inspect.signature(fn)
    with_device.__signature__ = sig.replace(parameters=[
        *sig.parameters.values(),
        inspect.Parameter("device", inspect.Parameter.KEYWORD_ONLY, default=None)])
    return with_device


def _concrete(value: np.ndarray, weak_type: bool = False) -> Any:
    dt = dtypes.canonicalize_dtype(value.dtype)
    value = np.asarray(value, dtype=dt)
    return core.concrete_array(value, ShapedArray(value.shape, dt, weak_type))


@_takes_device
def array(object: Any, dtype: Any = None, copy: bool = True, order: Any = None,
          ndmin: int = 0) -> Any:
    """Creates an array from an array-like or a (nested) list of them.

    Python scalars give weakly typed arrays, as in JAX.

    Example:
        >>> jnp.array([1, 2])
        Array([1, 2], dtype=int32)
    """
    if order is not None and order != "K":  # (as JAX: its arrays have no memory layout)
        raise NotImplementedError(f"array: only order='K' is implemented, got order={order!r}")
    if dtype is not None:
        dtype = dtypes.canonicalize_dtype(dtypes.dtype(dtype))
    if isinstance(object, np.ma.MaskedArray):
        core.get_aval(object)  # (a ValueError: the mask would be dropped)
    if object is None or isinstance(object, (list, tuple)) and any(
            leaf is None for leaf in _pytree.tree_leaves(object, is_leaf=lambda x: x is None)):
        raise ValueError("None is not a valid value for jnp.array")
    if isinstance(object, Tracer) or (isinstance(object, (list, tuple)) and any(
            isinstance(leaf, Tracer) for leaf in _pytree.tree_leaves(object))):
        # Lists of tracers are stacked by primitives.
        out = object if isinstance(object, Tracer) else stack(
            [array(o) for o in object]) if len(object) else array(np.zeros((0,)))
        # (Weak only for a lone weak tracer and no dtype: a list is never weakly typed.)
        weak = dtype is None and isinstance(object, Tracer) and out.weak_type
        out = lax.convert_element_type(out, dtype if dtype is not None else out.dtype, weak)
    elif hasattr(object, "aval"):
        out = object
        if dtype is not None and (dtype != out.dtype or out.weak_type):
            out = lax.convert_element_type(out, dtype)  # an explicit dtype is never weak
        elif copy:
            out = out.copy()
    elif not isinstance(object, (list, tuple, np.ndarray)) \
            and hasattr(type(object), "__jax_array__"):  # (JAX's protocol for array-likes)
        return array(object.__jax_array__(), dtype, copy, order, ndmin)
    else:
        if isinstance(object, (list, tuple)):
            leaves = _pytree.tree_leaves(object)
            if any(not core.is_array_like(leaf) for leaf in leaves):
                bad = next(leaf for leaf in leaves if not core.is_array_like(leaf))
                raise TypeError(f"array: unsupported element of type {type(bad).__name__} "
                                "in the input sequence")
            if dtype is None:  # JAX's promotion of the leaves: Python scalars are weak
                dtype = _leaves_result_type(leaves)
            leaves_np = [np.asarray(x) if hasattr(x, "aval") else x for x in leaves]
            object = _pytree.tree_unflatten(_pytree.tree_structure(object), leaves_np)
        weak = dtypes.is_weakly_typed(object) and dtype is None
        if dtypes.is_python_scalar(object):
            np_value = np.asarray(object, dtype=dtype or dtypes.dtype(object, canonicalize=True))
        else:
            if dtype is None and isinstance(object, np.ndarray) \
                    and object.dtype in dtypes.supported_dtypes:
                dtype = dtypes.canonicalize_dtype(object.dtype)  # (one copy, not two)
            try:
                np_value = device_buffer(object, dtype)
            except (TypeError, ValueError) as e:  # same class as NumPy/JAX (ragged: ValueError)
                raise type(e)(f"array: cannot convert {type(object).__name__} to an array: "
                              f"{e}") from None
            if np_value.dtype == object_dtype:
                raise TypeError(f"array: cannot convert {object!r} to an array")
        out = _concrete(np_value, weak)
    if ndmin and out.ndim < ndmin:
        out = lax.reshape(out, (1,) * (ndmin - out.ndim) + out.shape)
    return out


object_dtype = np.dtype(object)


def _leaves_result_type(leaves: list[Any]) -> np.dtype:
    """The promoted dtype of a nested sequence's leaves (default float when empty)."""
    if not leaves:
        return dtypes.default_float_dtype()
    distinct = {}  # one leaf per (dtype, weak type): long lists promote quickly
    for leaf in leaves:
        distinct.setdefault((dtypes.dtype(leaf), dtypes.is_weakly_typed(leaf)), leaf)
    return dtypes.canonicalize_dtype(dtypes.result_type(*distinct.values()))


@_takes_device
def asarray(a: Any, dtype: Any = None, order: Any = None, copy: bool | None = None) -> Any:
    """Converts ``a`` to an array without copying when it already is one.

    Example:
        >>> jnp.asarray(np.arange(3)).dtype
        dtype('int32')
    """
    return array(a, dtype=dtype, copy=bool(copy), order=order)


def _shape_arg(fn: str, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool) or (
            type(shape) is Array and shape.shape == ()):
        shape = (shape,)
    try:
        shape = tuple(core.concrete_or_error(d, f"{fn}: shape must be concrete") for d in shape)
    except TypeError as e:
        if "Abstract tracer" in str(e):
            raise
        raise TypeError(f"{fn}: shape must be an int or a sequence of ints, got {shape!r}") \
            from None
    for d in shape:
        # (Python and NumPy integers, and 0-d integer arrays: concrete ember Arrays too.)
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) and not (
                isinstance(d, (np.ndarray, Array)) and d.ndim == 0 and d.dtype.kind in "iu"):
            raise TypeError(f"{fn}: shape must contain integers, got {shape!r}")
        if int(d) < 0:  # a TypeError in JAX
            raise TypeError(f"{fn}: negative dimensions are not allowed, got shape {shape}")
    return tuple(int(d) for d in shape)


def _dtype_arg(dtype: Any) -> np.dtype | None:
    return None if dtype is None else dtypes.canonicalize_dtype(dtypes.dtype(dtype))


def _is_concrete(x: Any) -> bool:
    return not isinstance(x, Tracer) or x.to_concrete_value() is not None


def _concrete_value(x: Any) -> Any:
    x = core.concrete_or_error(x)
    return np.asarray(x) if hasattr(x, "aval") else x


@_takes_device
def full(shape: Any, fill_value: Any, dtype: Any = None) -> Any:
    """An array of ``shape`` filled with ``fill_value`` (a scalar or a broadcastable array).

    Example:
        >>> jnp.full((2,), 7)
        Array([7, 7], dtype=int32)
    """
    shape = _shape_arg("full", shape)
    dt = _dtype_arg(dtype)
    if not _util.is_arraylike(fill_value):
        fill_value = array(fill_value, dtype=dt)
    if np.ndim(fill_value) if not isinstance(fill_value, Tracer) else fill_value.ndim:
        return broadcast_to(asarray(fill_value, dtype=dt), shape)
    if core.is_eval_context() and not isinstance(fill_value, Tracer):
        out_dt = dt if dt is not None else dtypes.canonicalize_dtype(dtypes.dtype(fill_value))
        weak = dt is None and dtypes.is_weakly_typed(fill_value)
        # Converted like lax.convert_element_type (JAX): ints wrap, floats saturate.
        value = np.asarray(lax.convert_element_type(_concrete_value(fill_value), out_dt, weak))
        out = device_empty(shape, out_dt)
        np.copyto(out, value)
        return _concrete(out, weak)
    return lax.full(shape, fill_value, dt)


@_takes_device
def zeros(shape: Any, dtype: Any = None) -> Any:
    """An array of zeros (default dtype float32).

    Example:
        >>> jnp.zeros(2)
        Array([0., 0.], dtype=float32)
    """
    shape = _shape_arg("zeros", shape)
    return full(shape, 0, dtype if dtype is not None else dtypes.default_float_dtype())


@_takes_device
def ones(shape: Any, dtype: Any = None) -> Any:
    """An array of ones (default dtype float32).

    Example:
        >>> jnp.ones(2)
        Array([1., 1.], dtype=float32)
    """
    shape = _shape_arg("ones", shape)
    return full(shape, 1, dtype if dtype is not None else dtypes.default_float_dtype())


@_takes_device
def empty(shape: Any, dtype: Any = None) -> Any:
    """Like ``zeros`` (arrays are immutable, so there is no uninitialized memory).

    Example:
        >>> jnp.empty(2).shape
        (2,)
    """
    shape = _shape_arg("empty", shape)
    return zeros(shape, dtype)


def _like_aval(fn: str, a: Any, dtype: Any = None) -> ShapedArray:
    """The aval of ``a``, or of a shape-and-dtype object (with ``dtype`` for its dtype when
    given: a typed key array's is no NumPy dtype)."""
    if not _util.is_arraylike(a) and hasattr(a, "shape") and hasattr(a, "dtype"):
        return ShapedArray(a.shape, dtypes.canonicalize_dtype(a.dtype if dtype is None
                                                              else dtype),
                           getattr(a, "weak_type", False))
    _util.check_arraylike(fn, a)
    return core.get_aval(a)


@_takes_device
def full_like(a: Any, fill_value: Any, dtype: Any = None, shape: Any = None) -> Any:
    """An array like ``a`` (shape and dtype, unless overridden) filled with ``fill_value``.

    Example:
        >>> jnp.full_like(jnp.ones(2, jnp.int32), 3)
        Array([3, 3], dtype=int32)
    """
    return _full_like("full_like", a, fill_value, dtype, shape)


def _full_like(fn: str, a: Any, fill_value: Any, dtype: Any, shape: Any) -> Any:
    aval = _like_aval(fn, a, dtype)
    shp = aval.shape if shape is None else _shape_arg(fn, shape)
    dt = aval.dtype if dtype is None else _dtype_arg(dtype)
    weak = dtype is None and aval.weak_type
    if not _util.is_arraylike(fill_value):
        fill_value = array(fill_value, dtype=dt)
    if np.ndim(fill_value) if not isinstance(fill_value, Tracer) else fill_value.ndim:
        return broadcast_to(asarray(fill_value, dtype=dt), shp)
    if core.is_eval_context() and not isinstance(fill_value, Tracer):
        value = np.asarray(_concrete_value(fill_value)).astype(dt)
        return _concrete(np.full(shp, value, dtype=dt), weak)
    return lax.broadcast(lax.convert_element_type(fill_value, dt, weak), shp)


@_takes_device
def zeros_like(a: Any, dtype: Any = None, shape: Any = None) -> Any:
    """Zeros with the shape and dtype of ``a`` (unless overridden).

    Example:
        >>> jnp.zeros_like(jnp.ones((2, 2))).shape
        (2, 2)
    """
    return _full_like("zeros_like", a, 0, dtype, shape)


@_takes_device
def ones_like(a: Any, dtype: Any = None, shape: Any = None) -> Any:
    """Ones with the shape and dtype of ``a`` (unless overridden).

    Example:
        >>> jnp.ones_like(jnp.zeros(2, jnp.int32))
        Array([1, 1], dtype=int32)
    """
    return _full_like("ones_like", a, 1, dtype, shape)


@_takes_device
def empty_like(prototype: Any, dtype: Any = None, shape: Any = None) -> Any:
    """Like ``zeros_like``.

    Example:
        >>> jnp.empty_like(jnp.ones(3)).shape
        (3,)
    """
    return _full_like("empty_like", prototype, 0, dtype, shape)


def copy(a: Any, order: Any = None) -> Any:
    """A copy of ``a``.

    Example:
        >>> jnp.copy(jnp.ones(2))
        Array([1., 1.], dtype=float32)
    """
    _util.check_arraylike("copy", a)
    return array(a, copy=True, order=order)


# ---------------------------------------------------------------- ranges


def _static_scalar(fn: str, arg: str, x: Any) -> Any:
    x = core.concrete_or_error(
        x, f"{fn}: {arg} must be concrete; it cannot be a traced value (for a traced "
           "length use a static argument)")
    if hasattr(x, "aval") or isinstance(x, np.ndarray):
        x = np.asarray(x)
        if x.ndim != 0:
            raise ValueError(f"{fn}: {arg} must be a scalar, got an array of shape {x.shape}")
        return x[()]
    if not isinstance(x, (int, float, np.number, bool)):
        raise TypeError(f"{fn}: {arg} must be a real number, got {x!r}")
    return x


@_takes_device
def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None) -> Any:
    """Evenly spaced values in ``[start, stop)``; integer arguments give int32, any float
    float32 (with 64-bit off). Arguments must be concrete.

    As JAX computes it, from ``iota`` (so under ``jit`` the values are index arithmetic
    inside a kernel, not a constant): ``start + step * iota`` in the result dtype (in
    float32 for narrower floats, then rounded), ``start + iota`` without a step. Float
    values can differ from NumPy's in the last place (``arange(0, 1, 0.1)[9]`` is
    ``0.90000004``, as in JAX).

    Example:
        >>> jnp.arange(3)
        Array([0, 1, 2], dtype=int32)
    """
    if any(np.iscomplexobj(v) for v in (start, stop, step) if v is not None):
        raise ValueError("arange: complex start, stop or step is not supported")
    start = _static_scalar("arange", "start", start)
    stop = None if stop is None else _static_scalar("arange", "stop", stop)
    step = None if step is None else _static_scalar("arange", "step", step)
    if step is not None and step == 0:
        raise ZeroDivisionError("arange: step must not be zero (division by zero)")
    dt = _dtype_arg(dtype)
    if dt is None:
        dt = dtypes.canonicalize_dtype(dtypes.result_type(
            *(v for v in (start, stop, step) if v is not None)))
    if dt == dtypes.bool_:  # as JAX's iota
        raise TypeError("arange: does not accept dtype bool. Accepted dtypes are subtypes of "
                        "integer, floating, complexfloating.")
    if stop is None:
        start, stop = 0, start
    size = builtins.max(0, int(np.ceil((stop - start) / (1 if step is None else step))))
    # (float16 and bfloat16 steps are taken in float32)
    work = dt if step is None or not (dtypes.is_float(dt) and dt.itemsize < 4) else np.float32
    if core.is_eval_context():  # the same operations in NumPy, each rounded to ``work``
        with np.errstate(all="ignore"):
            values = np.arange(size).astype(work)
            if step is not None:
                values = np.asarray(step).astype(work) * values
            if start != 0:
                values = np.asarray(start).astype(work) + values
            return _concrete(values.astype(dt))
    values = lax.iota(work, size)
    if step is not None:
        values = lax.mul(lax.convert_element_type(step, work), values)
    if start != 0:
        values = lax.add(lax.convert_element_type(start, work), values)
    return lax.convert_element_type(values, dt)


def _linspace_dtype(fn: str, dtype: Any, *args: Any) -> tuple[np.dtype, np.dtype]:
    """(result dtype, computation dtype) for linspace-like functions, as in JAX: the result
    defaults to the arguments' dtype made inexact, and the computation runs in the result
    dtype made inexact."""
    dt = _dtype_arg(dtype)
    if dt is None:
        dt = dtypes.to_inexact_dtype(dtypes.canonicalize_dtype(dtypes.result_type(*args)))
    return dt, dtypes.to_inexact_dtype(dt)


def _insert_axis(fn: str, out: Any, axis: int) -> Any:
    nd = core.get_aval(out).ndim
    return moveaxis(out, 0, _util.canonicalize_axis(fn, axis, nd))


def _times_numpy(x: np.ndarray, recip: np.ndarray) -> np.ndarray:
    return (x.astype(recip.dtype) * recip).astype(x.dtype)


def _linspace_traced(start, stop, num, endpoint, cdt, axis):
    # JAX's formula (so results agree bit for bit): sample i of ``div`` intervals is
    # ``start * (1 - t) + stop * t`` with ``t = i / div`` rounded to cdt, the endpoint exact.
    start, stop = (lax.convert_element_type(x, cdt) for x in (start, stop))
    start, stop = broadcast_arrays(start, stop)
    bshape = core.get_aval(start).shape
    div = num - 1 if endpoint else num
    if num == 0:
        return (_insert_axis("linspace", full((0,) + bshape, 0, cdt), axis),
                full(bshape, np.nan, cdt))
    if num == 1:
        delta = full(bshape, np.nan, cdt) if endpoint else lax.sub(stop, start)
        return _insert_axis("linspace", lax.expand_dims(start, (0,)), axis), delta
    delta = _util.times_constant(lax.sub(stop, start),
                                 _util.constant_reciprocal(div, cdt))
    real = dtypes.finfo(cdt).dtype
    shp, dims = (div,) + bshape, tuple(range(1, len(bshape) + 1))
    t = lax.convert_element_type(_util.times_constant(lax.broadcasted_iota(real, shp, 0),
                                                      _util.constant_reciprocal(div, real)),
                                 cdt)
    out = lax.add(lax.mul(lax.broadcast_in_dim(start, shp, dims), lax.sub(lax.full(shp, 1, cdt),
                                                                          t)),
                  lax.mul(lax.broadcast_in_dim(stop, shp, dims), t))
    if endpoint:
        out = lax.concatenate([out, lax.expand_dims(stop, (0,))], 0)
    return _insert_axis("linspace", out, axis), delta


def _linspace_numpy(start, stop, num, endpoint, cdt, axis):
    """``_linspace_traced`` computed by NumPy (Python and NumPy arguments give constants)."""
    div = num - 1 if endpoint else num
    with np.errstate(all="ignore"):  # (float16 may overflow: no warning, as in JAX)
        start, stop = np.broadcast_arrays(np.asarray(start).astype(cdt),
                                          np.asarray(stop).astype(cdt))
        if num <= 1:
            out = start[None][:num]
            delta = np.asarray(np.nan if endpoint or num == 0 else stop - start).astype(cdt)
        else:
            delta = _times_numpy((stop - start).astype(cdt),
                                 _util.constant_reciprocal(div, cdt))
            real = dtypes.finfo(cdt).dtype
            t = _times_numpy(np.arange(div).astype(real), _util.constant_reciprocal(div, real))
            t = t.astype(cdt).reshape((div,) + (1,) * start.ndim)
            out = (start * (np.asarray(1, cdt) - t)).astype(cdt) + (stop * t).astype(cdt)
            out = np.concatenate([out.astype(cdt), stop[None]]) if endpoint else out
    return np.moveaxis(out.astype(cdt), 0, axis), delta


def _finish(fn: str, out: Any, dt: np.dtype) -> Any:
    if dtypes.is_integer(dt) and dtypes.is_inexact(core.get_aval(out).dtype):
        out = lax.floor(out)
    return lax.convert_element_type(out, dt)


def _concrete_samples(value: np.ndarray, dt: np.dtype) -> Any:
    # Concrete counterpart of _finish: integer results round down. Rounding into float16 may
    # overflow: no warning, as in JAX.
    with np.errstate(all="ignore"):
        value = np.asarray(np.floor(value) if dtypes.is_integer(dt) else value).astype(dt)
    return _concrete(value)


def _num_arg(fn: str, num: Any) -> int:
    num = static_int(fn, "num", num)
    if num < 0:
        raise ValueError(f"{fn}: number of samples, {num}, must be non-negative")
    return num


def _all_concrete(*xs: Any) -> bool:
    # Python/NumPy values are computed in float64 by NumPy; ember arrays (concrete or traced)
    # take the lax path, so eager and staged results agree exactly.
    return all(not isinstance(x, Tracer) and not hasattr(x, "aval") for x in xs)


@_takes_device
def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True,
             retstep: bool = False, dtype: Any = None, axis: int = 0) -> Any:
    """``num`` evenly spaced samples from ``start`` to ``stop`` (array bounds give a new axis).

    Example:
        >>> jnp.linspace(0, 1, 3)
        Array([0. , 0.5, 1. ], dtype=float32)
    """
    _util.check_arraylike("linspace", start, stop)
    num = _num_arg("linspace", num)
    dt, cdt = _linspace_dtype("linspace", dtype, start, stop)
    if _all_concrete(start, stop):
        ndim = np.broadcast(np.asarray(start), np.asarray(stop)).ndim
        axis = _util.canonicalize_axis("linspace", axis, ndim + 1)
        value, step = _linspace_numpy(start, stop, num, endpoint, cdt, axis)
        out = _concrete_samples(value, dt)
        step = _concrete(np.asarray(step).astype(cdt))
    else:
        out, step = _linspace_traced(start, stop, num, endpoint, cdt, axis)
        out = _finish("linspace", out, dt)
    return (out, step) if retstep else out


def logspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True,
             base: Any = 10.0, dtype: Any = None, axis: int = 0) -> Any:
    """``base ** linspace(start, stop, num)``.

    Example:
        >>> jnp.logspace(0, 2, 3)
        Array([  1.,  10., 100.], dtype=float32)
    """
    _util.check_arraylike("logspace", start, stop, base)
    num = _num_arg("logspace", num)
    dt, cdt = _linspace_dtype("logspace", dtype, start, stop)
    if _all_concrete(start, stop, base):
        # JAX's formula, base ** linspace(...) in the computation dtype (as the traced path)
        ndim = np.broadcast(np.asarray(start), np.asarray(stop)).ndim
        axis = _util.canonicalize_axis("logspace", axis, ndim + 1)
        lin, _ = _linspace_numpy(start, stop, num, endpoint, cdt, axis)
        with np.errstate(all="ignore"):
            value = eval_elementwise.power(np.asarray(base).astype(cdt), lin)
        return _concrete_samples(value, dt)
    lin = linspace(start, stop, num, endpoint, dtype=cdt, axis=axis)
    b = lax.convert_element_type(base, cdt)
    return _finish("logspace", ufuncs.power(b, lin), dt)


def geomspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True,
              dtype: Any = None, axis: int = 0) -> Any:
    """Samples evenly spaced on a log scale (a geometric progression).

    Example:
        >>> jnp.geomspace(1, 100, 3)
        Array([  1.,  10., 100.], dtype=float32)
    """
    _util.check_arraylike("geomspace", start, stop)
    num = _num_arg("geomspace", num)
    dt, cdt = _linspace_dtype("geomspace", dtype, start, stop)
    if _all_concrete(start, stop) and not np.iscomplexobj(start) and not np.iscomplexobj(stop):
        s, e = np.asarray(start, np.float64), np.asarray(stop, np.float64)
        if np.all(np.sign(s) * np.sign(e) > 0):  # (else JAX's formula below gives NaNs)
            value = np.geomspace(s, e, num, endpoint=endpoint, axis=axis)
            return _concrete_samples(value, dt)
    # JAX's formula: sign(start) * 10 ** linspace(log10(start / sign), log10(stop / sign)), so a
    # zero bound or bounds of opposite signs give NaNs, as in JAX.
    s, e = (lax.convert_element_type(_util.ensure_array(x), cdt) for x in (start, stop))
    sign = ufuncs.sign(s)
    res = ufuncs.multiply(sign, logspace(ufuncs.log10(ufuncs.true_divide(s, sign)),
                                         ufuncs.log10(ufuncs.true_divide(e, sign)),
                                         num, endpoint, dtype=cdt))
    return lax.convert_element_type(_insert_axis("geomspace", res, axis), dt)


# ---------------------------------------------------------------- matrices


def _matrix_dims(fn: str, N: Any, M: Any, k: Any, error: type) -> tuple[int, int, Any]:
    """(N, M, k), k an int or a traced integer scalar (JAX accepts one). ``error`` is the class
    JAX raises for a negative dimension or a non-integer k (eye: ValueError, tri: TypeError)."""
    n = static_int(fn, "N", N)
    m = n if M is None else static_int(fn, "M", M)
    if n < 0 or m < 0:
        raise error(f"{fn}: negative dimensions are not allowed, got N={n}, M={m}")
    if isinstance(k, Tracer):
        aval = core.get_aval(k)
        if aval.shape != () or not dtypes.is_integer(aval.dtype):
            raise error(f"{fn}: k must be a scalar integer, got {aval.str_short()}")
        return n, m, k
    try:
        return n, m, static_int(fn, "k", k)
    except TypeError as e:
        raise error(str(e)) from None


def _offset_mask(n: int, m: int, k: Any, compare: Any) -> Any:
    """``compare(i + k, j)`` over the rows i and columns j of an n x m grid (a traced or
    static k)."""
    if isinstance(k, Tracer):
        dt = core.get_aval(k).dtype
        offset = lax.broadcast_in_dim(k, (n, m), ())
    else:
        dt = dtypes.canonicalize_dtype(np.int32)
        offset = np.asarray(max(-n, min(m, k)), dt)  # (the same mask; fits int32)
    i, j = (lax.broadcasted_iota(dt, (n, m), d) for d in (0, 1))
    return compare(lax.add(i, offset), j)


def _staged() -> bool:
    """Whether a trace (jit, vmap, grad...) is current: masks such as ``eye`` are then
    computed from iotas, as JAX stages them (a fused kernel computes each element where it
    is read; as a constant, ``jnp.eye(1024)`` was 4 MB read from memory)."""
    return not isinstance(core.current_trace(), core.EvalTrace)


@_takes_device
def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> Any:
    """A 2-d array with ones on the ``k``-th diagonal and zeros elsewhere.

    Example:
        >>> jnp.eye(2, k=1)
        Array([[0., 1.],
               [0., 0.]], dtype=float32)
    """
    dt = _dtype_arg(dtype) or dtypes.default_float_dtype()
    n, m, k = _matrix_dims("eye", N, M, k, ValueError)
    if isinstance(k, Tracer) or _staged():
        return lax.convert_element_type(_offset_mask(n, m, k, lax.eq), dt)
    return _concrete(np.eye(n, m, k, dtype=dt))


def identity(n: int, dtype: Any = None) -> Any:
    """The ``n`` x ``n`` identity matrix.

    Example:
        >>> jnp.identity(2, dtype=jnp.int32)
        Array([[1, 0],
               [0, 1]], dtype=int32)
    """
    return eye(n, dtype=dtype)


def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> Any:
    """Ones at and below the ``k``-th diagonal.

    Example:
        >>> jnp.tri(2)
        Array([[1., 0.],
               [1., 1.]], dtype=float32)
    """
    dt = _dtype_arg(dtype) or dtypes.float32  # float32 by default even under x64, as in JAX
    n, m, k = _matrix_dims("tri", N, M, k, TypeError)
    if isinstance(k, Tracer) or _staged():
        return lax.convert_element_type(_offset_mask(n, m, k, lax.ge), dt)
    return _concrete(np.tri(n, m, k, dtype=dt))


def _triangle(fn: str, m: Any, k: Any, lower: bool) -> Any:
    _util.check_arraylike(fn, m)
    m = _util.ensure_array(m)
    aval = core.get_aval(m)
    if aval.ndim < 2:
        raise ValueError(f"{fn}: argument must be at least 2-d, got shape {aval.shape}")
    k = static_int(fn, "k", k)
    r, c = aval.shape[-2:]
    mask = np.tri(r, c, k if lower else k - 1, dtype=bool)
    if not lower:
        mask = ~mask
    which = lax.broadcast_in_dim(_concrete(mask), aval.shape, (aval.ndim - 2, aval.ndim - 1))
    return lax.select_n(which, lax.full_like(m, 0), m)


def tril(m: Any, k: int = 0) -> Any:
    """Zeros the elements above the ``k``-th diagonal of the last two axes.

    Example:
        >>> jnp.tril(jnp.ones((2, 2)))
        Array([[1., 0.],
               [1., 1.]], dtype=float32)
    """
    return _triangle("tril", m, k, True)


def triu(m: Any, k: int = 0) -> Any:
    """Zeros the elements below the ``k``-th diagonal of the last two axes.

    Example:
        >>> jnp.triu(jnp.ones((2, 2)))
        Array([[1., 1.],
               [0., 1.]], dtype=float32)
    """
    return _triangle("triu", m, k, False)


def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """The ``offset``-th diagonal of the plane ``(axis1, axis2)``, as the last axis.

    Example:
        >>> jnp.diagonal(jnp.eye(2))
        Array([1., 1.], dtype=float32)
    """
    _util.check_arraylike("diagonal", a)
    a = _util.ensure_array(a)
    aval = core.get_aval(a)
    nd = aval.ndim
    if nd < 2:
        raise ValueError(f"diagonal: array must be at least 2-d, got shape {a.shape}")
    ax1 = _util.canonicalize_axis("diagonal", axis1, nd)
    ax2 = _util.canonicalize_axis("diagonal", axis2, nd)
    if ax1 == ax2:
        raise ValueError(f"diagonal: axis1 and axis2 cannot be the same, got {axis1}, {axis2}")
    k = static_int("diagonal", "offset", offset)
    a = moveaxis(a, (ax1, ax2), (-2, -1))
    shp = core.get_aval(a).shape
    lead, (r, c) = shp[:-2], shp[-2:]
    length = builtins.max(0, builtins.min(r, c - k) if k >= 0 else builtins.min(r + k, c))
    flat = lax.reshape(a, lead + (r * c,))
    if length == 0:
        return lax.slice_in_dim(flat, 0, 0, axis=len(lead))
    # Element j of the diagonal sits at flat index start + j * (c + 1).
    start = k if k >= 0 else -k * c
    out = lax.slice_in_dim(flat, start, start + (length - 1) * (c + 1) + 1, c + 1, len(lead))
    if nd == 2 and r == c and k == 0 and aval.dtype != dtypes.bool_:
        # JAX takes this diagonal through a platform-dependent branch (one of them multiplies
        # by a strongly typed eye), so the result loses a weak type.
        out = lax.convert_element_type(out, aval.dtype, weak_type=False)
    return out


def diag(v: Any, k: int = 0) -> Any:
    """A 2-d array with the 1-d ``v`` on its ``k``-th diagonal, or the ``k``-th diagonal of a
    2-d ``v``.

    Example:
        >>> jnp.diag(jnp.array([1, 2]))
        Array([[1, 0],
               [0, 2]], dtype=int32)
    """
    _util.check_arraylike("diag", v)
    v = _util.ensure_array(v)
    aval = core.get_aval(v)
    k = static_int("diag", "k", k)
    if aval.ndim == 2:
        return diagonal(v, k)
    if aval.ndim != 1:
        raise ValueError(f"diag: input must be 1-d or 2-d, got shape {aval.shape}")
    n = aval.shape[0]
    size = n + abs(k)
    zero = lax.convert_element_type(0, aval.dtype)
    if _staged():
        # As JAX stages it: v (padded to the matrix's size) broadcast along the rows,
        # selected on the diagonal; a kernel computes each element where it is read (the
        # interior padding below costs a division per element: diag(diag(a)) of (1024,
        # 1024) 0.98 ms, JAX 0.09).
        padded = lax.pad(v, zero, [(max(-k, 0), max(k, 0), 0)])
        rows = lax.broadcast_in_dim(padded, (size, size), (0,))
        return lax.select(_offset_mask(size, size, k, lax.eq), rows,
                          lax.full((size, size), 0, aval.dtype))
    # Interior padding of size places v[i] at flat index lo + i * (size + 1).
    lo = k if k >= 0 else -k * size
    used = lo + (n - 1) * (size + 1) + 1 if n else lo
    flat = lax.pad(v, zero, [(lo, size * size - used, size if n else 0)])
    return lax.reshape(flat, (size, size))


def diagflat(v: Any, k: int = 0) -> Any:
    """``diag`` of the flattened input.

    Example:
        >>> jnp.diagflat(jnp.ones((1, 2))).shape
        (2, 2)
    """
    _util.check_arraylike("diagflat", v)
    out = diag(ravel(v), k)
    return lax.convert_element_type(out, out.dtype, weak_type=False)  # (as JAX: never weak)


def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> list:
    """Coordinate arrays from 1-d coordinate vectors ('xy': Cartesian, 'ij': matrix indexing).

    Example:
        >>> [g.shape for g in jnp.meshgrid(jnp.ones(2), jnp.ones(3))]
        [(3, 2), (3, 2)]
    """
    _util.check_arraylike("meshgrid", *xi)
    if not copy:
        raise ValueError("meshgrid: only copy=True is supported (as in JAX)")
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    args = [_util.ensure_array(x) for x in xi]
    for i, x in enumerate(args):
        if core.get_aval(x).ndim != 1:
            raise ValueError(f"meshgrid: arguments must be 1-d, got shape "
                             f"{core.get_aval(x).shape} at position {i}")
    sizes = [core.get_aval(x).shape[0] for x in args]
    nd = len(args)
    pos = list(range(nd))
    if indexing == "xy" and nd >= 2:
        pos[0], pos[1] = 1, 0
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for x, p in zip(args, pos):
        shp = tuple(sizes) if not sparse else tuple(
            core.get_aval(x).shape[0] if i == p else 1 for i in range(nd))
        out.append(lax.broadcast_in_dim(x, shp, (p,)))
    return out


def frombuffer(buffer: Any, dtype: Any = float, count: int = -1, offset: int = 0) -> Any:
    """An array from the bytes of a buffer (a copy of NumPy's ``frombuffer``).

    Example:
        >>> jnp.frombuffer(b"\\x01\\x02", dtype=jnp.uint8)
        Array([1, 2], dtype=uint8)
    """
    return asarray(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset))


__all__ = [
    "array", "asarray", "copy", "full", "zeros", "ones", "empty", "full_like", "zeros_like",
    "ones_like", "empty_like", "arange", "linspace", "logspace", "geomspace", "eye",
    "identity", "tri", "tril", "triu", "diag", "diagflat", "diagonal", "meshgrid",
    "frombuffer",
]
