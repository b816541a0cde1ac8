"""The native direct convolution loop (ember.backends.cpu.direct_conv_kernel): each output in
vector registers, for convolutions with few input features. Results against a float64 loop
over the taps, every layout of blocks (output features per vector, positions per block,
ragged rows), strides and dilations, row ranges and threads (the same bits either way), the
operands it refuses, and ``lax.conv_general_dilated`` running through it."""

import itertools

import numpy as np
import pytest

import ember
import ember.lax.convolution as C
from ember.backends.cpu import direct_conv_kernel as dck
from ember.compiler.evaluator import CUSTOM_CALL_TARGETS

pytestmark = pytest.mark.skipif(dck._runner((np.dtype(np.float32), 4, 1, 8)) is None,
                                reason="no native code on this machine")


def _reference(x, w, strides, dilation, out_sp):
    """float64 sum over the taps of strided slices of ``x`` times the tap's matrix."""
    *kernel, _, o = w.shape
    out = np.zeros((x.shape[0], *out_sp, o))
    for tap in itertools.product(*(range(k) for k in kernel)):
        window = tuple(slice(t * d, t * d + (n - 1) * s + 1, s)
                       for t, d, n, s in zip(tap, dilation, out_sp, strides))
        out += x[(slice(None), *window)].astype(np.float64) @ w[tap].astype(np.float64)
    return out


def _case(rng, dtype, batch, padded, features, kernel, out_features, strides, dilation):
    x = rng.standard_normal((batch, *padded, features)).astype(dtype)
    w = rng.standard_normal((*kernel, features, out_features)).astype(dtype)
    out_sp = [(p - (k - 1) * d - 1) // s + 1
              for p, k, d, s in zip(padded, kernel, dilation, strides)]
    return x, w, out_sp


CASES = [  # (batch, padded, features, kernel, out_features, strides, dilation)
    (2, (10, 11), 1, (3, 3), 32, (1, 1), (1, 1)),
    (3, (9, 13), 16, (3, 3), 32, (2, 1), (1, 1)),
    (1, (12, 12), 3, (5, 5), 16, (1, 1), (2, 2)),
    (2, (8, 9), 7, (3, 2), 64, (1, 3), (1, 2)),
    (2, (8, 9), 5, (2, 2), 96, (1, 1), (1, 1)),  # (several blocks of output features)
    (2, (8, 30), 2, (1, 3), 8, (1, 1), (1, 1)),  # (ragged positions per row)
    (2, (6, 7), 4, (2, 2), 4, (1, 1), (1, 1)),
    (3, (17,), 3, (4,), 24, (2,), (1,)),  # (one spatial dim)
    (1, (5, 5), 2, (5, 5), 8, (1, 1), (1, 1)),  # (one output position)
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_matches_a_float64_loop(case, dtype):
    rng = np.random.default_rng(len(case[1]) + case[2] + case[4])
    x, w, out_sp = _case(rng, dtype, *case)
    out = np.full((x.shape[0], *out_sp, w.shape[-1]), np.nan, dtype)
    assert dck.direct_conv(x, w, out, case[5], case[6])
    want = _reference(x, w, case[5], case[6], out_sp)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol * np.abs(want).max())


PADDED = [  # (batch, spatial, features, kernel, out_features, strides, dilation, padding)
    (2, (10, 11), 1, (3, 3), 32, (1, 1), (1, 1), ((1, 1), (1, 1))),  # SAME
    (3, (9, 13), 16, (3, 3), 32, (2, 2), (1, 1), ((1, 0), (0, 1))),
    (1, (7, 6), 3, (5, 5), 16, (1, 1), (2, 2), ((4, 4), (4, 3))),  # taps mostly padding
    (2, (4, 5), 2, (3, 3), 8, (1, 3), (1, 1), ((6, 5), (7, 2))),  # outputs only padding
    (2, (3, 30), 4, (3, 3), 8, (1, 1), (1, 1), ((2, 2), (2, 2))),  # long interior rows
    (3, (17,), 3, (4,), 24, (2,), (1,), ((3, 2),)),  # one spatial dim
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", PADDED)
def test_padding_in_the_loop_matches_a_padded_input(case, dtype):
    batch, spatial, features, kernel, out_features, strides, dilation, padding = case
    rng = np.random.default_rng(sum(spatial) + features)
    x = rng.standard_normal((batch, *spatial, features)).astype(dtype)
    w = rng.standard_normal((*kernel, features, out_features)).astype(dtype)
    xp = np.pad(x, ((0, 0), *padding, (0, 0)))
    out_sp = [(p - (k - 1) * d - 1) // s + 1
              for p, k, d, s in zip(xp.shape[1:-1], kernel, dilation, strides)]
    got = np.full((batch, *out_sp, out_features), np.nan, dtype)
    assert dck.direct_conv(x, w, got, strides, dilation, padding=padding)
    want = np.full_like(got, np.nan)
    assert dck.direct_conv(xp, w, want, strides, dilation)
    np.testing.assert_array_equal(got, want)  # (the same products in the same order)
    ref = _reference(xp, w, strides, dilation, out_sp)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * max(np.abs(ref).max(), 1))


def test_row_ranges_and_threads_give_the_same_bits():
    rng = np.random.default_rng(3)
    x, w, out_sp = _case(rng, np.float32, 8, (34, 34), 16, (3, 3), 32, (1, 1), (1, 1))
    whole = np.empty((8, *out_sp, 32), np.float32)
    assert dck.direct_conv(x, w, whole, (1, 1), (1, 1))  # (enough work for the threads)
    pieces = np.full_like(whole, np.nan)
    rows = dck.rows_of(pieces.shape)
    for lo, hi in ((0, 5), (5, 6), (6, rows)):
        assert dck.direct_conv(x, w, pieces, (1, 1), (1, 1), rows=(lo, hi))
    np.testing.assert_array_equal(pieces, whole)
    np.testing.assert_allclose(whole, _reference(x, w, (1, 1), (1, 1), out_sp),
                               rtol=1e-5, atol=1e-4)


def test_operands_without_a_loop_are_refused_untouched():
    rng = np.random.default_rng(4)
    x, w, out_sp = _case(rng, np.float32, 2, (6, 6), 3, (3, 3), 8, (1, 1), (1, 1))
    out = np.full((2, *out_sp, 8), 7.0, np.float32)
    assert not dck.direct_conv(x.astype(np.int32), w.astype(np.int32),
                               out.astype(np.int32), (1, 1), (1, 1))
    odd = np.full((2, *out_sp, 6), 7.0, np.float32)  # (6 output features: not 4-lane vectors)
    assert not dck.direct_conv(x, np.ascontiguousarray(w[..., :6]), odd, (1, 1), (1, 1))
    assert not dck.direct_conv(x, w[:, :, :2], out, (1, 1), (1, 1))  # (features differ)
    assert not dck.direct_conv(x, w, out.astype(np.float64), (1, 1), (1, 1))
    assert not dck.direct_conv(x[..., ::-1], w, out, (1, 1), (1, 1))  # (not C-ordered)
    assert not dck.direct_conv(x[None], w, out, (1, 1), (1, 1))  # (three spatial dims)
    assert not dck.direct_conv(x, w, out, (1, 1), (1, 1), padding=((0, 0), (-1, 1)))
    # a kernel past L1 with few positions per block (128 outputs: 8 vectors a position)
    x2, w2, out_sp2 = _case(rng, np.float32, 1, (6, 6), 16, (3, 3), 128, (1, 1), (1, 1))
    assert w2.nbytes > dck.L1_KERNEL_BYTES
    big = np.full((1, *out_sp2, 128), 7.0, np.float32)
    assert not dck.direct_conv(x2, w2, big, (1, 1), (1, 1))
    assert (out == 7).all() and (odd == 7).all() and (big == 7).all()


def test_outputs_that_would_read_past_the_input_are_an_error():
    rng = np.random.default_rng(5)
    x, w, out_sp = _case(rng, np.float32, 1, (6, 6), 2, (3, 3), 8, (1, 1), (1, 1))
    too_many = np.empty((1, out_sp[0] + 1, out_sp[1], 8), np.float32)
    with pytest.raises(ValueError, match="reads past"):
        dck.direct_conv(x, w, too_many, (1, 1), (1, 1))
    out = np.empty((1, *out_sp, 8), np.float32)
    with pytest.raises(ValueError, match="rows"):
        dck.direct_conv(x, w, out, (1, 1), (1, 1), rows=(0, out_sp[0] + 1))


@pytest.mark.parametrize("spec, features, out_features, strides, padding, dilation", [
    (("NHWC", "HWIO", "NHWC"), 1, 32, (1, 1), "SAME", (1, 1)),
    (("NHWC", "HWIO", "NHWC"), 16, 32, (2, 2), "SAME", (1, 1)),
    (("NCHW", "OIHW", "NCHW"), 3, 16, (1, 2), ((1, 2), (0, 1)), (2, 1)),
])
def test_lax_convolutions_with_few_features_run_the_loop(monkeypatch, spec, features,
                                                         out_features, strides, padding,
                                                         dilation):
    calls = []
    native = CUSTOM_CALL_TARGETS[C.DIRECT_TARGET]

    def spy(*args, **kw):
        done = native(*args, **kw)
        calls.append(done)
        return done
    monkeypatch.setitem(CUSTOM_CALL_TARGETS, C.DIRECT_TARGET, spy)
    rng = np.random.default_rng(features)
    nhwc, kernel = (4, 12, 13, features), (3, 3, features, out_features)
    x = rng.standard_normal(nhwc if spec[0] == "NHWC" else (4, features, 12, 13))
    w = rng.standard_normal(kernel if spec[1] == "HWIO" else (out_features, features, 3, 3))
    x, w = x.astype(np.float32), w.astype(np.float32)

    def conv(x, w):
        return ember.lax.conv_general_dilated(x, w, strides, padding, rhs_dilation=dilation,
                                              dimension_numbers=spec)
    got = np.asarray(ember.jit(conv)(x, w))
    assert calls == [True]
    monkeypatch.setattr(C, "_FAST_PATHS", False)  # (plain im2col)
    want = np.asarray(ember.jit(conv)(x.astype(np.float64), w.astype(np.float64)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
