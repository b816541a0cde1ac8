"""Native calls on NumPy arrays through trampolines (ember.backends.cpu.array_call).

A trampoline builtin reads each array's data pointer itself and calls the kernel: the
results equal the cffi route's, other argument counts and other objects are refused with
``SystemError`` before the kernel runs, references are counted right, and the eager kernels
and the single-call runner of small jitted programs use it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember
from ember.backends import get_backend
from ember.backends.cpu import array_call, eager_math, llvm_support
from tests.backends.cpu.helpers import optimized

pytestmark = pytest.mark.skipif(not array_call.available(),
                                reason="no array-call trampolines on this interpreter")

F32 = np.dtype(np.float32)


def _exp_address() -> int:
    return eager_math.kernel("exponential", F32)._library.address(
        "ember_eager_exponential_float32")


def _max_address() -> int:
    return eager_math.kernel("maximum", F32)._library.address("ember_eager_maximum_float32")


@pytest.fixture(scope="module")
def plain_kernel():
    """The address of ``swap(char* x, char* y)``: exchanges the first 4 bytes of x and y."""
    ir_text = textwrap.dedent("""
        define void @ember_test_swap(i8* %x, i8* %y) {
          %px = bitcast i8* %x to i32*
          %py = bitcast i8* %y to i32*
          %a = load i32, i32* %px
          %b = load i32, i32* %py
          store i32 %b, i32* %px
          store i32 %a, i32* %py
          ret void
        }""")
    lib = llvm_support.LoadedObject(llvm_support.compile_ir(ir_text).object_code)
    yield lib.address("ember_test_swap")
    del lib


@pytest.mark.parametrize("trampoline", [True, False])
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 5), (2, 1, 4)])
def test_size_tail_counts_the_last_arrays_elements(shape, trampoline):
    call = array_call.function(_exp_address(), 2, array_call.SIZE, trampoline=trampoline)
    x = np.linspace(-3, 3, int(np.prod(shape))).astype(np.float32).reshape(shape)
    y = np.full(shape, 7.0, np.float32)
    assert call(x, y) is y
    np.testing.assert_array_equal(y, eager_math.kernel("exponential", F32)(x))
    assert isinstance(call, type(len)) == trampoline  # (a builtin where trampolines exist)


@pytest.mark.parametrize("trampoline", [True, False])
def test_size_extra_tail_passes_the_layout(trampoline):
    address = _max_address()
    x = np.array([1.0, -2.0, np.nan, 0.0, 5.0], np.float32)
    y = np.array([0.0, 3.0, 1.0, -0.0, np.inf], np.float32)
    one = np.array(2.0, np.float32)
    for layout, (a, b) in ((eager_math.BOTH, (x, y)), (eager_math.SECOND_SCALAR, (x, one)),
                           (eager_math.FIRST_SCALAR, (one, y))):
        call = array_call.function(address, 3, array_call.SIZE_EXTRA, layout,
                                   trampoline=trampoline)
        out = np.empty(5, np.float32)
        assert call(a, b, out) is out
        want = np.maximum(np.broadcast_to(a, (5,)), np.broadcast_to(b, (5,)))
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("trampoline", [True, False])
def test_plain_tail_passes_only_pointers(plain_kernel, trampoline):
    call = array_call.function(plain_kernel, 2, array_call.PLAIN, trampoline=trampoline)
    x, y = np.array([1, 2], np.int32), np.array([3, 4], np.int32)
    assert call(x, y) is y
    assert x.tolist() == [3, 2] and y.tolist() == [1, 4]


def _weighted_sum_kernel(k: int) -> llvm_support.LoadedObject:
    """``f(p0, ..., p{k-1}, n)``: p{k-1}[0] = n + sum_j (j + 1) * p_j[0] (int64 values)."""
    params = ", ".join(f"i8* %p{j}" for j in range(k))
    lines = [f"define void @ember_test_weighted{k}({params}, i64 %n) {{", "  %s0 = add i64 %n, 0"]
    for j in range(k):
        lines += [f"  %q{j} = bitcast i8* %p{j} to i64*", f"  %v{j} = load i64, i64* %q{j}",
                  f"  %w{j} = mul i64 %v{j}, {j + 1}", f"  %s{j + 1} = add i64 %s{j}, %w{j}"]
    lines += [f"  store i64 %s{k}, i64* %q{k - 1}", "  ret void", "}"]
    return llvm_support.LoadedObject(llvm_support.compile_ir("\n".join(lines)).object_code)


@pytest.mark.parametrize("k", [1, 2, 7, array_call.MAX_ARRAYS])
def test_every_arity_passes_the_pointers_in_order(k):
    lib = _weighted_sum_kernel(k)
    call = array_call.function(lib.address(f"ember_test_weighted{k}"), k, array_call.SIZE)
    arrays = [np.array([10 * j + 3, -1, -1], np.int64) for j in range(k)]
    want = 3 + sum((j + 1) * (10 * j + 3) for j in range(k))  # (n: the last array's size)
    assert call(*arrays) is arrays[-1]
    assert arrays[-1][0] == want
    assert isinstance(call, type(len))


@pytest.mark.parametrize("trampoline", [True, False])
def test_other_counts_and_objects_are_refused_before_the_kernel_runs(plain_kernel,
                                                                     trampoline):
    call = array_call.function(plain_kernel, 2, array_call.PLAIN, trampoline=trampoline)
    x = np.array([1, 2], np.int32)

    class Sub(np.ndarray):
        pass

    refused = [(), (x,), (x, x.copy(), x.copy()), (x, [5, 6]), (x, np.int32(5)),
               (x, x.copy().view(Sub)), (None, x), (x, memoryview(b"abcd"))]
    for args in refused:
        with pytest.raises(SystemError):
            call(*args)
    assert x.tolist() == [1, 2]  # (never called)


def test_references_are_counted(plain_kernel):
    call = array_call.function(plain_kernel, 2, array_call.PLAIN)
    x, y = np.zeros(1, np.int32), np.zeros(1, np.int32)
    before = (sys.getrefcount(x), sys.getrefcount(y))
    for _ in range(1000):
        call(x, y)
    kept = [call(x, y) for _ in range(10)]
    assert sys.getrefcount(y) == before[1] + 10
    del kept
    assert (sys.getrefcount(x), sys.getrefcount(y)) == before


def test_bad_requests_are_value_errors():
    with pytest.raises(ValueError, match="tail"):
        array_call.function(_exp_address(), 2, "sized")
    with pytest.raises(ValueError, match="n_arrays"):
        array_call.function(_exp_address(), 0, array_call.SIZE)


def test_without_trampolines_calls_go_through_cffi(monkeypatch):
    monkeypatch.setattr(array_call, "_state", {})
    monkeypatch.setattr(array_call, "_layout_ok", lambda: False)
    assert not array_call.available()
    call = array_call.function(_exp_address(), 2, array_call.SIZE)
    assert not isinstance(call, type(len))
    x, y = np.ones(3, np.float32), np.empty(3, np.float32)
    np.testing.assert_array_equal(call(x, y), eager_math.kernel("exponential", F32)(x))


def test_long_argument_lists_go_through_cffi(plain_kernel):
    call = array_call.function(plain_kernel, array_call.MAX_ARRAYS + 1, array_call.PLAIN)
    assert not isinstance(call, type(len))


def test_a_process_exits_cleanly_after_using_trampolines(tmp_path):
    child = textwrap.dedent("""
        import numpy as np
        import ember.numpy as jnp
        x = jnp.asarray(np.arange(5, dtype=np.float32))
        for _ in range(3):
            y = jnp.maximum(jnp.exp(x), 2.0)
        print(np.asarray(y).tolist())
    """)
    for shared in ("0", "1"):
        env = {"EMBER_CACHE_DIR": str(tmp_path), "EMBER_CPU_SHARED_LIBRARIES": shared}
        r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                           timeout=120, env={**__import__("os").environ, **env})
        assert r.returncode == 0, r.stderr
        want = np.maximum(np.exp(np.arange(5, dtype=np.float32)), 2.0).tolist()
        np.testing.assert_allclose(eval(r.stdout), want, rtol=1e-6)  # noqa: S307 - its list


def test_single_call_runner_of_a_small_program():
    def f(a, b):
        return a * b + 1.0, (a - b).sum()

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    exe = get_backend("cpu").compile(optimized(f, a, b))
    for args in ((a, b), (a, b), (a, b.T.copy().T), (a.T.copy().T, np.asfortranarray(b))):
        product, total = exe.execute_exact(list(args))
        np.testing.assert_allclose(product, args[0] * args[1] + 1.0, rtol=1e-6)
        np.testing.assert_allclose(total, (args[0] - args[1]).sum(), rtol=1e-5)
        assert not product.flags.writeable
    if exe._entry is not None:
        assert exe._runner is not None
    assert ember.jit(f)(a, b)[1] == pytest.approx(float((a - b).sum()), rel=1e-5)
