"""Helpers shared by the ember.numpy modules: argument checks, dtype and shape promotion."""

from __future__ import annotations

import operator
import warnings
from typing import Any

import numpy as np

from ember import core, dtypes, lax
from ember.config import config
from ember.core import Tracer
from ember.runtime.array import device_buffer


def is_arraylike(x: Any) -> bool:
    return isinstance(x, Tracer) or core.is_array_like(x)


def check_arraylike(fn: str, *args: Any) -> None:
    """JAX's rule: numpy functions take arrays and scalars, not lists or tuples."""
    for pos, a in enumerate(args):
        if not is_arraylike(a):
            raise TypeError(f"{fn} requires ndarray or scalar arguments, got {type(a)} at "
                            f"position {pos}.")


def ensure_array(x: Any) -> Any:
    """Array-likes (scalars, NumPy arrays) become ember arrays; tracers pass through."""
    if isinstance(x, Tracer) or hasattr(x, "aval"):
        return x
    aval = core.get_aval(x)
    # (A copy, as a transfer to a device is: the caller's array stays writable and unshared.)
    return core.concrete_array(device_buffer(x, aval.dtype), aval)


def array_arg(fn: str, x: Any) -> Any:
    """``x`` checked to be array-like (``check_arraylike``) and made an ember array."""
    check_arraylike(fn, x)
    return ensure_array(x)


def _common_aval_dtype(args: tuple) -> np.dtype | None:
    """The dtype all arguments already share (same weak type too), or None (fast path)."""
    first = getattr(args[0], "aval", None)
    if first is None:
        return None
    for a in args[1:]:
        aval = getattr(a, "aval", None)
        if aval is None or aval.dtype != first.dtype or aval.weak_type != first.weak_type:
            return None
    return first.dtype


def check_python_ints(*args: Any) -> None:
    """JAX parses Python ints as the default int type: out of its range is an OverflowError.

    In range, they then convert to the promoted dtype like a C cast (int8 + 300 wraps to 44).
    """
    for a in args:
        if type(a) is int:
            info = np.iinfo(dtypes.default_int_dtype())
            if not info.min <= a <= info.max:
                raise OverflowError(f"Python int {a} too large to convert to "
                                    f"{dtypes.default_int_dtype()}")


def _convert_all(args: tuple, dt: np.dtype, weak: bool) -> list[Any]:
    check_python_ints(*args)
    return [lax.convert_element_type(a, dt, weak) for a in args]


def promote_dtypes(*args: Any) -> list[Any]:
    """Converts the arguments to their common JAX result type (weak types respected)."""
    if len(args) < 2:
        check_python_ints(*args)
        return [ensure_array(a) for a in args]
    if _common_aval_dtype(args) is not None:
        return list(args)
    dt, weak = dtypes.result_type(*args, return_weak_type_flag=True)
    return _convert_all(args, dt, weak)


def promote_dtypes_inexact(*args: Any) -> list[Any]:
    """Like promote_dtypes, then integers and bools go to the default float dtype."""
    common = _common_aval_dtype(args)
    if common is not None and dtypes.is_inexact(common):
        return list(args)
    dt, weak = dtypes.result_type(*args, return_weak_type_flag=True)
    return _convert_all(args, dtypes.to_inexact_dtype(dt), weak)


def promote_dtypes_numeric(*args: Any) -> list[Any]:
    """Like promote_dtypes, but bools become int32 (JAX's ``to_numeric_dtype``, with or
    without x64)."""
    common = _common_aval_dtype(args)
    if common is not None and common != dtypes.bool_:
        return list(args)
    dt, weak = dtypes.result_type(*args, return_weak_type_flag=True)
    if dt == dtypes.bool_:
        dt = np.dtype(np.int32)
    return _convert_all(args, dt, weak)


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"Incompatible shapes for broadcasting: shapes={list(shapes)}") from None


def _rank_promotion(fn: str, shapes: list[tuple[int, ...]]) -> None:
    """JAX's ``jax_numpy_rank_promotion`` check: a warning or an error naming the shapes."""
    text = " ".join(str(s) for s in shapes)
    if config.rank_promotion == "warn":
        warnings.warn(f"Following NumPy automatic rank promotion for {fn} on shapes {text}. "
                      "Set the jax_numpy_rank_promotion config option to 'allow' to disable "
                      "this warning; for more information, see "
                      "https://docs.jax.dev/en/latest/rank_promotion_warning.html.",
                      stacklevel=4)
    elif config.rank_promotion == "raise":
        raise ValueError(f"Operands could not be broadcast together for {fn} on shapes {text} "
                         "and with the config option jax_numpy_rank_promotion='raise'. For "
                         "more information, see "
                         "https://docs.jax.dev/en/latest/rank_promotion_warning.html.")


def promote_shapes(fn: str, *args: Any, check_rank: bool = True) -> list[Any]:
    """Broadcasts the arguments to one shape; rank-0 arguments are left for lax to broadcast.

    Operands of different ranks are JAX's implicit rank promotion, which the
    ``jax_numpy_rank_promotion`` option may report (``check_rank=False``: functions that
    broadcast without that check in JAX).
    """
    shapes = [a.aval.shape if hasattr(a, "aval") else np.shape(a) for a in args]
    nonscalar = {s for s in shapes if s != ()}
    if len(nonscalar) <= 1:
        return list(args)
    if (check_rank and config.rank_promotion != "allow"
            and len({len(s) for s in nonscalar}) > 1):
        _rank_promotion(fn, shapes)
    try:
        result = broadcast_shapes(*shapes)
    except ValueError:
        if len({len(s) for s in nonscalar}) > 1:  # JAX broadcasts the ranks first: ValueError
            raise
        # Equal ranks reach JAX's lax function, whose shape check raises a TypeError.
        raise TypeError(f"{fn} got incompatible shapes for broadcasting: "
                        f"{', '.join(str(s) for s in shapes)}.") from None
    return [a if s == () else lax.broadcast_to_shape(a, result) for a, s in zip(args, shapes)]


def promote_args(fn: str, *args: Any) -> list[Any]:
    check_arraylike(fn, *args)
    return promote_shapes(fn, *promote_dtypes(*args))


def promote_args_inexact(fn: str, *args: Any) -> list[Any]:
    check_arraylike(fn, *args)
    return promote_shapes(fn, *promote_dtypes_inexact(*args))


def promote_args_numeric(fn: str, *args: Any) -> list[Any]:
    check_arraylike(fn, *args)
    return promote_shapes(fn, *promote_dtypes_numeric(*args))


def canonicalize_axis(fn: str, axis: Any, ndim: int) -> int:
    axis = core.concrete_or_error(axis, f"{fn}: axis must be a concrete integer")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{fn}: axis must be an integer, got {axis!r}")
    if not -ndim <= axis < ndim:
        # NumPy's AxisError is both a ValueError and an IndexError; JAX raises either.
        raise np.exceptions.AxisError(int(axis), ndim, fn)
    return int(axis) % ndim


def canonicalize_axes(fn: str, axis: Any, ndim: int) -> tuple[int, ...]:
    """None means all axes; ints and tuples are normalized; duplicates are an error."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        axes = tuple(canonicalize_axis(fn, a, ndim) for a in axis)
    else:
        axes = (canonicalize_axis(fn, axis, ndim),)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{fn}: duplicate value in 'axis': {axis}")
    return axes


def aval_of(x: Any) -> core.ShapedArray:
    return core.get_aval(x)


def concrete_index(fn: str, name: str, value: Any) -> int:
    """``value`` as a concrete Python integer (``operator.index`` semantics: floats are
    refused); a traced value raises JAX's ConcretizationTypeError naming the argument."""
    value = core.concrete_or_error(
        value, f"The error occurred because of argument '{name}' of jnp.{fn}.")
    if isinstance(value, np.ndarray) or hasattr(value, "aval"):
        value = np.asarray(value)
        if value.ndim != 0:
            raise TypeError(f"{fn}: {name} must be an integer, got an array of shape "
                            f"{value.shape}")
        value = value.item()
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be an integer, got {value!r}") from None


def constant_reciprocal(divisor: Any, dtype: np.dtype) -> np.ndarray:
    """``1 / divisor`` as XLA's simplifier turns a division by a constant of ``dtype`` into a
    product (and ember's compiler too, so eager code computing it agrees): the reciprocal in
    that dtype, float32 for bfloat16. ``divisor`` is used as given (callers round it to
    ``dtype`` first where JAX's divisor is a constant of that dtype)."""
    work = np.dtype(np.float32) if dtype == dtypes.bfloat16 else np.dtype(dtype)
    return np.asarray(np.ones((), work) / np.asarray(divisor).astype(work), work)


def times_constant(x: Any, c: np.ndarray) -> Any:
    """``x * c`` computed in c's dtype and rounded to x's (x's weak type kept when the two
    dtypes are one)."""
    dt = core.get_aval(x).dtype
    if c.dtype == dt:
        return lax.mul(x, lax.full_like(x, c, shape=()))
    product = lax.mul(lax.convert_element_type(x, c.dtype), lax.full((), c, c.dtype))
    return lax.convert_element_type(product, dt)
