"""While-loop and case simplification: loop state nothing needs leaves the loop.

For every ``while`` (state = its operands; ``calls=[cond, body]``; the body's root a ``tuple``):

- **Zero trips**: when the condition reads only constant operands and is false for them, the
  loop never runs its body and its result is its operands (the condition is evaluated with
  the HLO evaluator; it must be small and free of side effects).
- **Loop-invariant elements** (the body returns its parameter ``k`` unchanged at index ``k``):
  the loop's users read operand ``k`` instead of ``get_tuple_element(while, k)``; when that
  operand is a constant (or a broadcast of one), the condition and body read a copy of it
  instead of their parameter ``k``.
- **Dead elements**: an element is live when a ``get_tuple_element`` after the loop reads it,
  when the condition reads it, when a body side effect depends on it, or when the body
  computes a live element from it (a fixed point). The others leave the state: the operand,
  the condition's and body's parameter and the body's root entry go, and the loop's
  ``get_tuple_element`` indices are renumbered (a scan's unused ``ys`` buffers, the
  forwarded consts and xs nothing reads).

A ``case`` with a constant index is replaced by a copy of the branch it
runs (StableHLO: an out-of-range index runs the last branch).

Side effects keep running: a loop whose condition has one is never evaluated at compile
time, body side effects keep the elements they read live, and an inlined branch keeps its
side-effecting ``custom_call``. A condition or body shared by several loops (``cse`` merges
identical computations) is copied before it is changed. A module without ``while`` or
``case`` is left at once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ember.compiler.evaluator import evaluate_instruction
from ember.compiler.hlo import Computation, Instruction, Module, Shape
from ember.compiler.passes import hlo_pass
from ember.compiler.passes.dce import dce_computation, effectful_computations, has_side_effect

# Conditions up to this size are evaluated at compile time (zero-trip loops).
MAX_CONDITION_INSTRUCTIONS = 64


@hlo_pass("while_loop_simplifier")
def while_loop_simplifier(module: Module) -> bool:
    """Removes dead and invariant loop state, zero-trip loops and constant-index cases.

    Example:
        >>> from ember.compiler.parser import parse_module
        >>> m = parse_module('''
        ... HloModule m
        ... %cond (i: s32[], a: f32[]) -> pred[] {
        ...   %i = s32[] parameter(0)
        ...   %a = f32[] parameter(1)
        ...   %n = s32[] constant(3)
        ...   ROOT %lt = pred[] compare(%i, %n), comparison_direction=LT
        ... }
        ... %body (i.1: s32[], a.1: f32[]) -> (s32[], f32[]) {
        ...   %i.1 = s32[] parameter(0)
        ...   %a.1 = f32[] parameter(1)
        ...   %one = s32[] constant(1)
        ...   %next = s32[] add(%i.1, %one)
        ...   %a.2 = f32[] exponential(%a.1)
        ...   ROOT %t = (s32[], f32[]) tuple(%next, %a.2)
        ... }
        ... ENTRY %main (x: f32[]) -> s32[] {
        ...   %x = f32[] parameter(0)
        ...   %zero = s32[] constant(0)
        ...   %w = (s32[], f32[]) while(%zero, %x), calls={%cond, %body}
        ...   ROOT %g = s32[] get_tuple_element(%w), index=0
        ... }''')
        >>> while_loop_simplifier(m), m.entry.instructions[2].shape.to_text()
        (True, '(s32[])')
    """
    comps = [c for c in module.computations
             if any(i.opcode in ("while", "case") for i in c.instructions)]
    if not comps:
        return False
    simplifier = _Simplifier(module)
    changed = False
    for comp in comps:
        changed |= simplifier.simplify_computation(comp)
    if changed:
        module.remove_unreachable_computations()
    return changed


def _rename(module: Module, name: str) -> str:
    prefix, dot, suffix = name.rpartition(".")
    return module.new_name(prefix if dot and suffix.isdigit() else name)


def _copy(module: Module, insts: Iterable[Instruction],
          mapping: dict[int, Instruction]) -> list[Instruction]:
    """Copies of ``insts`` (in order) with fresh names, operands mapped through ``mapping``
    (which the copies join); instructions already in ``mapping`` are not copied."""
    out = []
    for inst in insts:
        if id(inst) in mapping:
            continue
        new = Instruction(inst.opcode, [mapping[id(op)] for op in inst.operands], inst.shape,
                          dict(inst.attrs), inst.calls, _rename(module, inst.name))
        mapping[id(inst)] = new
        out.append(new)
    return out


def _reached(seeds: Iterable[Instruction], visited: set[int]) -> set[int]:
    """Marks what ``seeds`` depend on in ``visited``; returns the parameter indices newly
    reached."""
    params: set[int] = set()
    stack = list(seeds)
    while stack:
        inst = stack.pop()
        if id(inst) in visited:
            continue
        visited.add(id(inst))
        if inst.opcode == "parameter":
            params.add(inst.attrs["index"])
        stack.extend(inst.operands)
    return params


def _reads(comp: Computation, k: int, body: bool) -> bool:
    """Whether ``comp`` reads its parameter ``k`` (a body's root returning it at ``k`` aside)."""
    param = comp.parameters[k]
    for inst in comp.instructions:
        operands = inst.operands
        if body and inst is comp.root:
            operands = [op for j, op in enumerate(operands) if j != k]
        if any(op is param for op in operands):
            return True
    return comp.root is param


def _effects(comp: Computation, effectful: set[int]) -> list[Instruction]:
    """The instructions of ``comp`` with side effects (they run whether or not used)."""
    frozen = frozenset(effectful)
    return [i for i in comp.instructions if has_side_effect(i, frozen)]


def _sinkable(inst: Instruction) -> bool:
    """A value a loop's computations can compute themselves: a constant or its broadcast."""
    if inst.opcode == "broadcast_in_dim":
        inst = inst.operands[0]
    return inst.opcode == "constant"


class _Simplifier:
    def __init__(self, module: Module):
        self.module = module
        self.effectful = set(effectful_computations(module))
        self.callers = Counter(id(c) for comp in module.computations
                               for inst in comp.instructions for c in inst.calls)

    # ------------------------------------------------------------------ driver

    def simplify_computation(self, comp: Computation) -> bool:
        changed = self._inline_constant_cases(comp)
        for inst in [i for i in comp.instructions if i.opcode == "while"]:
            if self._never_runs(inst):
                self._replace_by_operands(comp, inst)
                changed = True
                continue
            changed |= self._forward_invariants(comp, inst)
            changed |= self._remove_dead_state(comp, inst)
        return changed

    def _users(self, comp: Computation, inst: Instruction) -> list[Instruction] | None:
        """The users of ``inst``, or None when one is not a ``get_tuple_element`` (or
        ``inst`` is the root): then every element of its result is needed."""
        if comp.root is inst:
            return None
        users = [u for u in comp.instructions if any(op is inst for op in u.operands)]
        if any(u.opcode != "get_tuple_element" for u in users):
            return None
        return users

    @staticmethod
    def _body_root(loop: Instruction) -> Instruction | None:
        root = loop.calls[1].root
        if root.opcode != "tuple" or len(root.operands) != len(loop.operands):
            return None
        return root

    def _exclusive(self, loop: Instruction, which: int) -> Computation:
        """``loop.calls[which]``, copied first when another instruction also calls it."""
        comp = loop.calls[which]
        if self.callers[id(comp)] <= 1:
            return comp
        mapping: dict[int, Instruction] = {}
        insts = _copy(self.module, comp.instructions, mapping)
        clone = Computation(_rename(self.module, comp.name), insts, mapping[id(comp.root)])
        self.module.computations.insert(self.module.computations.index(comp), clone)
        self.callers[id(comp)] -= 1
        self.callers[id(clone)] = 1
        if id(comp) in self.effectful:
            self.effectful.add(id(clone))
        loop.calls[which] = clone
        return clone

    # ------------------------------------------------------------------ case

    def _inline_constant_cases(self, comp: Computation) -> bool:
        out: list[Instruction] = []
        replaced = False
        for inst in comp.instructions:
            branch = self._constant_branch(inst)
            if branch is None:
                out.append(inst)
                continue
            mapping = {id(p): op for p, op in zip(branch.parameters, inst.operands[1:])}
            out.extend(_copy(self.module, branch.instructions, mapping))
            comp.replace_all_uses(inst, mapping[id(branch.root)])
            replaced = True
        if replaced:
            comp.instructions = out
        return replaced

    @staticmethod
    def _constant_branch(inst: Instruction) -> Computation | None:
        if inst.opcode != "case":
            return None
        branches = inst.calls
        index = inst.operands[0]
        if index.opcode != "constant":
            return None
        i = int(index.attrs["value"])
        return branches[i if 0 <= i < len(branches) else -1]

    # ------------------------------------------------------------------ while

    def _never_runs(self, loop: Instruction) -> bool:
        """Whether the condition is provably false on the loop's operands."""
        cond = loop.calls[0]
        if id(cond) in self.effectful or len(cond.instructions) > MAX_CONDITION_INSTRUCTIONS:
            return False
        reached: set[int] = set()
        params = _reached([cond.root], reached)
        if any(loop.operands[k].opcode != "constant" for k in params):
            return False
        values: dict[int, object] = {}
        for inst in cond.instructions:
            if id(inst) not in reached:
                continue
            if inst.opcode == "custom_call":
                return False
            if inst.opcode == "parameter":
                values[id(inst)] = loop.operands[inst.attrs["index"]].attrs["value"]
            else:
                values[id(inst)] = evaluate_instruction(
                    inst, [values[id(op)] for op in inst.operands])
        return not bool(values[id(cond.root)])

    def _replace_by_operands(self, comp: Computation, loop: Instruction) -> None:
        users = self._users(comp, loop)
        if users is not None:
            for g in users:
                self._forward(comp, g, loop.operands[g.attrs["index"]])
            comp.instructions = [i for i in comp.instructions if i is not loop]
            return
        state = Instruction("tuple", list(loop.operands), loop.shape, {}, (),
                            self.module.new_name("tuple"))
        comp.instructions[comp.instructions.index(loop)] = state
        comp.replace_all_uses(loop, state)

    @staticmethod
    def _forward(comp: Computation, gte: Instruction, value: Instruction) -> None:
        """Makes the users of ``gte`` read ``value``, and drops ``gte``."""
        comp.replace_all_uses(gte, value)
        comp.instructions = [i for i in comp.instructions if i is not gte]

    def _forward_invariants(self, comp: Computation, loop: Instruction) -> bool:
        root = self._body_root(loop)
        if root is None:
            return False
        body_params = loop.calls[1].parameters
        invariant = [k for k, p in enumerate(body_params) if root.operands[k] is p]
        if not invariant:
            return False
        changed = False
        users = self._users(comp, loop)
        for g in users or ():
            if g.attrs["index"] in invariant:
                self._forward(comp, g, loop.operands[g.attrs["index"]])
                changed = True
        for k in invariant:
            if _sinkable(loop.operands[k]):
                changed |= self._sink(loop, k)
        return changed

    def _sink(self, loop: Instruction, k: int) -> bool:
        """Makes the condition and body read a copy of the constant operand ``k`` instead of
        their parameter ``k`` (the body's root still returns the parameter)."""
        value = loop.operands[k]
        chain = [value.operands[0], value] if value.opcode == "broadcast_in_dim" else [value]
        changed = False
        for which in (0, 1):
            if not _reads(loop.calls[which], k, which == 1):
                continue
            comp = self._exclusive(loop, which)
            param = comp.parameters[k]
            copies = _copy(self.module, chain, {})
            comp.replace_all_uses(param, copies[-1])
            if which == 1:
                comp.root.operands[k] = param  # (still returned unchanged)
            n = len(comp.parameters)
            comp.instructions[n:n] = copies
            changed = True
        return changed

    def _remove_dead_state(self, comp: Computation, loop: Instruction) -> bool:
        root = self._body_root(loop)
        users = self._users(comp, loop)
        if root is None or users is None:
            return False
        n = len(loop.operands)
        live = {g.attrs["index"] for g in users}
        cond, body = loop.calls
        live |= _reached([cond.root, *_effects(cond, self.effectful)], set())
        visited: set[int] = set()
        live |= _reached(_effects(body, self.effectful), visited)
        frontier = set(live)
        while frontier:
            new = _reached([root.operands[k] for k in frontier], visited) - live
            live |= new
            frontier = new
        if len(live) == n or not live:
            return False
        keep = sorted(live)
        cond, body = self._exclusive(loop, 0), self._exclusive(loop, 1)
        old_root = body.root
        body.root = Instruction("tuple", [old_root.operands[k] for k in keep],
                                Shape.tuple(old_root.shape.tuple_shapes[k] for k in keep), {},
                                (), self.module.new_name("tuple"))
        body.instructions.append(body.root)
        for c in (cond, body):
            dce_computation(c, frozenset(self.effectful))
            self._drop_parameters(c, keep)
        loop.operands = [loop.operands[k] for k in keep]
        loop.shape = Shape.tuple(o.shape for o in loop.operands)
        position = {k: i for i, k in enumerate(keep)}
        for g in users:
            g.attrs = {**g.attrs, "index": position[g.attrs["index"]]}
        return True

    @staticmethod
    def _drop_parameters(comp: Computation, keep: list[int]) -> None:
        position = {k: i for i, k in enumerate(keep)}
        kept = []
        for inst in comp.instructions:
            if inst.opcode == "parameter":
                index = inst.attrs["index"]
                if index not in position:
                    continue  # (dead: nothing live reads it)
                inst.attrs = {**inst.attrs, "index": position[index]}
            kept.append(inst)
        comp.instructions = kept
