"""ember's own ``gemm`` (``gemm_kernel``): CBLAS's meaning for every flag, checked against
float64 NumPy; the same bits for any block of the output a call computes (what lets a
product run one task per thread); and the products of jitted programs that take it."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu import gemm_kernel
from ember.backends.cpu.executable import _ffi

ROW, COL, NO, TRANS = 101, 102, 111, 112
rng = np.random.default_rng(11)


def _routine(dtype):
    letter = "s" if dtype == np.float32 else "d"
    address = gemm_kernel.address(letter)
    assert address
    c = "float" if letter == "s" else "double"
    return _ffi.cast(f"void(*)(int, int, int, int64_t, int64_t, int64_t, {c}, {c}*, int64_t, "
                     f"{c}*, int64_t, {c}, {c}*, int64_t)", address)


def _ptr(x, offset=0):
    c = "float*" if x.dtype == np.float32 else "double*"
    return _ffi.cast(c, x.ctypes.data + offset * x.itemsize)


def _call(dtype, order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, offsets=(0, 0, 0)):
    _routine(dtype)(order, ta, tb, m, n, k, alpha, _ptr(a, offsets[0]), lda,
                    _ptr(b, offsets[1]), ldb, beta, _ptr(c, offsets[2]), ldc)


def _gemm(a, b, trans_a=False, trans_b=False, alpha=1.0, beta=0.0, c=None):
    """op(a) @ op(b) through the routine, row-major, ``a``/``b`` as stored."""
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    n = b.shape[0] if trans_b else b.shape[1]
    c = np.empty((m, n), a.dtype) if c is None else c
    _call(a.dtype, ROW, TRANS if trans_a else NO, TRANS if trans_b else NO, m, n, k, alpha,
          a, a.shape[1], b, b.shape[1], beta, c, n)
    return c


def _tolerance(dtype, k):
    eps = np.finfo(dtype).eps
    return 4 * eps * np.sqrt(k) * 3  # (|a|, |b| ~ 1: sums of k products of unit size)


SHAPES = [(1, 1, 1), (5, 7, 3), (13, 31, 2), (14, 32, 256), (15, 33, 257), (29, 65, 511),
          (141, 70, 40), (3, 1100, 20), (300, 40, 600)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_every_transpose_matches_float64(m, n, k, dtype):
    for trans_a in (False, True):
        for trans_b in (False, True):
            a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(dtype)
            b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(dtype)
            want = (a.T if trans_a else a).astype(np.float64) @ (
                b.T if trans_b else b).astype(np.float64)
            got = _gemm(a, b, trans_a, trans_b)
            np.testing.assert_allclose(got, want, rtol=0, atol=_tolerance(dtype, k) * 4,
                                       err_msg=f"trans_a={trans_a} trans_b={trans_b}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_alpha_beta_and_c_not_read_where_beta_is_zero(dtype):
    m, n, k = 37, 70, 300
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    prod = a.astype(np.float64) @ b.astype(np.float64)
    nan_c = np.full((m, n), np.nan, dtype)
    got = _gemm(a, b, alpha=-2.0, c=nan_c)  # (beta 0: the NaNs are never read)
    np.testing.assert_allclose(got, -2 * prod, atol=2 * _tolerance(dtype, k) * 4)
    c0 = rng.standard_normal((m, n)).astype(dtype)
    got = _gemm(a, b, alpha=0.5, beta=3.0, c=c0.copy())
    np.testing.assert_allclose(got, 0.5 * prod + 3 * c0.astype(np.float64),
                               atol=_tolerance(dtype, k) * 8)
    # alpha 0 or k 0: C = beta * C, and C = 0 where beta is 0 (NaNs gone)
    got = _gemm(a, b, alpha=0.0, beta=2.0, c=c0.copy())
    np.testing.assert_array_equal(got, 2 * c0)
    empty_k = np.empty((m, 0), dtype), np.empty((0, n), dtype)
    np.testing.assert_array_equal(_gemm(*empty_k, c=nan_c.copy()), np.zeros((m, n), dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_column_major_and_leading_dimensions(dtype):
    # a (40, 30) @ (30, 50) product of submatrices of larger arrays, in both orders
    big_a = rng.standard_normal((60, 45)).astype(dtype)
    big_b = rng.standard_normal((48, 70)).astype(dtype)
    a, b = big_a[3:43, 5:35], big_b[2:32, 7:57]
    want = a.astype(np.float64) @ b.astype(np.float64)
    c = np.full((45, 61), 7.0, dtype)  # (ldc 61: the rest of each row untouched)
    _call(dtype, ROW, NO, NO, 40, 50, 30, 1.0, big_a, 45, big_b, 70, 0.0, c, 61,
          offsets=(3 * 45 + 5, 2 * 70 + 7, 61 + 2))
    np.testing.assert_allclose(c[1:41, 2:52], want, atol=_tolerance(dtype, 30) * 4)
    untouched = np.ones(c.shape, bool)
    untouched[1:41, 2:52] = False
    assert (c[untouched] == 7.0).all()
    # column-major: C^T's memory is the row-major product C; pass A^T, B^T as stored
    ct = np.zeros((50, 40), dtype)  # (column-major 40 x 50, ld 40)
    at, bt = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)  # (column-major a, b)
    _call(dtype, COL, NO, NO, 40, 50, 30, 1.0, at, 40, bt, 30, 0.0, ct, 40)
    np.testing.assert_allclose(ct.T, want, atol=_tolerance(dtype, 30) * 4)
    _call(dtype, COL, TRANS, TRANS, 40, 50, 30, 1.0, np.ascontiguousarray(a), 30,
          np.ascontiguousarray(b), 50, 0.0, ct, 40)
    np.testing.assert_allclose(ct.T, want, atol=_tolerance(dtype, 30) * 4)


@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (True, False), (False, True)])
def test_any_block_of_the_output_has_the_bits_of_the_whole(trans_a, trans_b):
    # (depth over KC: several passes; rows and columns over a tile's, with edges)
    m, n, k = 150, 200, gemm_kernel.KC * 2 + 37
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    whole = _gemm(a, b, trans_a, trans_b)
    lda, ldb = a.shape[1], b.shape[1]
    ta, tb = (TRANS if trans_a else NO), (TRANS if trans_b else NO)
    for cuts in ([0, 32, 96, 150], [0, 7, 150], [0, 150]):  # rows
        c = np.empty((m, n), np.float32)
        for lo, hi in zip(cuts, cuts[1:]):
            _call(np.float32, ROW, ta, tb, hi - lo, n, k, 1.0, a, lda, b, ldb, 0.0, c, n,
                  offsets=(lo if trans_a else lo * lda, 0, lo * n))
        np.testing.assert_array_equal(c, whole)
    for cuts in ([0, 64, 128, 200], [0, 33, 200]):  # columns
        c = np.empty((m, n), np.float32)
        for lo, hi in zip(cuts, cuts[1:]):
            _call(np.float32, ROW, ta, tb, m, hi - lo, k, 1.0, a, lda, b, ldb, 0.0, c, n,
                  offsets=(0, lo * ldb if trans_b else lo, lo))
        np.testing.assert_array_equal(c, whole)


def test_specials_propagate():
    a = rng.standard_normal((20, 30)).astype(np.float32)
    b = rng.standard_normal((30, 70)).astype(np.float32)
    a[3, 4] = np.nan
    b[5, 6] = np.inf
    got = _gemm(a, b)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))


SPLIT_SHAPES = [(128, 512, 300), (520, 200, 70), (96, 96, 600), (40, 1100, 20),
                (600, 64, 2 * gemm_kernel.KC + 9)]


def _split_entry(address, dtype):
    c = "float" if dtype == np.float32 else "double"
    return _ffi.cast(f"void(*)(char*, int64_t, int, int, int, int64_t, int64_t, int64_t, "
                     f"{c}, {c}*, int64_t, {c}*, int64_t, {c}, {c}*, int64_t)", address)


class _ReversedRuntime:
    """A stand-in for the parallel runtime's ``run``: each job's slices one after another,
    the last first, recording ``(extent, tasks)`` of the jobs."""

    def __init__(self):
        self.jobs = []
        self._callback = _ffi.callback("void(char*, char***, int64_t, int64_t, int64_t)",
                                       self._run)
        self.run = _ffi.cast("char*", self._callback)

    def _run(self, fn, tables, per_task, extent, tasks):
        self.jobs.append((extent, tasks))
        kernel = _ffi.cast("void(*)(char**, int64_t, int64_t)", fn)
        for t in reversed(range(tasks)):
            kernel(tables[t if per_task else 0], t * extent // tasks, (t + 1) * extent // tasks)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_split_entry_has_the_bits_of_one_call(dtype):
    # Tasks on the parallel runtime (any thread count, or none), or on a stand-in running
    # them last first, sharing one packing of op(A) (columns cut) or op(B) (rows cut); tasks
    # computing element by element (an ``unpacked`` build): the bits of one plain call.
    from ember.backends.cpu import parallel_runtime
    letter = "s" if dtype == np.float32 else "d"
    split = _split_entry(gemm_kernel.address(letter, split=True), dtype)
    lib, _ = gemm_kernel.compiled(letter, 0, unpacked=True)
    unpacked = _split_entry(lib.address(gemm_kernel.split_symbol(letter)), dtype)
    runtime = parallel_runtime.get()
    stand_in = _ReversedRuntime()
    runs = [(split, _ffi.NULL, 2), (split, stand_in.run, 3), (unpacked, stand_in.run, 2)]
    if runtime is not None:
        runs += [(split, runtime.run_address, 2), (split, runtime.run_address, 7)]
    for m, n, k in SPLIT_SHAPES:
        for order, trans_a, trans_b, beta in [(ROW, False, False, 0.0), (ROW, True, False, 0.5),
                                              (ROW, False, True, 0.0), (COL, True, True, -1.0)]:
            a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(dtype)
            b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(dtype)
            c0 = rng.standard_normal((m, n)).astype(dtype)
            if beta == 0.0:
                c0[0, 0] = np.nan  # (not read)
            layout = "F" if order == COL else "C"
            a, b, c0 = (np.asarray(x, order=layout) for x in (a, b, c0))
            lda, ldb = (x.shape[0] if order == COL else x.shape[1] for x in (a, b))
            ldc = m if order == COL else n
            flags = (order, TRANS if trans_a else NO, TRANS if trans_b else NO, m, n, k)
            want = c0.copy(order="A")
            _call(dtype, *flags, 1.5, a, lda, b, ldb, beta, want, ldc)
            for entry, run, threads in runs:
                got = c0.copy(order="A")
                entry(run, threads, *flags, 1.5, _ptr(a), lda, _ptr(b), ldb, beta, _ptr(got),
                      ldc)
                np.testing.assert_array_equal(got, want)
            ref = 1.5 * ((a.T if trans_a else a).astype(np.float64)
                         @ (b.T if trans_b else b).astype(np.float64))
            if beta:
                ref += beta * c0
            np.testing.assert_allclose(want, ref, rtol=0, atol=_tolerance(dtype, k) * 4)
    # the stand-in saw jobs of two kinds: packing the shared operand, then the tasks
    # (at most SPLIT_TASKS_PER_THREAD a thread), each of at least two tasks
    assert stand_in.jobs and all(tasks >= 2 or extent < 2 for extent, tasks in stand_in.jobs)
    assert max(tasks for _, tasks in stand_in.jobs) <= 3 * gemm_kernel.SPLIT_TASKS_PER_THREAD


def test_the_split_entry_calls_the_plain_one_for_little_work():
    # Too little work for two tasks, or alpha zero: no job on the runtime.
    stand_in = _ReversedRuntime()
    split = _split_entry(gemm_kernel.address("s", split=True), np.float32)
    a = rng.standard_normal((20, 30)).astype(np.float32)
    b = rng.standard_normal((30, 40)).astype(np.float32)
    for alpha in (1.0, 0.0):
        got = np.full((20, 40), np.nan, np.float32)
        split(stand_in.run, 2, ROW, NO, NO, 20, 40, 30, alpha, _ptr(a), 30, _ptr(b), 40, 0.0,
              _ptr(got), 40)
        np.testing.assert_array_equal(got, _gemm(a, b, alpha=alpha))
    assert stand_in.jobs == []


def test_mode_switch_and_what_it_takes(monkeypatch):
    layout = ("s", False, False, 128, 512, 784, 784, 512, 1, ())
    monkeypatch.setenv(gemm_kernel.GEMM_ENV, "native")
    assert gemm_kernel.mode() == "native"
    assert gemm_kernel.takes(layout)
    assert cpu_exe.blas_routine(layout) == "sgemm_ember"
    assert cpu_exe.blas_routine(("d", *layout[1:])) == "dgemm_ember"
    assert not cpu_exe.whole_gemm(layout)  # (one task per thread, on ember's runtime)
    assert cpu_exe.gemm_split(layout)[2] == 1
    for small in (("s", False, False, 128, 10, 512, 512, 10, 1, ()),  # (few columns)
                  ("s", False, False, 8, 512, 512, 512, 512, 1, ()),  # (few rows)
                  ("s", False, False, 64, 64, 64, 64, 64, 1, ())):  # (little work)
        assert not gemm_kernel.takes(small)
        assert not cpu_exe.blas_routine(small).endswith("_ember")
    monkeypatch.setenv(gemm_kernel.GEMM_ENV, "blas")
    assert not gemm_kernel.takes(layout)
    assert cpu_exe.blas_routine(layout) == "sgemm"
    monkeypatch.delenv(gemm_kernel.GEMM_ENV)
    from ember.backends.cpu import llvm_support
    wide = llvm_support.host_has_feature("avx512f")
    assert gemm_kernel.mode() == ("native" if wide else "blas")


def test_mode_is_part_of_the_program_cache_key(monkeypatch):
    from ember.backends import cpu
    monkeypatch.setenv(gemm_kernel.GEMM_ENV, "native")
    native = cpu._key_parts()
    monkeypatch.setenv(gemm_kernel.GEMM_ENV, "blas")
    assert cpu._key_parts() != native


@pytest.mark.parametrize("m, k, n, dtype", [(128, 784, 512, np.float32),
                                            (512, 128, 512, np.float32),
                                            (700, 300, 96, np.float32),
                                            (200, 300, 96, np.float64)])
def test_jitted_products_take_it_with_the_bits_of_one_call(m, k, n, dtype, monkeypatch):
    monkeypatch.setenv(gemm_kernel.GEMM_ENV, "native")
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    letter = "s" if dtype == np.float32 else "d"
    at, bt = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)
    cases = ((lambda x, y: x @ y, (a, b), _gemm(a, b)),
             (lambda x, y: x.T @ y, (at, b), _gemm(at, b, trans_a=True)),
             (lambda x, y: (x @ y.T) * 2.0, (a, bt), _gemm(a, bt, trans_b=True) * 2))
    with ember.enable_x64(dtype == np.float64):
        for fn, args, want in cases:
            f = ember.jit(fn)
            steps = f.lower(*args).compile()._executable.executable._steps
            routines = {cpu_exe.called_routine(s[0].gemm) for s in steps
                        if isinstance(s, tuple) and getattr(s[0], "gemm", None) is not None}
            assert routines == {f"{letter}gemm_ember_split"}
            np.testing.assert_array_equal(np.asarray(f(*args)), want)


def test_mlp_gradients_agree_with_blas_products(monkeypatch):
    ws = [rng.standard_normal(s).astype(np.float32) / 20 for s in ((300, 256), (256, 128))]
    x = rng.standard_normal((96, 300)).astype(np.float32)

    def loss(ws, x):
        h = jnp.maximum(x @ ws[0], 0.0)
        return jnp.sum(jnp.tanh(h @ ws[1]) ** 2)
    results = {}
    for mode in ("native", "blas"):
        monkeypatch.setenv(gemm_kernel.GEMM_ENV, mode)
        results[mode] = ember.jit(ember.value_and_grad(loss))(ws, x)
    (v1, g1), (v2, g2) = results["native"], results["blas"]
    np.testing.assert_allclose(float(v1), float(v2), rtol=1e-5)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)


def test_a_train_step_runs_as_one_native_call_with_python_steppings_bits(monkeypatch):
    # The MLP step's large products are tasks on the parallel runtime (none on BLAS's
    # threads), the program one call of its steps function; stepped from Python, the same
    # bits; and the float64 reference's loss.
    from tests.backends.cpu.helpers import cpu_executable, replanned
    monkeypatch.setenv(gemm_kernel.GEMM_ENV, "native")
    sizes = [(784, 512), (512, 512), (512, 10)]
    params = [(rng.standard_normal((i, o)).astype(np.float32) * 0.05,
               rng.standard_normal(o).astype(np.float32) * 0.1) for i, o in sizes]
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]

    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = jnp.maximum(h @ w + b, 0.0)
        logits = h @ params[-1][0] + params[-1][1]
        return -(_log_softmax(logits) * y).sum(axis=1).mean()

    def step(params, x, y):
        value, grads = ember.value_and_grad(loss)(params, x, y)
        return value, ember.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)
    exe = cpu_executable(step, params, x, y)
    routines = {cpu_exe.called_routine(s.gemm)
                for s in cpu_exe.nested_steps(exe.program.steps)
                if isinstance(s, cpu_exe.DotPlan) and s.gemm is not None}
    assert "sgemm_ember_split" in routines
    assert exe._steps_fn is not None and not exe._steps_whole
    args = [np.asarray(v) for v in ember.tree_util.tree_leaves(params)] + [x, y]
    python = replanned(exe, native_call=None)
    for _ in range(2):
        got, want = exe.execute(args), python.execute(args)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    h = x.astype(np.float64)
    for w, b in params[:-1]:
        h = np.maximum(h @ w.astype(np.float64) + b, 0.0)
    logits = h @ params[-1][0].astype(np.float64) + params[-1][1]
    logits -= logits.max(axis=1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(got[0], -(logp * y).sum(axis=1).mean(), rtol=1e-4)


def _log_softmax(logits):
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - jnp.log(jnp.exp(shifted).sum(axis=1, keepdims=True))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_quick_optimized_and_unpacked_builds_have_the_same_bits(dtype):
    # (the quick build runs first in a cold process; the unpacked path where the packing
    # buffers cannot be allocated)
    letter = "s" if dtype == np.float32 else "d"
    c = "float" if letter == "s" else "double"
    signature = (f"void(*)(int, int, int, int64_t, int64_t, int64_t, {c}, {c}*, int64_t, "
                 f"{c}*, int64_t, {c}, {c}*, int64_t)")
    builds = [gemm_kernel.compiled(letter, level) for level in (0, 3)]
    builds.append(gemm_kernel.compiled(letter, 3, unpacked=True))
    quick, _ = gemm_kernel.compiled(letter, 0, quick=True)  # (its split entry: a plain call)
    split = _split_entry(quick.address(gemm_kernel.split_symbol(letter)), dtype)
    stand_in = _ReversedRuntime()
    builds.append((quick, lambda *args: split(stand_in.run, 2, *args)))
    for m, n, k in [(15, 33, 257), (128, 96, 600), (3, 40, 7)]:
        for trans_a, trans_b in ((False, False), (True, True)):
            a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(dtype)
            b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(dtype)
            outs = []
            for _, address in builds:
                out = np.empty((m, n), dtype)
                call = address if callable(address) else _ffi.cast(signature, address)
                call(
                    ROW, TRANS if trans_a else NO, TRANS if trans_b else NO, m, n, k, 1.0,
                    _ptr(a), a.shape[1], _ptr(b), b.shape[1], 0.0, _ptr(out), n)
                outs.append(out)
            for out in outs:
                np.testing.assert_array_equal(out, outs[1])
    assert stand_in.jobs == []  # (the quick split entry made no tasks)


REBIND_PROGRAM = """
import json, numpy as np, ember
from ember.backends import get_backend
from ember.backends.cpu import gemm_kernel, executable
a = np.random.default_rng(0).standard_normal((256, 300)).astype(np.float32)
b = np.random.default_rng(1).standard_normal((300, 200)).astype(np.float32)
f = ember.jit(lambda a, b: a @ b)
first = np.asarray(f(a, b))
quick = sorted(gemm_kernel._quick)
bound = [(slot, split) for _, slot, split in gemm_kernel._bound.get("s", [])]
before = [executable._ffi.cast("void**", s)[0] for s, _ in bound]
get_backend("cpu").wait_for_background()
after = [executable._ffi.cast("void**", s)[0] for s, _ in bound]
print(json.dumps({"quick": quick, "quick_after": sorted(gemm_kernel._quick),
                  "slots": len(bound),
                  "rebound": all(x != y for x, y in zip(before, after)),
                  "optimized": all(int(executable._ffi.cast("intptr_t", y))
                                   == gemm_kernel.address("s", split)
                                   for y, (_, split) in zip(after, bound)),
                  "split": any(split for _, split in bound),
                  "same": bool((np.asarray(f(a, b)) == first).all()),
                  "close": bool(np.allclose(first, a.astype(float) @ b, atol=1e-3))}))
"""


def test_a_cold_process_runs_the_quick_build_then_rebinds_to_the_optimized(tmp_path):
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path), EMBER_CPU_GEMM="native")
    out = subprocess.run([sys.executable, "-c", REBIND_PROGRAM], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"quick": ["s"], "quick_after": [], "slots": got["slots"], "rebound": True,
                   "optimized": True, "split": True, "same": True, "close": True}
    assert got["slots"] >= 1
    # a second process loads the optimized build from the disk cache at once
    out = subprocess.run([sys.executable, "-c", REBIND_PROGRAM], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["quick"] == []
