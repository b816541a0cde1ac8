# ruff: noqa: E501  (HLO text: computation headers are long)
"""HLO ``while``, ``case`` and ``call`` on the CPU backend: native loops and branches.

Each module is written as text, run by the interpreter backend (the reference) and by the
CPU backend after the optimization pipeline (bodies and branches fused), on its quick
(tiered, unoptimized) code and on its optimized code; results must match exactly.
"""

import re

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends import cpu as cpu_backend
from ember.backends import get_backend
from ember.backends.cpu.executable import (
    CasePlan,
    CopyPlan,
    DotPlan,
    KernelPlan,
    LibraryPlan,
    UpdatePlan,
    WhilePlan,
    nested_steps,
)
from ember.compiler.parser import parse_module
from ember.compiler.pipeline import optimize


def parse(text: str):
    """Parses ``text``, first suffixing each instruction name with its computation's name
    (HLO names are unique in a module; the modules below reuse short ones)."""
    header = re.compile(r"^(?:ENTRY )?%([\w.]+) \(")
    comps = {m.group(1) for m in map(header.match, text.splitlines()) if m}
    out, comp = [], None
    for line in text.splitlines():
        m = header.match(line)
        if m:
            comp = m.group(1)
            line = re.sub(r"([(,] ?)([\w.]+): ", rf"\1\2_{comp}: ", line)
        elif comp is not None:
            line = re.sub(r"%([\w.]+)", lambda t, c=comp: t.group(0) if t.group(1) in comps
                          else f"%{t.group(1)}_{c}", line)
        out.append(line)
    return parse_module("\n".join(out))


def run_both(text: str, args: list, runs: int = 3):
    """Checks the CPU backend's outputs (each of ``runs`` runs: the first on quick code)
    against the interpreter's, bit for bit; returns the CPU executable."""
    want = get_backend("interpreter").compile(parse(text)).execute(args)
    module = parse(text)
    optimize(module, verify=True)
    exe = cpu_backend.CpuBackend().compile(module)
    for _ in range(runs):
        got = exe.execute([a.copy() for a in args])
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)
    return exe


def steps_of(exe, kind):
    return [s for s in nested_steps(exe.program.steps) if type(s) is kind]


COUNTER = """HloModule counter

%cond (i: s32[], x: f32[8]) -> pred[] {
  %i = s32[] parameter(0)
  %x = f32[8] parameter(1)
  %n = s32[] constant({n})
  ROOT %lt = pred[] compare(%i, %n), comparison_direction=LT
}

%body (i: s32[], x: f32[8]) -> (s32[], f32[8]) {
  %i = s32[] parameter(0)
  %x = f32[8] parameter(1)
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  %h = f32[] constant(0.5)
  %hb = f32[8] broadcast_in_dim(%h), broadcast_dimensions={}
  %c = f32[] convert(%i)
  %cb = f32[8] broadcast_in_dim(%c), broadcast_dimensions={}
  %m = f32[8] multiply(%x, %hb)
  %y = f32[8] add(%m, %cb)
  ROOT %t = (s32[], f32[8]) tuple(%i1, %y)
}

ENTRY %main (x: f32[8], start: s32[]) -> (s32[], f32[8]) {
  %x = f32[8] parameter(0)
  %start = s32[] parameter(1)
  %e = f32[8] multiply(%x, %x)
  ROOT %w = (s32[], f32[8]) while(%start, %e), calls={%cond, %body}
}
"""


@pytest.mark.parametrize("n,start", [(100, 0), (5, 5), (5, 9), (3, -2)])
def test_counter_loop_runs_natively(n, start):
    # (start >= n: zero iterations; the state comes out as it went in)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    exe = run_both(COUNTER.replace("{n}", str(n)), [x, np.array(start, np.int32)])
    (loop,) = steps_of(exe, WhilePlan)
    assert loop.loop is not None  # the whole loop is one native function
    assert exe.program.has_entry
    assert not steps_of(exe, LibraryPlan)


def test_loop_over_a_tuple_of_several_dtypes():
    text = """HloModule dtypes

%cond (i: s32[], a: f64[3], b: s8[4], c: pred[2], d: u16[2,2], e: f16[5]) -> pred[] {
  %i = s32[] parameter(0)
  %a = f64[3] parameter(1)
  %b = s8[4] parameter(2)
  %c = pred[2] parameter(3)
  %d = u16[2,2] parameter(4)
  %e = f16[5] parameter(5)
  %n = s32[] constant(7)
  ROOT %lt = pred[] compare(%i, %n), comparison_direction=LT
}

%body (i: s32[], a: f64[3], b: s8[4], c: pred[2], d: u16[2,2], e: f16[5]) -> (s32[], f64[3], s8[4], pred[2], u16[2,2], f16[5]) {
  %i = s32[] parameter(0)
  %a = f64[3] parameter(1)
  %b = s8[4] parameter(2)
  %c = pred[2] parameter(3)
  %d = u16[2,2] parameter(4)
  %e = f16[5] parameter(5)
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  %a1 = f64[3] multiply(%a, %a)
  %bb = s8[4] add(%b, %b)
  %c1 = pred[2] not(%c)
  %d1 = u16[2,2] transpose(%d), permutation={1,0}
  %k = f16[] constant(1.5)
  %kb = f16[5] broadcast_in_dim(%k), broadcast_dimensions={}
  %e1 = f16[5] multiply(%e, %kb)
  ROOT %t = (s32[], f64[3], s8[4], pred[2], u16[2,2], f16[5]) tuple(%i1, %a1, %bb, %c1, %d1, %e1)
}

ENTRY %main (a: f64[3], b: s8[4], c: pred[2], d: u16[2,2], e: f16[5]) -> (s32[], f64[3], s8[4], pred[2], u16[2,2], f16[5]) {
  %a = f64[3] parameter(0)
  %b = s8[4] parameter(1)
  %c = pred[2] parameter(2)
  %d = u16[2,2] parameter(3)
  %e = f16[5] parameter(4)
  %zero = s32[] constant(0)
  ROOT %w = (s32[], f64[3], s8[4], pred[2], u16[2,2], f16[5]) while(%zero, %a, %b, %c, %d, %e), calls={%cond, %body}
}
"""
    args = [np.array([1.0001, 0.999, -1.001]), np.array([1, -3, 50, 0], np.int8),
            np.array([True, False]), np.array([[1, 2], [3, 65535]], np.uint16),
            np.linspace(-2, 2, 5).astype(np.float16)]
    exe = run_both(text, args)
    assert steps_of(exe, WhilePlan)[0].loop is not None


SCAN = """HloModule scan

%cond (i: s32[], h: f32[16], xs: f32[{t},16], ys: f32[{t},16]) -> pred[] {{
  %i = s32[] parameter(0)
  %h = f32[16] parameter(1)
  %xs = f32[{t},16] parameter(2)
  %ys = f32[{t},16] parameter(3)
  %n = s32[] constant({t})
  ROOT %lt = pred[] compare(%i, %n), comparison_direction=LT
}}

%body (i: s32[], h: f32[16], xs: f32[{t},16], ys: f32[{t},16]) -> (s32[], f32[16], f32[{t},16], f32[{t},16]) {{
  %i = s32[] parameter(0)
  %h = f32[16] parameter(1)
  %xs = f32[{t},16] parameter(2)
  %ys = f32[{t},16] parameter(3)
  %zero = s32[] constant(0)
  %row = f32[1,16] dynamic_slice(%xs, %i, %zero), slice_sizes={{1,16}}
  %x = f32[16] reshape(%row)
  %s = f32[16] add(%h, %x)
  %h1 = f32[16] tanh(%s)
  %y = f32[1,16] reshape(%h1)
  %ys1 = f32[{t},16] dynamic_update_slice(%ys, %y, %i, %zero)
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  ROOT %t = (s32[], f32[16], f32[{t},16], f32[{t},16]) tuple(%i1, %h1, %xs, %ys1)
}}

ENTRY %main (h: f32[16], xs: f32[{t},16]) -> (f32[16], f32[{t},16]) {{
  %h = f32[16] parameter(0)
  %xs = f32[{t},16] parameter(1)
  %zero = s32[] constant(0)
  %z = f32[] constant(0)
  %ys = f32[{t},16] broadcast_in_dim(%z), broadcast_dimensions={{}}
  %w = (s32[], f32[16], f32[{t},16], f32[{t},16]) while(%zero, %h, %xs, %ys), calls={{%cond, %body}}
  %hf = f32[16] get_tuple_element(%w), index=1
  %ysf = f32[{t},16] get_tuple_element(%w), index=3
  ROOT %out = (f32[16], f32[{t},16]) tuple(%hf, %ysf)
}}
"""


def test_scan_like_loop_slices_and_updates_a_buffer_per_iteration():
    # What lax.scan lowers to: read row i of xs (dynamic_slice), write row i of ys
    # (dynamic_update_slice). tanh is a transcendental: the interpreter's NumPy tanh and the
    # native polynomial differ in the last bits, so the rows are compared with a tolerance.
    t = 12
    rng = np.random.default_rng(0)
    h, xs = rng.standard_normal(16, np.float32), rng.standard_normal((t, 16), np.float32)
    text = SCAN.format(t=t)
    want_h, want_ys = np.zeros(16, np.float32), np.zeros((t, 16), np.float32)
    carry = h.copy()
    for k in range(t):
        carry = np.tanh(carry + xs[k])
        want_ys[k] = carry
    want_h[:] = carry
    module = parse(text)
    optimize(module, verify=True)
    exe = cpu_backend.CpuBackend().compile(module)
    for _ in range(2):
        got_h, got_ys = exe.execute([h, xs])
        np.testing.assert_allclose(got_h, want_h, rtol=2e-6, atol=2e-6)
        np.testing.assert_allclose(got_ys, want_ys, rtol=2e-6, atol=2e-6)
    ref_h, ref_ys = get_backend("interpreter").compile(parse(text)).execute([h, xs])
    np.testing.assert_allclose(got_ys, ref_ys, rtol=2e-6, atol=2e-6)
    # ys is written in place (one row per iteration, not a copy of the buffer)
    assert steps_of(exe, UpdatePlan) and steps_of(exe, WhilePlan)[0].loop is not None


WINDOWS = """HloModule windows

%cond (i: s32[], buf: s16[5,6,4], u: s16[2,3,4]) -> pred[] {
  %i = s32[] parameter(0)
  %buf = s16[5,6,4] parameter(1)
  %u = s16[2,3,4] parameter(2)
  %n = s32[] constant(6)
  ROOT %lt = pred[] compare(%i, %n), comparison_direction=LT
}

%body (i: s32[], buf: s16[5,6,4], u: s16[2,3,4]) -> (s32[], s16[5,6,4], s16[2,3,4]) {
  %i = s32[] parameter(0)
  %buf = s16[5,6,4] parameter(1)
  %u = s16[2,3,4] parameter(2)
  %k = s32[] constant(2)
  %m = s32[] multiply(%i, %k)
  %off = s32[] constant(-1)
  %j = s32[] add(%m, %off)
  %zero = s32[] constant(0)
  %buf1 = s16[5,6,4] dynamic_update_slice(%buf, %u, %j, %i, %zero)
  %one = s16[] constant(1)
  %ones = s16[2,3,4] broadcast_in_dim(%one), broadcast_dimensions={}
  %u1 = s16[2,3,4] add(%u, %ones)
  %c1 = s32[] constant(1)
  %i1 = s32[] add(%i, %c1)
  ROOT %t = (s32[], s16[5,6,4], s16[2,3,4]) tuple(%i1, %buf1, %u1)
}

ENTRY %main (buf: s16[5,6,4], u: s16[2,3,4]) -> s16[5,6,4] {
  %buf = s16[5,6,4] parameter(0)
  %u = s16[2,3,4] parameter(1)
  %zero = s32[] constant(0)
  %w = (s32[], s16[5,6,4], s16[2,3,4]) while(%zero, %buf, %u), calls={%cond, %body}
  ROOT %r = s16[5,6,4] get_tuple_element(%w), index=1
}
"""


def test_in_place_updates_of_strided_windows_with_clamped_starts():
    # A (2, 3, 4) window of a (5, 6, 4) buffer: two runs of 3 * 4 elements per update, at
    # starts that go negative and past the end (clamped).
    buf = np.arange(120, dtype=np.int16).reshape(5, 6, 4)
    u = -np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    exe = run_both(WINDOWS, [buf, u])
    want, upd = buf.copy(), u.copy()
    for i in range(6):
        a, b = min(max(2 * i - 1, 0), 3), min(max(i, 0), 3)
        want[a:a + 2, b:b + 3] = upd
        upd = upd + 1
    np.testing.assert_array_equal(exe.execute([buf, u])[0], want)
    assert steps_of(exe, UpdatePlan) and steps_of(exe, WhilePlan)[0].loop is not None


def test_update_of_a_state_read_elsewhere_is_not_in_place():
    # The body also reads the buffer it updates: the update must not happen in place.
    text = WINDOWS.replace("ROOT %t = (s32[], s16[5,6,4], s16[2,3,4]) tuple(%i1, %buf1, %u1)",
                           "%s = s16[2,3,4] slice(%buf), start_indices={0,0,0}, "
                           "limit_indices={2,3,4}, strides={1,1,1}\n"
                           "  %u2 = s16[2,3,4] add(%u1, %s)\n"
                           "  ROOT %t = (s32[], s16[5,6,4], s16[2,3,4]) tuple(%i1, %buf1, %u2)")
    buf = np.arange(120, dtype=np.int16).reshape(5, 6, 4)
    u = -np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    exe = run_both(text, [buf, u])
    assert not steps_of(exe, UpdatePlan)


ROW_FROM_PREVIOUS = """HloModule rows

%max (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] maximum(%a, %b)
}

%cond (i: s32[], x: f32[64,16]) -> pred[] {
  %i = s32[] parameter(0)
  %x = f32[64,16] parameter(1)
  %n = s32[] constant(70)
  ROOT %lt = pred[] compare(%i, %n), comparison_direction=LT
}

%body (i: s32[], x: f32[64,16]) -> (s32[], f32[64,16]) {
  %i = s32[] parameter(0)
  %x = f32[64,16] parameter(1)
  %c1 = s32[] constant(1)
  %prev = s32[] subtract(%i, %c1)
  %zero = s32[] constant(0)
  %row = f32[1,16] dynamic_slice(%x, %prev, %zero), slice_sizes={1,16}
  %half = f32[] constant(0.5)
  %halves = f32[1,16] broadcast_in_dim(%half), broadcast_dimensions={}
  %scaled = f32[1,16] multiply(%row, %halves)
  %total = f32[] reduce(%x, %half), dimensions={0,1}, calls={%max}
  %totals = f32[1,16] broadcast_in_dim(%total), broadcast_dimensions={}
  %new = f32[1,16] add(%scaled, %totals)
  %x1 = f32[64,16] dynamic_update_slice(%x, %new, %i, %zero)
  %i1 = s32[] add(%i, %c1)
  ROOT %t = (s32[], f32[64,16]) tuple(%i1, %x1)
}

ENTRY %main (x: f32[64,16]) -> f32[64,16] {
  %x = f32[64,16] parameter(0)
  %one = s32[] constant(1)
  %w = (s32[], f32[64,16]) while(%one, %x), calls={%cond, %body}
  ROOT %r = f32[64,16] get_tuple_element(%w), index=1
}
"""


def test_update_of_a_state_read_before_it_is_in_place():
    """Row i from row i - 1 and the max of the whole state (both read before the update, into
    buffers of their own): the update writes the state in place instead of copying it, and
    past the end (i >= 64) its start is clamped."""
    x = np.random.default_rng(3).standard_normal((64, 16)).astype(np.float32)
    exe = run_both(ROW_FROM_PREVIOUS, [x])
    assert steps_of(exe, UpdatePlan)
    body = steps_of(exe, WhilePlan)[0].body
    assert not any(type(s).__name__ == "CopyPlan" and s.dst.dims == (64, 16) for s in body)


def test_swapping_state_elements_reads_the_old_state():
    # The body's results are its own parameters in other slots: moving the new state in
    # must not overwrite a slot another copy still reads.
    text = """HloModule swap

%cond (i: s32[], a: f32[4], b: f32[4], c: f32[4]) -> pred[] {
  %i = s32[] parameter(0)
  %a = f32[4] parameter(1)
  %b = f32[4] parameter(2)
  %c = f32[4] parameter(3)
  %n = s32[] constant(5)
  ROOT %lt = pred[] compare(%i, %n), comparison_direction=LT
}

%body (i: s32[], a: f32[4], b: f32[4], c: f32[4]) -> (s32[], f32[4], f32[4], f32[4]) {
  %i = s32[] parameter(0)
  %a = f32[4] parameter(1)
  %b = f32[4] parameter(2)
  %c = f32[4] parameter(3)
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  %s = f32[4] add(%a, %b)
  ROOT %t = (s32[], f32[4], f32[4], f32[4]) tuple(%i1, %c, %a, %s)
}

ENTRY %main (a: f32[4], b: f32[4], c: f32[4]) -> (s32[], f32[4], f32[4], f32[4]) {
  %a = f32[4] parameter(0)
  %b = f32[4] parameter(1)
  %c = f32[4] parameter(2)
  %zero = s32[] constant(0)
  ROOT %w = (s32[], f32[4], f32[4], f32[4]) while(%zero, %a, %b, %c), calls={%cond, %body}
}
"""
    a, b, c = (np.arange(4, dtype=np.float32) + k for k in (0, 10, 100))
    exe = run_both(text, [a, b, c])
    ra, rb, rc = a, b, c
    for _ in range(5):
        ra, rb, rc = rc, ra, ra + rb
    got = exe.execute([a, b, c])
    np.testing.assert_array_equal(got[1], ra)
    np.testing.assert_array_equal(got[2], rb)
    np.testing.assert_array_equal(got[3], rc)


def test_nested_loops():
    text = """HloModule nested

%inner_cond (j: s32[], x: f32[3]) -> pred[] {
  %j = s32[] parameter(0)
  %x = f32[3] parameter(1)
  %n = s32[] constant(4)
  ROOT %lt = pred[] compare(%j, %n), comparison_direction=LT
}

%inner_body (j: s32[], x: f32[3]) -> (s32[], f32[3]) {
  %j = s32[] parameter(0)
  %x = f32[3] parameter(1)
  %one = s32[] constant(1)
  %j1 = s32[] add(%j, %one)
  %y = f32[3] add(%x, %x)
  ROOT %t = (s32[], f32[3]) tuple(%j1, %y)
}

%outer_cond (i: s32[], x: f32[3]) -> pred[] {
  %i = s32[] parameter(0)
  %x = f32[3] parameter(1)
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), comparison_direction=LT
}

%outer_body (i: s32[], x: f32[3]) -> (s32[], f32[3]) {
  %i = s32[] parameter(0)
  %x = f32[3] parameter(1)
  %zero = s32[] constant(0)
  %w = (s32[], f32[3]) while(%zero, %x), calls={%inner_cond, %inner_body}
  %xi = f32[3] get_tuple_element(%w), index=1
  %k = f32[] constant(1)
  %kb = f32[3] broadcast_in_dim(%k), broadcast_dimensions={}
  %x1 = f32[3] subtract(%xi, %kb)
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  ROOT %t = (s32[], f32[3]) tuple(%i1, %x1)
}

ENTRY %main (x: f32[3]) -> f32[3] {
  %x = f32[3] parameter(0)
  %zero = s32[] constant(0)
  %w = (s32[], f32[3]) while(%zero, %x), calls={%outer_cond, %outer_body}
  ROOT %r = f32[3] get_tuple_element(%w), index=1
}
"""
    x = np.array([1, 2, 0.5], np.float32)
    exe = run_both(text, [x])
    want = x
    for _ in range(3):
        want = want * 16 - 1
    np.testing.assert_array_equal(exe.execute([x])[0], want)
    loops = steps_of(exe, WhilePlan)
    assert len(loops) == 2 and all(w.loop is not None for w in loops)


def test_library_steps_inside_a_body_run_between_native_steps():
    # A BLAS dot and a sort have no kernel: the loop runs its steps from Python.
    text = """HloModule dot_loop

%cond (i: s32[], m: f32[48,48], v: f32[48]) -> pred[] {
  %i = s32[] parameter(0)
  %m = f32[48,48] parameter(1)
  %v = f32[48] parameter(2)
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), comparison_direction=LT
}

%cmp (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %lt = pred[] compare(%a, %b), comparison_direction=LT
}

%body (i: s32[], m: f32[48,48], v: f32[48]) -> (s32[], f32[48,48], f32[48]) {
  %i = s32[] parameter(0)
  %m = f32[48,48] parameter(1)
  %v = f32[48] parameter(2)
  %mm = f32[48,48] dot_general(%m, %m), lhs_batching_dimensions={}, rhs_batching_dimensions={}, lhs_contracting_dimensions={1}, rhs_contracting_dimensions={0}
  %k = f32[] constant(0.125)
  %kb = f32[48,48] broadcast_in_dim(%k), broadcast_dimensions={}
  %m1 = f32[48,48] multiply(%mm, %kb)
  %st = (f32[48]) sort(%v), dimension=0, is_stable=true, calls={%cmp}
  %s = f32[48] get_tuple_element(%st), index=0
  %v1 = f32[48] negate(%s)
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  ROOT %t = (s32[], f32[48,48], f32[48]) tuple(%i1, %m1, %v1)
}

ENTRY %main (m: f32[48,48], v: f32[48]) -> (f32[48,48], f32[48]) {
  %m = f32[48,48] parameter(0)
  %v = f32[48] parameter(1)
  %zero = s32[] constant(0)
  %w = (s32[], f32[48,48], f32[48]) while(%zero, %m, %v), calls={%cond, %body}
  %mf = f32[48,48] get_tuple_element(%w), index=1
  %vf = f32[48] get_tuple_element(%w), index=2
  ROOT %out = (f32[48,48], f32[48]) tuple(%mf, %vf)
}
"""
    rng = np.random.default_rng(1)
    m = np.round(rng.standard_normal((48, 48)) * 4).astype(np.float32) / 4
    v = rng.standard_normal(48).astype(np.float32)
    module = parse(text)
    optimize(module, verify=True)
    exe = cpu_backend.CpuBackend().compile(module)
    want_m, want_v = m, v
    for _ in range(3):
        want_m, want_v = (want_m @ want_m) * np.float32(0.125), -np.sort(want_v)
    for _ in range(2):
        got_m, got_v = exe.execute([m, v])
        np.testing.assert_allclose(got_m, want_m, rtol=1e-5)
        np.testing.assert_array_equal(got_v, want_v)
    (loop,) = steps_of(exe, WhilePlan)
    assert loop.loop is None
    assert steps_of(exe, DotPlan) and steps_of(exe, LibraryPlan)


CASE = """HloModule case

{branches}

ENTRY %main (i: s32[], x: f32[6], y: s32[6]) -> (f32[6], s32[6]) {{
  %i = s32[] parameter(0)
  %x = f32[6] parameter(1)
  %y = s32[6] parameter(2)
  ROOT %c = (f32[6], s32[6]) case(%i, %x, %y), calls={{{calls}}}
}}
"""
BRANCH = """%b{k} (x: f32[6], y: s32[6]) -> (f32[6], s32[6]) {{
  %x = f32[6] parameter(0)
  %y = s32[6] parameter(1)
  %k = f32[] constant({k})
  %kb = f32[6] broadcast_in_dim(%k), broadcast_dimensions={{}}
  %x1 = f32[6] {op}(%x, %kb)
  %kk = s32[] constant({k})
  %kkb = s32[6] broadcast_in_dim(%kk), broadcast_dimensions={{}}
  %y1 = s32[6] multiply(%y, %kkb)
  ROOT %t = (f32[6], s32[6]) tuple(%x1, %y1)
}}
"""


@pytest.mark.parametrize("n_branches", [1, 2, 3])
def test_case_runs_the_indexed_branch_and_the_last_out_of_range(n_branches):
    ops = ["add", "multiply", "subtract"]
    text = CASE.format(
        branches="\n".join(BRANCH.format(k=k + 2, op=ops[k]) for k in range(n_branches)),
        calls=", ".join(f"%b{k + 2}" for k in range(n_branches)))
    x = np.linspace(-3, 3, 6, dtype=np.float32)
    y = np.arange(6, dtype=np.int32) - 2
    module = parse(text)
    optimize(module, verify=True)
    exe = cpu_backend.CpuBackend().compile(module)
    for index in [0, 1, 2, -1, 3, 7, 2**31 - 1, -2**31]:
        args = [np.array(index, np.int32), x, y]
        want = get_backend("interpreter").compile(parse(text)).execute(args)
        for got, ref in zip(exe.execute(args), want):
            np.testing.assert_array_equal(got, ref)
        picked = index if 0 <= index < n_branches else n_branches - 1
        np.testing.assert_array_equal(exe.execute(args)[1], y * (picked + 2))
    (case,) = steps_of(exe, CasePlan)
    assert len(case.branches) == n_branches
    assert exe.program.has_entry  # branches of kernels run in the native entry


def test_case_inside_a_loop_and_a_call():
    text = """HloModule case_loop

%even (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %k = f32[] constant(3)
  %kb = f32[4] broadcast_in_dim(%k), broadcast_dimensions={}
  ROOT %r = f32[4] add(%x, %kb)
}

%odd (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %r = f32[4] negate(%x)
}

%cond (i: s32[], x: f32[4]) -> pred[] {
  %i = s32[] parameter(0)
  %x = f32[4] parameter(1)
  %n = s32[] constant(9)
  ROOT %lt = pred[] compare(%i, %n), comparison_direction=LT
}

%body (i: s32[], x: f32[4]) -> (s32[], f32[4]) {
  %i = s32[] parameter(0)
  %x = f32[4] parameter(1)
  %two = s32[] constant(2)
  %parity = s32[] remainder(%i, %two)
  %y = f32[4] case(%parity, %x), calls={%even, %odd}
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  ROOT %t = (s32[], f32[4]) tuple(%i1, %y)
}

%scale (x: f32[4], s: f32[]) -> f32[4] {
  %x = f32[4] parameter(0)
  %s = f32[] parameter(1)
  %sb = f32[4] broadcast_in_dim(%s), broadcast_dimensions={}
  ROOT %r = f32[4] multiply(%x, %sb)
}

ENTRY %main (x: f32[4], s: f32[]) -> (f32[4], f32[4]) {
  %x = f32[4] parameter(0)
  %s = f32[] parameter(1)
  %zero = s32[] constant(0)
  %w = (s32[], f32[4]) while(%zero, %x), calls={%cond, %body}
  %r = f32[4] get_tuple_element(%w), index=1
  %c = f32[4] call(%r, %s), calls={%scale}
  ROOT %out = (f32[4], f32[4]) tuple(%r, %c)
}
"""
    x = np.array([1, -2, 0.5, 8], np.float32)
    s = np.array(0.25, np.float32)
    exe = run_both(text, [x, s])
    want = x
    for i in range(9):
        want = want + 3 if i % 2 == 0 else -want
    got = exe.execute([x, s])
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], want * s)
    (loop,) = steps_of(exe, WhilePlan)
    assert loop.loop is not None


def test_loop_whose_condition_is_a_state_element():
    # The condition is a parameter (no kernel): the pred is read straight from the state.
    text = """HloModule flag

%cond (go: pred[], x: s32[]) -> pred[] {
  %go = pred[] parameter(0)
  ROOT %x = s32[] parameter(1)
}

%body (go: pred[], x: s32[]) -> (pred[], s32[]) {
  %go = pred[] parameter(0)
  %x = s32[] parameter(1)
  %one = s32[] constant(1)
  %x1 = s32[] add(%x, %one)
  %n = s32[] constant(10)
  %more = pred[] compare(%x1, %n), comparison_direction=LT
  ROOT %t = (pred[], s32[]) tuple(%more, %x1)
}

ENTRY %main (go: pred[], x: s32[]) -> s32[] {
  %go = pred[] parameter(0)
  %x = s32[] parameter(1)
  %w = (pred[], s32[]) while(%go, %x), calls={%cond, %body}
  ROOT %r = s32[] get_tuple_element(%w), index=1
}
"""
    text = text.replace("%cond (go: pred[], x: s32[]) -> pred[] {\n  %go = pred[] parameter(0)"
                        "\n  ROOT %x = s32[] parameter(1)",
                        "%cond (go: pred[], x: s32[]) -> pred[] {\n  %x = s32[] parameter(1)"
                        "\n  ROOT %go = pred[] parameter(0)")
    for go, x, want in [(True, 3, 10), (False, 3, 3), (True, 12, 13)]:
        exe = run_both(text, [np.array(go), np.array(x, np.int32)], runs=2)
        assert int(exe.execute([np.array(go), np.array(x, np.int32)])[0]) == want


def test_optimized_code_without_tiering(monkeypatch):
    monkeypatch.setattr(cpu_backend, "TIERED_COMPILATION", False)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    exe = run_both(COUNTER.replace("{n}", "50"), [x, np.array(0, np.int32)], runs=2)
    assert exe.program.has_entry


def test_disk_cache_round_trip(monkeypatch, tmp_path):
    # A fresh backend (as a new process would) loads the shared library and its run plan
    # from the disk cache, without compiling, and runs the loop natively.
    import ember
    monkeypatch.setenv(cpu_backend.SHARED_LIBRARIES_VAR, "1")
    if not cpu_backend._shared_libraries_enabled():
        pytest.skip("no shared libraries here")
    previous = ember.config.read("jax_compilation_cache_dir")
    ember.config.update("jax_compilation_cache_dir", str(tmp_path))
    try:
        text = SCAN.format(t=5)
        module = parse(text)
        optimize(module)
        args = [np.linspace(-1, 1, 16, dtype=np.float32),
                np.linspace(0, 2, 80, dtype=np.float32).reshape(5, 16)]
        first = cpu_backend.CpuBackend()
        want = first.compile(module).execute(args)
        first.wait_for_background()
        second = cpu_backend.CpuBackend()
        exe = second.compile(parse_module(module.to_text()))
        assert second.stats["native_hits"] == 1 and second.stats["compiled"] == 0
        for got, ref in zip(exe.execute(args), want):
            np.testing.assert_array_equal(got, ref)
        assert steps_of(exe, WhilePlan)[0].loop is not None
    finally:
        ember.config.update("jax_compilation_cache_dir", previous)


@pytest.mark.parametrize("dtype", ["f32", "s8", "pred"])
@pytest.mark.parametrize("starts", [(1, 2), (-4, 9), (3, -1)])
def test_dynamic_update_slice_kernel(dtype, starts):
    # Outside loops dynamic_update_slice is a native kernel over the result (starts clamped).
    text = f"""HloModule dus

ENTRY %main (x: {dtype}[4,5], u: {dtype}[2,3], i: s32[], j: s64[]) -> {dtype}[4,5] {{
  %x = {dtype}[4,5] parameter(0)
  %u = {dtype}[2,3] parameter(1)
  %i = s32[] parameter(2)
  %j = s64[] parameter(3)
  %jj = s32[] convert(%j)
  ROOT %d = {dtype}[4,5] dynamic_update_slice(%x, %u, %i, %jj)
}}
"""
    np_dtype = {"f32": np.float32, "s8": np.int8, "pred": np.bool_}[dtype]
    x = (np.arange(20).reshape(4, 5) % 3).astype(np_dtype)
    u = (np.arange(6).reshape(2, 3) % 2 + 5).astype(np_dtype)
    args = [x, u, np.array(starts[0], np.int32), np.array(starts[1], np.int64)]
    exe = run_both(text, args, runs=1)
    assert not steps_of(exe, LibraryPlan)
    a, b = min(max(starts[0], 0), 2), min(max(starts[1], 0), 2)
    want = x.copy()
    want[a:a + 2, b:b + 3] = u
    np.testing.assert_array_equal(exe.execute(args)[0], want)


# --------------------------------------------------------------------------- end to end


@pytest.fixture(params=["cpu", "interpreter"])
def backend(request):
    return request.param


def test_jit_fori_loop_and_scan(backend):
    import ember
    import ember.numpy as jnp
    from ember import lax
    if not hasattr(lax, "fori_loop") or not hasattr(lax, "scan"):
        pytest.skip("lax.fori_loop / lax.scan not written yet")

    def loop(x):
        return lax.fori_loop(0, 50, lambda i, x: x * 0.5 + i.astype(x.dtype), x)

    def rnn(h, xs, w):
        def step(h, x):
            h = jnp.maximum(h @ w + x, 0.0) * 0.5
            return h, h.sum()
        return lax.scan(step, h, xs)

    x = np.linspace(-1, 1, 6, dtype=np.float32)
    want = x.copy()
    for i in range(50):
        want = want * np.float32(0.5) + np.float32(i)
    np.testing.assert_allclose(ember.jit(loop, backend=backend)(x), want, rtol=1e-6)

    rng = np.random.default_rng(3)
    h = rng.standard_normal((2, 8)).astype(np.float32)
    xs = rng.standard_normal((7, 2, 8)).astype(np.float32)
    w = (rng.standard_normal((8, 8)) * 0.5).astype(np.float32)
    carry, sums = h, []
    for t in range(7):
        carry = np.maximum(carry @ w + xs[t], 0) * np.float32(0.5)
        sums.append(carry.sum())
    got_h, got_sums = ember.jit(rnn, backend=backend)(h, xs, w)
    np.testing.assert_allclose(got_h, carry, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_sums, np.array(sums), rtol=1e-5, atol=1e-5)


def test_jit_cond_and_while_loop(backend):
    import ember
    from ember import lax
    if not hasattr(lax, "cond") or not hasattr(lax, "while_loop"):
        pytest.skip("lax.cond / lax.while_loop not written yet")

    def collatz_steps(n):
        def body(s):
            n, k = s
            n = lax.cond(n % 2 == 0, lambda n: n // 2, lambda n: 3 * n + 1, n)
            return n, k + 1
        return lax.while_loop(lambda s: s[0] != 1, body, (n, 0))[1]

    f = ember.jit(collatz_steps, backend=backend)
    for n, want in [(1, 0), (6, 8), (27, 111)]:
        assert int(f(np.int32(n))) == want


@pytest.mark.parametrize("k", [20, 64])
def test_small_dots_in_a_loop_body_are_kernels(k):
    # (8, k) @ (k, 16) in a body: a kernel summing chunks of products, so the loop stays
    # native (no BLAS call from Python per iteration).
    text = f"""HloModule loop_dot

%cond (i: s32[], h: f32[8,{k}], w: f32[{k},16], y: f32[8,16]) -> pred[] {{
  %i = s32[] parameter(0)
  %h = f32[8,{k}] parameter(1)
  %w = f32[{k},16] parameter(2)
  %y = f32[8,16] parameter(3)
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), comparison_direction=LT
}}

%body (i: s32[], h: f32[8,{k}], w: f32[{k},16], y: f32[8,16]) -> (s32[], f32[8,{k}], f32[{k},16], f32[8,16]) {{
  %i = s32[] parameter(0)
  %h = f32[8,{k}] parameter(1)
  %w = f32[{k},16] parameter(2)
  %y = f32[8,16] parameter(3)
  %d = f32[8,16] dot_general(%h, %w), lhs_batching_dimensions={{}}, rhs_batching_dimensions={{}}, lhs_contracting_dimensions={{1}}, rhs_contracting_dimensions={{0}}
  %y1 = f32[8,16] add(%y, %d)
  %h1 = f32[8,{k}] negate(%h)
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  ROOT %t = (s32[], f32[8,{k}], f32[{k},16], f32[8,16]) tuple(%i1, %h1, %w, %y1)
}}

ENTRY %main (h: f32[8,{k}], w: f32[{k},16]) -> f32[8,16] {{
  %h = f32[8,{k}] parameter(0)
  %w = f32[{k},16] parameter(1)
  %zero = s32[] constant(0)
  %z = f32[] constant(0)
  %y = f32[8,16] broadcast_in_dim(%z), broadcast_dimensions={{}}
  %wl = (s32[], f32[8,{k}], f32[{k},16], f32[8,16]) while(%zero, %h, %w, %y), calls={{%cond, %body}}
  ROOT %r = f32[8,16] get_tuple_element(%wl), index=3
}}
"""
    rng = np.random.default_rng(k)
    h = rng.standard_normal((8, k)).astype(np.float32)
    w = rng.standard_normal((k, 16)).astype(np.float32)
    module = parse(text)
    optimize(module, verify=True)
    exe = cpu_backend.CpuBackend().compile(module)
    want = h.astype(np.float64) @ w  # h - h + h
    for _ in range(2):
        np.testing.assert_allclose(exe.execute([h, w])[0], want, rtol=1e-4, atol=1e-4)
    assert not steps_of(exe, DotPlan) and steps_of(exe, WhilePlan)[0].loop is not None


def test_native_loop_and_case_called_from_python_steps():
    # A sort in the entry (no kernel) keeps the program off the single native entry: the
    # executable calls the loop's native function itself, and runs the case's branches (one
    # of them with a sort) step by step.
    text = """HloModule mixed

%cmp (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %lt = pred[] compare(%a, %b), comparison_direction=LT
}

%cond (i: s32[], x: f32[6]) -> pred[] {
  %i = s32[] parameter(0)
  %x = f32[6] parameter(1)
  %n = s32[] constant(4)
  ROOT %lt = pred[] compare(%i, %n), comparison_direction=LT
}

%body (i: s32[], x: f32[6]) -> (s32[], f32[6]) {
  %i = s32[] parameter(0)
  %x = f32[6] parameter(1)
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  %y = f32[6] add(%x, %x)
  ROOT %t = (s32[], f32[6]) tuple(%i1, %y)
}

%sorted (x: f32[6]) -> f32[6] {
  %x = f32[6] parameter(0)
  %st = (f32[6]) sort(%x), dimension=0, is_stable=true, calls={%cmp}
  ROOT %s = f32[6] get_tuple_element(%st), index=0
}

%negated (x: f32[6]) -> f32[6] {
  %x = f32[6] parameter(0)
  ROOT %n = f32[6] negate(%x)
}

ENTRY %main (x: f32[6], k: s32[]) -> (f32[6], f32[6]) {
  %x = f32[6] parameter(0)
  %k = s32[] parameter(1)
  %st = (f32[6]) sort(%x), dimension=0, is_stable=true, calls={%cmp}
  %s = f32[6] get_tuple_element(%st), index=0
  %zero = s32[] constant(0)
  %w = (s32[], f32[6]) while(%zero, %s), calls={%cond, %body}
  %r = f32[6] get_tuple_element(%w), index=1
  %c = f32[6] case(%k, %r), calls={%sorted, %negated}
  ROOT %out = (f32[6], f32[6]) tuple(%r, %c)
}
"""
    x = np.array([3, -1, 2, 0.5, -4, 1], np.float32)
    for k, second in [(0, np.sort(16 * x)), (1, -16 * np.sort(x)), (5, -16 * np.sort(x))]:
        exe = run_both(text, [x, np.array(k, np.int32)], runs=2)
        got = exe.execute([x, np.array(k, np.int32)])
        np.testing.assert_array_equal(got[0], 16 * np.sort(x))
        np.testing.assert_array_equal(got[1], second)
    assert not exe.program.has_entry and steps_of(exe, WhilePlan)[0].loop is not None


def test_in_place_update_waits_for_readers_whose_results_are_buffers():
    """A reader planned as a library step holds a value that may be a view of the state: the
    update is then not done in place (``program._readers_own_their_results``)."""
    from ember.backends.cpu.program import BufferRef, _readers_own_their_results
    module = parse(ROW_FROM_PREVIOUS)
    body = next(c for c in module.computations if c.name.startswith("body"))
    users = body.users()
    update = next(i for i in body.instructions if i.opcode == "dynamic_update_slice")
    state = update.operands[0]
    others = [r for r in users[state] if r is not update]
    buffer = BufferRef("temp", 0, np.dtype(np.float32), (1, 16))
    refs = {id(r): [buffer] for r in others}
    assert _readers_own_their_results(update, users, refs)
    refs[id(others[0])] = [BufferRef("value", 0, np.dtype(np.float32), (1, 16))]
    assert not _readers_own_their_results(update, users, refs)


def test_a_branch_kernel_writes_the_case_result_itself():
    # The branch computing x * 2 writes the case's result buffer (no copy after it); the
    # branch passing x on copies it. Tuple results: one leaf computed, one passed on.
    x = np.random.default_rng(5).standard_normal((300, 200)).astype(np.float32)

    def f(x, p):
        return lax.cond(p > 0, lambda x: (x * 2, x), lambda x: (x, jnp.tanh(x)), x)
    exe = ember.jit(f).lower(x, np.float32(1)).compile()._executable.executable
    (case,) = [s for s in exe.program.steps if type(s) is CasePlan]
    for branch in case.branches:
        copies = [s for s in branch if type(s) is CopyPlan]
        kernels = [s for s in branch if type(s) is KernelPlan]
        assert len(copies) == 1 and len(kernels) == 1
        assert kernels[0].outputs[0].kind == "output"
    for p, want in ((1, (x * 2, x)), (-1, (x, np.tanh(x)))):
        got = ember.jit(f)(x, np.float32(p))
        np.testing.assert_array_equal(np.asarray(got[0]), want[0])
        np.testing.assert_allclose(np.asarray(got[1]), want[1], rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("shape", [(1000, 1000), (513, 517)])
def test_large_copies_run_in_chunks_on_the_runtime(shape):
    # A branch passing a large operand on copies it (COPY_THREADS_MIN_BYTES or more: as
    # COPY_CHUNK_BYTES chunks on the parallel runtime, the last one short).
    from ember.backends.cpu import program
    x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    assert x.nbytes >= program.COPY_THREADS_MIN_BYTES and x.nbytes % program.COPY_CHUNK_BYTES

    def f(x, p):
        return lax.cond(p > 0, lambda x: x * 2, lambda x: x, x)
    exe = ember.jit(f).lower(x, np.float32(1)).compile()._executable.executable
    assert exe.program.native_call == "steps"
    exe._lib.address(exe.program.entry_name.removesuffix("_entry") + "_copy_chunks")
    for p in (-1, 1, -1):
        got = np.asarray(ember.jit(f)(x, np.float32(p)))
        np.testing.assert_array_equal(got, x if p < 0 else x * 2)
