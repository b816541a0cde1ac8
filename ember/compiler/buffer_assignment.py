"""Buffer assignment: liveness of every value of the entry computation and a reusing allocator.

Every instruction of the entry computation defines its *leaf buffers*: one per array in its
result (a multi-output fusion, a ``while`` or a ``sort`` defines several). ``tuple`` and
``get_tuple_element`` define none: they alias the leaves of their operands. Parameters and
constants are not allocated here: the caller owns the arguments and constants live in the
module; their sizes are reported as ``parameter_bytes`` and ``constant_bytes``.

Instructions run in the computation's order. A leaf is live from the instruction that defines
it through its last use (a use of a tuple or of a ``get_tuple_element`` uses the leaves it
aliases); the root's leaves stay live to the end. Before an instruction runs, the allocations
of values whose last use has already run are freed; each leaf it defines then takes the
smallest free allocation big enough for it (best fit), or a new one.

``peak_bytes`` is the largest total size of the allocations in use at any instruction
(temporaries and outputs, *not* parameters or constants).

Example:
    >>> from ember.compiler.hlo import Builder, Module, Shape
    >>> m = Module("m")
    >>> b = Builder(m, "main")
    >>> x = b.parameter(0, Shape("float32", (1024,)))
    >>> y = b.op("negate", b.op("negate", b.op("negate", x)))
    >>> _ = b.build(y, entry=True)
    >>> a = assign_buffers(m)
    >>> a.num_allocations, a.peak_bytes
    (2, 8192)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ember.compiler.hlo import Computation, Instruction, Module

# Instructions whose result buffers are not allocated by this computation.
_EXTERNAL = frozenset({"parameter", "constant"})
# Instructions whose result aliases their operands' buffers.
_ALIASING = frozenset({"tuple", "get_tuple_element"})


@dataclass(eq=False)
class LogicalBuffer:
    """One array value: leaf ``leaf`` of the result of ``instruction``."""

    instruction: Instruction
    leaf: int
    size: int
    defined_at: int
    last_use: int = -1
    allocation: Allocation | None = None


@dataclass(eq=False)
class Allocation:
    """A block of memory holding, one after another, the buffers in ``buffers``."""

    index: int
    size: int
    buffers: list[LogicalBuffer] = field(default_factory=list)


@dataclass
class BufferAssignment:
    """The result of ``assign_buffers``.

    Attributes:
        allocations: every allocation, in creation order.
        peak_bytes: the most bytes of allocations in use at once (parameters and constants
            excluded: see ``parameter_bytes`` and ``constant_bytes``).
        parameter_bytes: total size of the entry's parameters (owned by the caller).
        constant_bytes: total size of the entry's constants (owned by the module).
        output_bytes: total size of the root's leaves.
    """

    computation: Computation
    allocations: list[Allocation]
    peak_bytes: int
    parameter_bytes: int
    constant_bytes: int
    output_bytes: int
    _leaves: dict[int, list[LogicalBuffer | None]]

    @property
    def total_allocation_bytes(self) -> int:
        """The sum of the sizes of all allocations."""
        return sum(a.size for a in self.allocations)

    @property
    def num_allocations(self) -> int:
        return len(self.allocations)

    def allocations_of(self, inst: Instruction) -> list[Allocation | None]:
        """The allocation of each leaf of ``inst``'s result (None: parameter or constant)."""
        try:
            leaves = self._leaves[id(inst)]
        except KeyError:
            raise KeyError(f"{inst.name} is not an instruction of "
                           f"{self.computation.name}") from None
        return [b.allocation if b is not None else None for b in leaves]

    def allocation_of(self, inst: Instruction) -> Allocation | None:
        """The allocation holding the array result of ``inst`` (None for parameters and
        constants); for a tuple-shaped result use ``allocations_of``."""
        allocs = self.allocations_of(inst)
        if inst.shape.is_tuple:
            raise ValueError(f"{inst.name} has the tuple result {inst.shape}; use "
                             f"allocations_of")
        return allocs[0]

    def buffers(self) -> list[LogicalBuffer]:
        """Every allocated logical buffer."""
        return [b for a in self.allocations for b in a.buffers]


def leaf_range(inst: Instruction, index: int) -> tuple[int, int]:
    """The leaves of element ``index`` of ``inst``'s tuple result, as a [start, stop) range."""
    shapes = inst.shape.tuple_shapes
    start = sum(len(s.leaves()) for s in shapes[:index])
    return start, start + len(shapes[index].leaves())


def _define_leaves(comp: Computation) -> dict[int, list[LogicalBuffer | None]]:
    """Each instruction's leaf buffers (shared with operands for tuples and their elements);
    None stands for a parameter's or constant's leaf."""
    leaves: dict[int, list[LogicalBuffer | None]] = {}
    for n, inst in enumerate(comp.instructions):
        if inst.opcode == "tuple":
            leaves[id(inst)] = [b for op in inst.operands for b in leaves[id(op)]]
        elif inst.opcode == "get_tuple_element":
            start, stop = leaf_range(inst.operands[0], inst.attrs["index"])
            leaves[id(inst)] = leaves[id(inst.operands[0])][start:stop]
        elif inst.opcode in _EXTERNAL:
            leaves[id(inst)] = [None] * len(inst.shape.leaves())
        else:
            leaves[id(inst)] = [LogicalBuffer(inst, i, s.nbytes, n)
                                for i, s in enumerate(inst.shape.leaves())]
    return leaves


def _compute_liveness(comp: Computation, leaves: dict[int, list[LogicalBuffer | None]]) -> None:
    end = len(comp.instructions)
    for n, inst in enumerate(comp.instructions):
        for buf in leaves[id(inst)]:
            if buf is not None and buf.defined_at == n:
                buf.last_use = max(buf.last_use, n)
        if inst.opcode in _ALIASING:
            continue  # aliasing is not a use; the users of the alias extend the liveness
        for op in inst.operands:
            for buf in leaves[id(op)]:
                if buf is not None:
                    buf.last_use = max(buf.last_use, n)
    for buf in leaves[id(comp.root)]:
        if buf is not None:
            buf.last_use = end


def _best_fit(free: list[Allocation], size: int) -> Allocation | None:
    fits = [a for a in free if a.size >= size]
    if not fits:
        return None
    return min(fits, key=lambda a: (a.size, a.index))


def assign_buffers(module: Module | Computation) -> BufferAssignment:
    """Assigns the values of the entry computation (or of ``module``, a computation) to
    reusable allocations.

    Args:
        module: a module (its entry computation is assigned) or a computation.

    Returns:
        A ``BufferAssignment``; ``allocation_of(inst)`` gives an instruction's allocation.
    """
    comp = module.entry if isinstance(module, Module) else module
    leaves = _define_leaves(comp)
    _compute_liveness(comp, leaves)
    defined: list[list[LogicalBuffer]] = [[] for _ in comp.instructions]
    for inst in comp.instructions:
        for buf in leaves[id(inst)]:
            if buf is not None and buf.instruction is inst:
                defined[buf.defined_at].append(buf)

    allocations: list[Allocation] = []
    free: list[Allocation] = []
    in_use: dict[int, LogicalBuffer] = {}  # allocation index -> the buffer it holds
    peak = 0
    for n in range(len(comp.instructions)):
        for index, buf in list(in_use.items()):
            if buf.last_use < n:
                del in_use[index]
                free.append(allocations[index])
        for buf in defined[n]:
            alloc = _best_fit(free, buf.size)
            if alloc is None:
                alloc = Allocation(len(allocations), buf.size)
                allocations.append(alloc)
            else:
                free.remove(alloc)
            alloc.buffers.append(buf)
            buf.allocation = alloc
            in_use[alloc.index] = buf
        peak = max(peak, sum(allocations[i].size for i in in_use))

    def external_bytes(opcode: str) -> int:
        return sum(i.shape.nbytes for i in comp.instructions if i.opcode == opcode)

    return BufferAssignment(
        computation=comp, allocations=allocations, peak_bytes=peak,
        parameter_bytes=external_bytes("parameter"), constant_bytes=external_bytes("constant"),
        output_bytes=comp.root.shape.nbytes, _leaves=leaves)
