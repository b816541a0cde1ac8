"""Small matrix-vector products (``dot_with_vector_side``): jitted as a fused multiply and sum
instead of a BLAS call. Results against float64 NumPy, on both backends, with batch dims,
transposed layouts, widening inputs and gradients; large ones stay dots."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.compiler.passes.algebraic_simplifier import VECTOR_DOT_MAX_ELEMENTS

RNG = np.random.default_rng(7)

# (lhs dims, rhs dims, ((lhs contracting, rhs contracting), (lhs batch, rhs batch)))
CASES = [
    ((64, 256), (256,), (((1,), (0,)), ((), ()))),             # A @ v
    ((64,), (64, 256), (((0,), (0,)), ((), ()))),              # v @ W
    ((1, 64), (64, 256), (((1,), (0,)), ((), ()))),            # one row times W
    ((256, 64), (1, 64), (((1,), (1,)), ((), ()))),            # W @ x.T with x one row
    ((64, 128), (64,), (((0,), (0,)), ((), ()))),              # A.T @ v (a column sum)
    ((8, 16, 32), (8, 32), (((2,), (1,)), ((0,), (0,)))),      # batched A @ v
    ((16, 8, 32), (16, 8), (((0,), (0,)), ((1,), (1,)))),      # batch and k in other places
    ((4, 6, 5), (6, 5), (((1, 2), (0, 1)), ((), ()))),         # two contracting dims
    ((3, 1, 7), (7, 3, 40), (((2,), (0,)), ((0,), (1,)))),     # unit free dim, batched
]


def _reference(a, b, dims):
    (lc, rc), (lb, rb) = dims
    letters = iter("abcdefghijklmnop")
    la = [next(letters) for _ in a.shape]
    ra = [next(letters) for _ in b.shape]
    for x, y in zip(lc + lb, rc + rb):
        ra[y] = la[x]
    out = [la[d] for d in lb] + [la[d] for d in range(a.ndim) if d not in lc + lb] + \
        [ra[d] for d in range(b.ndim) if d not in rc + rb]
    spec = f"{''.join(la)},{''.join(ra)}->{''.join(out)}"
    return np.einsum(spec, a.astype(np.float64), b.astype(np.float64))


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vector_dot_matches_numpy(case, dtype, backend, x64):
    lhs, rhs, dims = CASES[case]
    a = RNG.standard_normal(lhs).astype(dtype)
    b = RNG.standard_normal(rhs).astype(dtype)
    f = ember.jit(lambda x, y: lax.dot_general(x, y, dims), backend=backend)
    got = np.asarray(f(a, b))
    want = _reference(a, b, dims)
    assert got.dtype == dtype and got.shape == want.shape
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
    text = f.lower(a, b).compile().as_text()
    assert "dot_general" not in text  # (fused: a multiply and a reduce)


def test_widening_vector_dot_converts_first():
    a = RNG.standard_normal((40, 24)).astype(jnp.bfloat16)
    v = RNG.standard_normal(24).astype(jnp.bfloat16)
    f = ember.jit(lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ())),
                                               preferred_element_type=jnp.float32))
    got = np.asarray(f(a, v))
    assert got.dtype == np.float32
    want = a.astype(np.float64) @ v.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_vector_dot_nan_and_inf_propagate():
    a = RNG.standard_normal((16, 8)).astype(np.float32)
    v = RNG.standard_normal(8).astype(np.float32)
    a[3, 2], a[5, 0], v[7] = np.nan, np.inf, 0.0
    a[9, 7] = np.inf  # inf * 0 is NaN
    got = np.asarray(ember.jit(jnp.dot)(a, v))
    with np.errstate(invalid="ignore"):  # (inf * 0 in the reference)
        want = a.astype(np.float64) @ v.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])


def test_large_matrix_vector_product_stays_a_dot():
    n = int(np.sqrt(VECTOR_DOT_MAX_ELEMENTS)) * 2
    a = RNG.standard_normal((n, n)).astype(np.float32)
    v = RNG.standard_normal(n).astype(np.float32)
    f = ember.jit(jnp.dot)
    assert "dot_general" in f.lower(a, v).compile().as_text()
    np.testing.assert_allclose(f(a, v), a.astype(np.float64) @ v, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["computed_rows", "computed_columns", "read_twice",
                                  "batched", "input"])
def test_large_computed_matrix_times_a_vector(case):
    # A large matrix computed elementwise for the product alone is summed where it is
    # computed (never written to memory), either side; read elsewhere too, batched, or an
    # input, it stays a dot.
    n = int(np.sqrt(VECTOR_DOT_MAX_ELEMENTS)) * 2
    x = RNG.standard_normal(n).astype(np.float32)
    y = RNG.standard_normal(n).astype(np.float32)
    a = RNG.standard_normal((n, n)).astype(np.float32)

    def kernel(m, x, y):
        return m.exp(-0.5 * m.subtract.outer(x, y) ** 2)
    fns = {
        "computed_rows": lambda m, x, y, a: kernel(m, x, y) @ y,
        "computed_columns": lambda m, x, y, a: y @ kernel(m, x, y),
        "read_twice": lambda m, x, y, a: (lambda k: (k @ y, k * 2))(kernel(m, x, y)),
        "batched": lambda m, x, y, a: m.matmul(m.tanh(m.stack([a, a * 2])),
                                               m.stack([y, x])[..., None])[..., 0],
        "input": lambda m, x, y, a: a @ y,
    }
    f = ember.jit(lambda *args: fns[case](jnp, *args))
    got = f(x, y, a)
    want = fns[case](np, *(v.astype(np.float64) for v in (x, y, a)))
    for g, w in zip(*(v if isinstance(v, tuple) else (v,) for v in (got, want))):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-4)
    fused = case in ("computed_rows", "computed_columns")
    assert ("dot_general" in f.lower(x, y, a).compile().as_text()) != fused


def test_small_mlp_with_one_row_and_its_gradient():
    w1 = RNG.standard_normal((16, 64)).astype(np.float32) * 0.3
    w2 = RNG.standard_normal((64, 8)).astype(np.float32) * 0.3
    x = RNG.standard_normal((1, 16)).astype(np.float32)

    def f(w1, w2, x):
        return jnp.sum(jnp.tanh(jnp.tanh(x @ w1) @ w2) ** 2)

    def f64(w1, w2, x):
        return np.sum(np.tanh(np.tanh(x @ w1) @ w2) ** 2)

    value, (g1, g2) = ember.jit(ember.value_and_grad(f, argnums=(0, 1)))(w1, w2, x)
    p = [w.astype(np.float64) for w in (w1, w2, x)]
    np.testing.assert_allclose(value, f64(*p), rtol=1e-5)
    eps = 1e-6
    for k, g in ((0, g1), (1, g2)):
        for idx in [(0, 0), (3, 5), (7, 2)]:
            up = [q.copy() for q in p]
            down = [q.copy() for q in p]
            up[k][idx] += eps
            down[k][idx] -= eps
            fd = (f64(*up) - f64(*down)) / (2 * eps)
            np.testing.assert_allclose(np.asarray(g)[idx], fd, rtol=1e-3, atol=1e-4)


def test_vmapped_matrix_vector_products():
    a = RNG.standard_normal((10, 12, 20)).astype(np.float32)
    v = RNG.standard_normal((10, 20)).astype(np.float32)
    got = ember.jit(ember.vmap(jnp.dot))(a, v)
    want = np.einsum("bij,bj->bi", a.astype(np.float64), v)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch,m,k", [(300, 16, 16), (40, 64, 48), (8, 200, 100), (500, 8, 8)])
def test_batched_matvecs_match_numpy_without_a_transposed_copy(batch, m, k):
    # vmap(A @ x) and einsum over A's transpose: the transpose folds into the dot (no copy of
    # A), and matrices of >= VECTOR_DOT_MIN_BATCHED_MATRIX elements per batch element are
    # multiplied and summed in one fused pass.
    rng = np.random.default_rng(batch)
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    x = rng.standard_normal((batch, k)).astype(np.float32)
    want = np.einsum("bmk,bk->bm", a.astype(np.float64), x)
    via_vmap = ember.jit(ember.vmap(lambda a, x: jnp.tanh(a @ x)))
    np.testing.assert_allclose(np.asarray(via_vmap(a, x)), np.tanh(want), rtol=2e-5, atol=2e-5)
    via_einsum = ember.jit(lambda a, x: jnp.einsum("bk,bkm->bm", x, a.transpose(0, 2, 1)))
    np.testing.assert_allclose(np.asarray(via_einsum(a, x)), want, rtol=2e-5, atol=2e-5)
    text = via_einsum.lower(a, x).compile().as_text()
    assert "transpose(" not in text


@pytest.mark.parametrize("perm", [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1),
                                  (2, 1, 0)])
@pytest.mark.parametrize("side", [0, 1])
def test_dot_general_of_a_transposed_operand(perm, side):
    # dot_general(transpose(x), y) with batch, contracting and free dims in each place: the
    # transpose folds into the dimension numbers where the free dims keep their order
    # (``dot_of_transpose``); the values are NumPy's either way.
    rng = np.random.default_rng(sum(perm) * 2 + side)
    t = rng.standard_normal((3, 4, 5)).astype(np.float32)
    xt_shape = tuple(t.shape[p] for p in perm)  # transpose(t, perm) has these dims
    # The transposed operand: dim 0 batch, dim 1 contracting, dim 2 free.
    other = rng.standard_normal((xt_shape[0], xt_shape[1], 6)).astype(np.float32)
    dims = (((1,), (1,)), ((0,), (0,)))

    def f(t, other):
        xt = lax.transpose(t, perm)
        if side == 0:
            return lax.dot_general(xt, other, dims)
        return lax.dot_general(other, xt, dims)

    xt = np.transpose(t, perm).astype(np.float64)
    want = (np.einsum("bkm,bkn->bmn", xt, other) if side == 0
            else np.einsum("bkn,bkm->bnm", other, xt))
    np.testing.assert_allclose(np.asarray(ember.jit(f)(t, other)), want, rtol=2e-5,
                               atol=2e-5)


@pytest.mark.parametrize("batch", [None, 3])
def test_matrix_times_its_own_transpose(batch):
    # The operands are one buffer: the product goes to BLAS gemm on a copy of one side
    # (NumPy would pick syrk, ~2x slower in OpenBLAS), jitted and eager.
    shape = (300, 70) if batch is None else (batch, 300, 70)
    a = RNG.standard_normal(shape).astype(np.float32)
    f = ember.jit(lambda a: a @ jnp.swapaxes(a, -1, -2))
    want = a.astype(np.float64) @ np.swapaxes(a, -1, -2).astype(np.float64)
    np.testing.assert_allclose(np.asarray(f(a)), want, rtol=1e-4, atol=1e-4)
    x = jnp.asarray(a)  # (eagerly too: the evaluator's dot)
    np.testing.assert_allclose(np.asarray(x @ jnp.swapaxes(x, -1, -2)), want, rtol=1e-4,
                               atol=1e-4)
    g = ember.jit(lambda a: jnp.swapaxes(a, -1, -2) @ a)
    want = np.swapaxes(a, -1, -2).astype(np.float64) @ a.astype(np.float64)
    np.testing.assert_allclose(np.asarray(g(a)), want, rtol=1e-4, atol=1e-4)
