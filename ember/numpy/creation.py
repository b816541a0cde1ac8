"""Array creation: array, asarray, zeros, ones, full, arange, linspace, eye, ..."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import core, dtypes, tree_util
from ember.core import ShapedArray, Tracer


def _concrete(value: np.ndarray, weak_type: bool = False) -> Any:
    dt = dtypes.canonicalize_dtype(value.dtype)
    value = np.asarray(value, dtype=dt)
    return core.concrete_array(value, ShapedArray(value.shape, dt, weak_type))


def array(object: Any, dtype: Any = None, copy: bool = True, order: Any = None,
          ndmin: int = 0) -> Any:
    """Creates an array from an array-like or a (nested) list of them.

    Python scalars give weakly typed arrays, as in JAX.

    Example:
        >>> jnp.array([1, 2])
        Array([1, 2], dtype=int32)
    """
    if dtype is not None:
        dtype = dtypes.canonicalize_dtype(dtypes.dtype(dtype))
    if isinstance(object, Tracer) or (isinstance(object, (list, tuple)) and any(
            isinstance(leaf, Tracer) for leaf in tree_util.tree_leaves(object))):
        from ember.numpy.shape import stack  # lists of tracers are stacked by primitives

        out = object if isinstance(object, Tracer) else stack(
            [array(o) for o in object]) if len(object) else array(np.zeros((0,)))
        from ember import lax

        out = lax.convert_element_type(out, dtype if dtype is not None else out.dtype,
                                       False if dtype is not None else out.weak_type)
    elif hasattr(object, "aval"):
        out = object
        if dtype is not None and dtype != out.dtype:
            from ember import lax
            out = lax.convert_element_type(out, dtype)
        elif copy:
            out = out.copy()
    else:
        if isinstance(object, (list, tuple)):
            leaves = tree_util.tree_leaves(object)
            if any(not core.is_array_like(leaf) for leaf in leaves):
                bad = next(leaf for leaf in leaves if not core.is_array_like(leaf))
                raise TypeError(f"array: unsupported element of type {type(bad).__name__} "
                                "in the input sequence")
            leaves_np = [np.asarray(x) if hasattr(x, "aval") else x for x in leaves]
            object = tree_util.tree_unflatten(tree_util.tree_structure(object), leaves_np)
        weak = dtypes.is_weakly_typed(object) and dtype is None
        if dtypes.is_python_scalar(object):
            np_value = np.asarray(object, dtype=dtype or dtypes.dtype(object, canonicalize=True))
        else:
            try:
                np_value = np.array(object, dtype=dtype)
            except (TypeError, ValueError) as e:
                raise TypeError(f"array: cannot convert {type(object).__name__} to an array: "
                                f"{e}") from None
            if np_value.dtype == object_dtype:
                raise TypeError(f"array: cannot convert {object!r} to an array")
            if dtype is None and isinstance(object, (list, tuple)) and np_value.dtype.kind \
                    in "iuf" and np_value.dtype.itemsize == 8:
                # Python number lists: default (canonical) int/float types.
                np_value = np_value.astype(dtypes.canonicalize_dtype(np_value.dtype))
        out = _concrete(np_value, weak)
    if ndmin and out.ndim < ndmin:
        from ember import lax
        out = lax.reshape(out, (1,) * (ndmin - out.ndim) + out.shape)
    return out


object_dtype = np.dtype(object)


def asarray(a: Any, dtype: Any = None, order: Any = None, copy: bool | None = None) -> Any:
    """Converts ``a`` to an array without copying when it already is one.

    Example:
        >>> jnp.asarray(np.arange(3)).dtype
        dtype('int32')
    """
    return array(a, dtype=dtype, copy=bool(copy), order=order)


def _shape_arg(fn: str, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        shape = tuple(core.concrete_or_error(d, f"{fn}: shape must be concrete") for d in shape)
    except TypeError as e:
        if "Abstract tracer" in str(e):
            raise
        raise TypeError(f"{fn}: shape must be an int or a sequence of ints, got {shape!r}") \
            from None
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) and not (
                isinstance(d, np.ndarray) and d.ndim == 0 and d.dtype.kind in "iu"):
            raise TypeError(f"{fn}: shape must contain integers, got {shape!r}")
        if int(d) < 0:
            raise ValueError(f"{fn}: negative dimensions are not allowed, got shape {shape}")
    return tuple(int(d) for d in shape)


def full(shape: Any, fill_value: Any, dtype: Any = None) -> Any:
    """An array of ``shape`` filled with ``fill_value``.

    Example:
        >>> jnp.full((2,), 7)
        Array([7, 7], dtype=int32)
    """
    shape = _shape_arg("full", shape)
    from ember import lax
    if isinstance(fill_value, Tracer) or (hasattr(fill_value, "aval") and
                                          not isinstance(fill_value, np.ndarray)):
        value = fill_value if dtype is None else lax.convert_element_type(
            fill_value, dtypes.canonicalize_dtype(dtypes.dtype(dtype)))
        return lax.broadcast_to_shape(value, shape)
    dt = dtypes.canonicalize_dtype(dtypes.dtype(dtype if dtype is not None else fill_value))
    weak = dtype is None and dtypes.is_weakly_typed(fill_value)
    return _concrete(np.full(shape, fill_value, dtype=dt), weak)


def zeros(shape: Any, dtype: Any = None) -> Any:
    """An array of zeros (default dtype float32).

    Example:
        >>> jnp.zeros(2)
        Array([0., 0.], dtype=float32)
    """
    shape = _shape_arg("zeros", shape)
    dt = dtypes.canonicalize_dtype(dtypes.dtype(dtype)) if dtype is not None \
        else dtypes.default_float_dtype()
    return _concrete(np.zeros(shape, dt))


def ones(shape: Any, dtype: Any = None) -> Any:
    """An array of ones (default dtype float32).

    Example:
        >>> jnp.ones(2)
        Array([1., 1.], dtype=float32)
    """
    shape = _shape_arg("ones", shape)
    dt = dtypes.canonicalize_dtype(dtypes.dtype(dtype)) if dtype is not None \
        else dtypes.default_float_dtype()
    return _concrete(np.ones(shape, dt))


__all__ = ["array", "asarray", "full", "zeros", "ones"]
