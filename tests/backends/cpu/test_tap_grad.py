"""The native kernel-gradient loop (ember.backends.cpu.tap_grad_kernel): outputs x features
accumulated in registers over one stream of the positions. Results against the defining sum
in float64, strides and dilations, one and two spatial dims, groups of pairs with a ragged
last one; the same bits with and without the parallel runtime; what it declines; and
``grad`` of a convolution running through it."""

import itertools

import numpy as np
import pytest

import ember
import ember.lax.convolution as C
from ember.backends.cpu import parallel_runtime
from ember.backends.cpu import tap_grad_kernel as tgk
from ember.compiler.evaluator import CUSTOM_CALL_TARGETS

pytestmark = pytest.mark.skipif(tgk._runner((np.dtype(np.float32), 16, 2, 12)) is None
                                and tgk._runner((np.dtype(np.float32), 8, 4, 6)) is None,
                                reason="no native code on this machine")


def _reference(x, dy, out_sp, strides, dilation):
    """dk[o..., c, f] = sum over positions p of x[n, p * dilation + o * strides, c] dy[n, p, f]"""
    in_sp = dy.shape[1:-1]
    out = np.zeros((*out_sp, x.shape[-1], dy.shape[-1]))
    for o in itertools.product(*(range(v) for v in out_sp)):
        window = tuple(slice(t * s, t * s + (n - 1) * d + 1, d)
                       for t, s, n, d in zip(o, strides, in_sp, dilation))
        xs = x[(slice(None), *window)].astype(np.float64)  # (batch, *in_sp, features)
        out[o] = np.einsum("npc,npf->cf", xs.reshape(x.shape[0], -1, x.shape[-1]),
                           dy.astype(np.float64).reshape(x.shape[0], -1, dy.shape[-1]))
    return out


CASES = [  # (batch, padded, in_sp, out_sp, features, out_features, strides, dilation)
    (4, (30, 30), (28, 28), (3, 3), 1, 32, (1, 1), (1, 1)),  # a first layer's gradient
    (3, (12, 13), (10, 11), (3, 3), 3, 16, (1, 1), (1, 1)),
    (2, (15, 15), (7, 5), (3, 4), 5, 32, (2, 2), (1, 2)),  # strides and dilation
    (5, (9, 9), (4, 4), (2, 2), 7, 64, (1, 1), (2, 2)),
    (3, (20,), (16,), (5,), 4, 32, (1,), (1,)),  # one spatial dim
    (1, (6, 6), (1, 1), (6, 6), 2, 16, (1, 1), (1, 1)),  # one position
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_matches_the_defining_sum(case, dtype):
    batch, padded, in_sp, out_sp, features, out_features, strides, dilation = case
    rng = np.random.default_rng(features + out_features)
    x = rng.standard_normal((batch, *padded, features)).astype(dtype)
    dy = rng.standard_normal((batch, *in_sp, out_features)).astype(dtype)
    got = tgk.tap_grad(x, dy, out_sp, strides, dilation)
    if tgk.group_of(np.dtype(dtype), out_features) is None:
        assert got is None
        return
    want = _reference(x, dy, out_sp, strides, dilation)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_threads_give_the_same_bits(monkeypatch):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 30, 30, 3)).astype(np.float32)
    dy = rng.standard_normal((16, 28, 28, 32)).astype(np.float32)
    threaded = tgk.tap_grad(x, dy, (3, 3), (1, 1), (1, 1))
    monkeypatch.setattr(parallel_runtime, "ready", lambda: None)
    alone = tgk.tap_grad(x, dy, (3, 3), (1, 1), (1, 1))
    np.testing.assert_array_equal(threaded, alone)


def test_what_it_declines():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 8, 8, 2)).astype(np.float32)
    dy = rng.standard_normal((2, 6, 6, 16)).astype(np.float32)
    assert tgk.tap_grad(x.astype(np.int32), dy.astype(np.int32), (3, 3), (1, 1),
                        (1, 1)) is None
    assert tgk.tap_grad(x, dy.astype(np.float64), (3, 3), (1, 1), (1, 1)) is None
    assert tgk.tap_grad(x, np.ascontiguousarray(dy[..., :6]), (3, 3), (1, 1), (1, 1)) is None
    wide = rng.standard_normal((2, 6, 6, 256)).astype(np.float32)  # (too few pairs a pass)
    assert tgk.tap_grad(x, wide, (3, 3), (1, 1), (1, 1)) is None
    with pytest.raises(ValueError, match="read past"):
        tgk.tap_grad(x, dy, (4, 3), (1, 1), (1, 1))


def test_grad_of_a_first_layer_conv_runs_the_loop(monkeypatch):
    calls = []
    native = CUSTOM_CALL_TARGETS[C.TAP_GRAD_TARGET]

    def spy(*args):
        res = native(*args)
        calls.append(res is not None)
        return res
    monkeypatch.setitem(CUSTOM_CALL_TARGETS, C.TAP_GRAD_TARGET, spy)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 14, 14, 1)).astype(np.float32)
    k = rng.standard_normal((3, 3, 1, 32)).astype(np.float32)

    def loss(k):
        y = ember.lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                           dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return (y * y).sum()
    got = np.asarray(ember.jit(ember.grad(loss))(k))
    assert calls == [True]
    monkeypatch.setattr(C, "_FAST_PATHS", False)  # (plain im2col)
    want = np.asarray(ember.jit(ember.grad(loss))(k))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
