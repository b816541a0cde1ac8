"""Denormals flushed to zero in native code, as XLA's CPU code does, behind the switch
``EMBER_CPU_FLUSH_DENORMALS=1`` (``denormals``): the module transform, the results of jitted
programs on every path that runs native code (a whole-program entry, Python-stepped kernels,
the parallel runtime's workers, the Python pool), the Python thread's own arithmetic left
alone, and IEEE denormals with the switch off (the default)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.cpu import denormals, parallel_runtime
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu.llvm_support import LoadedObject, compile_ir
from tests.backends.cpu.helpers import x64

pytestmark = pytest.mark.skipif(not denormals.applies(), reason="flushes on x86-64 only")

TINY32 = np.float32(1e-40)  # a float32 denormal
TINY64 = 1e-310  # a float64 denormal


@pytest.fixture
def flushing(monkeypatch):
    """Code compiled in the test flushes denormals (its cache keys say so: nothing compiled
    without the switch is reused)."""
    monkeypatch.setenv(denormals.SWITCH, "1")


def _module(ret: str = "void") -> str:
    """A module with a helper (internal), a kernel called by an entry, and a function taking
    a function pointer, in llvmlite's style (quoted names)."""
    value = "ret void" if ret == "void" else "ret i64 7"
    return f"""
define internal void @"helper"(i64 %".1") {{
  ret void
}}
define void @"kernel_1"(i8** noalias %".1", i64 %".2", i64 %".3") noinline {{
  call void @"helper"(i64 %".2")
  ret void
}}
define {ret} @"entry"(i8* %".1", void (i8**, i64, i64)* %".2", <4 x float> %".3") {{
  call void @"kernel_1"(i8** null, i64 0, i64 1)
  call void %".2"(i8** null, i64 0, i64 1)
  store i8* bitcast (void (i8**, i64, i64)* @"kernel_1" to i8*), i8** null
  {value}
}}
"""


def test_external_functions_get_wrappers_and_internal_references_the_bodies():
    text = denormals.flush_denormals(_module())
    # The bodies keep the code under new names; every reference inside the module moved
    # there (the call, the pointer), so a loop's tiny kernels still inline into it.
    assert 'define void @"kernel_1.body"(i8** noalias' in text
    assert 'call void @"kernel_1.body"(i8** null' in text
    assert '@"kernel_1.body" to i8*' in text
    assert 'define internal void @"helper"' in text and '"helper.body"' not in text
    # The wrappers, under the old names: set FTZ|DAZ, call the body out of line, restore.
    wrapper = text[text.index('define void @"kernel_1"('):]
    wrapper = wrapper[:wrapper.index("}")]
    assert "i8** %a0, i64 %a1, i64 %a2" in wrapper
    assert f"or i32 %mode, {denormals.FLUSH_BITS}" in wrapper
    assert 'call void @"kernel_1.body"(i8** %a0, i64 %a1, i64 %a2) noinline' in wrapper
    assert wrapper.count("ldmxcsr") == 2 and wrapper.count("stmxcsr") == 1
    entry = text[text.index('define void @"entry"('):]
    assert "(i8* %a0, void (i8**, i64, i64)* %a1, <4 x float> %a2)" in entry
    compile_ir(_module(), flush_denormals=True)  # (parses and verifies)


def test_a_wrapper_returns_the_bodys_value():
    text = denormals.flush_denormals(_module("i64"))
    assert '%result = call i64 @"entry.body"(' in text and "ret i64 %result" in text
    lib = LoadedObject(compile_ir(_module("i64"), flush_denormals=True).object_code)
    assert lib.address("entry.body") not in (0, lib.address("entry"))


def test_no_transform_off_x86(monkeypatch):
    monkeypatch.setattr(denormals, "applies", lambda: False)
    assert denormals.flush_denormals(_module()) == _module()


def _scale_kernel(flush: bool):
    """``out[i] = x[i] * 2`` compiled on its own, with or without the flushing wrapper."""
    text = """
define void @"scale"(float* noalias %".1", float* noalias %".2", i64 %".3") {
entry:
  %empty = icmp sle i64 %".3", 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %p = getelementptr float, float* %".2", i64 %i
  %x = load float, float* %p
  %y = fmul float %x, 2.0
  %q = getelementptr float, float* %".1", i64 %i
  store float %y, float* %q
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %".3"
  br i1 %more, label %loop, label %done
done:
  ret void
}
"""
    lib = LoadedObject(compile_ir(text, flush_denormals=flush).object_code)
    fn = cpu_exe._ffi.cast("void(*)(float*, float*, long)", lib.address("scale"))

    def call(x, lib=lib):  # (``lib`` keeps the code loaded while ``call`` lives)
        x = np.ascontiguousarray(x, np.float32)
        out = np.empty_like(x)
        fn(cpu_exe._ffi.from_buffer("float[]", out), cpu_exe._ffi.from_buffer("float[]", x),
           x.size)
        return out
    return call


def test_the_wrapper_flushes_and_leaves_the_callers_mode_alone():
    x = np.array([TINY32, -TINY32, 3e-38, 1.0], np.float32)
    ieee = _scale_kernel(False)
    flushed = _scale_kernel(True)
    np.testing.assert_array_equal(ieee(x), x * np.float32(2))
    got = flushed(x)
    np.testing.assert_array_equal(got, np.array([0.0, -0.0, 3e-38, 1.0], np.float32) * 2)
    assert np.signbit(got[1])  # (flushed to a zero of the denormal's sign)
    # Python's thread keeps IEEE arithmetic after the call.
    assert x[0] * np.float32(2) == x[0] + x[0] != 0


def test_jitted_arithmetic_flushes_like_xla(flushing):
    x = np.array([TINY32, -TINY32, np.float32(3e-38), np.float32(1e-20)], np.float32)
    np.testing.assert_array_equal(ember.jit(lambda v: v * 2.0)(x),
                                  np.array([0, 0, 3e-38, 1e-20], np.float32) * 2)
    # Denormal operands count as zero, comparisons included; products underflow to zero.
    np.testing.assert_array_equal(ember.jit(lambda v: v > 0)(x), [False, False, True, True])
    np.testing.assert_array_equal(ember.jit(lambda v: v * v)(x), [0, 0, 0, 0])
    # Moving values keeps their bits (no arithmetic).
    np.testing.assert_array_equal(ember.jit(lambda v: v[::-1])(x), x[::-1])
    # The interpreter-style reference, NumPy, keeps IEEE denormals.
    assert (x * np.float32(2))[0] != 0


def test_float64_flushes_too(flushing):
    with x64():
        x = np.array([TINY64, 1e-300], np.float64)
        got = np.asarray(ember.jit(lambda v: v * 2.0)(x))
        np.testing.assert_array_equal(got, [0.0, 1e-300 * 2])


def test_softmax_of_widely_spread_logits_gives_zeros_not_denormals(flushing):
    # exp of logits 87-103 below the maximum is a float32 denormal: flushed to zero.
    logits = np.array([[0.0, -90.0, -95.0, -100.0, -5.0]], np.float32)
    got = np.asarray(ember.jit(lambda v: ember.nn.softmax(v, axis=-1))(logits))
    want = np.exp(logits.astype(np.float64))
    want /= want.sum()
    want[want < np.finfo(np.float32).tiny] = 0.0
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=1e-6, atol=0)
    assert np.all(got[0, 1:4] == 0)


def test_threaded_kernels_flush_on_every_thread(flushing, monkeypatch):
    """A kernel big enough for the threads: the parallel runtime's workers, the Python
    pool's threads and one thread all flush every element."""
    n = 1 << 21
    x = np.full(n, TINY32, np.float32)
    x[::3] = 1.5
    # (A denormal operand counts as zero: IEEE arithmetic would give 1e-10.)
    want = np.where(x == 1.5, np.float32(1.5) * np.float32(1e30), np.float32(0.0))

    def run():
        f = ember.jit(lambda v: v * 1e30)  # (new function: compiled again)
        return np.asarray(f(x))
    np.testing.assert_array_equal(run(), want)
    if parallel_runtime.get() is not None:
        monkeypatch.setattr(parallel_runtime, "_runtime", None)
        np.testing.assert_array_equal(run(), want)
    monkeypatch.setattr(cpu_exe, "PARALLEL_MIN_WORK", 1 << 62)
    np.testing.assert_array_equal(run(), want)


def test_python_stepped_programs_flush(flushing):
    """A program stepped from Python (a sort between kernels) calls each kernel through its
    wrapper."""
    x = np.array([3e-38, TINY32, 2.0, -TINY32], np.float32)
    f = ember.jit(lambda v: jnp.sort(v * 2.0) * 3.0)
    np.testing.assert_array_equal(f(x), np.array([-0.0, 0.0, 1.8e-37, 12.0], np.float32))


def test_the_callers_thread_keeps_ieee_arithmetic_after_jitted_calls(flushing):
    f = ember.jit(lambda v: jnp.sum(v * 2.0))
    f(np.ones(1 << 20, np.float32)).block_until_ready()
    tiny = np.array([TINY32], np.float32)
    assert (tiny * np.float32(2))[0] == tiny[0] + tiny[0] != 0
    assert np.float64(TINY64) * 2 == TINY64 + TINY64 != 0


def test_the_switch_is_off_by_default_and_code_keeps_ieee_denormals(monkeypatch):
    monkeypatch.delenv(denormals.SWITCH, raising=False)
    assert not denormals.enabled() and denormals.mode() == "denormals=ieee"
    x = np.array([TINY32, -TINY32, 1.0], np.float32)
    np.testing.assert_array_equal(ember.jit(lambda v: v * 2.0)(x), x * np.float32(2))
    np.testing.assert_array_equal(ember.jit(lambda v: v > 0)(x), [True, False, True])
    assert "mxcsr" not in _compiled_ir(lambda v: v * 3.0, x)


def test_with_the_switch_on_the_keys_and_the_code_change(flushing):
    assert denormals.enabled() and denormals.mode() == "denormals=flushed"
    x = np.ones(4, np.float32)
    text = _compiled_ir(lambda v: v * 5.0, x)
    assert re.search(r"define .*_entry\.body", text) and "ldmxcsr" in text


def _compiled_ir(fn, x) -> str:
    """The LLVM IR, as compiled, of the program of ``jit(fn)`` on ``x``."""
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as dump:
        os.environ["EMBER_DUMP_TO"] = dump
        try:
            ember.jit(fn)(x).block_until_ready()
        finally:
            del os.environ["EMBER_DUMP_TO"]
        (name,) = [f for f in os.listdir(dump) if f.endswith(".llvm.opt.ll")]
        with open(os.path.join(dump, name)) as f:
            return f.read()


def test_the_mode_is_in_every_cache_key(monkeypatch):
    """Code compiled in one mode is never loaded in the other (memory or disk)."""
    from ember.backends import get_backend
    from ember.backends.cpu import llvm_support
    backend = get_backend("cpu")

    def keys():
        return (backend.native_key("HloModule m"), backend.cache_key("HloModule m"),
                backend.lowered_key("HloModule m"), llvm_support.backend_fingerprint())
    monkeypatch.delenv(denormals.SWITCH, raising=False)
    ieee = keys()
    monkeypatch.setenv(denormals.SWITCH, "1")
    flushed = keys()
    assert all(a != b for a, b in zip(ieee, flushed))
    monkeypatch.setenv(denormals.SWITCH, "0")
    assert keys() == ieee
