"""Short-dot kernels (``ember/backends/cpu/short_dots.py``): batched small matrix products
vectorized across the batch.

Each product is compiled from the same optimized module with short kernels and without
(the looped small-dot kernel); the two must agree bit for bit, and both with float64 NumPy.
Kernels are also called directly on ranges of batch elements that start and end anywhere,
and on buffers placed against inaccessible pages.
"""

import itertools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.cpu import short_dots, short_rows
from ember.backends.cpu.program import ProgramBuilder
from tests.backends.cpu.helpers import optimized
from tests.backends.cpu.test_short_rows import _guarded, _kernel_runner, build, same_bits

rng = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def small_arrays_too(monkeypatch):
    """Short kernels for any number of results (by default only from
    ``SHORT_ROW_MIN_WORK``), so small batches exercise them."""
    monkeypatch.setattr(short_rows, "SHORT_ROW_MIN_WORK", 0)


def _values(shape, dtype):
    if np.dtype(dtype).kind == "f":
        return (rng.standard_normal(shape) * 3).astype(dtype)
    return rng.integers(-50, 50, shape).astype(dtype)


def _short_and_looped(f, *args):
    """(short outputs, looped outputs, short program) of ``f``'s optimized module."""
    module = optimized(f, *args)
    short, program = build(module, True)
    looped, plain = build(module, False)
    assert program.short_row_kernels == 1 and plain.short_row_kernels == 0
    return short.execute(list(args)), looped.execute(list(args)), program


# (lhs shape, rhs shape, einsum spec): square, rectangular, vector-matrix, two batch dims,
# operands with their contracting dim elsewhere; batches not a multiple of 16.
PRODUCTS = [
    ((40, 3, 3), (40, 3, 3), "bik,bkj->bij"),
    ((37, 4, 4), (37, 4, 4), "bik,bkj->bij"),
    ((16, 4, 4), (16, 4, 2), "bik,bkj->bij"),
    ((33, 2, 4), (33, 4, 4), "bik,bkj->bij"),
    ((20, 8, 2), (20, 2, 2), "bik,bkj->bij"),
    ((50, 1, 4), (50, 4, 8), "bik,bkj->bij"),
    ((21, 3, 8), (21, 8, 3), "bik,bkj->bij"),
    ((40, 2, 2), (40, 2, 2), "bik,bkj->bij"),
    ((40, 1, 4), (40, 4, 4), "bik,bkj->bij"),
    ((40, 3, 3), (40, 3), "bik,bk->bi"),
    ((17, 4, 4), (17, 4), "bik,bk->bi"),
    ((5, 7, 3, 3), (5, 7, 3, 3), "abik,abkj->abij"),
    ((30, 3, 4), (30, 3, 4), "bik,bjk->bij"),
    ((30, 4, 3), (30, 4, 3), "bki,bkj->bij"),
]


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint32])
@pytest.mark.parametrize("lhs_shape, rhs_shape, spec", PRODUCTS)
def test_short_dots_match_the_looped_kernel_bitwise_and_numpy(lhs_shape, rhs_shape, spec,
                                                                dtype):
    a, b = _values(lhs_shape, dtype), _values(rhs_shape, dtype)
    short, looped, _ = _short_and_looped(lambda x, y: jnp.einsum(spec, x, y), a, b)
    same_bits(short[0], looped[0])
    want = np.einsum(spec, a.astype(np.float64), b.astype(np.float64))
    if np.dtype(dtype).kind == "u":  # (wrapping arithmetic: compare modulo 2**32)
        want = np.einsum(spec, a.astype(np.int64), b.astype(np.int64)).astype(dtype)
    np.testing.assert_allclose(np.asarray(short[0], np.float64), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("lhs_shape, rhs_shape", [((19, 2, 2), (19, 2, 3)),
                                                  ((9, 2, 4), (9, 4, 4)),
                                                  ((24, 4, 2), (24, 2, 2))])
@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_eight_byte_elements_take_eight_lanes(lhs_shape, rhs_shape, dtype, x64):
    a, b = _values(lhs_shape, dtype), _values(rhs_shape, dtype)
    short, looped, _ = _short_and_looped(jnp.matmul, a, b)
    same_bits(short[0], looped[0])
    np.testing.assert_allclose(short[0], np.matmul(a, b), rtol=1e-12)


def test_nan_inf_and_signed_zeros_follow_the_looped_kernel():
    a = _values((48, 3, 3), np.float32)
    b = _values((48, 3, 3), np.float32)
    a[0, 0, 0], a[1, 1, 1], a[2, 2, 2] = np.nan, np.inf, -np.inf
    b[3], a[4] = 0.0, -0.0
    b[5, :, 0] = np.inf
    short, looped, _ = _short_and_looped(jnp.matmul, a, b)
    same_bits(short[0], looped[0])
    with np.errstate(invalid="ignore"):  # the products summed in order, in float32
        want = a[:, :, 0, None] * b[:, None, 0, :]
        for k in range(1, 3):
            want = want + a[:, :, k, None] * b[:, None, k, :]
    same_bits(short[0], want)


@pytest.mark.parametrize("lhs_shape, rhs_shape, reason", [
    ((40, 5, 5), (40, 5, 5), "25 results, over a vector"),
    ((40, 8, 8), (40, 8, 2), "64-element operand"),
    ((40, 4, 8), (40, 8, 3), "56 operand elements together"),
    ((10, 3, 3), (10, 3, 3), "fewer batch elements than lanes"),
    ((40, 2, 12), (40, 12, 4), "12 contracted: not a small dot"),
])
def test_other_dots_keep_the_looped_kernel(lhs_shape, rhs_shape, reason):
    a, b = _values(lhs_shape, np.float32), _values(rhs_shape, np.float32)
    program = ProgramBuilder(optimized(jnp.matmul, a, b)).build()
    assert program.short_row_kernels == 0, reason


def test_batch_dims_must_lead_the_operands():
    # A dot whose lhs has its batch dim last keeps the looped kernel.
    from ember.compiler.hlo import Builder, Module, Shape
    module = Module("m")
    b = Builder(module, "main")
    f32 = np.dtype(np.float32)
    x = b.parameter(0, Shape(f32, (3, 3, 40)))
    y = b.parameter(1, Shape(f32, (40, 3, 3)))
    dot = b.op("dot_general", x, y, shape=Shape(f32, (40, 3, 3)), lhs_batching_dimensions=(2,),
               rhs_batching_dimensions=(0,), lhs_contracting_dimensions=(1,),
               rhs_contracting_dimensions=(1,))
    fused = short_dots_fused(b.build(dot))
    assert short_dots.short_dot_lanes(fused) is None


def short_dots_fused(comp):
    """``comp`` as the lone-op fused computation the program builder makes of its root."""
    from ember.backends.cpu.program import _single_op_computation
    return _single_op_computation(comp.root)


def test_any_split_of_the_batch_gives_the_same_bits():
    batch = 16 * 3 + 5
    a, b = _values((batch, 4, 4), np.float32), _values((batch, 4, 4), np.float32)
    exe, program = build(optimized(jnp.matmul, a, b), True)
    (step,) = program.steps
    run = _kernel_runner(program, exe, step.info.name)
    whole = np.empty((batch, 4, 4), np.float32)
    run([a, b, whole], 0, batch)
    np.testing.assert_allclose(whole, np.matmul(a.astype(np.float64), b), rtol=1e-5, atol=1e-5)
    for cuts in ([1], [5, 6, 7], [15, 16, 17, 40], list(range(0, batch, 3)),
                 sorted(rng.choice(np.arange(1, batch), 9, replace=False))):
        out = np.full_like(whole, np.nan)
        bounds = [0, *cuts, batch]
        for lo, hi in zip(bounds, bounds[1:]):
            run([a, b, out], lo, hi)
        same_bits(out, whole)
    out = np.full_like(whole, 7.0)
    run([a, b, out], 10, 10)
    run([a, b, out], batch, batch + 50)
    assert np.all(out == 7.0)
    run([a, b, out], -5, batch + 50)
    same_bits(out, whole)


@pytest.mark.parametrize("lhs_shape, rhs_shape", [((4, 4), (4, 4)), ((2, 4), (4, 4)),
                                                  ((3, 8), (8, 3)), ((1, 4), (4, 8)),
                                                  ((4, 4), (4, 1)), ((2, 2), (2, 2))])
@pytest.mark.parametrize("batch", [16, 33])
def test_kernels_touch_nothing_outside_their_buffers(lhs_shape, rhs_shape, batch):
    a = _values((batch, *lhs_shape), np.float32)
    b = _values((batch, *rhs_shape), np.float32)
    want = np.matmul(a.astype(np.float64), b)
    exe, program = build(optimized(jnp.matmul, a, b), True)
    assert program.short_row_kernels == 1
    (step,) = program.steps
    run = _kernel_runner(program, exe, step.info.name)
    for at_end in (True, False):
        ga, keep_a = _guarded(a, at_end)
        gb, keep_b = _guarded(b, at_end)
        out, keep_out = _guarded(np.zeros(want.shape, np.float32), at_end)
        run([ga, gb, out], 0, batch)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
        del ga, gb, out


def test_jit_takes_short_dots_for_large_batches(monkeypatch):
    monkeypatch.setattr(short_rows, "SHORT_ROW_MIN_WORK", 1 << 14)
    small = optimized(jnp.matmul, np.ones((100, 3, 3), np.float32), np.ones((100, 3, 3),
                                                                           np.float32))
    assert ProgramBuilder(small).build().short_row_kernels == 0
    a, b = _values((2500, 3, 3), np.float32), _values((2500, 3, 3), np.float32)
    assert ProgramBuilder(optimized(jnp.matmul, a, b)).build().short_row_kernels == 1
    np.testing.assert_allclose(np.asarray(ember.jit(jnp.matmul)(a, b)),
                               np.matmul(a.astype(np.float64), b), rtol=1e-5, atol=1e-5)


def test_matrix_positions_follow_row_major_order():
    # An operand (batch, k, m): element (free i, contracted k) at k * m + i.
    from ember.compiler.hlo import Instruction, Shape
    operand = Instruction("parameter", [], Shape(np.dtype(np.float32), (5, 3, 2)),
                          {"index": 0})
    positions = short_dots._matrix_positions(operand, 1, (1,), [2])
    for i, k in itertools.product(range(2), range(3)):
        assert positions[((i,), (k,))] == k * 2 + i
