"""Common subexpression elimination.

Two instructions of a computation are merged when they have the same opcode, the same
operands (by identity; in either order for commutative ops), the same shape, equal attributes
(constant values compared by dtype, dims and bytes, so ``0.0`` and ``-0.0`` stay apart) and
call the same computations. Structurally identical called computations (the many ``add``
reduce bodies lowering creates) are merged first, so the instructions calling them can merge.
Parameters and instructions with side effects (see ``dce.has_side_effect``) are never merged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.compiler.hlo import Computation, Instruction, Module
from ember.compiler.passes import Replacement, hlo_pass, rewrite_computation
from ember.compiler.passes.dce import effectful_computations, has_side_effect

# a op b == b op a bit for bit (IEEE addition and multiplication are commutative).
COMMUTATIVE = frozenset({"add", "multiply", "maximum", "minimum", "and", "or", "xor"})


def freeze(value: Any) -> Any:
    """A hashable key for an attribute value: equal keys mean interchangeable values."""
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.name, value.shape, value.tobytes())
    if isinstance(value, np.generic):
        return ("scalar", value.dtype.name, value.tobytes())
    if isinstance(value, (tuple, list)):
        return ("tuple", tuple(freeze(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, freeze(v)) for k, v in value.items())))
    if isinstance(value, float):
        return ("float", value.hex())  # keeps -0.0 apart from 0.0 and matches NaN with NaN
    if isinstance(value, np.dtype):
        return ("dtype", value.name)
    return (type(value).__name__, value)


def _operand_key(inst: Instruction, ids: dict[int, int]) -> tuple:
    key = tuple(ids[id(op)] for op in inst.operands)
    return tuple(sorted(key)) if inst.opcode in COMMUTATIVE else key


def _instruction_key(inst: Instruction, ids: dict[int, int],
                     comp_ids: dict[int, int]) -> tuple:
    """What identifies ``inst`` given numbers for its operands and called computations."""
    attrs = tuple(sorted((k, freeze(v)) for k, v in inst.attrs.items()))
    calls = tuple(comp_ids.get(id(c), id(c)) for c in inst.calls)
    return (inst.opcode, _operand_key(inst, ids), inst.shape, attrs, calls)


def _mergeable(inst: Instruction, effectful: frozenset[int]) -> bool:
    return inst.opcode != "parameter" and not has_side_effect(inst, effectful)


# --------------------------------------------------------------------------- computations


def _computation_key(comp: Computation, comp_ids: dict[int, int],
                     effectful: frozenset[int], order: list | None = None) -> tuple | None:
    """A structural fingerprint of ``comp`` (names ignored) with its instructions taken in
    ``order`` (default: as listed); None if it has side effects."""
    if id(comp) in effectful:
        return None
    ids: dict[int, int] = {}
    keys = []
    for n, inst in enumerate(comp.instructions if order is None else order):
        ids[id(inst)] = n
        keys.append(_instruction_key(inst, ids, comp_ids))
    return (tuple(keys), ids[id(comp.root)])


def computation_fingerprint(comp: Computation, memo: dict | None = None) -> tuple:
    """A structural fingerprint of ``comp`` and the computations it calls (names and the
    order instructions are listed in ignored, constants by value): equal fingerprints
    compute the same thing from the same parameter shapes. ``memo`` may be shared between
    calls: it maps the id of each computation seen to (the computation, its fingerprint),
    holding the computation so that its id is not reused while the memo lives (a
    temporary computation's id, reused by the next one, gave that one the first's
    fingerprint: a kernel of the wrong scatter)."""
    memo = {} if memo is None else memo
    seen = memo.get(id(comp))
    if seen is not None and seen[0] is comp:
        return seen[1]
    callees = {id(c): computation_fingerprint(c, memo)
               for inst in comp.instructions for c in inst.calls}
    key = _computation_key(comp, callees, frozenset(), _canonical_order(comp))
    memo[id(comp)] = (comp, key)
    return key


def _canonical_order(comp: Computation) -> list[Instruction]:
    """``comp``'s instructions in the post-order of a walk from its root through operands in
    order, then the parameters it does not reach by number: the same for any listing."""
    order: list[Instruction] = []
    seen: set[int] = set()
    stack = [(comp.root, False)]
    while stack:
        inst, expanded = stack.pop()
        if expanded:
            order.append(inst)
            continue
        if id(inst) in seen:
            continue
        seen.add(id(inst))
        stack.append((inst, True))
        stack.extend((op, False) for op in reversed(inst.operands) if id(op) not in seen)
    rest = [i for i in comp.instructions if id(i) not in seen]
    return order + sorted(rest, key=lambda i: (i.opcode != "parameter",
                                               i.attrs.get("index", 0)))


def merge_identical_computations(module: Module) -> bool:
    """Makes callers of structurally identical computations call one of them."""
    effectful = effectful_computations(module)
    canonical: dict[tuple, Computation] = {}
    comp_ids: dict[int, int] = {}  # id(computation) -> number of its canonical computation
    replacement: dict[int, Computation] = {}
    for n, comp in enumerate(module.computations):
        if comp is module.entry:
            break
        key = _computation_key(comp, comp_ids, effectful)
        if key is None:
            comp_ids[id(comp)] = n
            continue
        first = canonical.setdefault(key, comp)
        comp_ids[id(comp)] = comp_ids.get(id(first), n)
        if first is not comp:
            replacement[id(comp)] = first
    changed = False
    for comp in module.computations:
        for inst in comp.instructions:
            if any(id(c) in replacement for c in inst.calls):
                inst.calls = [replacement.get(id(c), c) for c in inst.calls]
                changed = True
    if changed:
        module.remove_unreachable_computations()
    return changed


# --------------------------------------------------------------------------- instructions


def cse_computation(comp: Computation, effectful: frozenset[int] = frozenset()) -> bool:
    """Merges the identical instructions of ``comp``; returns whether any were merged."""
    seen: dict[tuple, Instruction] = {}
    ids: dict[int, int] = {}

    def merge(inst: Instruction) -> Replacement:
        ids[id(inst)] = len(ids)
        if _mergeable(inst, effectful):
            first = seen.setdefault(_instruction_key(inst, ids, {}), inst)
            if first is not inst:
                return (), first
        return None

    return rewrite_computation(comp, merge)


@hlo_pass("cse")
def cse(module: Module) -> bool:
    """Merges identical computations, then identical instructions in every computation.

    Example:
        >>> import numpy as np
        >>> from ember.compiler.hlo import Builder, Module, Shape
        >>> m = Module("m")
        >>> b = Builder(m, "main")
        >>> x = b.parameter(0, Shape(np.float32, (3,)))
        >>> _ = b.build(b.op("multiply", b.op("exponential", x), b.op("exponential", x)),
        ...             entry=True)
        >>> cse(m), [i.opcode for i in m.entry.instructions]
        (True, ['parameter', 'exponential', 'multiply'])
    """
    changed = merge_identical_computations(module)
    effectful = effectful_computations(module)
    for comp in module.computations:
        changed |= cse_computation(comp, effectful)
    return changed
