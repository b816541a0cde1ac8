"""Batched dots of many small matrices (attention's scores and values) run their matrices on
threads, one single-threaded BLAS call each, rather than one ``matmul`` whose BLAS threads
split every small product: native ``gemm`` tasks on the parallel runtime, or ember's
Python-side threads where an operand is a library call's result
(``executable._batch_across_threads``). The products must be the very bits of NumPy's
``matmul`` on the same parts of the same matrices with one BLAS thread, whatever the number of
ember's threads. Where BLAS rounds a part of a matrix as it rounds the whole, whatever its
thread count (OpenBLAS's SkylakeX kernels), those are the bits of NumPy's ``matmul`` of the
batch; some kernels round a split differently (OpenBLAS's Haswell ones on a Zen 5 CPU).

These are BLAS's paths: the products here stay with BLAS (``EMBER_CPU_GEMM=blas``); ember's
own ``gemm``, whose bits do not depend on the cut at all, is tested in
``test_native_gemm.py``."""

import itertools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import _blas_threads
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu import gemm_kernel

rng = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def _blas_products(monkeypatch):
    monkeypatch.setenv(gemm_kernel.GEMM_ENV, "blas")


def _data(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("batch, m, k, n", [(32, 256, 64, 256), (32, 256, 256, 64),
                                            (7, 100, 33, 65), (64, 16, 16, 8),
                                            (3, 512, 128, 512)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_products_are_numpys_bits(batch, m, k, n, dtype, monkeypatch):
    # (no stall guard's hold on one thread: NumPy's ``matmul`` below runs on BLAS's threads)
    monkeypatch.setattr(_blas_threads.blas_stall_guard, "_single_until", 0.0)
    a, b = _data(batch, m, k, dtype=dtype), _data(batch, k, n, dtype=dtype)
    f = ember.jit(jnp.matmul)
    got = np.asarray(f(a, b))
    a, b = a.astype(got.dtype), b.astype(got.dtype)
    (dot,) = [s[0] for s in f.lower(a, b).compile()._executable.executable._steps]
    # (native ``gemm`` tasks, or NumPy's ``matmul`` for products too large for them)
    want = np.matmul(a, b) if dot.gemm is None else _task_products(a, b)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, np.matmul(a.astype(np.float64), b.astype(np.float64)),
                               rtol=1e-4, atol=1e-4 if got.dtype == np.float32 else 1e-12)


def _task_products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A batch's products as ember's native ``gemm`` tasks compute them, by NumPy: the
    batch's units of ``GEMM_TASK_UNIT`` rows (or columns, where there are more columns) cut
    into consecutive tasks by the shape alone (``executable.gemm_split``), one BLAS call on
    one thread for each task's part of each matrix. NumPy's ``matmul`` of the batch where
    BLAS rounds a block of a matrix as it rounds the whole."""
    batch, m, k, n = *a.shape, b.shape[2]
    # (a gemm layout as ``program.gemm_layout`` makes it: m, n, k at 3-5, the batch at 8)
    by_rows, units, tasks = cpu_exe.gemm_split(("s", False, False, m, n, k, k, n, batch, ()))
    per_matrix = units // batch
    out = np.empty((batch, m, n), a.dtype)
    with _blas_threads.one_blas_thread:
        for t in range(tasks):
            lo, hi = t * units // tasks, (t + 1) * units // tasks
            for u in range(lo, hi):
                if u == lo or u % per_matrix == 0:  # (a task's part of one matrix)
                    i, first = divmod(u, per_matrix)
                    last = min(hi - i * per_matrix, per_matrix)
                    rows = slice(first * cpu_exe.GEMM_TASK_UNIT, last * cpu_exe.GEMM_TASK_UNIT)
                    if by_rows:
                        np.matmul(a[i, rows], b[i], out=out[i, rows])
                    else:
                        np.matmul(a[i], b[i, :, rows], out=out[i, :, rows])
    return out


def _one_thread_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with _blas_threads.one_blas_thread:
        return np.matmul(a, b)


def test_attention_shapes_run_native_gemm_tasks_on_threads(monkeypatch):
    calls = []
    monkeypatch.setattr(cpu_exe, "_batch_across_threads", lambda *a: calls.append(a))
    q, k = _data(4, 8, 256, 64), _data(4, 8, 256, 64)
    f = ember.jit(lambda q, k: jnp.einsum("bhqd,bhkd->bhqk", q, k) * 1.5)
    got = np.asarray(f(q, k))
    want = _task_products(q.reshape(32, 256, 64),
                          np.swapaxes(k, -1, -2).reshape(32, 64, 256)) * np.float32(1.5)
    np.testing.assert_array_equal(got, want.reshape(4, 8, 256, 256))
    assert calls == []  # (the batch lies as gemm reads it: native tasks, not NumPy)
    steps = f.lower(q, k).compile()._executable.executable._steps
    plans = [s[1] for s in steps if type(s) is tuple and type(s[1]) is cpu_exe._GemmTasks]
    assert len(plans) == 1 and plans[0].tasks > 1 and plans[0].threaded


def test_batch_dims_not_leading_run_native_gemm_tasks_with_numpys_bits(monkeypatch):
    calls = []
    monkeypatch.setattr(cpu_exe, "_batch_across_threads", lambda *a: calls.append(a))
    q, k = _data(256, 32, 64), _data(256, 32, 64)  # (batch dim 1: its rows 32 * 64 apart)
    dims = (((2,), (2,)), ((1,), (1,)))
    f = ember.jit(lambda q, k: ember.lax.dot_general(q, k, dims) * 1.5)
    got = np.asarray(f(q, k))
    want = _task_products(q.transpose(1, 0, 2), k.transpose(1, 2, 0)) * np.float32(1.5)
    np.testing.assert_array_equal(got, want)
    assert calls == []
    steps = f.lower(q, k).compile()._executable.executable._steps
    plans = [s[1] for s in steps if type(s) is tuple and type(s[1]) is cpu_exe._GemmTasks]
    assert len(plans) == 1 and plans[0].tasks > 1


def test_batch_of_library_results_splits_the_batch_and_matches_numpy(monkeypatch):
    calls = []
    real = cpu_exe._batch_across_threads

    def spy(lhs, rhs, out):
        calls.append(lhs.shape)
        real(lhs, rhs, out)
    monkeypatch.setattr(cpu_exe, "_batch_across_threads", spy)
    q, k = _data(256, 32, 64), _data(256, 32, 64)
    dims = (((2,), (2,)), ((1,), (1,)))  # (a sort's result lives in Python: no native gemm)
    got = np.asarray(ember.jit(
        lambda q, k: ember.lax.dot_general(jnp.sort(q, axis=2), k, dims) * 1.5)(q, k))
    # (one BLAS call on one thread for each matrix)
    want = _one_thread_matmul(np.sort(q, axis=2).transpose(1, 0, 2), k.transpose(1, 2, 0))
    np.testing.assert_array_equal(got, want * np.float32(1.5))
    if cpu_exe.threads.pool().size > 1:
        assert calls == [(32, 256, 64)]


def test_split_rule():
    size = cpu_exe.threads.pool().size
    small = 256 * 64 * 256
    if size == 1:
        assert not cpu_exe._split_batch(32, small)
        return
    assert cpu_exe._split_batch(32, small)
    assert not cpu_exe._split_batch(size - 1, small)  # (fewer matrices than threads)
    assert not cpu_exe._split_batch(4, 128 * 784 * 512)  # (BLAS's threads do better)
    assert not cpu_exe._split_batch(512, 64)  # (too little work to wake threads)


def test_split_matches_one_call_for_odd_batches_and_layouts():
    for batch, m, k, n in itertools.product([2, 3, 9], [1, 37], [5, 64], [1, 40]):
        a = _data(batch, m, k)
        b = np.swapaxes(_data(batch, n, k), 1, 2)  # (a transposed view: BLAS's flag)
        out = np.empty((batch, m, n), np.float32)
        cpu_exe._batch_across_threads(a, b, out)
        np.testing.assert_array_equal(out, np.matmul(a, b))


def _blas_thread_count() -> int:
    """OpenBLAS's thread count now (read by setting it and setting it back)."""
    setter = _blas_threads.setter()
    if setter is None:
        pytest.skip("the process's BLAS has no OpenBLAS thread-count setter")
    count = setter(1)
    setter(count)
    return count


def test_split_batches_leave_blas_thread_count_as_it_was():
    # (the count is process-wide in OpenBLAS's pthreads builds: a set and restore per
    # thread once left it at one, and every later large product ran on one core)
    before = _blas_thread_count()
    f = ember.jit(jnp.matmul)
    a, b = _data(32, 128, 64), _data(32, 64, 128)
    for _ in range(40):
        f(a, b).block_until_ready()
    assert _blas_thread_count() == before


def test_one_blas_thread_holds_for_overlapping_threads():
    import threading
    before = _blas_thread_count()
    setter = _blas_threads.setter()
    inside = []
    start = threading.Barrier(4)

    def worker(k):
        start.wait()
        for _ in range(50):
            with _blas_threads.one_blas_thread:
                count = setter(1)  # (the count while any thread is inside)
                inside.append(count)
    workers = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert set(inside) == {1}
    assert _blas_thread_count() == before


def test_native_gemm_tasks_leave_blas_thread_count_as_it_was():
    from ember import lax
    before = _blas_thread_count()
    w = _data(256, 256) * np.float32(0.05)

    def loop(h):
        return lax.fori_loop(0, 8, lambda i, h: jnp.tanh(h @ w), h)
    h = _data(256, 256)
    f = ember.jit(loop)
    want = h
    for _ in range(8):
        want = np.tanh(want @ w)
    for _ in range(5):
        np.testing.assert_allclose(np.asarray(f(h)), want, rtol=2e-5, atol=2e-6)
    assert _blas_thread_count() == before


def test_convolutions_leave_blas_thread_count_as_it_was():
    from ember import lax
    before = _blas_thread_count()
    x, k = _data(8, 28, 28, 64), _data(3, 3, 64, 64) * np.float32(0.05)
    f = ember.jit(lambda x, k: lax.conv_general_dilated(
        x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    for _ in range(20):
        f(x, k).block_until_ready()
    assert _blas_thread_count() == before


def test_a_convolutions_single_part_runs_blas_on_its_thread():
    # (its chunk GEMMs are small: OpenBLAS's threads synchronizing on each cost a CNN step
    # half again its time)
    from ember.lax import convolution
    before = _blas_thread_count()
    inside = []
    convolution._in_threads(lambda i: inside.append(_blas_threads.setter()(1)), 1)
    assert inside == [1]
    assert _blas_thread_count() == before


def test_stall_guard_tries_one_thread_after_stalls_and_keeps_what_is_faster(monkeypatch):
    # A threaded product of MIN_SECONDS or more whose process got less than BUSY_FRACTION
    # of threads x wall time of CPU stalled. Two stalls within STALL_WINDOW_SECONDS start a
    # trial hold on one thread; then threaded calls of shapes seen in the hold decide: one
    # slower than one thread -> a hold twice as long; two faster -> threads, no trial for a
    # while.
    guard = _blas_threads.StallGuard(threads=2)
    wall, cpu = [0.0], [0.0]
    monkeypatch.setattr(_blas_threads.time, "perf_counter", lambda: wall[0])
    monkeypatch.setattr(_blas_threads.time, "process_time", lambda: cpu[0])
    single = []

    def run(seconds, cpu_seconds=None, key="shape"):
        def call():
            single.append(_blas_threads.one_blas_thread._depth > 0)
            wall[0] += seconds
            cpu[0] += 2 * seconds if cpu_seconds is None else cpu_seconds
        guard.run(key, call)
        return single[-1]

    assert not run(0.002)  # both threads busy throughout
    assert not run(0.0009, 0.0001)  # too short to judge
    assert not run(0.003, 0.0037)  # 62% of 2 x wall: no stall
    assert not run(0.003, 0.0035)  # 58%: a stall, alone
    wall[0] += 0.2
    assert not run(0.003, 0.0035) and guard.stalls == 2  # 0.2 s later: alone again
    assert not run(0.01, 0.001)  # a second within the window: a trial hold ...
    assert run(0.004) and run(0.003) and run(0.001, key="other")  # ... of 0.5 s
    assert guard.stalls == 3
    wall[0] += 0.5
    assert not run(0.001, key="new")  # (a shape not seen in the hold decides nothing)
    assert not run(0.02, 0.001)  # 20 ms > 3 ms on one thread: hold again, for 1 s
    assert run(0.003) and run(0.002, key="other") and guard._hold == 1.0
    wall[0] += 1.0
    assert not run(0.002) and not run(0.0015, key="other")  # both faster: threads again
    assert not run(0.01, 0.001) and not run(0.01, 0.001)  # stalls, but no trial for 2 s
    assert guard.stalls == 5
    wall[0] += 2.0
    assert not run(0.01, 0.001) and not run(0.01, 0.001)  # a trial again
    assert run(0.004)
    wall[0] += 0.5
    assert not run(0.002) and not run(0.002)  # threads win again: the next wait is 4 s
    assert guard._no_trial_until == wall[0] + 4.0
    # a call no slower than SLOWDOWN x its key's fastest is no stall, whatever its CPU time
    # (the CPU clock counts other cores' threads at ticks: a whole program's call of 2 ms
    # may read as one thread's time)
    guard = _blas_threads.StallGuard(threads=2)
    assert not run(0.002, key="program")
    assert not run(0.0039, 0.0039, key="program") and guard.stalls == 0
    assert not run(0.004, 0.004, key="program") and guard.stalls == 1
    one_thread = _blas_threads.StallGuard(threads=1)  # one BLAS thread: nothing to judge
    one_thread.run("shape", lambda: wall.__setitem__(0, wall[0] + 0.01))
    assert one_thread.stalls == 0


def test_guarded_products_are_numpys_bits_held_or_not(monkeypatch):
    guard = _blas_threads.blas_stall_guard
    seen, real = [], guard.run
    monkeypatch.setattr(guard, "run", lambda key, call: (seen.append(key), real(key, call)))
    a, b = _data(300, 200), _data(200, 100)
    f = ember.jit(jnp.matmul)
    monkeypatch.setattr(guard, "_single_until", 0.0)  # (not held, whatever came before)
    np.testing.assert_array_equal(f(a, b), np.matmul(a, b))
    # (held on one thread: NumPy's bits on one thread, which some BLAS kernels round
    # differently from a product split over threads: OpenBLAS's Haswell ones on a Zen 5 CPU)
    monkeypatch.setattr(guard, "_single_until", float("inf"))
    np.testing.assert_array_equal(f(a, b), _one_thread_matmul(a, b))
    # (one CBLAS call on BLAS's threads in the program's native steps, judged as one call)
    exe = f.lower(a, b).compile()._executable.executable
    assert exe._steps_whole and seen == [(exe.program.entry_name, "steps")] * 2
    # a batch of products too large for tasks goes through NumPy's matmul, guarded
    a3, b3 = np.stack([a] * 2), np.stack([_data(200, 200)] * 2)
    assert 300 * 200 * 200 > cpu_exe.BATCH_SPLIT_MAX_WORK
    seen.clear()
    monkeypatch.setattr(cpu_exe, "BATCH_SPLIT_MIN_WORK", 1 << 40)  # (not split across threads)
    monkeypatch.setattr(guard, "_single_until", 0.0)
    g = ember.jit(lambda x, y: jnp.matmul(x, y) * 1.0)
    np.testing.assert_array_equal(g(a3, b3), np.matmul(a3, b3))
    assert seen == [(2, 300, 200, 200, np.float32)]


def test_blas_thread_count_is_the_count_outside_one_blas_thread():
    count = _blas_threads.blas_thread_count()
    if count is None:
        pytest.skip("the process's BLAS is not OpenBLAS")
    assert count >= 1
    with _blas_threads.one_blas_thread:
        assert _blas_threads.blas_thread_count() == count
    assert _blas_threads.blas_thread_count() == count


def test_kernels_after_a_blas_threaded_dot_need_more_work_for_threads():
    # (OpenBLAS's workers spin after a call: a small kernel after one runs on one thread)
    x, w, b = _data(128, 784), _data(784, 512), _data(512)
    f = ember.jit(lambda x, w, b: (jnp.tanh(x @ w + b), jnp.tanh(b * 2.0) + 1.0))
    h, y = (np.asarray(v) for v in f(x, w, b))
    np.testing.assert_allclose(h, np.tanh(x @ w + b), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y, np.tanh(b * 2) + 1, rtol=1e-6, atol=1e-6)
    steps = f.lower(x, w, b).compile()._executable.executable._steps
    kernels = [s for s in steps if type(s) is cpu_exe._Kernel]
    big = [k for k in kernels if k.step.work == 128 * 512]
    assert big and cpu_exe.PARALLEL_MIN_WORK <= 128 * 512 < cpu_exe.AFTER_BLAS_MIN_WORK
    assert not any(k.parallel for k in big)
    # the same kernel without a dot before it keeps its threads
    g = ember.jit(lambda h: jnp.tanh(h * 2.0 + 1.0))
    alone = [s for s in g.lower(h).compile()._executable.executable._steps
             if type(s) is cpu_exe._Kernel]
    assert [k.parallel for k in alone] == [True]
    np.testing.assert_allclose(np.asarray(g(h)), np.tanh(h * 2 + 1), rtol=1e-6, atol=1e-6)
