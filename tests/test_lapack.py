"""The LAPACK binding (``ember.lax._lapack``) behind the linear-algebra primitives: its
results against JAX's (same LAPACK routines: pivots bit for bit), every flag of
``triangular_solve``, failures (singular LU, non positive definite Cholesky, singular
tridiagonal systems), batches, size 0 and 1, non-contiguous inputs, jit against eager, and
the NumPy fallback when no library is bound."""

import itertools
import threading

import numpy as np
import pytest

import ember
from ember.lax import _lapack
from ember.lax import linalg as el

RNG = np.random.default_rng(7)
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
needs_lapack = pytest.mark.skipif(not _lapack.available(), reason="no LAPACK library bound")


@pytest.fixture
def jax64(jax):
    """JAX and ember both with x64 on, so that float64/complex128 stay themselves."""
    previous = ember.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    ember.config.update("jax_enable_x64", True)
    yield jax
    jax.config.update("jax_enable_x64", False)
    ember.config.update("jax_enable_x64", previous)


def _mat(shape, dtype):
    x = RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


def _tol(dtype):
    return 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-11


def _close(got, want, dtype):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype,
                                                                   got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=_tol(dtype), atol=_tol(dtype))


@needs_lapack
def test_probe_finds_numpys_library_and_checks_the_integer_width():
    b = _lapack.binding()
    assert (b.prefix, b.suffix, b.itype) in [c for c in _lapack._CONVENTIONS]
    # The same symbols bound with the other integer width fail the self test.
    import cffi
    other = "int32_t" if b.itype == "int64_t" else "int64_t"
    ffi = cffi.FFI()
    wrong = _lapack._Binding(ffi, ffi.dlopen(b.path), b.prefix, b.suffix, other)
    assert not _lapack._self_test(wrong)
    assert list(wrong.declared) == [b.prefix + "dgetrf" + b.suffix]  # declared, then refused
    assert _lapack._self_test(b)


@needs_lapack
def test_routines_are_declared_at_first_use_once():
    # (parsing every declaration up front cost ~60 ms of a process's first solve)
    ffi = __import__("cffi").FFI()
    b = _lapack.binding()
    fresh = _lapack._Binding(ffi, ffi.dlopen(b.path), b.prefix, b.suffix, b.itype)
    assert fresh.declared == {}
    results = []
    threads = [threading.Thread(target=lambda: results.append(fresh.fn("potrf", np.float64)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(f is results[0] for f in results)
    assert fresh.fn("potrf", np.dtype(np.float64)) is results[0]
    assert list(fresh.declared) == [b.prefix + "dpotrf" + b.suffix]
    a = np.array([[4.0, 2.0], [2.0, 3.0]])  # symmetric: row-major reads the same
    n, info = ffi.new(b.itype + "*", 2), ffi.new(b.itype + "*")
    results[0](b"L", n, ffi.from_buffer(a), n, info, 1)
    assert info[0] == 0
    np.testing.assert_allclose(np.tril(a.T), np.linalg.cholesky([[4.0, 2.0], [2.0, 3.0]]))


@needs_lapack
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(6, 6), (2, 5, 3), (3, 4), (1, 1)])
def test_lu_matches_jax_bit_for_bit_pivots(jax64, dtype, shape):
    x = _mat(shape, dtype)
    got = el.lu(x)
    want = jax64.lax.linalg.lu(x)
    _close(got[0], want[0], dtype)
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
        assert np.asarray(g).dtype == np.int32
    # jit gives eager's pivots, and its factors to rounding (a small matrix is a kernel of
    # the program there, ``backends/cpu/linalg_steps.py``, not a LAPACK call)
    jitted = ember.jit(el.lu)(x)
    _close(jitted[0], got[0], dtype)
    for g, j in zip(got[1:], jitted[1:]):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(j))


@needs_lapack
def test_lu_singular_nan_and_transposed_input(jax):
    sing = np.array([[1., 2., 3.], [2., 4., 6.], [1., 0., 1.]], np.float32)
    zero_col = np.array([[0., 1.], [0., 2.]], np.float32)
    nan = np.array([[1., np.nan], [2., 3.]], np.float32)
    base = _mat((5, 4), np.float32)
    for x in (sing, zero_col, nan, base.T, np.zeros((3, 3), np.float32)):
        got = el.lu(x)
        want = jax.lax.linalg.lu(x)
        np.testing.assert_allclose(np.asarray(got[0]), np.asarray(want[0]), rtol=1e-6,
                                   atol=1e-6)
        for g, w in zip(got[1:], want[1:]):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@needs_lapack
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_triangular_solve_every_flag(jax64, dtype):
    a = _mat((2, 4, 4), dtype) + 4 * np.eye(4, dtype=dtype)
    for left in (True, False):
        b = _mat((2, 4, 3) if left else (2, 3, 4), dtype)
        for lower in (True, False):
            for tr in (True, False):
                for conj in (True, False):
                    for unit in (True, False):
                        kw = dict(left_side=left, lower=lower, transpose_a=tr,
                                  conjugate_a=conj, unit_diagonal=unit)
                        got = el.triangular_solve(a, b, **kw)
                        _close(got, jax64.lax.linalg.triangular_solve(a, b, **kw), dtype)
    # a transposed (non-contiguous) triangle, a vector right-hand side, jit
    at = np.swapaxes(a, -1, -2)
    kw = dict(left_side=True, lower=False, transpose_a=True)
    want = jax64.lax.linalg.triangular_solve(at, b[..., 0, :], **kw)
    _close(el.triangular_solve(at, b[..., 0, :], **kw), want, dtype)
    np.testing.assert_array_equal(
        np.asarray(ember.jit(lambda p, q: el.triangular_solve(p, q, **kw))(at, b[..., 0, :])),
        np.asarray(el.triangular_solve(at, b[..., 0, :], **kw)))


@needs_lapack
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("batch", [(), (3,)])
def test_trsm_reads_column_major_triangles_in_place(dtype, batch):
    # getrf's factors lie column-major (a transposed view): trsm reads them as they lie,
    # with its transpose and triangle flags swapped, instead of copying them row-major.
    k = 24
    stack = _mat((int(np.prod(batch)), k, k), dtype) + 6 * np.eye(k, dtype=dtype)
    a = np.swapaxes(np.ascontiguousarray(np.swapaxes(stack, -1, -2)), -1, -2)
    a = a.reshape(batch + (k, k))  # (each matrix column-major, ``strides[0]`` apart)
    assert not a.flags.c_contiguous and a.strides[-2:] == (a.itemsize, k * a.itemsize)
    ref = np.array(a, dtype=np.complex128)
    for left in (True, False):
        b = _mat(batch + ((k, 5) if left else (5, k)), dtype)
        for lower, tr, conj, unit in itertools.product((True, False), repeat=4):
            got = _lapack.trsm(a, b, left_side=left, lower=lower, transpose_a=tr,
                               conjugate_a=conj, unit_diagonal=unit)
            t = np.tril(ref) if lower else np.triu(ref)
            if unit:
                t = t - t * np.eye(k) + np.eye(k)
            if conj:
                t = np.conj(t)
            if tr:
                t = np.swapaxes(t, -1, -2)
            want = np.linalg.solve(t, b) if left else np.swapaxes(np.linalg.solve(
                np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
            np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)
            # (the same solve from a row-major copy of the triangle)
            copied = _lapack.trsm(np.ascontiguousarray(a), b, left_side=left, lower=lower,
                                  transpose_a=tr, conjugate_a=conj, unit_diagonal=unit)
            np.testing.assert_allclose(got, copied, rtol=2e-4, atol=2e-4)


@needs_lapack
def test_workspace_sizes_are_remembered_per_routine_and_shape(monkeypatch):
    # (a size found once is reused without LAPACK's query; each shape has its own)
    monkeypatch.setattr(_lapack, "_LWORK", {})
    results = {}
    for shape in ((40, 7), (7, 40), (40, 7)):
        a = _mat(shape, np.float32)
        for cached in (False, True):
            if not cached:
                _lapack._LWORK.clear()
            f, taus = _lapack.geqrf(a)
            s = _lapack.gesdd(a, False, False)[0]
            results[cached] = (f, taus, s)
        for x, y in zip(results[False], results[True]):
            np.testing.assert_array_equal(x, y)
        np.testing.assert_allclose(s, np.linalg.svd(a.astype(np.float64), compute_uv=False),
                                   rtol=1e-5)
    assert {k[0][:3] for k in _lapack._LWORK} == {("geqrf", 40, 7), ("gesdd", b"N", 40)}


@needs_lapack
def test_triangular_solve_zero_pivot_and_empty(jax):
    a = np.array([[1., 0.], [1., 0.]], np.float32)
    b = np.ones((2, 1), np.float32)
    kw = dict(left_side=True, lower=True)
    got = np.asarray(el.triangular_solve(a, b, **kw))
    want = np.asarray(jax.lax.linalg.triangular_solve(a, b, **kw))
    np.testing.assert_array_equal(got, want)  # 1 then (1 - 1) / 0 = nan
    assert np.isnan(got[1, 0]) and got[0, 0] == 1
    out = el.triangular_solve(np.eye(3, dtype=np.float32), np.zeros((3, 0), np.float32), **kw)
    assert out.shape == (3, 0)


@needs_lapack
@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_matches_jax_and_fails_with_nans(jax64, dtype):
    a = _mat((3, 5, 5), dtype)
    spd = a @ np.conj(np.swapaxes(a, -1, -2)) + 5 * np.eye(5, dtype=dtype)
    spd[1] = -spd[1]  # not positive definite: that matrix only is all NaN
    got = np.asarray(el.cholesky(spd))
    want = np.asarray(jax64.lax.linalg.cholesky(spd))
    assert np.isnan(got[1][np.tril_indices(5)]).all()
    np.testing.assert_array_equal(got[1], want[1])  # NaN below, zeros above the diagonal
    _close(got[[0, 2]], want[[0, 2]], dtype)
    # the primitive alone reads the lower triangle and leaves the upper one as it was (JAX's)
    from jax._src.lax.linalg import cholesky_p
    x = np.tril(spd[0]) + np.triu(_mat((5, 5), dtype), 1)
    _close(el.cholesky_p.bind(x), np.asarray(cholesky_p.bind(x)), dtype)
    np.testing.assert_array_equal(np.triu(np.asarray(el.cholesky_p.bind(x)), 1), np.triu(x, 1))
    np.testing.assert_array_equal(np.asarray(ember.jit(el.cholesky)(spd)), got)


@needs_lapack
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_decompositions_match_jax(jax64, dtype):
    from jax._src.lax.linalg import geqrf as jgeqrf
    jl = jax64.lax.linalg
    a = _mat((2, 5, 5), dtype)
    tall = _mat((2, 6, 4), dtype)
    herm = a + np.conj(np.swapaxes(a, -1, -2))
    pairs = [(el.geqrf(tall), jgeqrf(tall)), (el.hessenberg(a), jl.hessenberg(a)),
             (el.tridiagonal(herm, lower=True), jl.tridiagonal(herm, lower=True)),
             (el.tridiagonal(herm, lower=False), jl.tridiagonal(herm, lower=False)),
             (el.schur(a), jl.schur(a)), (el.schur(a, compute_schur_vectors=False),
                                          jl.schur(a, compute_schur_vectors=False))]
    h, t = (np.asarray(v) for v in jgeqrf(tall))
    pairs.append(([el.householder_product(h, t)], [jl.householder_product(h, t)]))
    pairs.append(([el.householder_product(h, t[..., :2])],
                  [jl.householder_product(h, t[..., :2])]))
    for left, c in ((True, _mat((2, 6, 3), dtype)), (False, _mat((2, 3, 6), dtype))):
        for tr in (False, True):
            pairs.append(([el.ormqr(h, t, c, left=left, transpose=tr)],
                          [jl.ormqr(h, t, c, left=left, transpose=tr)]))
    for low in (True, False):
        kw = dict(lower=low, symmetrize_input=False)
        pairs.append((el.eigh(a, **kw), jl.eigh(a, **kw)))
    for x in (tall, np.swapaxes(tall, -1, -2)):
        for full in (True, False):
            pairs.append((el.qr(x, full_matrices=full), jl.qr(x, full_matrices=full)))
    for got, want in pairs:
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _close(g, w, np.asarray(w).dtype)


@needs_lapack
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_tridiagonal_solve_matches_jax(jax64, dtype):
    n = 6
    dl, d, du = _mat((2, n), dtype), _mat((2, n), dtype) + 4, _mat((2, n), dtype)
    b = _mat((2, n, 3), dtype)
    tl = jax64.lax.linalg.tridiagonal_solve
    _close(el.tridiagonal_solve(dl, d, du, b), tl(dl, d, du, b), dtype)
    one = [v[:1, :1] for v in (dl, d, du)]
    _close(el.tridiagonal_solve(*one, b[:1, :1]), tl(*one, b[:1, :1]), dtype)
    sing = np.zeros((1, 3), dtype)  # a singular system: its solution is all NaN
    assert np.isnan(np.asarray(el.tridiagonal_solve(sing, sing, sing,
                                                    np.ones((1, 3, 1), dtype)))).all()
    # the inputs are left alone (gtsv overwrites its copies)
    keep = [v.copy() for v in (dl, d, du, b)]
    el.tridiagonal_solve(dl[:1], d[:1], du[:1], b[:1])
    for v, k in zip((dl, d, du, b), keep):
        np.testing.assert_array_equal(v, k)


@needs_lapack
def test_solve_inv_det_via_lapack(jax):
    import ember.numpy as enp
    jnp = jax.numpy
    a = _mat((3, 8, 8), np.float32) + 3 * np.eye(8, dtype=np.float32)
    b = _mat((3, 8, 2), np.float32)
    for f, g in ((enp.linalg.solve, jnp.linalg.solve),):
        np.testing.assert_allclose(np.asarray(ember.jit(f)(a, b)), np.asarray(g(a, b)),
                                   rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(np.asarray(enp.linalg.inv(a)), np.asarray(jnp.linalg.inv(a)),
                               rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(np.asarray(enp.linalg.det(a)), np.asarray(jnp.linalg.det(a)),
                               rtol=2e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_numpy_fallback_agrees(x64, dtype):
    a = _mat((2, 5, 5), dtype)
    herm = a @ np.conj(np.swapaxes(a, -1, -2)) + 5 * np.eye(5, dtype=dtype)
    b = _mat((2, 5, 3), dtype)
    dl, d, du = _mat((2, 5), dtype), _mat((2, 5), dtype) + 4, _mat((2, 5), dtype)
    kw = dict(left_side=True, lower=False, transpose_a=True, conjugate_a=True)

    def run():
        h, t = el.geqrf(a)
        return [*el.lu(a), el.cholesky(herm), el.triangular_solve(a, b, **kw),
                el.tridiagonal_solve(dl, d, du, b), h, t, el.householder_product(h, t),
                el.ormqr(h, t, b, left=True, transpose=True), *el.hessenberg(a),
                *el.tridiagonal(herm), el.eigh(herm)[1],
                # Hermitian: T is diagonal; the eigenvalues' order may differ
                np.sort(np.diagonal(np.asarray(el.schur(herm)[0]), 0, -2, -1).real, -1)]

    with_lapack = run()
    _lapack.disable()
    try:
        assert not _lapack.available()
        without = run()
    finally:
        _lapack.disable(False)
    assert _lapack.available() == (_lapack.binding() is not None)
    for g, w in zip(without, with_lapack):
        g, w = np.asarray(g), np.asarray(w)
        if g.dtype == np.int32:
            np.testing.assert_array_equal(g, w)
        else:
            _close(g, w, dtype)


@needs_lapack
def test_small_problems_run_on_the_calling_thread_and_restore_its_setting():
    from ember import _blas_threads
    set_threads = _blas_threads.setter()
    if set_threads is None:
        pytest.skip("the library has no OpenBLAS thread count")
    seen = []
    previous = set_threads(3)
    try:
        with _lapack.single_threaded(np.zeros((4, 4))):
            seen.append(set_threads(1))  # inside: one thread
        el.lu(_mat((8, 8), np.float32))
        el.eigh(_mat((8, 8), np.float32))
        big = np.zeros((2, _lapack.SINGLE_THREAD_MAX_DIM + 1), np.float32)
        with _lapack.single_threaded(big):  # too large: left alone
            seen.append(set_threads(3))
    finally:
        seen.append(set_threads(previous))
    assert seen == [1, 3, 3]


@needs_lapack
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_batches_shared_among_threads_match_one_thread_bit_for_bit(monkeypatch, dtype):
    # Large batches of LAPACK's own routines run on the pool's threads, each matrix on
    # whichever thread takes it; every result must be what one thread computes, and a
    # failure (NaN results) must land on its own matrix.
    n, nb = 24, 40
    a = _mat((nb, n, n), dtype)
    herm = a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n, dtype=dtype)
    herm[7, 3, 3] = np.nan  # NaN results for this matrix only
    c = _mat((nb, n, 5), dtype)
    dl, d, du = _mat((nb, 60), dtype), _mat((nb, 60), dtype) + 4, _mat((nb, 60), dtype)
    d[5], dl[5], du[5] = 0, 0, 0  # gtsv: singular, NaN for this system only
    rhs = _mat((nb, 60, 40), dtype)

    def run():
        h, t = _lapack.geqrf(a)
        return [h, t, _lapack.orgqr(h, t), _lapack.ormqr(h, t, c, left=True, transpose=True),
                *_lapack.gehrd(a), *_lapack.sytrd(herm, lower=True),
                *_lapack.syevd(herm, lower=False), *_lapack.gees(a, True),
                _lapack.gtsv(dl, d, du, rhs)]

    calls = []
    real_each = _lapack._each_matrix
    monkeypatch.setattr(_lapack, "_each_matrix",
                        lambda nb, fl, body: (calls.append(nb * fl), real_each(nb, fl, body)))
    monkeypatch.setattr(_lapack, "PARALLEL_MIN_FLOPS", float("inf"))
    serial = run()
    monkeypatch.setattr(_lapack, "PARALLEL_MIN_FLOPS", 0.0)
    from ember import _threads
    shared = run() if _threads.pool().size > 1 else pytest.skip("one core")
    assert len(calls) == 2 * 8 and min(calls) > 0
    for s, p in zip(serial, shared):
        np.testing.assert_array_equal(s, p)
    w = serial[8]
    assert np.isnan(w[7]).any() and not np.isnan(np.delete(w, 7, 0)).any()
    x = serial[-1]
    assert np.isnan(x[5]).all() and not np.isnan(np.delete(x, 5, 0)).any()


def test_pool_runs_nested_ranges_on_the_worker_itself():
    from ember import _threads
    pool = _threads.Pool(2)
    seen = []

    def outer(lo, hi):
        # (a worker waiting for the other worker, its only one, would wait for itself)
        pool.run(lambda a, b: seen.append((lo, a)), [(0, 1), (1, 2)])

    pool.run(outer, [(0, 1), (1, 2)])
    assert sorted(seen) == [(0, 0), (0, 1), (1, 0), (1, 1)]


@needs_lapack
@pytest.mark.parametrize("order", ["F", "column"])
def test_kernels_leave_inputs_whose_transpose_is_contiguous_untouched(order):
    # LAPACK overwrites the column-major copy it is handed: an input whose transposed view
    # is C-contiguous already (Fortran-ordered, or one column) must still be copied.
    x = RNG.standard_normal((6, 6) if order == "F" else (6, 1))
    x = np.asfortranarray(x) if order == "F" else x
    kept = x.copy()
    lu, piv, perm = _lapack.getrf(x)
    np.testing.assert_array_equal(x, kept)
    a, taus = _lapack.geqrf(x)
    np.testing.assert_array_equal(x, kept)
    q = _lapack.orgqr(a, taus)
    np.testing.assert_array_equal(x, kept)
    # and the results are right: P A = L U, A = Q R
    m, n = x.shape
    k = min(m, n)
    lower = np.tril(lu, -1)[:, :k] + np.eye(m, k)
    np.testing.assert_allclose(x[perm], lower @ np.triu(lu)[:k], atol=1e-12)
    np.testing.assert_allclose(q @ np.triu(a)[:k], x, atol=1e-12)
