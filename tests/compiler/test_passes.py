# ruff: noqa: E501  (golden HLO text has long lines)
"""Tests of the simplification passes: dce, cse, constant_folding, algebraic_simplifier.

Every case checks the HLO text after the pass against a golden, that the verifier accepts the
result, that a second run changes nothing, and that the module computes the same values
before and after (the HLO evaluator, on random inputs).
"""

from __future__ import annotations

import gc
import textwrap

import numpy as np
import pytest

from ember.compiler import pipeline
from ember.compiler.evaluator import evaluate_computation, register_custom_call_target
from ember.compiler.hlo import Builder, Module, Shape
from ember.compiler.passes.algebraic_simplifier import REWRITES, exact_conversion
from ember.compiler.verifier import verify_module

F32 = np.float32
S32 = np.int32


def shape(dtype, *dims) -> Shape:
    return Shape(dtype, dims)


def random_args(module: Module, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    args = []
    for s in module.entry.parameter_shapes:
        if s.dtype.kind == "b":
            args.append(rng.random(s.dims) < 0.5)
        elif s.dtype.kind in "iu":
            args.append(rng.integers(-50, 50, s.dims).astype(s.dtype))
        else:
            args.append(rng.standard_normal(s.dims).astype(s.dtype))
    return args


def evaluate(module: Module, args) -> list[np.ndarray]:
    out = evaluate_computation(module.entry, args)
    return list(out) if isinstance(out, tuple) else [out]


def assert_same_values(before, after) -> None:
    assert len(before) == len(after)
    for b, a in zip(before, after):
        if isinstance(b, tuple):
            assert_same_values(list(b), list(a))
            continue
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def verify(module: Module) -> None:
    verify_module(module)


def golden(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


def normalized(module: Module) -> str:
    return module.to_text().strip() + "\n"


def check(module: Module, passes, expected: str, changed: bool = True,
          exact: bool = True) -> None:
    """Runs ``passes`` (names) once each; checks text, verifier, fixpoint and values (the
    same values, or for ``exact=False`` values within a few ulp)."""
    args = random_args(module)
    before = evaluate(module, args)
    results = [pipeline.run_pass(module, name) for name in passes]
    assert results[0] is changed
    assert normalized(module) == golden(expected)
    verify(module)
    assert not any(pipeline.run_pass(module, name) for name in passes)
    if exact:
        assert_same_values(before, evaluate(module, args))
    else:
        assert_close_values(before, evaluate(module, args))


def assert_close_values(before, after) -> None:
    """Values within 4 ulp of their type (an inexact rewrite, e.g. a division done as a
    multiplication by a reciprocal), or of the array's largest value (a sum in another order
    differs in the last bits of its terms, which cancel in small results); integers exactly
    (their sums associate)."""
    assert len(before) == len(after)
    for b, a in zip(before, after):
        assert a.dtype == b.dtype and a.shape == b.shape
        if a.dtype.kind in "iub":
            np.testing.assert_array_equal(a, b)
            continue
        eps = np.finfo(a.dtype).eps
        scale = float(np.max(np.abs(b), initial=0.0)) if np.isfinite(b).all() else 0.0
        np.testing.assert_allclose(a, b, rtol=4 * eps, atol=4 * eps * scale)


def new(name: str = "m") -> tuple[Module, Builder]:
    m = Module(name)
    return m, Builder(m, "main")


def bcast(b: Builder, value, dtype, dims) -> object:
    """A broadcast of the scalar constant ``value`` to ``dims``."""
    return b.op("broadcast_in_dim", b.constant(value, dtype), shape=Shape(dtype, dims),
                broadcast_dimensions=())


def add_body(m: Module, dtype=F32, name: str = "add") -> object:
    b = Builder(m, m.new_name(name))
    p0, p1 = b.parameter(0, shape(dtype)), b.parameter(1, shape(dtype))
    return b.build(b.op("add", p0, p1))


# --------------------------------------------------------------------------- dce


def test_dce_removes_dead_instructions_keeps_parameters_and_side_effects():
    calls = []

    def record(value, has_side_effect=False):
        calls.append(has_side_effect)
        return value

    register_custom_call_target("test_passes.record", record)
    m, b = new()
    x = b.parameter(0, shape(F32, 3))
    b.parameter(1, shape(F32, 2))  # unused, but part of the signature
    dead = b.op("exponential", x)
    b.op("negate", dead)
    b.op("custom_call", b.op("sine", x), shape=shape(F32, 3),
         call_target_name="test_passes.record", has_side_effect=True)
    b.op("custom_call", x, shape=shape(F32, 3), call_target_name="test_passes.record")
    b.build(b.op("add", x, x), entry=True)
    check(m, ["dce"], """
        HloModule m

        ENTRY %main (Arg_0.1: f32[3], Arg_1.2: f32[2]) -> f32[3] {
          %Arg_0.1 = f32[3] parameter(0)
          %Arg_1.2 = f32[2] parameter(1)
          %sine.5 = f32[3] sine(%Arg_0.1)
          %custom_call.6 = f32[3] custom_call(%sine.5), call_target_name=test_passes.record, has_side_effect=true
          ROOT %add.8 = f32[3] add(%Arg_0.1, %Arg_0.1)
        }
    """)
    assert calls == [True, False, True]  # before: both custom_calls ran; after: the kept one


def test_dce_removes_unreachable_computations():
    m, b = new()
    body = add_body(m)
    x = b.parameter(0, shape(F32, 4))
    b.op("reduce", x, b.constant(0, F32), dimensions=(0,), calls=[body])  # dead
    b.build(b.op("negate", x), entry=True)
    check(m, ["dce"], """
        HloModule m

        ENTRY %main (Arg_0.5: f32[4]) -> f32[4] {
          %Arg_0.5 = f32[4] parameter(0)
          ROOT %negate.8 = f32[4] negate(%Arg_0.5)
        }
    """)
    assert len(m.computations) == 1


def test_dce_runs_inside_called_computations():
    m, b_out = new()
    b = Builder(m, "callee")
    p = b.parameter(0, shape(F32, 2))
    b.op("exponential", p)
    callee = b.build(b.op("negate", p))
    x = b_out.parameter(0, shape(F32, 2))
    b_out.build(b_out.op("call", x, calls=[callee]), entry=True)
    check(m, ["dce"], """
        HloModule m

        %callee (Arg_0.1: f32[2]) -> f32[2] {
          %Arg_0.1 = f32[2] parameter(0)
          ROOT %negate.3 = f32[2] negate(%Arg_0.1)
        }

        ENTRY %main (Arg_0.4: f32[2]) -> f32[2] {
          %Arg_0.4 = f32[2] parameter(0)
          ROOT %call.5 = f32[2] call(%Arg_0.4), calls={%callee}
        }
    """)


def test_dce_and_cse_keep_calls_of_computations_with_side_effects():
    register_custom_call_target("test_passes.identity", lambda v, **attrs: v)
    m, b_out = new()
    b = Builder(m, "effect")
    p = b.parameter(0, shape(F32, 2))
    effect = b.build(b.op("custom_call", p, shape=shape(F32, 2), has_side_effect=True,
                          call_target_name="test_passes.identity"))
    b = Builder(m, "pure")
    pure = b.build(b.op("negate", b.parameter(0, shape(F32, 2))))
    x = b_out.parameter(0, shape(F32, 2))
    b_out.op("call", x, calls=[effect])
    b_out.op("call", x, calls=[effect])
    b_out.op("call", x, calls=[pure])
    b_out.build(b_out.op("call", x, calls=[pure]), entry=True)
    check(m, ["cse", "dce"], """
        HloModule m

        %effect (Arg_0.1: f32[2]) -> f32[2] {
          %Arg_0.1 = f32[2] parameter(0)
          ROOT %custom_call.2 = f32[2] custom_call(%Arg_0.1), call_target_name=test_passes.identity, has_side_effect=true
        }

        %pure (Arg_0.3: f32[2]) -> f32[2] {
          %Arg_0.3 = f32[2] parameter(0)
          ROOT %negate.4 = f32[2] negate(%Arg_0.3)
        }

        ENTRY %main (Arg_0.5: f32[2]) -> f32[2] {
          %Arg_0.5 = f32[2] parameter(0)
          %call.6 = f32[2] call(%Arg_0.5), calls={%effect}
          %call.7 = f32[2] call(%Arg_0.5), calls={%effect}
          ROOT %call.8 = f32[2] call(%Arg_0.5), calls={%pure}
        }
    """)


def test_dce_no_change():
    m, b = new()
    x = b.parameter(0, shape(F32, 2))
    b.build(b.op("negate", x), entry=True)
    check(m, ["dce"], """
        HloModule m

        ENTRY %main (Arg_0.1: f32[2]) -> f32[2] {
          %Arg_0.1 = f32[2] parameter(0)
          ROOT %negate.2 = f32[2] negate(%Arg_0.1)
        }
    """, changed=False)


# --------------------------------------------------------------------------- cse


def test_cse_merges_identical_and_commutative_instructions_and_equal_constants():
    m, b = new()
    x, y = b.parameter(0, shape(F32, 3)), b.parameter(1, shape(F32, 3))
    e1, e2 = b.op("exponential", x), b.op("exponential", x)
    sums = b.op("add", e1, y), b.op("add", y, e2)  # commutative: one add
    diffs = b.op("subtract", e1, y), b.op("subtract", y, e2)  # not commutative: two
    two_a, two_b = b.constant(F32(2)), b.constant(F32(2))
    zeros = b.constant(F32(-0.0)), b.constant(F32(0.0))  # different bits: kept apart
    b.build(b.op("tuple", *sums, *diffs, b.op("add", two_a, two_b), b.op("add", *zeros),
                 b.op("add", x, y)), entry=True)
    check(m, ["cse"], """
        HloModule m

        ENTRY %main (Arg_0.1: f32[3], Arg_1.2: f32[3]) -> (f32[3], f32[3], f32[3], f32[3], f32[], f32[], f32[3]) {
          %Arg_0.1 = f32[3] parameter(0)
          %Arg_1.2 = f32[3] parameter(1)
          %exponential.3 = f32[3] exponential(%Arg_0.1)
          %add.5 = f32[3] add(%exponential.3, %Arg_1.2)
          %subtract.7 = f32[3] subtract(%exponential.3, %Arg_1.2)
          %subtract.8 = f32[3] subtract(%Arg_1.2, %exponential.3)
          %constant.9 = f32[] constant(2)
          %constant.11 = f32[] constant(-0)
          %constant.12 = f32[] constant(0)
          %add.13 = f32[] add(%constant.9, %constant.9)
          %add.14 = f32[] add(%constant.11, %constant.12)
          %add.15 = f32[3] add(%Arg_0.1, %Arg_1.2)
          ROOT %tuple.16 = (f32[3], f32[3], f32[3], f32[3], f32[], f32[], f32[3]) tuple(%add.5, %add.5, %subtract.7, %subtract.8, %add.13, %add.14, %add.15)
        }
    """)


def test_cse_merges_identical_computations_then_their_callers():
    m, b = new()
    body1, body2 = add_body(m), add_body(m)
    x = b.parameter(0, shape(F32, 2, 3))
    zero = b.constant(0, F32)
    rows1 = b.op("reduce", x, zero, dimensions=(1,), calls=[body1])
    rows2 = b.op("reduce", x, zero, dimensions=(1,), calls=[body2])
    cols = b.op("reduce", x, zero, dimensions=(0,), calls=[body2])
    b.build(b.op("tuple", rows1, rows2, cols), entry=True)
    check(m, ["cse"], """
        HloModule m

        %add.1 (Arg_0.2: f32[], Arg_1.3: f32[]) -> f32[] {
          %Arg_0.2 = f32[] parameter(0)
          %Arg_1.3 = f32[] parameter(1)
          ROOT %add.4 = f32[] add(%Arg_0.2, %Arg_1.3)
        }

        ENTRY %main (Arg_0.9: f32[2,3]) -> (f32[2], f32[2], f32[3]) {
          %Arg_0.9 = f32[2,3] parameter(0)
          %constant.10 = f32[] constant(0)
          %reduce.11 = f32[2] reduce(%Arg_0.9, %constant.10), dimensions={1}, calls={%add.1}
          %reduce.13 = f32[3] reduce(%Arg_0.9, %constant.10), dimensions={0}, calls={%add.1}
          ROOT %tuple.14 = (f32[2], f32[2], f32[3]) tuple(%reduce.11, %reduce.11, %reduce.13)
        }
    """)


def test_computation_fingerprints_ignore_names_and_see_values_and_callees():
    from ember.compiler.passes.cse import computation_fingerprint
    m = Module("m")

    def scaled_sum(scale, body_op="add", dims=(2, 3)):
        body = Builder(m, m.new_name("body"))
        p0, p1 = body.parameter(0, shape(F32)), body.parameter(1, shape(F32))
        body = body.build(body.op(body_op, p0, p1))
        b = Builder(m, m.new_name("fused"))
        x = b.parameter(0, shape(F32, *dims))
        y = b.op("multiply", x, bcast(b, scale, F32, dims))
        return b.build(b.op("reduce", y, b.constant(F32(0)), dimensions=(1,), calls=[body]))

    first = computation_fingerprint(scaled_sum(2.0))
    assert computation_fingerprint(scaled_sum(2.0)) == first  # (other names, bodies)
    reordered = scaled_sum(2.0)  # (another topological listing: the constants first)
    reordered.instructions.sort(key=lambda i: i.opcode not in ("constant", "broadcast_in_dim"))
    assert reordered.instructions[0].opcode == "constant"
    assert computation_fingerprint(reordered) == first
    assert computation_fingerprint(scaled_sum(3.0)) != first  # a constant's value
    assert computation_fingerprint(scaled_sum(2.0, "maximum")) != first  # the callee
    assert computation_fingerprint(scaled_sum(2.0, dims=(2, 4))) != first  # shapes
    assert computation_fingerprint(scaled_sum(-0.0)) != computation_fingerprint(
        scaled_sum(0.0))


def test_a_fingerprint_memo_is_not_fooled_by_reused_ids():
    # (temporary computations die after use, and CPython gives the next one the same id:
    # the memo must not answer for the dead one)
    from ember.compiler.passes.cse import computation_fingerprint
    memo: dict = {}

    def fingerprint_of_a_temporary(value):
        b = Builder(Module("t"), "single")
        x = b.parameter(0, shape(F32, 3))
        return computation_fingerprint(b.build(b.op("add", x, bcast(b, value, F32, (3,)))),
                                       memo)

    prints = []
    for v in range(20):
        prints.append(fingerprint_of_a_temporary(float(v)))
        # (frees the temporary, its id free for the next one; the young generations only:
        # a full collection of the test process's heap takes most of a second)
        gc.collect(1)
    assert len(set(prints)) == 20


def test_cse_keeps_parameters_side_effects_and_different_attrs():
    register_custom_call_target("test_passes.identity", lambda v, **attrs: v)
    m, b = new()
    x, y = b.parameter(0, shape(F32, 2)), b.parameter(1, shape(F32, 2))
    effects = [b.op("custom_call", x, shape=shape(F32, 2), has_side_effect=True,
                    call_target_name="test_passes.identity") for _ in range(2)]
    pure = [b.op("custom_call", x, shape=shape(F32, 2),
                 call_target_name="test_passes.identity") for _ in range(2)]
    lt = b.op("compare", x, y, comparison_direction="LT")
    gt = b.op("compare", x, y, comparison_direction="GT")
    b.build(b.op("tuple", x, y, *effects, *pure, lt, gt), entry=True)
    check(m, ["cse"], """
        HloModule m

        ENTRY %main (Arg_0.1: f32[2], Arg_1.2: f32[2]) -> (f32[2], f32[2], f32[2], f32[2], f32[2], f32[2], pred[2], pred[2]) {
          %Arg_0.1 = f32[2] parameter(0)
          %Arg_1.2 = f32[2] parameter(1)
          %custom_call.3 = f32[2] custom_call(%Arg_0.1), call_target_name=test_passes.identity, has_side_effect=true
          %custom_call.4 = f32[2] custom_call(%Arg_0.1), call_target_name=test_passes.identity, has_side_effect=true
          %custom_call.5 = f32[2] custom_call(%Arg_0.1), call_target_name=test_passes.identity
          %compare.7 = pred[2] compare(%Arg_0.1, %Arg_1.2), comparison_direction=LT
          %compare.8 = pred[2] compare(%Arg_0.1, %Arg_1.2), comparison_direction=GT
          ROOT %tuple.9 = (f32[2], f32[2], f32[2], f32[2], f32[2], f32[2], pred[2], pred[2]) tuple(%Arg_0.1, %Arg_1.2, %custom_call.3, %custom_call.4, %custom_call.5, %custom_call.5, %compare.7, %compare.8)
        }
    """)


# --------------------------------------------------------------------------- constant folding


def test_constant_folding_folds_chains_reductions_and_small_broadcast_operands():
    m, b = new()
    body = add_body(m)
    x = b.parameter(0, shape(F32, 3))
    c = b.constant(np.arange(6, dtype=F32).reshape(2, 3))
    two = b.constant(F32(2))
    sums = b.op("reduce", b.op("multiply", c, c), b.constant(F32(0)), dimensions=(0,),
                calls=[body])
    big = b.op("compare", sums, b.op("broadcast_in_dim", two, shape=shape(F32, 3),
                                      broadcast_dimensions=()), comparison_direction="GT")
    mask = b.op("convert", big, shape=shape(F32, 3))
    kept = b.op("broadcast_in_dim", two, shape=shape(F32, 2, 3), broadcast_dimensions=())
    b.build(b.op("tuple", b.op("add", x, sums), b.op("multiply", x, mask), kept), entry=True)
    check(m, ["constant_folding", "dce"], """
        HloModule m

        ENTRY %main (Arg_0.5: f32[3]) -> (f32[3], f32[3], f32[2,3]) {
          %Arg_0.5 = f32[3] parameter(0)
          %constant.7 = f32[] constant(2)
          %constant.19 = f32[3] constant({9,17,29})
          %constant.21 = f32[3] constant({1,1,1})
          %broadcast_in_dim.14 = f32[2,3] broadcast_in_dim(%constant.7), broadcast_dimensions={}
          %add.15 = f32[3] add(%Arg_0.5, %constant.19)
          %multiply.16 = f32[3] multiply(%Arg_0.5, %constant.21)
          ROOT %tuple.17 = (f32[3], f32[3], f32[2,3]) tuple(%add.15, %multiply.16, %broadcast_in_dim.14)
        }
    """)


def test_constant_folding_keeps_broadcasts_of_scalars_as_broadcasts():
    m, b = new()
    x = b.parameter(0, shape(F32, 40, 50))
    five = b.op("add", bcast(b, 2, F32, (40, 50)), bcast(b, 3, F32, (40, 50)))
    pred = b.op("compare", five, bcast(b, 4, F32, (40, 50)), comparison_direction="GT")
    b.build(b.op("select", pred, x, five), entry=True)
    check(m, ["constant_folding", "dce"], """
        HloModule m

        ENTRY %main (Arg_0.1: f32[40,50]) -> f32[40,50] {
          %Arg_0.1 = f32[40,50] parameter(0)
          %constant.11 = f32[] constant(5)
          %broadcast_in_dim.12 = f32[40,50] broadcast_in_dim(%constant.11), broadcast_dimensions={}
          %constant.13 = pred[] constant(true)
          %broadcast_in_dim.14 = pred[40,50] broadcast_in_dim(%constant.13), broadcast_dimensions={}
          ROOT %select.10 = f32[40,50] select(%broadcast_in_dim.14, %Arg_0.1, %broadcast_in_dim.12)
        }
    """)


def test_constant_folding_is_bounded_in_size_and_skips_control_flow(monkeypatch):
    from ember.compiler.passes import constant_folding
    monkeypatch.setattr(constant_folding, "MAX_FOLD_ELEMENTS", 8)
    monkeypatch.setattr(constant_folding, "MAX_GROWTH_ELEMENTS", 4)
    m, b = new()
    cmp_b = Builder(m, "less")
    lhs, rhs = cmp_b.parameter(0, shape(F32)), cmp_b.parameter(1, shape(F32))
    less = cmp_b.build(cmp_b.op("compare", lhs, rhs, comparison_direction="LT"))
    ten = b.constant(np.arange(10, dtype=F32))
    pair, zero = b.constant(np.array([1, 2], F32)), b.constant(F32(0))
    b.build(b.op("tuple",
                 b.op("add", ten, ten),  # 10 elements > MAX_FOLD_ELEMENTS
                 b.op("pad", pair, zero, edge_padding_low=(0,), edge_padding_high=(3,),
                      interior_padding=(0,)),  # grows from 3 to 5 > MAX_GROWTH_ELEMENTS
                 b.op("pad", pair, zero, edge_padding_low=(1,), edge_padding_high=(0,),
                      interior_padding=(0,)),  # 3 elements from 3: folds
                 b.op("iota", shape=shape(S32, 3), iota_dimension=0),
                 bcast(b, 7, F32, (3,)),
                 b.op("sort", b.constant(np.array([3, 1], F32)), dimension=0,
                      is_stable=True, calls=[less])), entry=True)
    check(m, ["constant_folding", "dce"], """
        HloModule m

        %less (Arg_0.1: f32[], Arg_1.2: f32[]) -> pred[] {
          %Arg_0.1 = f32[] parameter(0)
          %Arg_1.2 = f32[] parameter(1)
          ROOT %compare.3 = pred[] compare(%Arg_0.1, %Arg_1.2), comparison_direction=LT
        }

        ENTRY %main () -> (f32[10], f32[5], f32[3], s32[3], f32[3], (f32[2])) {
          %constant.4 = f32[10] constant({0,1,2,3,4,5,6,7,8,9})
          %constant.5 = f32[2] constant({1,2})
          %constant.6 = f32[] constant(0)
          %add.7 = f32[10] add(%constant.4, %constant.4)
          %pad.8 = f32[5] pad(%constant.5, %constant.6), edge_padding_high={3}, edge_padding_low={0}, interior_padding={0}
          %constant.16 = f32[3] constant({0,1,2})
          %iota.10 = s32[3] iota(), iota_dimension=0
          %constant.11 = f32[] constant(7)
          %broadcast_in_dim.12 = f32[3] broadcast_in_dim(%constant.11), broadcast_dimensions={}
          %constant.13 = f32[2] constant({3,1})
          %sort.14 = (f32[2]) sort(%constant.13), dimension=0, is_stable=true, calls={%less}
          ROOT %tuple.15 = (f32[10], f32[5], f32[3], s32[3], f32[3], (f32[2])) tuple(%add.7, %pad.8, %constant.16, %iota.10, %broadcast_in_dim.12, %sort.14)
        }
    """)


def test_constant_folding_runs_inside_called_computations():
    m, b = new()
    cb = Builder(m, "callee")
    p = cb.parameter(0, shape(F32, 2))
    k = cb.op("multiply", cb.constant(np.array([1.5, 2], F32)), cb.constant(np.array([2, 4], F32)))
    callee = cb.build(cb.op("add", p, k))
    x = b.parameter(0, shape(F32, 2))
    b.build(b.op("call", x, calls=[callee]), entry=True)
    check(m, ["constant_folding", "dce"], """
        HloModule m

        %callee (Arg_0.1: f32[2]) -> f32[2] {
          %Arg_0.1 = f32[2] parameter(0)
          %constant.8 = f32[2] constant({3,8})
          ROOT %add.5 = f32[2] add(%Arg_0.1, %constant.8)
        }

        ENTRY %main (Arg_0.6: f32[2]) -> f32[2] {
          %Arg_0.6 = f32[2] parameter(0)
          ROOT %call.7 = f32[2] call(%Arg_0.6), calls={%callee}
        }
    """)


# --------------------------------------------------------------------------- algebraic simplifier

# Each case builds the entry computation's root from a builder; the pattern's name is the
# rewrite expected to fire (cases named "keep_..." must not change anything).


def _x(b, dtype=F32, dims=(2, 3), i=0):
    return b.parameter(i, Shape(dtype, dims))


def _unary(opcode, dtype=F32):
    return lambda b: b.op(opcode, b.op(opcode, _x(b, dtype)))


def _binary_with_splat(opcode, value, dtype=F32, splat_first=False, dims=(2, 3)):
    def build(b):
        x = _x(b, dtype, dims)
        c = bcast(b, value, dtype, dims) if dims else b.constant(value, dtype)
        return b.op(opcode, c, x) if splat_first else b.op(opcode, x, c)
    return build


def _self(opcode, dtype=F32, **attrs):
    def build(b):
        x = _x(b, dtype)
        return b.op(opcode, x, x, **attrs)
    return build


def _converts(*dtypes):
    def build(b):
        x = _x(b, dtypes[0])
        for dt in dtypes[1:]:
            x = b.op("convert", x, shape=Shape(dt, (2, 3)))
        return x
    return build


def _transposes(*perms):
    def build(b):
        x = _x(b, F32, (2, 3, 4))
        for perm in perms:
            x = b.op("transpose", x, permutation=perm)
        return x
    return build


def _layout_sandwich(b):
    # tanh(x.reshape(2, 12).T * 2).T.reshape(2, 3, 4): the layout changes meet and go
    x = _x(b, F32, (2, 3, 4))
    t = b.op("transpose", b.op("reshape", x, shape=Shape(F32, (2, 12))), permutation=(1, 0))
    y = b.op("tanh", b.op("multiply", t, bcast(b, 2, F32, (12, 2))))
    return b.op("reshape", b.op("transpose", y, permutation=(1, 0)), shape=Shape(F32, (2, 3, 4)))


def _layout_used_twice(b):
    # a transpose with another user stays where it is
    t = b.op("transpose", _x(b, F32, (2, 3)), permutation=(1, 0))
    return b.op("tuple", b.op("negate", t), t)


def _layouts_that_differ(b):
    # the operands' layout changes are not the same one: nothing moves
    x, y = _x(b, F32, (2, 3)), _x(b, F32, (6,), i=1)
    t = b.op("transpose", x, permutation=(1, 0))
    return b.op("add", t, b.op("reshape", y, shape=Shape(F32, (3, 2))))


def _transpose_dot(b):
    x, y = _x(b, F32, (4, 2)), _x(b, F32, (4, 3), i=1)
    dot = b.op("dot_general", x, y, lhs_batching_dimensions=(), rhs_batching_dimensions=(),
               lhs_contracting_dimensions=(0,), rhs_contracting_dimensions=(0,))
    return b.op("transpose", dot, permutation=(1, 0))


def _dot_without_contraction(lhs_dims, rhs_dims, out_dims, dtype=F32, out=F32, **dims):
    def build(b):
        x, y = _x(b, dtype, lhs_dims), _x(b, dtype, rhs_dims, i=1)
        return b.op("dot_general", x, y, shape=Shape(out, out_dims), **dims)
    return build


def _int_dot(lhs, rhs, k, out=np.int32, widen=True):
    """``dot_general`` of (3, k) and (k, 2) integer operands of dtypes ``lhs`` and ``rhs``,
    converted to ``out`` first when ``widen`` (as ``preferred_element_type`` lowers)."""
    out = np.dtype(out)

    def build(b):
        x, y = _x(b, np.dtype(lhs), (3, k)), _x(b, np.dtype(rhs), (k, 2), i=1)
        if widen:
            x = b.op("convert", x, shape=Shape(out, (3, k)))
            y = b.op("convert", y, shape=Shape(out, (k, 2)))
        return b.op("dot_general", x, y, shape=Shape(out, (3, 2)),
                    lhs_batching_dimensions=(), rhs_batching_dimensions=(),
                    lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(0,))
    return build


def _dot_of_transposed(x_dims, perm, y_dims, out_dims, lhs_contracting_dimensions):
    """``dot_general(transpose(x, perm), y)``, contracting y's dim 0."""
    def build(b):
        x, y = _x(b, F32, x_dims), _x(b, F32, y_dims, i=1)
        xt = b.op("transpose", x, permutation=perm)
        return b.op("dot_general", xt, y, shape=Shape(F32, out_dims),
                    lhs_batching_dimensions=(), rhs_batching_dimensions=(),
                    lhs_contracting_dimensions=lhs_contracting_dimensions,
                    rhs_contracting_dimensions=(0,))
    return build


def _dot_of_splat(value, splat_dims, x_dims, out_dims, splat_first=True, dtype=F32, **dims):
    def build(b):
        c, x = bcast(b, value, dtype, splat_dims), _x(b, dtype, x_dims)
        lhs, rhs = (c, x) if splat_first else (x, c)
        return b.op("dot_general", lhs, rhs, shape=Shape(dtype, out_dims), **dims)
    return build


def _reduce_of_concatenate(reduce_dims, init=0.0, opcode="add", pieces=((1, 3), (2, 3), (1, 3))):
    def build(b):
        rb = Builder(b.module, b.module.new_name("region"))
        p0, p1 = rb.parameter(0, Shape(F32, ())), rb.parameter(1, Shape(F32, ()))
        body = rb.build(rb.op(opcode, p0, p1))
        xs = [_x(b, F32, dims, i=i) for i, dims in enumerate(pieces)]
        cat = b.op("concatenate", *xs, dimension=0)
        return b.op("reduce", cat, b.constant(F32(init)), dimensions=reduce_dims, calls=[body])
    return build


def _reduce_of(reduce_dims, dims=(2, 3, 4), init=0.0, opcode="add"):
    def build(b):
        rb = Builder(b.module, b.module.new_name("region"))
        p0, p1 = rb.parameter(0, Shape(F32, ())), rb.parameter(1, Shape(F32, ()))
        body = rb.build(rb.op(opcode, p0, p1))
        return b.op("reduce", _x(b, F32, dims), b.constant(F32(init)), dimensions=reduce_dims,
                    calls=[body])
    return build


def _complex_reduce(opcode, init=1 - 2j):
    def build(b):
        c64 = np.dtype(np.complex64)
        rb = Builder(b.module, b.module.new_name("region"))
        p0, p1 = rb.parameter(0, Shape(c64, ())), rb.parameter(1, Shape(c64, ()))
        body = rb.build(rb.op(opcode, p0, p1))
        return b.op("reduce", _x(b, c64, (2, 3)), b.constant(np.complex64(init)),
                    dimensions=(1,), calls=[body])
    return build


def _complex_cumulative(opcode):
    def build(b):
        c64 = np.dtype(np.complex64)
        rb = Builder(b.module, b.module.new_name("region"))
        p0, p1 = rb.parameter(0, Shape(c64, ())), rb.parameter(1, Shape(c64, ()))
        body = rb.build(rb.op(opcode, p0, p1))
        return b.op("reduce_window", _x(b, c64, (2, 3)), b.constant(np.complex64(0)),
                    window_dimensions=(1, 3), window_strides=(1, 1), padding=((0, 0), (2, 0)),
                    base_dilations=(1, 1), window_dilations=(1, 1), calls=[body])
    return build


def _reduce_of_transpose(perm, reduce_dims, opcode="add", init=0.0):
    def build(b):
        rb = Builder(b.module, b.module.new_name("region"))
        p0, p1 = rb.parameter(0, Shape(F32, ())), rb.parameter(1, Shape(F32, ()))
        body = rb.build(rb.op(opcode, p0, p1))
        x = b.op("transpose", _x(b, F32, (2, 3, 4)), permutation=perm)
        return b.op("reduce", x, b.constant(F32(init)), dimensions=reduce_dims, calls=[body])
    return build


def _reshapes(*shapes):
    def build(b):
        x = _x(b, F32, (2, 3, 4))
        for dims in shapes:
            x = b.op("reshape", x, shape=Shape(F32, dims))
        return x
    return build


def _broadcasts(*steps):
    def build(b):
        x = _x(b, F32, (3,))
        for dims, bdims in steps:
            x = b.op("broadcast_in_dim", x, shape=Shape(F32, dims), broadcast_dimensions=bdims)
        return x
    return build


def _reshape_then_broadcast(reshaped, dims, bdims):
    def build(b):
        x = b.op("reshape", _x(b, F32, (3, 2)), shape=Shape(F32, reshaped))
        return b.op("broadcast_in_dim", x, shape=Shape(F32, dims), broadcast_dimensions=bdims)
    return build


def _slices(*steps):
    def build(b):
        x = _x(b, F32, (10, 4))
        for start, limit, strides in steps:
            x = b.op("slice", x, start_indices=start, limit_indices=limit, strides=strides)
        return x
    return build


def _slice_of_pieces(start, limit, strides):
    """A slice of rows of (2, 3), (4, 3) and (1, 3) pieces concatenated (rows 0-1, 2-5, 6)."""
    def build(b):
        pieces = [_x(b, F32, (n, 3), i) for i, n in enumerate((2, 4, 1))]
        cat = b.op("concatenate", *pieces, dimension=0)
        return b.op("slice", cat, start_indices=start, limit_indices=limit, strides=strides)
    return build


def _reverses(*dim_sets, dims=(2, 3)):
    def build(b):
        x = _x(b, F32, dims)
        for d in dim_sets:
            x = b.op("reverse", x, dimensions=d)
        return x
    return build


def _pad_zero(b):
    return b.op("pad", _x(b), b.constant(F32(0)), edge_padding_low=(0, 0),
                edge_padding_high=(0, 0), interior_padding=(0, 0))


def _select_constant(value):
    def build(b):
        x, y = _x(b), _x(b, i=1)
        return b.op("select", b.constant(np.bool_(value)), x, y)
    return build


def _select_same(b):
    p, x = _x(b, np.bool_), _x(b, i=1)
    return b.op("select", p, x, x)


def _tuple_element(b):
    x, y = _x(b), _x(b, S32, (3,), i=1)
    return b.op("get_tuple_element", b.op("tuple", x, y), index=1)


def _divide_by(divisor, dtype=F32):
    """``x / divisor(b, y)`` where ``y`` is a second parameter (absent if unused)."""
    def build(b):
        x = _x(b, dtype)
        return b.op("divide", x, divisor(b))
    return build


def _y(b, dtype=F32, dims=(2, 3)):
    return _x(b, dtype, dims, i=1)


def _divide_exp_exp(b):
    return b.op("divide", b.op("exponential", _x(b)), b.op("exponential", _y(b)))


def _broadcast_rows(b, operand, dims=(2, 3)):
    return b.op("broadcast_in_dim", operand, shape=Shape(operand.dtype, dims),
                broadcast_dimensions=(0,))


def _negate_chain(b):
    x = _x(b)
    for _ in range(5):
        x = b.op("negate", x)
    return x


def _scatter_rows(combiner, n_indices=1, dims=(100, 3)):
    """``x.at[i].set(u)`` (or ``.add``...) of rows of ``x``: indices (n_indices, 1)."""
    def build(b):
        m = b.module
        rb = Builder(m, m.new_name("combine"))
        cur, upd = rb.parameter(0, Shape(F32, ())), rb.parameter(1, Shape(F32, ()))
        region = rb.build(upd if combiner == "set" else rb.op(combiner, cur, upd))
        x = _x(b, F32, dims)
        i = b.parameter(1, Shape(np.dtype(np.int32), (n_indices, 1)))
        u = b.parameter(2, Shape(F32, (n_indices, dims[1])))
        return b.op("scatter", x, i, u, update_window_dims=(1,), inserted_window_dims=(0,),
                    scatter_dims_to_operand_dims=(0,), input_batching_dims=(),
                    scatter_indices_batching_dims=(), index_vector_dim=1,
                    indices_are_sorted=True, unique_indices=True, calls=[region],
                    shape=Shape(F32, dims))
    return build


ALGEBRAIC_CASES = {
    "scatter_one_window": _scatter_rows("set"),
    "scatter_one_window_add": _scatter_rows("add"),
    "keep_scatter_of_two_windows": _scatter_rows("set", n_indices=2),
    "add_zero": _binary_with_splat("add", 0),
    "zero_add": _binary_with_splat("add", 0, splat_first=True),
    "subtract_zero": _binary_with_splat("subtract", 0),
    "multiply_one": _binary_with_splat("multiply", 1, dims=()),
    "one_multiply": _binary_with_splat("multiply", 1, splat_first=True),
    "divide_one": _binary_with_splat("divide", 1),
    "power_one": _binary_with_splat("power", 1),
    "multiply_zero_int": _binary_with_splat("multiply", 0, S32),
    "zero_multiply_int": _binary_with_splat("multiply", 0, S32, splat_first=True),
    "subtract_self_int": _self("subtract", S32),
    "negate_negate": _unary("negate"),
    "maximum_self": _self("maximum"),
    "minimum_self": _self("minimum"),
    "not_not": _unary("not", np.bool_),
    "and_all_ones": _binary_with_splat("and", -1, S32),
    "all_ones_and": _binary_with_splat("and", True, np.bool_, splat_first=True),
    "or_zero": _binary_with_splat("or", 0, np.uint8),
    "zero_or": _binary_with_splat("or", False, np.bool_, splat_first=True),
    "xor_zero": _binary_with_splat("xor", 0, S32),
    "and_self": _self("and", S32),
    "or_self": _self("or", np.bool_),
    "compare_self_int": _self("compare", S32, comparison_direction="LE"),
    "select_true": _select_constant(True),
    "select_false": _select_constant(False),
    "select_same": _select_same,
    "copy": lambda b: b.op("copy", _x(b)),
    "convert_same_type": _converts(F32, F32),
    "convert_convert": _converts(F32, np.float64, F32),
    "convert_convert_to_third_type": _converts(np.int8, np.int32, F32),
    "transpose_identity": _transposes((0, 1, 2)),
    "transpose_transpose": _transposes((1, 2, 0), (2, 0, 1)),
    "layout_after_elementwise": _layout_sandwich,
    "keep_layout_used_twice": _layout_used_twice,
    "keep_layouts_that_differ": _layouts_that_differ,
    "transpose_transpose_composed": _transposes((1, 0, 2), (0, 2, 1)),
    "transpose_dot": _transpose_dot,
    "dot_without_contraction": _dot_without_contraction(
        (3, 2), (2, 4), (2, 3, 4), lhs_batching_dimensions=(1,), rhs_batching_dimensions=(0,),
        lhs_contracting_dimensions=(), rhs_contracting_dimensions=()),
    "dot_without_contraction_unit_dims": _dot_without_contraction(
        (3, 1), (1, 4), (3, 4), dtype=np.dtype("bfloat16"), out=F32, lhs_batching_dimensions=(),
        rhs_batching_dimensions=(), lhs_contracting_dimensions=(1,),
        rhs_contracting_dimensions=(0,)),
    "keep_dot_with_contraction": _dot_without_contraction(
        (3, 2), (2, 4), (3, 4), lhs_batching_dimensions=(), rhs_batching_dimensions=(),
        lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(0,)),
    "dot_without_free_dims": _dot_without_contraction(
        (5, 3), (3, 5), (3,), lhs_batching_dimensions=(1,), rhs_batching_dimensions=(0,),
        lhs_contracting_dimensions=(0,), rhs_contracting_dimensions=(1,)),
    "dot_without_free_dims_widening": _dot_without_contraction(
        (4,), (4,), (), dtype=np.dtype(np.int8), out=np.dtype(np.int32),
        lhs_batching_dimensions=(), rhs_batching_dimensions=(),
        lhs_contracting_dimensions=(0,), rhs_contracting_dimensions=(0,)),
    "keep_dot_without_free_dims_bf16": _dot_without_contraction(
        (3, 4), (3, 4), (3,), dtype=np.dtype("bfloat16"), out=np.dtype("bfloat16"),
        lhs_batching_dimensions=(0,), rhs_batching_dimensions=(0,),
        lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(1,)),
    "dot_of_splat": _dot_of_splat(
        1.0, (2, 4, 3), (2, 3, 5), (2, 4, 5), lhs_batching_dimensions=(0,),
        rhs_batching_dimensions=(0,), lhs_contracting_dimensions=(2,),
        rhs_contracting_dimensions=(1,)),
    "dot_of_splat_scaled_rhs": _dot_of_splat(
        0.25, (3, 6), (4, 3), (4, 6), splat_first=False, dtype=np.dtype(np.float64),
        lhs_batching_dimensions=(), rhs_batching_dimensions=(),
        lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(0,)),
    "dot_of_splat_batch_after_free": _dot_of_splat(
        -1.0, (2, 4, 3), (5, 2, 3), (2, 4, 5), lhs_batching_dimensions=(0,),
        rhs_batching_dimensions=(1,), lhs_contracting_dimensions=(2,),
        rhs_contracting_dimensions=(2,)),
    "dot_with_vector_side": _dot_without_contraction(
        (1, 4), (4, 6), (1, 6), lhs_batching_dimensions=(), rhs_batching_dimensions=(),
        lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(0,)),
    "dot_with_vector_side_batched_rhs": _dot_without_contraction(
        (2, 64, 4), (4, 2), (2, 64), lhs_batching_dimensions=(0,),
        rhs_batching_dimensions=(1,), lhs_contracting_dimensions=(2,),
        rhs_contracting_dimensions=(0,)),
    "keep_dot_with_vector_side_of_small_batched_matrices": _dot_without_contraction(
        (2, 8, 9), (9, 2), (2, 8), lhs_batching_dimensions=(0,), rhs_batching_dimensions=(1,),
        lhs_contracting_dimensions=(2,), rhs_contracting_dimensions=(0,)),
    "small_int_dot_as_float": _int_dot(np.int8, np.int8, 4),
    "small_int_dot_as_float_u8_pred": _int_dot(np.uint8, np.bool_, 4),
    "small_int_dot_as_float_unwidened": _int_dot(np.int8, np.int8, 4, widen=False),
    "small_int_dot_as_float_in_float64": _int_dot(np.int8, np.uint8, 1024),
    "keep_small_int_dot_that_may_wrap": _int_dot(np.int8, np.int8, 1 << 17),
    "keep_int_dot_of_wide_values": _int_dot(np.int16, np.int8, 4),
    "keep_unsigned_int_dot_of_signed_values": _int_dot(np.int8, np.uint8, 4, out=np.uint32),
    "dot_of_transpose": _dot_of_transposed((4, 2), (1, 0), (4, 3), (2, 3),
                                           lhs_contracting_dimensions=(1,)),
    "keep_dot_of_transpose_reordering_free_dims": _dot_of_transposed(
        (2, 3, 4), (1, 0, 2), (4, 5), (3, 2, 5), lhs_contracting_dimensions=(2,)),
    "reshape_of_unit_broadcast": lambda b: b.op("reshape", b.op(
        "broadcast_in_dim", _x(b), shape=Shape(F32, (2, 1, 3)), broadcast_dimensions=(0, 2)),
        shape=Shape(F32, (6,))),
    "dot_with_vector_side_widening": _dot_without_contraction(
        (3,), (4, 3), (4,), dtype=np.dtype("bfloat16"), out=F32, lhs_batching_dimensions=(),
        rhs_batching_dimensions=(), lhs_contracting_dimensions=(0,),
        rhs_contracting_dimensions=(1,)),
    "keep_dot_with_large_vector_side": _dot_without_contraction(
        (256, 256), (256,), (256,), lhs_batching_dimensions=(), rhs_batching_dimensions=(),
        lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(0,)),
    "keep_dot_of_infinite_splat": _dot_of_splat(
        np.inf, (4, 3), (3, 5), (4, 5), lhs_batching_dimensions=(),
        rhs_batching_dimensions=(), lhs_contracting_dimensions=(1,),
        rhs_contracting_dimensions=(0,)),
    "reduce_of_concatenate": _reduce_of_concatenate((0,)),
    "reduce_of_concatenate_all_dims": _reduce_of_concatenate((0, 1), opcode="maximum",
                                                             init=-np.inf),
    "keep_reduce_of_concatenate_other_dim": _reduce_of_concatenate((1,)),
    "keep_reduce_of_concatenate_init": _reduce_of_concatenate((0,), init=1.0),
    "reduce_of_transpose": _reduce_of_transpose((2, 0, 1), (1,)),
    "reduce_of_transpose_kept_in_order": _reduce_of_transpose((1, 0, 2), (0,), "maximum",
                                                              -np.inf),
    "complex_sum_as_parts": _complex_reduce("add"),
    "keep_complex_product": _complex_reduce("multiply"),
    "complex_window_sum_as_parts": _complex_cumulative("add"),
    "keep_complex_cumulative_product": _complex_cumulative("multiply"),
    "reduce_minor_run_first": _reduce_of((0, 2)),
    "reduce_minor_run_first_max": _reduce_of((0, 2, 3), dims=(2, 3, 4, 5), opcode="maximum",
                                             init=-np.inf),
    "keep_reduce_minor_run_first_columns": _reduce_of((0, 1)),
    "keep_reduce_minor_run_first_rows": _reduce_of((1, 2)),
    "keep_reduce_minor_run_first_init": _reduce_of((0, 2), init=1.0),
    "reshape_same_shape": _reshapes((2, 3, 4)),
    "reshape_reshape": _reshapes((6, 4), (4, 6)),
    "reshape_reshape_back": _reshapes((24,), (2, 3, 4)),
    "broadcast_identity": _broadcasts(((3,), (0,))),
    "broadcast_broadcast": _broadcasts(((3, 2), (0,)), ((5, 3, 2), (1, 2))),
    "broadcast_of_unit_reshape": _reshape_then_broadcast((3, 1, 2), (3, 4, 2), (0, 1, 2)),
    "keep_broadcast_of_moving_reshape": _reshape_then_broadcast((2, 3), (2, 3, 5), (0, 1)),
    "slice_full": _slices(((0, 0), (10, 4), (1, 1))),
    "slice_slice": _slices(((1, 0), (10, 4), (2, 1)), ((1, 1), (4, 3), (2, 1))),
    "pad_zero": _pad_zero,
    "concatenate_one": lambda b: b.op("concatenate", _x(b), dimension=0),
    "slice_concatenate": _slice_of_pieces((3, 0), (6, 2), (1, 1)),
    "slice_concatenate_two_pieces": _slice_of_pieces((3, 1), (7, 3), (1, 1)),
    "slice_concatenate_strided": _slice_of_pieces((2, 0), (6, 3), (2, 1)),
    "keep_slice_concatenate_every_piece": _slice_of_pieces((1, 0), (7, 3), (1, 1)),
    "keep_slice_concatenate_strided_pieces": _slice_of_pieces((3, 0), (7, 3), (2, 1)),
    "reverse_nothing": _reverses((0,), dims=(1, 3)),
    "reverse_reverse": _reverses((0, 1), (1, 0)),
    "reverse_reverse_partial": _reverses((0, 1), (0,)),
    "get_tuple_element_of_tuple": _tuple_element,
    "negate_chain": _negate_chain,
    "divide_exp_exp": _divide_exp_exp,
    "divide_exp": _divide_by(lambda b: b.op("exponential", _y(b))),
    "divide_power": _divide_by(lambda b: b.op("power", _y(b), _x(b, i=2))),
    "divide_sqrt": _divide_by(lambda b: b.op("sqrt", _y(b))),
    "divide_rsqrt": _divide_by(lambda b: b.op("rsqrt", _y(b))),
    "divide_constant": _divide_by(
        lambda b: b.constant(np.array([[1, 3, -7], [0.5, 0, 10]], F32))),
    "divide_broadcast_constant": _binary_with_splat("divide", 3),
    "divide_broadcast": _divide_by(lambda b: _broadcast_rows(b, _y(b, dims=(2,)))),
    "divide_broadcast_sqrt": _divide_by(
        lambda b: _broadcast_rows(b, b.op("sqrt", _y(b, dims=(2,))))),
    "divide_constant_complex": _binary_with_splat("divide", 4, np.complex64),
    # Not exact, so not rewritten:
    "keep_multiply_zero_float": _binary_with_splat("multiply", 0),
    "keep_subtract_self_float": _self("subtract"),
    "keep_compare_self_float": _self("compare", comparison_direction="EQ"),
    "keep_convert_narrowing_first": _converts(np.float64, F32, np.float64),
    "keep_convert_float_to_int": _converts(np.float16, F32, S32),
    "keep_add_one": _binary_with_splat("add", 1),
    "keep_multiply_one_complex": _binary_with_splat("multiply", 1, np.complex64),
    "keep_divide_int_broadcast": _divide_by(
        lambda b: _broadcast_rows(b, _y(b, S32, dims=(2,))), S32),
    "keep_divide_complex_broadcast": _divide_by(
        lambda b: _broadcast_rows(b, _y(b, np.complex64, dims=(2,))), np.complex64),
    "keep_divide_int_constant": _binary_with_splat("divide", 3, S32),
}


ALGEBRAIC_GOLDEN = {
    "add_zero": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          ROOT %Arg_0.1 = f32[2,3] parameter(0)
        }
    """,
    "zero_add": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          ROOT %Arg_0.1 = f32[2,3] parameter(0)
        }
    """,
    "subtract_zero": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          ROOT %Arg_0.1 = f32[2,3] parameter(0)
        }
    """,
    "multiply_one": """
        ENTRY %main (Arg_0.1: f32[]) -> f32[] {
          ROOT %Arg_0.1 = f32[] parameter(0)
        }
    """,
    "one_multiply": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          ROOT %Arg_0.1 = f32[2,3] parameter(0)
        }
    """,
    "divide_one": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          ROOT %Arg_0.1 = f32[2,3] parameter(0)
        }
    """,
    "power_one": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          ROOT %Arg_0.1 = f32[2,3] parameter(0)
        }
    """,
    "multiply_zero_int": """
        ENTRY %main (Arg_0.1: s32[2,3]) -> s32[2,3] {
          %Arg_0.1 = s32[2,3] parameter(0)
          %constant.2 = s32[] constant(0)
          ROOT %broadcast_in_dim.3 = s32[2,3] broadcast_in_dim(%constant.2), broadcast_dimensions={}
        }
    """,
    "zero_multiply_int": """
        ENTRY %main (Arg_0.1: s32[2,3]) -> s32[2,3] {
          %Arg_0.1 = s32[2,3] parameter(0)
          %constant.2 = s32[] constant(0)
          ROOT %broadcast_in_dim.3 = s32[2,3] broadcast_in_dim(%constant.2), broadcast_dimensions={}
        }
    """,
    "subtract_self_int": """
        ENTRY %main (Arg_0.1: s32[2,3]) -> s32[2,3] {
          %Arg_0.1 = s32[2,3] parameter(0)
          %constant.3 = s32[] constant(0)
          ROOT %broadcast_in_dim.4 = s32[2,3] broadcast_in_dim(%constant.3), broadcast_dimensions={}
        }
    """,
    "negate_negate": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          ROOT %Arg_0.1 = f32[2,3] parameter(0)
        }
    """,
    "maximum_self": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          ROOT %Arg_0.1 = f32[2,3] parameter(0)
        }
    """,
    "minimum_self": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          ROOT %Arg_0.1 = f32[2,3] parameter(0)
        }
    """,
    "not_not": """
        ENTRY %main (Arg_0.1: pred[2,3]) -> pred[2,3] {
          ROOT %Arg_0.1 = pred[2,3] parameter(0)
        }
    """,
    "and_all_ones": """
        ENTRY %main (Arg_0.1: s32[2,3]) -> s32[2,3] {
          ROOT %Arg_0.1 = s32[2,3] parameter(0)
        }
    """,
    "all_ones_and": """
        ENTRY %main (Arg_0.1: pred[2,3]) -> pred[2,3] {
          ROOT %Arg_0.1 = pred[2,3] parameter(0)
        }
    """,
    "or_zero": """
        ENTRY %main (Arg_0.1: u8[2,3]) -> u8[2,3] {
          ROOT %Arg_0.1 = u8[2,3] parameter(0)
        }
    """,
    "zero_or": """
        ENTRY %main (Arg_0.1: pred[2,3]) -> pred[2,3] {
          ROOT %Arg_0.1 = pred[2,3] parameter(0)
        }
    """,
    "xor_zero": """
        ENTRY %main (Arg_0.1: s32[2,3]) -> s32[2,3] {
          ROOT %Arg_0.1 = s32[2,3] parameter(0)
        }
    """,
    "and_self": """
        ENTRY %main (Arg_0.1: s32[2,3]) -> s32[2,3] {
          ROOT %Arg_0.1 = s32[2,3] parameter(0)
        }
    """,
    "or_self": """
        ENTRY %main (Arg_0.1: pred[2,3]) -> pred[2,3] {
          ROOT %Arg_0.1 = pred[2,3] parameter(0)
        }
    """,
    "compare_self_int": """
        ENTRY %main (Arg_0.1: s32[2,3]) -> pred[2,3] {
          %Arg_0.1 = s32[2,3] parameter(0)
          %constant.3 = pred[] constant(true)
          ROOT %broadcast_in_dim.4 = pred[2,3] broadcast_in_dim(%constant.3), broadcast_dimensions={}
        }
    """,
    "select_true": """
        ENTRY %main (Arg_0.1: f32[2,3], Arg_1.2: f32[2,3]) -> f32[2,3] {
          ROOT %Arg_0.1 = f32[2,3] parameter(0)
          %Arg_1.2 = f32[2,3] parameter(1)
        }
    """,
    "select_false": """
        ENTRY %main (Arg_0.1: f32[2,3], Arg_1.2: f32[2,3]) -> f32[2,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          ROOT %Arg_1.2 = f32[2,3] parameter(1)
        }
    """,
    "select_same": """
        ENTRY %main (Arg_0.1: pred[2,3], Arg_1.2: f32[2,3]) -> f32[2,3] {
          %Arg_0.1 = pred[2,3] parameter(0)
          ROOT %Arg_1.2 = f32[2,3] parameter(1)
        }
    """,
    "copy": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          ROOT %Arg_0.1 = f32[2,3] parameter(0)
        }
    """,
    "convert_same_type": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          ROOT %Arg_0.1 = f32[2,3] parameter(0)
        }
    """,
    "convert_convert": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          ROOT %Arg_0.1 = f32[2,3] parameter(0)
        }
    """,
    "convert_convert_to_third_type": """
        ENTRY %main (Arg_0.1: s8[2,3]) -> f32[2,3] {
          %Arg_0.1 = s8[2,3] parameter(0)
          ROOT %convert.4 = f32[2,3] convert(%Arg_0.1)
        }
    """,
    "transpose_identity": """
        ENTRY %main (Arg_0.1: f32[2,3,4]) -> f32[2,3,4] {
          ROOT %Arg_0.1 = f32[2,3,4] parameter(0)
        }
    """,
    "layout_after_elementwise": """
        ENTRY %main (Arg_0.1: f32[2,3,4]) -> f32[2,3,4] {
          %Arg_0.1 = f32[2,3,4] parameter(0)
          %constant.10 = f32[] constant(2)
          %broadcast_in_dim.11 = f32[2,3,4] broadcast_in_dim(%constant.10), broadcast_dimensions={}
          %multiply.12 = f32[2,3,4] multiply(%Arg_0.1, %broadcast_in_dim.11)
          ROOT %tanh.15 = f32[2,3,4] tanh(%multiply.12)
        }
    """,
    "keep_layout_used_twice": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> (f32[3,2], f32[3,2]) {
          %Arg_0.1 = f32[2,3] parameter(0)
          %transpose.2 = f32[3,2] transpose(%Arg_0.1), permutation={1,0}
          %negate.3 = f32[3,2] negate(%transpose.2)
          ROOT %tuple.4 = (f32[3,2], f32[3,2]) tuple(%negate.3, %transpose.2)
        }
    """,
    "keep_layouts_that_differ": """
        ENTRY %main (Arg_0.1: f32[2,3], Arg_1.2: f32[6]) -> f32[3,2] {
          %Arg_0.1 = f32[2,3] parameter(0)
          %Arg_1.2 = f32[6] parameter(1)
          %transpose.3 = f32[3,2] transpose(%Arg_0.1), permutation={1,0}
          %reshape.4 = f32[3,2] reshape(%Arg_1.2)
          ROOT %add.5 = f32[3,2] add(%transpose.3, %reshape.4)
        }
    """,
    "transpose_transpose": """
        ENTRY %main (Arg_0.1: f32[2,3,4]) -> f32[2,3,4] {
          ROOT %Arg_0.1 = f32[2,3,4] parameter(0)
        }
    """,
    "transpose_transpose_composed": """
        ENTRY %main (Arg_0.1: f32[2,3,4]) -> f32[3,4,2] {
          %Arg_0.1 = f32[2,3,4] parameter(0)
          ROOT %transpose.4 = f32[3,4,2] transpose(%Arg_0.1), permutation={1,2,0}
        }
    """,
    "transpose_dot": """
        ENTRY %main (Arg_0.1: f32[4,2], Arg_1.2: f32[4,3]) -> f32[3,2] {
          %Arg_0.1 = f32[4,2] parameter(0)
          %Arg_1.2 = f32[4,3] parameter(1)
          ROOT %dot_general.5 = f32[3,2] dot_general(%Arg_1.2, %Arg_0.1), lhs_batching_dimensions={}, lhs_contracting_dimensions={0}, rhs_batching_dimensions={}, rhs_contracting_dimensions={0}
        }
    """,
    "reduce_of_concatenate": """
        %region.1 (Arg_0.2: f32[], Arg_1.3: f32[]) -> f32[] {
          %Arg_0.2 = f32[] parameter(0)
          %Arg_1.3 = f32[] parameter(1)
          ROOT %add.4 = f32[] add(%Arg_0.2, %Arg_1.3)
        }

        ENTRY %main (Arg_0.5: f32[1,3], Arg_1.6: f32[2,3], Arg_2.7: f32[1,3]) -> f32[3] {
          %Arg_0.5 = f32[1,3] parameter(0)
          %Arg_1.6 = f32[2,3] parameter(1)
          %Arg_2.7 = f32[1,3] parameter(2)
          %constant.9 = f32[] constant(0)
          %reshape.11 = f32[3] reshape(%Arg_0.5)
          %reduce.12 = f32[3] reduce(%Arg_1.6, %constant.9), dimensions={0}, calls={%region.1}
          %reshape.13 = f32[3] reshape(%Arg_2.7)
          %add.14 = f32[3] add(%reshape.11, %reduce.12)
          ROOT %add.15 = f32[3] add(%add.14, %reshape.13)
        }
    """,
    "reduce_of_concatenate_all_dims": """
        %region.1 (Arg_0.2: f32[], Arg_1.3: f32[]) -> f32[] {
          %Arg_0.2 = f32[] parameter(0)
          %Arg_1.3 = f32[] parameter(1)
          ROOT %maximum.4 = f32[] maximum(%Arg_0.2, %Arg_1.3)
        }

        ENTRY %main (Arg_0.5: f32[1,3], Arg_1.6: f32[2,3], Arg_2.7: f32[1,3]) -> f32[] {
          %Arg_0.5 = f32[1,3] parameter(0)
          %Arg_1.6 = f32[2,3] parameter(1)
          %Arg_2.7 = f32[1,3] parameter(2)
          %constant.9 = f32[] constant(-inf)
          %reduce.11 = f32[] reduce(%Arg_0.5, %constant.9), dimensions={0,1}, calls={%region.1}
          %reduce.12 = f32[] reduce(%Arg_1.6, %constant.9), dimensions={0,1}, calls={%region.1}
          %reduce.13 = f32[] reduce(%Arg_2.7, %constant.9), dimensions={0,1}, calls={%region.1}
          %maximum.14 = f32[] maximum(%reduce.11, %reduce.12)
          ROOT %maximum.15 = f32[] maximum(%maximum.14, %reduce.13)
        }
    """,
    "keep_reduce_of_concatenate_other_dim": """
        %region.1 (Arg_0.2: f32[], Arg_1.3: f32[]) -> f32[] {
          %Arg_0.2 = f32[] parameter(0)
          %Arg_1.3 = f32[] parameter(1)
          ROOT %add.4 = f32[] add(%Arg_0.2, %Arg_1.3)
        }

        ENTRY %main (Arg_0.5: f32[1,3], Arg_1.6: f32[2,3], Arg_2.7: f32[1,3]) -> f32[4] {
          %Arg_0.5 = f32[1,3] parameter(0)
          %Arg_1.6 = f32[2,3] parameter(1)
          %Arg_2.7 = f32[1,3] parameter(2)
          %concatenate.8 = f32[4,3] concatenate(%Arg_0.5, %Arg_1.6, %Arg_2.7), dimension=0
          %constant.9 = f32[] constant(0)
          ROOT %reduce.10 = f32[4] reduce(%concatenate.8, %constant.9), dimensions={1}, calls={%region.1}
        }
    """,
    "keep_reduce_of_concatenate_init": """
        %region.1 (Arg_0.2: f32[], Arg_1.3: f32[]) -> f32[] {
          %Arg_0.2 = f32[] parameter(0)
          %Arg_1.3 = f32[] parameter(1)
          ROOT %add.4 = f32[] add(%Arg_0.2, %Arg_1.3)
        }

        ENTRY %main (Arg_0.5: f32[1,3], Arg_1.6: f32[2,3], Arg_2.7: f32[1,3]) -> f32[3] {
          %Arg_0.5 = f32[1,3] parameter(0)
          %Arg_1.6 = f32[2,3] parameter(1)
          %Arg_2.7 = f32[1,3] parameter(2)
          %concatenate.8 = f32[4,3] concatenate(%Arg_0.5, %Arg_1.6, %Arg_2.7), dimension=0
          %constant.9 = f32[] constant(1)
          ROOT %reduce.10 = f32[3] reduce(%concatenate.8, %constant.9), dimensions={0}, calls={%region.1}
        }
    """,
    "reduce_of_transpose": """
        %region.1 (Arg_0.2: f32[], Arg_1.3: f32[]) -> f32[] {
          %Arg_0.2 = f32[] parameter(0)
          %Arg_1.3 = f32[] parameter(1)
          ROOT %add.4 = f32[] add(%Arg_0.2, %Arg_1.3)
        }

        ENTRY %main (Arg_0.5: f32[2,3,4]) -> f32[4,3] {
          %Arg_0.5 = f32[2,3,4] parameter(0)
          %constant.7 = f32[] constant(0)
          %reduce.9 = f32[3,4] reduce(%Arg_0.5, %constant.7), dimensions={0}, calls={%region.1}
          ROOT %transpose.10 = f32[4,3] transpose(%reduce.9), permutation={1,0}
        }
    """,
    "reduce_of_transpose_kept_in_order": """
        %region.1 (Arg_0.2: f32[], Arg_1.3: f32[]) -> f32[] {
          %Arg_0.2 = f32[] parameter(0)
          %Arg_1.3 = f32[] parameter(1)
          ROOT %maximum.4 = f32[] maximum(%Arg_0.2, %Arg_1.3)
        }

        ENTRY %main (Arg_0.5: f32[2,3,4]) -> f32[2,4] {
          %Arg_0.5 = f32[2,3,4] parameter(0)
          %constant.7 = f32[] constant(-inf)
          ROOT %reduce.9 = f32[2,4] reduce(%Arg_0.5, %constant.7), dimensions={1}, calls={%region.1}
        }
    """,
    "reduce_minor_run_first": """
        %region.1 (Arg_0.2: f32[], Arg_1.3: f32[]) -> f32[] {
          %Arg_0.2 = f32[] parameter(0)
          %Arg_1.3 = f32[] parameter(1)
          ROOT %add.4 = f32[] add(%Arg_0.2, %Arg_1.3)
        }

        ENTRY %main (Arg_0.5: f32[2,3,4]) -> f32[3] {
          %Arg_0.5 = f32[2,3,4] parameter(0)
          %constant.6 = f32[] constant(0)
          %reduce.8 = f32[2,3] reduce(%Arg_0.5, %constant.6), dimensions={2}, calls={%region.1}
          ROOT %reduce.9 = f32[3] reduce(%reduce.8, %constant.6), dimensions={0}, calls={%region.1}
        }
    """,
    "reduce_minor_run_first_max": """
        %region.1 (Arg_0.2: f32[], Arg_1.3: f32[]) -> f32[] {
          %Arg_0.2 = f32[] parameter(0)
          %Arg_1.3 = f32[] parameter(1)
          ROOT %maximum.4 = f32[] maximum(%Arg_0.2, %Arg_1.3)
        }

        ENTRY %main (Arg_0.5: f32[2,3,4,5]) -> f32[3] {
          %Arg_0.5 = f32[2,3,4,5] parameter(0)
          %constant.6 = f32[] constant(-inf)
          %reduce.8 = f32[2,3] reduce(%Arg_0.5, %constant.6), dimensions={2,3}, calls={%region.1}
          ROOT %reduce.9 = f32[3] reduce(%reduce.8, %constant.6), dimensions={0}, calls={%region.1}
        }
    """,
    "keep_reduce_minor_run_first_columns": """
        %region.1 (Arg_0.2: f32[], Arg_1.3: f32[]) -> f32[] {
          %Arg_0.2 = f32[] parameter(0)
          %Arg_1.3 = f32[] parameter(1)
          ROOT %add.4 = f32[] add(%Arg_0.2, %Arg_1.3)
        }

        ENTRY %main (Arg_0.5: f32[2,3,4]) -> f32[4] {
          %Arg_0.5 = f32[2,3,4] parameter(0)
          %constant.6 = f32[] constant(0)
          ROOT %reduce.7 = f32[4] reduce(%Arg_0.5, %constant.6), dimensions={0,1}, calls={%region.1}
        }
    """,
    "keep_reduce_minor_run_first_rows": """
        %region.1 (Arg_0.2: f32[], Arg_1.3: f32[]) -> f32[] {
          %Arg_0.2 = f32[] parameter(0)
          %Arg_1.3 = f32[] parameter(1)
          ROOT %add.4 = f32[] add(%Arg_0.2, %Arg_1.3)
        }

        ENTRY %main (Arg_0.5: f32[2,3,4]) -> f32[2] {
          %Arg_0.5 = f32[2,3,4] parameter(0)
          %constant.6 = f32[] constant(0)
          ROOT %reduce.7 = f32[2] reduce(%Arg_0.5, %constant.6), dimensions={1,2}, calls={%region.1}
        }
    """,
    "keep_reduce_minor_run_first_init": """
        %region.1 (Arg_0.2: f32[], Arg_1.3: f32[]) -> f32[] {
          %Arg_0.2 = f32[] parameter(0)
          %Arg_1.3 = f32[] parameter(1)
          ROOT %add.4 = f32[] add(%Arg_0.2, %Arg_1.3)
        }

        ENTRY %main (Arg_0.5: f32[2,3,4]) -> f32[3] {
          %Arg_0.5 = f32[2,3,4] parameter(0)
          %constant.6 = f32[] constant(1)
          ROOT %reduce.7 = f32[3] reduce(%Arg_0.5, %constant.6), dimensions={0,2}, calls={%region.1}
        }
    """,
    "dot_without_contraction": """
        ENTRY %main (Arg_0.1: f32[3,2], Arg_1.2: f32[2,4]) -> f32[2,3,4] {
          %Arg_0.1 = f32[3,2] parameter(0)
          %Arg_1.2 = f32[2,4] parameter(1)
          %transpose.4 = f32[2,3] transpose(%Arg_0.1), permutation={1,0}
          %broadcast_in_dim.5 = f32[2,3,4] broadcast_in_dim(%transpose.4), broadcast_dimensions={0,1}
          %broadcast_in_dim.6 = f32[2,3,4] broadcast_in_dim(%Arg_1.2), broadcast_dimensions={0,2}
          ROOT %multiply.7 = f32[2,3,4] multiply(%broadcast_in_dim.5, %broadcast_in_dim.6)
        }
    """,
    "dot_without_contraction_unit_dims": """
        ENTRY %main (Arg_0.1: bf16[3,1], Arg_1.2: bf16[1,4]) -> f32[3,4] {
          %Arg_0.1 = bf16[3,1] parameter(0)
          %Arg_1.2 = bf16[1,4] parameter(1)
          %convert.4 = f32[3,1] convert(%Arg_0.1)
          %reshape.5 = f32[3] reshape(%convert.4)
          %broadcast_in_dim.6 = f32[3,4] broadcast_in_dim(%reshape.5), broadcast_dimensions={0}
          %convert.7 = f32[1,4] convert(%Arg_1.2)
          %reshape.8 = f32[4] reshape(%convert.7)
          %broadcast_in_dim.9 = f32[3,4] broadcast_in_dim(%reshape.8), broadcast_dimensions={1}
          ROOT %multiply.10 = f32[3,4] multiply(%broadcast_in_dim.6, %broadcast_in_dim.9)
        }
    """,
    "dot_with_vector_side": """
        %add_reducer.8 (Arg_0.9: f32[], Arg_1.10: f32[]) -> f32[] {
          %Arg_0.9 = f32[] parameter(0)
          %Arg_1.10 = f32[] parameter(1)
          ROOT %add.11 = f32[] add(%Arg_0.9, %Arg_1.10)
        }

        ENTRY %main (Arg_0.1: f32[1,4], Arg_1.2: f32[4,6]) -> f32[1,6] {
          %Arg_0.1 = f32[1,4] parameter(0)
          %Arg_1.2 = f32[4,6] parameter(1)
          %reshape.4 = f32[4] reshape(%Arg_0.1)
          %broadcast_in_dim.5 = f32[4,6] broadcast_in_dim(%reshape.4), broadcast_dimensions={0}
          %multiply.6 = f32[4,6] multiply(%Arg_1.2, %broadcast_in_dim.5)
          %constant.7 = f32[] constant(0)
          %reduce.12 = f32[6] reduce(%multiply.6, %constant.7), dimensions={0}, calls={%add_reducer.8}
          ROOT %reshape.13 = f32[1,6] reshape(%reduce.12)
        }
    """,
    "dot_with_vector_side_batched_rhs": """
        %add_reducer.8 (Arg_0.9: f32[], Arg_1.10: f32[]) -> f32[] {
          %Arg_0.9 = f32[] parameter(0)
          %Arg_1.10 = f32[] parameter(1)
          ROOT %add.11 = f32[] add(%Arg_0.9, %Arg_1.10)
        }

        ENTRY %main (Arg_0.1: f32[2,64,4], Arg_1.2: f32[4,2]) -> f32[2,64] {
          %Arg_0.1 = f32[2,64,4] parameter(0)
          %Arg_1.2 = f32[4,2] parameter(1)
          %transpose.4 = f32[2,4] transpose(%Arg_1.2), permutation={1,0}
          %broadcast_in_dim.5 = f32[2,64,4] broadcast_in_dim(%transpose.4), broadcast_dimensions={0,2}
          %multiply.6 = f32[2,64,4] multiply(%Arg_0.1, %broadcast_in_dim.5)
          %constant.7 = f32[] constant(0)
          ROOT %reduce.12 = f32[2,64] reduce(%multiply.6, %constant.7), dimensions={2}, calls={%add_reducer.8}
        }
    """,
    "keep_dot_with_vector_side_of_small_batched_matrices": """
        ENTRY %main (Arg_0.1: f32[2,8,9], Arg_1.2: f32[9,2]) -> f32[2,8] {
          %Arg_0.1 = f32[2,8,9] parameter(0)
          %Arg_1.2 = f32[9,2] parameter(1)
          ROOT %dot_general.3 = f32[2,8] dot_general(%Arg_0.1, %Arg_1.2), lhs_batching_dimensions={0}, lhs_contracting_dimensions={2}, rhs_batching_dimensions={1}, rhs_contracting_dimensions={0}
        }
    """,
    "dot_of_transpose": """
        ENTRY %main (Arg_0.1: f32[4,2], Arg_1.2: f32[4,3]) -> f32[2,3] {
          %Arg_0.1 = f32[4,2] parameter(0)
          %Arg_1.2 = f32[4,3] parameter(1)
          ROOT %dot_general.5 = f32[2,3] dot_general(%Arg_0.1, %Arg_1.2), lhs_batching_dimensions={}, lhs_contracting_dimensions={0}, rhs_batching_dimensions={}, rhs_contracting_dimensions={0}
        }
    """,
    "keep_dot_of_transpose_reordering_free_dims": """
        ENTRY %main (Arg_0.1: f32[2,3,4], Arg_1.2: f32[4,5]) -> f32[3,2,5] {
          %Arg_0.1 = f32[2,3,4] parameter(0)
          %Arg_1.2 = f32[4,5] parameter(1)
          %transpose.3 = f32[3,2,4] transpose(%Arg_0.1), permutation={1,0,2}
          ROOT %dot_general.4 = f32[3,2,5] dot_general(%transpose.3, %Arg_1.2), lhs_batching_dimensions={}, lhs_contracting_dimensions={2}, rhs_batching_dimensions={}, rhs_contracting_dimensions={0}
        }
    """,
    "reshape_of_unit_broadcast": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[6] {
          %Arg_0.1 = f32[2,3] parameter(0)
          ROOT %reshape.4 = f32[6] reshape(%Arg_0.1)
        }
    """,
    "dot_with_vector_side_widening": """
        %add_reducer.9 (Arg_0.10: f32[], Arg_1.11: f32[]) -> f32[] {
          %Arg_0.10 = f32[] parameter(0)
          %Arg_1.11 = f32[] parameter(1)
          ROOT %add.12 = f32[] add(%Arg_0.10, %Arg_1.11)
        }

        ENTRY %main (Arg_0.1: bf16[3], Arg_1.2: bf16[4,3]) -> f32[4] {
          %Arg_0.1 = bf16[3] parameter(0)
          %Arg_1.2 = bf16[4,3] parameter(1)
          %convert.4 = f32[3] convert(%Arg_0.1)
          %convert.5 = f32[4,3] convert(%Arg_1.2)
          %broadcast_in_dim.6 = f32[4,3] broadcast_in_dim(%convert.4), broadcast_dimensions={1}
          %multiply.7 = f32[4,3] multiply(%convert.5, %broadcast_in_dim.6)
          %constant.8 = f32[] constant(0)
          ROOT %reduce.13 = f32[4] reduce(%multiply.7, %constant.8), dimensions={1}, calls={%add_reducer.9}
        }
    """,
    "keep_dot_with_large_vector_side": """
        ENTRY %main (Arg_0.1: f32[256,256], Arg_1.2: f32[256]) -> f32[256] {
          %Arg_0.1 = f32[256,256] parameter(0)
          %Arg_1.2 = f32[256] parameter(1)
          ROOT %dot_general.3 = f32[256] dot_general(%Arg_0.1, %Arg_1.2), lhs_batching_dimensions={}, lhs_contracting_dimensions={1}, rhs_batching_dimensions={}, rhs_contracting_dimensions={0}
        }
    """,
    "dot_without_free_dims": """
        %add_reducer.7 (Arg_0.8: f32[], Arg_1.9: f32[]) -> f32[] {
          %Arg_0.8 = f32[] parameter(0)
          %Arg_1.9 = f32[] parameter(1)
          ROOT %add.10 = f32[] add(%Arg_0.8, %Arg_1.9)
        }

        ENTRY %main (Arg_0.1: f32[5,3], Arg_1.2: f32[3,5]) -> f32[3] {
          %Arg_0.1 = f32[5,3] parameter(0)
          %Arg_1.2 = f32[3,5] parameter(1)
          %transpose.4 = f32[3,5] transpose(%Arg_0.1), permutation={1,0}
          %multiply.5 = f32[3,5] multiply(%transpose.4, %Arg_1.2)
          %constant.6 = f32[] constant(0)
          ROOT %reduce.11 = f32[3] reduce(%multiply.5, %constant.6), dimensions={1}, calls={%add_reducer.7}
        }
    """,
    "small_int_dot_as_float": """
        ENTRY %main (Arg_0.1: s8[3,4], Arg_1.2: s8[4,2]) -> s32[3,2] {
          %Arg_0.1 = s8[3,4] parameter(0)
          %Arg_1.2 = s8[4,2] parameter(1)
          %convert.6 = f32[3,4] convert(%Arg_0.1)
          %convert.7 = f32[4,2] convert(%Arg_1.2)
          %dot_general.8 = f32[3,2] dot_general(%convert.6, %convert.7), lhs_batching_dimensions={}, lhs_contracting_dimensions={1}, rhs_batching_dimensions={}, rhs_contracting_dimensions={0}
          ROOT %convert.9 = s32[3,2] convert(%dot_general.8)
        }
    """,
    "small_int_dot_as_float_u8_pred": """
        ENTRY %main (Arg_0.1: u8[3,4], Arg_1.2: pred[4,2]) -> s32[3,2] {
          %Arg_0.1 = u8[3,4] parameter(0)
          %Arg_1.2 = pred[4,2] parameter(1)
          %convert.6 = f32[3,4] convert(%Arg_0.1)
          %convert.7 = f32[4,2] convert(%Arg_1.2)
          %dot_general.8 = f32[3,2] dot_general(%convert.6, %convert.7), lhs_batching_dimensions={}, lhs_contracting_dimensions={1}, rhs_batching_dimensions={}, rhs_contracting_dimensions={0}
          ROOT %convert.9 = s32[3,2] convert(%dot_general.8)
        }
    """,
    "small_int_dot_as_float_unwidened": """
        ENTRY %main (Arg_0.1: s8[3,4], Arg_1.2: s8[4,2]) -> s32[3,2] {
          %Arg_0.1 = s8[3,4] parameter(0)
          %Arg_1.2 = s8[4,2] parameter(1)
          %convert.4 = f32[3,4] convert(%Arg_0.1)
          %convert.5 = f32[4,2] convert(%Arg_1.2)
          %dot_general.6 = f32[3,2] dot_general(%convert.4, %convert.5), lhs_batching_dimensions={}, lhs_contracting_dimensions={1}, rhs_batching_dimensions={}, rhs_contracting_dimensions={0}
          ROOT %convert.7 = s32[3,2] convert(%dot_general.6)
        }
    """,
    "small_int_dot_as_float_in_float64": """
        ENTRY %main (Arg_0.1: s8[3,1024], Arg_1.2: u8[1024,2]) -> s32[3,2] {
          %Arg_0.1 = s8[3,1024] parameter(0)
          %Arg_1.2 = u8[1024,2] parameter(1)
          %convert.6 = f64[3,1024] convert(%Arg_0.1)
          %convert.7 = f64[1024,2] convert(%Arg_1.2)
          %dot_general.8 = f64[3,2] dot_general(%convert.6, %convert.7), lhs_batching_dimensions={}, lhs_contracting_dimensions={1}, rhs_batching_dimensions={}, rhs_contracting_dimensions={0}
          ROOT %convert.9 = s32[3,2] convert(%dot_general.8)
        }
    """,
    "keep_small_int_dot_that_may_wrap": """
        ENTRY %main (Arg_0.1: s8[3,131072], Arg_1.2: s8[131072,2]) -> s32[3,2] {
          %Arg_0.1 = s8[3,131072] parameter(0)
          %Arg_1.2 = s8[131072,2] parameter(1)
          %convert.3 = s32[3,131072] convert(%Arg_0.1)
          %convert.4 = s32[131072,2] convert(%Arg_1.2)
          ROOT %dot_general.5 = s32[3,2] dot_general(%convert.3, %convert.4), lhs_batching_dimensions={}, lhs_contracting_dimensions={1}, rhs_batching_dimensions={}, rhs_contracting_dimensions={0}
        }
    """,
    "keep_int_dot_of_wide_values": """
        ENTRY %main (Arg_0.1: s16[3,4], Arg_1.2: s8[4,2]) -> s32[3,2] {
          %Arg_0.1 = s16[3,4] parameter(0)
          %Arg_1.2 = s8[4,2] parameter(1)
          %convert.3 = s32[3,4] convert(%Arg_0.1)
          %convert.4 = s32[4,2] convert(%Arg_1.2)
          ROOT %dot_general.5 = s32[3,2] dot_general(%convert.3, %convert.4), lhs_batching_dimensions={}, lhs_contracting_dimensions={1}, rhs_batching_dimensions={}, rhs_contracting_dimensions={0}
        }
    """,
    "keep_unsigned_int_dot_of_signed_values": """
        ENTRY %main (Arg_0.1: s8[3,4], Arg_1.2: u8[4,2]) -> u32[3,2] {
          %Arg_0.1 = s8[3,4] parameter(0)
          %Arg_1.2 = u8[4,2] parameter(1)
          %convert.3 = u32[3,4] convert(%Arg_0.1)
          %convert.4 = u32[4,2] convert(%Arg_1.2)
          ROOT %dot_general.5 = u32[3,2] dot_general(%convert.3, %convert.4), lhs_batching_dimensions={}, lhs_contracting_dimensions={1}, rhs_batching_dimensions={}, rhs_contracting_dimensions={0}
        }
    """,
    "dot_without_free_dims_widening": """
        %add_reducer.8 (Arg_0.9: s32[], Arg_1.10: s32[]) -> s32[] {
          %Arg_0.9 = s32[] parameter(0)
          %Arg_1.10 = s32[] parameter(1)
          ROOT %add.11 = s32[] add(%Arg_0.9, %Arg_1.10)
        }

        ENTRY %main (Arg_0.1: s8[4], Arg_1.2: s8[4]) -> s32[] {
          %Arg_0.1 = s8[4] parameter(0)
          %Arg_1.2 = s8[4] parameter(1)
          %convert.4 = s32[4] convert(%Arg_0.1)
          %convert.5 = s32[4] convert(%Arg_1.2)
          %multiply.6 = s32[4] multiply(%convert.4, %convert.5)
          %constant.7 = s32[] constant(0)
          ROOT %reduce.12 = s32[] reduce(%multiply.6, %constant.7), dimensions={0}, calls={%add_reducer.8}
        }
    """,
    "keep_dot_without_free_dims_bf16": """
        ENTRY %main (Arg_0.1: bf16[3,4], Arg_1.2: bf16[3,4]) -> bf16[3] {
          %Arg_0.1 = bf16[3,4] parameter(0)
          %Arg_1.2 = bf16[3,4] parameter(1)
          ROOT %dot_general.3 = bf16[3] dot_general(%Arg_0.1, %Arg_1.2), lhs_batching_dimensions={0}, lhs_contracting_dimensions={1}, rhs_batching_dimensions={0}, rhs_contracting_dimensions={1}
        }
    """,
    "keep_dot_with_contraction": """
        ENTRY %main (Arg_0.1: f32[3,2], Arg_1.2: f32[2,4]) -> f32[3,4] {
          %Arg_0.1 = f32[3,2] parameter(0)
          %Arg_1.2 = f32[2,4] parameter(1)
          ROOT %dot_general.3 = f32[3,4] dot_general(%Arg_0.1, %Arg_1.2), lhs_batching_dimensions={}, lhs_contracting_dimensions={1}, rhs_batching_dimensions={}, rhs_contracting_dimensions={0}
        }
    """,
    "reshape_same_shape": """
        ENTRY %main (Arg_0.1: f32[2,3,4]) -> f32[2,3,4] {
          ROOT %Arg_0.1 = f32[2,3,4] parameter(0)
        }
    """,
    "reshape_reshape": """
        ENTRY %main (Arg_0.1: f32[2,3,4]) -> f32[4,6] {
          %Arg_0.1 = f32[2,3,4] parameter(0)
          ROOT %reshape.4 = f32[4,6] reshape(%Arg_0.1)
        }
    """,
    "reshape_reshape_back": """
        ENTRY %main (Arg_0.1: f32[2,3,4]) -> f32[2,3,4] {
          ROOT %Arg_0.1 = f32[2,3,4] parameter(0)
        }
    """,
    "broadcast_identity": """
        ENTRY %main (Arg_0.1: f32[3]) -> f32[3] {
          ROOT %Arg_0.1 = f32[3] parameter(0)
        }
    """,
    "broadcast_broadcast": """
        ENTRY %main (Arg_0.1: f32[3]) -> f32[5,3,2] {
          %Arg_0.1 = f32[3] parameter(0)
          ROOT %broadcast_in_dim.4 = f32[5,3,2] broadcast_in_dim(%Arg_0.1), broadcast_dimensions={1}
        }
    """,
    "broadcast_of_unit_reshape": """
        ENTRY %main (Arg_0.1: f32[3,2]) -> f32[3,4,2] {
          %Arg_0.1 = f32[3,2] parameter(0)
          ROOT %broadcast_in_dim.4 = f32[3,4,2] broadcast_in_dim(%Arg_0.1), broadcast_dimensions={0,2}
        }
    """,
    "keep_broadcast_of_moving_reshape": """
        ENTRY %main (Arg_0.1: f32[3,2]) -> f32[2,3,5] {
          %Arg_0.1 = f32[3,2] parameter(0)
          %reshape.2 = f32[2,3] reshape(%Arg_0.1)
          ROOT %broadcast_in_dim.3 = f32[2,3,5] broadcast_in_dim(%reshape.2), broadcast_dimensions={0,1}
        }
    """,
    "slice_full": """
        ENTRY %main (Arg_0.1: f32[10,4]) -> f32[10,4] {
          ROOT %Arg_0.1 = f32[10,4] parameter(0)
        }
    """,
    "slice_slice": """
        ENTRY %main (Arg_0.1: f32[10,4]) -> f32[2,2] {
          %Arg_0.1 = f32[10,4] parameter(0)
          ROOT %slice.4 = f32[2,2] slice(%Arg_0.1), limit_indices={8,3}, start_indices={3,1}, strides={4,1}
        }
    """,
    "pad_zero": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          ROOT %Arg_0.1 = f32[2,3] parameter(0)
        }
    """,
    "slice_concatenate": """
        ENTRY %main (Arg_0.1: f32[2,3], Arg_1.2: f32[4,3], Arg_2.3: f32[1,3]) -> f32[3,2] {
          %Arg_0.1 = f32[2,3] parameter(0)
          %Arg_1.2 = f32[4,3] parameter(1)
          %Arg_2.3 = f32[1,3] parameter(2)
          ROOT %slice.6 = f32[3,2] slice(%Arg_1.2), limit_indices={4,2}, start_indices={1,0}, strides={1,1}
        }
    """,
    "slice_concatenate_two_pieces": """
        ENTRY %main (Arg_0.1: f32[2,3], Arg_1.2: f32[4,3], Arg_2.3: f32[1,3]) -> f32[4,2] {
          %Arg_0.1 = f32[2,3] parameter(0)
          %Arg_1.2 = f32[4,3] parameter(1)
          %Arg_2.3 = f32[1,3] parameter(2)
          %slice.6 = f32[3,2] slice(%Arg_1.2), limit_indices={4,3}, start_indices={1,1}, strides={1,1}
          %slice.7 = f32[1,2] slice(%Arg_2.3), limit_indices={1,3}, start_indices={0,1}, strides={1,1}
          ROOT %concatenate.8 = f32[4,2] concatenate(%slice.6, %slice.7), dimension=0
        }
    """,
    "slice_concatenate_strided": """
        ENTRY %main (Arg_0.1: f32[2,3], Arg_1.2: f32[4,3], Arg_2.3: f32[1,3]) -> f32[2,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          %Arg_1.2 = f32[4,3] parameter(1)
          %Arg_2.3 = f32[1,3] parameter(2)
          ROOT %slice.6 = f32[2,3] slice(%Arg_1.2), limit_indices={4,3}, start_indices={0,0}, strides={2,1}
        }
    """,
    "keep_slice_concatenate_every_piece": """
        ENTRY %main (Arg_0.1: f32[2,3], Arg_1.2: f32[4,3], Arg_2.3: f32[1,3]) -> f32[6,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          %Arg_1.2 = f32[4,3] parameter(1)
          %Arg_2.3 = f32[1,3] parameter(2)
          %concatenate.4 = f32[7,3] concatenate(%Arg_0.1, %Arg_1.2, %Arg_2.3), dimension=0
          ROOT %slice.5 = f32[6,3] slice(%concatenate.4), limit_indices={7,3}, start_indices={1,0}, strides={1,1}
        }
    """,
    "keep_slice_concatenate_strided_pieces": """
        ENTRY %main (Arg_0.1: f32[2,3], Arg_1.2: f32[4,3], Arg_2.3: f32[1,3]) -> f32[2,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          %Arg_1.2 = f32[4,3] parameter(1)
          %Arg_2.3 = f32[1,3] parameter(2)
          %concatenate.4 = f32[7,3] concatenate(%Arg_0.1, %Arg_1.2, %Arg_2.3), dimension=0
          ROOT %slice.5 = f32[2,3] slice(%concatenate.4), limit_indices={7,3}, start_indices={3,0}, strides={2,1}
        }
    """,
    "concatenate_one": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          ROOT %Arg_0.1 = f32[2,3] parameter(0)
        }
    """,
    "reverse_nothing": """
        ENTRY %main (Arg_0.1: f32[1,3]) -> f32[1,3] {
          ROOT %Arg_0.1 = f32[1,3] parameter(0)
        }
    """,
    "reverse_reverse": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          ROOT %Arg_0.1 = f32[2,3] parameter(0)
        }
    """,
    "reverse_reverse_partial": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          ROOT %reverse.4 = f32[2,3] reverse(%Arg_0.1), dimensions={1}
        }
    """,
    "get_tuple_element_of_tuple": """
        ENTRY %main (Arg_0.1: f32[2,3], Arg_1.2: s32[3]) -> s32[3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          ROOT %Arg_1.2 = s32[3] parameter(1)
        }
    """,
    "negate_chain": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          ROOT %negate.6 = f32[2,3] negate(%Arg_0.1)
        }
    """,
    "keep_multiply_zero_float": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          %constant.2 = f32[] constant(0)
          %broadcast_in_dim.3 = f32[2,3] broadcast_in_dim(%constant.2), broadcast_dimensions={}
          ROOT %multiply.4 = f32[2,3] multiply(%Arg_0.1, %broadcast_in_dim.3)
        }
    """,
    "keep_subtract_self_float": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          ROOT %subtract.2 = f32[2,3] subtract(%Arg_0.1, %Arg_0.1)
        }
    """,
    "keep_compare_self_float": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> pred[2,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          ROOT %compare.2 = pred[2,3] compare(%Arg_0.1, %Arg_0.1), comparison_direction=EQ
        }
    """,
    "keep_convert_narrowing_first": """
        ENTRY %main (Arg_0.1: f64[2,3]) -> f64[2,3] {
          %Arg_0.1 = f64[2,3] parameter(0)
          %convert.2 = f32[2,3] convert(%Arg_0.1)
          ROOT %convert.3 = f64[2,3] convert(%convert.2)
        }
    """,
    "keep_convert_float_to_int": """
        ENTRY %main (Arg_0.1: f16[2,3]) -> s32[2,3] {
          %Arg_0.1 = f16[2,3] parameter(0)
          %convert.2 = f32[2,3] convert(%Arg_0.1)
          ROOT %convert.3 = s32[2,3] convert(%convert.2)
        }
    """,
    "keep_multiply_one_complex": """
        ENTRY %main (Arg_0.1: c64[2,3]) -> c64[2,3] {
          %Arg_0.1 = c64[2,3] parameter(0)
          %constant.2 = c64[] constant((1,0))
          %broadcast_in_dim.3 = c64[2,3] broadcast_in_dim(%constant.2), broadcast_dimensions={}
          ROOT %multiply.4 = c64[2,3] multiply(%Arg_0.1, %broadcast_in_dim.3)
        }
    """,
    "divide_broadcast": """
        ENTRY %main (Arg_0.1: f32[2,3], Arg_1.2: f32[2]) -> f32[2,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          %Arg_1.2 = f32[2] parameter(1)
          %constant.5 = f32[] constant(1)
          %broadcast_in_dim.6 = f32[2] broadcast_in_dim(%constant.5), broadcast_dimensions={}
          %divide.7 = f32[2] divide(%broadcast_in_dim.6, %Arg_1.2)
          %broadcast_in_dim.8 = f32[2,3] broadcast_in_dim(%divide.7), broadcast_dimensions={0}
          ROOT %multiply.9 = f32[2,3] multiply(%Arg_0.1, %broadcast_in_dim.8)
        }
    """,
    "divide_broadcast_constant": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          %constant.5 = f32[] constant(0.33333334)
          %broadcast_in_dim.6 = f32[2,3] broadcast_in_dim(%constant.5), broadcast_dimensions={}
          ROOT %multiply.7 = f32[2,3] multiply(%Arg_0.1, %broadcast_in_dim.6)
        }
    """,
    "divide_broadcast_sqrt": """
        ENTRY %main (Arg_0.1: f32[2,3], Arg_1.2: f32[2]) -> f32[2,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          %Arg_1.2 = f32[2] parameter(1)
          %rsqrt.9 = f32[2] rsqrt(%Arg_1.2)
          %broadcast_in_dim.11 = f32[2,3] broadcast_in_dim(%rsqrt.9), broadcast_dimensions={0}
          ROOT %multiply.12 = f32[2,3] multiply(%Arg_0.1, %broadcast_in_dim.11)
        }
    """,
    "divide_constant": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          %constant.4 = f32[2,3] constant({{1,0.33333334,-0.14285715},{2,inf,0.1}})
          ROOT %multiply.5 = f32[2,3] multiply(%Arg_0.1, %constant.4)
        }
    """,
    "divide_constant_complex": """
        ENTRY %main (Arg_0.1: c64[2,3]) -> c64[2,3] {
          %Arg_0.1 = c64[2,3] parameter(0)
          %constant.5 = c64[] constant((0.25,0))
          %broadcast_in_dim.6 = c64[2,3] broadcast_in_dim(%constant.5), broadcast_dimensions={}
          ROOT %multiply.7 = c64[2,3] multiply(%Arg_0.1, %broadcast_in_dim.6)
        }
    """,
    "divide_exp": """
        ENTRY %main (Arg_0.1: f32[2,3], Arg_1.2: f32[2,3]) -> f32[2,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          %Arg_1.2 = f32[2,3] parameter(1)
          %negate.5 = f32[2,3] negate(%Arg_1.2)
          %exponential.6 = f32[2,3] exponential(%negate.5)
          ROOT %multiply.7 = f32[2,3] multiply(%Arg_0.1, %exponential.6)
        }
    """,
    "divide_exp_exp": """
        ENTRY %main (Arg_0.1: f32[2,3], Arg_1.3: f32[2,3]) -> f32[2,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          %Arg_1.3 = f32[2,3] parameter(1)
          %subtract.6 = f32[2,3] subtract(%Arg_0.1, %Arg_1.3)
          ROOT %exponential.7 = f32[2,3] exponential(%subtract.6)
        }
    """,
    "divide_power": """
        ENTRY %main (Arg_0.1: f32[2,3], Arg_1.2: f32[2,3], Arg_2.3: f32[2,3]) -> f32[2,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          %Arg_1.2 = f32[2,3] parameter(1)
          %Arg_2.3 = f32[2,3] parameter(2)
          %negate.6 = f32[2,3] negate(%Arg_2.3)
          %power.7 = f32[2,3] power(%Arg_1.2, %negate.6)
          ROOT %multiply.8 = f32[2,3] multiply(%Arg_0.1, %power.7)
        }
    """,
    "divide_rsqrt": """
        ENTRY %main (Arg_0.1: f32[2,3], Arg_1.2: f32[2,3]) -> f32[2,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          %Arg_1.2 = f32[2,3] parameter(1)
          %sqrt.5 = f32[2,3] sqrt(%Arg_1.2)
          ROOT %multiply.6 = f32[2,3] multiply(%Arg_0.1, %sqrt.5)
        }
    """,
    "divide_sqrt": """
        ENTRY %main (Arg_0.1: f32[2,3], Arg_1.2: f32[2,3]) -> f32[2,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          %Arg_1.2 = f32[2,3] parameter(1)
          %rsqrt.5 = f32[2,3] rsqrt(%Arg_1.2)
          ROOT %multiply.6 = f32[2,3] multiply(%Arg_0.1, %rsqrt.5)
        }
    """,
    "keep_divide_complex_broadcast": """
        ENTRY %main (Arg_0.1: c64[2,3], Arg_1.2: c64[2]) -> c64[2,3] {
          %Arg_0.1 = c64[2,3] parameter(0)
          %Arg_1.2 = c64[2] parameter(1)
          %broadcast_in_dim.3 = c64[2,3] broadcast_in_dim(%Arg_1.2), broadcast_dimensions={0}
          ROOT %divide.4 = c64[2,3] divide(%Arg_0.1, %broadcast_in_dim.3)
        }
    """,
    "keep_divide_int_broadcast": """
        ENTRY %main (Arg_0.1: s32[2,3], Arg_1.2: s32[2]) -> s32[2,3] {
          %Arg_0.1 = s32[2,3] parameter(0)
          %Arg_1.2 = s32[2] parameter(1)
          %broadcast_in_dim.3 = s32[2,3] broadcast_in_dim(%Arg_1.2), broadcast_dimensions={0}
          ROOT %divide.4 = s32[2,3] divide(%Arg_0.1, %broadcast_in_dim.3)
        }
    """,
    "keep_divide_int_constant": """
        ENTRY %main (Arg_0.1: s32[2,3]) -> s32[2,3] {
          %Arg_0.1 = s32[2,3] parameter(0)
          %constant.2 = s32[] constant(3)
          %broadcast_in_dim.3 = s32[2,3] broadcast_in_dim(%constant.2), broadcast_dimensions={}
          ROOT %divide.4 = s32[2,3] divide(%Arg_0.1, %broadcast_in_dim.3)
        }
    """,
    "complex_sum_as_parts": """
        %add_reducer.8 (Arg_0.9: f32[], Arg_1.10: f32[]) -> f32[] {
          %Arg_0.9 = f32[] parameter(0)
          %Arg_1.10 = f32[] parameter(1)
          ROOT %add.11 = f32[] add(%Arg_0.9, %Arg_1.10)
        }

        ENTRY %main (Arg_0.5: c64[2,3]) -> c64[2] {
          %Arg_0.5 = c64[2,3] parameter(0)
          %constant.6 = c64[] constant((1,-2))
          %real.12 = f32[2,3] real(%Arg_0.5)
          %real.13 = f32[] real(%constant.6)
          %reduce.14 = f32[2] reduce(%real.12, %real.13), dimensions={1}, calls={%add_reducer.8}
          %imag.15 = f32[2,3] imag(%Arg_0.5)
          %imag.16 = f32[] imag(%constant.6)
          %reduce.17 = f32[2] reduce(%imag.15, %imag.16), dimensions={1}, calls={%add_reducer.8}
          ROOT %complex.18 = c64[2] complex(%reduce.14, %reduce.17)
        }
    """,
    "keep_complex_product": """
        %region.1 (Arg_0.2: c64[], Arg_1.3: c64[]) -> c64[] {
          %Arg_0.2 = c64[] parameter(0)
          %Arg_1.3 = c64[] parameter(1)
          ROOT %multiply.4 = c64[] multiply(%Arg_0.2, %Arg_1.3)
        }

        ENTRY %main (Arg_0.5: c64[2,3]) -> c64[2] {
          %Arg_0.5 = c64[2,3] parameter(0)
          %constant.6 = c64[] constant((1,-2))
          ROOT %reduce.7 = c64[2] reduce(%Arg_0.5, %constant.6), dimensions={1}, calls={%region.1}
        }
    """,
    "complex_window_sum_as_parts": """
        %add_reducer.8 (Arg_0.9: f32[], Arg_1.10: f32[]) -> f32[] {
          %Arg_0.9 = f32[] parameter(0)
          %Arg_1.10 = f32[] parameter(1)
          ROOT %add.11 = f32[] add(%Arg_0.9, %Arg_1.10)
        }

        ENTRY %main (Arg_0.5: c64[2,3]) -> c64[2,3] {
          %Arg_0.5 = c64[2,3] parameter(0)
          %constant.6 = c64[] constant((0,0))
          %real.12 = f32[2,3] real(%Arg_0.5)
          %real.13 = f32[] real(%constant.6)
          %reduce_window.14 = f32[2,3] reduce_window(%real.12, %real.13), base_dilations={1,1}, padding={{0,0},{2,0}}, window_dilations={1,1}, window_dimensions={1,3}, window_strides={1,1}, calls={%add_reducer.8}
          %imag.15 = f32[2,3] imag(%Arg_0.5)
          %imag.16 = f32[] imag(%constant.6)
          %reduce_window.17 = f32[2,3] reduce_window(%imag.15, %imag.16), base_dilations={1,1}, padding={{0,0},{2,0}}, window_dilations={1,1}, window_dimensions={1,3}, window_strides={1,1}, calls={%add_reducer.8}
          ROOT %complex.18 = c64[2,3] complex(%reduce_window.14, %reduce_window.17)
        }
    """,
    "keep_complex_cumulative_product": """
        %region.1 (Arg_0.2: c64[], Arg_1.3: c64[]) -> c64[] {
          %Arg_0.2 = c64[] parameter(0)
          %Arg_1.3 = c64[] parameter(1)
          ROOT %multiply.4 = c64[] multiply(%Arg_0.2, %Arg_1.3)
        }

        ENTRY %main (Arg_0.5: c64[2,3]) -> c64[2,3] {
          %Arg_0.5 = c64[2,3] parameter(0)
          %constant.6 = c64[] constant((0,0))
          ROOT %reduce_window.7 = c64[2,3] reduce_window(%Arg_0.5, %constant.6), base_dilations={1,1}, padding={{0,0},{2,0}}, window_dilations={1,1}, window_dimensions={1,3}, window_strides={1,1}, calls={%region.1}
        }
    """,
    "dot_of_splat": """
        %add_reducer.6 (Arg_0.7: f32[], Arg_1.8: f32[]) -> f32[] {
          %Arg_0.7 = f32[] parameter(0)
          %Arg_1.8 = f32[] parameter(1)
          ROOT %add.9 = f32[] add(%Arg_0.7, %Arg_1.8)
        }

        ENTRY %main (Arg_0.3: f32[2,3,5]) -> f32[2,4,5] {
          %Arg_0.3 = f32[2,3,5] parameter(0)
          %constant.5 = f32[] constant(0)
          %reduce.10 = f32[2,5] reduce(%Arg_0.3, %constant.5), dimensions={1}, calls={%add_reducer.6}
          ROOT %broadcast_in_dim.11 = f32[2,4,5] broadcast_in_dim(%reduce.10), broadcast_dimensions={0,2}
        }
    """,
    "dot_of_splat_scaled_rhs": """
        %add_reducer.6 (Arg_0.7: f64[], Arg_1.8: f64[]) -> f64[] {
          %Arg_0.7 = f64[] parameter(0)
          %Arg_1.8 = f64[] parameter(1)
          ROOT %add.9 = f64[] add(%Arg_0.7, %Arg_1.8)
        }

        ENTRY %main (Arg_0.3: f64[4,3]) -> f64[4,6] {
          %Arg_0.3 = f64[4,3] parameter(0)
          %constant.5 = f64[] constant(0)
          %reduce.10 = f64[4] reduce(%Arg_0.3, %constant.5), dimensions={1}, calls={%add_reducer.6}
          %constant.11 = f64[] constant(0.25)
          %broadcast_in_dim.12 = f64[4] broadcast_in_dim(%constant.11), broadcast_dimensions={}
          %multiply.13 = f64[4] multiply(%reduce.10, %broadcast_in_dim.12)
          ROOT %broadcast_in_dim.14 = f64[4,6] broadcast_in_dim(%multiply.13), broadcast_dimensions={0}
        }
    """,
    "dot_of_splat_batch_after_free": """
        %add_reducer.6 (Arg_0.7: f32[], Arg_1.8: f32[]) -> f32[] {
          %Arg_0.7 = f32[] parameter(0)
          %Arg_1.8 = f32[] parameter(1)
          ROOT %add.9 = f32[] add(%Arg_0.7, %Arg_1.8)
        }

        ENTRY %main (Arg_0.3: f32[5,2,3]) -> f32[2,4,5] {
          %Arg_0.3 = f32[5,2,3] parameter(0)
          %constant.5 = f32[] constant(0)
          %reduce.10 = f32[5,2] reduce(%Arg_0.3, %constant.5), dimensions={2}, calls={%add_reducer.6}
          %constant.11 = f32[] constant(-1)
          %broadcast_in_dim.12 = f32[5,2] broadcast_in_dim(%constant.11), broadcast_dimensions={}
          %multiply.13 = f32[5,2] multiply(%reduce.10, %broadcast_in_dim.12)
          %transpose.14 = f32[2,5] transpose(%multiply.13), permutation={1,0}
          ROOT %broadcast_in_dim.15 = f32[2,4,5] broadcast_in_dim(%transpose.14), broadcast_dimensions={0,2}
        }
    """,
    "keep_dot_of_infinite_splat": """
        ENTRY %main (Arg_0.3: f32[3,5]) -> f32[4,5] {
          %Arg_0.3 = f32[3,5] parameter(0)
          %constant.1 = f32[] constant(inf)
          %broadcast_in_dim.2 = f32[4,3] broadcast_in_dim(%constant.1), broadcast_dimensions={}
          ROOT %dot_general.4 = f32[4,5] dot_general(%broadcast_in_dim.2, %Arg_0.3), lhs_batching_dimensions={}, lhs_contracting_dimensions={1}, rhs_batching_dimensions={}, rhs_contracting_dimensions={0}
        }
    """,
    "keep_add_one": """
        ENTRY %main (Arg_0.1: f32[2,3]) -> f32[2,3] {
          %Arg_0.1 = f32[2,3] parameter(0)
          %constant.2 = f32[] constant(1)
          %broadcast_in_dim.3 = f32[2,3] broadcast_in_dim(%constant.2), broadcast_dimensions={}
          ROOT %add.4 = f32[2,3] add(%Arg_0.1, %broadcast_in_dim.3)
        }
    """,
    "keep_scatter_of_two_windows": """
        %combine.1 (Arg_0.2: f32[], Arg_1.3: f32[]) -> f32[] {
          %Arg_0.2 = f32[] parameter(0)
          ROOT %Arg_1.3 = f32[] parameter(1)
        }

        ENTRY %main (Arg_0.4: f32[100,3], Arg_1.5: s32[2,1], Arg_2.6: f32[2,3]) -> f32[100,3] {
          %Arg_0.4 = f32[100,3] parameter(0)
          %Arg_1.5 = s32[2,1] parameter(1)
          %Arg_2.6 = f32[2,3] parameter(2)
          ROOT %scatter.7 = f32[100,3] scatter(%Arg_0.4, %Arg_1.5, %Arg_2.6), index_vector_dim=1, indices_are_sorted=true, input_batching_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, scatter_indices_batching_dims={}, unique_indices=true, update_window_dims={1}, calls={%combine.1}
        }
    """,
    "scatter_one_window": """
        ENTRY %main (Arg_0.4: f32[100,3], Arg_1.5: s32[1,1], Arg_2.6: f32[1,3]) -> f32[100,3] {
          %Arg_0.4 = f32[100,3] parameter(0)
          %Arg_1.5 = s32[1,1] parameter(1)
          %Arg_2.6 = f32[1,3] parameter(2)
          %constant.9 = s32[] constant(0)
          %reshape.12 = s32[] reshape(%Arg_1.5)
          %constant.13 = s32[] constant(0)
          %compare.14 = pred[] compare(%reshape.12, %constant.13), comparison_direction=GE
          %constant.15 = s32[] constant(99)
          %compare.16 = pred[] compare(%reshape.12, %constant.15), comparison_direction=LE
          %and.17 = pred[] and(%compare.14, %compare.16)
          %dynamic_slice.19 = f32[1,3] dynamic_slice(%Arg_0.4, %reshape.12, %constant.9), slice_sizes={1,3}
          %broadcast_in_dim.20 = pred[1,3] broadcast_in_dim(%and.17), broadcast_dimensions={}
          %select.21 = f32[1,3] select(%broadcast_in_dim.20, %Arg_2.6, %dynamic_slice.19)
          ROOT %dynamic_update_slice.22 = f32[100,3] dynamic_update_slice(%Arg_0.4, %select.21, %reshape.12, %constant.9)
        }
    """,
    "scatter_one_window_add": """
        ENTRY %main (Arg_0.5: f32[100,3], Arg_1.6: s32[1,1], Arg_2.7: f32[1,3]) -> f32[100,3] {
          %Arg_0.5 = f32[100,3] parameter(0)
          %Arg_1.6 = s32[1,1] parameter(1)
          %Arg_2.7 = f32[1,3] parameter(2)
          %constant.10 = s32[] constant(0)
          %reshape.13 = s32[] reshape(%Arg_1.6)
          %constant.14 = s32[] constant(0)
          %compare.15 = pred[] compare(%reshape.13, %constant.14), comparison_direction=GE
          %constant.16 = s32[] constant(99)
          %compare.17 = pred[] compare(%reshape.13, %constant.16), comparison_direction=LE
          %and.18 = pred[] and(%compare.15, %compare.17)
          %dynamic_slice.20 = f32[1,3] dynamic_slice(%Arg_0.5, %reshape.13, %constant.10), slice_sizes={1,3}
          %add.21 = f32[1,3] add(%dynamic_slice.20, %Arg_2.7)
          %broadcast_in_dim.22 = pred[1,3] broadcast_in_dim(%and.18), broadcast_dimensions={}
          %select.23 = f32[1,3] select(%broadcast_in_dim.22, %add.21, %dynamic_slice.20)
          ROOT %dynamic_update_slice.24 = f32[100,3] dynamic_update_slice(%Arg_0.5, %select.23, %reshape.13, %constant.10)
        }
    """,
}


@pytest.mark.parametrize("name", sorted(ALGEBRAIC_CASES))
def test_algebraic_simplifier_pattern(name):
    m, b = new()
    b.build(ALGEBRAIC_CASES[name](b), entry=True)
    expected = "HloModule m\n\n" + textwrap.dedent(ALGEBRAIC_GOLDEN[name]).strip()
    inexact = {rw.name for rw in REWRITES if not rw.exact}
    check(m, ["algebraic_simplifier", "dce"], expected, changed=not name.startswith("keep_"),
          exact=not any(name.startswith(n) for n in inexact))


def test_every_rewrite_has_a_case():
    assert {rw.name for rw in REWRITES} <= set(ALGEBRAIC_CASES)
    assert len({rw.name for rw in REWRITES}) == len(REWRITES)


def test_algebraic_simplifier_runs_inside_called_computations():
    m, b = new()
    rb = Builder(m, "body")
    acc, v = rb.parameter(0, shape(F32)), rb.parameter(1, shape(F32))
    body = rb.build(rb.op("add", acc, rb.op("multiply", v, rb.constant(F32(1)))))
    x = b.parameter(0, shape(F32, 4))
    b.build(b.op("reduce", b.op("negate", b.op("negate", x)), b.constant(F32(0)),
                 dimensions=(0,), calls=[body]), entry=True)
    check(m, ["algebraic_simplifier", "dce"], """
        HloModule m

        %body (Arg_0.1: f32[], Arg_1.2: f32[]) -> f32[] {
          %Arg_0.1 = f32[] parameter(0)
          %Arg_1.2 = f32[] parameter(1)
          ROOT %add.5 = f32[] add(%Arg_0.1, %Arg_1.2)
        }

        ENTRY %main (Arg_0.6: f32[4]) -> f32[] {
          %Arg_0.6 = f32[4] parameter(0)
          %constant.9 = f32[] constant(0)
          ROOT %reduce.10 = f32[] reduce(%Arg_0.6, %constant.9), dimensions={0}, calls={%body}
        }
    """)


def test_exact_conversion():
    assert exact_conversion(np.int8, np.float16) and exact_conversion(np.uint8, "bfloat16")
    assert exact_conversion(np.int16, F32) and not exact_conversion(np.int32, F32)
    assert exact_conversion(np.int32, np.float64) and not exact_conversion(np.int64, np.float64)
    assert exact_conversion(np.float16, F32) and exact_conversion("bfloat16", F32)
    assert not exact_conversion(np.float16, "bfloat16") and not exact_conversion(F32, np.float16)
    assert exact_conversion(F32, np.complex64) and not exact_conversion(np.float64, np.complex64)
    assert exact_conversion(np.bool_, np.int8) and not exact_conversion(np.int8, np.bool_)
    assert exact_conversion(np.uint8, np.int16) and not exact_conversion(np.int8, np.uint32)
    assert not exact_conversion(np.complex64, F32)


# --------------------------------------------------------------------------- pipeline


def _mlp_loss(params, x, labels):
    import ember.numpy as jnp
    (w1, b1), (w2, b2) = params
    h = jnp.maximum(x @ w1 + b1, 0.0)
    logits = h @ w2 + b2
    top = jnp.max(logits, axis=1, keepdims=True)
    logp = logits - top - jnp.log(jnp.sum(jnp.exp(logits - top), axis=1, keepdims=True))
    onehot = (labels[:, None] == jnp.arange(3)).astype(jnp.float32)
    return -jnp.mean(jnp.sum(logp * onehot, axis=1)) * 1.0 + 0.0


def test_optimize_lowered_mlp_loss(capsys):
    import ember
    from ember.compiler.lower import lower_closed_jaxpr

    rng = np.random.default_rng(0)
    params = ((rng.standard_normal((4, 8)).astype(F32), rng.standard_normal(8).astype(F32)),
              (rng.standard_normal((8, 3)).astype(F32), rng.standard_normal(3).astype(F32)))
    x = rng.standard_normal((5, 4)).astype(F32)
    labels = np.array([0, 2, 1, 1, 0], S32)
    module = lower_closed_jaxpr(ember.make_jaxpr(_mlp_loss)(params, x, labels)).module
    args = [params[0][0], params[0][1], params[1][0], params[1][1], x, labels]
    before_count = module.instruction_count()
    before = evaluate(module, args)
    stages = []
    pipeline.optimize(module, verify=True, fuse=False, dump=lambda name, text: stages.append(name))
    after_count = module.instruction_count()
    with capsys.disabled():
        print(f"\nMLP loss: {before_count} HLO instructions before, {after_count} after")
    assert_close_values(before, evaluate(module, args))  # the mean divides by a constant
    np.testing.assert_allclose(before[0], np.asarray(_mlp_loss(params, x, labels)), rtol=1e-6)
    assert after_count < before_count
    opcodes = [i.opcode for i in module.entry.instructions]
    assert opcodes.count("subtract") == 2  # logits - top was computed twice
    # (keepdims' reshapes moved past the elementwise ops after them, then into broadcasts)
    assert "reshape" not in opcodes and len(module.computations) == 3  # max body, one add
    assert module.entry.root.operands[0].opcode == "negate"  # "* 1.0 + 0.0" is gone
    assert stages[0] == "00.before_optimizations" and stages[-1].endswith("after_dce")
    verify(module)
    assert not any(pipeline.run_pass(module, name) for name in pipeline.SIMPLIFICATION_PASSES)


def test_optimize_golden_before_and_after():
    m, b = new()
    x = b.parameter(0, shape(F32, 2, 3))
    scaled = b.op("multiply", x, bcast(b, 1, F32, (2, 3)))
    twice = b.op("transpose", b.op("transpose", scaled, permutation=(1, 0)), permutation=(1, 0))
    five = b.op("add", b.constant(F32(2)), b.constant(F32(3)))
    y = b.op("add", twice, b.op("broadcast_in_dim", five, shape=shape(F32, 2, 3),
                                broadcast_dimensions=()))
    b.build(b.op("tuple", y, b.op("exponential", x), b.op("exponential", x)), entry=True)
    assert normalized(m) == golden("""
        HloModule m

        ENTRY %main (Arg_0.1: f32[2,3]) -> (f32[2,3], f32[2,3], f32[2,3]) {
          %Arg_0.1 = f32[2,3] parameter(0)
          %constant.2 = f32[] constant(1)
          %broadcast_in_dim.3 = f32[2,3] broadcast_in_dim(%constant.2), broadcast_dimensions={}
          %multiply.4 = f32[2,3] multiply(%Arg_0.1, %broadcast_in_dim.3)
          %transpose.5 = f32[3,2] transpose(%multiply.4), permutation={1,0}
          %transpose.6 = f32[2,3] transpose(%transpose.5), permutation={1,0}
          %constant.7 = f32[] constant(2)
          %constant.8 = f32[] constant(3)
          %add.9 = f32[] add(%constant.7, %constant.8)
          %broadcast_in_dim.10 = f32[2,3] broadcast_in_dim(%add.9), broadcast_dimensions={}
          %add.11 = f32[2,3] add(%transpose.6, %broadcast_in_dim.10)
          %exponential.12 = f32[2,3] exponential(%Arg_0.1)
          %exponential.13 = f32[2,3] exponential(%Arg_0.1)
          ROOT %tuple.14 = (f32[2,3], f32[2,3], f32[2,3]) tuple(%add.11, %exponential.12, %exponential.13)
        }
    """)
    args = random_args(m)
    before = evaluate(m, args)
    pipeline.optimize(m, verify=True, fuse=False)
    assert normalized(m) == golden("""
        HloModule m

        ENTRY %main (Arg_0.1: f32[2,3]) -> (f32[2,3], f32[2,3], f32[2,3]) {
          %Arg_0.1 = f32[2,3] parameter(0)
          %constant.15 = f32[] constant(5)
          %broadcast_in_dim.10 = f32[2,3] broadcast_in_dim(%constant.15), broadcast_dimensions={}
          %add.11 = f32[2,3] add(%Arg_0.1, %broadcast_in_dim.10)
          %exponential.12 = f32[2,3] exponential(%Arg_0.1)
          ROOT %tuple.14 = (f32[2,3], f32[2,3], f32[2,3]) tuple(%add.11, %exponential.12, %exponential.12)
        }
    """)
    assert_same_values(before, evaluate(m, args))


def test_batched_dot_products_compile_to_one_fused_reduce():
    import ember
    import ember.numpy as jnp

    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 70)).astype(np.float32)
    b = rng.standard_normal((70, 300)).astype(np.float32)
    f = ember.jit(lambda x, y: jnp.einsum("ij,ji->i", x, y))
    want = np.einsum("ij,ji->i", a.astype(np.float64), b)
    np.testing.assert_allclose(f(a, b), want, rtol=1e-5, atol=1e-5)
    text = f.lower(a, b).compile().as_text()
    assert "dot_general" not in text and text.count("fusion(") == 1
    g = ember.jit(ember.vmap(jnp.dot))
    np.testing.assert_allclose(g(a, b.T), want, rtol=1e-5, atol=1e-5)
    ints = rng.integers(-100, 100, (50, 40)).astype(np.int32)
    np.testing.assert_array_equal(g(ints, ints), (ints.astype(np.int64) ** 2).sum(1))
