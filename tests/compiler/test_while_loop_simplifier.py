# ruff: noqa: E501  (HLO text has long lines)
"""Tests of the while_loop_simplifier pass: dead and invariant loop state, zero-trip loops,
constant-index cases, side effects, shared computations, and the end-to-end effect on the
HLO of ``grad`` of a scan.

Every module case checks the structure after the pass, that the verifier accepts it, that a
second run changes nothing, and that the HLO evaluator gives the same values before and after.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.compiler import pipeline
from ember.compiler.evaluator import evaluate_computation, register_custom_call_target
from ember.compiler.hlo import Module
from ember.compiler.parser import parse_module
from ember.compiler.passes.while_loop_simplifier import while_loop_simplifier
from ember.compiler.verifier import verify_module


def random_args(module: Module, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s.dims).astype(s.dtype) if s.dtype.kind == "f"
            else rng.integers(0, 4, s.dims).astype(s.dtype)
            for s in module.entry.parameter_shapes]


def flat(value) -> list[np.ndarray]:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in flat(v)]
    return [np.asarray(value)]


def simplify(text: str, changed: bool = True, args=None) -> Module:
    """Parses ``text``, runs the pass, checks verifier, fixpoint and values; returns it."""
    module = parse_module(text)
    args = random_args(module) if args is None else args
    before = flat(evaluate_computation(module.entry, args))
    assert while_loop_simplifier(module) is changed
    verify_module(module)
    assert while_loop_simplifier(module) is False
    after = flat(evaluate_computation(module.entry, args))
    assert len(before) == len(after)
    for b, a in zip(before, after):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    return module


def instruction(module: Module, opcode: str, comp=None):
    (inst,) = [i for i in (comp or module.entry).instructions if i.opcode == opcode]
    return inst


def opcodes(comp) -> list[str]:
    return [i.opcode for i in comp.instructions]


# A scan of 4 steps as ember lowers it: counter, const w, carry c, xs, and two ys buffers.
# ys1 = c * w is read after the loop; ys2 = exp(x) is not.
SCAN = """
HloModule scan

%cond (qi: s32[], qw: f32[], qc: f32[], qxs: f32[4], qy1: f32[4], qy2: f32[4]) -> pred[] {
  %qi = s32[] parameter(0)
  %qw = f32[] parameter(1)
  %qc = f32[] parameter(2)
  %qxs = f32[4] parameter(3)
  %qy1 = f32[4] parameter(4)
  %qy2 = f32[4] parameter(5)
  %qn = s32[] constant(4)
  ROOT %lt = pred[] compare(%qi, %qn), comparison_direction=LT
}

%body (bi: s32[], bw: f32[], bc: f32[], bxs: f32[4], by1: f32[4], by2: f32[4]) -> (s32[], f32[], f32[], f32[4], f32[4], f32[4]) {
  %bi = s32[] parameter(0)
  %bw = f32[] parameter(1)
  %bc = f32[] parameter(2)
  %bxs = f32[4] parameter(3)
  %by1 = f32[4] parameter(4)
  %by2 = f32[4] parameter(5)
  %xi = f32[1] dynamic_slice(%bxs, %bi), slice_sizes={1}
  %x = f32[] reshape(%xi)
  %cw = f32[] multiply(%bc, %bw)
  %c1 = f32[] add(%cw, %x)
  %cw1 = f32[1] broadcast_in_dim(%cw), broadcast_dimensions={}
  %u1 = f32[4] dynamic_update_slice(%by1, %cw1, %bi)
  %ex = f32[1] exponential(%xi)
  %u2 = f32[4] dynamic_update_slice(%by2, %ex, %bi)
  %one = s32[] constant(1)
  %i1 = s32[] add(%bi, %one)
  ROOT %t = (s32[], f32[], f32[], f32[4], f32[4], f32[4]) tuple(%i1, %bw, %c1, %bxs, %u1, %u2)
}

ENTRY %main (w0: f32[], c0: f32[], xs0: f32[4]) -> (f32[], f32[4], f32[]) {
  %w0 = f32[] parameter(0)
  %c0 = f32[] parameter(1)
  %xs0 = f32[4] parameter(2)
  %zero = s32[] constant(0)
  %z = f32[] constant(0)
  %buf = f32[4] broadcast_in_dim(%z), broadcast_dimensions={}
  %loop = (s32[], f32[], f32[], f32[4], f32[4], f32[4]) while(%zero, %w0, %c0, %xs0, %buf, %buf), calls={%cond, %body}
  %c = f32[] get_tuple_element(%loop), index=2
  %ys1 = f32[4] get_tuple_element(%loop), index=4
  %w = f32[] get_tuple_element(%loop), index=1
  ROOT %out = (f32[], f32[4], f32[]) tuple(%c, %ys1, %w)
}
"""


def test_dead_ys_buffer_leaves_the_state_and_invariant_reads_the_operand():
    m = simplify(SCAN)
    loop = instruction(m, "while")
    # ys2 (index 5) is gone; w and xs stay (the body reads them), the counter and c stay.
    assert loop.shape.to_text() == "(s32[], f32[], f32[], f32[4], f32[4])"
    assert [op.name for op in loop.operands] == ["zero", "w0", "c0", "xs0", "buf"]
    cond, body = loop.calls
    assert len(cond.parameters) == len(body.parameters) == 5
    assert "exponential" not in opcodes(body)
    assert body.root.shape == loop.shape
    # The invariant w is read from the operand after the loop; c and ys1 from the new indices.
    out = m.entry.root
    assert out.operands[2].name == "w0"
    assert [(g.name, g.attrs["index"]) for g in out.operands[:2]] == [("c", 2), ("ys1", 4)]


def test_dead_chain_goes_but_what_the_condition_or_a_live_element_needs_stays():
    # a feeds b, b feeds nothing read; d is read by the condition; e feeds the live c.
    text = """
HloModule chain

%cond (qi: s32[], qa: f32[], qb: f32[], qc: f32[], qd: s32[], qe: f32[]) -> pred[] {
  %qi = s32[] parameter(0)
  %qa = f32[] parameter(1)
  %qb = f32[] parameter(2)
  %qc = f32[] parameter(3)
  %qd = s32[] parameter(4)
  %qe = f32[] parameter(5)
  ROOT %lt = pred[] compare(%qi, %qd), comparison_direction=LT
}

%body (bi: s32[], ba: f32[], bb: f32[], bc: f32[], bd: s32[], be: f32[]) -> (s32[], f32[], f32[], f32[], s32[], f32[]) {
  %bi = s32[] parameter(0)
  %ba = f32[] parameter(1)
  %bb = f32[] parameter(2)
  %bc = f32[] parameter(3)
  %bd = s32[] parameter(4)
  %be = f32[] parameter(5)
  %a1 = f32[] sine(%ba)
  %b1 = f32[] add(%bb, %a1)
  %c1 = f32[] add(%bc, %be)
  %e1 = f32[] cosine(%be)
  %one = s32[] constant(1)
  %i1 = s32[] add(%bi, %one)
  ROOT %t = (s32[], f32[], f32[], f32[], s32[], f32[]) tuple(%i1, %a1, %b1, %c1, %bd, %e1)
}

ENTRY %main (x: f32[], n: s32[]) -> f32[] {
  %x = f32[] parameter(0)
  %n = s32[] parameter(1)
  %zero = s32[] constant(0)
  %loop = (s32[], f32[], f32[], f32[], s32[], f32[]) while(%zero, %x, %x, %x, %n, %x), calls={%cond, %body}
  ROOT %c = f32[] get_tuple_element(%loop), index=3
}
"""
    m = simplify(text, args=[np.float32(0.5), np.int32(3)])
    loop = instruction(m, "while")
    assert loop.shape.to_text() == "(s32[], f32[], s32[], f32[])"
    assert m.entry.root.attrs["index"] == 1
    cond, body = loop.calls
    assert [p.name for p in body.parameters] == ["bi", "bc", "bd", "be"]
    assert [p.attrs["index"] for p in body.parameters] == [0, 1, 2, 3]
    assert "sine" not in opcodes(body)


def test_constant_invariant_is_sunk_into_the_loop_and_leaves_the_state():
    text = """
HloModule sink

%cond (qi: s32[], qk: f32[3], qx: f32[3]) -> pred[] {
  %qi = s32[] parameter(0)
  %qk = f32[3] parameter(1)
  %qx = f32[3] parameter(2)
  %qn = s32[] constant(3)
  ROOT %lt = pred[] compare(%qi, %qn), comparison_direction=LT
}

%body (bi: s32[], bk: f32[3], bx: f32[3]) -> (s32[], f32[3], f32[3]) {
  %bi = s32[] parameter(0)
  %bk = f32[3] parameter(1)
  %bx = f32[3] parameter(2)
  %x1 = f32[3] multiply(%bx, %bk)
  %one = s32[] constant(1)
  %i1 = s32[] add(%bi, %one)
  ROOT %t = (s32[], f32[3], f32[3]) tuple(%i1, %bk, %x1)
}

ENTRY %main (x: f32[3]) -> (f32[3], f32[3]) {
  %x = f32[3] parameter(0)
  %zero = s32[] constant(0)
  %half = f32[] constant(0.5)
  %k = f32[3] broadcast_in_dim(%half), broadcast_dimensions={}
  %loop = (s32[], f32[3], f32[3]) while(%zero, %k, %x), calls={%cond, %body}
  %kk = f32[3] get_tuple_element(%loop), index=1
  %xx = f32[3] get_tuple_element(%loop), index=2
  ROOT %out = (f32[3], f32[3]) tuple(%kk, %xx)
}
"""
    m = simplify(text)
    loop = instruction(m, "while")
    assert loop.shape.to_text() == "(s32[], f32[3])"
    assert m.entry.root.operands[0].name == "k"  # read from the operand
    body = loop.calls[1]
    mul = instruction(m, "multiply", body)
    assert mul.operands[1].opcode == "broadcast_in_dim"
    assert mul.operands[1].operands[0].opcode == "constant"


def test_side_effect_in_the_body_keeps_its_element_and_keeps_running():
    calls = []

    def record(value, has_side_effect=False):
        calls.append(float(value))
        return value

    register_custom_call_target("test_wls.record", record)
    text = """
HloModule effect

%cond (qi: s32[], qa: f32[], qb: f32[]) -> pred[] {
  %qi = s32[] parameter(0)
  %qa = f32[] parameter(1)
  %qb = f32[] parameter(2)
  %qn = s32[] constant(3)
  ROOT %lt = pred[] compare(%qi, %qn), comparison_direction=LT
}

%body (bi: s32[], ba: f32[], bb: f32[]) -> (s32[], f32[], f32[]) {
  %bi = s32[] parameter(0)
  %ba = f32[] parameter(1)
  %bb = f32[] parameter(2)
  %printed = f32[] custom_call(%bb), call_target_name=test_wls.record, has_side_effect=true
  %two = f32[] constant(2)
  %b1 = f32[] multiply(%bb, %two)
  %a1 = f32[] sine(%ba)
  %one = s32[] constant(1)
  %i1 = s32[] add(%bi, %one)
  ROOT %t = (s32[], f32[], f32[]) tuple(%i1, %a1, %b1)
}

ENTRY %main (x: f32[]) -> s32[] {
  %x = f32[] parameter(0)
  %zero = s32[] constant(0)
  %loop = (s32[], f32[], f32[]) while(%zero, %x, %x), calls={%cond, %body}
  ROOT %i = s32[] get_tuple_element(%loop), index=0
}
"""
    m = simplify(text, args=[np.float32(1.5)])
    assert calls == [1.5, 3.0, 6.0] * 2  # before and after the pass
    loop = instruction(m, "while")
    assert loop.shape.to_text() == "(s32[], f32[])"  # the unread sine state went
    assert "custom_call" in opcodes(loop.calls[1])


ZERO_TRIP = """
HloModule zero

%cond (qi: s32[], qx: f32[3]) -> pred[] {{
  %qi = s32[] parameter(0)
  %qx = f32[3] parameter(1)
  %qn = s32[] constant(3)
  ROOT %lt = pred[] compare(%qi, %qn), comparison_direction=LT
}}

%body (bi: s32[], bx: f32[3]) -> (s32[], f32[3]) {{
  %bi = s32[] parameter(0)
  %bx = f32[3] parameter(1)
  %x1 = f32[3] exponential(%bx)
  %one = s32[] constant(1)
  %i1 = s32[] add(%bi, %one)
  ROOT %t = (s32[], f32[3]) tuple(%i1, %x1)
}}

ENTRY %main (x: f32[3], s: s32[]) -> {result} {{
  %x = f32[3] parameter(0)
  %s = s32[] parameter(1)
  %init = s32[] {init}
  %loop = (s32[], f32[3]) while(%init, %x), calls={{%cond, %body}}
  {tail}
}}
"""


def test_zero_trip_loop_becomes_its_operands():
    text = ZERO_TRIP.format(result="(s32[], f32[3])", init="constant(5)",
                            tail="%i = s32[] get_tuple_element(%loop), index=0\n"
                                 "  %y = f32[3] get_tuple_element(%loop), index=1\n"
                                 "  ROOT %out = (s32[], f32[3]) tuple(%i, %y)")
    m = simplify(text)
    assert opcodes(m.entry) == ["parameter", "parameter", "constant", "tuple"]
    assert [op.name for op in m.entry.root.operands] == ["init", "x"]
    assert len(m.computations) == 1  # the condition and body are gone


def test_zero_trip_loop_used_whole_becomes_a_tuple():
    # The loop is the root: its result is the tuple of its operands.
    text = ZERO_TRIP.format(result="(s32[], f32[3])", init="constant(3)", tail="").replace(
        "%loop = ", "ROOT %loop = ")
    m = simplify(text)
    assert m.entry.root.opcode == "tuple"
    assert [op.name for op in m.entry.root.operands] == ["init", "x"]


@pytest.mark.parametrize("init", ["constant(0)", "add(%s, %s)"])
def test_loop_that_may_run_is_kept(init):
    text = ZERO_TRIP.format(result="f32[3]", init=init,
                            tail="ROOT %y = f32[3] get_tuple_element(%loop), index=1")
    m = simplify(text, changed=False, args=[np.ones(3, np.float32), np.int32(1)])
    assert instruction(m, "while").shape.to_text() == "(s32[], f32[3])"


def test_condition_with_a_side_effect_is_not_evaluated_at_compile_time():
    register_custom_call_target("test_wls.cond_effect", lambda v, has_side_effect=False: v)
    text = ZERO_TRIP.format(result="f32[3]", init="constant(5)",
                            tail="ROOT %y = f32[3] get_tuple_element(%loop), index=1")
    text = text.replace(
        "ROOT %lt = pred[] compare(%qi, %qn), comparison_direction=LT",
        "%lt = pred[] compare(%qi, %qn), comparison_direction=LT\n"
        "  ROOT %e = pred[] custom_call(%lt), call_target_name=test_wls.cond_effect, "
        "has_side_effect=true")
    m = simplify(text, changed=False)
    assert opcodes(m.entry).count("while") == 1


CASE = """
HloModule case

%b0 (x: f32[3]) -> (f32[3]) {
  %x = f32[3] parameter(0)
  %s = f32[3] sine(%x)
  ROOT %t = (f32[3]) tuple(%s)
}

%b1 (y: f32[3]) -> (f32[3]) {
  %y = f32[3] parameter(0)
  %p = f32[3] custom_call(%y), call_target_name=test_wls.branch, has_side_effect=true
  %c = f32[3] cosine(%y)
  ROOT %t1 = (f32[3]) tuple(%c)
}

ENTRY %main (a: f32[3], k: s32[]) -> f32[3] {
  %a = f32[3] parameter(0)
  %k = s32[] parameter(1)
  %index = s32[] INDEX
  %sw = (f32[3]) case(%index, %a), calls={%b0, %b1}
  ROOT %r = f32[3] get_tuple_element(%sw), index=0
}
"""


@pytest.mark.parametrize("index, branch", [(0, "sine"), (1, "cosine"), (7, "cosine"),
                                           (-1, "cosine")])
def test_case_with_a_constant_index_is_the_branch_inlined(index, branch):
    seen = []
    register_custom_call_target("test_wls.branch",
                                lambda v, has_side_effect=False: seen.append(1) or v)
    m = simplify(CASE.replace("INDEX", f"constant({index})"))
    assert "case" not in opcodes(m.entry) and branch in opcodes(m.entry)
    assert len(m.computations) == 1
    if branch == "cosine":  # the side effect is inlined and still runs
        assert "custom_call" in opcodes(m.entry) and len(seen) == 2


def test_case_with_a_computed_index_is_kept():
    register_custom_call_target("test_wls.branch", lambda v, has_side_effect=False: v)
    m = simplify(CASE.replace("INDEX", "add(%k, %k)"), changed=False)
    assert "case" in opcodes(m.entry)


def test_shared_body_is_copied_before_it_changes():
    # Two loops call one condition and body: the first loop's results are all read, the
    # second's only ys2 (exp of the xs), so its w, c and ys1 go.
    text = SCAN.replace("""  ROOT %out = (f32[], f32[4], f32[]) tuple(%c, %ys1, %w)""", """  %loop2 = (s32[], f32[], f32[], f32[4], f32[4], f32[4]) while(%zero, %c0, %w0, %xs0, %buf, %buf), calls={%cond, %body}
  %ys2 = f32[4] get_tuple_element(%loop2), index=5
  %ys1b = f32[4] get_tuple_element(%loop), index=5
  ROOT %out = (f32[], f32[4], f32[], f32[4], f32[4]) tuple(%c, %ys1, %w, %ys2, %ys1b)""").replace(
        "-> (f32[], f32[4], f32[]) {", "-> (f32[], f32[4], f32[], f32[4], f32[4]) {")
    m = simplify(text)
    first, second = [i for i in m.entry.instructions if i.opcode == "while"]
    assert first.shape.to_text() == "(s32[], f32[], f32[], f32[4], f32[4], f32[4])"
    assert second.shape.to_text() == "(s32[], f32[4], f32[4])"
    assert first.calls[1] is not second.calls[1] and first.calls[0] is not second.calls[0]


def test_loop_in_a_loop_body_is_simplified():
    inner = SCAN.split("ENTRY")[0]
    text = inner + """
%ocond (oi: s32[], ox: f32[4]) -> pred[] {
  %oi = s32[] parameter(0)
  %ox = f32[4] parameter(1)
  %on = s32[] constant(2)
  ROOT %olt = pred[] compare(%oi, %on), comparison_direction=LT
}

%obody (pi: s32[], px: f32[4]) -> (s32[], f32[4]) {
  %pi = s32[] parameter(0)
  %px = f32[4] parameter(1)
  %zero = s32[] constant(0)
  %w0 = f32[] constant(1.5)
  %c0 = f32[] constant(0.25)
  %z = f32[] constant(0)
  %buf = f32[4] broadcast_in_dim(%z), broadcast_dimensions={}
  %loop = (s32[], f32[], f32[], f32[4], f32[4], f32[4]) while(%zero, %w0, %c0, %px, %buf, %buf), calls={%cond, %body}
  %ys1 = f32[4] get_tuple_element(%loop), index=4
  %po = s32[] constant(1)
  %pi1 = s32[] add(%pi, %po)
  ROOT %pt = (s32[], f32[4]) tuple(%pi1, %ys1)
}

ENTRY %main (x0: f32[4]) -> f32[4] {
  %x0 = f32[4] parameter(0)
  %ozero = s32[] constant(0)
  %outer = (s32[], f32[4]) while(%ozero, %x0), calls={%ocond, %obody}
  ROOT %r = f32[4] get_tuple_element(%outer), index=1
}
"""
    m = simplify(text)
    loop = instruction(m, "while", m.computation("obody"))
    # ys2 went; the constant w was sunk into the inner body and left the state too.
    assert loop.shape.to_text() == "(s32[], f32[], f32[4], f32[4])"


def test_module_without_loops_is_left_at_once():
    text = "HloModule plain\n\nENTRY %main (x: f32[3]) -> f32[3] {\n  %x = f32[3] parameter(0)\n  ROOT %y = f32[3] sine(%x)\n}\n"
    m = parse_module(text)
    assert while_loop_simplifier(m) is False
    assert m.to_text() == parse_module(text).to_text()


def test_is_in_the_default_pipeline_next_to_dce():
    assert pipeline.SIMPLIFICATION_PASSES[-2:] == ("while_loop_simplifier", "dce")


# --------------------------------------------------------------------------- end to end


def _scan_loss(c, xs):
    def body(c, x):
        y = jnp.sin(c * x)
        return c + y, y * 2.0
    c, _ = lax.scan(body, c, xs)
    return c


def _loop_states(text: str) -> list[str]:
    return [line.split("=", 1)[1].split(" while(")[0].strip()
            for line in text.splitlines() if " while(" in line]


def _scan64(c, xs):
    """The scan's final carry in float64 (the reference)."""
    for x in xs.astype(np.float64):
        c = c + np.sin(c * x)
    return c


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_grad_of_scan_no_longer_carries_the_dead_ys(backend):
    xs = np.linspace(-1, 1, 5, dtype=np.float32)
    f = ember.jit(ember.grad(_scan_loss), backend=backend)
    lowered = _loop_states(f.lower(0.5, xs).as_text())
    text = f.lower(0.5, xs).compile().as_text()
    optimized = _loop_states(text)
    # The forward scan's primal ys buffer (nothing reads it; how many residual buffers the
    # lowering makes besides it depends on the scan's partial evaluation) is gone, and no
    # state element is left that the pass could still remove.
    assert lowered[0].count("f32[5]") == optimized[0].count("f32[5]") + 1
    assert while_loop_simplifier(parse_module(text)) is False
    eps = 1e-6
    want = (_scan64(0.5 + eps, xs) - _scan64(0.5 - eps, xs)) / (2 * eps)
    np.testing.assert_allclose(float(f(np.float32(0.5), xs)), want, rtol=1e-5)


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_cond_on_a_constant_drops_the_branch_and_the_ys_only_it_read(backend):
    def f(c, xs):
        def body(c, x):
            y = jnp.sin(c * x)
            return c + y, y * 2.0
        c, ys = lax.scan(body, c, xs)
        return lax.cond(True, lambda c, ys: c, lambda c, ys: jnp.sum(ys), c, ys)

    xs = np.linspace(-1, 1, 5, dtype=np.float32)
    f = ember.jit(f, backend=backend)
    lowered = f.lower(0.5, xs).as_text()
    optimized = f.lower(0.5, xs).compile().as_text()
    assert " case(" in lowered and _loop_states(lowered) == ["(s32[], f32[], f32[5], f32[5])"]
    # The case is inlined (its index is constant); then the ys buffer is dead state.
    assert " case(" not in optimized and _loop_states(optimized) == ["(s32[], f32[], f32[5])"]
    np.testing.assert_allclose(float(f(np.float32(0.5), xs)), _scan64(0.5, xs), rtol=1e-6)


def test_pass_is_cheap_on_a_module_without_loops():
    # A wide elementwise module: the pass only looks for while/case and leaves.
    lines = ["HloModule wide", "", "ENTRY %main (x: f32[8]) -> f32[8] {",
             "  %x = f32[8] parameter(0)"]
    prev = "x"
    for k in range(2000):
        lines.append(f"  %s{k} = f32[8] sine(%{prev})")
        prev = f"s{k}"
    lines.append(f"  ROOT %r = f32[8] negate(%{prev})\n}}\n")
    m = parse_module("\n".join(lines))
    start = time.perf_counter()
    assert while_loop_simplifier(m) is False
    assert time.perf_counter() - start < 0.05
