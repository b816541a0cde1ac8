"""Tests of buffer assignment: liveness, best-fit reuse, aliasing, hand-computed peaks."""

import numpy as np
import pytest

from ember.compiler.buffer_assignment import assign_buffers
from ember.compiler.hlo import Builder, Module, Shape
from ember.compiler.passes.fusion import fuse_module

F32 = np.dtype(np.float32)
BIG = Shape(F32, (1024, 256))  # 1 MiB
MIB = 1024 * 1024


def chain(n):
    m = Module("chain")
    b = Builder(m, "main")
    x = b.parameter(0, BIG)
    v = x
    values = []
    for _ in range(n):
        v = b.op("negate", v)
        values.append(v)
    b.build(v, entry=True)
    return m, x, values


def test_elementwise_chain_needs_two_buffers():
    m, x, values = chain(10)
    a = assign_buffers(m)
    assert a.num_allocations == 2
    assert a.peak_bytes == 2 * MIB
    assert a.total_allocation_bytes == 2 * MIB
    assert a.parameter_bytes == MIB and a.output_bytes == MIB and a.constant_bytes == 0
    # Values alternate between the two allocations.
    allocs = [a.allocation_of(v).index for v in values]
    assert allocs == [0, 1] * 5
    assert a.allocation_of(x) is None


def test_value_live_across_a_use_keeps_its_buffer():
    m = Module("diamond")
    b = Builder(m, "main")
    x = b.parameter(0, BIG)
    p = b.op("add", x, x)         # live until r
    q = b.op("multiply", p, p)
    r = b.op("subtract", q, p)    # p, q die here; r is the output
    s = b.op("negate", r)
    b.build(s, entry=True)
    a = assign_buffers(m)
    # p, q live at r: three buffers at once; s reuses p's (freed after r).
    assert a.num_allocations == 3
    assert a.peak_bytes == 3 * MIB
    assert a.allocation_of(s) is a.allocation_of(p)
    assert len({id(a.allocation_of(v)) for v in (p, q, r)}) == 3


def test_best_fit_picks_the_smallest_free_allocation():
    m = Module("best_fit")
    b = Builder(m, "main")
    x = b.parameter(0, Shape(F32, (100,)))
    y = b.parameter(1, Shape(F32, (10,)))
    big = b.op("negate", x)                                    # 400 bytes
    small = b.op("negate", y)                                  # 40 bytes
    cat = b.op("concatenate", big, small, dimension=0)         # 440 bytes; big, small die
    out = b.op("slice", cat, start_indices=(0,), limit_indices=(10,), strides=(1,))  # 40
    b.build(out, entry=True)
    a = assign_buffers(m)
    assert a.allocation_of(out) is a.allocation_of(small)     # not big's 400-byte block
    assert a.num_allocations == 3
    assert a.peak_bytes == 400 + 40 + 440
    assert a.total_allocation_bytes == 880
    assert a.parameter_bytes == 440


def test_dead_value_is_freed_right_after_it_is_defined():
    m = Module("dead")
    b = Builder(m, "main")
    x = b.parameter(0, BIG)
    b.op("exponential", x)  # unused
    y = b.op("negate", x)
    b.build(y, entry=True)
    a = assign_buffers(m)
    assert a.num_allocations == 1
    assert a.peak_bytes == MIB


def test_multi_output_fusion_tuple_and_get_tuple_element_alias():
    m = Module("mof")
    b = Builder(m, "main")
    x = b.parameter(0, BIG)
    e = b.op("exponential", x)
    b.build(b.op("tuple", b.op("add", e, x), b.op("multiply", e, e)), entry=True)
    assert fuse_module(m)
    a = assign_buffers(m)
    fusion, gte0, gte1, root = m.entry.instructions[1:]
    assert fusion.opcode == "fusion" and root.opcode == "tuple"
    leaves = a.allocations_of(fusion)
    assert len(leaves) == 2 and leaves[0] is not leaves[1]
    assert a.allocation_of(gte0) is leaves[0] and a.allocation_of(gte1) is leaves[1]
    assert a.allocations_of(root) == leaves
    assert a.num_allocations == 2 and a.peak_bytes == 2 * MIB
    with pytest.raises(ValueError, match="tuple"):
        a.allocation_of(fusion)


def test_tuple_elements_stay_live_while_the_tuple_is_used():
    m = Module("tuple_use")
    b = Builder(m, "main")
    x = b.parameter(0, BIG)
    p = b.op("negate", x)
    t = b.op("tuple", p, x)
    q = b.op("exponential", x)  # p is still live: its tuple is read below
    g = b.op("get_tuple_element", t, index=0)
    b.build(b.op("add", g, q), entry=True)
    a = assign_buffers(m)
    assert a.allocation_of(g) is a.allocation_of(p)
    assert a.allocation_of(q) is not a.allocation_of(p)
    assert a.peak_bytes == 3 * MIB  # p, q and the result at the final add


def test_fusion_reduces_the_peak():
    m, _, _ = chain(6)
    assert assign_buffers(m).peak_bytes == 2 * MIB
    fuse_module(m)
    fused = assign_buffers(m)
    assert fused.num_allocations == 1 and fused.peak_bytes == MIB


def test_parameter_root_and_constants_are_not_allocated():
    m = Module("params")
    b = Builder(m, "main")
    x = b.parameter(0, Shape(F32, (8,)))
    c = b.constant(np.arange(8, dtype=F32))
    b.build(b.op("tuple", x, c), entry=True)
    a = assign_buffers(m)
    assert a.num_allocations == 0 and a.peak_bytes == 0
    assert a.parameter_bytes == 32 and a.constant_bytes == 32 and a.output_bytes == 64
    assert a.allocation_of(c) is None
    with pytest.raises(KeyError):
        a.allocations_of(chain(1)[1])


def test_live_ranges_are_reported_per_buffer():
    m, _, values = chain(3)
    a = assign_buffers(m)
    ranges = {b.instruction.name: (b.defined_at, b.last_use) for b in a.buffers()}
    assert ranges == {values[0].name: (1, 2), values[1].name: (2, 3), values[2].name: (3, 4)}
