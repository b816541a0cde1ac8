"""Lowering: a closed jaxpr becomes an HLO module, one primitive at a time.

Each primitive carries its lowering rule (``prim.def_lowering``, written beside the primitive
in ``ember/lax``). A rule is called as ``rule(ctx, *operands, **params)`` with the operands'
HLO instructions and returns one instruction (or a list, for primitives with several
results). ``ctx`` is a ``LoweringContext``: ``ctx.b`` is the builder of the current
computation, ``ctx.avals_in``/``ctx.avals_out`` the equation's abstract values, and
``ctx.lower_jaxpr`` inlines a sub-jaxpr (used by ``pjit``).

The entry computation takes one parameter per jaxpr input, then one per hoisted constant
(captured arrays larger than ``INLINE_CONST_LIMIT`` elements are passed as arguments instead
of being embedded), and returns a tuple of the jaxpr's outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ember.compiler.hlo import Builder, Instruction, Module, Shape

INLINE_CONST_LIMIT = 1024


def is_hoisted(aval: Any) -> bool:
    """Whether the entry computation takes a captured constant of this type as a parameter."""
    return aval.size > INLINE_CONST_LIMIT


def hoisted_constants(closed: Any) -> list[np.ndarray]:
    """The captured constants the entry computation takes as parameters, in their order."""
    return [np.asarray(c, dtype=v.aval.dtype) for v, c in zip(closed.jaxpr.constvars,
                                                              closed.consts)
            if is_hoisted(v.aval)]


def shape_of(aval: Any) -> Shape:
    """The HLO shape of an abstract value (weak types do not exist in HLO)."""
    return Shape(aval.dtype, aval.shape)


class LoweringError(NotImplementedError):
    pass


class LoweringContext:
    """What a lowering rule sees: the builder and the equation's abstract values."""

    __slots__ = ("b", "module", "avals_in", "avals_out", "primitive")

    def __init__(self, b: Builder, avals_in: Sequence[Any], avals_out: Sequence[Any],
                 primitive: Any = None):
        self.b = b
        self.module = b.module
        self.avals_in = list(avals_in)
        self.avals_out = list(avals_out)
        self.primitive = primitive

    @property
    def aval_out(self) -> Any:
        return self.avals_out[0]

    def constant(self, value: Any, dtype: Any) -> Instruction:
        """A scalar or array constant of ``dtype`` in the current computation."""
        return self.b.constant(np.asarray(value, dtype=dtype))

    def new_builder(self, name: str) -> Builder:
        """A builder for a sub-computation (a reduce body, a comparator, a loop body...)."""
        return Builder(self.module, self.module.new_name(name))

    def lower_jaxpr(self, jaxpr: Any, consts: Sequence[Instruction],
                    args: Sequence[Instruction]) -> list[Instruction]:
        """Inlines ``jaxpr`` into the current computation; returns its outputs."""
        return lower_jaxpr_body(self.b, jaxpr, consts, args)


def _literal_or_const(b: Builder, value: Any, aval: Any) -> Instruction:
    return b.constant(np.asarray(value, dtype=aval.dtype))


def lower_jaxpr_body(b: Builder, jaxpr: Any, consts: Sequence[Instruction],
                     args: Sequence[Instruction]) -> list[Instruction]:
    """Emits the equations of ``jaxpr`` into ``b``; consts/args bind its constvars/invars."""
    from ember.jaxpr import Literal

    if len(consts) != len(jaxpr.constvars) or len(args) != len(jaxpr.invars):
        raise ValueError("lower_jaxpr: wrong number of constants or arguments")
    env: dict[int, Instruction] = {}
    for v, x in zip(jaxpr.constvars, consts):
        env[v.id] = x
    for v, x in zip(jaxpr.invars, args):
        env[v.id] = x

    def read(atom) -> Instruction:
        if isinstance(atom, Literal):
            return _literal_or_const(b, atom.val, atom.aval)
        return env[atom.id]

    for eqn in jaxpr.eqns:
        prim = eqn.primitive
        rule = prim.lowering
        if rule is None:
            raise LoweringError(f"jit: the primitive {prim.name!r} has no lowering rule yet")
        ctx = LoweringContext(b, [a.aval for a in eqn.invars], [v.aval for v in eqn.outvars],
                              prim)
        out = rule(ctx, *[read(a) for a in eqn.invars], **eqn.params)
        outs = list(out) if prim.multiple_results else [out]
        if len(outs) != len(eqn.outvars):
            raise LoweringError(f"lowering of {prim.name} gave {len(outs)} results, "
                                f"expected {len(eqn.outvars)}")
        for v, inst in zip(eqn.outvars, outs):
            expected = shape_of(v.aval)
            if inst.shape != expected:
                raise LoweringError(f"lowering of {prim.name} produced {inst.shape}, the "
                                    f"jaxpr says {expected}")
            env[v.id] = inst
    return [read(a) for a in jaxpr.outvars]


class LoweredModule:
    """An HLO module and how to call it: which captured constants are passed as arguments."""

    __slots__ = ("module", "hoisted_consts", "in_avals", "out_avals")

    def __init__(self, module: Module, hoisted_consts: list[Any], in_avals: list[Any],
                 out_avals: list[Any]):
        self.module = module
        self.hoisted_consts = hoisted_consts
        self.in_avals = in_avals
        self.out_avals = out_avals


def lower_closed_jaxpr(closed: Any, name: str = "main") -> LoweredModule:
    """Lowers a closed jaxpr to a module whose entry returns a tuple of the outputs."""
    jaxpr = closed.jaxpr
    module = Module(name)
    b = Builder(module, "main")
    args = [b.parameter(i, shape_of(v.aval)) for i, v in enumerate(jaxpr.invars)]
    consts: list[Instruction] = []
    hoisted: list[Any] = []
    for v, value in zip(jaxpr.constvars, closed.consts):
        if not is_hoisted(v.aval):
            consts.append(b.constant(np.asarray(value, dtype=v.aval.dtype)))
        else:
            consts.append(b.parameter(len(args) + len(hoisted), shape_of(v.aval)))
            hoisted.append(value)
    outs = lower_jaxpr_body(b, jaxpr, consts, args)
    root = b.op("tuple", *outs)
    b.build(root, entry=True)
    return LoweredModule(module, hoisted, [v.aval for v in jaxpr.invars],
                         [a.aval for a in jaxpr.outvars])
