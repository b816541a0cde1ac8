"""Cost analysis of an HLO module: flops, transcendentals and bytes accessed (JAX's keys).

Counting rules (per instruction of the entry computation):

- elementwise op: one flop per result element; the transcendental ones (exp, log, tanh,
  sin, pow, sqrt, erf, ... : ``TRANSCENDENTAL``) count one *transcendental* per element
  instead;
- ``dot_general``: ``2 * M * N * K`` with the batch dimensions included, i.e. two flops per
  result element per contracted element;
- ``reduce``: one application of its body per input element, each costing the flops of the
  body (one for a sum or a max); ``reduce_window``: one application per window element of
  every output position (padding included);
- ``sort``: ``n * ceil(log2(d))`` comparator applications for n elements sorted along a
  dimension of size d; ``scatter``: one application of its update body per update element;
- data movement (broadcast, reshape, transpose, slice, gather, ...) costs no flops;
- ``fusion``: the flops of its fused computation;
- ``call``, ``while`` (one trip: the trip count is not known here) and ``case`` (its most
  expensive branch) cost what their computations cost.

``bytes accessed`` is, for every top-level instruction, the bytes of its operands plus the
bytes of its result; a fusion counts only its own operands and result (intermediates stay in
registers, which is the point of fusion); parameters, constants, ``tuple`` and
``get_tuple_element`` cost nothing; control-flow ops count what their computations access.

Example:
    >>> from ember.compiler.hlo import Builder, Module, Shape
    >>> m = Module("m")
    >>> b = Builder(m, "main")
    >>> x = b.parameter(0, Shape("float32", (100,)))
    >>> _ = b.build(b.op("exponential", b.op("add", x, x)), entry=True)
    >>> cost_analysis(m)
    {'flops': 100.0, 'transcendentals': 100.0, 'bytes accessed': 2000.0}
"""

from __future__ import annotations

import math

from ember.compiler.hlo import (
    CONTROL_FLOW,
    ELEMENTWISE,
    EXPENSIVE_ELEMENTWISE,
    Computation,
    Instruction,
    Module,
)

# Elementwise ops counted as transcendentals rather than flops.
TRANSCENDENTAL = EXPENSIVE_ELEMENTWISE - frozenset({"divide", "remainder", "next_after"})

_FREE = frozenset({"parameter", "constant", "tuple", "get_tuple_element"})


class _Cost:
    __slots__ = ("flops", "transcendentals", "bytes", "dot_flops")

    def __init__(self, flops: float = 0.0, transcendentals: float = 0.0, nbytes: float = 0.0):
        self.flops = flops
        self.transcendentals = transcendentals
        self.bytes = nbytes
        self.dot_flops = 0.0  # (the part of ``flops`` in top-level ``dot_general`` ops)

    def add(self, other: _Cost, times: float = 1.0) -> None:
        self.flops += other.flops * times
        self.transcendentals += other.transcendentals * times
        self.bytes += other.bytes * times
        self.dot_flops += other.dot_flops * times

    def as_dict(self, dot_flops: bool = False) -> dict[str, float]:
        out = {"flops": float(self.flops), "transcendentals": float(self.transcendentals),
               "bytes accessed": float(self.bytes)}
        if dot_flops:
            out["dot flops"] = float(self.dot_flops)
        return out


def _elements(inst: Instruction) -> int:
    return sum(s.size for s in inst.shape.leaves())


def _operand_elements(inst: Instruction, index: int) -> int:
    return sum(s.size for s in inst.operands[index].shape.leaves())


def _dot_flops(inst: Instruction) -> float:
    lhs = inst.operands[0].shape
    k = math.prod(lhs.dims[d] for d in inst.attrs.get("lhs_contracting_dimensions", ()))
    return 2.0 * inst.shape.size * k


def _compute_cost(comp: Computation, top_level: bool) -> _Cost:
    """Flops of ``comp``'s instructions; bytes too when it runs as top-level code."""
    total = _Cost()
    for inst in comp.instructions:
        total.add(_instruction_cost(inst, top_level))
    return total


def _region_flops(comp: Computation) -> _Cost:
    cost = _compute_cost(comp, top_level=False)
    return _Cost(cost.flops, cost.transcendentals)


def _instruction_cost(inst: Instruction, top_level: bool) -> _Cost:
    op = inst.opcode
    if op in _FREE:
        return _Cost()
    if op in CONTROL_FLOW:
        return _control_flow_cost(inst, top_level)
    cost = _Cost()
    if op in ELEMENTWISE:
        if op in TRANSCENDENTAL:
            cost.transcendentals = _elements(inst)
        else:
            cost.flops = _elements(inst)
    elif op == "dot_general":
        cost.flops = cost.dot_flops = _dot_flops(inst)
    elif op == "reduce":
        cost.add(_region_flops(inst.calls[0]), _operand_elements(inst, 0))
    elif op == "reduce_window":
        window = math.prod(inst.attrs["window_dimensions"])
        out = inst.shape.leaves()[0].size
        cost.add(_region_flops(inst.calls[0]), out * window)
    elif op == "sort":
        dim_size = inst.operands[0].shape.dims[inst.attrs.get("dimension", 0)]
        steps = math.ceil(math.log2(dim_size)) if dim_size > 1 else 0
        cost.add(_region_flops(inst.calls[0]), _operand_elements(inst, 0) * steps)
    elif op == "scatter":
        cost.add(_region_flops(inst.calls[0]), _operand_elements(inst, 2))
    elif op == "fusion":
        cost.add(_region_flops(inst.calls[0]))
    if top_level:
        cost.bytes = sum(o.shape.nbytes for o in inst.operands) + inst.shape.nbytes
    return cost


def _control_flow_cost(inst: Instruction, top_level: bool) -> _Cost:
    costs = [_compute_cost(c, top_level) for c in inst.calls]
    if inst.opcode == "case":
        return max(costs, key=lambda c: (c.flops + c.transcendentals, c.bytes), default=_Cost())
    total = _Cost()
    for c in costs:
        total.add(c)
    return total


def instruction_cost(inst: Instruction) -> dict[str, float]:
    """The cost of one top-level instruction, with the keys of ``cost_analysis``."""
    return _instruction_cost(inst, top_level=True).as_dict()


def cost_analysis(module: Module | Computation, dot_flops: bool = False
                  ) -> dict[str, float]:
    """Estimated cost of running ``module``'s entry computation (or a computation).

    Args:
        module: an HLO module (fused or not) or one computation.
        dot_flops: also give ``"dot flops"``, the part of the flops in ``dot_general`` ops
            (not fused ones), which BLAS runs at a rate of its own (``ember.runtime.
            dispatch.estimated_microseconds``).

    Returns:
        ``{"flops": ..., "transcendentals": ..., "bytes accessed": ...}`` as floats, like
        JAX's ``compiled.cost_analysis()``.
    """
    comp = module.entry if isinstance(module, Module) else module
    return _compute_cost(comp, top_level=True).as_dict(dot_flops)
