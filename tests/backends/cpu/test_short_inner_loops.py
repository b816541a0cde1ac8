"""Loop nests whose innermost dim is a short constant (8 to 256 items: ``kron``, a broadcast
over a trailing axis of 16, a transpose keeping a minor dim of 32) keep that loop rolled, so
LLVM vectorizes it rather than unrolling it and vectorizing the loop around it with scatter
stores (``kernel_gen.SHORT_INNER_MIN``). The results must match NumPy whatever the extent,
dtype or thread count, and the optimized code must store with plain vectors."""

import itertools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu import llvm_support
from ember.backends.cpu.executable import CpuExecutable
from ember.backends.cpu.kernel_gen import SHORT_INNER_MAX, SHORT_INNER_MIN
from ember.backends.cpu.program import ProgramBuilder
from tests.backends.cpu.helpers import optimized

rng = np.random.default_rng(11)
_names = itertools.count()


def _data(shape, dtype):
    x = rng.standard_normal(shape) * 20
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@pytest.mark.parametrize("inner", [SHORT_INNER_MIN - 1, SHORT_INNER_MIN, 10, 16, 33,
                                   SHORT_INNER_MAX, SHORT_INNER_MAX + 1])
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.int32, np.uint16, np.complex64])
def test_trailing_broadcasts_match_numpy(inner, dtype):
    a, b = _data((37, 29), dtype), _data((inner,), dtype)
    got = np.asarray(ember.jit(lambda a, b: a[:, :, None] * b[None, None, :] - a[:, :, None])(
        a, b))
    want = a[:, :, None] * b - a[:, :, None]
    assert got.dtype == want.dtype
    if dtype == np.complex64:  # (complex products may round in another order)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-3)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shapes", [((64, 64), (32, 32)), ((5, 7), (3, 9)), ((3, 4), (2, 8)),
                                    ((16, 16), (16, 16))])
def test_kron_matches_numpy(shapes):
    a, b = (_data(s, np.float32) for s in shapes)
    np.testing.assert_array_equal(np.asarray(ember.jit(jnp.kron)(a, b)), np.kron(a, b))


@pytest.mark.parametrize("minor", [8, 12, 32, 200])
def test_transposes_keeping_a_short_minor_dim_match_numpy(minor):
    x = _data((33, 65, minor), np.float32)
    got = ember.jit(lambda x: jnp.transpose(x, (1, 0, 2)) * 2)(x)
    np.testing.assert_array_equal(np.asarray(got), np.transpose(x, (1, 0, 2)) * 2)


def _build(module):
    """An executable of ``module`` and its program, built here under fresh symbol names
    (no cache: ``PARALLEL_MIN_WORK`` is read while building)."""
    program = ProgramBuilder(module, prefix=f"sil{next(_names)}").build()
    lib = llvm_support.LoadedObject(llvm_support.compile_ir(program.ir_text).object_code)
    return CpuExecutable(program, lib, module), program


def test_many_threads_match_one(monkeypatch):
    """A result large enough to split across threads is the same on one thread."""
    a, b = _data((512, 300), np.float32), _data((16,), np.float32)
    module = optimized(lambda a, b: jnp.sin(a)[:, :, None] * b[None, None, :], a, b)
    threaded, program = _build(module)
    assert any(getattr(s, "parallel", False) for s in threaded._steps)
    monkeypatch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
    single, _ = _build(module)
    assert not any(getattr(s, "parallel", False) for s in single._steps)
    got = threaded.execute([a, b])[0]
    np.testing.assert_array_equal(got, single.execute([a, b])[0])
    np.testing.assert_allclose(got, np.sin(a)[:, :, None] * b, rtol=1e-6, atol=1e-4)


def _optimized_ir(f, *args) -> str:
    program = ProgramBuilder(optimized(f, *args), prefix=f"sil{next(_names)}").build()
    return llvm_support.compile_ir(program.ir_text, want_text=True, opt_level=3).optimized_ir


@pytest.mark.parametrize("inner", [8, 16, 32, 100])
def test_short_inner_loops_store_without_scatters(inner):
    a, b = _data((64, 64), np.float32), _data((inner,), np.float32)
    ir_text = _optimized_ir(lambda a, b: a[:, :, None] * b[None, None, :], a, b)
    assert "masked.scatter" not in ir_text
    assert "x float>" in ir_text  # (still vectorized)


def test_rule_bounds():
    """Only constant ranges of SHORT_INNER_MIN to SHORT_INNER_MAX items qualify."""
    from llvmlite import ir

    from ember.backends.cpu.kernel_gen import _short_constant_trip
    c = lambda v: ir.Constant(ir.IntType(64), v)  # noqa: E731
    assert _short_constant_trip(c(0), c(SHORT_INNER_MIN))
    assert _short_constant_trip(c(3), c(3 + SHORT_INNER_MAX))
    assert not _short_constant_trip(c(0), c(SHORT_INNER_MIN - 1))
    assert not _short_constant_trip(c(0), c(SHORT_INNER_MAX + 1))
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.IntType(64)]), "f")
    assert not _short_constant_trip(c(0), fn.args[0])  # (a runtime bound)
