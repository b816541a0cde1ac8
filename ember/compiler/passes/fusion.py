"""Fusion: groups instructions into ``fusion`` instructions, each of which runs as one kernel.

The pass works on every computation that runs as a sequence of instructions: the entry and the
computations it reaches through ``while``, ``case`` and ``call`` (never the scalar regions of
``reduce``/``sort``/``scatter``, nor computations already fused). In each one it:

1. **Producer-consumer fusion** (consumers first): a fusible consumer starts a group and pulls
   its producers in. A producer whose users are all in the group moves into it; a cheap
   producer with other users is duplicated into the group (never an op of
   ``hlo.EXPENSIVE_ELEMENTWISE``: that one stays outside and is read as an operand; copies
   stop ``_MAX_DUPLICATION_DEPTH`` producers deep so chains are not copied whole). An
   expensive producer that the group would read repeatedly (behind a ``broadcast_in_dim`` or
   ``gather`` with more elements than it: a loop kernel recomputes a fused value for every
   read) is not pulled in, nor merged back in step 2: it runs once into a buffer (row
   fusion, step 3, may still take a per-row value, which its row kernels compute once per
   row). Likewise a table that a ``gather`` reads, when computed from more than one array
   (``_gathered_loads``: each would cost the kernel a vector gather). Nor is a producer
   pulled in that the kernel would compute more than
   ``MAX_EVALUATIONS`` times per element (``MAX_EXPENSIVE_EVALUATIONS`` for expensive ops),
   counting the different indices its readers ask for (``evaluation_sources``): a log-step
   scan, ``y = y + shift(y)`` repeated, would double that count at every step; loop groups
   are not merged past it in step 2 either. Scalar constants are always copied in rather
   than passed as parameters. Fusible
   ops are the elementwise ones and ``broadcast_in_dim``, ``reshape``, ``transpose``,
   ``slice``, ``concatenate``, ``pad``, ``reverse``, ``iota``, ``gather`` and
   ``dynamic_slice``; a ``reduce`` can only be the root of its group (an "input" fusion), fed
   by fusible producers; a variadic (tuple-shaped) reduce is always the only output of its
   fusion. A one-operand ``reduce_window`` of at most ``FUSED_WINDOW_MAX`` window elements
   that is not a cumulative scan (``_fusible_window``: pooling) is a loop-fusion member too:
   the kernel computes each window where it is read, its fused producers at every window
   position (counted as ``_window_reads`` evaluations), and it is never copied into a
   second group.
2. **Multi-output fusion**: sibling groups that read the same (non-scalar) value are merged,
   and a producer group is merged into a consumer group (its value becoming an extra output
   when something outside still needs it), as long as no cycle appears, no reduce result is
   consumed inside the group, and the outputs share one iteration space: every elementwise
   output has the same dims, every reduce output reduces the same dimensions of an input of
   those dims. Cycle checks use a bitset of each group's descendants.
3. **Row fusion**: a group holding reductions over the minor dims of a row space (the
   trailing dims of one array shape, the *row*) is merged with the groups that read the
   reduced values and broadcast them back along the row, so that a chain such as softmax's
   max -> sum(exp(x - max)) -> exp(x - max) / sum, or layernorm's mean -> variance ->
   normalize, is one fusion whose kernel makes several passes over each row while it is in
   cache (see ``row_space``: the rules that make this valid). Rows longer than
   ``ROW_FUSION_MAX_ROW`` elements are not row-fused.
4. **Materialization**: each group becomes ``fusion(inputs...)`` with ``kind`` "input" when
   it holds a reduce (a row fusion is an input fusion whose reduce results are also consumed
   inside it) and "loop" otherwise, calling a new ``fused_computation.N`` (whose
   parameters are the fusion's operands in order). A group with several outputs has a
   ``tuple`` root and its users read ``get_tuple_element``\\s of the fusion. Groups holding a
   single op that is neither elementwise nor a reduce are not worth a kernel and stay unfused.

No group grows (by pulling in or merging) past ``MAX_FUSION_COST``, a measure of its
kernel's code: an unrolled loop of thousands of ops becomes several kernels, each compiled
in reasonable time.

A ``concatenate`` of more than ``MAX_FUSED_CONCAT_OPERANDS`` operands is only ever the sole
root of its fusion (never pulled into a consumer, never merged): inside a loop kernel, a
concatenate computes every operand's element at each index and picks one.

A ``scatter`` of one operand is the root and only output of its fusion, with producers of its
operands worth at most ``MAX_SCATTER_FUSION_COST`` (its kernel is serial), and those of its
index only when all of them fit (``cone_cost``).

Never fused: ``dot_general``, other ``scatter``\\s, ``sort``, ``while``, ``case``, ``call``,
``custom_call``, ``dynamic_update_slice``, tuples, parameters and non-scalar constants.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from ember.compiler.hlo import (
    CONTROL_FLOW,
    ELEMENTWISE,
    EXPENSIVE_ELEMENTWISE,
    Computation,
    Instruction,
    Module,
    Shape,
)
from ember.compiler.passes import hlo_pass
from ember.compiler.passes import unique as _unique
from ember.compiler.reduce_window import scan_axis
from ember.compiler.shape_inference import reduce_window_attrs

# Ops that may live inside a loop fusion (as producers or consumers).
LOOP_FUSIBLE = ELEMENTWISE | frozenset({
    "broadcast_in_dim", "reshape", "transpose", "slice", "concatenate", "pad", "reverse",
    "iota", "gather", "dynamic_slice",
})
# Ops that may read an element of an operand for several elements of their result.
_EXPANDING = frozenset({"broadcast_in_dim", "gather"})
# The most window elements of a fused ``reduce_window`` (``_fusible_window``): its kernel
# unrolls the window (``window_kernel.UNROLL_MAX``).
FUSED_WINDOW_MAX = 64
# Ops whose called computations run as instruction sequences (and so are fused too).
# How deep a chain of cheap producers may be copied into one consumer (bounds the copies).
_MAX_DUPLICATION_DEPTH = 4
# Most times a kernel may compute one fused value per element of its iteration space (see
# ``evaluation_counts``): cheap ops, and ops of ``EXPENSIVE_ELEMENTWISE``.
MAX_EVALUATIONS = 4
MAX_EXPENSIVE_EVALUATIONS = 2
# A concatenate of more operands than this computes every operand's element for each of its
# own inside a fusion (and picks one), so it is only ever the sole root of its fusion, whose
# kernel writes each operand's slab in turn.
MAX_FUSED_CONCAT_OPERANDS = 8
# Readers of one value considered for sibling fusion (bounds the pairs tried).
_MAX_SIBLINGS = 16
# The largest fusion, in ``_code_cost`` units (about instructions of straight-line code per
# element): a longer chain (an unrolled loop) is cut into several kernels. LLVM's time grows
# faster than the function: 600 ``tanh`` in one kernel took 3.7 s to compile, 3,000 took
# 100 s; a cut costs one store and one load per element.
MAX_FUSION_COST = 2048
# The largest fusion rooted at a scatter (``_fusible_scatter``): its kernel walks the updates
# in order on one thread, unvectorized, so producers worth more than a few ops (an index
# computed by a binary search, as ``histogram``'s ``searchsorted``) run faster as a loop
# fusion of their own, threaded and vectorized, into a buffer the scatter reads. (Histogram of
# 1e6 values into 100 bins: 12 ms in the scatter's kernel, 2 ms split.)
MAX_SCATTER_FUSION_COST = 24
EXPENSIVE_CODE_COST = 16
# Longest row (elements) a row fusion makes several passes over: a few rows of every input
# must stay in the L1/L2 cache between passes.
ROW_FUSION_MAX_ROW = 1 << 14


def _wide_concatenate(inst: Instruction) -> bool:
    return inst.opcode == "concatenate" and len(inst.operands) > MAX_FUSED_CONCAT_OPERANDS


def _is_scalar_constant(inst: Instruction) -> bool:
    return inst.opcode == "constant" and not inst.shape.is_tuple and inst.shape.rank == 0


def _fusible_scatter(inst: Instruction) -> bool:
    """A scatter of one operand without batching dims: the root of its own fusion, whose
    kernel computes fused producers of its operand, indices and updates where it reads them
    (``segment_sum``'s index wrap no longer makes a pass of its own)."""
    return (inst.opcode == "scatter" and len(inst.operands) == 3
            and not inst.attrs.get("input_batching_dims"))


def _fusible_window(inst: Instruction) -> bool:
    """A ``reduce_window`` computed elementwise in a loop fusion: one operand, at most
    ``FUSED_WINDOW_MAX`` window elements, not a cumulative scan (whose kernel and float
    precision rule are its own)."""
    if inst.opcode != "reduce_window" or len(inst.operands) != 2 or inst.shape.is_tuple:
        return False
    window = reduce_window_attrs(inst.attrs, inst.operands[0].shape.rank)
    return (math.prod(window["window_dimensions"]) <= FUSED_WINDOW_MAX
            and scan_axis(inst) is None)


def _window_elements(inst: Instruction) -> int:
    window = reduce_window_attrs(inst.attrs, inst.operands[0].shape.rank)
    return math.prod(window["window_dimensions"])


def _merged_cost(a: _Group, b: _Group) -> int:
    """The code cost of ``a`` and ``b`` merged, either into the other (each group's members
    emitted once per element of the other's largest window: an upper bound)."""
    return max(a.cost + b.cost * a.window, b.cost + a.cost * b.window)


def _window_reads(inst: Instruction) -> int:
    """Times a fused ``reduce_window`` computes each element of its operand, on average
    (rounded up): its window's elements per result element, times the result's elements per
    operand element (a 3x3 max pool of stride 2 reads each element 2.25 times)."""
    window = reduce_window_attrs(inst.attrs, inst.operands[0].shape.rank)
    reads = math.prod(window["window_dimensions"]) * inst.shape.size
    return max(1, -(-reads // max(inst.operands[0].shape.size, 1)))


def _groupable(inst: Instruction) -> bool:
    """Whether ``inst`` may be a (home) member of a fusion group."""
    if inst.shape.is_tuple:
        # Only a variadic reduce (the root of its own fusion) has a tuple result here.
        return inst.opcode == "reduce"
    return (inst.opcode in LOOP_FUSIBLE or inst.opcode == "reduce" or _fusible_scatter(inst)
            or _fusible_window(inst))


class _Group:
    """Instructions fused together: ``home`` members (whose value this group provides to the
    rest of the computation) and ``private`` copies of cheap producers (used only inside)."""

    __slots__ = ("home", "private", "serial", "reused", "sources", "cost", "window", "scatter")
    _serials = itertools.count()

    def __init__(self) -> None:
        self.home: dict[int, Instruction] = {}
        self.private: dict[int, Instruction] = {}
        self.serial = next(self._serials)
        # Members whose elements the group reads more than once (behind an expanding
        # broadcast): the kernel recomputes such a member for every read.
        self.reused: set[int] = set()
        # Where the kernel reads each member (``evaluation_sources``), once computed.
        self.sources: dict[int, dict] | None = None
        self.cost = 0  # the members' ``_code_cost``: the size of the kernel's code
        # The largest fused window's elements: members added after it (its producers, the
        # way groups grow) are emitted once per window element, so they cost that many times.
        self.window = 1
        self.scatter = False  # rooted at a scatter: a serial kernel (MAX_SCATTER_FUSION_COST)

    def contains(self, inst: Instruction) -> bool:
        return id(inst) in self.home or id(inst) in self.private

    def members(self) -> list[Instruction]:
        return [*self.home.values(), *self.private.values()]  # disjoint


class _ComputationFuser:
    """Fusion of one computation: grouping, multi-output merging, then rewriting."""

    def __init__(self, module: Module, comp: Computation):
        self.module = module
        self.comp = comp
        self.pos = {id(inst): n for n, inst in enumerate(comp.instructions)}
        users = comp.users()
        self.users = {id(i): _unique(us) for i, us in users.items()}
        self.home: dict[int, _Group] = {}
        self.private_in: dict[int, dict[int, _Group]] = {}
        self.groups: dict[int, _Group] = {}
        # Expensive values kept out of a group that would read them repeatedly.
        self.kept_apart: set[int] = set()

    # ------------------------------------------------------------------ bookkeeping

    def _new_group(self, inst: Instruction) -> _Group:
        g = _Group()
        g.scatter = inst.opcode == "scatter"
        self.groups[g.serial] = g
        self._add_home(inst, g)
        return g

    def _add_home(self, inst: Instruction, g: _Group) -> None:
        if not g.contains(inst):
            g.cost += _code_cost(inst) * g.window
            if _fusible_window(inst):
                g.window = max(g.window, _window_elements(inst))
        g.home[id(inst)] = inst
        self.home[id(inst)] = g
        if g.private.pop(id(inst), None) is not None:
            self.private_in[id(inst)].pop(g.serial, None)

    def _add_private(self, inst: Instruction, g: _Group) -> None:
        if not g.contains(inst):
            g.cost += _code_cost(inst) * g.window
        g.private[id(inst)] = inst
        self.private_in.setdefault(id(inst), {})[g.serial] = g

    def _contexts(self, inst: Instruction) -> list:
        """Where ``inst`` is computed: its home group (or itself, when it runs unfused) and
        the groups holding a private copy."""
        out: list = list(self.private_in.get(id(inst), {}).values())
        g = self.home.get(id(inst))
        if g is not None:
            out.append(g)
        elif not _groupable(inst) and not _is_scalar_constant(inst):
            out.append(inst)
        return out

    def _readers(self, inst: Instruction) -> list:
        """Contexts that read the value of ``inst`` from outside ``inst``'s own context."""
        out = []
        for u in self.users[id(inst)]:
            for k in self._contexts(u):
                if isinstance(k, _Group) and k.contains(inst):
                    continue
                out.append(k)
        return _unique(out)

    def _successors(self, ctx) -> list:
        if isinstance(ctx, _Group):
            found = []
            for m in ctx.home.values():
                found.extend(k for k in self._readers(m) if k is not ctx)
            return _unique(found)
        return self._readers(ctx)

    def _inputs(self, g: _Group) -> list[Instruction]:
        """Values ``g`` reads from outside, in order of first use."""
        members = sorted(g.members(), key=lambda m: self.pos[id(m)])
        return _unique(op for m in members for op in m.operands if not g.contains(op))

    def _outputs(self, groups: list[_Group]) -> list[Instruction]:
        """Home members of the union of ``groups`` whose values are needed outside it."""
        out = [m for g in groups for m in g.home.values()
               if m is self.comp.root or self._read_outside(m, groups)]
        return sorted(out, key=lambda m: self.pos[id(m)])

    def _read_outside(self, inst: Instruction, groups: list[_Group]) -> bool:
        for u in self.users[id(inst)]:
            for k in self._contexts(u):
                if isinstance(k, _Group) and (k.contains(inst) or any(k is g for g in groups)):
                    continue
                return True
        return False

    # ------------------------------------------------------------------ producer-consumer

    def _needed_outside(self, inst: Instruction) -> bool:
        return inst is self.comp.root or bool(self._readers(inst))

    def group_producers(self) -> None:
        for inst in reversed(self.comp.instructions):
            if not _groupable(inst):
                continue
            g = self.home.get(id(inst))
            if g is None:
                if not self._needed_outside(inst):
                    continue  # dead, or every user computes its own copy
                g = self._new_group(inst)
            self._fuse_operands(inst, g)

    def _fuse_operands(self, inst: Instruction, g: _Group, depth: int = 0) -> None:
        for op in _unique(inst.operands):
            reused = id(inst) in g.reused or (inst.opcode in _EXPANDING
                                              and inst.shape.size > op.shape.size) or (
                inst.opcode == "reduce_window" and _window_reads(inst) > 1)
            if (inst.opcode == "gather" and op is inst.operands[0]
                    and inst.shape.size > op.shape.size and _gathered_loads(op) > 1):
                # Gathered from, a fused table costs a vector gather per array it is computed
                # from (and a concatenate's pieces one each): computed once into a buffer, it
                # costs one. (``histogram``'s bin edges, a concatenate of computed pieces
                # read at each step of a binary search: 12 gathers an element, then 6.)
                self.kept_apart.add(id(op))
                continue
            if g.scatter and inst.opcode == "scatter" and op is inst.operands[1] and \
                    cone_cost(op, MAX_SCATTER_FUSION_COST) > MAX_SCATTER_FUSION_COST:
                # The index's producers come in only when all of them fit: a part of them
                # would leave the rest a fusion writing every value that part reads
                # (``histogram``'s binary search, cut in its middle, wrote 12 arrays of its
                # elements' size: 1e6 values into 50 bins took 9.5 ms, 1.6 split at the
                # index). A loop fusion computes the index, threaded, into one buffer. (The
                # updates' producers come in as far as they fit: an embedding gradient's
                # last few products cost nothing more in the scatter's kernel.)
                continue
            self._try_fuse(op, g, depth, reused)

    def _try_fuse(self, producer: Instruction, g: _Group, depth: int,
                  reused: bool = False) -> None:
        if g.contains(producer):
            if reused:
                g.reused.add(id(producer))
            return
        if _is_scalar_constant(producer):
            self._add_private(producer, g)
            return
        window = _fusible_window(producer)
        if (producer.opcode not in LOOP_FUSIBLE and not window) or producer.shape.is_tuple:
            return
        limit = MAX_SCATTER_FUSION_COST if g.scatter else MAX_FUSION_COST
        if g.cost + _code_cost(producer) * g.window > limit:
            return
        if _wide_concatenate(producer):
            self.kept_apart.add(id(producer))
            return
        if reused and producer.opcode in EXPENSIVE_ELEMENTWISE:
            self.kept_apart.add(id(producer))  # (computed once into a buffer, not per read)
            return
        users = self.users[id(producer)]
        home = id(producer) not in self.home and all(self.home.get(id(u)) is g for u in users)
        if not home and (producer.opcode in EXPENSIVE_ELEMENTWISE or window
                         or depth >= _MAX_DUPLICATION_DEPTH):
            return
        if self._too_many_evaluations(g, producer):
            return
        if reused:
            g.reused.add(id(producer))
        if home:
            self._add_home(producer, g)  # its own producers are pulled in when it is visited
        else:
            self._add_private(producer, g)
            self._fuse_operands(producer, g, depth + 1)

    def _too_many_evaluations(self, g: _Group, producer: Instruction) -> bool:
        """Whether pulling ``producer`` into ``g`` would make a kernel compute some member too
        often per element (``evaluation_counts``). A producer none of whose operands is in
        the group changes no other member's count, so only its own is computed (from the
        group's kept index sources); otherwise the group's are recomputed. (An operand whose
        count never matters, a constant or a broadcast constant, is no reason to recompute:
        a long chain of ``x * 2.0 + 1.0`` shares those, and recomputing at every step made
        fusing it quadratic.)"""
        if producer.opcode == "constant":
            return False
        if g.sources is None or any(g.contains(op) and not _constant_valued(op)
                                    for op in producer.operands):
            g.sources = None
            return self._duplicates_too_much([g], producer)
        inside = [u for u in self.users[id(producer)] if g.contains(u)]
        mine = _index_sources(producer, inside, g.sources)
        if _over_limit(producer, sum(mine.values())):
            return True
        g.sources[id(producer)] = mine
        return False

    def _duplicates_too_much(self, groups: list[_Group], extra: Instruction | None = None,
                             merging: bool = False) -> bool:
        """Whether the union of ``groups`` (plus ``extra``) would compute some member more
        often per element than ``MAX_EVALUATIONS`` (``MAX_EXPENSIVE_EVALUATIONS``). With
        one group and no merge, the group keeps the index sources found."""
        if merging and any(self._has_reduce(g) for g in groups) and not any(
                m.opcode == "reduce_window" for g in groups for m in g.home.values()):
            return False  # (reduce groups: row fusion's passes are planned by ``row_space``)
        members = _unique([m for g in groups for m in g.members() if m.opcode != "constant"]
                          + ([extra] if extra is not None else []))
        homes = {k for g in groups for k in g.home}
        inside = {id(m) for m in members}

        def is_output(m: Instruction) -> bool:
            return id(m) in homes and (m is self.comp.root or any(
                id(u) not in homes for u in self.users[id(m)]))
        members.sort(key=lambda m: self.pos[id(m)])
        sources = evaluation_sources(
            members, lambda m: [u for u in self.users[id(m)] if id(u) in inside], is_output)
        if any(_over_limit(m, sum(sources[id(m)].values())) for m in members):
            return True
        if not merging:
            groups[0].sources = sources
        return False

    # ------------------------------------------------------------------ multi-output

    def merge_multi_output(self) -> None:
        contexts = _unique(
            list(self.groups.values())
            + [i for i in self.comp.instructions if id(i) not in self.home])
        self.graph = _ContextGraph(contexts, self._successors)
        while self._merge_producers() | self._merge_siblings():
            pass

    def _merge_producers(self) -> bool:
        merged = False
        order = sorted(self.groups.values(), key=self._last_pos, reverse=True)
        for p in order:
            if p.serial not in self.groups or self._has_reduce(p) or \
                    any(k in self.kept_apart for k in p.home):
                continue
            for c in self.graph.successors(p):
                if isinstance(c, _Group) and self._can_merge(p, c):
                    self._merge(c, p)
                    merged = True
                    break
        return merged

    def _merge_siblings(self) -> bool:
        readers: dict[int, list[_Group]] = {}
        for g in sorted(self.groups.values(), key=self._last_pos):
            for x in self._inputs(g):
                if not x.shape.is_tuple and x.shape.size > 1:
                    readers.setdefault(id(x), []).append(g)
        merged = False
        for key in sorted(readers, key=lambda k: self.pos[k]):
            gs = readers[key][:_MAX_SIBLINGS]
            for i, a in enumerate(gs):
                for b in gs[i + 1:]:
                    live = a.serial in self.groups and b.serial in self.groups
                    if live and a is not b and self._can_merge(a, b):
                        self._merge(a, b)
                        merged = True
        return merged

    def _has_reduce(self, g: _Group) -> bool:
        return any(m.opcode == "reduce" for m in g.home.values())

    def _last_pos(self, g: _Group) -> int:
        return max(self.pos[k] for k in g.home)

    def _has_scatter(self, g: _Group) -> bool:
        return any(m.opcode == "scatter" for m in g.home.values())

    def _can_merge(self, a: _Group, b: _Group) -> bool:
        both = [a, b]
        if self._has_scatter(a) or self._has_scatter(b):
            return False  # (a scatter is the only output of its fusion)
        if _merged_cost(a, b) > MAX_FUSION_COST:
            return False
        if any(_wide_concatenate(m) for g in both for m in g.home.values()):
            return False
        if self.graph.would_cycle(a, b) or self._reduce_feeds_inside(both):
            return False
        return _same_iteration_space(self._outputs(both)) and not self._duplicates_too_much(
            both, merging=True)

    def _reduce_feeds_inside(self, groups: list[_Group]) -> bool:
        homes = {k for g in groups for k in g.home}
        for g in groups:
            for m in g.members():
                for op in m.operands:
                    if op.opcode == "reduce" and id(op) in homes:
                        return True
        return False

    def _merge(self, into: _Group, other: _Group) -> None:
        self.graph.merge(into, other)
        into.sources = None
        del self.groups[other.serial]
        for inst in other.home.values():
            self._add_home(inst, into)
        for k, inst in other.private.items():
            self.private_in[k].pop(other.serial, None)
            if k not in into.home:
                self._add_private(inst, into)

    # ------------------------------------------------------------------ row fusion

    def merge_rows(self) -> None:
        """Merges producer groups holding minor-dim reductions into the groups that read
        them, as long as the union is a valid row fusion (``row_space``)."""
        merged = True
        while merged:
            merged = False
            for p in sorted(self.groups.values(), key=self._last_pos):
                if p.serial not in self.groups:
                    continue
                for c in self.graph.successors(p):
                    if isinstance(c, _Group) and self._can_merge_rows(p, c):
                        self._merge(c, p)
                        merged = True
                        break

    def _can_merge_rows(self, a: _Group, b: _Group) -> bool:
        both = [a, b]
        if not (self._has_reduce(a) or self._has_reduce(b)):
            return False
        if self._has_scatter(a) or self._has_scatter(b):
            return False
        if _merged_cost(a, b) > MAX_FUSION_COST or self.graph.would_cycle(a, b):
            return False
        members = sorted((m for g in both for m in g.members()), key=lambda m: self.pos[id(m)])
        space = row_space(members, self._outputs(both))
        return (space is not None and space.row_size <= ROW_FUSION_MAX_ROW
                and not self._duplicates_too_much(both, merging=True))

    # ------------------------------------------------------------------ rewriting

    def dissolve_trivial_groups(self) -> None:
        for g in list(self.groups.values()):
            ops = [m for m in g.members() if m.opcode != "constant"]
            if len(ops) == 1 and ops[0].opcode not in ELEMENTWISE and ops[0].opcode != "reduce":
                del self.groups[g.serial]
                for k in g.home:
                    del self.home[k]
                for k in g.private:
                    self.private_in[k].pop(g.serial, None)

    def rewrite(self) -> bool:
        """Replaces the groups by fusion instructions; returns whether any was made."""
        needed, standalone = self._needed()
        if not needed:
            return False
        provided: dict[int, Instruction] = {}
        new_insts: list[Instruction] = []
        for g in sorted(needed, key=lambda h: self._last_pos(h)):
            outputs = sorted(needed[g].values(), key=lambda m: self.pos[id(m)])
            new_insts.extend(self._emit_fusion(g, outputs, provided))
        kept = [i for i in self.comp.instructions if id(i) in standalone]
        for inst in kept + new_insts:
            inst.operands = [provided.get(id(op), op) for op in inst.operands]
        self.comp.root = provided.get(id(self.comp.root), self.comp.root)
        self.comp.instructions = kept + new_insts
        self.comp.sort_topologically()
        return True

    def _needed(self) -> tuple[dict[_Group, dict[int, Instruction]], set[int]]:
        """The groups that are needed (with their needed outputs) and the unfused
        instructions that stay, found from the root and every non-fusible instruction."""
        needed: dict[_Group, dict[int, Instruction]] = {}
        standalone: set[int] = set()
        stack = [self.comp.root]
        stack.extend(i for i in self.comp.instructions
                     if not _groupable(i) and i.opcode != "constant")
        while stack:
            inst = stack.pop()
            g = self.home.get(id(inst))
            if g is None:
                if id(inst) not in standalone:
                    standalone.add(id(inst))
                    stack.extend(inst.operands)
                continue
            if g not in needed:
                needed[g] = {}
                stack.extend(self._inputs(g))
            needed[g][id(inst)] = inst
        return needed, standalone

    def _emit_fusion(self, g: _Group, outputs: list[Instruction],
                     provided: dict[int, Instruction]) -> list[Instruction]:
        inputs = self._inputs(g)
        fused = self._fused_computation(g, inputs, outputs)
        reduces = any(m.opcode == "reduce" for m in g.home.values())
        kind = "input" if reduces else "loop"
        fusion = Instruction("fusion", inputs, fused.root.shape, {"kind": kind}, [fused],
                             self.module.new_name("fusion"))
        if len(outputs) == 1:
            provided[id(outputs[0])] = fusion
            return [fusion]
        made = [fusion]
        for n, out in enumerate(outputs):
            gte = Instruction("get_tuple_element", [fusion], out.shape, {"index": n}, (),
                              self.module.new_name("get_tuple_element"))
            provided[id(out)] = gte
            made.append(gte)
        return made

    def _fused_computation(self, g: _Group, inputs: list[Instruction],
                           outputs: list[Instruction]) -> Computation:
        name = self.module.new_name("fused_computation")
        inside: dict[int, Instruction] = {}
        insts = []
        for n, x in enumerate(inputs):
            p = Instruction("parameter", [], x.shape, {"index": n}, (),
                            self.module.new_name(f"param_{n}"))
            inside[id(x)] = p
            insts.append(p)
        for m in sorted(g.members(), key=lambda m: self.pos[id(m)]):
            clone = Instruction(m.opcode, [inside[id(op)] for op in m.operands], m.shape,
                                dict(m.attrs), list(m.calls), self.module.new_name(m.opcode))
            inside[id(m)] = clone
            insts.append(clone)
        if len(outputs) == 1:
            root = inside[id(outputs[0])]
        else:
            elems = [inside[id(o)] for o in outputs]
            root = Instruction("tuple", elems, _tuple_shape(elems), {}, (),
                               self.module.new_name("tuple"))
            insts.append(root)
        fused = Computation(name, insts, root)
        index = next(n for n, c in enumerate(self.module.computations) if c is self.comp)
        self.module.computations.insert(index, fused)
        return fused


class _ContextGraph:
    """The dependence graph between contexts (groups and unfused instructions) with each
    node's descendants as a bitset, kept up to date (conservatively) as groups merge."""

    def __init__(self, contexts: list, successors):
        self.index = {id(c): n for n, c in enumerate(contexts)}
        self.nodes = list(contexts)
        self.succ: list[set[int]] = [
            {self.index[id(k)] for k in successors(c) if id(k) in self.index}
            for c in contexts]
        self.pred: list[set[int]] = [set() for _ in contexts]
        for n, ss in enumerate(self.succ):
            for s in ss:
                self.pred[s].add(n)
        self.desc = [0] * len(contexts)
        for n in reversed(self._topological()):
            for s in self.succ[n]:
                self.desc[n] |= self.desc[s] | (1 << s)

    def _topological(self) -> list[int]:
        indegree = [len(p) for p in self.pred]
        ready = [n for n, d in enumerate(indegree) if d == 0]
        order = []
        while ready:
            n = ready.pop()
            order.append(n)
            for s in self.succ[n]:
                indegree[s] -= 1
                if indegree[s] == 0:
                    ready.append(s)
        if len(order) != len(self.nodes):
            raise AssertionError("fusion: the grouping has a cycle")
        return order

    def successors(self, ctx) -> list:
        return [self.nodes[s] for s in sorted(self.succ[self.index[id(ctx)]])]

    def _reaches_through_other(self, a: int, b: int) -> bool:
        return any(s != b and self.desc[s] >> b & 1 for s in self.succ[a])

    def would_cycle(self, x, y) -> bool:
        """Whether merging contexts x and y would make a cycle (a path between them through
        another context)."""
        a, b = self.index[id(x)], self.index[id(y)]
        return self._reaches_through_other(a, b) or self._reaches_through_other(b, a)

    def merge(self, into, other) -> None:
        a, b = self.index[id(into)], self.index.pop(id(other))
        pair = {a, b}
        self.succ[a] = (self.succ[a] | self.succ[b]) - pair
        self.pred[a] = (self.pred[a] | self.pred[b]) - pair
        for s in self.succ[b]:
            self.pred[s].discard(b)
            if s != a:
                self.pred[s].add(a)
        for p in self.pred[b]:
            self.succ[p].discard(b)
            if p != a:
                self.succ[p].add(a)
        self.succ[b], self.pred[b] = set(), set()
        both = (1 << a) | (1 << b)
        self.desc[a] = (self.desc[a] | self.desc[b]) & ~both
        self.desc[b] = 0
        merged = (1 << a) | self.desc[a]
        for n, d in enumerate(self.desc):
            if d & both:
                self.desc[n] = (d & ~(1 << b)) | merged


def _tuple_shape(elems: list[Instruction]) -> Shape:
    return Shape.tuple(e.shape for e in elems)


def evaluation_sources(members: list[Instruction], users_inside,
                       is_output) -> dict[int, dict]:
    """Where a kernel of the fused ``members`` (in topological order) reads each of them, by
    id: {index source: times computed per element of the kernel's iteration space}. The sum
    is the member's *evaluation count*.

    A kernel computes a value at every index some reader asks for (memoized per index). An
    elementwise reader asks at its own index, so it passes on the sources it is read from
    (as do readers that read the element of their own linear index: ``_read_at_own_index``);
    any other reader (a pad, a slice, a broadcast...) asks at indices of its own, one source
    per operand slot, as often as it is computed itself; reduces over the same dims read
    their operands at one index, once; a ``reduce_window`` reads its operand
    ``_window_reads`` times per element of it, as often as it is computed itself. An
    output of the fusion is one more source. A log-step scan, ``y = y + shift(y)``
    repeated, doubles the count per step.

    Args:
        members: the fused instructions, producers before readers.
        users_inside: fn(member) -> the members that read it.
        is_output: fn(member) -> whether the fusion returns its value.
    """
    sources: dict[int, dict] = {}
    for m in reversed(members):
        mine = _index_sources(m, users_inside(m), sources)
        if is_output(m):
            mine["output"] = 1
        sources[id(m)] = mine
    return sources


def evaluation_counts(members: list[Instruction], users_inside, is_output) -> dict[int, int]:
    """Each member's evaluation count, by id (see ``evaluation_sources``)."""
    return {k: sum(v.values())
            for k, v in evaluation_sources(members, users_inside, is_output).items()}


def _index_sources(inst: Instruction, readers: list[Instruction],
                   sources: dict[int, dict]) -> dict:
    """The index sources of ``inst`` read by ``readers`` (whose own sources are known)."""
    mine: dict = {}
    for u in readers:
        if u.opcode in ELEMENTWISE or _read_at_own_index(u, inst):
            mine.update(sources[id(u)])
        elif u.opcode == "reduce":
            mine[("reduce", tuple(sorted(u.attrs["dimensions"])))] = 1
        elif u.opcode == "reduce_window" and u.operands[0] is inst:
            times = sum(sources[id(u)].values())
            mine[(id(u), 0)] = times * _window_reads(u)
        else:
            times = sum(sources[id(u)].values())
            mine.update(((id(u), k), times) for k, op in enumerate(u.operands) if op is inst)
    return mine


def _read_at_own_index(reader: Instruction, inst: Instruction) -> bool:
    """Whether ``reader`` reads ``inst`` at the element of its own (linear) output index: a
    reshape, a broadcast that only adds unit dims, the indices of a gather with one index
    per output element (``x[i]`` of a 1-d ``x``)."""
    if reader.opcode == "reshape":
        return True
    if reader.opcode == "broadcast_in_dim":
        dims = reader.attrs["broadcast_dimensions"]
        return reader.shape.size == inst.shape.size and list(dims) == sorted(dims)
    return (reader.opcode == "gather" and reader.operands[1] is inst
            and inst.shape.size == reader.shape.size)


def _code_cost(inst: Instruction) -> int:
    """The weight of ``inst`` in ``MAX_FUSION_COST``: a math function's polynomial counts as
    ``EXPENSIVE_CODE_COST`` simple ops; constants are free."""
    if inst.opcode == "constant":
        return 0
    if inst.opcode == "reduce_window":  # (an unrolled window)
        return _window_elements(inst)
    return EXPENSIVE_CODE_COST if inst.opcode in EXPENSIVE_ELEMENTWISE else 1


def cone_cost(inst: Instruction, limit: int) -> int:
    """The ``_code_cost`` of ``inst`` and of the loop-fusible producers it is computed from,
    each counted once, up to the first sum past ``limit``: the size of the code computing
    one element of it in a fused kernel."""
    total, seen, stack = 0, set(), [inst]
    while stack and total <= limit:
        op = stack.pop()
        if id(op) in seen or (op.opcode not in LOOP_FUSIBLE and not _fusible_window(op)) \
                or op.shape.is_tuple:
            continue
        seen.add(id(op))
        total += _code_cost(op)
        stack.extend(op.operands)
    return total


def _gathered_loads(inst: Instruction, depth: int = 0) -> int:
    """How many arrays a fused kernel loads from to compute one element of ``inst`` at an
    arbitrary index (a gather's): its array leaves, counted through the loop-fusible ops that
    would be fused with it (a concatenate or pad computes every piece); 2 past a few levels."""
    if _constant_valued(inst) or inst.opcode == "iota":
        return 0
    if inst.opcode not in LOOP_FUSIBLE or inst.shape.is_tuple:
        return 1
    if depth >= _MAX_DUPLICATION_DEPTH:
        return 2
    return sum(_gathered_loads(op, depth + 1) for op in _unique(inst.operands))


def _constant_valued(inst: Instruction) -> bool:
    """Whether ``inst`` is a constant or a broadcast of one: its evaluation count, and its
    readers', never decide anything (``_over_limit`` ignores it; constants have no count)."""
    return inst.opcode == "constant" or (inst.opcode == "broadcast_in_dim"
                                         and inst.operands[0].opcode == "constant"
                                         and inst.operands[0].shape.size <= 1)


def _over_limit(inst: Instruction, count: int) -> bool:
    if inst.shape.size <= 1 or inst.opcode == "iota" or (
            inst.opcode == "broadcast_in_dim" and inst.operands[0].shape.size <= 1):
        return False  # (one value, or computed from the index alone: nothing is reloaded)
    limit = MAX_EXPENSIVE_EVALUATIONS if inst.opcode in EXPENSIVE_ELEMENTWISE else MAX_EVALUATIONS
    return count > limit


def _same_iteration_space(outputs: list[Instruction]) -> bool:
    """Whether the outputs of one fusion can be produced by one loop nest."""
    if len(outputs) <= 1:
        return True
    if any(o.shape.is_tuple for o in outputs):
        return False
    loop_dims = {o.dims for o in outputs if o.opcode != "reduce"}
    reduces = {(o.operands[0].dims, tuple(o.attrs.get("dimensions", ())))
               for o in outputs if o.opcode == "reduce"}
    if len(loop_dims) > 1 or len(reduces) > 1:
        return False
    if loop_dims and reduces:
        return next(iter(loop_dims)) == next(iter(reduces))[0]
    return True


@dataclass(frozen=True)
class RowSpace:
    """The iteration space of a row fusion.

    Attributes:
        dims: the full shape; its last ``n_inner`` dims make one row, the others index rows.
        n_inner: how many trailing dims every reduce of the fusion reduces.
        dependent: ids of the instructions whose value depends on a reduce of the fusion:
            those of ``rows`` elements hold one value per row ("row values"), the others
            have ``dims`` and are computed element by element in the passes over a row.
    """

    dims: tuple
    n_inner: int
    dependent: frozenset

    @property
    def rows(self) -> int:
        return math.prod(self.dims[:len(self.dims) - self.n_inner])

    @property
    def row_size(self) -> int:
        return math.prod(self.dims[len(self.dims) - self.n_inner:])


def row_space(insts: list[Instruction], outputs: list[Instruction]) -> RowSpace | None:
    """The row space of instructions fused together, or None when they are not a row fusion.

    ``insts`` (in topological order) may read values from outside (treated as inputs). They
    form a row fusion when every reduce among them reduces the same trailing dims of an input
    of the same shape ``dims`` with one operand; every instruction depending on a reduce is
    elementwise (on row values, or on arrays of ``dims``), a reshape between row values, or a
    ``broadcast_in_dim`` of a row value that keeps each row's value with its row (the
    operand's non-unit dims map in order onto the row-indexing dims); and every output is a
    reduce, a row value (one element per row) or an array of ``dims``. Then a kernel can run
    over rows, computing each row's reduces in passes over the row and reading reduced values
    as per-row scalars.
    """
    reduces = [i for i in insts if i.opcode == "reduce"]
    if not reduces:
        return None
    dims = reduces[0].operands[0].dims
    red = tuple(sorted(reduces[0].attrs["dimensions"]))
    k = len(red)
    if k == 0 or red != tuple(range(len(dims) - k, len(dims))):
        return None
    for r in reduces:
        if (r.shape.is_tuple or len(r.operands) != 2 or r.operands[0].shape.is_tuple
                or r.operands[0].dims != dims or tuple(sorted(r.attrs["dimensions"])) != red):
            return None
    rows = math.prod(dims[:len(dims) - k])
    dependent: set[int] = set()
    for inst in insts:
        if not any(id(op) in dependent for op in inst.operands):
            if inst.opcode == "reduce":
                dependent.add(id(inst))
            continue
        if inst.shape.is_tuple or not _row_dependent_ok(inst, dims, k, rows, dependent):
            return None
        dependent.add(id(inst))
    for o in outputs:
        if o.shape.is_tuple:
            return None
        if o.opcode != "reduce" and o.dims != dims and o.shape.size != rows:
            return None
    return RowSpace(tuple(dims), k, frozenset(dependent))


def _row_dependent_ok(inst: Instruction, dims: tuple, k: int, rows: int,
                      dependent: set[int]) -> bool:
    """Whether ``inst``, which reads a reduce-dependent value, keeps the row structure."""
    op = inst.opcode
    if op == "reduce":  # a later pass: only its input may depend on earlier reduces
        return id(inst.operands[1]) not in dependent
    if op in ELEMENTWISE:
        return inst.dims == dims or inst.shape.size == rows
    operand = inst.operands[0]
    if operand.shape.size != rows:  # only row values are reshaped or broadcast
        return False
    if op == "reshape":
        return inst.shape.size == rows
    if op != "broadcast_in_dim":
        return False
    if inst.shape.size == rows:
        limit = len(inst.dims)
    elif inst.dims == dims:
        limit = len(dims) - k
    else:
        return False
    targets = [d for d, n in zip(inst.attrs["broadcast_dimensions"], operand.dims) if n != 1]
    return all(d < limit for d in targets) and targets == sorted(set(targets))


def fusible_computations(module: Module) -> list[Computation]:
    """The entry and the computations it runs through control flow, callees first."""
    return module.reachable_computations(CONTROL_FLOW)


def fuse_computation(module: Module, comp: Computation) -> bool:
    """Fuses the instructions of ``comp`` (a computation of ``module``) in place."""
    fuser = _ComputationFuser(module, comp)
    fuser.group_producers()
    fuser.merge_multi_output()
    fuser.merge_rows()
    fuser.dissolve_trivial_groups()
    return fuser.rewrite()


@hlo_pass("fusion")
def fuse_module(module: Module) -> bool:
    """Groups the instructions of ``module`` into loop, input and multi-output fusions.

    Args:
        module: the module to rewrite in place.

    Returns:
        Whether any fusion was created.

    Example:
        >>> from ember.compiler.hlo import Builder, Module, Shape
        >>> m = Module("m")
        >>> b = Builder(m, "main")
        >>> x = b.parameter(0, Shape("float32", (8,)))
        >>> y = b.op("negate", b.op("add", x, x))
        >>> _ = b.build(y, entry=True)
        >>> fuse_module(m)
        True
        >>> m.entry.root.opcode, m.entry.root.attrs["kind"]
        ('fusion', 'loop')
    """
    changed = False
    for comp in fusible_computations(module):
        changed |= fuse_computation(module, comp)
    return changed
