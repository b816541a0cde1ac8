"""Tests of the fusion pass: golden HLO text, evaluation before/after, verifier, fuzzing."""

import random
import textwrap

import numpy as np
import pytest

from ember.compiler.evaluator import evaluate_computation
from ember.compiler.hlo import Builder, Module, Shape
from ember.compiler.passes.fusion import (
    EXPENSIVE_CODE_COST,
    MAX_EVALUATIONS,
    MAX_EXPENSIVE_EVALUATIONS,
    MAX_FUSED_CONCAT_OPERANDS,
    MAX_FUSION_COST,
    MAX_SCATTER_FUSION_COST,
    _code_cost,
    evaluation_counts,
    fuse_module,
)
from ember.compiler.pipeline import optimize
from ember.compiler.verifier import verify_module

F32 = np.dtype(np.float32)
S32 = np.dtype(np.int32)
X = Shape(F32, (4, 8))


def region(m, opcode, name="region_sum"):
    b = Builder(m, m.new_name(name))
    x = b.parameter(0, Shape(F32, ()), name=m.new_name("x"))
    y = b.parameter(1, Shape(F32, ()), name=m.new_name("y"))
    return b.build(b.op(opcode, x, y))


def splat(b, value, shape=X):
    return b.op("broadcast_in_dim", b.constant(value, F32), shape=shape, broadcast_dimensions=())


def reduce_sum(b, x, body, dims=(1,)):
    return b.op("reduce", x, b.constant(0.0, F32), dimensions=dims, calls=[body])


def flat(value):
    return list(value) if isinstance(value, tuple) else [value]


def check_fusion(m, args):
    """Fuses ``m``, checking the verifier and that evaluation is unchanged; returns text."""
    before = flat(evaluate_computation(m.entry, args))
    assert fuse_module(m)
    verify_module(m)
    after = flat(evaluate_computation(m.entry, args))
    assert len(before) == len(after)
    for want, got in zip(before, after):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert not fuse_module(m)  # idempotent
    return m.to_text()


def golden(text):
    return textwrap.dedent(text).strip() + "\n"


def same_text(got, want):
    assert got.strip() == golden(want).strip(), got


def opcodes(comp):
    return [i.opcode for i in comp.instructions]


def fused_opcodes(m):
    return [i.opcode for c in m.computations if c.name.startswith("fused_computation")
            for i in c.instructions]


def rand(*shape, seed=0):
    return np.random.RandomState(seed).rand(*shape).astype(F32)


# --------------------------------------------------------------------------- golden cases


def elementwise_chain():
    m = Module("chain")
    b = Builder(m, "main")
    x = b.parameter(0, X)
    y = b.op("multiply", b.op("add", x, x), splat(b, 2.0))
    b.build(b.op("negate", b.op("subtract", y, x)), entry=True)
    return m


def test_elementwise_chain_is_one_loop_fusion():
    m = elementwise_chain()
    same_text(check_fusion(m, [rand(4, 8)]), """
        HloModule chain

        %fused_computation.8 (param_0.9: f32[4,8]) -> f32[4,8] {
          %param_0.9 = f32[4,8] parameter(0)
          %add.10 = f32[4,8] add(%param_0.9, %param_0.9)
          %constant.11 = f32[] constant(2)
          %broadcast_in_dim.12 = f32[4,8] broadcast_in_dim(%constant.11), broadcast_dimensions={}
          %multiply.13 = f32[4,8] multiply(%add.10, %broadcast_in_dim.12)
          %subtract.14 = f32[4,8] subtract(%multiply.13, %param_0.9)
          ROOT %negate.15 = f32[4,8] negate(%subtract.14)
        }

        ENTRY %main (Arg_0.1: f32[4,8]) -> f32[4,8] {
          %Arg_0.1 = f32[4,8] parameter(0)
          ROOT %fusion.16 = f32[4,8] fusion(%Arg_0.1), kind=loop, calls={%fused_computation.8}
        }
    """)  # noqa: E501 (golden HLO lines are long)


def exp_two_consumers():
    m = Module("exp2")
    b = Builder(m, "main")
    x = b.parameter(0, X)
    e = b.op("exponential", x)
    a = b.op("add", e, x)
    c = b.op("multiply", e, e)
    b.build(b.op("tuple", a, c), entry=True)
    return m


def test_exp_feeding_two_consumers_is_not_duplicated():
    m = exp_two_consumers()
    same_text(check_fusion(m, [rand(4, 8)]), """
        HloModule exp2

        %fused_computation.6 (param_0.7: f32[4,8]) -> (f32[4,8], f32[4,8]) {
          %param_0.7 = f32[4,8] parameter(0)
          %exponential.8 = f32[4,8] exponential(%param_0.7)
          %add.9 = f32[4,8] add(%exponential.8, %param_0.7)
          %multiply.10 = f32[4,8] multiply(%exponential.8, %exponential.8)
          ROOT %tuple.11 = (f32[4,8], f32[4,8]) tuple(%add.9, %multiply.10)
        }

        ENTRY %main (Arg_0.1: f32[4,8]) -> (f32[4,8], f32[4,8]) {
          %Arg_0.1 = f32[4,8] parameter(0)
          %fusion.12 = (f32[4,8], f32[4,8]) fusion(%Arg_0.1), kind=loop, calls={%fused_computation.6}
          %get_tuple_element.13 = f32[4,8] get_tuple_element(%fusion.12), index=0
          %get_tuple_element.14 = f32[4,8] get_tuple_element(%fusion.12), index=1
          ROOT %tuple.5 = (f32[4,8], f32[4,8]) tuple(%get_tuple_element.13, %get_tuple_element.14)
        }
    """)  # noqa: E501 (golden HLO lines are long)


def reduce_of_elementwise():
    m = Module("reduce_ew")
    body = region(m, "add")
    b = Builder(m, "main")
    x = b.parameter(0, X)
    y = b.op("add", b.op("multiply", x, x), splat(b, 1.0))
    b.build(reduce_sum(b, y, body), entry=True)
    return m


def test_reduce_fed_by_elementwise_is_input_fusion():
    m = reduce_of_elementwise()
    same_text(check_fusion(m, [rand(4, 8)]), """
        HloModule reduce_ew

        %region_sum.1 (x.2: f32[], y.3: f32[]) -> f32[] {
          %x.2 = f32[] parameter(0)
          %y.3 = f32[] parameter(1)
          ROOT %add.4 = f32[] add(%x.2, %y.3)
        }

        %fused_computation.12 (param_0.13: f32[4,8]) -> f32[4] {
          %param_0.13 = f32[4,8] parameter(0)
          %multiply.14 = f32[4,8] multiply(%param_0.13, %param_0.13)
          %constant.15 = f32[] constant(1)
          %broadcast_in_dim.16 = f32[4,8] broadcast_in_dim(%constant.15), broadcast_dimensions={}
          %add.17 = f32[4,8] add(%multiply.14, %broadcast_in_dim.16)
          %constant.18 = f32[] constant(0)
          ROOT %reduce.19 = f32[4] reduce(%add.17, %constant.18), dimensions={1}, calls={%region_sum.1}
        }

        ENTRY %main (Arg_0.5: f32[4,8]) -> f32[4] {
          %Arg_0.5 = f32[4,8] parameter(0)
          ROOT %fusion.20 = f32[4] fusion(%Arg_0.5), kind=input, calls={%fused_computation.12}
        }
    """)  # noqa: E501 (golden HLO lines are long)


def sibling_reductions():
    m = Module("siblings")
    add = region(m, "add")
    mx = region(m, "maximum", "region_max")
    b = Builder(m, "main")
    x = b.parameter(0, X)
    s = reduce_sum(b, x, add)
    q = reduce_sum(b, b.op("multiply", x, x), add)
    t = b.op("reduce", x, b.constant(-np.inf, F32), dimensions=(1,), calls=[mx])
    b.build(b.op("tuple", s, q, t), entry=True)
    return m


def test_sibling_reductions_are_one_multi_output_fusion():
    m = sibling_reductions()
    same_text(check_fusion(m, [rand(4, 8)]), """
        HloModule siblings

        %region_sum.1 (x.2: f32[], y.3: f32[]) -> f32[] {
          %x.2 = f32[] parameter(0)
          %y.3 = f32[] parameter(1)
          ROOT %add.4 = f32[] add(%x.2, %y.3)
        }

        %region_max.5 (x.6: f32[], y.7: f32[]) -> f32[] {
          %x.6 = f32[] parameter(0)
          %y.7 = f32[] parameter(1)
          ROOT %maximum.8 = f32[] maximum(%x.6, %y.7)
        }

        %fused_computation.18 (param_0.19: f32[4,8]) -> (f32[4], f32[4], f32[4]) {
          %param_0.19 = f32[4,8] parameter(0)
          %constant.20 = f32[] constant(0)
          %reduce.21 = f32[4] reduce(%param_0.19, %constant.20), dimensions={1}, calls={%region_sum.1}
          %multiply.22 = f32[4,8] multiply(%param_0.19, %param_0.19)
          %constant.23 = f32[] constant(0)
          %reduce.24 = f32[4] reduce(%multiply.22, %constant.23), dimensions={1}, calls={%region_sum.1}
          %constant.25 = f32[] constant(-inf)
          %reduce.26 = f32[4] reduce(%param_0.19, %constant.25), dimensions={1}, calls={%region_max.5}
          ROOT %tuple.27 = (f32[4], f32[4], f32[4]) tuple(%reduce.21, %reduce.24, %reduce.26)
        }

        ENTRY %main (Arg_0.9: f32[4,8]) -> (f32[4], f32[4], f32[4]) {
          %Arg_0.9 = f32[4,8] parameter(0)
          %fusion.28 = (f32[4], f32[4], f32[4]) fusion(%Arg_0.9), kind=input, calls={%fused_computation.18}
          %get_tuple_element.29 = f32[4] get_tuple_element(%fusion.28), index=0
          %get_tuple_element.30 = f32[4] get_tuple_element(%fusion.28), index=1
          %get_tuple_element.31 = f32[4] get_tuple_element(%fusion.28), index=2
          ROOT %tuple.17 = (f32[4], f32[4], f32[4]) tuple(%get_tuple_element.29, %get_tuple_element.30, %get_tuple_element.31)
        }
    """)  # noqa: E501 (golden HLO lines are long)


def dot_between_chains():
    m = Module("dot")
    b = Builder(m, "main")
    x = b.parameter(0, X)
    w = b.parameter(1, Shape(F32, (8, 3)))
    h = b.op("multiply", b.op("add", x, x), x)
    d = b.op("dot_general", h, w, lhs_batching_dimensions=(), rhs_batching_dimensions=(),
             lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(0,))
    b.build(b.op("tanh", b.op("add", d, splat(b, 1.0, Shape(F32, (4, 3))))), entry=True)
    return m


def test_dot_general_between_elementwise_chains_is_not_fused_through():
    m = dot_between_chains()
    same_text(check_fusion(m, [rand(4, 8), rand(8, 3, seed=1)]), """
        HloModule dot

        %fused_computation.10 (param_0.11: f32[4,8]) -> f32[4,8] {
          %param_0.11 = f32[4,8] parameter(0)
          %add.12 = f32[4,8] add(%param_0.11, %param_0.11)
          ROOT %multiply.13 = f32[4,8] multiply(%add.12, %param_0.11)
        }

        %fused_computation.15 (param_0.16: f32[4,3]) -> f32[4,3] {
          %param_0.16 = f32[4,3] parameter(0)
          %constant.17 = f32[] constant(1)
          %broadcast_in_dim.18 = f32[4,3] broadcast_in_dim(%constant.17), broadcast_dimensions={}
          %add.19 = f32[4,3] add(%param_0.16, %broadcast_in_dim.18)
          ROOT %tanh.20 = f32[4,3] tanh(%add.19)
        }

        ENTRY %main (Arg_0.1: f32[4,8], Arg_1.2: f32[8,3]) -> f32[4,3] {
          %Arg_0.1 = f32[4,8] parameter(0)
          %Arg_1.2 = f32[8,3] parameter(1)
          %fusion.14 = f32[4,8] fusion(%Arg_0.1), kind=loop, calls={%fused_computation.10}
          %dot_general.5 = f32[4,3] dot_general(%fusion.14, %Arg_1.2), lhs_batching_dimensions={}, lhs_contracting_dimensions={1}, rhs_batching_dimensions={}, rhs_contracting_dimensions={0}
          ROOT %fusion.21 = f32[4,3] fusion(%dot_general.5), kind=loop, calls={%fused_computation.15}
        }
    """)  # noqa: E501 (golden HLO lines are long)


# --------------------------------------------------------------------------- rules


def test_expensive_producer_with_unfusible_user_becomes_an_extra_output():
    # exp feeds a dot and an add: it is computed once, in the add's fusion, as a 2nd output.
    m = Module("extra_output")
    b = Builder(m, "main")
    x = b.parameter(0, Shape(F32, (4, 4)))
    e = b.op("exponential", x)
    d = b.op("dot_general", e, x, lhs_batching_dimensions=(), rhs_batching_dimensions=(),
             lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(0,))
    b.build(b.op("tuple", b.op("add", e, x), d), entry=True)
    check_fusion(m, [rand(4, 4)])
    assert fused_opcodes(m).count("exponential") == 1
    assert "exponential" not in opcodes(m.entry)
    (fusion,) = [i for i in m.entry.instructions if i.opcode == "fusion"]
    assert fusion.shape.is_tuple and len(fusion.shape.tuple_shapes) == 2
    (dot,) = [i for i in m.entry.instructions if i.opcode == "dot_general"]
    assert dot.operands[0].opcode == "get_tuple_element"


def incompatible_reductions(producer):
    m = Module("dup")
    add = region(m, "add")
    b = Builder(m, "main")
    x = b.parameter(0, X)
    p = b.op(producer, x, x) if producer != "exponential" else b.op(producer, x)
    r0 = reduce_sum(b, b.op("negate", p), add, dims=(0,))
    r1 = reduce_sum(b, b.op("abs", p), add, dims=(1,))
    b.build(b.op("tuple", r0, r1), entry=True)
    return m


def test_cheap_producer_is_duplicated_into_consumers():
    m = incompatible_reductions("add")
    check_fusion(m, [rand(4, 8)])
    # Reductions over different dimensions do not share a fusion; the add is copied into both.
    assert fused_opcodes(m).count("add") == 2
    assert opcodes(m.entry).count("fusion") == 2
    assert "add" not in opcodes(m.entry)


def test_expensive_producer_is_not_duplicated():
    m = incompatible_reductions("exponential")
    check_fusion(m, [rand(4, 8)])
    assert fused_opcodes(m).count("exponential") == 1
    assert opcodes(m.entry).count("fusion") == 2


def broadcast_product(producer):
    """(4, 8) -> producer -> a cheap op -> broadcast to (4, 8, 16) -> multiply."""
    m = Module("reuse")
    b = Builder(m, "main")
    x = b.parameter(0, X)
    y = b.parameter(1, Shape(F32, (4, 16)))
    p = b.op(producer, x)
    q = b.op("multiply", p, splat(b, 2.0))
    big = Shape(F32, (4, 8, 16))
    out = b.op("multiply", b.op("broadcast_in_dim", q, shape=big, broadcast_dimensions=(0, 1)),
               b.op("broadcast_in_dim", y, shape=big, broadcast_dimensions=(0, 2)))
    b.build(out, entry=True)
    return m


def test_expensive_producer_read_through_an_expanding_broadcast_is_computed_once():
    m = broadcast_product("tanh")
    check_fusion(m, [rand(4, 8), rand(4, 16, seed=1)])
    # tanh in a fusion of its own (4 x 8 values), not once per element of the (4, 8, 16)
    # product; the cheap multiply is fused into the product.
    assert opcodes(m.entry).count("fusion") == 2
    small, big = [c for c in m.computations if c.name.startswith("fused_computation")]
    assert "tanh" in opcodes(small) and "tanh" not in opcodes(big)
    assert opcodes(big).count("multiply") == 2
    cheap = broadcast_product("negate")
    check_fusion(cheap, [rand(4, 8), rand(4, 16, seed=1)])
    assert opcodes(cheap.entry).count("fusion") == 1


def test_expensive_row_values_of_reductions_stay_in_row_fusions():
    # layernorm's rsqrt(var + eps) per row, broadcast back along the row: one fusion
    m = Module("layernorm")
    b = Builder(m, "main")
    x = b.parameter(0, X)
    add = region(m, "add")
    rows = Shape(F32, (4,))
    mean = b.op("multiply", reduce_sum(b, x, add), splat(b, 1 / 8, rows))
    centered = b.op("subtract", x, b.op("broadcast_in_dim", mean, shape=X,
                                        broadcast_dimensions=(0,)))
    var = b.op("multiply", reduce_sum(b, b.op("multiply", centered, centered), add),
               splat(b, 1 / 8, rows))
    scale = b.op("rsqrt", b.op("add", var, splat(b, 1e-5, rows)))
    b.build(b.op("multiply", centered, b.op("broadcast_in_dim", scale, shape=X,
                                            broadcast_dimensions=(0,))), entry=True)
    check_fusion(m, [rand(4, 8)])
    assert opcodes(m.entry).count("fusion") == 1


def test_no_cycle_through_an_unfused_instruction():
    # a = x + x feeds both dot(a, x) and a + dot: a fusion of a with the final add would
    # need the dot, which needs a: the cheap add is duplicated instead.
    for first in ("add", "exponential"):
        m = Module("cycle")
        b = Builder(m, "main")
        x = b.parameter(0, Shape(F32, (4, 4)))
        a = b.op(first, x, x) if first == "add" else b.op(first, x)
        d = b.op("dot_general", a, x, lhs_batching_dimensions=(), rhs_batching_dimensions=(),
                 lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(0,))
        b.build(b.op("multiply", a, d), entry=True)
        check_fusion(m, [rand(4, 4)])
        assert opcodes(m.entry).count("fusion") == 2
        assert fused_opcodes(m).count(first) == (2 if first == "add" else 1)


def test_unfusible_ops_stay_unfused():
    m = Module("unfusible")
    b = Builder(m, "main")
    x = b.parameter(0, X)
    y = b.op("add", x, x)
    d = b.op("dot_general", y, x, lhs_batching_dimensions=(), rhs_batching_dimensions=(),
             lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(1,))
    b.build(b.op("negate", d), entry=True)
    text = check_fusion(m, [rand(4, 8)])
    assert opcodes(m.entry) == ["parameter", "fusion", "dot_general", "fusion"]
    assert "dot_general" not in fused_opcodes(m), text


def test_dynamic_slices_and_gathers_fuse_with_producers_and_consumers():
    m = Module("slices")
    b = Builder(m, "main")
    x = b.parameter(0, X)
    i = b.parameter(1, Shape(S32, ()))
    idx = b.parameter(2, Shape(S32, (5, 1)))
    y = b.op("add", x, x)
    s = b.op("dynamic_slice", y, i, i, slice_sizes=(2, 2))
    g = b.op("gather", y, idx, offset_dims=(1,), collapsed_slice_dims=(0,),
             start_index_map=(0,), operand_batching_dims=(), start_indices_batching_dims=(),
             index_vector_dim=1, slice_sizes=(1, 8), indices_are_sorted=False)
    b.build(b.op("tuple", b.op("negate", s), b.op("negate", g)), entry=True)
    check_fusion(m, [rand(4, 8), np.int32(1), np.array([[3], [0], [9], [-1], [2]], np.int32)])
    assert "dynamic_slice" in fused_opcodes(m) and "gather" in fused_opcodes(m)
    assert "dynamic_slice" not in opcodes(m.entry) and "gather" not in opcodes(m.entry)


def test_scatter_is_the_root_of_its_own_fusion_with_its_producers():
    """segment_sum's shape: the index wrap and the zero operand fuse into the scatter, which
    stays the only output of its fusion (a consumer is not fused with it)."""
    m = Module("scatter")
    b = Builder(m, "main")
    v = b.parameter(0, Shape(F32, (6,)))
    ids = b.parameter(1, Shape(S32, (6,)))
    n = b.op("broadcast_in_dim", b.constant(np.int32(4)), shape=Shape(S32, (6,)),
             broadcast_dimensions=())
    zero_ids = b.op("broadcast_in_dim", b.constant(np.int32(0)), shape=Shape(S32, (6,)),
                    broadcast_dimensions=())
    wrapped = b.op("select", b.op("compare", ids, zero_ids, comparison_direction="LT"),
                   b.op("add", ids, n), ids)
    zeros = b.op("broadcast_in_dim", b.constant(np.float32(0)), shape=Shape(F32, (4,)),
                 broadcast_dimensions=())
    rb = Builder(m, "scatter_add")
    body = rb.build(rb.op("add", rb.parameter(0, Shape(F32, ())),
                          rb.parameter(1, Shape(F32, ()))))
    summed = b.op("scatter", zeros, b.op("reshape", wrapped, shape=Shape(S32, (6, 1))),
                  b.op("exponential", v), update_window_dims=(), inserted_window_dims=(0,),
                  scatter_dims_to_operand_dims=(0,), input_batching_dims=(),
                  scatter_indices_batching_dims=(), index_vector_dim=1,
                  indices_are_sorted=False, unique_indices=False, calls=[body],
                  shape=Shape(F32, (4,)))
    b.build(b.op("negate", summed), entry=True)
    check_fusion(m, [rand(6), np.array([0, -1, 3, 3, 9, -4], np.int32)])
    assert opcodes(m.entry) == ["parameter", "parameter", "fusion", "fusion"]
    scatter_fusion = m.entry.instructions[2].calls[0]
    assert scatter_fusion.root.opcode == "scatter"
    assert {"select", "exponential"} <= set(opcodes(scatter_fusion))


def _scatter_add(m, b, operand, ids, updates):
    rb = Builder(m, m.new_name("scatter_add"))
    body = rb.build(rb.op("add", rb.parameter(0, Shape(F32, ())),
                          rb.parameter(1, Shape(F32, ()))))
    n = ids.shape.dims[0]
    return b.op("scatter", operand, b.op("reshape", ids, shape=Shape(S32, (n, 1))), updates,
                update_window_dims=(), inserted_window_dims=(0,),
                scatter_dims_to_operand_dims=(0,), input_batching_dims=(),
                scatter_indices_batching_dims=(), index_vector_dim=1,
                indices_are_sorted=False, unique_indices=False, calls=[body],
                shape=operand.shape)


def test_a_long_index_computation_is_not_fused_into_a_scatter():
    """A scatter's kernel is serial: an index chain past MAX_SCATTER_FUSION_COST runs in a
    loop fusion of its own (threaded, vectorized) whose result the scatter reads: all of it,
    so that the loop fusion writes the index alone (not every value a part of the chain
    fused into the scatter would read)."""
    m = Module("scatter_chain")
    b = Builder(m, "main")
    v = b.parameter(0, Shape(F32, (6,)))
    x = b.parameter(1, Shape(F32, (6,)))
    for _ in range(MAX_SCATTER_FUSION_COST):  # a chain costing more than the budget
        x = b.op("add", b.op("multiply", x, x), splat(b, 0.25, Shape(F32, (6,))))
    ids = b.op("convert", b.op("floor", b.op("multiply", b.op("tanh", x),
                                             splat(b, 3.0, Shape(F32, (6,))))),
               shape=Shape(S32, (6,)))
    zeros = b.op("broadcast_in_dim", b.constant(np.float32(0)), shape=Shape(F32, (4,)),
                 broadcast_dimensions=())
    b.build(_scatter_add(m, b, zeros, ids, v), entry=True)
    check_fusion(m, [rand(6), rand(6, seed=1) - 0.5])
    fusions = [i for i in m.entry.instructions if i.opcode == "fusion"]
    assert len(fusions) == 2
    scatter_fusion = next(f.calls[0] for f in fusions if f.calls[0].root.opcode == "scatter")
    assert sum(_code_cost(i) for i in scatter_fusion.instructions
               if i.opcode != "parameter") <= MAX_SCATTER_FUSION_COST
    assert not {"multiply", "tanh", "floor", "convert"} & set(opcodes(scatter_fusion))
    (index_fusion,) = [f for f in fusions if f.calls[0].root.opcode != "scatter"]
    assert not index_fusion.shape.is_tuple  # (one output: the index)


def test_a_short_index_computation_is_fused_into_a_scatter():
    m = Module("scatter_short")
    b = Builder(m, "main")
    v = b.parameter(0, Shape(F32, (6,)))
    ids = b.op("add", b.parameter(1, Shape(S32, (6,))),
               b.op("broadcast_in_dim", b.constant(np.int32(1)), shape=Shape(S32, (6,)),
                    broadcast_dimensions=()))
    zeros = b.op("broadcast_in_dim", b.constant(np.float32(0)), shape=Shape(F32, (8,)),
                 broadcast_dimensions=())
    b.build(_scatter_add(m, b, zeros, ids, v), entry=True)
    check_fusion(m, [rand(6), np.array([0, 1, 6, 6, 2, -9], np.int32)])
    assert [i.opcode for i in m.entry.instructions].count("fusion") == 1


def _gather_rows(b, table, ids, n):
    return b.op("gather", table, b.op("reshape", ids, shape=Shape(S32, (n, 1))),
                offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,),
                operand_batching_dims=(), start_indices_batching_dims=(),
                index_vector_dim=1, slice_sizes=(1,), indices_are_sorted=False,
                shape=Shape(F32, (n,)))


def test_a_computed_table_read_by_a_gather_is_computed_once():
    """A table gathered from that is computed from two arrays (a concatenate) would cost a
    vector gather per array in the consumer's kernel: it runs once into a buffer instead."""
    m = Module("table")
    b = Builder(m, "main")
    lo, hi = b.parameter(0, Shape(F32, (3,))), b.parameter(1, Shape(F32, (2,)))
    ids = b.parameter(2, Shape(S32, (40,)))
    table = b.op("concatenate", b.op("exponential", lo), hi, dimension=0,
                 shape=Shape(F32, (5,)))
    b.build(b.op("negate", _gather_rows(b, table, ids, 40)), entry=True)
    check_fusion(m, [rand(3), rand(2, seed=1), np.arange(40, dtype=np.int32) % 5])
    fusions = [i for i in m.entry.instructions if i.opcode == "fusion"]
    assert len(fusions) == 2
    gathering = next(f.calls[0] for f in fusions if "gather" in opcodes(f.calls[0]))
    assert "concatenate" not in opcodes(gathering)


def test_a_table_of_one_array_stays_fused_into_its_gather():
    """One array read through index arithmetic (a reshape, a scale) costs one gather either
    way: it stays in the gathering kernel."""
    m = Module("table1")
    b = Builder(m, "main")
    x = b.parameter(0, Shape(F32, (2, 3)))
    ids = b.parameter(1, Shape(S32, (40,)))
    table = b.op("multiply", b.op("reshape", x, shape=Shape(F32, (6,))),
                 splat(b, 2.0, Shape(F32, (6,))))
    b.build(b.op("negate", _gather_rows(b, table, ids, 40)), entry=True)
    check_fusion(m, [rand(2, 3), np.arange(40, dtype=np.int32) % 6])
    assert [i.opcode for i in m.entry.instructions].count("fusion") == 1


def test_lone_data_movement_is_not_fused_but_lone_elementwise_is():
    m = Module("lone")
    b = Builder(m, "main")
    x = b.parameter(0, X)
    t = b.op("transpose", x, permutation=(1, 0), shape=Shape(F32, (8, 4)))
    b.build(b.op("tuple", t, b.op("exponential", x)), entry=True)
    check_fusion(m, [rand(4, 8)])
    assert opcodes(m.entry) == ["parameter", "transpose", "fusion", "tuple"]


def test_nothing_to_fuse_returns_false():
    m = Module("nothing")
    b = Builder(m, "main")
    x = b.parameter(0, X)
    b.build(b.op("reshape", x, shape=Shape(F32, (32,))), entry=True)
    before = m.to_text()
    assert not fuse_module(m)
    assert m.to_text() == before


def test_constants_scalar_pulled_in_array_passed_as_parameter():
    m = Module("consts")
    b = Builder(m, "main")
    x = b.parameter(0, Shape(F32, (3,)))
    c = b.constant(np.array([1.0, 2.0, 3.0], F32))
    b.build(b.op("multiply", b.op("add", x, c), splat(b, 3.0, Shape(F32, (3,)))), entry=True)
    check_fusion(m, [rand(3)])
    fusion = m.entry.root
    assert [o.opcode for o in fusion.operands] == ["parameter", "constant"]
    fused = fusion.calls[0]
    assert [p.shape for p in fused.parameters] == [Shape(F32, (3,)), Shape(F32, (3,))]
    assert [i.opcode for i in fused.instructions].count("constant") == 1
    assert fused is m.computations[-2] and fused.name.startswith("fused_computation.")


def test_sibling_loop_fusions_share_an_input():
    m = Module("loop_siblings")
    b = Builder(m, "main")
    x = b.parameter(0, X)
    y = b.parameter(1, X)
    b.build(b.op("tuple", b.op("sine", x), b.op("cosine", b.op("add", x, y))), entry=True)
    check_fusion(m, [rand(4, 8), rand(4, 8, seed=1)])
    assert opcodes(m.entry) == ["parameter", "parameter", "fusion", "get_tuple_element",
                                "get_tuple_element", "tuple"]
    assert m.entry.instructions[2].attrs["kind"] == "loop"


def test_while_body_is_fused():
    m = Module("loop")
    state = [Shape(S32, ()), X]
    cb = Builder(m, "cond")
    i = cb.parameter(0, state[0])
    cb.parameter(1, state[1])
    cond = cb.build(cb.op("compare", i, cb.constant(3, S32), comparison_direction="LT"))
    bb = Builder(m, "body")
    i = bb.parameter(0, state[0])
    v = bb.parameter(1, state[1])
    v2 = bb.op("add", bb.op("multiply", v, splat(bb, 0.5)), splat(bb, 1.0))
    body = bb.build(bb.op("tuple", bb.op("add", i, bb.constant(1, S32)), v2))
    b = Builder(m, "main")
    x = b.parameter(0, X)
    w = b.op("while", b.constant(0, S32), b.op("exponential", x), calls=[cond, body])
    b.build(b.op("get_tuple_element", w, index=1), entry=True)
    check_fusion(m, [rand(4, 8)])
    assert opcodes(body).count("fusion") == 2  # the counter's add and the state update
    assert opcodes(cond) == ["parameter", "parameter", "fusion"]  # the scalar compare
    assert "fusion" in opcodes(m.entry)
    names = [c.name for c in m.computations]
    assert names.index("body") > max(n for n, c in enumerate(m.computations)
                                      if any(i.opcode == "fusion" and i.calls[0] is c
                                             for i in body.instructions))


def test_pipeline_runs_fusion_with_the_verifier():
    m = reduce_of_elementwise()
    x = rand(4, 8)
    want = evaluate_computation(m.entry, [x])
    optimize(m, verify=True, passes=["fusion"])
    assert opcodes(m.entry) == ["parameter", "fusion"]
    np.testing.assert_allclose(evaluate_computation(m.entry, [x]), want, rtol=1e-6)


def test_fused_module_round_trips_through_text():
    m = sibling_reductions()
    fuse_module(m)
    assert m.clone().to_text() == m.to_text()


# --------------------------------------------------------------------------- fuzzing


def random_module(seed):
    rng = random.Random(seed)
    m = Module(f"fuzz{seed}")
    sums = [region(m, "add"), region(m, "maximum", "region_max")]
    b = Builder(m, "main")
    shape = Shape(F32, (3, 4))
    vals = [b.parameter(i, shape) for i in range(2)]
    vecs = []
    for _ in range(rng.randint(2, 14)):
        k = rng.random()
        a = rng.choice(vals)
        if k < 0.35:
            op = rng.choice(["add", "multiply", "subtract", "maximum"])
            vals.append(b.op(op, a, rng.choice(vals)))
        elif k < 0.5:
            vals.append(b.op(rng.choice(["exponential", "tanh", "negate", "sine"]), a))
        elif k < 0.6:
            vals.append(b.op("multiply", a, splat(b, rng.choice([0.5, 2.0]), shape)))
        elif k < 0.72:
            r = reduce_sum(b, a, rng.choice(sums), dims=(rng.choice([1, 1, 0]),))
            vecs.append(r)
            if r.dims == (3,) and rng.random() < 0.6:
                vals.append(b.op("broadcast_in_dim", r, shape=shape, broadcast_dimensions=(0,)))
        elif k < 0.8:
            t = b.op("transpose", a, permutation=(1, 0), shape=Shape(F32, (4, 3)))
            vals.append(b.op("reshape", t, shape=shape))
        elif k < 0.9:
            d = b.op("dot_general", a, rng.choice(vals), lhs_batching_dimensions=(0,),
                     rhs_batching_dimensions=(0,), lhs_contracting_dimensions=(1,),
                     rhs_contracting_dimensions=(1,))
            vecs.append(d)
            vals.append(b.op("broadcast_in_dim", d, shape=shape, broadcast_dimensions=(0,)))
        else:
            e = b.op("exponential", a)
            vals.append(b.op("add", e, a))
            vals.append(b.op("multiply", e, e))
    outs = rng.sample(vals[2:], k=min(len(vals) - 2, rng.randint(1, 3))) + vecs[:2]
    root = outs[0] if len(outs) == 1 and rng.random() < 0.5 else b.op("tuple", *outs)
    b.build(root, entry=True)
    return m


@pytest.mark.parametrize("seed", range(60))
def test_random_graphs_fuse_to_equivalent_valid_modules(seed):
    check_random_graph(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(60, 3000))
def test_random_graphs_fuzz(seed):
    """The long fuzz run (``pytest -m slow``): thousands more random graphs."""
    check_random_graph(seed)


def check_random_graph(seed):
    m = random_module(seed)
    args = [rand(3, 4, seed=seed), rand(3, 4, seed=seed + 1000)]
    before = flat(evaluate_computation(m.entry, args))
    fuse_module(m)
    verify_module(m)
    after = flat(evaluate_computation(m.entry, args))
    for want, got in zip(before, after, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert not fuse_module(m)
    for comp in m.computations:
        if comp.name.startswith("fused_computation"):
            assert not {"dot_general", "fusion", "while"} & set(opcodes(comp))


def test_copies_of_cheap_chains_are_bounded():
    # Every link of a long add chain also feeds a dot: copying whole prefixes into every
    # fusion would be quadratic; copies stop a few producers deep.
    m = Module("long_chain")
    b = Builder(m, "main")
    x = b.parameter(0, Shape(F32, (4, 4)))
    a, dots = x, []
    for _ in range(200):
        a = b.op("add", a, x)
        dots.append(b.op("dot_general", a, x, lhs_batching_dimensions=(),
                         rhs_batching_dimensions=(), lhs_contracting_dimensions=(1,),
                         rhs_contracting_dimensions=(0,)))
    b.build(b.op("tuple", a, *dots[:2], *dots[-2:]), entry=True)
    check_fusion(m, [rand(4, 4)])
    assert m.instruction_count() < 5 * 400


def shift_right(b, x, k, n):
    return b.op("pad", x, b.constant(0.0, F32), edge_padding_low=(0, k),
                edge_padding_high=(0, -k), interior_padding=(0, 0))


def log_step_scan(steps, n=64, opcode="add"):
    """A Hillis-Steele prefix sum: ``y = y + shift(y, 2**k)``; fused naively, a kernel would
    compute the k-th step's value 2**(steps - k) times per element."""
    m = Module("scan")
    b = Builder(m, "main")
    y = b.parameter(0, Shape(F32, (4, n)))
    for k in range(steps):
        y = b.op(opcode, shift_right(b, y, 2 ** k, n), y)
    b.build(y, entry=True)
    return m


def fused_evaluation_counts(m):
    """Per fused computation, the evaluation count of every instruction but parameters and
    constants (which a kernel reads, never computes)."""
    out = []
    for c in m.computations:
        if not c.name.startswith("fused_computation"):
            continue
        users = c.users()
        outputs = set(map(id, c.root.operands if c.root.opcode == "tuple" else [c.root]))
        insts = [i for i in c.instructions if i.opcode != "tuple"]

        def readers(i, users=users):
            return [u for u in users.get(i, []) if u.opcode != "tuple"]
        counts = evaluation_counts(insts, readers, lambda i, outputs=outputs: id(i) in outputs)
        out.append({i.opcode + str(n): counts[id(i)] for n, i in enumerate(insts)
                    if i.opcode not in ("parameter", "constant")})
    return out


def test_evaluation_counts_follow_index_changing_readers():
    m = log_step_scan(3, n=16)
    insts = [i for i in m.entry.instructions if i.opcode != "constant"]
    users = m.entry.users()
    counts = evaluation_counts(insts, lambda i: users.get(i, []), lambda i: i is m.entry.root)
    # Outermost step: computed once; each earlier step once more per pad reading it.
    adds = [counts[id(i)] for i in insts if i.opcode == "add"]
    pads = [counts[id(i)] for i in insts if i.opcode == "pad"]
    assert adds == [4, 2, 1] and pads == [4, 2, 1]
    assert counts[id(insts[0])] == 8  # the parameter: read at 8 indices per element
    # Elementwise readers pass their index on: x * x + x reads x at one index.
    m2 = Module("ew")
    b = Builder(m2, "main")
    x = b.parameter(0, X)
    e = b.op("exponential", x)
    y = b.op("add", b.op("multiply", e, e), e)
    b.build(y, entry=True)
    users2 = m2.entry.users()
    counts2 = evaluation_counts(m2.entry.instructions, lambda i: users2.get(i, []),
                                lambda i: i is y)
    assert counts2[id(e)] == 1
    # Two slots of one concatenate read the operand at two indices.
    m3 = Module("cat")
    b = Builder(m3, "main")
    x = b.parameter(0, X)
    c = b.op("concatenate", x, x, dimension=0)
    b.build(c, entry=True)
    users3 = m3.entry.users()
    counts3 = evaluation_counts(m3.entry.instructions, lambda i: users3.get(i, []),
                                lambda i: i is c)
    assert counts3[id(x)] == 2


@pytest.mark.parametrize("steps", [3, 6, 10])
def test_log_step_scans_are_split_to_bound_recomputation(steps):
    # Fused whole, a 10-step scan would compute its first step 1024 times per element.
    n = 2 ** steps
    m = log_step_scan(steps, n=n)
    x = rand(4, n)
    check_fusion(m, [x])
    for counts in fused_evaluation_counts(m):
        for name, count in counts.items():
            assert count <= MAX_EVALUATIONS, (name, count, counts)
    got = evaluate_computation(m.entry, [x])
    np.testing.assert_allclose(got, np.cumsum(x.astype(np.float64), axis=1), rtol=1e-5)


def test_expensive_values_read_at_several_indices_are_computed_at_most_twice():
    # exp(x) read through three different slices: a fused kernel would compute it three
    # times per element, so it runs once into a buffer.
    for readers, fused_exp in ((2, True), (3, False)):
        m = Module("slices")
        b = Builder(m, "main")
        x = b.parameter(0, Shape(F32, (4, 12)))
        e = b.op("exponential", x)
        parts = [b.op("slice", e, start_indices=(0, k), limit_indices=(4, 8 + k),
                      strides=(1, 1)) for k in range(readers)]
        total = parts[0]
        for p in parts[1:]:
            total = b.op("add", total, p)
        b.build(total, entry=True)
        check_fusion(m, [rand(4, 12)])
        root_fusion = m.entry.root
        assert ("exponential" in opcodes(root_fusion.calls[0])) == fused_exp
        assert fused_opcodes(m).count("exponential") == 1
        for counts in fused_evaluation_counts(m):
            for name, count in counts.items():
                limit = MAX_EXPENSIVE_EVALUATIONS if name.startswith("exp") else MAX_EVALUATIONS
                assert count <= limit, (name, count)


def test_a_wide_concatenate_is_the_sole_root_of_its_fusion():
    # Fused into a consumer, a concatenate of n operands computes n elements for each of
    # its own; a wide one runs as a fusion of its own, which writes each operand's slab.
    m = Module("wide")
    b = Builder(m, "main")
    xs = [b.parameter(i, Shape(F32, (2, 3))) for i in range(MAX_FUSED_CONCAT_OPERANDS + 1)]
    cat = b.op("concatenate", *[b.op("negate", x) for x in xs], dimension=0)
    b.build(b.op("exponential", b.op("add", cat, cat)), entry=True)
    check_fusion(m, [rand(2, 3, seed=i) for i in range(len(xs))])
    fusions = [c for c in m.computations if c.name.startswith("fused_computation")]
    assert len(fusions) == 2
    wide = next(c for c in fusions if c.root.opcode == "concatenate")
    assert sorted(set(opcodes(wide))) == ["concatenate", "negate", "parameter"]
    # A narrow one fuses into its consumer.
    m2 = Module("narrow")
    b = Builder(m2, "main")
    xs = [b.parameter(i, Shape(F32, (2, 3))) for i in range(MAX_FUSED_CONCAT_OPERANDS)]
    cat = b.op("concatenate", *[b.op("negate", x) for x in xs], dimension=0)
    b.build(b.op("exponential", b.op("add", cat, cat)), entry=True)
    check_fusion(m2, [rand(2, 3, seed=i) for i in range(len(xs))])
    assert opcodes(m2.entry).count("fusion") == 1


def test_a_binary_search_is_one_fusion():
    # Each step of jnp.searchsorted's search reads the previous step's bounds through a
    # gather of one index per element and unit-dim broadcasts, which read them at the same
    # element: no recomputation, so the whole search stays one kernel.
    import ember
    import ember.numpy as jnp
    from ember.compiler.parser import parse_module

    a = np.sort(rand(1000))
    v = rand(50, seed=1)
    m = parse_module(ember.jit(jnp.searchsorted).lower(a, v).as_text())
    optimize(m)
    assert opcodes(m.entry).count("fusion") == 1
    (got,) = flat(evaluate_computation(m.entry, [a, v]))
    np.testing.assert_array_equal(got, np.searchsorted(a, v))


def _chain_module(n, opcode):
    """``x = opcode(x * 0.5 + 1)`` ``n`` times on a (4, 8) parameter."""
    m = Module("long_chain")
    b = Builder(m, "main")
    x = b.parameter(0, X)
    for _ in range(n):
        x = b.op("add", b.op("multiply", x, splat(b, 0.5)), splat(b, 1.0))
        if opcode is not None:
            x = b.op(opcode, x)
    b.build(x, entry=True)
    return m


def _fusion_costs(m):
    costs = []
    for inst in m.entry.instructions:
        if inst.opcode == "fusion":
            body = inst.calls[0].instructions
            costs.append(sum(_code_cost(i) for i in body if i.opcode != "parameter"))
    return costs


@pytest.mark.parametrize("opcode, n", [(None, 1500), ("tanh", 300)])
def test_long_chains_are_cut_into_fusions_of_bounded_cost(opcode, n):
    m = _chain_module(n, opcode)
    check_fusion(m, [np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)])
    costs = _fusion_costs(m)
    assert len(costs) >= 2 and max(costs) <= MAX_FUSION_COST
    assert sum(costs) >= n * (2 if opcode is None else 2 + EXPENSIVE_CODE_COST)


def test_a_chain_under_the_cost_stays_one_fusion():
    m = _chain_module(40, "tanh")
    check_fusion(m, [np.ones((4, 8), np.float32)])
    assert len(_fusion_costs(m)) == 1

