"""Programs too large for one call on the calling thread run as one call of their native
steps function (``program._emit_entry``): kernels with enough work on the parallel runtime,
a large product as one CBLAS call on BLAS's threads (``executable.whole_gemm``), no Python
between the steps. The steps function follows the rules the executable steps by from Python
(``CpuExecutable._prepare``), so both give the very same bits."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import _blas_threads, lax
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu import gemm_kernel, parallel_runtime
from tests.backends.cpu.helpers import cpu_executable as _executable
from tests.backends.cpu.helpers import replanned

rng = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _blas_products(monkeypatch):
    # (the products here stay with BLAS, whose paths this file checks; ember's own gemm
    # is ``test_native_gemm.py``'s)
    monkeypatch.setenv(gemm_kernel.GEMM_ENV, "blas")


def _data(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


@pytest.fixture(autouse=True)
def _no_stall_holds(monkeypatch):
    # (a product run on one BLAS thread while the stall guard holds can round differently
    # from one on BLAS's threads: OpenBLAS's (128, 784) @ (784, 512) does)
    monkeypatch.setattr(_blas_threads.blas_stall_guard, "run", lambda key, call: call())


def _stepped_from_python(exe):
    """The same program and native code, its steps run from Python."""
    python = replanned(exe, native_call=None)
    assert python._steps_fn is None and python._entry is None
    return python


def _mlp_step(params, x, y):
    def loss(params):
        h = x
        for w, b in params[:-1]:
            h = jnp.maximum(h @ w + b, 0.0)
        w, b = params[-1]
        logits = h @ w + b
        logits = logits - logits.max(axis=1, keepdims=True)
        logp = logits - jnp.log(jnp.exp(logits).sum(axis=1, keepdims=True))
        return -(logp * y).sum(axis=1).mean()
    value, grads = ember.value_and_grad(loss)(params)
    return value, ember.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)


def _mlp_data(dtype=np.float32):
    sizes = [(784, 512), (512, 512), (512, 10)]
    params = [(_data(i, o, dtype=dtype) * 0.05, _data(o, dtype=dtype) * 0.1) for i, o in sizes]
    x = _data(128, 784, dtype=dtype)
    y = np.eye(10, dtype=dtype)[rng.integers(0, 10, 128)]
    return params, x, y


def _flat(values):
    return [np.asarray(v) for v in ember.tree_util.tree_leaves(values)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_train_step_runs_as_one_native_call_with_pythons_bits(dtype, monkeypatch):
    params, x, y = _mlp_data(dtype)
    with ember.enable_x64(dtype == np.float64):
        exe = _executable(_mlp_step, params, x, y)
        assert exe._steps_fn is not None and exe._steps_whole and exe._entry is None
        args = [*_flat(params), x, y]
        python = _stepped_from_python(exe)
        calls = []
        monkeypatch.setattr(python, "_run_steps",
                            lambda *a: (calls.append(1), cpu_exe.CpuExecutable._run_steps(
                                python, *a))[1])
        for _ in range(2):  # (the second run: kernels after BLAS's threads, warm runtime)
            got, want = exe.execute(args), python.execute(args)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
        assert calls == [1, 1]
    # and the values are the train step's (float64 NumPy reference)
    p64 = [(w.astype(np.float64), b.astype(np.float64)) for w, b in params]
    h = x.astype(np.float64)
    for w, b in p64[:-1]:
        h = np.maximum(h @ w + b, 0.0)
    logits = h @ p64[-1][0] + p64[-1][1]
    logits -= logits.max(axis=1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got[0], -(logp * y).sum(axis=1).mean(), rtol=tol)


def test_kernels_alone_run_as_one_native_call_with_pythons_bits():
    # (a softmax over (1024, 1024): row reductions, no partial results; no product)
    x = _data(1024, 1024)
    exe = _executable(lambda x: ember.nn.softmax(x * 2.0, axis=-1), x)
    assert exe._steps_fn is not None and not exe._steps_whole
    got, = exe.execute([x])
    want, = _stepped_from_python(exe).execute([x])
    np.testing.assert_array_equal(got, want)
    e = np.exp(2.0 * x.astype(np.float64) - 2.0 * x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=-1, keepdims=True), rtol=2e-6, atol=1e-9)


def test_a_large_product_in_a_case_branch_runs_on_blas_threads():
    a, b = _data(256, 300), _data(300, 200)

    def f(i, a, b):
        return lax.switch(i, [lambda a, b: jnp.tanh(a @ b),
                              lambda a, b: (a * 2.0) @ b + 1.0], a, b)
    exe = _executable(f, np.int32(0), a, b)
    assert exe._steps_fn is not None and exe._steps_whole
    python = _stepped_from_python(exe)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    for i, want in ((0, np.tanh(a64 @ b64)), (1, 2.0 * a64 @ b64 + 1.0), (5, None)):
        got, = exe.execute([np.int32(i), a, b])
        np.testing.assert_array_equal(got, python.execute([np.int32(i), a, b])[0])
        if want is None:  # (out of range: the last branch, as StableHLO says)
            want = 2.0 * a64 @ b64 + 1.0
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("n", [128, 256])
def test_a_loops_products_run_on_blas_threads_or_as_tasks_on_one(n, monkeypatch):
    # (256, 256) products are worth BLAS's threads (whole_gemm), in a loop as outside: the
    # steps run without ``one_blas_thread``. (64, 128) @ (128, 128) ones are not: they are
    # tasks on the parallel runtime, each on one BLAS thread, the program under the region.
    # (A (400, 400) elementwise output makes either program too large for one call.)
    w, h0 = _data(n, n) * np.float32(0.8 / np.sqrt(n)), _data(64 if n == 128 else n, n)
    big = _data(400, 400)

    def f(w, h, big):
        return lax.fori_loop(0, 4, lambda i, h: jnp.tanh(h @ w), h) * 2.0, big * 3.0
    exe = _executable(f, w, h0, big)
    whole = n == 256
    assert exe._steps_fn is not None and exe._steps_whole == whole and exe._blas_tasks
    counts = []
    real = _blas_threads.one_blas_thread.__enter__
    monkeypatch.setattr(type(_blas_threads.one_blas_thread), "__enter__",
                        lambda self: (counts.append(_blas_threads.blas_thread_count()),
                                      real())[1])
    got, tripled = exe.execute([w, h0, big])
    assert bool(counts) != whole  # (the call ran inside the region, or not at all)
    want = h0.astype(np.float64)
    for _ in range(4):
        want = np.tanh(want @ w)
    np.testing.assert_allclose(got, 2.0 * want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(tripled, big * np.float32(3.0))
    # the same bits stepped from Python (its loop native, or in Python)
    python = _stepped_from_python(exe)
    np.testing.assert_array_equal(python.execute([w, h0, big])[0], got)


def test_which_programs_run_as_one_native_call():
    x = _data(2000, 1000)
    # a full sum writes partial results over several ranges, combined in Python
    assert _executable(lambda x: jnp.tanh(x).sum(), x)._steps_fn is None
    # a large product with a batch whose tasks run on the runtime, one BLAS thread each
    q, k, a, b = _data(32, 128, 64), _data(32, 128, 64), _data(256, 300), _data(300, 200)
    mixed = _executable(lambda q, k, a, b: (jnp.einsum("bqd,bkd->bqk", q, k) * 1.5, a @ b),
                        q, k, a, b)
    assert mixed._steps_fn is None and mixed.program.has_entry
    got = mixed.execute([q, k, a, b])
    np.testing.assert_allclose(got[1], a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
    # the batch alone does run as one call (under ``one_blas_thread``)
    alone = _executable(lambda q, k: jnp.einsum("bqd,bkd->bqk", q, k) * 1.5, q, k)
    assert alone._steps_fn is not None and not alone._steps_whole


def test_while_the_runtime_is_not_ready_the_steps_run_from_python(monkeypatch):
    a, b = _data(256, 300), _data(300, 200)
    exe = _executable(lambda a, b: jnp.tanh(a @ b) * 2.0, a, b)
    assert exe._steps_fn is not None
    want, = exe.execute([a, b])
    monkeypatch.setattr(parallel_runtime, "ready", lambda: None)
    stepped = []
    real = cpu_exe.CpuExecutable._run_steps
    monkeypatch.setattr(cpu_exe.CpuExecutable, "_run_steps",
                        lambda *a: (stepped.append(1), real(*a))[1])
    got, = exe.execute([a, b])
    assert stepped == [1]
    np.testing.assert_array_equal(got, want)


def test_python_stepped_program_whose_products_all_take_blas_threads():
    # A full reduction's partial results step the program from Python (no entry or steps
    # function), and every product is a whole_gemm run through cffi: the native code calls
    # no BLAS routine, so there is no global to bind (this failed to compile).
    x, a, b = _data(256, 512), _data(512, 512) * 0.05, _data(512, 512) * 0.05
    f = lambda x, a, b: jnp.sum(jnp.tanh(x @ a) @ b)  # noqa: E731
    exe = _executable(f, x, a, b)
    dots = [s for s in exe.program.steps if type(s) is cpu_exe.DotPlan]
    assert exe.program.native_call is None and all(cpu_exe.whole_gemm(d.gemm) for d in dots)
    want = np.sum(np.tanh(x.astype(np.float64) @ a) @ b)
    np.testing.assert_allclose(float(ember.jit(f)(x, a, b)), want, rtol=1e-4)
