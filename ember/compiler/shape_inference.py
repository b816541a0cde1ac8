"""Shape inference: the result shape of every HLO opcode from its operands and attributes.

Each rule is registered with ``@rule("opcode", ...)`` and called as
``rule(operand_shapes, attrs, calls, given)`` where ``given`` is the shape the caller passed
(or None). Rules raise ``ValueError``/``TypeError`` naming the opcode on malformed input, so
a bad instruction is rejected when it is built (and by the verifier, which re-runs them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ember.compiler.hlo import (
    BINARY_ELEMENTWISE,
    COMPARISON_DIRECTIONS,
    TERNARY_ELEMENTWISE,
    UNARY_ELEMENTWISE,
    Shape,
)

_RULES: dict[str, Callable] = {}


def rule(*opcodes: str):
    def register(fn: Callable) -> Callable:
        for op in opcodes:
            _RULES[op] = fn
        return fn
    return register


def infer_shape(opcode: str, operands: list[Shape], attrs: dict[str, Any], calls: list,
                given: Shape | None = None) -> Shape:
    """The result shape of ``opcode``; ``given`` is used only by ops whose type is free."""
    fn = _RULES.get(opcode)
    if fn is None:
        raise ValueError(f"HLO: no shape rule for opcode {opcode!r}")
    return fn(operands, attrs, calls, given)


def _require_arrays(opcode: str, operands: list[Shape]) -> None:
    for i, s in enumerate(operands):
        if s.is_tuple:
            raise TypeError(f"{opcode}: operand {i} must be an array, got the tuple {s}")


def _same_dims(opcode: str, operands: list[Shape]) -> tuple[int, ...]:
    _require_arrays(opcode, operands)
    dims = {s.dims for s in operands}
    if len(dims) != 1:
        raise ValueError(f"{opcode}: operands must have the same dimensions, got "
                         f"{', '.join(str(s) for s in operands)}")
    return operands[0].dims


def _count(opcode: str, operands: list[Shape], n: int) -> None:
    if len(operands) != n:
        raise ValueError(f"{opcode}: expected {n} operands, got {len(operands)}")


_COMPLEX_PART = {np.dtype(np.complex64): np.dtype(np.float32),
                 np.dtype(np.complex128): np.dtype(np.float64)}
_TO_COMPLEX = {v: k for k, v in _COMPLEX_PART.items()}


@rule(*UNARY_ELEMENTWISE)
def _unary(operands, attrs, calls, given, _opcode=None):
    _count("unary elementwise op", operands, 1)
    x = operands[0]
    _require_arrays("unary elementwise op", operands)
    if given is not None and (given.is_tuple or given.dims != x.dims):
        raise ValueError(f"elementwise op: result {given} must have the operand's dimensions "
                         f"{list(x.dims)}")
    return given if given is not None else x


@rule("is_finite")
def _is_finite(operands, attrs, calls, given):
    _count("is_finite", operands, 1)
    _require_arrays("is_finite", operands)
    return Shape(np.bool_, operands[0].dims)


@rule("real", "imag")
def _real_imag(operands, attrs, calls, given):
    _count("real/imag", operands, 1)
    _require_arrays("real/imag", operands)
    x = operands[0]
    return Shape(_COMPLEX_PART.get(x.dtype, x.dtype), x.dims)


@rule("convert")
def _convert(operands, attrs, calls, given):
    _count("convert", operands, 1)
    _require_arrays("convert", operands)
    if given is None:
        raise ValueError("convert: the result shape (its element type) must be given")
    if given.dims != operands[0].dims:
        raise ValueError(f"convert: result {given} must have the operand's dimensions")
    return given


@rule(*BINARY_ELEMENTWISE)
def _binary(operands, attrs, calls, given):
    _count("binary elementwise op", operands, 2)
    dims = _same_dims("binary elementwise op", operands)
    a, b = operands
    if a.dtype != b.dtype:
        raise TypeError(f"binary elementwise op: operands must have one element type, got "
                        f"{a} and {b}")
    return Shape(a.dtype, dims)


@rule("compare")
def _compare(operands, attrs, calls, given):
    _count("compare", operands, 2)
    dims = _same_dims("compare", operands)
    if operands[0].dtype != operands[1].dtype:
        raise TypeError(f"compare: operands must have one element type, got "
                        f"{operands[0]} and {operands[1]}")
    direction = attrs.get("comparison_direction")
    if direction not in COMPARISON_DIRECTIONS:
        raise ValueError(f"compare: comparison_direction must be one of "
                         f"{COMPARISON_DIRECTIONS}, got {direction!r}")
    return Shape(np.bool_, dims)


@rule("complex")
def _complex(operands, attrs, calls, given):
    s = _binary(operands, attrs, calls, given)
    if s.dtype not in _TO_COMPLEX:
        raise TypeError(f"complex: operands must be f32 or f64, got {s}")
    return Shape(_TO_COMPLEX[s.dtype], s.dims)


@rule(*TERNARY_ELEMENTWISE)
def _ternary(operands, attrs, calls, given):
    _count("select/clamp", operands, 3)
    _require_arrays("select/clamp", operands)
    if given is not None:
        return given
    # select(pred, on_true, on_false): pred may be a scalar; clamp(min, x, max): min/max may be.
    return operands[1]


@rule("tuple")
def _tuple(operands, attrs, calls, given):
    return Shape.tuple(operands)


@rule("get_tuple_element")
def _get_tuple_element(operands, attrs, calls, given):
    _count("get_tuple_element", operands, 1)
    t = operands[0]
    index = attrs.get("index")
    if not t.is_tuple:
        raise TypeError(f"get_tuple_element: operand must be a tuple, got {t}")
    if not isinstance(index, int) or not 0 <= index < len(t.tuple_shapes):
        raise ValueError(f"get_tuple_element: index {index!r} out of range for {t}")
    return t.tuple_shapes[index]
