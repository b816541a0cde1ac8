"""Products whose batch dims lie anywhere in their operands (attention on (batch, seq, heads,
dim) arrays) call ``gemm`` on each matrix where it lies (``program.gemm_layout``'s
``batches``, with the matrices' rows ``ld`` apart), native and stepped from Python, in
loops, and as ``gemv`` with a strided vector: against float64 NumPy, and the two paths
the same bits."""

import itertools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import _blas_threads, lax
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu import gemm_kernel
from tests.backends.cpu.helpers import cpu_executable, native_dots, replanned

rng = np.random.default_rng(41)


@pytest.fixture(autouse=True)
def _no_stall_holds(monkeypatch):
    monkeypatch.setattr(_blas_threads.blas_stall_guard, "run", lambda key, call: call())


@pytest.fixture(autouse=True, params=["blas", "native"])
def gemm_mode(request, monkeypatch):
    """Every layout through BLAS and through ember's own ``gemm`` (which takes the larger
    float32 matrices)."""
    monkeypatch.setenv(gemm_kernel.GEMM_ENV, request.param)
    return request.param


def _data(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _einsum_reference(lhs, rhs, dims):
    """``dot_general`` in float64 through ``np.einsum``: batch, lhs free, rhs free."""
    (lc, rc), (lb, rb) = dims
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    lsub, rsub = [None] * lhs.ndim, [None] * rhs.ndim
    for dl, dr in itertools.chain(zip(lb, rb), zip(lc, rc)):
        lsub[dl] = rsub[dr] = next(letters)
    for sub in (lsub, rsub):
        for d, s in enumerate(sub):
            if s is None:
                sub[d] = next(letters)
    out = [lsub[d] for d in lb] + [s for d, s in enumerate(lsub) if d not in lb + lc] + \
        [s for d, s in enumerate(rsub) if d not in rb + rc]
    return np.einsum(f"{''.join(lsub)},{''.join(rsub)}->{''.join(out)}",
                     lhs.astype(np.float64), rhs.astype(np.float64))


def _check(lhs, rhs, dims, k):
    f = lambda a, b: lax.dot_general(a, b, dims)  # noqa: E731
    native = np.asarray(ember.jit(f)(lhs, rhs))
    want = _einsum_reference(lhs, rhs, dims)
    tol = 1e-5 * np.sqrt(k) * (np.abs(want).max() + 1)
    np.testing.assert_allclose(native.astype(np.float64), want, rtol=0, atol=tol)
    exe = cpu_executable(f, lhs, rhs)
    (stepped,) = replanned(exe, native_call=None).execute(
        [ember.device_put(lhs), ember.device_put(rhs)])
    np.testing.assert_array_equal(np.asarray(stepped), native)
    return exe


def _random_dot(r):
    """Operands with batch, free and contracting dims in random places (some of size 1)."""
    def sizes(n):
        return [int(r.choice([1, 2, 3, 5, 8])) for _ in range(n)]
    batch, contract = sizes(r.integers(0, 3)), sizes(r.integers(0, 2))
    contract.insert(int(r.integers(0, len(contract) + 1)), int(r.choice([9, 16, 20])))
    # (more than SMALL_DOT_K products per result: smaller dots are kernels)
    free_l, free_r = sizes(r.integers(0, 3)), sizes(r.integers(0, 3))
    dims_out = []
    for free in (free_l, free_r):
        roles = [("b", j) for j in range(len(batch))] + [("c", j) for j in range(len(contract))] \
            + [("f", j) for j in range(len(free))]
        roles = [roles[i] for i in r.permutation(len(roles))]
        dims_out.append(roles)
    operands, numbers = [], []
    for roles, free in zip(dims_out, (free_l, free_r)):
        shape = [{"b": batch, "c": contract, "f": free}[kind][j] for kind, j in roles]
        operands.append(_data(*shape))
        numbers.append(([roles.index(("c", j)) for j in range(len(contract))],
                        [roles.index(("b", j)) for j in range(len(batch))]))
    (lc, lb), (rc, rb) = numbers
    return operands, ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb))), int(np.prod(contract))


def test_random_dimension_layouts_match_numpy():
    r = np.random.default_rng(7)
    native = 0
    for _ in range(100):
        (lhs, rhs), dims, k = _random_dot(r)
        exe = _check(lhs, rhs, dims, k)
        native += bool(native_dots(exe))
    # (the rest lie as no gemm reads them, through NumPy, or are small: kernels)
    assert native >= 12


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_attention_on_seq_major_operands_calls_gemm_where_they_lie(dtype):
    q, k, v = (_data(2, 64, 4, 32, dtype=dtype) for _ in range(3))
    with ember.enable_x64(dtype == np.float64):
        scores = (((3,), (3,)), ((0, 2), (0, 2)))  # "btnh,bsnh->bnts"
        exe = _check(q, k, scores, 32)
        (dot,) = native_dots(exe)
        assert dot.gemm[6:] == (4 * 32, 4 * 32, 8, ((2, 64 * 4 * 32, 64 * 4 * 32),
                                                    (4, 32, 32)))
        p = _data(2, 4, 64, 64, dtype=dtype)
        values = (((3,), (1,)), ((0, 1), (0, 2)))  # "bnts,bsnh->bnth"
        (dot,) = native_dots(_check(p, v, values, 64))
        assert dot.gemm[7] == 4 * 32


def test_threaded_tasks_of_strided_batches(gemm_mode):
    q, k = _data(4, 256, 8, 64), _data(4, 256, 8, 64)
    exe = _check(q, k, (((3,), (3,)), ((0, 2), (0, 2))), 64)
    (dot,) = native_dots(exe)
    if gemm_mode == "native":  # (one task per thread over the batch's units)
        assert cpu_exe.native_gemm(dot.gemm) and cpu_exe.gemm_split(dot.gemm)[1] > 1
    else:
        assert cpu_exe.gemm_split(dot.gemm)[2] > 1


def test_strided_vectors_call_gemv():
    # a vector strided by a batch dim (its elements 3 apart), times a batch of matrices
    v, a = _data(512, 3), _data(3, 512, 300)
    exe = _check(v, a, (((0,), (1,)), ((1,), (0,))), 512)
    (dot,) = native_dots(exe)
    assert cpu_exe.blas_routine(dot.gemm) == "sgemv" and dot.gemm[1]  # (trans_a)
    # a batch of matrices times strided vectors
    a, w = _data(3, 300, 512), _data(512, 3)
    (dot,) = native_dots(_check(a, w, (((2,), (0,)), ((0,), (1,))), 512))
    assert cpu_exe.blas_routine(dot.gemm) == "sgemv"


def test_strided_batches_in_a_native_loop():
    q, k = _data(2, 64, 4, 32) * 0.2, _data(2, 64, 4, 32) * 0.2

    def body(i, q):  # (scores on (batch, seq, heads, dim) operands, mixed back into q)
        s = jnp.einsum("btnh,bsnh->bnts", q, k)
        return jnp.tanh(jnp.einsum("bnts,bsnh->btnh", s, k))

    loop = lambda q: lax.fori_loop(0, 4, body, q)  # noqa: E731
    exe = cpu_executable(loop, q)
    assert len(native_dots(exe)) == 2
    want = q.astype(np.float64)
    k64 = k.astype(np.float64)
    for _ in range(4):
        s = np.einsum("btnh,bsnh->bnts", want, k64)
        want = np.tanh(np.einsum("bnts,bsnh->btnh", s, k64))
    got = np.asarray(ember.jit(loop)(q))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)


def _plan_kinds(steps):
    return [type(s).__name__ for s in steps]


def test_operands_no_gemm_reads_are_copied_for_it():
    # attention's output projection with the heads' transpose folded into the product:
    # its rows (b, t) and its sum (n, h) are each split by the other's dims
    o, w = _data(4, 4, 128, 64), _data(4, 64, 256)
    dims = (((1, 3), (0, 1)), ((), ()))
    exe = _check(o, w, dims, 256)
    assert _plan_kinds(exe.program.steps) == ["KernelPlan", "DotPlan"]
    (dot,) = native_dots(exe)
    assert dot.gemm[3:6] == (512, 256, 256) and dot.inputs[0].kind == "temp"
    # both operands copied (each has its minor dim among its batch dims), in float64
    with ember.enable_x64():
        a, b = _data(6, 40, 3, dtype=np.float64), _data(40, 50, 3, dtype=np.float64)
        exe = _check(a, b, (((1,), (0,)), ((2,), (2,))), 40)
        assert _plan_kinds(exe.program.steps) == ["KernelPlan", "KernelPlan", "DotPlan"]


def test_copied_operands_keep_a_loop_native():
    o, w = _data(2, 4, 16, 64) * 0.5, _data(4, 64, 256) * 0.1

    def body(i, o):  # (k = 256: more than a loop's dot kernel sums)
        y = jnp.einsum("bnth,nhd->btd", o, w)
        return jnp.tanh(y.reshape(2, 16, 4, 64).transpose(0, 2, 1, 3) + 0.5)

    loop = lambda o: lax.fori_loop(0, 6, body, o)  # noqa: E731
    exe = cpu_executable(loop, o)
    (whiles,) = [s for s in exe.program.steps if type(s) is cpu_exe.WhilePlan]
    assert whiles.loop is not None and len(native_dots(exe)) == 1
    want, w64 = o.astype(np.float64), w.astype(np.float64)
    for _ in range(6):
        y = np.einsum("bnth,nhd->btd", want, w64)
        want = np.tanh(y.reshape(2, 16, 4, 64).transpose(0, 2, 1, 3) + 0.5)
    np.testing.assert_allclose(np.asarray(ember.jit(loop)(o)), want, rtol=0, atol=1e-4)
