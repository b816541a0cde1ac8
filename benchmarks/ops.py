"""Jitted programs beyond issue 4's workloads: indexing, scatters, sorting, searching, arg
reductions, outer products, integer matmul. Ember against JAX (and NumPy where it has the
operation), one process.

Run from the repository root: ``python benchmarks/ops.py [--only NAME,...] [--markdown]``.
Each row gives the median time per call (``cpu.median_times``: interleaved batches after a
warm-up and ember's background compiles), the ratio ember / JAX, and whether ember's and
JAX's results agree (exactly for integers, within 1e-3 for floats).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu import _fmt_ratio, _fmt_time, make_engine, median_times  # noqa: E402

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def _rng():
    return np.random.default_rng(0)


def gather_1d(m, lax):
    rng = _rng()
    x = rng.standard_normal(10**6).astype(np.float32)
    i = rng.integers(0, 10**6, 10**6).astype(np.int32)
    return (lambda x, i: x[i]), (x, i), lambda x, i: x[i]


def take_rows(m, lax):
    rng = _rng()
    table = rng.standard_normal((50000, 128)).astype(np.float32)
    i = rng.integers(0, 50000, 4096).astype(np.int32)
    return (lambda t, i: m.take(t, i, axis=0)), (table, i), lambda t, i: np.take(t, i, axis=0)


def segment_sum(m, lax):
    rng = _rng()
    v = rng.standard_normal(10**6).astype(np.float32)
    i = rng.integers(0, 1000, 10**6).astype(np.int32)

    def numpy(v, i):
        out = np.zeros(1000, np.float32)
        np.add.at(out, i, v)
        return out
    return (lambda v, i: m.zeros(1000, m.float32).at[i].add(v)), (v, i), numpy


def sort_1d(m, lax):
    x = _rng().standard_normal(10**6).astype(np.float32)
    return m.sort, (x,), lambda x: np.sort(x, kind="stable")


def argsort_1d(m, lax):
    x = _rng().standard_normal(10**5).astype(np.float32)
    return m.argsort, (x,), lambda x: np.argsort(x, kind="stable")


def argmax_rows(m, lax):
    x = _rng().standard_normal((4096, 1024)).astype(np.float32)
    return (lambda x: m.argmax(x, axis=1)), (x,), lambda x: np.argmax(x, axis=1)


def top_k_rows(m, lax):
    x = _rng().standard_normal((512, 1024)).astype(np.float32)
    return (lambda x: lax.top_k(x, 8)), (x,), None


def per_example_grads(m, lax, engine):
    rng = _rng()
    w = (rng.standard_normal((256, 256)) * 0.05).astype(np.float32)
    xs = rng.standard_normal((64, 256)).astype(np.float32)

    def loss(w, x):
        return m.sum(m.tanh(x @ w) ** 2)
    return engine.vmap(engine.grad(loss), in_axes=(None, 0)), (w, xs), None


def batched_matmul(m, lax):
    rng = _rng()
    a, b = (rng.standard_normal((64, 128, 128)).astype(np.float32) for _ in range(2))
    return (lambda a, b: m.einsum("bij,bjk->bik", a, b)), (a, b), np.matmul


def cumsum_1d(m, lax):
    x = _rng().standard_normal(10**6).astype(np.float32)
    return m.cumsum, (x,), np.cumsum


def cumsum_rows(m, lax):
    x = _rng().standard_normal((1024, 1024)).astype(np.float32)
    return (lambda x: m.cumsum(x, axis=1)), (x,), lambda x: np.cumsum(x, axis=1)


def stack_sum(m, lax):
    rng = _rng()
    xs = [rng.standard_normal((256, 256)).astype(np.float32) for _ in range(64)]
    return (lambda *xs: m.stack(xs).sum(0)), tuple(xs), lambda *xs: np.stack(xs).sum(0)


def concatenate_many(m, lax):
    rng = _rng()
    xs = [rng.standard_normal((1000, 64)).astype(np.float32) for _ in range(100)]
    return (lambda *xs: m.concatenate(xs)), tuple(xs), lambda *xs: np.concatenate(xs)


def row_updates(m, lax):
    rng = _rng()
    x = rng.standard_normal((10000, 128)).astype(np.float32)
    i = rng.integers(0, 10000, 1000).astype(np.int32)
    u = rng.standard_normal((1000, 128)).astype(np.float32)

    def numpy_set(x, i, u):
        out = x.copy()
        out[i] = u
        return out
    return (lambda x, i, u: x.at[i].set(u, unique_indices=True)), (x, np.unique(i), u[:len(
        np.unique(i))]), numpy_set


def column_max(m, lax):
    x = _rng().standard_normal((4096, 1024)).astype(np.float32)
    return (lambda x: x.max(axis=0)), (x,), lambda x: x.max(axis=0)


def column_max_large(m, lax):
    x = _rng().standard_normal((16384, 1024)).astype(np.float32)
    return (lambda x: x.max(axis=0)), (x,), lambda x: x.max(axis=0)


def row_max(m, lax):
    x = _rng().standard_normal((4096, 1024)).astype(np.float32)
    return (lambda x: x.max(axis=1)), (x,), lambda x: x.max(axis=1)


def total_min(m, lax):
    x = _rng().standard_normal((4096, 1024)).astype(np.float32)
    return (lambda x: x.min()), (x,), lambda x: x.min()


def middle_axis_max(m, lax):
    x = _rng().standard_normal((64, 512, 512)).astype(np.float32)
    return (lambda x: x.max(axis=1)), (x,), lambda x: x.max(axis=1)


def column_argmax(m, lax):
    x = _rng().standard_normal((16384, 1024)).astype(np.float32)
    return (lambda x: m.argmax(x, axis=0)), (x,), lambda x: np.argmax(x, axis=0)


def short_row_argmax(m, lax):
    x = _rng().standard_normal((10**6, 8)).astype(np.float32)
    return (lambda x: m.argmax(x, axis=1)), (x,), lambda x: np.argmax(x, axis=1)


def row16_argmax(m, lax):
    x = _rng().standard_normal((10**6, 16)).astype(np.float32)
    return (lambda x: m.argmax(x, axis=1)), (x,), lambda x: np.argmax(x, axis=1)


def row100_sum(m, lax):
    x = _rng().standard_normal((10**4, 100)).astype(np.float32)
    return (lambda x: m.sum(x, axis=1)), (x,), lambda x: x.astype(np.float64).sum(1)


def row10_logsumexp(m, lax):
    x = _rng().standard_normal((200000, 10)).astype(np.float32)

    def logsumexp(x):
        top = m.max(x, axis=-1, keepdims=True)
        return m.log(m.sum(m.exp(x - top), axis=-1)) + top[:, 0]

    def reference(x):
        x = x.astype(np.float64)
        top = x.max(-1, keepdims=True)
        return np.log(np.exp(x - top).sum(-1)) + top[:, 0]
    return logsumexp, (x,), reference


def row10_softmax(m, lax):
    x = _rng().standard_normal((200000, 10)).astype(np.float32)

    def softmax(x):
        e = m.exp(x - m.max(x, axis=-1, keepdims=True))
        return e / m.sum(e, axis=-1, keepdims=True)

    def reference(x):
        e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    return softmax, (x,), reference


def row10_cross_entropy(m, lax):
    rng = _rng()
    x = rng.standard_normal((200000, 10)).astype(np.float32)
    y = rng.integers(0, 10, 200000).astype(np.int32)

    def loss(x, y):
        top = m.max(x, axis=-1, keepdims=True)
        lse = m.log(m.sum(m.exp(x - top), axis=-1)) + top[:, 0]
        return m.mean(lse - m.take_along_axis(x, y[:, None], axis=-1)[:, 0])

    def reference(x, y):
        x = x.astype(np.float64)
        top = x.max(-1, keepdims=True)
        lse = np.log(np.exp(x - top).sum(-1)) + top[:, 0]
        return np.mean(lse - x[np.arange(x.shape[0]), y])
    return loss, (x, y), reference


def row12_sum(m, lax):
    x = _rng().standard_normal((200000, 12)).astype(np.float32)
    return (lambda x: m.sum(x, axis=1)), (x,), lambda x: x.astype(np.float64).sum(1)


def row32_layernorm(m, lax):
    x = _rng().standard_normal((31250, 32)).astype(np.float32)

    def layernorm(x):
        mu = m.mean(x, axis=-1, keepdims=True)
        return (x - mu) / m.sqrt(m.mean(m.square(x - mu), axis=-1, keepdims=True) + 1e-5)

    def reference(x):
        x = x.astype(np.float64)
        mu = x.mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    return layernorm, (x,), reference


def take_along_rows(m, lax):
    rng = _rng()
    x = rng.standard_normal((1000, 1000)).astype(np.float32)
    i = rng.integers(0, 1000, (1000, 1000)).astype(np.int32)
    return ((lambda x, i: m.take_along_axis(x, i, axis=1)), (x, i),
            lambda x, i: np.take_along_axis(x, i, axis=1))


def transpose_add(m, lax):
    x = _rng().standard_normal((4096, 4096)).astype(np.float32)
    return (lambda x: x + x.T), (x,), lambda x: x + x.T


def moveaxis_scale(m, lax):
    x = _rng().standard_normal((64, 512, 512)).astype(np.float32)
    return (lambda x: m.moveaxis(x, 2, 0) * 2.0), (x,), \
        lambda x: np.moveaxis(x, 2, 0) * np.float32(2.0)


def searchsorted(m, lax):
    rng = _rng()
    a = np.sort(rng.standard_normal(10**6).astype(np.float32))
    v = rng.standard_normal(10**5).astype(np.float32)
    return m.searchsorted, (a, v), np.searchsorted


def int_matmul(m, lax):
    rng = _rng()
    a, b = (rng.integers(-5, 5, (256, 256)).astype(np.int32) for _ in range(2))
    return (lambda a, b: a @ b), (a, b), np.matmul


def repeat_tile(m, lax):
    x = _rng().standard_normal((1000, 1000)).astype(np.float32)
    return (lambda x: m.repeat(x, 2, axis=0) + m.tile(x, (2, 1))), (x,), \
        lambda x: np.repeat(x, 2, axis=0) + np.tile(x, (2, 1))


def tiny_matmuls(m, lax):
    rng = _rng()
    a, b = (rng.standard_normal((100_000, 3, 3)).astype(np.float32) for _ in range(2))
    return (lambda a, b: a @ b), (a, b), np.matmul


def tiny_matmuls_4x4(m, lax):
    rng = _rng()
    a, b = (rng.standard_normal((100_000, 4, 4)).astype(np.float32) for _ in range(2))
    return (lambda a, b: a @ b), (a, b), np.matmul


def _complex_pair():
    rng = _rng()
    return tuple((rng.standard_normal(1_000_000) + 1j * rng.standard_normal(1_000_000))
                 .astype(np.complex64) for _ in range(2))


def complex_multiply_add(m, lax):
    return (lambda a, b: a * b + a), _complex_pair(), lambda a, b: a * b + a


def complex_exp(m, lax):
    return (lambda a: m.exp(a)), _complex_pair()[:1], np.exp


def complex_tanh(m, lax):
    return (lambda a: m.tanh(a)), _complex_pair()[:1], np.tanh


def complex_cumsum(m, lax):
    a = _complex_pair()[0].reshape(1000, 1000)
    return (lambda a: m.cumsum(a, axis=1)), (a,), lambda a: np.cumsum(a, axis=1)


def solve_512(m, lax):
    rng = _rng()
    a = (rng.standard_normal((512, 512)) + 30 * np.eye(512)).astype(np.float32)
    b = rng.standard_normal((512, 16)).astype(np.float32)
    return m.linalg.solve, (a, b), np.linalg.solve


def cholesky_512(m, lax):
    a = _rng().standard_normal((512, 512)).astype(np.float32)
    spd = (a @ a.T + 512 * np.eye(512)).astype(np.float32)
    return m.linalg.cholesky, (spd,), np.linalg.cholesky


def inv_256(m, lax):
    a = (_rng().standard_normal((256, 256)) + 20 * np.eye(256)).astype(np.float32)
    return m.linalg.inv, (a,), np.linalg.inv


def scan_small_body(m, lax):
    xs = _rng().standard_normal((1000, 256)).astype(np.float32)
    return (lambda xs: lax.scan(lambda c, x: (c * 0.99 + x, c), m.zeros(256, m.float32),
                                xs)), (xs,), None


def while_newton(m, lax):
    x = (np.abs(_rng().standard_normal(10**5)) + 1).astype(np.float32)

    def sqrt_newton(x):
        return lax.while_loop(lambda c: c[1] < 20,
                              lambda c: ((c[0] + x / c[0]) * 0.5, c[1] + 1), (x, 0))[0]
    return sqrt_newton, (x,), None


def _attention(m, softmax):
    def attention(q, k, v):
        s = m.einsum("bhqd,bhkd->bhqk", q, k) / 8.0
        return m.einsum("bhqk,bhkd->bhqd", softmax(s, axis=-1), v)
    return attention


def attention(m, lax, engine):
    qkv = tuple(_rng().standard_normal((3, 4, 8, 256, 64)).astype(np.float32))
    return _attention(m, engine.nn.softmax), qkv, None


def attention_grad(m, lax, engine):
    qkv = tuple(_rng().standard_normal((3, 4, 8, 256, 64)).astype(np.float32))
    attend = _attention(m, engine.nn.softmax)
    return engine.grad(lambda q, k, v: attend(q, k, v).sum(), argnums=(0, 1, 2)), qkv, None


def _conv(lax, x, k):
    return lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))


def conv_3x3(m, lax):
    rng = _rng()
    x = rng.standard_normal((8, 56, 56, 64)).astype(np.float32)
    k = (rng.standard_normal((3, 3, 64, 64)) * 0.05).astype(np.float32)
    return (lambda x, k: _conv(lax, x, k)), (x, k), None


def conv_3x3_grad(m, lax, engine):
    rng = _rng()
    x = rng.standard_normal((8, 56, 56, 64)).astype(np.float32)
    k = (rng.standard_normal((3, 3, 64, 64)) * 0.05).astype(np.float32)
    return engine.grad(lambda k, x: m.sum(_conv(lax, x, k) ** 2)), (k, x), None


def gelu(m, lax, engine):
    x = _rng().standard_normal(10**7).astype(np.float32)
    return engine.nn.gelu, (x,), None


def top_k_1d(m, lax):
    x = _rng().standard_normal(10**6).astype(np.float32)
    return (lambda x: lax.top_k(x, 100)), (x,), None



def fft_1m(m, lax):
    rng = _rng()
    x = (rng.standard_normal(1 << 20) + 1j * rng.standard_normal(1 << 20)).astype(np.complex64)
    return (lambda x: m.abs(m.fft.fft(x))), (x,), lambda x: np.abs(np.fft.fft(x))


def rfft2_512(m, lax):
    x = _rng().standard_normal((512, 512)).astype(np.float32)
    return (lambda x: m.abs(m.fft.rfft2(x))), (x,), lambda x: np.abs(np.fft.rfft2(x))


def batched_solve_4x4(m, lax):
    rng = _rng()
    a = (rng.standard_normal((1000, 4, 4)) + 2 * np.eye(4)).astype(np.float32)
    b = rng.standard_normal((1000, 4, 1)).astype(np.float32)
    return (lambda a, b: m.linalg.solve(a, b)), (a, b), np.linalg.solve


def one_row_mlp(m, lax):
    rng = _rng()
    w1 = rng.standard_normal((64, 256)).astype(np.float32) * 0.1
    w2 = rng.standard_normal((256, 64)).astype(np.float32) * 0.1
    x = rng.standard_normal((1, 64)).astype(np.float32)
    return ((lambda w1, w2, x: m.tanh(m.tanh(x @ w1) @ w2)), (w1, w2, x),
            lambda w1, w2, x: np.tanh(np.tanh(x @ w1) @ w2))


def matvec_4096(m, lax):
    rng = _rng()
    a = rng.standard_normal((4096, 4096)).astype(np.float32)
    v = rng.standard_normal(4096).astype(np.float32)
    return (lambda a, v: a @ v), (a, v), lambda a, v: a @ v



def _max_pool(m, lax, x):
    return lax.reduce_window(x, -m.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")


def max_pool(m, lax):
    x = _rng().standard_normal((8, 56, 56, 64)).astype(np.float32)
    return (lambda x: _max_pool(m, lax, x)), (x,), None


def max_pool_grad(m, lax, engine):
    x = _rng().standard_normal((8, 56, 56, 64)).astype(np.float32)
    return engine.grad(lambda x: m.sum(_max_pool(m, lax, x) ** 2)), (x,), None


def avg_pool_grad(m, lax, engine):
    x = _rng().standard_normal((8, 56, 56, 64)).astype(np.float32)

    def loss(x):
        pooled = lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0
        return m.sum(pooled ** 2)
    return engine.grad(loss), (x,), None



def segment_max_sorted(m, lax):
    rng = _rng()
    v = rng.standard_normal(10**6).astype(np.float32)
    i = np.sort(rng.integers(0, 1000, 10**6)).astype(np.int32)

    def numpy(v, i):
        out = np.full(1000, -np.inf, np.float32)
        np.maximum.at(out, i, v)
        return out
    return (lambda v, i: m.full(1000, -m.inf, m.float32).at[i].max(v)), (v, i), numpy



def batched_cholesky_8x8(m, lax):
    g = _rng().standard_normal((1000, 8, 8)).astype(np.float32)
    spd = g @ np.swapaxes(g, -1, -2) + 8 * np.eye(8, dtype=np.float32)
    return m.linalg.cholesky, (spd,), np.linalg.cholesky


def kron_64_32(m, lax):
    rng = _rng()
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((32, 32)).astype(np.float32)
    return m.kron, (a, b), np.kron


def trailing_broadcast_16(m, lax):
    rng = _rng()
    a = rng.standard_normal((512, 512)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    return ((lambda a, b: a[:, :, None] * b[None, None, :]), (a, b),
            lambda a, b: a[:, :, None] * b)


def histogram_1m(m, lax):
    x = _rng().standard_normal(10**6).astype(np.float32)
    return ((lambda x: m.histogram(x, bins=100, range=(-3, 3))[0]), (x,),
            lambda x: np.histogram(x, bins=100, range=(-3, 3))[0])


def conv_transpose_2x(m, lax):
    rng = _rng()
    x = rng.standard_normal((8, 28, 28, 64)).astype(np.float32)
    k = (rng.standard_normal((3, 3, 64, 32)) * 0.05).astype(np.float32)
    return ((lambda x, k: lax.conv_transpose(x, k, (2, 2), "SAME",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"))),
            (x, k), None)


def conv_stride2_input_grad(m, lax, engine):
    rng = _rng()
    x = rng.standard_normal((8, 56, 56, 64)).astype(np.float32)
    k = (rng.standard_normal((3, 3, 64, 128)) * 0.05).astype(np.float32)
    return engine.grad(lambda x, k: m.sum(lax.conv_general_dilated(
        x, k, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")) ** 2)), (x, k), None


def batched_eigh_4x4(m, lax):
    g = _rng().standard_normal((1000, 4, 4)).astype(np.float32)
    a = g + np.swapaxes(g, -1, -2)
    return (lambda a: m.linalg.eigh(a)[0]), (a,), np.linalg.eigvalsh


def batched_eigh_vectors_4x4(m, lax):
    g = _rng().standard_normal((1000, 4, 4)).astype(np.float32)
    a = g + np.swapaxes(g, -1, -2)

    def reference(a):  # eigenvector signs are arbitrary: compare magnitudes
        w, v = np.linalg.eigh(a)
        return w, np.abs(v)
    return (lambda a: (lambda w, v: (w, m.abs(v)))(*m.linalg.eigh(a))), (a,), reference


def swapaxes_small(m, lax):
    x = _rng().standard_normal((4096, 64, 16)).astype(np.float32)
    return ((lambda x: m.swapaxes(x, 1, 2) * 2.0), (x,),
            lambda x: np.swapaxes(x, 1, 2) * np.float32(2.0))


def nchw_to_nhwc(m, lax):
    x = _rng().standard_normal((32, 64, 56, 56)).astype(np.float32)
    return ((lambda x: m.transpose(x, (0, 2, 3, 1)) + 1.0), (x,),
            lambda x: np.transpose(x, (0, 2, 3, 1)) + np.float32(1.0))


def pairwise_distances(m, lax):
    rng = _rng()
    a = rng.standard_normal((512, 16)).astype(np.float32)
    b = rng.standard_normal((512, 16)).astype(np.float32)
    return ((lambda a, b: m.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))), (a, b),
            lambda a, b: np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)))


def _lstm(m, lax, nn):
    def lstm(w, u, xs):
        def step(carry, x):
            h, c = carry
            i, f, g, o = m.split(x @ w + h @ u, 4, axis=-1)
            c = nn.sigmoid(f) * c + nn.sigmoid(i) * m.tanh(g)
            h = nn.sigmoid(o) * m.tanh(c)
            return (h, c), h
        zeros = m.zeros((32, 128), m.float32)
        return lax.scan(step, (zeros, zeros), xs)[1]
    return lstm


def _lstm_data():
    rng = _rng()
    return ((rng.standard_normal((64, 512)) * 0.1).astype(np.float32),
            (rng.standard_normal((128, 512)) * 0.1).astype(np.float32),
            rng.standard_normal((50, 32, 64)).astype(np.float32))


def lstm_scan(m, lax, engine):
    return _lstm(m, lax, engine.nn), _lstm_data(), None


def lstm_scan_grad(m, lax, engine):
    lstm = _lstm(m, lax, engine.nn)
    return (engine.grad(lambda w, u, xs: lstm(w, u, xs).sum(), argnums=(0, 1)),
            _lstm_data(), None)


def fori_row_updates(m, lax):
    x = _rng().standard_normal((512, 256)).astype(np.float32)

    def numpy(x):
        x = x.copy()
        for i in range(1, 512):
            x[i] = x[i - 1] * np.float32(0.5) + np.float32(1.0)
        return x
    return ((lambda x: lax.fori_loop(1, 512, lambda i, x: x.at[i].set(x[i - 1] * 0.5 + 1.0),
                                     x)), (x,), numpy)


def causal_attention(m, lax, engine):
    rng = _rng()
    q, k, v = (rng.standard_normal((4, 8, 256, 64)).astype(np.float32) for _ in range(3))

    def f(q, k, v):
        s = m.einsum("bhqd,bhkd->bhqk", q, k) / 8.0
        s = m.where(m.tril(m.ones((256, 256), bool)), s, -1e9)
        return m.einsum("bhqk,bhkd->bhqd", engine.nn.softmax(s, -1), v)
    return f, (q, k, v), None


def resize_bilinear_2x(m, lax, engine):
    x = _rng().standard_normal((8, 112, 112, 3)).astype(np.float32)
    return (lambda x: engine.image.resize(x, (8, 224, 224, 3), "bilinear")), (x,), None


def resize_cubic_half(m, lax, engine):
    x = _rng().standard_normal((8, 224, 224, 3)).astype(np.float32)
    return (lambda x: engine.image.resize(x, (8, 112, 112, 3), "cubic")), (x,), None


def batched_qr_6x4(m, lax):
    a = _rng().standard_normal((1000, 6, 4)).astype(np.float32)
    return (lambda a: m.linalg.qr(a)[1]), (a,), lambda a: np.linalg.qr(a)[1]


def batched_svdvals_4x4(m, lax):
    a = _rng().standard_normal((1000, 4, 4)).astype(np.float32)
    return ((lambda a: m.linalg.svd(a, compute_uv=False)), (a,),
            lambda a: np.linalg.svd(a, compute_uv=False))


WORKLOADS: dict[str, tuple[str, Callable]] = {
    "gather": ("x[i]: 1e6 of 1e6 f32", gather_1d),
    "take": ("take rows: 4096 of (50000, 128)", take_rows),
    "segment_sum": ("x.at[i].add: 1e6 into 1000", segment_sum),
    "sort": ("sort 1e6 f32", sort_1d),
    "argsort": ("argsort 1e5 f32", argsort_1d),
    "argmax": ("argmax rows (4096, 1024)", argmax_rows),
    "top_k": ("top_k 8 of rows (512, 1024)", top_k_rows),
    "per_example": ("vmap(grad) per example (64, 256x256)", per_example_grads),
    "bmm": ("einsum bij,bjk (64, 128, 128)", batched_matmul),
    "cumsum": ("cumsum 1e6 f32", cumsum_1d),
    "cumsum_rows": ("cumsum along rows (1024, 1024)", cumsum_rows),
    "stack_sum": ("stack 64 of (256, 256), sum", stack_sum),
    "concatenate": ("concatenate 100 of (1000, 64)", concatenate_many),
    "row_updates": ("x.at[rows].set: 1000 of (10000, 128)", row_updates),
    "column_max": ("max over axis 0 (4096, 1024)", column_max),
    "column_max_large": ("max over axis 0 (16384, 1024)", column_max_large),
    "middle_max": ("max over axis 1 (64, 512, 512)", middle_axis_max),
    "column_argmax": ("argmax over axis 0 (16384, 1024)", column_argmax),
    "short_argmax": ("argmax over rows of 8 (1e6, 8)", short_row_argmax),
    "take_along": ("take_along_axis (1000, 1000)", take_along_rows),
    "transpose_add": ("x + x.T (4096, 4096)", transpose_add),
    "moveaxis": ("moveaxis(x, 2, 0) * 2 (64, 512, 512)", moveaxis_scale),
    "searchsorted": ("searchsorted 1e5 in 1e6 f32", searchsorted),
    "int_matmul": ("int32 matmul (256, 256)", int_matmul),
    "repeat_tile": ("repeat + tile (1000, 1000)", repeat_tile),
    "tiny_matmuls": ("1e5 matmuls of 3x3", tiny_matmuls),
    "tiny_matmuls_4x4": ("1e5 matmuls of 4x4", tiny_matmuls_4x4),
    "complex_mul": ("complex64 a * b + a, 1e6", complex_multiply_add),
    "complex_exp": ("complex64 exp, 1e6", complex_exp),
    "row16_argmax": ("argmax over rows of 16 (1e6, 16)", row16_argmax),
    "complex_tanh": ("complex64 tanh, 1e6", complex_tanh),
    "complex_cumsum": ("complex64 cumsum along rows (1000, 1000)", complex_cumsum),
    "row100_sum": ("sum over rows of 100 (10000, 100)", row100_sum),
    "row32_layernorm": ("layernorm over rows of 32 (31250, 32)", row32_layernorm),
    "row10_logsumexp": ("logsumexp over rows of 10 (200000, 10)", row10_logsumexp),
    "row10_softmax": ("softmax over rows of 10 (200000, 10)", row10_softmax),
    "row10_xent": ("cross-entropy over 10 classes (200000, 10)", row10_cross_entropy),
    "row12_sum": ("sum over rows of 12 (200000, 12)", row12_sum),
    "row_max": ("max over rows (4096, 1024)", row_max),
    "total_min": ("min of all (4096, 1024)", total_min),
    "solve": ("linalg.solve (512, 512) with 16 right-hand sides", solve_512),
    "cholesky": ("linalg.cholesky (512, 512)", cholesky_512),
    "inv": ("linalg.inv (256, 256)", inv_256),
    "scan_small": ("scan 1000 steps of c*0.99+x, 256 f32", scan_small_body),
    "while_newton": ("while_loop: 20 Newton steps of sqrt on 1e5 f32", while_newton),
    "attention": ("attention b4 h8 s256 d64", attention),
    "attention_grad": ("grad of attention(q, k, v).sum()", attention_grad),
    "conv": ("conv 3x3 64->64 b8 56x56 NHWC", conv_3x3),
    "conv_grad": ("grad of conv 3x3 (kernel)", conv_3x3_grad),
    "gelu": ("gelu 1e7 f32", gelu),
    "top_k_1d": ("top_k 100 of 1e6 f32", top_k_1d),
    "fft_1m": ("abs(fft(x)), 2**20 complex64", fft_1m),
    "rfft2": ("abs(rfft2(x)), (512, 512) f32", rfft2_512),
    "batched_solve": ("linalg.solve of 1000 4x4 systems", batched_solve_4x4),
    "one_row_mlp": ("tanh MLP 64-256-64 on one row", one_row_mlp),
    "matvec": ("matrix-vector product (4096, 4096) f32", matvec_4096),
    "max_pool": ("max pool 3x3/2 SAME (8, 56, 56, 64)", max_pool),
    "max_pool_grad": ("grad of max pool 3x3/2 (8, 56, 56, 64)", max_pool_grad),
    "avg_pool_grad": ("grad of avg pool 2x2/2 (8, 56, 56, 64)", avg_pool_grad),
    "segment_max": ("x.at[i].max: 1e6 sorted into 1000", segment_max_sorted),
    "batched_cholesky": ("linalg.cholesky of 1000 8x8 matrices", batched_cholesky_8x8),
    "kron": ("kron (64, 64) x (32, 32)", kron_64_32),
    "trailing_broadcast": ("a[:, :, None] * b, (512, 512) x 16", trailing_broadcast_16),
    "histogram": ("histogram of 1e6 f32, 100 bins", histogram_1m),
    "conv_transpose": ("conv_transpose 3x3/2 64->32 b8 28x28 NHWC", conv_transpose_2x),
    "conv_s2_dx": ("grad of conv 3x3/2 64->128 (input)", conv_stride2_input_grad),
    "swapaxes_small": ("swapaxes(x, 1, 2) * 2 (4096, 64, 16)", swapaxes_small),
    "nchw_to_nhwc": ("transpose(x, (0, 2, 3, 1)) + 1 (32, 64, 56, 56)", nchw_to_nhwc),
    "pairwise_distances": ("sqrt(((a[:, None] - b[None]) ** 2).sum(-1)) (512, 16)",
                           pairwise_distances),
    "batched_qr": ("linalg.qr R of 1000 6x4 matrices", batched_qr_6x4),
    "batched_svdvals": ("linalg.svd values of 1000 4x4 matrices", batched_svdvals_4x4),
    "resize_2x": ("image.resize 112->224 bilinear (8, *, *, 3)", resize_bilinear_2x),
    "resize_half": ("image.resize 224->112 cubic, antialiased", resize_cubic_half),
    "causal_attention": ("causal attention b4 h8 s256 d64", causal_attention),
    "fori_row_updates": ("fori_loop: x.at[i].set(x[i - 1] * 0.5 + 1), (512, 256)",
                         fori_row_updates),
    "lstm": ("LSTM scan 50 steps b32 64->128", lstm_scan),
    "lstm_grad": ("grad (W, U) of LSTM scan 50 steps", lstm_scan_grad),
    "batched_eigh": ("linalg.eigh eigenvalues of 1000 4x4 matrices", batched_eigh_4x4),
    "batched_eigh_vectors": ("linalg.eigh (values, abs(vectors)) of 1000 4x4 matrices",
                             batched_eigh_vectors_4x4),
}

# Builders that take the engine's top-level module (vmap, grad, nn) as a third argument.
_NEEDS_LIBRARY = {per_example_grads, attention, attention_grad, conv_3x3_grad, gelu,
                  max_pool_grad, avg_pool_grad, conv_stride2_input_grad,
                  lstm_scan, lstm_scan_grad, causal_attention, resize_bilinear_2x,
                  resize_cubic_half}


def _modules(name: str):
    if name == "ember":
        import ember
        from ember import lax
        return ember, lax
    import jax
    from jax import lax
    return jax, lax


def _program(builder, eng, name):
    lib, lax = _modules(name)
    if builder in _NEEDS_LIBRARY:
        return builder(eng.m, lax, lib)
    return builder(eng.m, lax)


def _agree(a, b) -> bool:
    leaves_a = [np.asarray(x) for x in _leaves(a)]
    leaves_b = [np.asarray(x) for x in _leaves(b)]
    return len(leaves_a) == len(leaves_b) and all(
        x.shape == y.shape and (np.array_equal(x, y) if x.dtype.kind in "iub" else
                                np.allclose(x, y, rtol=1e-3, atol=1e-3))
        for x, y in zip(leaves_a, leaves_b))


def _leaves(out):
    return [x for o in out for x in _leaves(o)] if isinstance(out, (list, tuple)) else [out]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated workload names")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(WORKLOADS)
    engines = {n: e for n in ("ember", "jax") if (e := make_engine(n)) is not None}
    header = ["workload", "ember", "jax", "numpy", "ember/jax", "agree"]
    rows = []
    for key in names:
        label, builder = WORKLOADS[key]
        fns, outs, numpy_fn = {}, {}, None
        for name, eng in engines.items():
            fn, arrays, numpy_fn = _program(builder, eng, name)
            compiled = eng.jit(fn)
            inputs = [eng.put(a) for a in arrays]
            fns[name] = lambda c=compiled, xs=inputs, eng=eng: eng.block(c(*xs))
            outs[name] = fns[name]()
        if numpy_fn is not None:
            fns["numpy"] = lambda f=numpy_fn, xs=arrays: f(*xs)
        times = median_times(fns, args.repeats, 0.05)
        agree = "yes" if "jax" not in outs or _agree(outs["ember"], outs["jax"]) else "NO"
        rows.append([label, _fmt_time(times["ember"]), _fmt_time(times.get("jax")),
                     _fmt_time(times.get("numpy")),
                     _fmt_ratio(times["ember"] / times["jax"] if "jax" in times else None),
                     agree])
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("| " + " | ".join("---" for _ in header) + " |")
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        for r in [header] + rows:
            print("  ".join(f"{c:>38}" if i == 0 else f"{c:>10}" for i, c in enumerate(r)))


if __name__ == "__main__":
    main()
