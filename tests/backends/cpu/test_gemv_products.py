"""Products with one output row or column (matrix-vector, vector-matrix) of at least
``GEMV_MIN_PRODUCTS`` call CBLAS ``gemv`` (``executable.blas_routine``, ``gemv_arguments``):
OpenBLAS's ``gemm`` packs the matrix first. Every layout (transposed operands, vector on
either side, batches, loops), as one call on BLAS's threads and as tasks, native and stepped
from Python, against float64 NumPy."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import _blas_threads, lax
from ember.backends.cpu import executable as cpu_exe
from tests.backends.cpu.helpers import cpu_executable as _executable
from tests.backends.cpu.helpers import native_dots, replanned

rng = np.random.default_rng(23)


@pytest.fixture(autouse=True)
def _no_stall_holds(monkeypatch):
    monkeypatch.setattr(_blas_threads.blas_stall_guard, "run", lambda key, call: call())


def _data(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _stepped_from_python(exe):
    return replanned(exe, native_call=None)


def _close(got, want, k):
    want = np.asarray(want, np.float64)
    tol = 1e-5 * np.sqrt(k) * (np.abs(want).max() + 1)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=0, atol=tol)


# (name, function, operand shapes): one output column, one output row, transposed matrices,
# vectors as (k, 1) and (1, k) matrices, transposed too. (Smaller products, and dots of two
# vectors, are kernels.)
LAYOUTS = [
    ("A @ v", lambda a, v: a @ v, lambda m, k: [(m, k), (k,)]),
    ("v @ A", lambda v, a: v @ a, lambda m, k: [(k,), (k, m)]),
    ("A.T @ v", lambda a, v: a.T @ v, lambda m, k: [(k, m), (k,)]),
    ("v @ A.T", lambda v, a: v @ a.T, lambda m, k: [(k,), (m, k)]),
    ("A @ col", lambda a, c: a @ c, lambda m, k: [(m, k), (k, 1)]),
    ("row @ A", lambda r, a: r @ a, lambda m, k: [(1, k), (k, m)]),
    ("row.T.T @ A.T", lambda r, a: r @ a.T, lambda m, k: [(1, k), (m, k)]),
    ("col.T @ A", lambda c, a: c.T @ a, lambda m, k: [(k, 1), (k, m)]),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,k", [(700, 600), (33, 5000)])  # (BLAS's threads; a task)
@pytest.mark.parametrize("name,f,shapes", LAYOUTS, ids=[n for n, _, _ in LAYOUTS])
def test_one_row_or_column_products_call_gemv(name, f, shapes, m, k, dtype):
    args = [_data(*s, dtype=dtype) for s in shapes(m, k)]
    with ember.enable_x64(dtype == np.float64):
        exe = _executable(f, *args)
        (dot,) = native_dots(exe)
        assert cpu_exe.blas_routine(dot.gemm) == ("s" if dtype == np.float32 else "d") + "gemv"
        want = f(*(a.astype(np.float64) for a in args))
        native = np.asarray(ember.jit(f)(*args))
        _close(native, want, k)
        assert native.dtype == dtype
        # (the Python path makes the same calls: the same bits)
        python = _stepped_from_python(exe)
        (stepped,) = python.execute([ember.device_put(a) for a in args])
        np.testing.assert_array_equal(np.asarray(stepped), native)


def test_large_matvec_is_one_call_on_blas_threads_and_small_one_is_a_task():
    big = _executable(lambda a, v: a @ v, _data(1000, 1000), _data(1000))
    (dot,) = native_dots(big)
    assert cpu_exe.whole_gemm(dot.gemm)  # (more than SINGLE_THREAD_GEMV_MAX_PRODUCTS)
    assert not cpu_exe.whole_gemm(("s", False, False, 1000, 1, 200, 200, 1, 1, ()))
    assert not cpu_exe.whole_gemm(("s", False, False, 100, 100, 100, 100, 100, 1, ()))  # (gemm)
    small = _executable(lambda a, v: a @ v, _data(400, 400), _data(400))
    (dot,) = native_dots(small)
    assert not cpu_exe.whole_gemm(dot.gemm) and small.program.native_call == "entry"


def test_batched_matvecs():
    a, v = _data(8, 1000, 256), _data(8, 256)
    f = lambda a, v: jnp.einsum("bij,bj->bi", a, v)  # noqa: E731
    (dot,) = native_dots(_executable(f, a, v))
    assert dot.gemm[8] == 8 and cpu_exe.blas_routine(dot.gemm) == "sgemv"
    _close(ember.jit(f)(a, v), np.einsum("bij,bj->bi", a.astype(np.float64), v), 256)


@pytest.mark.parametrize("n,k", [(512, 512), (1000, 512)])  # (one call; steps with threads)
@pytest.mark.parametrize("side", ["row", "transposed column"])
def test_matvecs_in_native_loops(side, n, k):
    w = _data(k, n) * (1 / np.sqrt(k))
    h0 = _data(1, k) if side == "row" else _data(k)

    def step(m, h, w):  # (a row vector times w, or w's transpose times a vector)
        return m.tanh(h @ w)[:, :k] if side == "row" else m.tanh(w.T @ h)[:k]

    wj = jnp.asarray(w)
    loop = lambda h: lax.fori_loop(0, 5, lambda i, h: step(jnp, h, wj), h)  # noqa: E731
    exe = _executable(loop, h0)
    assert any(cpu_exe.blas_routine(d.gemm) == "sgemv" for d in native_dots(exe))
    h = h0.astype(np.float64)
    for _ in range(5):
        h = step(np, h, w.astype(np.float64))
    _close(ember.jit(loop)(h0), h, k)


def test_small_products_with_one_row_stay_gemm_calls():
    # (below GEMV_MIN_PRODUCTS, OpenBLAS's small-matrix gemm was the faster call)
    exe = _executable(lambda x, w: jnp.tanh(x @ w) @ w, _data(1, 256), _data(256, 256))
    assert [cpu_exe.blas_routine(d.gemm) for d in native_dots(exe)] == ["sgemm", "sgemm"]
    assert cpu_exe.blas_routine(("s", False, False, 1, 512, 256, 256, 512, 1, ())) == "sgemv"


def test_gemv_arguments_place_the_matrix_and_the_shares():
    # one column: the lhs is the matrix, M x N its rows x k (or k x rows transposed)
    assert cpu_exe.gemv_arguments(("s", False, False, 40, 1, 7, 7, 1, 1, ()), 40, 1) == (
        0, cpu_exe.CBLAS_NO_TRANS, 40, 7, 7, 1)
    assert cpu_exe.gemv_arguments(("s", True, False, 40, 1, 7, 40, 1, 1, ()), 16, 1) == (
        0, cpu_exe.CBLAS_TRANS, 7, 16, 40, 1)
    # one row: the rhs is the matrix, read transposed unless it lies transposed
    assert cpu_exe.gemv_arguments(("d", False, False, 1, 30, 7, 7, 30, 1, ()), 1, 30) == (
        1, cpu_exe.CBLAS_TRANS, 7, 30, 30, 1)
    assert cpu_exe.gemv_arguments(("d", False, True, 1, 30, 7, 7, 7, 1, ()), 1, 8) == (
        1, cpu_exe.CBLAS_NO_TRANS, 8, 7, 7, 1)
    # vectors strided by a batch dim: a column of a matrix, ``ld`` apart
    assert cpu_exe.gemv_arguments(
        ("s", True, False, 1, 30, 7, 3, 30, 3, ((3, 1, 210),)), 1, 30) == (
            1, cpu_exe.CBLAS_TRANS, 7, 30, 30, 3)
    assert cpu_exe.gemv_arguments(
        ("s", False, False, 40, 1, 7, 7, 5, 5, ((5, 280, 1),)), 40, 1) == (
            0, cpu_exe.CBLAS_NO_TRANS, 40, 7, 7, 5)
    assert cpu_exe.blas_routine(("s", False, False, 2, 2, 7, 7, 2, 1, ())) == "sgemm"
