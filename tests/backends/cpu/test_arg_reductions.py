"""argmax/argmin reductions: the reducer bodies are recognized by their truth table
(``ember.compiler.arg_reducer``) and compiled to two vectorizable passes per row; results
(the index and the value output) must equal the evaluator's, NaNs, infinities, ties and
signed zeros included. Also: a variadic reduce is combined once per element, whatever the
number of its outputs."""

import zlib

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends import get_backend
from ember.backends.cpu.executable import KernelPlan
from ember.compiler.arg_reducer import arg_reducer_kind
from ember.compiler.evaluator import evaluate_computation
from ember.compiler.hlo import Builder, Module, Shape
from ember.compiler.lower import lower_closed_jaxpr
from ember.compiler.passes.fusion import fuse_module

DTYPES = [np.float32, np.float16, np.int32, np.uint8, np.int8]  # (float64 needs x64)


def lowered_body(f, x):
    module = lower_closed_jaxpr(ember.make_jaxpr(f)(x)).module
    return next(i.calls[0] for c in module.computations for i in c.instructions
                if i.opcode == "reduce" and len(i.operands) == 4)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lowered_argmax_and_argmin_bodies_are_recognized(dtype):
    x = np.zeros((2, 3), dtype)
    assert arg_reducer_kind(lowered_body(lambda a: jnp.argmax(a, axis=1), x)) == "max"
    assert arg_reducer_kind(lowered_body(lambda a: jnp.argmin(a, axis=0), x)) == "min"


def body(build, vdt=np.float32, idt=np.int32):
    """A hand-written reducer body: ``build(b, av, ai, bv, bi)`` returns the picked pair."""
    m = Module("m")
    b = Builder(m, "body")
    av, ai = b.parameter(0, Shape(vdt, ())), b.parameter(1, Shape(idt, ()))
    bv, bi = b.parameter(2, Shape(vdt, ())), b.parameter(3, Shape(idt, ()))
    v, i = build(b, av, ai, bv, bi)
    return b.build(b.op("tuple", v, i))


def cmp(b, x, y, direction):
    return b.op("compare", x, y, comparison_direction=direction)


def pick(b, take_a, av, ai, bv, bi):
    return b.op("select", take_a, av, bv), b.op("select", take_a, ai, bi)


def nan_aware(b, av, ai, bv, bi, direction="GT", tie="LT"):
    better = b.op("or", cmp(b, av, bv, direction),
                  b.op("and", cmp(b, av, av, "NE"), b.op("not", cmp(b, bv, bv, "NE"))))
    same = b.op("or", cmp(b, av, bv, "EQ"), b.op("and", cmp(b, av, av, "NE"),
                                                   cmp(b, bv, bv, "NE")))
    return b.op("or", better, b.op("and", same, cmp(b, ai, bi, tie)))


def test_a_hand_written_argmax_in_another_form_is_recognized():
    def build(b, av, ai, bv, bi):  # b wins instead of a, with the comparisons turned round
        b_better = b.op("or", cmp(b, bv, av, "GT"), b.op("and", cmp(b, bv, bv, "NE"),
                                                          cmp(b, av, av, "EQ")))
        tie = b.op("and", b.op("or", cmp(b, av, bv, "EQ"), b.op(
            "and", cmp(b, av, av, "NE"), cmp(b, bv, bv, "NE"))), cmp(b, bi, ai, "LT"))
        return pick(b, b.op("or", b_better, tie), bv, bi, av, ai)
    assert arg_reducer_kind(body(build)) == "max"


NOT_ARG = {
    "ties go to the larger index": lambda b, av, ai, bv, bi: pick(
        b, nan_aware(b, av, ai, bv, bi, tie="GT"), av, ai, bv, bi),
    "NaN not the best": lambda b, av, ai, bv, bi: pick(
        b, b.op("or", cmp(b, av, bv, "GT"), b.op("and", cmp(b, av, bv, "EQ"),
                                                  cmp(b, ai, bi, "LT"))), av, ai, bv, bi),
    "value and index from different pairs": lambda b, av, ai, bv, bi: (
        b.op("select", nan_aware(b, av, ai, bv, bi), av, bv),
        b.op("select", nan_aware(b, av, ai, bv, bi), bi, ai)),
    "arithmetic in the body": lambda b, av, ai, bv, bi: (
        b.op("add", av, bv), b.op("select", nan_aware(b, av, ai, bv, bi), ai, bi)),
    "index compared with a constant": lambda b, av, ai, bv, bi: pick(
        b, cmp(b, ai, b.constant(np.int32(0)), "LT"), av, ai, bv, bi),
}


@pytest.mark.parametrize("name", sorted(NOT_ARG))
def test_other_bodies_are_not_arg_reducers(name):
    assert arg_reducer_kind(body(NOT_ARG[name])) is None


def special_values(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        pool = np.array([info.min, info.max, 0, 1, 2, 3], np.int64)
        return rng.choice(pool, shape).astype(dtype)
    pool = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -1.5, 2.0],
                    np.float64)
    x = rng.choice(pool, shape).astype(dtype)
    mask = rng.random(shape) < 0.5
    x[mask] = rng.normal(size=shape).astype(dtype)[mask]
    return x


def arg_module(kind, x, axis):
    """reduce((x, iota), (identity, 0)) with the lowered argmax/argmin body."""
    f = jnp.argmax if kind == "max" else jnp.argmin
    reducer = lowered_body(f, np.zeros(2, x.dtype))  # (the body depends on the dtype only)
    m = Module("m")
    m.add_computation(reducer)
    b = Builder(m, "main")
    p = b.parameter(0, Shape(x.dtype, x.shape))
    iota = b.op("iota", shape=Shape(np.int32, x.shape), iota_dimension=axis)
    dt = x.dtype
    if dt.kind == "f":
        init = -np.inf if kind == "max" else np.inf
    else:
        init = np.iinfo(dt).min if kind == "max" else np.iinfo(dt).max
    r = b.op("reduce", p, iota, b.constant(np.asarray(init, dt)), b.constant(np.int32(0)),
             dimensions=(axis,), calls=[reducer])
    b.build(r, entry=True)
    return m


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("shape,axis", [((6, 33), 1), ((1, 7), 1), ((40,), 0), ((3, 1), 1),
                                        ((2, 3, 20), 2), ((5, 0), 1)])
def test_native_arg_reductions_match_the_evaluator_bit_for_bit(dtype, kind, shape, axis):
    rng = np.random.default_rng(zlib.crc32(repr((np.dtype(dtype).name, kind, shape)).encode()))
    x = special_values(rng, shape, dtype)
    m = arg_module(kind, x, axis)
    exe = get_backend("cpu").compile(m)
    got = exe.execute([x])
    want = evaluate_computation(m.entry, [x])
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(np.ascontiguousarray(g).view(np.uint8),
                                      np.ascontiguousarray(w).view(np.uint8))


def test_jitted_argmax_and_argmin_match_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 257)).astype(np.float32)
    x[3, 5] = np.nan
    x[7, :] = -np.inf
    x[8, [4, 9]] = 10.0
    f = ember.jit(lambda a: (jnp.argmax(a, axis=1), jnp.argmin(a, axis=1), jnp.argmax(a)))
    amax, amin, flat = f(x)
    np.testing.assert_array_equal(np.asarray(amax), np.argmax(x, axis=1))
    np.testing.assert_array_equal(np.asarray(amin), np.argmin(x, axis=1))
    assert int(flat) == np.argmax(x)


def test_a_variadic_reduce_combines_each_element_once():
    # Two sums as one variadic reduce: a second combine per element (once per output, as
    # before) would double both.
    m = Module("m")
    rb = Builder(m, "body")
    a0, a1 = rb.parameter(0, Shape(np.float32, ())), rb.parameter(1, Shape(np.int32, ()))
    b0, b1 = rb.parameter(2, Shape(np.float32, ())), rb.parameter(3, Shape(np.int32, ()))
    reducer = rb.build(rb.op("tuple", rb.op("add", a0, b0), rb.op("add", a1, b1)))
    b = Builder(m, "main")
    x = b.parameter(0, Shape(np.float32, (4, 9)))
    y = b.parameter(1, Shape(np.int32, (4, 9)))
    b.build(b.op("reduce", b.op("negate", x), y, b.constant(np.float32(0)),
                 b.constant(np.int32(0)), dimensions=(1,), calls=[reducer]), entry=True)
    fuse_module(m)  # (a fusion: a lone tuple-shaped reduce would be a library step)
    xs = np.arange(36, dtype=np.float32).reshape(4, 9)
    ys = np.arange(36, dtype=np.int32).reshape(4, 9) ** 2
    exe = get_backend("cpu").compile(m)
    assert [type(s) for s in exe.program.steps] == [KernelPlan]
    sums, squares = exe.execute([xs, ys])
    np.testing.assert_array_equal(sums, -xs.sum(1))
    np.testing.assert_array_equal(squares, ys.sum(1))
