"""Shared machinery for defining lax primitives: standard abstract-eval rules and checks.

A primitive is defined by ``standard_primitive(name, impl, shape_rule, dtype_rule)``; the
shape and dtype rules raise TypeError/ValueError naming the primitive and the argument, so a
bad call fails before any kernel runs (eagerly, while tracing, and in typecheck).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import core, dtypes
from ember.core import Primitive, ShapedArray, Tracer

# Dtype groups used by the rules.
bool_dtypes = (dtypes.bool_,)
signed_int_dtypes = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64)
unsigned_int_dtypes = (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)
int_dtypes = signed_int_dtypes + unsigned_int_dtypes
float_dtypes = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
complex_dtypes = (dtypes.complex64, dtypes.complex128)
inexact_dtypes = float_dtypes + complex_dtypes
numeric_dtypes = int_dtypes + inexact_dtypes
signed_numeric_dtypes = float_dtypes + signed_int_dtypes + complex_dtypes
all_dtypes = bool_dtypes + numeric_dtypes

_GROUP_NAMES = {
    bool_dtypes: "bool", int_dtypes: "integer", float_dtypes: "floating",
    inexact_dtypes: "floating or complex", numeric_dtypes: "numeric",
    int_dtypes + bool_dtypes: "integer or boolean", all_dtypes: "any",
    signed_int_dtypes + float_dtypes: "signed integer or floating",
    int_dtypes + float_dtypes: "integer or floating",
    bool_dtypes + int_dtypes + float_dtypes: "real",
    signed_numeric_dtypes: "signed numeric",
}


def check_dtype(prim: str, arg: str, dtype: np.dtype, allowed: Sequence[np.dtype]) -> None:
    if dtype not in allowed:
        kind = _GROUP_NAMES.get(tuple(allowed), ", ".join(str(d) for d in allowed))
        raise TypeError(f"{prim} does not accept dtype {dtype} for argument {arg}; "
                        f"it requires {kind} dtypes")


def check_same_dtypes(prim: str, *avals: ShapedArray) -> np.dtype:
    dts = {a.dtype for a in avals}
    if len(dts) != 1:
        names = ", ".join(str(a.dtype) for a in avals)
        raise TypeError(f"{prim} requires arguments to have the same dtypes, got {names}.")
    return avals[0].dtype


def broadcasting_shape(prim: str, *avals: ShapedArray) -> tuple[int, ...]:
    """Elementwise shape rule (JAX's): see ``broadcast_dims``."""
    return broadcast_dims(prim, *(a.shape for a in avals))


def broadcast_dims(prim: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The common shape of elementwise operands: rank-0 operands broadcast; the others have
    one rank, and in each dimension one size, or 1 (which broadcasts), as in JAX."""
    shapes = [s for s in shapes if s != ()]
    if not shapes:
        return ()
    first = shapes[0]
    if all(s == first for s in shapes):
        return first
    if len({len(s) for s in shapes}) != 1:
        raise TypeError(f"{prim}: arrays must have the same number of dimensions, got "
                        f"{', '.join(str(s) for s in shapes)}.")
    out = merge_sizes(shapes)
    if out is None:
        raise TypeError(f"{prim} got incompatible shapes for broadcasting: "
                        f"{', '.join(str(s) for s in shapes)}.")
    return out


def merge_sizes(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...] | None:
    """The broadcast of shapes of one rank: in each dimension the one size other than 1
    (1 if all are); None if two sizes other than 1 differ."""
    out = []
    for sizes in zip(*shapes):
        others = {d for d in sizes if d != 1}
        if len(others) > 1:
            return None
        out.append(others.pop() if others else 1)
    return tuple(out)


def check_axis(prim: str, arg: str, axis: Any, ndim: int) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{prim}: {arg} must be an integer, got {axis!r}")
    axis = int(axis)
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        # NumPy's AxisError is both a ValueError and an IndexError; JAX raises either.
        raise np.exceptions.AxisError(
            f"{prim}: {arg}={axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim if ndim else 0


def check_shape(prim: str, arg: str, shape: Any) -> tuple[int, ...]:
    if type(shape) is tuple:  # (fast path: a tuple of non-negative Python ints is returned)
        for d in shape:
            if type(d) is not int or d < 0:
                break
        else:
            return shape
    try:
        shape = tuple(shape)
    except TypeError:
        raise TypeError(f"{prim}: {arg} must be a sequence of integers, got {shape!r}") from None
    for d in shape:
        if isinstance(d, Tracer):
            core.concrete_or_error(d, f"{prim}: {arg} must be concrete (a traced value was given)")
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"{prim}: {arg} must contain only integers, got {shape!r}")
        if d < 0:
            raise TypeError(f"{prim}: {arg} must be non-negative, got {shape!r}")  # (as JAX)
    return tuple(int(d) for d in shape)


def standard_primitive(name: str, impl: Callable, shape_rule: Callable,
                       dtype_rule: Callable, weak_type_rule: Callable | None = None,
                       multiple_results: bool = False) -> Primitive:
    """A primitive whose abstract eval combines a shape rule, a dtype rule and weak typing.

    By default the output is weakly typed when every input is.
    """
    prim = core.MultipleResultsPrimitive(name) if multiple_results else Primitive(name)
    prim.def_impl(impl)

    def abstract_eval(*avals, **params):
        shape = shape_rule(*avals, **params)
        dtype = dtype_rule(*avals, **params)
        if weak_type_rule is not None:
            weak = weak_type_rule(*avals, **params)
        else:
            weak = bool(avals) and all(a.weak_type for a in avals)
        if multiple_results:
            return [ShapedArray(s, d, weak) for s, d in zip(shape, dtype)]
        return ShapedArray(shape, dtype, weak)

    prim.def_abstract_eval(abstract_eval)
    return prim


def as_operand(x: Any, fn: str = "lax", arg: str = "operand") -> Any:
    """Validates that ``x`` is an array-like (tracer, Array, numpy, scalar) for a lax call."""
    if hasattr(x, "aval") or isinstance(x, Tracer) or core.is_array_like(x):
        return x
    if isinstance(x, (list, tuple)):
        raise TypeError(f"{fn}: {arg} must be an array, got a {type(x).__name__}; "
                        "use jnp.asarray to convert it first")
    raise TypeError(f"{fn}: {arg} of type {type(x).__name__} is not a valid ember type")


def concrete_dtype_like(x: Any, dtype: np.dtype, weak_type: bool) -> Any:
    """A Python scalar or NumPy value converted (concretely, no primitive) to ``dtype``."""
    value = np.array(x, dtype=dtype)  # (a copy: it is frozen, and must not be the caller's)
    return core.concrete_array(value, ShapedArray(value.shape, dtype, weak_type))


def scalars_like(prim: str, *args: Any) -> list[Any]:
    """Python scalars among the operands take the dtype of the first array operand."""
    for a in args:
        if not hasattr(a, "aval"):
            break
    else:  # arrays and tracers: nothing to convert
        return list(args)
    args = [as_operand(a, prim) for a in args]
    ref = next((a for a in args if not dtypes.is_python_scalar(a)), None)
    if ref is None:
        return args
    dt = core.get_aval(ref).dtype
    return [concrete_dtype_like(a, dt, True) if dtypes.is_python_scalar(a) else a for a in args]
