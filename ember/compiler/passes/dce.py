"""Dead code elimination: drops instructions whose results nothing needs.

In each computation an instruction is live when the root depends on it, when it has a side
effect (a ``custom_call`` with attr ``has_side_effect=True``, or a ``while``/``call``/... whose
computations run one) or when it is an operand of a live one.
Parameters always stay (a computation keeps its signature). Computations no longer called
from the entry are removed afterwards.
"""

from __future__ import annotations

from ember.compiler.hlo import Computation, Instruction, Module
from ember.compiler.passes import hlo_pass


def has_side_effect(inst: Instruction, effectful: frozenset[int] = frozenset()) -> bool:
    """Whether ``inst`` must run even when its result is unused: a side-effecting
    ``custom_call``, or an instruction calling a computation in ``effectful`` (ids)."""
    if inst.opcode == "custom_call" and bool(inst.attrs.get("has_side_effect", False)):
        return True
    return any(id(c) in effectful for c in inst.calls)


def effectful_computations(module: Module) -> frozenset[int]:
    """The ids of the computations that run a side effect, directly or through a callee."""
    effectful: set[int] = set()
    for comp in module.computations:  # callees come before their callers
        if any(has_side_effect(i, frozenset(effectful)) for i in comp.instructions):
            effectful.add(id(comp))
    return frozenset(effectful)


def live_instructions(comp: Computation, effectful: frozenset[int] = frozenset()) -> set[int]:
    """The ids of the instructions of ``comp`` that must be kept."""
    live: set[int] = set()
    stack = [comp.root]
    stack.extend(i for i in comp.instructions
                 if i.opcode == "parameter" or has_side_effect(i, effectful))
    while stack:
        inst = stack.pop()
        if id(inst) in live:
            continue
        live.add(id(inst))
        stack.extend(op for op in inst.operands if id(op) not in live)
    return live


def dce_computation(comp: Computation, effectful: frozenset[int] = frozenset()) -> bool:
    """Removes the dead instructions of ``comp``; returns whether any were removed."""
    live = live_instructions(comp, effectful)
    kept = [i for i in comp.instructions if id(i) in live]
    if len(kept) == len(comp.instructions):
        return False
    comp.instructions = kept
    return True


@hlo_pass("dce")
def dce(module: Module) -> bool:
    """Removes dead instructions from every computation, then unreachable computations.

    Example:
        >>> import numpy as np
        >>> from ember.compiler.hlo import Builder, Module, Shape
        >>> m = Module("m")
        >>> b = Builder(m, "main")
        >>> x = b.parameter(0, Shape(np.float32, (3,)))
        >>> unused = b.op("negate", x)
        >>> _ = b.build(b.op("add", x, x), entry=True)
        >>> dce(m), len(m.entry.instructions)
        (True, 2)
    """
    changed = False
    effectful = effectful_computations(module)
    for comp in module.computations:
        changed |= dce_computation(comp, effectful)
    changed |= module.remove_unreachable_computations()
    return changed
