"""Constant folding: instructions whose operands are all constants become constants.

The value comes from the HLO evaluator (``ember.compiler.evaluator``), so folding has exactly
the semantics of the interpreter backend. A small broadcast of a constant counts as a
constant operand (it is materialized only to fold its user). Folding is bounded in size:
results with more than ``MAX_FOLD_ELEMENTS`` elements stay computed, a growing
``broadcast_in_dim`` is never folded (it costs nothing once fused, while a constant costs
memory), and other ops that make their result larger than their inputs (a ``pad``...) fold
only while tiny. For the same reason an elementwise op on broadcasts of scalar constants
folds to a broadcast of the scalar result: ``add(broadcast(2), broadcast(3))`` becomes
``broadcast(5)``.

Control flow, calls, fusions, custom calls, iotas and tuple-shaped results are never folded.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.compiler.evaluator import evaluate_instruction
from ember.compiler.hlo import ELEMENTWISE, Computation, Instruction, Module, Shape
from ember.compiler.passes import Replacement, hlo_pass, rewrite_computation

MAX_FOLD_ELEMENTS = 1024
# An op whose result has more elements than its operands together folds only up to this size.
MAX_GROWTH_ELEMENTS = 16

NEVER_FOLDED = frozenset({
    "parameter", "constant", "iota", "while", "case", "call", "fusion", "custom_call",
    "tuple", "get_tuple_element",
})


def make_constant(module: Module, value: Any, shape: Shape) -> Instruction:
    """A new constant instruction holding ``value`` with exactly ``shape``."""
    arr = np.asarray(value)
    if arr.dtype != shape.dtype:
        arr = arr.astype(shape.dtype)
    if arr.shape != shape.dims:
        arr = arr.reshape(shape.dims)
    arr = np.array(arr, copy=True)
    arr.flags.writeable = False
    return Instruction("constant", [], Shape(shape.dtype, shape.dims), {"value": arr}, (),
                       module.new_name("constant"))


def _constant_like(inst: Instruction) -> bool:
    """A constant, or a small broadcast of one (materialized only while folding its user)."""
    if inst.opcode == "broadcast_in_dim":
        return inst.operands[0].opcode == "constant" and inst.shape.size <= MAX_FOLD_ELEMENTS
    return inst.opcode == "constant"


def _operand_value(inst: Instruction) -> Any:
    if inst.opcode == "constant":
        return inst.attrs["value"]
    return evaluate_instruction(inst, [inst.operands[0].attrs["value"]])


def _foldable(inst: Instruction) -> bool:
    if inst.opcode in NEVER_FOLDED or inst.shape.is_tuple or not inst.operands:
        return False
    size = inst.shape.size
    if size > MAX_FOLD_ELEMENTS:
        return False
    if inst.opcode == "broadcast_in_dim":
        # Cheap, and fusion likes it: folded only when it does not grow (a reshape, really).
        return inst.operands[0].opcode == "constant" and size <= inst.operands[0].shape.size
    if not all(_constant_like(op) for op in inst.operands):
        return False
    grows = size > sum(op.shape.size for op in inst.operands)
    return not grows or size <= MAX_GROWTH_ELEMENTS


def _evaluate(inst: Instruction, values: list[Any]) -> Any:
    """The value of ``inst`` on ``values``, or None when the evaluator has no rule for it."""
    try:
        with np.errstate(all="ignore"):  # 1/0 folds to inf, as at run time, without a warning
            return evaluate_instruction(inst, values)
    except NotImplementedError:
        return None


def _fold(module: Module, inst: Instruction) -> list[Instruction] | None:
    """The instructions replacing ``inst`` (last one is its value), or None to keep it."""
    value = _evaluate(inst, [_operand_value(op) for op in inst.operands])
    if value is None:
        return None
    return [make_constant(module, value, inst.shape)]


def scalar_broadcast_value(inst: Instruction) -> np.ndarray | None:
    """The scalar of ``inst`` if it is a rank-0 constant or a broadcast of one."""
    if inst.opcode == "broadcast_in_dim":
        inst = inst.operands[0]
    if inst.opcode == "constant" and inst.shape.rank == 0:
        return inst.attrs["value"]
    return None


def _fold_scalar_broadcasts(module: Module, inst: Instruction) -> list[Instruction] | None:
    """``op(broadcast(a), broadcast(b))`` -> ``broadcast(op(a, b))`` for elementwise ``op``."""
    # Results of one element fold as plain constants (their broadcast operands fold first).
    if inst.opcode not in ELEMENTWISE or inst.shape.size <= 1 or not inst.operands:
        return None
    if not any(op.opcode == "broadcast_in_dim" for op in inst.operands):
        return None
    scalars = [scalar_broadcast_value(op) for op in inst.operands]
    if any(s is None for s in scalars):
        return None
    scalar_shape = Shape(inst.dtype, ())
    probe = Instruction(inst.opcode, [], scalar_shape, inst.attrs, inst.calls, inst.name)
    value = _evaluate(probe, scalars)
    if value is None:
        return None
    const = make_constant(module, value, scalar_shape)
    bcast = Instruction("broadcast_in_dim", [const], inst.shape, {"broadcast_dimensions": ()},
                        (), module.new_name("broadcast_in_dim"))
    return [const, bcast]


def fold_computation(module: Module, comp: Computation) -> bool:
    """Folds the constant instructions of ``comp``; returns whether any were folded."""
    def fold(inst: Instruction) -> Replacement:
        # Broadcasts of scalars stay broadcasts (cheap); other constant inputs fold fully.
        new = _fold_scalar_broadcasts(module, inst)
        if new is None and _foldable(inst):
            new = _fold(module, inst)
        return None if new is None else (new, new[-1])

    return rewrite_computation(comp, fold)


@hlo_pass("constant_folding")
def constant_folding(module: Module) -> bool:
    """Replaces instructions computable at compile time by constants, in every computation.

    Example:
        >>> import numpy as np
        >>> from ember.compiler.hlo import Builder, Module
        >>> m = Module("m")
        >>> b = Builder(m, "main")
        >>> _ = b.build(b.op("add", b.constant(np.float32(2)), b.constant(np.float32(3))),
        ...             entry=True)
        >>> constant_folding(m), m.entry.root.attrs["value"]
        (True, array(5., dtype=float32))
    """
    changed = False
    for comp in module.computations:
        changed |= fold_computation(module, comp)
    return changed
