"""Tests of cost analysis against hand-computed flops, transcendentals and bytes."""

import numpy as np

from ember.compiler.cost_analysis import cost_analysis, instruction_cost
from ember.compiler.hlo import Builder, Module, Shape
from ember.compiler.passes.fusion import fuse_module

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)


def region(m, opcode, dtype=F32):
    b = Builder(m, m.new_name("region"))
    x = b.parameter(0, Shape(dtype, ()))
    y = b.parameter(1, Shape(dtype, ()))
    return b.build(b.op(opcode, x, y))


def cost(flops, transcendentals, nbytes):
    return {"flops": float(flops), "transcendentals": float(transcendentals),
            "bytes accessed": float(nbytes)}


def elementwise_module():
    m = Module("ew")
    b = Builder(m, "main")
    x = b.parameter(0, Shape(F32, (10, 20)))
    y = b.parameter(1, Shape(F32, (10, 20)))
    s = b.op("add", x, y)                      # 200 flops, reads 1600, writes 800
    e = b.op("exponential", s)                 # 200 transcendentals, 800 + 800
    b.build(b.op("multiply", e, x), entry=True)  # 200 flops, 1600 + 800
    return m


def test_elementwise_flops_transcendentals_and_bytes():
    assert cost_analysis(elementwise_module()) == cost(400, 200, 2400 + 1600 + 2400)


def test_fusion_counts_only_its_operands_and_result():
    m = elementwise_module()
    assert fuse_module(m)
    # One kernel: reads x and y (1600 bytes), writes the result (800 bytes).
    assert cost_analysis(m) == cost(400, 200, 2400)


def test_dot_general_with_batch_dimensions():
    m = Module("dot")
    b = Builder(m, "main")
    lhs = b.parameter(0, Shape(F32, (2, 3, 4)))   # batch 2, M 3, K 4
    rhs = b.parameter(1, Shape(F32, (2, 4, 5)))   # batch 2, K 4, N 5
    b.build(b.op("dot_general", lhs, rhs, lhs_batching_dimensions=(0,),
                 rhs_batching_dimensions=(0,), lhs_contracting_dimensions=(2,),
                 rhs_contracting_dimensions=(1,)), entry=True)
    assert cost_analysis(m) == cost(2 * 2 * 3 * 5 * 4, 0, (24 + 40 + 30) * 4)


def test_dot_flops_are_the_part_of_the_flops_in_products():
    m = Module("dots")
    b = Builder(m, "main")
    a = b.parameter(0, Shape(F32, (16, 32)))
    w = b.parameter(1, Shape(F32, (32, 8)))
    d = b.op("dot_general", a, w, lhs_batching_dimensions=(), rhs_batching_dimensions=(),
             lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(0,))
    b.build(b.op("add", d, d), entry=True)  # 128 more flops, not a product's
    dot = 2 * 16 * 8 * 32
    assert cost_analysis(m, dot_flops=True) == {**cost(dot + 128, 0, cost_analysis(m)[
        "bytes accessed"]), "dot flops": float(dot)}
    assert "dot flops" not in cost_analysis(m)  # (JAX's keys by default)


def test_matmul_of_float64():
    m = Module("matmul")
    b = Builder(m, "main")
    a = b.parameter(0, Shape(F64, (16, 32)))
    w = b.parameter(1, Shape(F64, (32, 8)))
    b.build(b.op("dot_general", a, w, lhs_batching_dimensions=(), rhs_batching_dimensions=(),
                 lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(0,)), entry=True)
    assert cost_analysis(m) == cost(2 * 16 * 8 * 32, 0, (16 * 32 + 32 * 8 + 16 * 8) * 8)


def test_reduce_costs_one_body_per_input_element():
    m = Module("reduce")
    add = region(m, "add")
    b = Builder(m, "main")
    x = b.parameter(0, Shape(F32, (6, 7)))
    b.build(b.op("reduce", x, b.constant(0.0, F32), dimensions=(1,), calls=[add]),
            entry=True)
    # 42 adds; reads 42 floats and the init, writes 6.
    assert cost_analysis(m) == cost(42, 0, 42 * 4 + 4 + 6 * 4)


def test_input_fusion_of_a_reduction():
    m = Module("sumsq")
    add = region(m, "add")
    b = Builder(m, "main")
    x = b.parameter(0, Shape(F32, (6, 7)))
    sq = b.op("multiply", x, x)
    b.build(b.op("reduce", sq, b.constant(0.0, F32), dimensions=(0, 1), calls=[add]),
            entry=True)
    unfused = cost_analysis(m)
    assert unfused == cost(84, 0, (42 + 42) * 4 + 42 * 4 + (42 * 4 + 4) + 4)
    fuse_module(m)
    assert cost_analysis(m) == cost(84, 0, 42 * 4 + 4)


def test_free_instructions_cost_nothing():
    m = Module("free")
    b = Builder(m, "main")
    x = b.parameter(0, Shape(F32, (4,)))
    c = b.constant(np.ones(4, F32))
    t = b.op("tuple", x, c)
    b.build(b.op("get_tuple_element", t, index=0), entry=True)
    assert cost_analysis(m) == cost(0, 0, 0)
    for inst in m.entry.instructions:
        assert instruction_cost(inst) == cost(0, 0, 0)


def test_data_movement_costs_bytes_but_no_flops():
    m = Module("move")
    b = Builder(m, "main")
    x = b.parameter(0, Shape(F32, (4, 8)))
    t = b.op("transpose", x, permutation=(1, 0), shape=Shape(F32, (8, 4)))
    bc = b.op("broadcast_in_dim", b.constant(1.0, F32), shape=Shape(F32, (8, 4)),
              broadcast_dimensions=())
    b.build(b.op("tuple", t, bc), entry=True)
    assert cost_analysis(m) == cost(0, 0, (128 + 128) + (4 + 128))


def test_call_costs_its_computation():
    m = Module("call")
    cb = Builder(m, "callee")
    p = cb.parameter(0, Shape(F32, (5,)))
    callee = cb.build(cb.op("tanh", cb.op("add", p, p)))
    b = Builder(m, "main")
    x = b.parameter(0, Shape(F32, (5,)))
    b.build(b.op("call", x, calls=[callee]), entry=True)
    assert cost_analysis(m) == cost(5, 5, (40 + 20) + (20 + 20))


def test_case_costs_its_most_expensive_branch():
    m = Module("case")
    branches = []
    for name in ("cheap", "costly"):
        cb = Builder(m, name)
        p = cb.parameter(0, Shape(F32, (5,)))
        if name == "cheap":
            branches.append(cb.build(cb.op("negate", p)))
        else:
            branches.append(cb.build(cb.op("exponential", cb.op("multiply", p, p))))
    b = Builder(m, "main")
    i = b.parameter(0, Shape(np.int32, ()))
    x = b.parameter(1, Shape(F32, (5,)))
    b.build(b.op("case", i, x, calls=branches), entry=True)
    assert cost_analysis(m) == cost(5, 5, (40 + 20) + (20 + 20))
