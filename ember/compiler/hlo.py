"""The HLO IR: modules of computations of instructions, with StableHLO op semantics.

An ``Instruction`` has an opcode (StableHLO's op name: ``add``, ``broadcast_in_dim``,
``dot_general``, ...), operand instructions, a result ``Shape``, attributes (plain Python
values: ints, floats, bools, strings, nested tuples of those; a constant's value is an
ndarray) and the computations it calls (a reduce's body, a while's condition and body, a
fusion's fused computation, ...). A ``Computation`` lists its instructions in a topological
order, parameters first, and names a root. A ``Module`` holds computations; the entry is the
last one. ``Builder`` creates instructions and infers their shapes
(``ember.compiler.shape_inference``), so every instruction is typed when it is made.

Text form (``Module.to_text()``; parsed back by ``ember.compiler.parser``)::

    HloModule jit_f

    ENTRY %main (Arg_0.1: f32[3]) -> f32[3] {
      %Arg_0.1 = f32[3] parameter(0)
      %constant.2 = f32[] constant(2)
      %broadcast_in_dim.3 = f32[3] broadcast_in_dim(%constant.2), broadcast_dimensions={}
      ROOT %multiply.4 = f32[3] multiply(%Arg_0.1, %broadcast_in_dim.3)
    }
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

import ml_dtypes
import numpy as np

# --------------------------------------------------------------------------- element types

_ELEMENT_TYPES: dict[str, np.dtype] = {
    "pred": np.dtype(np.bool_),
    "s8": np.dtype(np.int8), "s16": np.dtype(np.int16),
    "s32": np.dtype(np.int32), "s64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8), "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32), "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
    "c64": np.dtype(np.complex64), "c128": np.dtype(np.complex128),
}
_TYPE_NAMES: dict[np.dtype, str] = {v: k for k, v in _ELEMENT_TYPES.items()}


def element_type_name(dtype: Any) -> str:
    """HLO's name of a dtype: ``pred``, ``s32``, ``bf16``, ``f32``, ..."""
    try:
        return _TYPE_NAMES[np.dtype(dtype)]
    except KeyError:
        raise TypeError(f"HLO has no element type for dtype {dtype}") from None


def element_type(name: str) -> np.dtype:
    """The dtype of an HLO element type name."""
    try:
        return _ELEMENT_TYPES[name]
    except KeyError:
        raise ValueError(f"unknown HLO element type {name!r}") from None


# --------------------------------------------------------------------------- shapes


class Shape:
    """An array shape (``dtype`` and ``dims``) or a tuple of shapes (``tuple_shapes``)."""

    __slots__ = ("dtype", "dims", "tuple_shapes")

    def __init__(self, dtype: Any = None, dims: Sequence[int] = (),
                 tuple_shapes: Sequence[Shape] | None = None):
        if tuple_shapes is not None:
            self.dtype = None
            self.dims = ()
            self.tuple_shapes = tuple(tuple_shapes)
        else:
            self.dtype = np.dtype(dtype)
            self.dims = tuple(int(d) for d in dims)
            self.tuple_shapes = None

    @staticmethod
    def tuple(shapes: Iterable[Shape]) -> Shape:
        return Shape(tuple_shapes=tuple(shapes))

    @property
    def is_tuple(self) -> bool:
        return self.tuple_shapes is not None

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def size(self) -> int:
        """Number of elements (arrays only)."""
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        """Bytes of the buffer(s) this shape describes (tuples: the sum of their leaves)."""
        if self.is_tuple:
            return sum(s.nbytes for s in self.tuple_shapes)
        return self.size * self.dtype.itemsize

    def with_dtype(self, dtype: Any) -> Shape:
        return Shape(dtype, self.dims)

    def with_dims(self, dims: Sequence[int]) -> Shape:
        return Shape(self.dtype, dims)

    def leaves(self) -> list[Shape]:
        if not self.is_tuple:
            return [self]
        return [leaf for s in self.tuple_shapes for leaf in s.leaves()]

    def __eq__(self, other) -> bool:
        return (isinstance(other, Shape) and self.tuple_shapes == other.tuple_shapes
                and self.dtype == other.dtype and self.dims == other.dims)

    def __hash__(self) -> int:
        return hash((self.dtype, self.dims, self.tuple_shapes))

    def to_text(self) -> str:
        if self.is_tuple:
            return "(" + ", ".join(s.to_text() for s in self.tuple_shapes) + ")"
        return f"{element_type_name(self.dtype)}[{','.join(str(d) for d in self.dims)}]"

    __str__ = to_text

    def __repr__(self) -> str:
        return f"Shape({self.to_text()})"


# --------------------------------------------------------------------------- opcodes

# Elementwise ops (StableHLO names; CHLO names for the special functions StableHLO lacks).
# Their shape rule: operands of one shape, result of that shape and of the dtype below.
UNARY_ELEMENTWISE = frozenset({
    "abs", "negate", "sign", "floor", "ceil", "round_nearest_even", "round_nearest_afz",
    "sqrt", "rsqrt", "cbrt", "exponential", "exponential_minus_one", "log", "log_plus_one",
    "logistic", "tanh", "sine", "cosine", "tan", "not", "popcnt", "count_leading_zeros",
    "is_finite", "real", "imag", "conj", "asin", "acos", "atan", "sinh", "cosh", "asinh",
    "acosh", "atanh", "erf", "erfc", "erf_inv", "lgamma", "digamma", "convert",
    "bitcast_convert", "reduce_precision", "copy",
})
BINARY_ELEMENTWISE = frozenset({
    "add", "subtract", "multiply", "divide", "remainder", "power", "maximum", "minimum",
    "and", "or", "xor", "shift_left", "shift_right_arithmetic", "shift_right_logical",
    "atan2", "next_after", "complex", "compare",
})
TERNARY_ELEMENTWISE = frozenset({"select", "clamp"})
ELEMENTWISE = UNARY_ELEMENTWISE | BINARY_ELEMENTWISE | TERNARY_ELEMENTWISE

# Ops whose evaluation is expensive per element: fusion must not duplicate them.
EXPENSIVE_ELEMENTWISE = frozenset({
    "exponential", "exponential_minus_one", "log", "log_plus_one", "logistic", "tanh",
    "sine", "cosine", "tan", "power", "atan2", "asin", "acos", "atan", "sinh", "cosh",
    "asinh", "acosh", "atanh", "erf", "erfc", "erf_inv", "lgamma", "digamma", "divide",
    "remainder", "sqrt", "rsqrt", "cbrt", "next_after",
})

COMPARISON_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")

# Ops that run called computations as part of the program (not as per-element bodies).
CONTROL_FLOW = frozenset({"call", "while", "case"})

# Every opcode the IR knows, for the verifier and the parser.
OPCODES = ELEMENTWISE | frozenset({
    "parameter", "constant", "iota", "broadcast_in_dim", "reshape", "transpose", "slice",
    "dynamic_slice", "dynamic_update_slice", "concatenate", "pad", "reverse", "reduce",
    "reduce_window", "dot_general", "gather", "scatter", "sort", "while", "case", "call",
    "tuple", "get_tuple_element", "custom_call", "fusion",
})


# --------------------------------------------------------------------------- instructions


class Instruction:
    """One HLO operation; ``operands`` and ``calls`` are lists that passes may rewrite."""

    __slots__ = ("opcode", "operands", "shape", "attrs", "calls", "name")

    def __init__(self, opcode: str, operands: Sequence[Instruction], shape: Shape,
                 attrs: dict[str, Any] | None = None,
                 calls: Sequence[Computation] = (), name: str = ""):
        self.opcode = opcode
        self.operands = list(operands)
        self.shape = shape
        self.attrs = dict(attrs or {})
        self.calls = list(calls)
        self.name = name

    @property
    def dtype(self) -> np.dtype:
        return self.shape.dtype

    @property
    def dims(self) -> tuple[int, ...]:
        return self.shape.dims

    def __repr__(self) -> str:
        return f"%{self.name} = {self.shape.to_text()} {self.opcode}"


class Computation:
    """Instructions in topological order (parameters first) with a root."""

    __slots__ = ("name", "instructions", "root")

    def __init__(self, name: str, instructions: Sequence[Instruction], root: Instruction):
        self.name = name
        self.instructions = list(instructions)
        self.root = root

    @property
    def parameters(self) -> list[Instruction]:
        params = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(params, key=lambda p: p.attrs["index"])

    @property
    def parameter_shapes(self) -> list[Shape]:
        return [p.shape for p in self.parameters]

    def users(self) -> dict[Instruction, list[Instruction]]:
        """Each instruction's users in this computation (an operand used twice counts twice)."""
        out: dict[Instruction, list[Instruction]] = {i: [] for i in self.instructions}
        for inst in self.instructions:
            for op in inst.operands:
                out.setdefault(op, []).append(inst)
        return out

    def replace_all_uses(self, old: Instruction, new: Instruction) -> None:
        """Makes every user of ``old`` (and the root, if it is ``old``) use ``new``."""
        for inst in self.instructions:
            if any(op is old for op in inst.operands):
                inst.operands = [new if op is old else op for op in inst.operands]
        if self.root is old:
            self.root = new

    def sort_topologically(self) -> None:
        """Reorders the instructions so each comes after its operands (parameters first).

        Iterative depth-first search; each instruction is expanded once, and a cycle raises.
        """
        order: list[Instruction] = list(self.parameters)
        done: set[int] = {id(p) for p in order}
        active: set[int] = set()
        for start in self.instructions:
            if id(start) in done:
                continue
            stack: list[tuple[Instruction, int]] = [(start, 0)]
            active.add(id(start))
            while stack:
                inst, next_operand = stack[-1]
                if next_operand < len(inst.operands):
                    stack[-1] = (inst, next_operand + 1)
                    op = inst.operands[next_operand]
                    if id(op) in done:
                        continue
                    if id(op) in active:
                        raise ValueError(f"{self.name}: cycle through %{op.name}")
                    active.add(id(op))
                    stack.append((op, 0))
                else:
                    stack.pop()
                    active.discard(id(inst))
                    done.add(id(inst))
                    order.append(inst)
        self.instructions = order

    def to_text(self, entry: bool = False) -> str:
        from ember.compiler.printer import computation_to_text
        return computation_to_text(self, entry)

    def __repr__(self) -> str:
        return f"Computation({self.name}, {len(self.instructions)} instructions)"


class Module:
    """Computations; ``entry`` is the one that runs. Instruction names are unique in the module.

    ``computations`` lists every computation, callees before their callers, the entry last.
    """

    def __init__(self, name: str):
        self.name = name
        self.computations: list[Computation] = []
        self._ids = itertools.count(1)

    @property
    def entry(self) -> Computation:
        return self.computations[-1]

    def new_name(self, prefix: str) -> str:
        return f"{prefix}.{next(self._ids)}"

    def note_name(self, name: str) -> None:
        """Keeps later generated names from colliding with a parsed ``name`` (``x.N``)."""
        _, _, suffix = name.rpartition(".")
        if suffix.isdigit():
            current = next(self._ids)
            self._ids = itertools.count(max(current, int(suffix) + 1))

    def add_computation(self, comp: Computation, entry: bool = False) -> Computation:
        """Registers ``comp``: as the entry (last), or before the entry when there is one."""
        if entry or not self.computations or not self._entry_set:
            self.computations.append(comp)
        else:
            self.computations.insert(len(self.computations) - 1, comp)
        if entry:
            self._entry_set = True
        return comp

    _entry_set = False

    def computation(self, name: str) -> Computation:
        for c in self.computations:
            if c.name == name:
                return c
        raise KeyError(name)

    def reachable_computations(self, opcodes: frozenset[str] | None = None
                               ) -> list[Computation]:
        """The entry and what it calls, transitively, callees first; only through
        instructions whose opcode is in ``opcodes`` when given."""
        found: list[Computation] = []
        stack = [self.entry]
        while stack:
            comp = stack.pop()
            if any(c is comp for c in found):
                continue
            found.append(comp)
            for inst in comp.instructions:
                if opcodes is None or inst.opcode in opcodes:
                    stack.extend(inst.calls)
        return found[::-1]

    def remove_unreachable_computations(self) -> bool:
        reachable = self.reachable_computations()
        before = len(self.computations)
        self.computations = [c for c in self.computations if any(c is r for r in reachable)]
        return len(self.computations) != before

    def instruction_count(self) -> int:
        """Instructions in the module, fused computations included."""
        return sum(len(c.instructions) for c in self.computations)

    def to_text(self) -> str:
        from ember.compiler.printer import module_to_text
        return module_to_text(self)

    def clone(self) -> Module:
        """A deep copy (new instruction objects, same names)."""
        from ember.compiler.parser import parse_module
        return parse_module(self.to_text())

    def __str__(self) -> str:
        return self.to_text()


# --------------------------------------------------------------------------- building


class Builder:
    """Creates the instructions of one computation, inferring each result shape.

    Example:
        >>> m = Module("m")
        >>> b = Builder(m, "main")
        >>> x = b.parameter(0, Shape(np.float32, (3,)))
        >>> y = b.op("add", x, x)
        >>> comp = b.build(y, entry=True)
    """

    def __init__(self, module: Module, name: str):
        self.module = module
        self.name = name
        self.instructions: list[Instruction] = []

    def _add(self, inst: Instruction) -> Instruction:
        self.instructions.append(inst)
        return inst

    def parameter(self, index: int, shape: Shape, name: str | None = None) -> Instruction:
        name = name or self.module.new_name(f"Arg_{index}")
        return self._add(Instruction("parameter", [], shape, {"index": int(index)}, (), name))

    def constant(self, value: Any, dtype: Any = None) -> Instruction:
        """A constant holding ``value`` (converted to ``dtype`` when given)."""
        arr = np.array(value, dtype=dtype)
        arr.flags.writeable = False
        shape = Shape(arr.dtype, arr.shape)
        return self._add(Instruction("constant", [], shape, {"value": arr}, (),
                                     self.module.new_name("constant")))

    def op(self, opcode: str, *operands: Instruction, shape: Shape | None = None,
           calls: Sequence[Computation] = (), **attrs: Any) -> Instruction:
        """Adds ``opcode(operands)``; the shape is inferred (and checked against ``shape``).

        Optional attributes left out get their defaults stored explicitly (see
        ``shape_inference.with_default_attrs``), so the printed text shows them.
        """
        from ember.compiler.shape_inference import infer_shape, with_default_attrs
        attrs = {k: normalize_attr(v) for k, v in attrs.items()}
        attrs = with_default_attrs(opcode, [o.shape for o in operands], attrs)
        inferred = infer_shape(opcode, [o.shape for o in operands], attrs, list(calls), shape)
        if shape is not None and inferred != shape:
            raise ValueError(f"{opcode}: given shape {shape} differs from the inferred "
                             f"{inferred}")
        return self._add(Instruction(opcode, operands, inferred, attrs, calls,
                                     self.module.new_name(opcode)))

    def build(self, root: Instruction, entry: bool = False) -> Computation:
        """The computation of the instructions added so far, registered in the module."""
        comp = Computation(self.name, self.instructions, root)
        comp.sort_topologically()
        return self.module.add_computation(comp, entry)


def normalize_attr(value: Any) -> Any:
    """An attribute value in canonical form: lists become tuples, NumPy scalars Python ones.

    Example:
        >>> normalize_attr([np.int64(1), [2, 3]])
        (1, (2, 3))
    """
    if isinstance(value, (list, tuple)):
        return tuple(normalize_attr(v) for v in value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def scalar_shape(dtype: Any) -> Shape:
    return Shape(dtype, ())
