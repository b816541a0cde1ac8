"""Loop bodies with BLAS dots run as native loops: each plain matrix product calls CBLAS
``gemm`` from the loop's native code (``program.gemm_layout``), with a Python-stepped
fallback where the process has no such BLAS. Checked against NumPy loops and JAX."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax, nn
from ember.backends import cpu as cpu_backend
from ember.backends.cpu import executable as X
from ember.backends.cpu import gemm_kernel
from ember.backends.cpu.executable import DotPlan, WhilePlan, nested_steps
from ember.backends.cpu.program import EXPENSIVE_OP_COST, _element_cost, gemm_layout
from ember.compiler.hlo import Instruction, Shape
from tests.backends.cpu.helpers import x64 as enable_x64


@pytest.fixture(autouse=True)
def _blas_products(monkeypatch):
    # (the products here stay with BLAS, whose paths this file checks; ember's own gemm
    # is ``test_native_gemm.py``'s)
    monkeypatch.setenv(gemm_kernel.GEMM_ENV, "blas")


def _dot(lhs_dims, rhs_dims, lc, rc, dtype=np.float32, lb=(), rb=()):
    """A ``dot_general`` instruction over parameters of the given dims."""
    lhs = Instruction("parameter", [], Shape(dtype, lhs_dims), {"index": 0})
    rhs = Instruction("parameter", [], Shape(dtype, rhs_dims), {"index": 1})
    free_l = [lhs_dims[d] for d in range(len(lhs_dims)) if d not in lc and d not in lb]
    free_r = [rhs_dims[d] for d in range(len(rhs_dims)) if d not in rc and d not in rb]
    dims = tuple([lhs_dims[d] for d in lb] + free_l + free_r)
    attrs = {"lhs_contracting_dimensions": tuple(lc), "rhs_contracting_dimensions": tuple(rc),
             "lhs_batching_dimensions": tuple(lb), "rhs_batching_dimensions": tuple(rb)}
    return Instruction("dot_general", [lhs, rhs], Shape(dtype, dims), attrs)


def test_gemm_layout_of_each_transpose():
    # (letter, trans_a, trans_b, m, n, k, lda, ldb, batch, batches)
    assert gemm_layout(_dot((3, 5), (5, 7), [1], [0])) == (
        "s", False, False, 3, 7, 5, 5, 7, 1, ())
    assert gemm_layout(_dot((5, 3), (5, 7), [0], [0])) == (
        "s", True, False, 3, 7, 5, 3, 7, 1, ())
    assert gemm_layout(_dot((3, 5), (7, 5), [1], [1])) == (
        "s", False, True, 3, 7, 5, 5, 5, 1, ())
    assert gemm_layout(_dot((5, 3), (7, 5), [0], [1], np.float64)) == (
        "d", True, True, 3, 7, 5, 3, 5, 1, ())
    # Several free or contracting dims, in memory order: one matrix each.
    assert gemm_layout(_dot((2, 3, 4, 5), (4, 5, 6), [2, 3], [0, 1])) == (
        "s", False, False, 6, 6, 20, 20, 6, 1, ())
    # One instruction read twice (``x @ x``): each side keeps its own layout.
    square = _dot((4, 4), (4, 4), [1], [0])
    square.operands[1] = square.operands[0]
    assert gemm_layout(square) == ("s", False, False, 4, 4, 4, 4, 4, 1, ())
    # A vector operand: m = 1; a vector lies contiguous (so ``gemv`` reads it in order).
    assert gemm_layout(_dot((5,), (5, 7), [0], [0])) == (
        "s", False, False, 1, 7, 5, 5, 7, 1, ())
    assert gemm_layout(_dot((3, 5), (5,), [1], [0])) == (
        "s", False, True, 3, 1, 5, 5, 5, 1, ())


def test_gemm_layout_of_leading_batch_dims():
    assert gemm_layout(_dot((2, 3, 5), (2, 5, 7), [2], [1], lb=[0], rb=[0])) == (
        "s", False, False, 3, 7, 5, 5, 7, 2, ((2, 15, 35),))
    # attention's scores: q @ k.T per (batch, head): the two batch dims merge
    assert gemm_layout(_dot((4, 8, 16, 6), (4, 8, 9, 6), [3], [3], lb=[0, 1], rb=[0, 1])) == (
        "s", False, True, 16, 9, 6, 6, 6, 32, ((32, 96, 54),))
    # a batch of matrix-vector products: n = 1
    assert gemm_layout(_dot((6, 3, 5), (6, 5), [2], [1], lb=[0], rb=[0])) == (
        "s", False, True, 3, 1, 5, 5, 5, 6, ((6, 15, 5),))


def test_gemm_layout_of_batch_dims_anywhere():
    # attention's scores on (batch, seq, heads, dim) operands: each (batch, head)'s matrix
    # has rows 8 * 6 = 48 elements apart
    assert gemm_layout(_dot((4, 16, 8, 6), (4, 9, 8, 6), [3], [3], lb=[0, 2], rb=[0, 2])) == (
        "s", False, True, 16, 9, 6, 48, 48, 32, ((4, 768, 432), (8, 6, 6)))
    # a batch dim between the free and the contracting dims; another order on each side
    assert gemm_layout(_dot((3, 2, 5), (2, 5, 7), [2], [1], lb=[1], rb=[0])) == (
        "s", False, False, 3, 7, 5, 10, 7, 2, ((2, 5, 35),))
    assert gemm_layout(_dot((2, 3, 4, 5), (3, 2, 5, 7), [3], [2], lb=[0, 1],
                            rb=[1, 0])) == (
        "s", False, False, 4, 7, 5, 5, 7, 6, ((2, 60, 35), (3, 20, 70)))
    # size-1 batch dims drop out
    assert gemm_layout(_dot((1, 2, 3, 5), (1, 2, 5, 7), [3], [2], lb=[0, 1],
                            rb=[0, 1])) == ("s", False, False, 3, 7, 5, 5, 7, 2, ((2, 15, 35),))
    # a vector strided by a batch dim: lying "transposed", its elements lda apart
    assert gemm_layout(_dot((5, 3), (3, 5, 7), [0], [1], lb=[1], rb=[0])) == (
        "s", True, False, 1, 7, 5, 3, 7, 3, ((3, 1, 35),))


def test_gemm_layout_declines_what_one_gemm_cannot_read():
    assert gemm_layout(_dot((4, 5, 6), (6, 5), [2, 1], [0, 1])) is None  # reordered k
    assert gemm_layout(_dot((4, 5, 6), (6, 3), [1], [1])) is None  # k between free dims
    # a batch dim between two contracting dims, or the minor one
    assert gemm_layout(_dot((5, 2, 6), (2, 5, 6, 3), [0, 2], [1, 2], lb=[1],
                            rb=[0])) is None
    assert gemm_layout(_dot((3, 5, 2), (2, 5, 7), [1], [1], lb=[2], rb=[0])) is None
    assert gemm_layout(_dot((3, 5), (5, 7), [1], [0], np.int32)) is None
    assert gemm_layout(_dot((3, 5), (5, 7), [1], [0], np.float16)) is None
    assert gemm_layout(_dot((0, 5), (5, 7), [1], [0])) is None  # empty
    assert gemm_layout(_dot((3, 0), (0, 7), [1], [0])) is None
    assert gemm_layout(_dot((0, 3, 5), (0, 5, 7), [2], [1], lb=[0], rb=[0])) is None


def _lstm(W, U, xs, h0, c0):
    def step(c, x):
        h, cc = c
        z = x @ W + h @ U
        i, f, g, o = jnp.split(z, 4, axis=-1)
        cc = nn.sigmoid(f) * cc + nn.sigmoid(i) * jnp.tanh(g)
        h = nn.sigmoid(o) * jnp.tanh(cc)
        return (h, cc), h
    return lax.scan(step, (h0, c0), xs)[1]


def _lstm_numpy(W, U, xs, h, c):
    def sig(v):
        return 1 / (1 + np.exp(-v))
    W, U, h, c = (a.astype(np.float64) for a in (W, U, h, c))
    out = []
    for x in xs.astype(np.float64):
        i, f, g, o = np.split(x @ W + h @ U, 4, axis=-1)
        c = sig(f) * c + sig(i) * np.tanh(g)
        h = sig(o) * np.tanh(c)
        out.append(h)
    return np.stack(out)


def _lstm_data(dtype=np.float32, steps=6, batch=16, n_in=24, hidden=64):
    """Dots big enough for BLAS (smaller ones are kernels of the loop: ``_loop_dot``)."""
    rng = np.random.default_rng(3)
    return [(rng.standard_normal(s) * 0.5).astype(dtype) for s in
            ((n_in, 4 * hidden), (hidden, 4 * hidden), (steps, batch, n_in),
             (batch, hidden), (batch, hidden))]


def _native_dots(fn, *args):
    """``(loops, dots)`` of ``fn``'s compiled program: its while plans, its dot plans."""
    exe = ember.jit(fn).lower(*args).compile()._executable.executable
    steps = list(nested_steps(exe.program.steps))
    return [s for s in steps if type(s) is WhilePlan], [s for s in steps if type(s) is DotPlan]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lstm_scan_matches_a_numpy_loop(dtype):
    with enable_x64(dtype == np.float64):
        _check_lstm_scan(dtype)


def _check_lstm_scan(dtype):
    args = _lstm_data(dtype)
    got = np.asarray(ember.jit(_lstm)(*args))
    assert got.dtype == dtype
    want = _lstm_numpy(*args)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    # (the next runs, on the optimized code, give the same bits)
    ember.backends.get_backend("cpu").wait_for_background()
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(ember.jit(_lstm)(*args)), got)


def test_lstm_loop_is_native_with_gemm_calls():
    args = _lstm_data()
    loops, dots = _native_dots(_lstm, *args)
    assert loops and all(loop.loop is not None for loop in loops)
    assert len(dots) == 2 and all(d.gemm is not None and d.gemm[0] == "s" for d in dots)
    with enable_x64(True):
        loops, dots = _native_dots(_lstm, *_lstm_data(np.float64))
    assert len(dots) == 2 and all(d.gemm is not None and d.gemm[0] == "d" for d in dots)


def test_lstm_grad_matches_jax():
    jax = pytest.importorskip("jax")
    import jax.numpy as jjnp

    def loss(np_mod, lax_mod, nn_mod):
        def f(W, U, xs, h0, c0):
            def step(c, x):
                h, cc = c
                i, f_, g, o = np_mod.split(x @ W + h @ U, 4, axis=-1)
                cc = nn_mod.sigmoid(f_) * cc + nn_mod.sigmoid(i) * np_mod.tanh(g)
                h = nn_mod.sigmoid(o) * np_mod.tanh(cc)
                return (h, cc), h
            return (lax_mod.scan(step, (h0, c0), xs)[1] ** 2).sum()
        return f
    args = _lstm_data()
    got = ember.jit(ember.grad(loss(jnp, lax, nn), argnums=(0, 1, 2)))(*args)
    want = jax.jit(jax.grad(loss(jjnp, jax.lax, jax.nn), argnums=(0, 1, 2)))(*args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=2e-5)
    loops, dots = _native_dots(ember.grad(loss(jnp, lax, nn), argnums=(0, 1, 2)), *args)
    # (the backward loop's dots read transposed operands: gemm's transpose flags)
    assert any(d.gemm is not None and (d.gemm[1] or d.gemm[2]) for d in dots)
    assert all(loop.loop is not None for loop in loops)


def test_without_blas_routines_the_loop_steps_from_python(monkeypatch):
    args = _lstm_data(steps=4)
    want = _lstm_numpy(*args)
    monkeypatch.setattr(X, "blas_address", lambda routine: 0)

    def fresh(W, U, xs, h0, c0):  # (a module no other test compiles)
        return _lstm(W, U, xs, h0, c0) * np.float32(1.0)
    compiled = ember.jit(fresh).lower(*args).compile()
    exe = compiled._executable.executable
    loops = [s for s in exe._steps if type(s) is tuple and type(s[0]) is WhilePlan]
    assert loops and all(prepared[2] is None for _, prepared in loops)  # (no native loop)
    assert exe._entry is None
    np.testing.assert_allclose(np.asarray(compiled(*args)), want, rtol=1e-5, atol=1e-5)


def test_dot_layouts_in_a_loop_match_numpy():
    # Each operand transposed or not, and a 3-D operand read as one matrix.
    rng = np.random.default_rng(0)
    # (dots of more than ``LOOP_DOT_MAX_WORK`` products: smaller ones are loop kernels)
    a, b = (rng.standard_normal((48, 48)).astype(np.float32) * 0.2 for _ in range(2))
    t = rng.standard_normal((2, 24, 48)).astype(np.float32)

    def f(a, b, t):
        def body(i, c):
            x, y, z = c
            x = jnp.tanh(lax.dot_general(x, b, (((1,), (1,)), ((), ()))))
            y = jnp.tanh(lax.dot_general(a, y, (((0,), (0,)), ((), ()))) + x)
            z = jnp.tanh(lax.dot_general(z, b, (((2,), (0,)), ((), ()))))
            w = jnp.tanh(lax.dot_general(x, y, (((0,), (1,)), ((), ()))))
            return x, y + w, z
        return lax.fori_loop(0, 3, body, (a, b, t))

    def f_np(a, b, t):
        x, y, z = (v.astype(np.float64) for v in (a, b, t))
        for _ in range(3):
            x = np.tanh(x @ b.T)
            y = np.tanh(a.T @ y + x)
            z = np.tanh(z @ b)
            y = y + np.tanh(x.T @ y.T)
        return x, y, z
    got = ember.jit(f)(a, b, t)
    for g, w in zip(got, f_np(a, b, t)):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)
    loops, dots = _native_dots(f, a, b, t)
    assert loops and all(loop.loop is not None for loop in loops)
    layouts = {d.gemm[1:3] for d in dots if d.gemm is not None}
    assert {(False, True), (True, False), (True, True)} <= layouts


@pytest.mark.parametrize("n", [40, 192])
def test_products_outside_loops_run_in_one_native_call(n, monkeypatch):
    # Products of one gemm task (``gemm_split``) and small kernels run as one native call on
    # the calling thread (each operand transposed or not); with a larger product, the
    # program runs as one call of its steps function, the product one CBLAS call on
    # BLAS's threads (192^3: past ``SINGLE_THREAD_GEMM_MAX_PRODUCTS``).
    monkeypatch.setattr(cpu_backend, "TIERED_COMPILATION", False)  # (one executable)
    rng = np.random.default_rng(n)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))

    def f(a, b):
        return jnp.tanh(a @ b.T) + 1.0, b.T @ a, (a.T @ b.T) @ a

    compiled = ember.jit(f).lower(a, b).compile()
    exe = compiled._executable.executable
    dots = [s for s in exe.program.steps if type(s) is DotPlan]
    assert len(dots) == 4 and all(d.gemm is not None for d in dots)
    assert all(X.whole_gemm(d.gemm) == (n == 192) for d in dots)
    assert (exe._entry is not None) == (n == 40)
    assert (exe._steps_fn is not None) == (n == 192) and exe._steps_whole == (n == 192)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = (np.tanh(a64 @ b64.T) + 1.0, b64.T @ a64, (a64.T @ b64.T) @ a64)
    for _ in range(3):  # (the first run steps from Python; then the single-call runner)
        for g, w in zip(compiled(a, b), want):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-4 * n)
    assert (compiled._executable.executable._runner is not None) == (n == 40)


def _split(m, n, k, batch=1):
    return X.gemm_split(("s", False, False, m, n, k, k, n, batch))


def test_gemm_split_depends_on_the_shape_only():
    assert _split(32, 512, 64) == (False, 16, 2)
    assert _split(32, 512, 128) == (False, 16, 4)
    assert _split(200, 40, 256) == (True, 7, 3)
    assert _split(8, 8, 8) == (False, 1, 1)
    assert _split(4096, 4096, 4096)[2] == X.GEMM_MAX_TASKS
    # a batch: each matrix's units, matrix after matrix
    assert _split(128, 128, 64, batch=32) == (False, 128, X.GEMM_MAX_TASKS)
    assert _split(100, 40, 64, batch=3) == (True, 12, 1)
    assert _split(8, 8, 8, batch=5) == (False, 5, 1)


@pytest.mark.parametrize("batch, m, n, k, trans", [(3, 200, 40, 256, False),
                                                   (5, 24, 300, 256, True),
                                                   (32, 72, 72, 64, True)])
def test_a_batched_gemm_cut_into_tasks_matches_numpy(batch, m, n, k, trans):
    # Tasks whose units span matrices (ragged last units), transposed operands; in a native
    # loop and at the top level (the parallel runtime's tasks).
    assert _split(m, n, k, batch)[2] > 1
    rng = np.random.default_rng(m + n + batch)
    a = rng.standard_normal((batch, k, m) if trans else (batch, m, k)).astype(np.float32)
    b = rng.standard_normal((batch, n, k) if trans else (batch, k, n)).astype(np.float32)
    dims = (((1,), (2,)), ((0,), (0,))) if trans else (((2,), (1,)), ((0,), (0,)))

    def f(a, b):
        def body(i, c):
            return c + lax.dot_general(a * (i + 1.0), b, dims)
        return lax.fori_loop(0, 3, body, jnp.zeros((batch, m, n), jnp.float32))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    once = np.matmul(a64.transpose(0, 2, 1) if trans else a64,
                     b64.transpose(0, 2, 1) if trans else b64)
    np.testing.assert_allclose(np.asarray(ember.jit(f)(a, b)), 6 * once, rtol=1e-4, atol=1e-3)
    loops, dots = _native_dots(f, a, b)
    assert [loop.loop is not None for loop in loops] == [True]
    assert [d.gemm[8] for d in dots] == [batch]
    top = ember.jit(lambda a, b: lax.dot_general(a, b, dims))
    np.testing.assert_allclose(np.asarray(top(a, b)), once, rtol=1e-4, atol=1e-4)
    assert [d.gemm[8] for d in top.lower(a, b).compile()._executable.executable.program.steps
            if type(d) is DotPlan] == [batch]


@pytest.mark.parametrize("m, n, k, trans", [(200, 40, 256, False), (24, 300, 256, True),
                                            (200, 40, 256, True)])
def test_a_gemm_cut_into_tasks_matches_numpy(m, n, k, trans):
    # Ragged last units (200 rows, 300 columns in units of 32), transposed operands.
    assert _split(m, n, k)[2] > 1
    rng = np.random.default_rng(m + n)
    a = rng.standard_normal((k, m) if trans else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans else (k, n)).astype(np.float32)
    dims = (((0,), (1,)), ((), ())) if trans else (((1,), (0,)), ((), ()))

    def f(a, b):
        def body(i, c):
            return c + lax.dot_general(a * (i + 1.0), b, dims)
        return lax.fori_loop(0, 3, body, jnp.zeros((m, n), jnp.float32))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = 6 * ((a64.T if trans else a64) @ (b64.T if trans else b64))
    got = np.asarray(ember.jit(f)(a, b))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    loops, dots = _native_dots(f, a, b)
    assert all(loop.loop is not None for loop in loops)
    assert [d.gemm[1:3] for d in dots] == [(trans, trans)]
    ember.backends.get_backend("cpu").wait_for_background()
    np.testing.assert_array_equal(np.asarray(ember.jit(f)(a, b)), got)  # (optimized code)


def test_a_matrix_power_in_a_native_loop():
    # ``m @ m``: both operands one buffer; the loop runs native.
    rng = np.random.default_rng(1)
    m = (rng.standard_normal((48, 48)) * 0.3).astype(np.float32)

    def f(m):
        return lax.fori_loop(0, 3, lambda i, m: (m @ m) * 0.125, m)
    want = m.astype(np.float64)
    for _ in range(3):
        want = want @ want * 0.125
    np.testing.assert_allclose(np.asarray(ember.jit(f)(m)), want, rtol=1e-5, atol=1e-7)
    loops, dots = _native_dots(f, m)
    assert [loop.loop is not None for loop in loops] == [True]
    assert [d.gemm for d in dots] == [("s", False, False, 48, 48, 48, 48, 48, 1, ())]


def test_element_cost_weighs_expensive_ops():
    from ember.compiler.parser import parse_module
    module = parse_module("""HloModule m

ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8] parameter(0)
  %t = f32[8] tanh(%x)
  %s = f32[8] logistic(%t)
  %m = f32[8] multiply(%s, %x)
  ROOT %a = f32[8] add(%m, %x)
}
""")
    assert _element_cost(module.entry) == 1 + 2 * EXPENSIVE_OP_COST


def test_element_cost_counts_complex_magnitudes():
    # |z| of a complex z is a square root (in float64 for complex64); real abs is cheap
    from ember.compiler.parser import parse_module
    module = parse_module("""HloModule m

ENTRY %main (z: c64[8], x: f32[8]) -> f32[8] {
  %z = c64[8] parameter(0)
  %x = f32[8] parameter(1)
  %m = f32[8] abs(%z)
  %r = f32[8] abs(%x)
  ROOT %a = f32[8] add(%m, %r)
}
""")
    assert _element_cost(module.entry) == 1 + EXPENSIVE_OP_COST


def test_mandelbrot_loop_with_threaded_complex_kernels_matches_numpy():
    re = np.linspace(-2, 1, 300, dtype=np.float32)
    im = np.linspace(-1.5, 1.5, 200, dtype=np.float32)

    def mandelbrot(re, im):
        c = re[None, :] + 1j * im[:, None]

        def body(s):
            z, n, i = s
            z = jnp.where(jnp.abs(z) < 2, z * z + c, z)
            return z, n + (jnp.abs(z) < 2), i + 1
        init = (jnp.zeros_like(c), jnp.zeros(c.shape, jnp.int32), 0)
        return lax.while_loop(lambda s: s[2] < 30, body, init)[:2]

    z, n = ember.jit(mandelbrot)(re, im)
    c = (re[None, :] + 1j * im[:, None]).astype(np.complex64)
    zz, nn = np.zeros_like(c), np.zeros(c.shape, np.int32)
    for _ in range(30):
        zz = np.where(np.abs(zz) < 2, zz * zz + c, zz)
        nn += np.abs(zz) < 2
    # (a point on the escape boundary may round either way in float32: a handful)
    assert (np.asarray(n) != nn).sum() <= 3
    # (deep inside the set the orbits converge; near its boundary they are chaotic)
    inside = np.abs(c) < 0.25
    np.testing.assert_allclose(np.asarray(z)[inside], zz[inside], rtol=1e-4, atol=1e-5)


def _rnn_loss(W, xs):
    def step(h, x):
        h = jnp.tanh(h @ W + x)
        return h, h
    _, hs = lax.scan(step, jnp.zeros((16, 64), xs.dtype), xs)
    return jnp.sum(hs ** 2)


def _rnn_grad_numpy(W, xs):
    """Backpropagation through time in float64."""
    W, xs = W.astype(np.float64), xs.astype(np.float64)
    hs, h = [], np.zeros((16, 64))
    for x in xs:
        h = np.tanh(h @ W + x)
        hs.append(h)
    dW, dh = np.zeros_like(W), np.zeros((16, 64))
    for t in range(len(xs) - 1, -1, -1):
        dh = dh + 2 * hs[t]
        dz = dh * (1 - hs[t] ** 2)
        prev = hs[t - 1] if t else np.zeros((16, 64))
        dW += prev.T @ dz
        dh = dz @ W.T
    return dW


def test_rnn_grad_loop_calls_gemm_for_the_transposed_weight():
    # (``dh @ W.T`` as a loop kernel read W a row apart per vector lane: 30 us a step)
    rng = np.random.default_rng(3)
    W = (rng.standard_normal((64, 64)) * 0.1).astype(np.float32)
    xs = rng.standard_normal((40, 16, 64)).astype(np.float32)
    got = np.asarray(ember.jit(ember.grad(_rnn_loss))(W, xs))
    np.testing.assert_allclose(got, _rnn_grad_numpy(W, xs), rtol=2e-4, atol=2e-4)
    loops, dots = _native_dots(ember.grad(_rnn_loss), W, xs)
    assert all(loop.loop is not None for loop in loops)
    assert any(d.gemm is not None and d.gemm[2] for d in dots)  # (W read transposed)


def _gauss_seidel(u, sweeps):
    def body(i, u):
        j = i % (u.shape[0] - 2) + 1
        left = lax.dynamic_slice(u, (j - 1,), (1,))
        right = lax.dynamic_slice(u, (j + 1,), (1,))
        return lax.dynamic_update_slice(u, (left + right) * 0.5, (j,))
    return lax.fori_loop(0, sweeps, body, u)


def test_one_element_kernels_inline_into_the_loop_and_match_numpy(tmp_path, monkeypatch):
    # The loop's one-element kernels (counter, index, slices) may be inlined into its body;
    # each step reads the element the previous step wrote.
    import glob
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    u = np.random.default_rng(3).standard_normal(40).astype(np.float32)
    got = np.asarray(ember.jit(_gauss_seidel, static_argnums=1)(u, 500))
    want = u.copy()
    for i in range(500):
        j = i % 38 + 1
        want[j] = (want[j - 1] + want[j + 1]) * np.float32(0.5)
    np.testing.assert_array_equal(got, want)
    text = open(glob.glob(str(tmp_path / "*.llvm.ll"))[0]).read()
    kernels = [line for line in text.splitlines() if line.startswith("define void")
               and "_kernel_" in line]
    assert kernels and not any("noinline" in line for line in kernels)
    # A kernel over more elements stays out of line (threads call it on ranges).
    ember.jit(lambda x: jnp.tanh(x) * 2)(np.ones(1000, np.float32))
    big = [open(f).read() for f in glob.glob(str(tmp_path / "*.llvm.ll"))]
    assert any("noinline" in t for t in big)
