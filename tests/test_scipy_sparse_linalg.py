"""ember.scipy.sparse.linalg (cg, bicgstab, gmres) against np.linalg.solve and NumPy loops.

Converged solutions are compared with ``np.linalg.solve``; results after a few iterations
(``maxiter``) with slow float64 NumPy versions of each method (for GMRES: the minimizer of the
preconditioned residual over the Krylov space, found by least squares, independently of the
Arnoldi process). Also: matrix-free and pytree operators, ``x0``, preconditioners, ``jit``,
``vmap``, derivatives (through ``custom_linear_solve``), errors, and JAX as an oracle.
"""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
import ember.scipy as jsp
from ember.scipy.sparse.linalg import bicgstab, cg, gmres

N = 6


def _gmres_incremental(A, b, x0=None, **kw):
    return gmres(A, b, x0, solve_method="incremental", **kw)


SOLVERS = {"cg": cg, "bicgstab": bicgstab, "gmres": gmres,
           "gmres_incremental": _gmres_incremental}


def _spd(n, dtype=np.float64, seed=0):
    m = np.random.default_rng(seed).normal(size=(n, n))
    return (m @ m.T / n + np.eye(n)).astype(dtype)


def _nonsymmetric(n, dtype=np.float64, seed=0):
    m = np.random.default_rng(seed).normal(size=(n, n))
    return (m / np.sqrt(n) + 3 * np.eye(n)).astype(dtype)


def _matrix(name, n=N, dtype=np.float64, seed=0):
    return (_spd if name == "cg" else _nonsymmetric)(n, dtype, seed)


def _vector(n=N, dtype=np.float64, seed=1):
    return np.random.default_rng(seed).normal(size=n).astype(dtype)


def _solve(a, b):
    return np.linalg.solve(np.asarray(a, np.float64), np.asarray(b, np.float64))


# ---------------------------------------------------------------- slow NumPy references


def _cg_ref(A, b, x, M, iters):
    r = b - A @ x
    z = M @ r
    p, gamma = z, r @ z
    for _ in range(iters):
        ap = A @ p
        alpha = gamma / (p @ ap)
        x, r = x + alpha * p, r - alpha * ap
        z = M @ r
        gamma, old = r @ z, gamma
        p = z + gamma / old * p
    return x


def _bicgstab_ref(A, b, x, M, iters):
    r = b - A @ x
    rhat, rho, alpha, omega = r.copy(), 1.0, 1.0, 1.0
    p, v = np.zeros_like(b), np.zeros_like(b)
    for _ in range(iters):
        rho, old = rhat @ r, rho
        p = r + (rho / old) * (alpha / omega) * (p - omega * v)
        phat = M @ p
        v = A @ phat
        alpha = rho / (rhat @ v)
        s = r - alpha * v
        shat = M @ s
        t = A @ shat
        omega = (t @ s) / (t @ t)
        x = x + alpha * phat + omega * shat
        r = s - omega * t
    return x


def _gmres_ref(A, b, x, M, restart, cycles):
    """Each cycle: x += argmin over V in the Krylov space K(MA, M r) of |M (b - A (x + V))|."""
    MA = M @ A
    for _ in range(cycles):
        r = M @ (b - A @ x)
        krylov = [r]
        for _ in range(restart - 1):
            krylov.append(MA @ krylov[-1])
        V = np.linalg.qr(np.stack(krylov, 1))[0]
        y = np.linalg.lstsq(MA @ V, r, rcond=None)[0]
        x = x + V @ y
    return x


# ---------------------------------------------------------------- the namespace


def test_import_paths():
    import ember.scipy.sparse.linalg as sla

    assert sla.cg is cg and sla.bicgstab is bicgstab and sla.gmres is gmres
    assert jsp.sparse.linalg is sla and ember.scipy.sparse.linalg is sla
    assert "sparse" in dir(jsp)
    assert sorted(sla.__all__) == ["bicgstab", "cg", "gmres"]


# ---------------------------------------------------------------- converged solutions


@pytest.mark.parametrize("name", SOLVERS)
def test_float32_matches_numpy_solve(name):
    a, b = _matrix(name, dtype=np.float32), _vector(dtype=np.float32)
    x, info = SOLVERS[name](a, b)
    assert x.dtype == np.float32 and x.shape == (N,)
    np.testing.assert_allclose(x, _solve(a, b), rtol=2e-4, atol=2e-5)
    if name.startswith("gmres"):
        assert int(info) == 0 and info.dtype == np.int32
    else:
        assert info is None


@pytest.mark.parametrize("name", SOLVERS)
def test_float64_matches_numpy_solve(name, x64):
    a, b = _matrix(name, n=10), _vector(n=10)
    x, _ = SOLVERS[name](a, b, tol=1e-12)
    assert x.dtype == np.float64
    np.testing.assert_allclose(x, _solve(a, b), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", SOLVERS)
def test_complex_matches_numpy_solve(name, x64):
    rng = np.random.default_rng(3)
    m = rng.normal(size=(N, N)) + 1j * rng.normal(size=(N, N))
    # cg: Hermitian positive definite; the others: a shifted nonsymmetric matrix.
    a = m @ m.conj().T / N + np.eye(N) if name == "cg" else m / np.sqrt(N) + 4 * np.eye(N)
    b = rng.normal(size=N) + 1j * rng.normal(size=N)
    x, _ = SOLVERS[name](a, b, tol=1e-12)
    assert x.dtype == np.complex128
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", SOLVERS)
def test_matrix_free_operator(name):
    # A 1-d Laplacian (symmetric) plus, for the nonsymmetric solvers, an upwind advection term.
    n, shift = 8, 0.0 if name == "cg" else 0.7

    def matvec(x):
        left = jnp.concatenate([jnp.zeros(1), x[:-1]])
        right = jnp.concatenate([x[1:], jnp.zeros(1)])
        return 3 * x - left - right + shift * (x - left)

    dense = (3 + shift) * np.eye(n) - (1 + shift) * np.eye(n, k=-1) - np.eye(n, k=1)
    b = _vector(n, np.float32)
    x, _ = SOLVERS[name](matvec, b, tol=1e-6)
    np.testing.assert_allclose(x, _solve(dense, b), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", SOLVERS)
def test_pytree_right_hand_side(name):
    a = _matrix(name, n=7, dtype=np.float32)
    flat_b = _vector(7, np.float32)
    b = {"u": flat_b[:3], "v": flat_b[3:].reshape(2, 2)}

    def matvec(t):
        y = a @ jnp.concatenate([t["u"], t["v"].ravel()])
        return {"u": y[:3], "v": y[3:].reshape(2, 2)}

    x, _ = SOLVERS[name](matvec, b, x0={"u": jnp.ones(3), "v": jnp.zeros((2, 2))})
    assert set(x) == {"u", "v"} and x["v"].shape == (2, 2)
    got = np.concatenate([np.asarray(x["u"]), np.asarray(x["v"]).ravel()])
    np.testing.assert_allclose(got, _solve(a, flat_b), rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("name", SOLVERS)
def test_x0(name, x64):
    a, b = _matrix(name), _vector()
    exact = _solve(a, b)
    # Starting at the solution: no iteration is needed.
    np.testing.assert_allclose(SOLVERS[name](a, b, x0=exact)[0], exact, rtol=1e-12)
    # With no iterations allowed, x0 comes back unchanged.
    x0 = _vector(seed=5)
    np.testing.assert_array_equal(SOLVERS[name](a, b, x0=x0, maxiter=0)[0], x0)
    np.testing.assert_allclose(SOLVERS[name](a, b, x0=x0, tol=1e-12)[0], exact, rtol=1e-9)


@pytest.mark.parametrize("name", SOLVERS)
def test_preconditioner(name, x64):
    # A badly scaled matrix; M: the Jacobi preconditioner, as a matrix and as a function.
    scale = np.logspace(0, 3, N)
    a = _matrix(name) * np.sqrt(scale)[:, None] * np.sqrt(scale)[None, :]
    b = _vector()
    inv_diag = 1 / np.diag(a)
    for M in (np.diag(inv_diag), lambda x: jnp.asarray(inv_diag) * x):
        x, _ = SOLVERS[name](a, b, tol=1e-12, M=M)
        np.testing.assert_allclose(x, _solve(a, b), rtol=1e-8)


# ---------------------------------------------------------------- partial solutions


@pytest.mark.parametrize("iters", [1, 3])
@pytest.mark.parametrize("with_m", [False, True])
def test_cg_iterations_match_numpy_loop(iters, with_m, x64):
    a, b, x0 = _spd(N), _vector(), _vector(seed=2)
    M = np.diag(1 / np.diag(a)) if with_m else np.eye(N)
    x, _ = cg(a, b, x0, maxiter=iters, M=M if with_m else None)
    np.testing.assert_allclose(x, _cg_ref(a, b, x0, M, iters), rtol=1e-10)


@pytest.mark.parametrize("iters", [1, 3])
@pytest.mark.parametrize("with_m", [False, True])
def test_bicgstab_iterations_match_numpy_loop(iters, with_m, x64):
    a, b, x0 = _nonsymmetric(N), _vector(), _vector(seed=2)
    M = np.diag(1 / np.diag(a)) if with_m else np.eye(N)
    x, _ = bicgstab(a, b, x0, tol=0.0, maxiter=iters, M=M if with_m else None)
    np.testing.assert_allclose(x, _bicgstab_ref(a, b, x0, M, iters), rtol=1e-10)


@pytest.mark.parametrize("solve_method", ["batched", "incremental"])
@pytest.mark.parametrize("restart,cycles", [(2, 1), (3, 2), (N, 1)])
@pytest.mark.parametrize("with_m", [False, True])
def test_gmres_cycles_match_krylov_least_squares(solve_method, restart, cycles, with_m, x64):
    a, b, x0 = _nonsymmetric(N, seed=4), _vector(), _vector(seed=2)
    M = np.diag(1 / np.diag(a)) + 0.05 * _nonsymmetric(N, seed=9) if with_m else np.eye(N)
    x, _ = gmres(a, b, x0, tol=0.0, restart=restart, maxiter=cycles,
                 M=M if with_m else None, solve_method=solve_method)
    np.testing.assert_allclose(x, _gmres_ref(a, b, x0, M, restart, cycles), rtol=1e-9)


@pytest.mark.parametrize("solve_method", ["batched", "incremental"])
def test_gmres_restarts_converge(solve_method, x64):
    a, b = _nonsymmetric(12, seed=6), _vector(12)
    x, info = gmres(a, b, tol=1e-12, restart=3, solve_method=solve_method)
    np.testing.assert_allclose(x, _solve(a, b), rtol=1e-9)
    assert int(info) == 0


def test_gmres_info_reports_nan():
    a, b = _nonsymmetric(N, np.float32), _vector(dtype=np.float32)
    x0 = np.zeros(N, np.float32)
    x0[2] = np.nan  # as in JAX: the NaN stops the iterations and comes back in x
    x, info = gmres(a, b, x0)
    assert int(info) == -1 and np.isnan(np.asarray(x)).any()


def test_zero_right_hand_side():
    a = _nonsymmetric(N, np.float32)
    for name, solver in SOLVERS.items():
        x, _ = solver(_spd(N, np.float32) if name == "cg" else a, np.zeros(N, np.float32))
        np.testing.assert_array_equal(x, np.zeros(N), err_msg=name)


# ---------------------------------------------------------------- transformations


@pytest.mark.parametrize("name", SOLVERS)
def test_jit(name):
    a, b = _matrix(name, dtype=np.float32), _vector(dtype=np.float32)
    solver = SOLVERS[name]
    jitted = ember.jit(lambda a, b, x0: solver(a, b, x0, tol=1e-6)[0])
    x = jitted(a, b, jnp.zeros(N))
    np.testing.assert_allclose(x, _solve(a, b), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(x, solver(a, b, jnp.zeros(N), tol=1e-6)[0], rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("name", SOLVERS)
def test_vmap_over_b_and_a(name):
    solver = SOLVERS[name]
    a = np.stack([_matrix(name, dtype=np.float32, seed=s) for s in range(3)])
    bs = np.stack([_vector(dtype=np.float32, seed=s) for s in range(3)])
    over_b = ember.vmap(lambda b: solver(a[0], b, tol=1e-6)[0])(bs)
    np.testing.assert_allclose(over_b, _solve(a[0], bs.T).T, rtol=1e-4, atol=1e-5)
    both = ember.jit(ember.vmap(lambda a, b: solver(a, b, tol=1e-6)[0]))(a, bs)
    want = np.stack([_solve(ai, bi) for ai, bi in zip(a, bs)])
    np.testing.assert_allclose(both, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", SOLVERS)
def test_gradients_match_analytic(name, x64):
    # For x = A^-1 b and loss w.x: d/db = A^-T w, d/dA = -outer(A^-T w, x).
    a, b, w = _matrix(name), _vector(), _vector(seed=7)
    solver = SOLVERS[name]

    def loss(a, b):
        return jnp.dot(w, solver(a, b, tol=1e-12)[0])

    ga, gb = ember.grad(loss, argnums=(0, 1))(a, b)
    lam = np.linalg.solve(a.T, w)
    np.testing.assert_allclose(gb, lam, rtol=1e-8)
    np.testing.assert_allclose(ga, -np.outer(lam, _solve(a, b)), rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("name", SOLVERS)
def test_jvp_matches_finite_differences(name, x64):
    a, b = _matrix(name), _vector()
    da = _nonsymmetric(N, seed=11) if name != "cg" else _spd(N, seed=11)
    db = _vector(seed=12)
    solver = SOLVERS[name]

    def f(a, b):
        return solver(a, b, tol=1e-13)[0]

    _, tangent = ember.jvp(f, (a, b), (da, db))
    eps = 1e-6
    fd = (_solve(a + eps * da, b + eps * db) - _solve(a - eps * da, b - eps * db)) / (2 * eps)
    np.testing.assert_allclose(tangent, fd, rtol=1e-6, atol=1e-8)


def test_gradient_through_matrix_free_operator_parameters(x64):
    # d/ds of sum(x) for (diag(d) + s*K) x = b, through a closure over s.
    d, b = np.linspace(2.0, 4.0, N), _vector()
    k = _nonsymmetric(N, seed=3) - 3 * np.eye(N)

    def loss(s):
        return jnp.sum(gmres(lambda x: jnp.asarray(d) * x + s * (k @ x), b, tol=1e-13)[0])

    eps = 1e-6

    def dense(s):
        return np.sum(_solve(np.diag(d) + s * k, b))

    np.testing.assert_allclose(ember.grad(loss)(0.3), (dense(0.3 + eps) - dense(0.3 - eps))
                               / (2 * eps), rtol=1e-6)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("name", ["cg", "bicgstab", "gmres"])
def test_errors_name_the_function(name):
    solver = SOLVERS[name]
    a, b = np.eye(3, dtype=np.float32), np.ones(3, np.float32)
    with pytest.raises(ValueError, match=f"{name}: arrays in x0 and b must have matching"):
        solver(a, b, x0=np.ones(4, np.float32))
    with pytest.raises(ValueError, match=f"{name}: x0 and b must have matching tree"):
        solver(a, b, x0={"x": b})
    with pytest.raises(ValueError, match=f"{name}: linear operator A must be a square"):
        solver(np.ones((3, 4), np.float32), b)
    with pytest.raises(TypeError, match=rf"{name}: matrix A of shape \(4, 4\) does not match"):
        solver(np.eye(4, dtype=np.float32), b)
    with pytest.raises(TypeError, match=f"{name}: linear operator A must be either"):
        solver("not a matrix", b)
    with pytest.raises(ValueError, match=f"{name}: linear operator M must be a square"):
        solver(a, b, M=np.ones(3, np.float32))


def test_gmres_bad_solve_method():
    with pytest.raises(ValueError, match="gmres: invalid solve_method 'lu'"):
        gmres(np.eye(2), np.ones(2), solve_method="lu")


# ---------------------------------------------------------------- JAX as an oracle


@pytest.mark.parametrize("name", SOLVERS)
@pytest.mark.parametrize("maxiter", [None, 2])
def test_matches_jax(jax, name, maxiter):
    import jax.scipy.sparse.linalg as jsla

    theirs_fn = {"cg": jsla.cg, "bicgstab": jsla.bicgstab, "gmres": jsla.gmres,
                 "gmres_incremental": lambda *a, **k: jsla.gmres(
                     *a, solve_method="incremental", **k)}[name]
    a, b = _matrix(name, dtype=np.float32), _vector(dtype=np.float32)
    kw = dict(maxiter=maxiter, restart=2) if name.startswith("gmres") else dict(maxiter=maxiter)
    x, info = SOLVERS[name](a, b, **kw)
    x_jax, info_jax = theirs_fn(a, b, **kw)
    np.testing.assert_allclose(x, x_jax, rtol=2e-4, atol=2e-5)
    assert (info is None) == (info_jax is None)
    if info is not None:
        assert int(info) == int(info_jax) and info.dtype == info_jax.dtype
    w = _vector(dtype=np.float32, seed=4)
    g = ember.grad(lambda b: jnp.dot(w, SOLVERS[name](a, b, **kw)[0]))(b)
    g_jax = jax.grad(lambda b: jax.numpy.dot(w, theirs_fn(a, b, **kw)[0]))(b)
    np.testing.assert_allclose(g, g_jax, rtol=2e-4, atol=2e-5)
