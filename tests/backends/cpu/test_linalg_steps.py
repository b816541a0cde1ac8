"""Small LU and Cholesky factorizations and left-side triangular solves are kernels of the
program (``linalg_steps``), not library calls: against LAPACK's results (the eager
primitives) and float64 NumPy, with NaN, singular and indefinite matrices; a loop holding
them runs natively."""

import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.numpy as jnp
import ember.scipy.linalg
from ember import _blas_threads, lax
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu import gemm_kernel
from ember.lax import _lapack
from tests.backends.cpu.helpers import cpu_executable

rng = np.random.default_rng(17)


def _kinds(exe):
    return [type(s).__name__ for s in cpu_exe.nested_steps(exe.program.steps)]


def _lu(x):
    return lax.linalg.lu(x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch,n", [((), 1), ((), 3), ((), 16), ((3,), 8), ((2, 5), 4),
                                     ((20,), 12), ((40,), 4),  # (16 lanes)
                                     # past small_linalg_kernel.MAX_DIM: run-time sides
                                     ((), 17), ((2,), 40), ((), 64)])
def test_lu_kernel_matches_lapack(batch, n, dtype):
    x = rng.standard_normal(batch + (n, n)).astype(dtype)
    with ember.enable_x64(dtype == np.float64):
        exe = cpu_executable(_lu, x)
        assert "LibraryPlan" not in _kinds(exe)
        got = [np.asarray(v) for v in ember.jit(_lu)(x)]
        want = [np.asarray(v) for v in _lu(x)]  # (eager: LAPACK, or the batched library)
    np.testing.assert_array_equal(got[1], want[1])  # pivots
    np.testing.assert_array_equal(got[2], want[2])  # permutation
    tol = 50 * np.finfo(dtype).eps * n
    np.testing.assert_allclose(got[0], want[0], rtol=tol, atol=tol)
    # P A = L U, in float64
    lower = np.tril(got[0].astype(np.float64), -1) + np.eye(n)
    upper = np.triu(got[0].astype(np.float64))
    flat = x.reshape((-1, n, n)).astype(np.float64)
    for k, perm in enumerate(got[2].reshape((-1, n))):
        np.testing.assert_allclose((lower.reshape((-1, n, n))[k] @ upper.reshape((-1, n, n))[k]),
                                   flat[k][perm], rtol=0, atol=tol * 10)


def test_lu_of_singular_matrices_follows_lapack():
    singular = np.array([[0, 1, 2], [0, 3, 4], [0, 5, 6]], np.float32)  # (a zero pivot)
    for x in (singular, np.zeros((4, 4), np.float32), np.ones((5, 5), np.float32)):
        got = [np.asarray(v) for v in ember.jit(_lu)(x)]
        want = [np.asarray(v) for v in _lu(x)]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_a_matrix_with_nans_solves_to_nans():
    # (its pivots are the batched kernels' (the first NaN of a column), which OpenBLAS's
    # vectorized search need not pick: either way the solution is all NaN)
    x = np.array([[1, 2, 3], [np.nan, 1, 1], [5, np.nan, 2]], np.float32)
    b = np.ones((3, 2), np.float32)
    assert np.isnan(np.asarray(ember.jit(jnp.linalg.solve)(x, b))).all()
    assert np.isnan(np.asarray(jnp.linalg.solve(x, b))).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lower,transpose_a,unit", list(itertools.product([True, False],
                                                                          repeat=3)))
@pytest.mark.parametrize("n", [7, 50])
def test_left_triangular_solves_match_numpy(lower, transpose_a, unit, dtype, n):
    cols = 3  # (off the diagonal ~1/sqrt(n): unit triangles of 50 stay well conditioned)
    a = (rng.standard_normal((2, n, n)) * (2.6 / np.sqrt(n)) + 4 * np.eye(n)).astype(dtype)
    b = rng.standard_normal((2, n, cols)).astype(dtype)

    def solve(a, b):
        return lax.linalg.triangular_solve(a, b, left_side=True, lower=lower,
                                           transpose_a=transpose_a, unit_diagonal=unit)
    with ember.enable_x64(dtype == np.float64):
        exe = cpu_executable(solve, a, b)
        assert "LibraryPlan" not in _kinds(exe)
        got = np.asarray(ember.jit(solve)(a, b))
    t = (np.tril(a) if lower else np.triu(a)).astype(np.float64)
    if unit:  # (the diagonal is not read)
        t[:, np.arange(n), np.arange(n)] = 1
    if transpose_a:
        t = np.swapaxes(t, -1, -2)
    want = np.linalg.solve(t, b.astype(np.float64))
    tol = 100 * np.finfo(dtype).eps * (n // 7)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_solve_and_inverse_through_the_kernels():
    a = (rng.standard_normal((16, 16)) + 8 * np.eye(16)).astype(np.float32)
    b = rng.standard_normal((16, 5)).astype(np.float32)
    exe = cpu_executable(jnp.linalg.solve, a, b)
    assert "LibraryPlan" not in _kinds(exe) and exe.program.native_call is not None
    want = np.linalg.solve(a.astype(np.float64), b)
    np.testing.assert_allclose(np.asarray(ember.jit(jnp.linalg.solve)(a, b)), want,
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(ember.jit(jnp.linalg.inv)(a)),
                               np.linalg.inv(a.astype(np.float64)), rtol=1e-4, atol=1e-5)
    # a batch large enough for threads: the same results as one thread computes
    a = (rng.standard_normal((300, 16, 16)) + 8 * np.eye(16)).astype(np.float32)
    b = rng.standard_normal((300, 16, 16)).astype(np.float32)
    got = np.asarray(ember.jit(jnp.linalg.solve)(a, b))
    np.testing.assert_allclose(got, np.linalg.solve(a.astype(np.float64), b),
                               rtol=1e-4, atol=1e-4)


def test_one_program_with_routines_of_several_sides():
    # (an 8 x 8 LU takes the per-side routine, a 32 x 32 one the run-time-side routine:
    # their records sort together; that raised a TypeError comparing 8 with None)
    a = rng.standard_normal((8, 8)).astype(np.float32)
    b = rng.standard_normal((32, 32)).astype(np.float32)
    f = lambda a, b: (jnp.linalg.det(a), jnp.linalg.det(b))  # noqa: E731
    exe = cpu_executable(f, a, b)
    assert "LibraryPlan" not in _kinds(exe) and len(exe.program.routines) == 2
    got = [float(v) for v in ember.jit(f)(a, b)]
    want = [np.linalg.det(m.astype(np.float64)) for m in (a, b)]
    np.testing.assert_allclose(got, want, rtol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [9, 40])
def test_cholesky_kernel(dtype, n):
    m = rng.standard_normal((3, n, n))
    x = (m @ np.swapaxes(m, -1, -2) + n * np.eye(n)).astype(dtype)
    x[1, 0, 0] = -1.0  # (not positive definite: a lower triangle of NaN)
    chol = lambda x: lax.linalg.cholesky(x, symmetrize_input=False)  # noqa: E731
    with ember.enable_x64(dtype == np.float64):
        exe = cpu_executable(chol, x)
        assert "LibraryPlan" not in _kinds(exe)
        got = np.asarray(ember.jit(chol)(x))
        want = np.asarray(chol(x))
    tol = 100 * np.finfo(dtype).eps * (1 + n // 10)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert np.isnan(got[1][np.tril_indices(n)]).all()
    for k in (0, 2):
        np.testing.assert_allclose(np.tril(got[k]).astype(np.float64),
                                   np.linalg.cholesky(x[k].astype(np.float64)),
                                   rtol=tol, atol=tol * 10)
    b = rng.standard_normal((n, 2)).astype(dtype)
    f = lambda a, b: ember.scipy.linalg.cho_solve(ember.scipy.linalg.cho_factor(a), b)  # noqa: E731
    with ember.enable_x64(dtype == np.float64):
        assert "LibraryPlan" not in _kinds(cpu_executable(f, x[0], b))
        got = np.asarray(ember.jit(f)(x[0], b))
    np.testing.assert_allclose(got, np.linalg.solve(x[0].astype(np.float64), b),
                               rtol=tol * 10, atol=tol * 10)


@pytest.mark.parametrize("n", [16, 48, 100])  # (100: LAPACK's routines in the loop)
def test_newton_iterations_run_as_a_native_loop(n):
    def residual(m, x):
        return m.tanh(x) + x ** 3 - 0.5

    def newton(x0):
        return lax.fori_loop(0, 6, lambda i, x: x - jnp.linalg.solve(
            ember.jacfwd(lambda x: residual(jnp, x))(x), residual(jnp, x)), x0)

    x0 = (rng.standard_normal(n) * 0.1).astype(np.float32)
    exe = cpu_executable(newton, x0)
    (loop,) = [s for s in exe.program.steps if type(s) is cpu_exe.WhilePlan]
    assert loop.loop is not None and "LibraryPlan" not in _kinds(exe)
    x = x0.astype(np.float64)
    for _ in range(6):
        jac = np.diag(1 - np.tanh(x) ** 2 + 3 * x ** 2)
        x = x - np.linalg.solve(jac, residual(np, x))
    np.testing.assert_allclose(np.asarray(ember.jit(newton)(x0)), x, rtol=1e-5, atol=1e-6)


def test_what_keeps_the_library():
    a = rng.standard_normal((5, 5))
    with ember.enable_x64():
        assert "LibraryPlan" in _kinds(cpu_executable(_lu, (a + 1j * a).astype(np.complex128)))
    complex_ = (a + 1j * a).astype(np.complex64)
    conj = lambda a, b: lax.linalg.triangular_solve(a, b, conjugate_a=True)  # noqa: E731
    assert "LibraryPlan" in _kinds(cpu_executable(conj, complex_, complex_))
    assert "LibraryPlan" in _kinds(cpu_executable(jnp.linalg.eigh, complex_))
    big = rng.standard_normal((1025, 1025)).astype(np.float32)  # (past LAPACK_MAX_DIM)
    assert "LibraryPlan" in _kinds(cpu_executable(_lu, big))
    # without a LAPACK of 64-bit integers to call, large matrices take the library thunk
    # (67 and 63: sides no other test compiles, as the compile caches keep these programs)
    try:
        _lapack.disable()
        assert "LibraryPlan" in _kinds(cpu_executable(_lu, big[:67, :67]))
        assert "LibraryPlan" not in _kinds(cpu_executable(_lu, big[:63, :63]))
    finally:
        _lapack.disable(False)


def _program_routines(exe):
    return {r for r in exe.program.routines if r[2] == cpu_exe.LAPACK_ROUTINE}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch,n", [((), 65), ((2,), 72), ((), 131)])
def test_lapack_kernels_give_the_library_thunks_bits(batch, n, dtype):
    # Past MAX_DIM the kernels call LAPACK's own getrf/potrf/trsm (8 x 8 register tiles
    # transpose the LU's matrices: 72 whole tiles, 65 and 131 a ragged edge): the same bits
    # as the library thunk's calls (``_lapack``), which eager code runs
    x = rng.standard_normal(batch + (n, n)).astype(dtype)
    spd = x @ np.swapaxes(x, -1, -2) + n * np.eye(n, dtype=dtype)
    spd[(0,) * len(batch) + (3, 3)] = -1.0  # (not positive definite: all NaN)
    chol = lambda x: lax.linalg.cholesky(x, symmetrize_input=False)  # noqa: E731
    with ember.enable_x64(dtype == np.float64):
        exe = cpu_executable(_lu, x)
        assert _kinds(exe) == ["KernelPlan"] and exe.program.steps[0].blas
        assert _program_routines(exe) == {("getrf", np.dtype(dtype).name, "lapack")}
        got = [np.asarray(v) for v in ember.jit(_lu)(x)]
        for g, w in zip(got, _lapack.getrf(x)):
            np.testing.assert_array_equal(g, w)
        assert "LibraryPlan" not in _kinds(cpu_executable(chol, spd))
        got = np.asarray(ember.jit(chol)(spd))
        np.testing.assert_array_equal(got, np.tril(_lapack.potrf(spd)))
        assert np.isnan(got.reshape((-1, n, n))[0][np.tril_indices(n)]).all()
        for left, lower, transpose_a, unit in itertools.product([True, False], repeat=4):
            b = rng.standard_normal(batch + ((n, 3) if left else (3, n))).astype(dtype)
            flags = dict(left_side=left, lower=lower, transpose_a=transpose_a,
                         unit_diagonal=unit)
            solve = lambda a, b: lax.linalg.triangular_solve(a, b, **flags)  # noqa: E731,B023
            assert _kinds(cpu_executable(solve, spd, b)) == ["KernelPlan"]
            np.testing.assert_array_equal(
                np.asarray(ember.jit(solve)(spd, b)),
                _lapack.trsm(spd, b, conjugate_a=False, **flags), err_msg=str(flags))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1000, 10), (2, 65, 33), (33, 65), (24, 16),
                                   (6, 100, 100)])
def test_qr_kernels_give_the_library_thunks_bits(shape, dtype):
    # geqrf and orgqr in the kernel's arena scratch (the transposed matrix, then LAPACK's
    # workspace): 8 x 8 tiles with ragged edges both ways (65 x 33), none whole (1000 x 10
    # has 125 x 1), a wide matrix; a batch split across threads (6 x 100 x 100)
    x = rng.standard_normal(shape).astype(dtype)
    q_of = lambda x: lax.linalg.householder_product(*lax.linalg.geqrf(x))  # noqa: E731
    with ember.enable_x64(dtype == np.float64):
        exe = cpu_executable(lax.linalg.geqrf, x)
        assert _kinds(exe) == ["KernelPlan"] and exe.program.arena_bytes > x[..., 0, :].size
        got = [np.asarray(v) for v in ember.jit(lax.linalg.geqrf)(x)]
        want = _lapack.geqrf(x)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        if shape[-2] < shape[-1]:
            return
        assert _kinds(cpu_executable(q_of, x)) == ["KernelPlan"] * 2
        q = np.asarray(ember.jit(q_of)(x))
        np.testing.assert_array_equal(q, _lapack.orgqr(*want))
    # Q R = x, Q orthonormal (float64 products)
    q64, r64 = q.astype(np.float64), np.triu(got[0][..., :shape[-1], :]).astype(np.float64)
    tol = 1e3 * np.finfo(dtype).eps
    np.testing.assert_allclose(q64 @ r64, x, atol=tol * 10)
    np.testing.assert_allclose(np.swapaxes(q64, -1, -2) @ q64, np.broadcast_to(
        np.eye(shape[-1]), q64.shape[:-2] + (shape[-1],) * 2), atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1000, 10), (3, 65, 33), (33, 65), (6, 40, 40)])
def test_svd_kernels_give_the_library_thunks_bits(shape, dtype):
    # gesdd as _lapack.gesdd calls it (its workspace, u and vt transposed back), values
    # only or with reduced or full vectors; a matrix with a NaN all NaN, its batch's others
    # not; a batch split across threads (6 x 40 x 40)
    x = rng.standard_normal(shape).astype(dtype)
    if len(shape) == 3:
        x[1, 2, 3] = np.nan
    for compute_uv, full in ((True, False), (True, True), (False, False)):
        f = lambda x: lax.linalg.svd(x, full_matrices=full, compute_uv=compute_uv)  # noqa: E731,B023
        with ember.enable_x64(dtype == np.float64):
            exe = cpu_executable(f, x)
            assert _kinds(exe) == ["KernelPlan"]
            assert _program_routines(exe) == {("gesdd_r", np.dtype(dtype).name, "lapack")}
            got = ember.jit(f)(x)
        got = [np.asarray(v) for v in ((got[1], got[0], got[2]) if compute_uv else [got])]
        want = _lapack.gesdd(x, compute_uv, full)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        if len(shape) == 3:
            assert all(np.isnan(g[1]).all() and not np.isnan(g[0]).any() for g in got)
    # the values against float64 NumPy, U S Vt = x
    s, u, vt = _lapack.gesdd(x, True, False)
    x64 = x.astype(np.float64)
    ok = ~np.isnan(x64).any(axis=(-2, -1))
    tol = 1e3 * np.finfo(dtype).eps
    np.testing.assert_allclose(s[ok], np.linalg.svd(x64[ok], compute_uv=False),
                               rtol=tol, atol=tol)
    rebuilt = (u[ok].astype(np.float64) * s[ok][..., None, :]) @ vt[ok]
    np.testing.assert_allclose(rebuilt, x64[ok], atol=tol * 10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(17, 17), (3, 65, 65), (6, 40, 40)])
def test_eigh_kernels_give_the_library_thunks_bits(shape, dtype):
    # syevd as _lapack.syevd calls it, either triangle; a matrix with a NaN in a batch; a
    # batch split across threads (6 x 40 x 40)
    x = rng.standard_normal(shape).astype(dtype)
    if len(shape) == 3:
        x[1, 2, 3] = np.nan
    for lower in (True, False):
        f = lambda x: lax.linalg.eigh(x, lower=lower, symmetrize_input=False)  # noqa: E731,B023
        with ember.enable_x64(dtype == np.float64):
            exe = cpu_executable(f, x)
            assert _kinds(exe) == ["KernelPlan"]
            assert _program_routines(exe) == {("syevd_r", np.dtype(dtype).name, "lapack")}
            got = [np.asarray(v) for v in ember.jit(f)(x)]
        for g, w in zip(got, _lapack.syevd(x, lower=lower)):
            np.testing.assert_array_equal(g, w)
    # the last run's (upper triangle) against float64 NumPy: A V = V diag(w)
    v, w = (g.astype(np.float64) for g in got[:2])
    sym = np.triu(x.astype(np.float64)) + np.swapaxes(np.triu(x.astype(np.float64), 1), -1, -2)
    ok = ~np.isnan(sym).any(axis=(-2, -1))
    tol = 1e3 * np.finfo(dtype).eps
    np.testing.assert_allclose(w[ok], np.linalg.eigvalsh(sym[ok]), rtol=tol, atol=tol * 10)
    np.testing.assert_allclose(sym[ok] @ v[ok], v[ok] * w[ok][..., None, :], atol=tol * 30)


def test_lapack_kernels_of_nonfinite_matrices_give_the_library_thunks_results():
    # NaN and inf entries: LAPACK's answers (whatever pivots it picks stay in bounds), as
    # the library thunk gets them
    x = rng.standard_normal((4, 70, 70)).astype(np.float32)
    x[0, 5, 7] = np.nan
    x[1, :, 3] = np.inf
    x[2, 0, 0] = -np.inf
    b = rng.standard_normal((4, 70, 2)).astype(np.float32)
    cases = [(_lu, (x,), lambda: _lapack.getrf(x)),
             (lambda a: lax.linalg.cholesky(a, symmetrize_input=False), (x,),
              lambda: [np.tril(_lapack.potrf(x))]),
             (lambda a, b: lax.linalg.triangular_solve(a, b, left_side=True, lower=True),
              (x, b), lambda: [_lapack.trsm(x, b, left_side=True, lower=True,
                                             transpose_a=False, conjugate_a=False,
                                             unit_diagonal=False)]),
             (lax.linalg.geqrf, (x,), lambda: _lapack.geqrf(x)),
             (lambda a: lax.linalg.svd(a, compute_uv=False), (x,),
              lambda: _lapack.gesdd(x, False, False)),
             (lambda a: lax.linalg.eigh(a, symmetrize_input=False), (x,),
              lambda: _lapack.syevd(x, lower=True))]
    for f, args, want in cases:
        assert "LibraryPlan" not in _kinds(cpu_executable(f, *args))
        got = ember.jit(f)(*args)
        got = [np.asarray(v) for v in (got if isinstance(got, (tuple, list)) else [got])]
        for g, w in zip(got, want()):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (3, 40, 40), (131, 131)])
def test_eigvals_kernels_give_the_library_thunks_bits(shape, dtype):
    # geev without vectors, any size; an inf matrix in a batch gets NaN values (LAPACK is
    # not called on it)
    x = rng.standard_normal(shape).astype(dtype)
    if len(shape) == 3:
        x[1, 2, 3] = np.inf
    with ember.enable_x64(dtype == np.float64):
        exe = cpu_executable(jnp.linalg.eigvals, x)
        assert _kinds(exe) == ["KernelPlan"]
        assert _program_routines(exe) == {("geev_r", np.dtype(dtype).name, "lapack")}
        got = np.asarray(ember.jit(jnp.linalg.eigvals)(x))
        # (with vectors: the library)
        assert "LibraryPlan" in _kinds(cpu_executable(jnp.linalg.eig, x))
    np.testing.assert_array_equal(got, _lapack.geev_values(x))
    ok = np.isfinite(x).all(axis=(-2, -1))
    assert np.isnan(got[~ok]).all()
    want = np.linalg.eigvals(x[ok].astype(np.float64))
    tol = 1e3 * np.finfo(dtype).eps * shape[-1]
    np.testing.assert_allclose(np.sort_complex(got[ok]), np.sort_complex(want), atol=tol)


def test_a_batch_past_the_scratch_limit_runs_in_one_scratch(monkeypatch):
    # (3, 37, 23): a shape no other test compiles, as the compile caches keep programs
    from ember.backends.cpu import linalg_steps
    x = rng.standard_normal((3, 37, 23)).astype(np.float32)
    f = lambda x: lax.linalg.svd(x, full_matrices=False)  # noqa: E731
    monkeypatch.setattr(linalg_steps, "SCRATCH_MAX_BYTES", 1)
    exe = cpu_executable(f, x)
    (step,) = exe.program.steps
    assert step.extent == 1  # (one work item, one matrix's scratch)
    scratch = step.outputs[-1].dims[0]
    monkeypatch.setattr(linalg_steps, "SCRATCH_MAX_BYTES", 1 << 26)
    threaded = cpu_executable(lambda x: lax.linalg.svd(x, full_matrices=False)[1] * 1, x)
    assert threaded.program.steps[0].extent == 3 and \
        threaded.program.steps[0].outputs[-1].dims[0] == 3 * scratch
    got = exe.execute([x])
    want = _lapack.gesdd(x, True, False)
    for g, w in zip([got[1], got[0], got[2]], want):
        np.testing.assert_array_equal(g, w)


def test_qr_in_a_loop_reuses_its_scratch():
    def orthogonal_iterations(a, v):
        return lax.fori_loop(0, 5, lambda i, v: jnp.linalg.qr(a @ v)[0], v)

    a = rng.standard_normal((40, 40)).astype(np.float32)
    a = a + a.T
    v = rng.standard_normal((40, 20)).astype(np.float32)
    exe = cpu_executable(orthogonal_iterations, a, v)
    assert "LibraryPlan" not in _kinds(exe)
    want = v.astype(np.float64)
    for _ in range(5):
        want = np.linalg.qr(a.astype(np.float64) @ want)[0]
    np.testing.assert_allclose(np.asarray(ember.jit(orthogonal_iterations)(a, v)), want,
                               atol=2e-4)


@pytest.mark.parametrize("batch,n", [((), 5), ((2,), 72), ((), 131)])
def test_complex64_lapack_kernels_give_the_library_thunks_bits(batch, n):
    # complex64 LU, Cholesky and solves (each element moved as one 64-bit integer by the
    # transposes; a Cholesky failure is nan + 0j, as NumPy stores NaN into a complex array)
    def c(*shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(
            np.complex64)

    x = c(*batch, n, n)
    exe = cpu_executable(_lu, x)
    assert _kinds(exe) == ["KernelPlan"] and exe.program.steps[0].blas
    for g, w in zip(ember.jit(_lu)(x), _lapack.getrf(x)):
        np.testing.assert_array_equal(np.asarray(g), w)
    h = x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n, dtype=np.complex64)
    h[(0,) * len(batch) + (2, 2)] = -1.0
    chol = lambda x: lax.linalg.cholesky(x, symmetrize_input=False)  # noqa: E731
    np.testing.assert_array_equal(np.asarray(ember.jit(chol)(h)), np.tril(_lapack.potrf(h)))
    for left, lower, transpose_a, unit in itertools.product([True, False], repeat=4):
        for conjugate_a in ((False, True) if transpose_a else (False,)):
            b = c(*batch, *((n, 3) if left else (3, n)))
            flags = dict(left_side=left, lower=lower, transpose_a=transpose_a,
                         conjugate_a=conjugate_a, unit_diagonal=unit)
            solve = lambda a, b: lax.linalg.triangular_solve(a, b, **flags)  # noqa: E731,B023
            assert _kinds(cpu_executable(solve, h, b)) == ["KernelPlan"]
            np.testing.assert_array_equal(np.asarray(ember.jit(solve)(h, b)),
                                          _lapack.trsm(h, b, **flags), err_msg=str(flags))
    a = (c(n, n) + n * np.eye(n)).astype(np.complex64)
    b = c(n, 2)
    np.testing.assert_allclose(np.asarray(ember.jit(jnp.linalg.solve)(a, b)),
                               np.linalg.solve(a.astype(np.complex128), b), rtol=1e-4,
                               atol=1e-5)


def test_solves_the_small_routines_leave_call_lapack():
    a = (rng.standard_normal((64, 64)) + 8 * np.eye(64)).astype(np.float32)
    left = lambda a, b: lax.linalg.triangular_solve(a, b, left_side=True)  # noqa: E731
    right = lambda a, b: lax.linalg.triangular_solve(a, b, left_side=False)  # noqa: E731
    # (a solve of 64 by 64 columns: LAPACK's blocked trsm is faster, MAX_SOLVE_WORK)
    assert _program_routines(cpu_executable(left, a, a)) == {("trsm", "float32", "lapack")}
    assert not _program_routines(cpu_executable(left, a, a[:, :16]))  # (the small routine)
    b = rng.standard_normal((3, 5)).astype(np.float32)
    assert _program_routines(cpu_executable(right, a[:5, :5], b))
    for f, args in ((left, (a, a)), (right, (a[:5, :5], b))):
        want = _lapack.trsm(*args, left_side=f is left, lower=False, transpose_a=False,
                            conjugate_a=False, unit_diagonal=False)
        np.testing.assert_array_equal(np.asarray(ember.jit(f)(*args)), want)


def test_lapack_kernels_run_on_one_blas_thread(monkeypatch):
    # a program with a kernel calling LAPACK holds OpenBLAS to the calling thread around
    # its native call (as around native gemm tasks), and steps from Python where it also
    # has a product on BLAS's threads, whose count is one setting for the process
    monkeypatch.setenv(gemm_kernel.GEMM_ENV, "blas")  # (the large product: BLAS's)
    a = (rng.standard_normal((100, 100)) + 10 * np.eye(100)).astype(np.float32)
    exe = cpu_executable(jnp.linalg.solve, a, a[:, :2])
    assert exe._blas_tasks and cpu_exe.native_products(exe.program.steps)
    big = rng.standard_normal((1024, 1024)).astype(np.float32)
    f = lambda a, x: (jnp.linalg.solve(a, x[:100, :4]), (x @ x).sum())  # noqa: E731
    exe = cpu_executable(f, a, big)
    assert cpu_exe.whole_gemms(exe.program.steps) and exe.program.native_call is None
    calls = []
    enter = type(_blas_threads.one_blas_thread).__enter__

    def counting(self):
        calls.append(1)
        return enter(self)

    try:
        type(_blas_threads.one_blas_thread).__enter__ = counting
        got = exe.execute([a, big])
    finally:
        type(_blas_threads.one_blas_thread).__enter__ = enter
    assert calls  # (the LAPACK kernel's own run, stepped from Python)
    np.testing.assert_allclose(got[0], np.linalg.solve(a.astype(np.float64), big[:100, :4]),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[1], (big.astype(np.float64) @ big).sum(), rtol=1e-3)


SOLVE_PROGRAM = """
import json, sys, numpy as np, ember, ember.numpy as jnp
from ember.backends import get_backend
n = int(sys.argv[1])
a = np.eye(n, dtype=np.float32) * 4 + np.tri(n, k=-1, dtype=np.float32)
out = ember.jit(lambda a, b: jnp.linalg.solve(a, b) * 2.0)(a, np.arange(n, dtype=np.float32))
get_backend("cpu").wait_for_background()
print(json.dumps({"value": np.asarray(out).tolist(), "stats": get_backend("cpu").stats}))
"""


@pytest.mark.parametrize("n", [6, 100])  # (small-matrix routines; LAPACK's)
def test_a_second_process_binds_the_routines_of_cached_code(tmp_path, n):
    def run():
        env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path))
        out = subprocess.run([sys.executable, "-c", SOLVE_PROGRAM, str(n)], env=env,
                             check=True, capture_output=True, text=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    first, second = run(), run()
    assert second["stats"]["disk_hits"] >= 1 and second["stats"]["compiled"] == 0
    a = np.eye(n) * 4 + np.tri(n, k=-1)
    want = np.linalg.solve(a, np.arange(float(n))) * 2
    np.testing.assert_allclose(second["value"], want, rtol=1e-5)
    assert second["value"] == first["value"]
