"""Optimization passes over HLO modules, one file per pass family.

A pass is a function ``fn(module) -> bool`` (True when it changed the module) registered
under its name with ``@hlo_pass("name")``; ``ember.compiler.pipeline`` runs them in order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ember.compiler.hlo import Computation, Instruction

PASSES: dict[str, Callable] = {}

# What a rewrite gives for one instruction: None to keep it, or the new instructions to emit
# (in order, possibly none) and the instruction that replaces it.
Replacement = tuple[Sequence[Instruction], Instruction] | None


def unique(objs: Iterable) -> list:
    """``objs`` without repeats (by identity), in first-seen order."""
    seen: set[int] = set()
    out = []
    for o in objs:
        if id(o) not in seen:
            seen.add(id(o))
            out.append(o)
    return out


def hlo_pass(name: str):
    """Registers ``fn`` as the pass called ``name``."""
    def register(fn: Callable) -> Callable:
        fn.pass_name = name
        PASSES[name] = fn
        return fn
    return register


def rewrite_computation(comp: Computation,
                        rewrite: Callable[[Instruction], Replacement]) -> bool:
    """Runs ``rewrite`` on every instruction of ``comp`` in order, replacing each one it
    rewrites; later instructions (and the root) see the replacements. Returns whether any
    instruction was replaced."""
    replaced: dict[int, Instruction] = {}
    out: list[Instruction] = []
    for inst in comp.instructions:
        if any(id(op) in replaced for op in inst.operands):
            inst.operands = [replaced.get(id(op), op) for op in inst.operands]
        replacement = rewrite(inst)
        if replacement is None:
            out.append(inst)
            continue
        emitted, result = replacement
        out.extend(emitted)
        replaced[id(inst)] = result
    if not replaced:
        return False
    comp.instructions = out
    comp.root = replaced.get(id(comp.root), comp.root)
    return True
