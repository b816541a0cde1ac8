"""The HLO verifier: structural and type invariants every pass must preserve.

``verify_module(module)`` checks that
- computation names and instruction names are unique across the module and printable;
- every opcode is known and every attribute is a plain value (a constant's an ndarray);
- every operand is defined earlier in the same computation, and the root belongs to it;
- parameters are numbered 0..n-1 without gaps or repeats;
- every instruction's shape is the one shape inference gives for its operands and attributes;
- called computations belong to the module and come before their callers.

It raises ``HloVerifierError`` (a ``ValueError``) naming the computation and the instruction.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ember.compiler.hlo import OPCODES, Computation, Instruction, Module, Shape
from ember.compiler.shape_inference import infer_shape

_NAME = re.compile(r"\S(?:.*\S)?")


class HloVerifierError(ValueError):
    """An HLO module breaks an invariant; the message names where."""


def verify_module(module: Module) -> None:
    """Checks the invariants of ``module``; raises ``HloVerifierError`` on the first broken.

    Example:
        >>> from ember.compiler.hlo import Builder, Module, Shape
        >>> m = Module("m")
        >>> b = Builder(m, "main")
        >>> x = b.parameter(0, Shape(np.float32, (3,)))
        >>> _ = b.build(b.op("negate", x), entry=True)
        >>> verify_module(m)
    """
    if not module.computations:
        raise HloVerifierError(f"module {module.name}: no computations")
    comp_names: set[str] = set()
    inst_names: dict[str, str] = {}
    earlier: set[int] = set()
    for comp in module.computations:
        if comp.name in comp_names:
            raise HloVerifierError(f"module {module.name}: computation name %{comp.name} is "
                                   f"used twice")
        _check_name(comp.name, f"computation %{comp.name}")
        comp_names.add(comp.name)
        verify_computation(comp, earlier, inst_names)
        earlier.add(id(comp))


def verify_computation(comp: Computation, earlier: set[int] | None = None,
                       names: dict[str, str] | None = None) -> None:
    """Checks one computation; ``earlier`` holds the ids of the computations it may call
    (None: any), ``names`` the instruction names seen so far (name -> computation)."""
    names = {} if names is None else names
    defined: set[int] = set()
    for inst in comp.instructions:
        where = f"computation %{comp.name}, instruction %{inst.name}"
        if id(inst) in defined:
            raise HloVerifierError(f"{where}: listed twice")
        _check_name(inst.name, where)
        if inst.name in names:
            raise HloVerifierError(f"{where}: the name is also used in computation "
                                   f"%{names[inst.name]}")
        names[inst.name] = comp.name
        _verify_instruction(inst, where, defined, earlier)
        defined.add(id(inst))
    if id(comp.root) not in defined:
        raise HloVerifierError(f"computation %{comp.name}: the root %{comp.root.name} is not "
                               f"one of its instructions")
    indices = sorted(p.attrs.get("index", -1) for p in comp.instructions
                     if p.opcode == "parameter")
    if indices != list(range(len(indices))):
        raise HloVerifierError(f"computation %{comp.name}: parameters must be numbered "
                               f"0..{len(indices) - 1}, got {indices}")


def _verify_instruction(inst: Instruction, where: str, defined: set[int],
                        earlier: set[int] | None) -> None:
    if inst.opcode not in OPCODES:
        raise HloVerifierError(f"{where}: unknown opcode {inst.opcode!r}")
    if not isinstance(inst.shape, Shape):
        raise HloVerifierError(f"{where}: shape {inst.shape!r} is not a Shape")
    for i, op in enumerate(inst.operands):
        if id(op) not in defined:
            raise HloVerifierError(f"{where}: operand {i} (%{op.name}) is not defined earlier "
                                   f"in this computation")
    for c in inst.calls:
        if earlier is not None and id(c) not in earlier:
            raise HloVerifierError(f"{where}: called computation %{c.name} is not in the "
                                   f"module before this computation")
    for key, value in inst.attrs.items():
        if not (inst.opcode == "constant" and key == "value") and not _plain(value):
            raise HloVerifierError(f"{where}: attribute {key}={value!r} is not a plain value "
                                   f"(int, float, bool, str, None or a tuple of them)")
    try:
        inferred = infer_shape(inst.opcode, [op.shape for op in inst.operands], inst.attrs,
                               list(inst.calls), inst.shape)
    except (ValueError, TypeError) as e:
        raise HloVerifierError(f"{where}: {e}") from None
    if inferred != inst.shape:
        raise HloVerifierError(f"{where}: shape {inst.shape} differs from the inferred "
                               f"{inferred}")


def _plain(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return not isinstance(value, np.generic)
    if isinstance(value, tuple):
        return all(_plain(v) for v in value)
    return False


def _check_name(name: Any, where: str) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or "\n" in name:
        raise HloVerifierError(f"{where}: bad name {name!r}")
