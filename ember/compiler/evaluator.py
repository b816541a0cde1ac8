"""A NumPy evaluator of HLO: the semantics of every opcode, used by the interpreter backend
(``ember.backends.interpreter``) and by constant folding.

Opcode rules are registered with ``@eval_rule("opcode")`` and called as
``rule(inst, *operand_values)`` where the values are ndarrays (tuples for tuple-shaped
operands); a rule returns an ndarray of exactly ``inst.shape`` (or a tuple of them). The rules
live by family: ``eval_elementwise.py`` (elementwise, reduce, dot_general),
``eval_structural.py`` (shape ops, slicing, gather/scatter, sort) and ``reduce_window.py``;
control flow and the structural ops (tuple, call, while, case, fusion, custom_call) are here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ember.compiler.hlo import Computation, Instruction

_EVAL_RULES: dict[str, Callable] = {}

# custom_call targets: name -> fn(*operand_values, **attrs) -> value(s).
CUSTOM_CALL_TARGETS: dict[str, Callable] = {}
# ... and, for some, a leaner function of the same arguments for compiled programs, whose
# operands are known to have the instruction's shapes and dtypes (no checks): name -> fn.
COMPILED_CUSTOM_CALL_TARGETS: dict[str, Callable] = {}


def eval_rule(*opcodes: str):
    def register(fn: Callable) -> Callable:
        for op in opcodes:
            _EVAL_RULES[op] = fn
        return fn
    return register


def register_custom_call_target(name: str, fn: Callable,
                                compiled: Callable | None = None) -> None:
    """Makes ``custom_call`` with ``call_target_name=name`` run ``fn`` (library routines);
    ``compiled``, if given, runs it in compiled programs (``CustomCall``)."""
    CUSTOM_CALL_TARGETS[name] = fn
    if compiled is not None:
        COMPILED_CUSTOM_CALL_TARGETS[name] = compiled


class CustomCall:
    """A custom call with its target and attributes looked up once: ``run(operands)``
    computes what ``evaluate_instruction`` does; ``compiled``: with the target's
    ``compiled`` function where it has one (a compiled program's library step)."""

    __slots__ = ("fn", "attrs")

    def __init__(self, inst: Instruction, compiled: bool = True):
        name = inst.attrs["call_target_name"]
        fn = COMPILED_CUSTOM_CALL_TARGETS.get(name) if compiled else None
        fn = fn or CUSTOM_CALL_TARGETS.get(name)
        if fn is None:
            raise NotImplementedError(f"custom_call: unknown target {name!r}")
        self.fn = fn
        self.attrs = {k: v for k, v in inst.attrs.items() if k != "call_target_name"}

    def run(self, operands: Sequence[Any]) -> Any:
        return self.fn(*operands, **self.attrs)


def _load_rule_modules() -> None:
    # The rule families register themselves on import.
    from ember.compiler import eval_elementwise, eval_structural, reduce_window  # noqa: F401


def evaluate_instruction(inst: Instruction, operands: Sequence[Any]) -> Any:
    rule = _EVAL_RULES.get(inst.opcode)
    if rule is None:
        _load_rule_modules()
        rule = _EVAL_RULES.get(inst.opcode)
        if rule is None:
            raise NotImplementedError(f"HLO evaluator: no rule for opcode {inst.opcode!r}")
    return rule(inst, *operands)


def evaluate_computation(comp: Computation, args: Sequence[Any]) -> Any:
    """Runs ``comp`` on ``args`` (one value per parameter) and returns the root's value.

    Values are dropped once their last user has run, so memory stays bounded by what is live.
    """
    return Plan(comp).run(args)


class Plan:
    """A computation prepared for repeated evaluation (the interpreter backend's executable).

    Rules, operand slots and the point where each value dies are worked out once, and called
    computations of ``call``/``fusion`` get plans of their own, so a run is a tight loop.
    The computation must not change after the plan is made.

    Example:
        >>> plan = Plan(module.entry)
        >>> out = plan.run([np.ones(3, np.float32)])
    """

    __slots__ = ("name", "n_params", "param_slots", "steps", "root_slot", "n_slots")

    def __init__(self, comp: Computation):
        _load_rule_modules()
        self.name = comp.name
        slot = {id(inst): i for i, inst in enumerate(comp.instructions)}
        params = comp.parameters
        self.n_params = len(params)
        self.param_slots = [slot[id(p)] for p in params]
        self.n_slots = len(comp.instructions)
        self.root_slot = slot[id(comp.root)]
        last_use: dict[int, int] = {}
        for pos, inst in enumerate(comp.instructions):
            for op in inst.operands:
                last_use[slot[id(op)]] = pos
        steps = []
        for pos, inst in enumerate(comp.instructions):
            if inst.opcode == "parameter":
                continue
            operand_slots = tuple(slot[id(op)] for op in inst.operands)
            dead = tuple(s for s in set(operand_slots)
                         if last_use[s] == pos and s != self.root_slot)
            steps.append((self._runner(inst), operand_slots, slot[id(inst)], dead))
        self.steps = steps

    @staticmethod
    def _runner(inst: Instruction) -> Callable:
        if inst.opcode in ("call", "fusion"):
            sub = Plan(inst.calls[0])
            return lambda *values: sub.run(values)
        rule = _EVAL_RULES.get(inst.opcode)
        if rule is None:
            raise NotImplementedError(f"HLO evaluator: no rule for opcode {inst.opcode!r}")
        return lambda *values: rule(inst, *values)

    def run(self, args: Sequence[Any]) -> Any:
        if len(args) != self.n_params:
            raise ValueError(f"{self.name}: expected {self.n_params} arguments, got {len(args)}")
        env: list[Any] = [None] * self.n_slots
        for s, a in zip(self.param_slots, args):
            env[s] = a
        for run, operand_slots, out_slot, dead in self.steps:
            env[out_slot] = run(*[env[s] for s in operand_slots])
            for s in dead:
                env[s] = None
        return env[self.root_slot]


# --------------------------------------------------------------------------- structural ops


@eval_rule("constant")
def _constant(inst):
    return inst.attrs["value"]


@eval_rule("tuple")
def _tuple(inst, *values):
    return tuple(values)


@eval_rule("get_tuple_element")
def _get_tuple_element(inst, value):
    return value[inst.attrs["index"]]


@eval_rule("call", "fusion")
def _call(inst, *values):
    return evaluate_computation(inst.calls[0], values)


@eval_rule("while")
def _while(inst, *values):
    cond, body = inst.calls
    state = tuple(values)
    while bool(evaluate_computation(cond, state)):
        out = evaluate_computation(body, state)
        state = tuple(out) if isinstance(out, tuple) else (out,)
    return state if inst.shape.is_tuple else state[0]


@eval_rule("case")
def _case(inst, index, *values):
    branches = inst.calls
    i = int(index)
    if not 0 <= i < len(branches):  # StableHLO: out-of-range indices run the last branch
        i = len(branches) - 1
    return evaluate_computation(branches[i], values)


@eval_rule("custom_call")
def _custom_call(inst, *values):
    return CustomCall(inst, compiled=False).run(values)
