"""Shape inference: the result shape of every HLO opcode from its operands and attributes.

Each rule is registered with ``@rule("opcode", ...)`` and called as
``rule(operand_shapes, attrs, calls, given)`` where ``given`` is the shape the caller passed
(or None). Rules raise ``ValueError``/``TypeError`` naming the opcode on malformed input, so
a bad instruction is rejected when it is built (and by the verifier, which re-runs them).

The rules follow the StableHLO spec. Ops whose result type is free take it from ``given``:
``parameter``, ``convert``, ``iota``, ``broadcast_in_dim``, ``reshape``, ``custom_call`` and
the element type of ``dot_general`` (its preferred element type). Every other rule ignores
``given``; the builder and the verifier compare it with the inferred shape.

Optional attributes (``reduce_window``'s strides, dilations and padding) may be left out: the
rules read them as their defaults, and the builder stores the defaults explicitly
(``with_default_attrs``) so every built instruction prints all of its attributes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from ember.compiler.hlo import (
    BINARY_ELEMENTWISE,
    COMPARISON_DIRECTIONS,
    UNARY_ELEMENTWISE,
    Shape,
    element_type_name,
)

_RULES: dict[str, Callable] = {}


def rule(*opcodes: str):
    def register(fn: Callable) -> Callable:
        for op in opcodes:
            _RULES[op] = fn
        return fn
    return register


# Optional attributes: opcode -> fn(operand_shapes) -> {name: default value}.
_DEFAULT_ATTRS: dict[str, Callable] = {}


def with_default_attrs(opcode: str, operands: list[Shape],
                       attrs: dict[str, Any]) -> dict[str, Any]:
    """``attrs`` plus the defaults of the optional attributes of ``opcode`` that it lacks.

    Example:
        >>> with_default_attrs("reduce_window", [Shape(np.float32, (4,)), Shape(np.float32, ())],
        ...                    {"window_dimensions": (2,)})["padding"]
        ((0, 0),)
    """
    fn = _DEFAULT_ATTRS.get(opcode)
    if fn is None:
        return attrs
    defaults = fn(operands)
    return {**defaults, **attrs} if defaults else attrs


def infer_shape(opcode: str, operands: list[Shape], attrs: dict[str, Any], calls: list,
                given: Shape | None = None) -> Shape:
    """The result shape of ``opcode``; ``given`` is used only by ops whose type is free.

    Example:
        >>> x = Shape(np.float32, (3, 4))
        >>> infer_shape("transpose", [x], {"permutation": (1, 0)}, [])
        Shape(f32[4,3])
    """
    fn = _RULES.get(opcode)
    if fn is None:
        raise ValueError(f"HLO: no shape rule for opcode {opcode!r}")
    return fn(operands, attrs, calls, given)


# --------------------------------------------------------------------------- helpers

_FLOATS = frozenset(np.dtype(t) for t in (np.float16, ml_dtypes.bfloat16, np.float32,
                                          np.float64))
_COMPLEX = frozenset(np.dtype(t) for t in (np.complex64, np.complex128))
_BOOL = np.dtype(np.bool_)


def _is_int(dtype: np.dtype) -> bool:
    return dtype.kind in "iu"


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


def _need_given(opcode: str, given: Shape | None) -> Shape:
    if given is None:
        raise ValueError(f"{opcode}: the result shape must be given")
    if given.is_tuple:
        raise TypeError(f"{opcode}: the result must be an array, got {given}")
    return given


def _attr(opcode: str, attrs: dict[str, Any], name: str) -> Any:
    if name not in attrs:
        raise ValueError(f"{opcode}: missing attribute {name!r}")
    return attrs[name]


def _int_attr(opcode: str, attrs: dict[str, Any], name: str) -> int:
    v = _attr(opcode, attrs, name)
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{opcode}: attribute {name} must be an int, got {v!r}")
    return v


def _ints_attr(opcode: str, attrs: dict[str, Any], name: str,
               length: int | None = None) -> tuple[int, ...]:
    v = _attr(opcode, attrs, name)
    if not isinstance(v, (tuple, list)) or any(
            isinstance(x, bool) or not isinstance(x, int) for x in v):
        raise TypeError(f"{opcode}: attribute {name} must be a tuple of ints, got {v!r}")
    if length is not None and len(v) != length:
        raise ValueError(f"{opcode}: attribute {name} must have {length} entries, got "
                         f"{len(v)}: {tuple(v)}")
    return tuple(v)


def _dims_attr(opcode: str, attrs: dict[str, Any], name: str, rank: int,
               sorted_: bool = False) -> tuple[int, ...]:
    """A tuple of distinct dimension numbers in [0, rank)."""
    v = _ints_attr(opcode, attrs, name)
    for d in v:
        if not 0 <= d < rank:
            raise ValueError(f"{opcode}: {name} {v} has the dimension {d} out of range for "
                             f"rank {rank}")
    if len(set(v)) != len(v):
        raise ValueError(f"{opcode}: {name} {v} repeats a dimension")
    if sorted_ and list(v) != sorted(v):
        raise ValueError(f"{opcode}: {name} {v} must be sorted")
    return v


def _bool_attr(opcode: str, attrs: dict[str, Any], name: str) -> None:
    if name in attrs and not isinstance(attrs[name], bool):
        raise TypeError(f"{opcode}: attribute {name} must be a bool, got {attrs[name]!r}")


def _scalar_index(opcode: str, s: Shape, what: str) -> None:
    if s.is_tuple or s.dims != () or not _is_int(s.dtype):
        raise TypeError(f"{opcode}: {what} must be an integer scalar, got {s}")


def _calls(opcode: str, calls: list, n: int | None = None) -> list:
    if n is not None and len(calls) != n:
        raise ValueError(f"{opcode}: expected {n} called computation(s), got {len(calls)}")
    if n is None and not calls:
        raise ValueError(f"{opcode}: expected at least one called computation")
    return calls


def _check_params(opcode: str, comp: Any, shapes: Sequence[Shape], what: str) -> None:
    params = list(comp.parameter_shapes)
    if params != list(shapes):
        raise TypeError(f"{opcode}: {what} {comp.name} takes "
                        f"({', '.join(str(s) for s in params)}), expected "
                        f"({', '.join(str(s) for s in shapes)})")


def _scalars(dtypes: Sequence[np.dtype]) -> list[Shape]:
    return [Shape(d, ()) for d in dtypes]


# --------------------------------------------------------------------------- elementwise

_COMPLEX_PART = {np.dtype(np.complex64): np.dtype(np.float32),
                 np.dtype(np.complex128): np.dtype(np.float64)}
_TO_COMPLEX = {v: k for k, v in _COMPLEX_PART.items()}

# Operand element-type constraints of the unary ops (StableHLO's).
_FLOAT_ONLY = frozenset({
    "floor", "ceil", "round_nearest_even", "round_nearest_afz", "cbrt", "is_finite", "erf",
    "erfc", "erf_inv", "lgamma", "digamma", "reduce_precision",
})
_FLOAT_OR_COMPLEX = frozenset({
    "sqrt", "rsqrt", "exponential", "exponential_minus_one", "log", "log_plus_one",
    "logistic", "tanh", "sine", "cosine", "tan", "asin", "acos", "atan", "sinh", "cosh",
    "asinh", "acosh", "atanh",
})
_INT_ONLY = frozenset({"popcnt", "count_leading_zeros", "shift_left",
                       "shift_right_arithmetic", "shift_right_logical"})
_INT_OR_PRED = frozenset({"not", "and", "or", "xor"})
_NOT_PRED = frozenset({"abs", "negate", "sign", "subtract", "divide", "remainder", "power",
                       "real", "imag", "conj"})


def _check_element_type(opcode: str, dtype: np.dtype) -> None:
    if opcode in _FLOAT_ONLY:
        ok, want = dtype in _FLOATS, "a floating-point"
    elif opcode in _FLOAT_OR_COMPLEX:
        ok, want = dtype in _FLOATS or dtype in _COMPLEX, "a floating-point or complex"
    elif opcode in _INT_ONLY:
        ok, want = _is_int(dtype), "an integer"
    elif opcode in _INT_OR_PRED:
        ok, want = _is_int(dtype) or dtype == _BOOL, "an integer or pred"
    elif opcode in _NOT_PRED:
        ok, want = dtype != _BOOL, "a numeric"
    else:
        return
    if not ok:
        raise TypeError(f"{opcode}: operands must have {want} element type, got "
                        f"{element_type_name(dtype)}")


def _unary_rule(opcode: str) -> Callable:
    def infer(operands, attrs, calls, given):
        _count(opcode, operands, 1)
        _require_arrays(opcode, operands)
        x = operands[0]
        _check_element_type(opcode, x.dtype)
        if opcode == "abs" and x.dtype in _COMPLEX_PART:
            return Shape(_COMPLEX_PART[x.dtype], x.dims)
        return x
    return infer


for _op in UNARY_ELEMENTWISE:
    _RULES[_op] = _unary_rule(_op)


@rule("is_finite")
def _is_finite(operands, attrs, calls, given):
    _count("is_finite", operands, 1)
    _require_arrays("is_finite", operands)
    _check_element_type("is_finite", operands[0].dtype)
    return Shape(np.bool_, operands[0].dims)


@rule("real", "imag")
def _real_imag(operands, attrs, calls, given):
    _count("real/imag", operands, 1)
    _require_arrays("real/imag", operands)
    x = operands[0]
    _check_element_type("real", x.dtype)
    return Shape(_COMPLEX_PART.get(x.dtype, x.dtype), x.dims)


@rule("convert")
def _convert(operands, attrs, calls, given):
    _count("convert", operands, 1)
    _require_arrays("convert", operands)
    if given is None:
        raise ValueError("convert: the result shape (its element type) must be given")
    if given.is_tuple or given.dims != operands[0].dims:
        raise ValueError(f"convert: result {given} must have the operand's dimensions "
                         f"{list(operands[0].dims)}")
    return given


@rule("bitcast_convert")
def _bitcast_convert(operands, attrs, calls, given):
    """Same-width bitcasts only (the lowering sends others to a custom call)."""
    _count("bitcast_convert", operands, 1)
    _require_arrays("bitcast_convert", operands)
    x = operands[0]
    if given is None:
        raise ValueError("bitcast_convert: the result shape (its element type) must be given")
    if given.is_tuple or given.dims != x.dims or given.dtype.itemsize != x.dtype.itemsize:
        raise ValueError(f"bitcast_convert: result {given} must have the operand's dimensions "
                         f"{list(x.dims)} and element width ({x.dtype.itemsize} bytes)")
    return given


@rule("reduce_precision")
def _reduce_precision(operands, attrs, calls, given):
    _count("reduce_precision", operands, 1)
    _require_arrays("reduce_precision", operands)
    _check_element_type("reduce_precision", operands[0].dtype)
    if _int_attr("reduce_precision", attrs, "exponent_bits") < 1:
        raise ValueError("reduce_precision: exponent_bits must be at least 1")
    if _int_attr("reduce_precision", attrs, "mantissa_bits") < 0:
        raise ValueError("reduce_precision: mantissa_bits must be non-negative")
    return operands[0]


def _binary_rule(opcode: str) -> Callable:
    def infer(operands, attrs, calls, given):
        _count(opcode, operands, 2)
        dims = _same_dims(opcode, operands)
        a, b = operands
        if a.dtype != b.dtype:
            raise TypeError(f"{opcode}: operands must have one element type, got {a} and {b}")
        _check_element_type(opcode, a.dtype)
        return Shape(a.dtype, dims)
    return infer


for _op in BINARY_ELEMENTWISE:
    _RULES[_op] = _binary_rule(_op)

_COMPARE_TYPES = ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")


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
    compare_type = attrs.get("compare_type")
    if compare_type is not None and compare_type not in _COMPARE_TYPES:
        raise ValueError(f"compare: compare_type must be one of {_COMPARE_TYPES}, got "
                         f"{compare_type!r}")
    return Shape(np.bool_, dims)


@rule("complex")
def _complex(operands, attrs, calls, given):
    s = _binary_rule("complex")(operands, attrs, calls, given)
    if s.dtype not in _TO_COMPLEX:
        raise TypeError(f"complex: operands must be f32 or f64, got {s}")
    return Shape(_TO_COMPLEX[s.dtype], s.dims)


@rule("atan2", "next_after")
def _float_binary(operands, attrs, calls, given):
    s = _binary_rule("atan2/next_after")(operands, attrs, calls, given)
    if s.dtype not in _FLOATS and s.dtype not in _COMPLEX:
        raise TypeError(f"atan2/next_after: operands must be floating-point, got {s}")
    return s


@rule("select")
def _select(operands, attrs, calls, given):
    _count("select", operands, 3)
    _require_arrays("select", operands)
    pred, on_true, on_false = operands
    if pred.dtype != _BOOL:
        raise TypeError(f"select: the predicate must be pred, got {pred}")
    if on_true != on_false:
        raise TypeError(f"select: on_true {on_true} and on_false {on_false} must have one "
                        f"shape")
    if pred.dims not in ((), on_true.dims):
        raise ValueError(f"select: the predicate {pred} must be a scalar or have the "
                         f"dimensions of {on_true}")
    return on_true


@rule("clamp")
def _clamp(operands, attrs, calls, given):
    _count("clamp", operands, 3)
    _require_arrays("clamp", operands)
    lo, x, hi = operands
    for what, s in (("min", lo), ("max", hi)):
        if s.dtype != x.dtype:
            raise TypeError(f"clamp: {what} {s} must have the operand's element type "
                            f"({x})")
        if s.dims not in ((), x.dims):
            raise ValueError(f"clamp: {what} {s} must be a scalar or have the operand's "
                             f"dimensions ({x})")
    return x


# --------------------------------------------------------------------------- leaves


@rule("parameter")
def _parameter(operands, attrs, calls, given):
    _count("parameter", operands, 0)
    index = _int_attr("parameter", attrs, "index")
    if index < 0:
        raise ValueError(f"parameter: index must be non-negative, got {index}")
    if given is None:
        raise ValueError("parameter: the shape must be given")
    return given


@rule("constant")
def _constant(operands, attrs, calls, given):
    _count("constant", operands, 0)
    value = _attr("constant", attrs, "value")
    if not isinstance(value, np.ndarray):
        raise TypeError(f"constant: value must be an ndarray, got {type(value).__name__}")
    return Shape(value.dtype, value.shape)


@rule("iota")
def _iota(operands, attrs, calls, given):
    _count("iota", operands, 0)
    out = _need_given("iota", given)
    dim = _int_attr("iota", attrs, "iota_dimension")
    if not 0 <= dim < out.rank:
        raise ValueError(f"iota: iota_dimension {dim} out of range for the result {out}")
    if out.dtype == _BOOL:
        raise TypeError("iota: the result must have a numeric element type, got pred")
    return out


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
    if (isinstance(index, bool) or not isinstance(index, int)
            or not 0 <= index < len(t.tuple_shapes)):
        raise ValueError(f"get_tuple_element: index {index!r} out of range for {t}")
    return t.tuple_shapes[index]


# --------------------------------------------------------------------------- shape ops


@rule("broadcast_in_dim")
def _broadcast_in_dim(operands, attrs, calls, given):
    op = "broadcast_in_dim"
    _count(op, operands, 1)
    _require_arrays(op, operands)
    x = operands[0]
    out = _need_given(op, given)
    if out.dtype != x.dtype:
        raise TypeError(f"{op}: result {out} must have the operand's element type ({x})")
    dims = _dims_attr(op, attrs, "broadcast_dimensions", out.rank)
    if len(dims) != x.rank:
        raise ValueError(f"{op}: broadcast_dimensions {dims} must have one entry per operand "
                         f"dimension ({x})")
    for i, d in enumerate(dims):
        if x.dims[i] not in (1, out.dims[d]):
            raise ValueError(f"{op}: operand dimension {i} of {x} has size {x.dims[i]}, "
                             f"which cannot broadcast to {out.dims[d]} in {out}")
    return out


@rule("reshape")
def _reshape(operands, attrs, calls, given):
    _count("reshape", operands, 1)
    _require_arrays("reshape", operands)
    x = operands[0]
    out = _need_given("reshape", given)
    if out.dtype != x.dtype:
        raise TypeError(f"reshape: result {out} must have the operand's element type ({x})")
    if out.size != x.size:
        raise ValueError(f"reshape: cannot reshape {x} ({x.size} elements) to {out} "
                         f"({out.size} elements)")
    return out


@rule("transpose")
def _transpose(operands, attrs, calls, given):
    _count("transpose", operands, 1)
    _require_arrays("transpose", operands)
    x = operands[0]
    perm = _dims_attr("transpose", attrs, "permutation", x.rank)
    if len(perm) != x.rank:
        raise ValueError(f"transpose: permutation {perm} is not a permutation of the "
                         f"dimensions of {x}")
    return Shape(x.dtype, [x.dims[p] for p in perm])


@rule("slice")
def _slice(operands, attrs, calls, given):
    _count("slice", operands, 1)
    _require_arrays("slice", operands)
    x = operands[0]
    starts = _ints_attr("slice", attrs, "start_indices", x.rank)
    limits = _ints_attr("slice", attrs, "limit_indices", x.rank)
    strides = _ints_attr("slice", attrs, "strides", x.rank)
    dims = []
    for i, (s, e, st, n) in enumerate(zip(starts, limits, strides, x.dims)):
        if not 0 <= s <= e <= n:
            raise ValueError(f"slice: dimension {i} of {x}: need 0 <= start ({s}) <= limit "
                             f"({e}) <= size ({n})")
        if st < 1:
            raise ValueError(f"slice: stride {st} of dimension {i} must be positive")
        dims.append(-(-(e - s) // st))
    return Shape(x.dtype, dims)


@rule("dynamic_slice")
def _dynamic_slice(operands, attrs, calls, given):
    op = "dynamic_slice"
    _require_arrays(op, operands)
    if not operands:
        raise ValueError(f"{op}: expected an operand and start indices")
    x = operands[0]
    _count(op, operands, 1 + x.rank)
    _check_starts(op, operands[1:])
    sizes = _ints_attr(op, attrs, "slice_sizes", x.rank)
    for i, (sz, n) in enumerate(zip(sizes, x.dims)):
        if not 0 <= sz <= n:
            raise ValueError(f"{op}: slice size {sz} of dimension {i} must be in [0, {n}] "
                             f"for {x}")
    return Shape(x.dtype, sizes)


def _check_starts(opcode: str, starts: Sequence[Shape]) -> None:
    for i, s in enumerate(starts):
        _scalar_index(opcode, s, f"start index {i}")
    if len({s.dtype for s in starts}) > 1:
        raise TypeError(f"{opcode}: start indices must have one element type, got "
                        f"{', '.join(str(s) for s in starts)}")


@rule("dynamic_update_slice")
def _dynamic_update_slice(operands, attrs, calls, given):
    op = "dynamic_update_slice"
    _require_arrays(op, operands)
    if len(operands) < 2:
        raise ValueError(f"{op}: expected an operand, an update and start indices")
    x, update = operands[0], operands[1]
    _count(op, operands, 2 + x.rank)
    if update.dtype != x.dtype or update.rank != x.rank:
        raise TypeError(f"{op}: update {update} must have the operand's element type and "
                        f"rank ({x})")
    if any(u > n for u, n in zip(update.dims, x.dims)):
        raise ValueError(f"{op}: update {update} is larger than the operand {x}")
    _check_starts(op, operands[2:])
    return x


@rule("concatenate")
def _concatenate(operands, attrs, calls, given):
    op = "concatenate"
    _require_arrays(op, operands)
    if not operands:
        raise ValueError(f"{op}: expected at least one operand")
    first = operands[0]
    dim = _int_attr(op, attrs, "dimension")
    if not 0 <= dim < first.rank:
        raise ValueError(f"{op}: dimension {dim} out of range for {first}")
    total = 0
    for s in operands:
        if s.dtype != first.dtype:
            raise TypeError(f"{op}: operands must have one element type, got {first} and {s}")
        if s.rank != first.rank or any(a != b for i, (a, b) in
                                       enumerate(zip(s.dims, first.dims)) if i != dim):
            raise ValueError(f"{op}: operands {first} and {s} differ outside dimension {dim}")
        total += s.dims[dim]
    dims = list(first.dims)
    dims[dim] = total
    return Shape(first.dtype, dims)


@rule("pad")
def _pad(operands, attrs, calls, given):
    op = "pad"
    _count(op, operands, 2)
    _require_arrays(op, operands)
    x, value = operands
    if value.dims != () or value.dtype != x.dtype:
        raise TypeError(f"{op}: the padding value {value} must be a scalar of the operand's "
                        f"element type ({x})")
    lo = _ints_attr(op, attrs, "edge_padding_low", x.rank)
    hi = _ints_attr(op, attrs, "edge_padding_high", x.rank)
    interior = _ints_attr(op, attrs, "interior_padding", x.rank)
    dims = []
    for i, (n, a, b, c) in enumerate(zip(x.dims, lo, hi, interior)):
        if c < 0:
            raise ValueError(f"{op}: interior_padding {c} of dimension {i} is negative")
        size = a + b + n + max(n - 1, 0) * c
        if size < 0:
            raise ValueError(f"{op}: dimension {i} of {x} would have negative size {size}")
        dims.append(size)
    return Shape(x.dtype, dims)


@rule("reverse")
def _reverse(operands, attrs, calls, given):
    _count("reverse", operands, 1)
    _require_arrays("reverse", operands)
    _dims_attr("reverse", attrs, "dimensions", operands[0].rank)
    return operands[0]


# --------------------------------------------------------------------------- reduce, dot


@rule("reduce")
def _reduce(operands, attrs, calls, given):
    op = "reduce"
    inputs, inits = _split_reducer_operands(op, operands)
    n = len(inputs)
    in_dims = inputs[0].dims
    dims = _dims_attr(op, attrs, "dimensions", len(in_dims))
    acc = _check_reducer_body(op, calls, inputs, inits)
    out_dims = [d for i, d in enumerate(in_dims) if i not in dims]
    outs = [Shape(t, out_dims) for t in acc]
    return outs[0] if n == 1 else Shape.tuple(outs)


def _split_reducer_operands(op: str, operands: list[Shape]) -> tuple[list, list]:
    """N inputs of one shape and N scalar init values (``reduce``, ``reduce_window``)."""
    _require_arrays(op, operands)
    if not operands or len(operands) % 2:
        raise ValueError(f"{op}: expected N inputs then N init values, got {len(operands)} "
                         f"operands")
    n = len(operands) // 2
    inputs, inits = operands[:n], operands[n:]
    _same_dims(op, inputs)
    for s in inits:
        if s.dims != ():
            raise ValueError(f"{op}: init values must be scalars, got {s}")
    return inputs, inits


def _check_reducer_body(op: str, calls: list, inputs: list[Shape],
                        inits: list[Shape]) -> list[np.dtype]:
    """Checks the body: accumulators then input elements in, the accumulators out (one
    scalar, or a tuple of them when N > 1). Returns the accumulator dtypes."""
    (body,) = _calls(op, calls, 1)
    acc = [s.dtype for s in inits]
    _check_params(op, body, _scalars(acc + [s.dtype for s in inputs]), "body")
    want = Shape(acc[0], ()) if len(acc) == 1 else Shape.tuple(_scalars(acc))
    if body.root.shape != want:
        raise TypeError(f"{op}: body {body.name} returns {body.root.shape}, expected {want}")
    return acc


# --------------------------------------------------------------------------- reduce_window

_WINDOW_INT_ATTRS = ("window_strides", "base_dilations", "window_dilations")


def reduce_window_attrs(attrs: dict[str, Any], rank: int) -> dict[str, tuple]:
    """The window attributes of a ``reduce_window`` on inputs of ``rank``, checked, with the
    defaults of the optional ones filled in (strides and dilations 1, padding ``(0, 0)``).

    Example:
        >>> reduce_window_attrs({"window_dimensions": (2,)}, 1)["window_strides"]
        (1,)
    """
    op = "reduce_window"
    out = {"window_dimensions": _ints_attr(op, attrs, "window_dimensions", rank)}
    for name in _WINDOW_INT_ATTRS:
        out[name] = _ints_attr(op, attrs, name, rank) if name in attrs else (1,) * rank
    for name, v in out.items():
        if any(x < 1 for x in v):
            raise ValueError(f"{op}: {name} {v} must all be at least 1")
    padding = attrs.get("padding", ((0, 0),) * rank)
    if not isinstance(padding, (tuple, list)) or any(
            not isinstance(p, (tuple, list)) or len(p) != 2
            or any(isinstance(x, bool) or not isinstance(x, int) for x in p)
            for p in padding):
        raise TypeError(f"{op}: attribute padding must be a tuple of (low, high) int pairs, "
                        f"got {padding!r}")
    if len(padding) != rank:
        raise ValueError(f"{op}: attribute padding must have {rank} entries, got "
                         f"{len(padding)}: {tuple(padding)}")
    out["padding"] = tuple((int(lo), int(hi)) for lo, hi in padding)
    return out


def reduce_window_dims(in_dims: Sequence[int], window: dict[str, tuple]) -> tuple[int, ...]:
    """The result dims of a ``reduce_window`` (``window``: ``reduce_window_attrs``' result).

    Per dimension: the base-dilated, padded size ``(d - 1) * base_dilation + 1 + lo + hi``
    (an empty dimension dilates to 0), the dilated window ``(w - 1) * window_dilation + 1``,
    and ``(padded - dilated_window) // stride + 1`` windows, or none when the window does not
    fit (negative padding may shrink the padded size below zero: no windows either).
    """
    out = []
    for i, d in enumerate(in_dims):
        lo, hi = window["padding"][i]
        dilated = (d - 1) * window["base_dilations"][i] + 1 if d else 0
        padded = dilated + lo + hi
        span = (window["window_dimensions"][i] - 1) * window["window_dilations"][i] + 1
        out.append(0 if padded < span else (padded - span) // window["window_strides"][i] + 1)
    return tuple(out)


def _reduce_window_defaults(operands: list[Shape]) -> dict[str, Any]:
    if not operands or operands[0].is_tuple:
        return {}  # malformed: the rule reports it
    rank = operands[0].rank
    return {"window_strides": (1,) * rank, "base_dilations": (1,) * rank,
            "window_dilations": (1,) * rank, "padding": ((0, 0),) * rank}


_DEFAULT_ATTRS["reduce_window"] = _reduce_window_defaults


@rule("reduce_window")
def _reduce_window(operands, attrs, calls, given):
    op = "reduce_window"
    inputs, inits = _split_reducer_operands(op, operands)
    in_dims = inputs[0].dims
    for i, (x, init) in enumerate(zip(inputs, inits)):
        if x.dtype != init.dtype:  # (the init value fills the padding)
            raise TypeError(f"{op}: init value {i} ({init}) must have the element type of "
                            f"input {i} ({x})")
    window = reduce_window_attrs(attrs, len(in_dims))
    acc = _check_reducer_body(op, calls, inputs, inits)
    out_dims = reduce_window_dims(in_dims, window)
    outs = [Shape(t, out_dims) for t in acc]
    return outs[0] if len(outs) == 1 else Shape.tuple(outs)


_DOT_ATTRS = ("lhs_batching_dimensions", "rhs_batching_dimensions",
              "lhs_contracting_dimensions", "rhs_contracting_dimensions")


@rule("dot_general")
def _dot_general(operands, attrs, calls, given):
    op = "dot_general"
    _count(op, operands, 2)
    _require_arrays(op, operands)
    lhs, rhs = operands
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"{op}: operands must have one element type, got {lhs} and {rhs}")
    lb, rb, lc, rc = (_dims_attr(op, attrs, name, s.rank)
                      for name, s in zip(_DOT_ATTRS, (lhs, rhs, lhs, rhs)))
    for kind, a, b in (("batching", lb, rb), ("contracting", lc, rc)):
        if len(a) != len(b):
            raise ValueError(f"{op}: lhs and rhs {kind} dimensions differ in number: {a} vs "
                             f"{b}")
        for i, j in zip(a, b):
            if lhs.dims[i] != rhs.dims[j]:
                raise ValueError(f"{op}: {kind} dimension {i} of {lhs} and {j} of {rhs} "
                                 f"differ in size")
    for side, batch, contract in (("lhs", lb, lc), ("rhs", rb, rc)):
        if set(batch) & set(contract):
            raise ValueError(f"{op}: {side} batching {batch} and contracting {contract} "
                             f"dimensions overlap")
    dims = ([lhs.dims[i] for i in lb]
            + [d for i, d in enumerate(lhs.dims) if i not in lb and i not in lc]
            + [d for i, d in enumerate(rhs.dims) if i not in rb and i not in rc])
    dtype = lhs.dtype
    if given is not None:
        if given.is_tuple or list(given.dims) != dims:
            raise ValueError(f"{op}: given result {given} must have the dimensions {dims}")
        dtype = given.dtype
    return Shape(dtype, dims)


# --------------------------------------------------------------------------- gather, scatter


def _index_batch_dims(indices: Shape, index_vector_dim: int) -> list[int]:
    return [d for i, d in enumerate(indices.dims) if i != index_vector_dim]


def _index_vector_size(opcode: str, indices: Shape, index_vector_dim: int) -> int:
    if not 0 <= index_vector_dim <= indices.rank:
        raise ValueError(f"{opcode}: index_vector_dim {index_vector_dim} out of range for "
                         f"the indices {indices}")
    if index_vector_dim == indices.rank:
        return 1
    return indices.dims[index_vector_dim]


def _check_batching(opcode: str, operand: Shape, indices: Shape, op_dims: Sequence[int],
                    idx_dims: Sequence[int], index_vector_dim: int, names: tuple) -> None:
    if len(op_dims) != len(idx_dims):
        raise ValueError(f"{opcode}: {names[0]} {tuple(op_dims)} and {names[1]} "
                         f"{tuple(idx_dims)} differ in number")
    for a, b in zip(op_dims, idx_dims):
        if b == index_vector_dim:
            raise ValueError(f"{opcode}: {names[1]} must not contain index_vector_dim {b}")
        if operand.dims[a] != indices.dims[b]:
            raise ValueError(f"{opcode}: batching dimension {a} of {operand} and {b} of the "
                             f"indices {indices} differ in size")


def _check_index_map(opcode: str, name: str, index_map: Sequence[int], size: int,
                     batching: Sequence[int]) -> None:
    if len(index_map) != size:
        raise ValueError(f"{opcode}: {name} {tuple(index_map)} must have one entry per index "
                         f"vector component ({size})")
    if set(index_map) & set(batching):
        raise ValueError(f"{opcode}: {name} {tuple(index_map)} overlaps the batching "
                         f"dimensions {tuple(batching)}")


@rule("gather")
def _gather(operands, attrs, calls, given):
    op = "gather"
    _count(op, operands, 2)
    _require_arrays(op, operands)
    x, indices = operands
    if not _is_int(indices.dtype):
        raise TypeError(f"{op}: start indices must be integers, got {indices}")
    ivd = _int_attr(op, attrs, "index_vector_dim")
    vec = _index_vector_size(op, indices, ivd)
    collapsed = _dims_attr(op, attrs, "collapsed_slice_dims", x.rank, sorted_=True)
    op_batch = _dims_attr(op, attrs, "operand_batching_dims", x.rank, sorted_=True)
    idx_batch = _dims_attr(op, attrs, "start_indices_batching_dims", indices.rank)
    start_map = _dims_attr(op, attrs, "start_index_map", x.rank)
    sizes = _ints_attr(op, attrs, "slice_sizes", x.rank)
    _bool_attr(op, attrs, "indices_are_sorted")
    if set(collapsed) & set(op_batch):
        raise ValueError(f"{op}: collapsed_slice_dims {collapsed} and operand_batching_dims "
                         f"{op_batch} overlap")
    _check_index_map(op, "start_index_map", start_map, vec, op_batch)
    _check_batching(op, x, indices, op_batch, idx_batch, ivd,
                    ("operand_batching_dims", "start_indices_batching_dims"))
    for i, (sz, n) in enumerate(zip(sizes, x.dims)):
        if not 0 <= sz <= n:
            raise ValueError(f"{op}: slice size {sz} of dimension {i} must be in [0, {n}]")
        if (i in collapsed or i in op_batch) and sz > 1:
            raise ValueError(f"{op}: slice size of collapsed or batching dimension {i} must "
                             f"be at most 1, got {sz}")
    offset_sizes = [sz for i, sz in enumerate(sizes) if i not in collapsed and i not in op_batch]
    batch_sizes = _index_batch_dims(indices, ivd)
    rank = len(offset_sizes) + len(batch_sizes)
    offset_dims = _dims_attr(op, attrs, "offset_dims", rank, sorted_=True)
    if len(offset_dims) != len(offset_sizes):
        raise ValueError(f"{op}: offset_dims {offset_dims} must have one entry per slice "
                         f"dimension that is neither collapsed nor batching "
                         f"({len(offset_sizes)})")
    offsets, batches = iter(offset_sizes), iter(batch_sizes)
    dims = [next(offsets) if i in offset_dims else next(batches) for i in range(rank)]
    return Shape(x.dtype, dims)


@rule("scatter")
def _scatter(operands, attrs, calls, given):
    op = "scatter"
    _count(op, operands, 3)
    _require_arrays(op, operands)
    x, indices, updates = operands
    if not _is_int(indices.dtype):
        raise TypeError(f"{op}: scatter indices must be integers, got {indices}")
    if updates.dtype != x.dtype:
        raise TypeError(f"{op}: updates {updates} must have the operand's element type ({x})")
    ivd = _int_attr(op, attrs, "index_vector_dim")
    vec = _index_vector_size(op, indices, ivd)
    window = _dims_attr(op, attrs, "update_window_dims", updates.rank, sorted_=True)
    inserted = _dims_attr(op, attrs, "inserted_window_dims", x.rank, sorted_=True)
    in_batch = _dims_attr(op, attrs, "input_batching_dims", x.rank, sorted_=True)
    idx_batch = _dims_attr(op, attrs, "scatter_indices_batching_dims", indices.rank)
    to_operand = _dims_attr(op, attrs, "scatter_dims_to_operand_dims", x.rank)
    _bool_attr(op, attrs, "indices_are_sorted")
    _bool_attr(op, attrs, "unique_indices")
    if set(inserted) & set(in_batch):
        raise ValueError(f"{op}: inserted_window_dims {inserted} and input_batching_dims "
                         f"{in_batch} overlap")
    if x.rank != len(window) + len(inserted) + len(in_batch):
        raise ValueError(f"{op}: the operand {x} must have len(update_window_dims) + "
                         f"len(inserted_window_dims) + len(input_batching_dims) dimensions")
    _check_index_map(op, "scatter_dims_to_operand_dims", to_operand, vec, in_batch)
    _check_batching(op, x, indices, in_batch, idx_batch, ivd,
                    ("input_batching_dims", "scatter_indices_batching_dims"))
    scatter_sizes = [d for i, d in enumerate(updates.dims) if i not in window]
    if scatter_sizes != _index_batch_dims(indices, ivd):
        raise ValueError(f"{op}: the scatter dimensions of the updates {updates} must match "
                         f"the indices {indices} without index_vector_dim {ivd}")
    window_bounds = [d for i, d in enumerate(x.dims) if i not in inserted and i not in in_batch]
    for w, bound in zip(window, window_bounds):
        if updates.dims[w] > bound:
            raise ValueError(f"{op}: update window dimension {w} of {updates} exceeds the "
                             f"operand's bound {bound}")
    (update_fn,) = _calls(op, calls, 1)
    scalar = Shape(x.dtype, ())
    _check_params(op, update_fn, [scalar, scalar], "update computation")
    if update_fn.root.shape != scalar:
        raise TypeError(f"{op}: update computation {update_fn.name} returns "
                        f"{update_fn.root.shape}, expected {scalar}")
    return x


# --------------------------------------------------------------------------- sort, control flow


@rule("sort")
def _sort(operands, attrs, calls, given):
    op = "sort"
    _require_arrays(op, operands)
    if not operands:
        raise ValueError(f"{op}: expected at least one operand")
    dims = _same_dims(op, operands)
    dim = _int_attr(op, attrs, "dimension")
    if not 0 <= dim < len(dims):
        raise ValueError(f"{op}: dimension {dim} out of range for {operands[0]}")
    _bool_attr(op, attrs, "is_stable")
    (comparator,) = _calls(op, calls, 1)
    params = [Shape(s.dtype, ()) for s in operands for _ in range(2)]
    _check_params(op, comparator, params, "comparator")
    if comparator.root.shape != Shape(np.bool_, ()):
        raise TypeError(f"{op}: comparator {comparator.name} must return pred[], got "
                        f"{comparator.root.shape}")
    return Shape.tuple(operands)


@rule("while")
def _while(operands, attrs, calls, given):
    op = "while"
    cond, body = _calls(op, calls, 2)
    _check_params(op, cond, operands, "condition")
    if cond.root.shape != Shape(np.bool_, ()):
        raise TypeError(f"{op}: condition {cond.name} must return pred[], got "
                        f"{cond.root.shape}")
    _check_params(op, body, operands, "body")
    state = Shape.tuple(operands)
    if body.root.shape != state:
        raise TypeError(f"{op}: body {body.name} returns {body.root.shape}, expected {state}")
    return state


@rule("case")
def _case(operands, attrs, calls, given):
    op = "case"
    if not operands:
        raise ValueError(f"{op}: expected an index operand")
    index = operands[0]
    if index.is_tuple or index.dims != () or index.dtype != np.dtype(np.int32):
        raise TypeError(f"{op}: the index must be an s32 scalar, got {index}")
    branches = _calls(op, calls)
    out = branches[0].root.shape
    for br in branches:
        _check_params(op, br, operands[1:], "branch")
        if br.root.shape != out:
            raise TypeError(f"{op}: branches return different shapes: {out} and "
                            f"{br.root.shape} ({br.name})")
    return out


@rule("call")
def _call(operands, attrs, calls, given):
    (target,) = _calls("call", calls, 1)
    _check_params("call", target, operands, "callee")
    return target.root.shape


FUSION_KINDS = ("loop", "input", "output")


@rule("fusion")
def _fusion(operands, attrs, calls, given):
    (fused,) = _calls("fusion", calls, 1)
    kind = attrs.get("kind")
    if kind not in FUSION_KINDS:
        raise ValueError(f"fusion: kind must be one of {FUSION_KINDS}, got {kind!r}")
    _check_params("fusion", fused, operands, "fused computation")
    return fused.root.shape


# Checks of the attributes (and result) of known custom-call targets:
# target -> fn(operand_shapes, attrs, given) raising ValueError/TypeError when malformed.
_CUSTOM_CALL_RULES: dict[str, Callable] = {}


def register_custom_call_rule(target: str, fn: Callable) -> None:
    """Makes shape inference (so the builder, the parser and the verifier) check every
    ``custom_call`` of ``target`` with ``fn(operand_shapes, attrs, given)``, which raises a
    ``ValueError``/``TypeError`` naming the attribute when one is missing or malformed.

    Example:
        >>> def check_scale(operands, attrs, given):
        ...     if not isinstance(attrs.get("factor"), int):
        ...         raise TypeError("custom_call my.scale: attribute factor must be an int")
        >>> register_custom_call_rule("my.scale", check_scale)
    """
    _CUSTOM_CALL_RULES[target] = fn


@rule("custom_call")
def _custom_call(operands, attrs, calls, given):
    target = attrs.get("call_target_name")
    if not isinstance(target, str) or not target:
        raise ValueError(f"custom_call: call_target_name must be a non-empty string, got "
                         f"{target!r}")
    _bool_attr(f"custom_call {target}", attrs, "has_side_effect")
    if given is None:
        raise ValueError(f"custom_call {target}: the result shape must be given")
    check = _CUSTOM_CALL_RULES.get(target)
    if check is not None:
        check(operands, attrs, given)
    return given


def _top_k_rule(operands, attrs, given):
    op = "custom_call ember.top_k"
    _count(op, operands, 1)
    _require_arrays(op, operands)
    x = operands[0]
    k = _int_attr(op, attrs, "k")
    if not x.dims or not 0 <= k <= x.dims[-1]:
        raise ValueError(f"{op}: k={k} must be in [0, last dimension] of {x}")
    dims = x.dims[:-1] + (k,)
    want = Shape.tuple([Shape(x.dtype, dims), Shape(np.int32, dims)])
    if given != want:
        raise TypeError(f"{op}: result {given} must be {want}")


def _host_callback_rule(operands, attrs, given):
    op = "custom_call ember.host_callback"
    if _int_attr(op, attrs, "callback_id") < 0:
        raise ValueError(f"{op}: callback_id must be non-negative, got {attrs['callback_id']}")


register_custom_call_rule("ember.top_k", _top_k_rule)
register_custom_call_rule("ember.host_callback", _host_callback_rule)
