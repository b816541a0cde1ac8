"""Whole tiles of a transpose that moves the minor dim go through registers
(``kernel_gen.KernelBuilder._register_tile``): each 8 x 8 block is computed into a stack
block along the operand's minor dim, transposed with vector shuffles
(``kernel_gen._transpose_block``) and stored as runs of output rows; ragged edges and complex
outputs run element by element. A transpose is a copy, so every result must equal NumPy's
bit for bit, for small and odd dims, every element type, several outputs, and on one thread
or several."""

import itertools

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu import kernel_gen, llvm_support
from ember.backends.cpu.executable import CpuExecutable
from ember.backends.cpu.program import ProgramBuilder
from tests.backends.cpu.helpers import optimized, x64

rng = np.random.default_rng(21)
_names = itertools.count()


def _data(shape, dtype):
    x = rng.standard_normal(shape) * 40
    if np.dtype(dtype) == np.bool_:
        return x > 0
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def test_transpose_block_is_a_transpose():
    """The shuffle stages, applied to labels, put row r, column c at column c, row r."""
    vecs = [[(r, c) for c in range(8)] for r in range(8)]
    for step, masks in kernel_gen._TRANSPOSE_STAGES:
        out = [None] * 8
        for group in range(0, 8, 2 * step):
            for r in range(group, group + step):
                both = vecs[r] + vecs[r + step]
                out[r], out[r + step] = ([both[m] for m in mask] for mask in masks)
        vecs = out
    columns = [vecs[c] for c in (0, 2, 1, 3, 4, 6, 5, 7)]
    assert columns == [[(r, c) for r in range(8)] for c in range(8)]


@pytest.mark.parametrize("shape,perm", [
    ((4096 // 64, 64, 16), (0, 2, 1)),   # (the swapaxes of a small minor dim)
    ((3, 16, 9, 10), (0, 2, 3, 1)),      # (NCHW -> NHWC, ragged spatial dims)
    ((2, 24, 7, 8), (0, 2, 3, 1)),
    ((4, 9, 9, 17), (0, 3, 1, 2)),       # (NHWC -> NCHW)
    ((8, 8), (1, 0)),
    ((17, 23), (1, 0)),
    ((40, 3, 33), (2, 1, 0)),            # (a dim between the two tiled ones)
    ((5, 12, 6, 19), (3, 1, 2, 0)),
    ((16, 15), (1, 0)),
])
def test_small_dims_match_numpy(shape, perm):
    x = _data(shape, np.float32)
    got = np.asarray(ember.jit(lambda a: jnp.transpose(a, perm) * 2 + 1)(x))
    np.testing.assert_array_equal(got, np.transpose(x, perm) * np.float32(2) + np.float32(1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint16, np.int64,
                                   np.bool_, np.float16, ml_dtypes.bfloat16, np.complex64])
def test_every_dtype_is_copied_exactly(dtype):
    x = _data((6, 24, 19), dtype)
    with x64(x.dtype.itemsize == 8):
        got = np.asarray(ember.jit(lambda a: jnp.swapaxes(a, 1, 2))(x))
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.view(np.uint8), np.swapaxes(x, 1, 2).copy().view(np.uint8))


def test_nan_and_signed_zero_pass_through_bit_for_bit():
    x = _data((16, 24), np.float32)
    x[::3, ::5] = np.nan
    x[1::4, ::2] = -0.0
    x[2, :] = np.inf
    got = np.asarray(ember.jit(lambda a: -a.T)(x))
    np.testing.assert_array_equal(got.view(np.uint32), (-x.T).view(np.uint32))


def test_several_outputs_of_different_dtypes():
    x = _data((5, 16, 24), np.float32)

    def f(a):
        t = jnp.swapaxes(a, 1, 2)
        return t * 3, (t > 0), t.astype(jnp.int16)
    got = ember.jit(f)(x)
    t = np.swapaxes(x, 1, 2)
    for g, w in zip(got, (t * np.float32(3), t > 0, t.astype(np.int16))):
        assert np.asarray(g).dtype == w.dtype
        np.testing.assert_array_equal(np.asarray(g), w)


def test_a_transposed_operand_with_one_in_output_layout():
    """The second operand is read along the tiled dim (strided within a tile)."""
    x, y = _data((9, 32, 24), np.float32), _data((9, 24, 32), np.float32)
    got = np.asarray(ember.jit(lambda a, b: jnp.swapaxes(a, 1, 2) - b)(x, y))
    np.testing.assert_array_equal(got, np.swapaxes(x, 1, 2) - y)


def _build(module):
    """An executable of ``module`` built here under fresh symbol names (no cache:
    ``PARALLEL_MIN_WORK`` is read while building)."""
    program = ProgramBuilder(module, prefix=f"st{next(_names)}").build()
    lib = llvm_support.LoadedObject(llvm_support.compile_ir(program.ir_text).object_code)
    return CpuExecutable(program, lib, module)


@pytest.mark.parametrize("shape,perm", [((1031, 777), (1, 0)), ((37, 64, 56), (0, 2, 1)),
                                        ((300, 16, 45), (2, 1, 0))])
def test_many_threads_match_one(monkeypatch, shape, perm):
    """Threads split the parallel dim at places that are no multiple of the tile (the
    tiled dim is the parallel one for ``.T``): the same result on one thread."""
    x = _data(shape, np.float32)
    module = optimized(lambda a: jnp.transpose(a, perm) + 1, x)
    threaded = _build(module)
    assert any(getattr(s, "parallel", False) for s in threaded._steps)
    monkeypatch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
    single = _build(module)
    assert not any(getattr(s, "parallel", False) for s in single._steps)
    got = threaded.execute([x])[0]
    np.testing.assert_array_equal(got, single.execute([x])[0])
    np.testing.assert_array_equal(got, np.transpose(x, perm) + np.float32(1))


@pytest.mark.parametrize("shape,perm", [((64, 64, 16), (0, 2, 1)), ((2, 16, 8, 8), (0, 2, 3, 1))])
def test_whole_tiles_store_rows_without_scatters(shape, perm):
    x = _data(shape, np.float32)
    program = ProgramBuilder(optimized(lambda a: jnp.transpose(a, perm) * 2, x),
                             prefix=f"st{next(_names)}").build()
    ir_text = llvm_support.compile_ir(program.ir_text, want_text=True, opt_level=3).optimized_ir
    assert "masked.scatter" not in ir_text and "masked.gather" not in ir_text
    assert "shufflevector <8 x float>" in ir_text
