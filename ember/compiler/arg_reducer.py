"""Recognizes reducer bodies that compute an argmax or argmin.

A variadic ``reduce`` over ``(values, indices)`` whose body keeps the pair with the greater
(or smaller) value, NaN counting as the best of all, and on equal values the smaller index,
computes ``argmax`` (``argmin``): the first position of the extreme value, or of the first
NaN. Backends can compute that in two vectorizable passes (the extreme value, then the
first position holding it) instead of folding pairs one at a time.

``arg_reducer_kind(body)`` decides by the body's truth table. It accepts only bodies whose
outputs are parameters picked by ``select``s on predicates built from ``compare``s between
parameters of the same operand and boolean ops (``and``, ``or``, ``not``, ``xor``). Such a
body's result depends only on how its inputs compare (less, equal, greater, NaN or not), so
evaluating it on values ``{1, 2, NaN}`` and indices ``{0, 1}`` in every combination covers
every case, and the table either matches argmax's (argmin's) or the body is something else.
(Pred values take ``{False, True}``, which covers every case of theirs.)

Example:
    >>> arg_reducer_kind(body_of(jnp.argmax))
    'max'
"""

from __future__ import annotations

import itertools

import numpy as np

from ember import dtypes
from ember.compiler.hlo import Computation

_BOOLEAN = frozenset({"and", "or", "not", "xor"})
_VALUES = (1.0, 2.0, np.nan)
_INDICES = (0, 1)


def _shape_ok(body: Computation) -> bool:
    params = body.parameters
    if len(params) != 4 or [p.attrs["index"] for p in params] != [0, 1, 2, 3]:
        return False
    av, ai, bv, bi = params
    if av.shape != bv.shape or ai.shape != bi.shape or av.shape.is_tuple or \
            ai.shape.is_tuple or av.shape.dims != () or ai.shape.dims != ():
        return False
    vdt = np.dtype(av.shape.dtype)
    if not (vdt.kind in "fiub" or dtypes.is_float(vdt)) or \
            np.dtype(ai.shape.dtype).kind not in "iu":  # (bfloat16 is kind "V")
        return False
    operand_of = {id(av): 0, id(bv): 0, id(ai): 1, id(bi): 1}
    root = body.root
    if root.opcode != "tuple" or len(root.operands) != 2:
        return False
    for inst in body.instructions:
        op = inst.opcode
        if op in ("parameter", "tuple"):
            continue
        if op == "compare":
            sides = {operand_of.get(id(o)) for o in inst.operands}
            if len(sides) != 1 or None in sides:
                return False
        elif op in _BOOLEAN:
            if inst.shape.dtype != np.bool_ or any(o.shape.dtype != np.bool_
                                                   for o in inst.operands):
                return False
        elif op == "select":
            pred, x, y = inst.operands
            if pred.shape.dtype != np.bool_ or operand_of.get(id(x)) is None or \
                    operand_of.get(id(x)) != operand_of.get(id(y)):
                return False
        else:
            return False
    return all(o.opcode == "select" or o.opcode == "parameter" for o in root.operands)


def _wins(kind: str, a: float, ia: int, b: float, ib: int) -> bool | None:
    """Whether the pair ``(a, ia)`` wins over ``(b, ib)``; None when either may."""
    a_nan, b_nan = np.isnan(a), np.isnan(b)
    if a_nan or b_nan:
        if a_nan and b_nan:
            return None if ia == ib else ia < ib
        return a_nan
    if a != b:
        return a > b if kind == "max" else a < b
    return None if ia == ib else ia < ib


def arg_reducer_kind(body: Computation) -> str | None:
    """"max" or "min" when ``body`` reduces (value, index) pairs to the argmax or argmin
    (see the module doc), else None."""
    if not _shape_ok(body):
        return None
    from ember.compiler.evaluator import evaluate_computation
    vdt = np.dtype(body.parameters[0].shape.dtype)
    idt = np.dtype(body.parameters[1].shape.dtype)
    is_float = dtypes.is_float(vdt)
    values = _VALUES if is_float else (False, True) if vdt == np.bool_ else _VALUES[:2]
    cases = [(a, ia, b, ib) for a, b in itertools.product(values, repeat=2)
             for ia, ib in itertools.product(_INDICES, repeat=2)]
    a, ia, b, ib = (np.array(column, dt) for column, dt in zip(zip(*cases),
                                                              (vdt, idt, vdt, idt)))
    # (Only elementwise ops and selects: evaluated on all cases at once.)
    v, i = (np.broadcast_to(np.asarray(o), a.shape)
            for o in evaluate_computation(body, [a, ia, b, ib]))
    picked_a = ((v == a) | (np.isnan(v) & np.isnan(a)) if is_float else v == a) & (i == ia)
    picked_b = ((v == b) | (np.isnan(v) & np.isnan(b)) if is_float else v == b) & (i == ib)
    if not np.all(picked_a | picked_b):
        return None  # (a mix of the two pairs)
    table = [case + (bool(pa), bool(pb)) for case, pa, pb in zip(cases, picked_a, picked_b)]
    for kind in ("max", "min"):
        if all(w is None or (pa if w else pb) for a, ia, b, ib, pa, pb in table
               for w in [_wins(kind, a, ia, b, ib)]):
            return kind
    return None
