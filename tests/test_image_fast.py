"""ember.image's banded resize (ember/image/_band.py): a resize whose weights are known at
trace time gathers each output's few taps instead of a dense dot. Checked against JAX
(which contracts with the dense weight matrix) on image-sized shapes, channel-last and
channel-first, up and down, every method; non-finite inputs (the dot spreads them along
their line); narrow floats; vmap, grad, jvp and second order; and the band and pass order
themselves."""

from functools import partial

import numpy as np
import pytest

import ember
import ember.image as image
from ember.image import _band, _scale

# "cubic" is "cubic-pytorch" antialiased
METHODS = ["linear", "lanczos3", "lanczos5", "cubic-pytorch", "area"]
SHAPES = [((2, 12, 14, 3), (2, 24, 28, 3)),   # channel-last, 2x up
          ((2, 3, 10, 13), (2, 3, 23, 29)),   # channel-first, odd ratios up
          ((2, 24, 28, 3), (2, 12, 14, 3)),   # 2x down
          ((2, 20, 26, 3), (2, 7, 9, 3))]     # odd ratios down


@pytest.fixture(scope="module")
def jimage(jax):
    import jax.image

    return jax.image


def _weights(m, n, method="linear", antialias=True):
    radius, kernel = _scale._KERNELS[_scale.ResizeMethod.from_string(method)]
    edge = radius if method == "cubic-pytorch" and not antialias else None
    scale = np.asarray(n / m, np.float32)
    return np.asarray(_scale._weights(m, n, scale, np.float32(0), kernel, antialias, edge))


def _resized(mod, jit, x, shape, method, antialias=True):
    return np.asarray(jit(lambda x: mod.resize(x, shape, method, antialias=antialias))(x))


@pytest.mark.parametrize("method", METHODS)
def test_banded_resize_matches_jax_and_the_dot(jax, jimage, method, monkeypatch):
    rng = np.random.default_rng(0)
    for case, (in_shape, out_shape) in enumerate(SHAPES):
        x = rng.normal(size=in_shape).astype(np.float32)
        down = in_shape[2] > out_shape[2]
        for antialias in (True, False) if down else (True,):  # no effect upsampling
            got = _resized(image, ember.jit, x, out_shape, method, antialias)
            # JAX computes the float32 weights in another order: a few ulp of the weights
            want = _resized(jimage, jax.jit, x, out_shape, method, antialias)
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
            if case % 2 == 0:
                with monkeypatch.context() as patch:  # the same weights as a dense dot
                    patch.setattr(_band, "MAX_TAPS", 0)
                    dense = _resized(image, ember.jit, x, out_shape, method, antialias)
                np.testing.assert_allclose(got, dense, atol=1e-6, rtol=1e-6)
    eager = image.resize(x, out_shape, method, antialias=antialias)
    np.testing.assert_allclose(eager, got, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("method", ["linear", "lanczos3"])
def test_non_finite_inputs_spread_as_in_jax(jax, jimage, method):
    """The dot multiplies a non-finite pixel by every zero weight of its line (NaN): the
    banded resize must give the same NaN / inf pattern, not a local one."""
    rng = np.random.default_rng(1)
    cases = [((2, 12, 14, 3), (2, 24, 28, 3), True),
             ((2, 24, 27, 3), (2, 12, 9, 3), True),
             ((2, 24, 27, 3), (2, 8, 9, 3), False)]  # no antialias: some inputs unused
    for in_shape, out_shape, antialias in cases:
        resize = lambda mod, x: mod.resize(x, out_shape, method, antialias=antialias)  # noqa: B023
        ours, theirs = ember.jit(partial(resize, image)), jax.jit(partial(resize, jimage))
        for value, where in ((np.inf, (1, 5, 7, 2)), (-np.inf, (0, 0, 0, 0)),
                             (np.nan, (1, 3, 4, 1)), (np.inf, (0, 1, 1, 0))):
            x = rng.normal(size=in_shape).astype(np.float32)
            x[where] = value
            want, got = np.asarray(theirs(x)), np.asarray(ours(x))
            assert np.isnan(want).any()
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
            np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
            finite = np.isfinite(want)
            np.testing.assert_allclose(got[finite], want[finite], atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_narrow_floats_match_jax(jax, jimage, dtype):
    x = np.random.default_rng(2).normal(size=(2, 12, 14, 3)).astype(np.float32)
    want = np.asarray(jimage.resize(jax.numpy.asarray(x, dtype), (2, 24, 21, 3), "cubic"))
    got = ember.jit(lambda x: image.resize(x, (2, 24, 21, 3), "cubic"))(
        ember.numpy.asarray(x, dtype))
    assert str(got.dtype) == dtype
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                               atol=2e-2, rtol=2e-2)


def test_vmap_and_grad_match_jax(jax, jimage):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 10, 12, 2)).astype(np.float32)
    ct = rng.normal(size=(3, 20, 7, 2)).astype(np.float32)

    def run(mod, eng, x):
        resize = lambda v: mod.resize(v, (20, 7, 2), "lanczos3")
        batched = eng.vmap(resize)(x)
        grad = eng.grad(lambda v: (eng.vmap(resize)(v) * ct).sum())(x)
        return batched, grad

    want = jax.jit(lambda x: run(jimage, jax, x))(x)
    got = ember.jit(lambda x: run(image, ember, x))(x)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)


def test_jvp_and_second_order_match_jax(jax, jimage):
    """The banded pass is differentiated as the dot (custom_jvp): forward mode and
    derivatives of derivatives go through it."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 10, 12, 3)).astype(np.float32)
    t = rng.normal(size=x.shape).astype(np.float32)

    def run(mod, eng, x, t):
        resize = lambda v: mod.resize(v, (2, 20, 7, 3), "cubic")
        inner = eng.grad(lambda v: (resize(v) ** 3).sum())
        return eng.jvp(resize, (x,), (t,)), eng.grad(lambda v: inner(v).sum())(x)

    (out, tangent), hess = ember.jit(lambda x, t: run(image, ember, x, t))(x, t)
    (want_out, want_tangent), want_hess = jax.jit(lambda x, t: run(jimage, jax, x, t))(x, t)
    np.testing.assert_allclose(out, want_out, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(tangent, want_tangent, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(hess, want_hess, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("method", ["linear", "lanczos3"])
def test_scale_and_translate_with_known_scale_matches_jax(jax, jimage, method):
    """Concrete (untraced) scales and translations take the band; a translation moves
    some outputs off the input (all-zero weight columns)."""
    x = np.random.default_rng(5).normal(size=(2, 12, 14, 3)).astype(np.float32)
    scale, shift = np.array([1.7, 0.6], np.float32), np.array([3.5, -2.25], np.float32)

    def run(mod, x):
        return mod.scale_and_translate(x, (2, 21, 9, 3), (1, 2), scale, shift, method)

    want = np.asarray(jax.jit(lambda x: run(jimage, x))(x))
    got = ember.jit(lambda x: run(image, x))(x)
    assert (want == 0).any()  # outputs off the input
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


def test_float64_matches_numpy_loops(x64):
    """With x64 the weights and sums are float64: against the per-pixel loops of the op
    records (float64 NumPy from the definition)."""
    from tests.op_records.image import _resize_dim

    x = np.random.default_rng(6).normal(size=(2, 12, 14, 3))
    for shape, method in (((2, 24, 9, 3), "linear"), ((2, 7, 31, 3), "lanczos3")):
        got = ember.jit(lambda x: image.resize(x, shape, method))(x)  # noqa: B023
        assert got.dtype == np.float64
        want = _resize_dim(_resize_dim(x, 1, shape[1], method, True), 2, shape[2], method,
                           True)
        np.testing.assert_allclose(got, want, atol=1e-12, rtol=1e-12)


def test_band_rebuilds_the_weight_matrix():
    for m, n, method, antialias in [(12, 24, "linear", True), (24, 12, "lanczos3", True),
                                    (27, 8, "linear", False), (13, 29, "cubic", True),
                                    (9, 17, "cubic-pytorch", False), (20, 7, "area", True)]:
        w = _weights(m, n, method, antialias)
        index, taps = _band.band(w)
        assert index.shape == taps.shape and index.shape[1] == n
        assert index.min() >= 0 and index.max() < m
        np.testing.assert_array_equal(np.diff(index, axis=0), 1)  # consecutive inputs
        rebuilt = np.zeros_like(w)
        np.put_along_axis(rebuilt, index, taps, axis=0)
        np.testing.assert_array_equal(rebuilt, w)  # every nonzero kept, nothing else


def test_band_declines_wide_and_empty_matrices():
    assert _band.band(_weights(200, 4, "lanczos3")) is None  # ~150 taps per output
    assert _band.band(np.zeros((0, 5), np.float32)) is None
    assert _band.band(np.zeros((5, 0), np.float32)) is None
    index, taps = _band.band(np.ones((3, 2), np.float32))  # dense but tiny: all 3 taps
    assert index.shape == (3, 2)


def test_order_runs_short_rows_while_small():
    """The width pass (3 contiguous elements per tap channel-last, 1 channel-first) runs
    first when upsampling and last when downsampling, while the image is small."""
    up = [_band.band(_weights(12, 24)), _band.band(_weights(14, 28))]
    assert _band.order((2, 12, 14, 3), (1, 2), (24, 28), up) == (1, 0)
    down = [_band.band(_weights(24, 12)), _band.band(_weights(28, 14))]
    assert _band.order((2, 24, 28, 3), (1, 2), (12, 14), down) == (0, 1)
    assert _band.order((2, 3, 12, 14), (2, 3), (24, 28), up) == (1, 0)
    assert _band.order((2, 3, 24, 28), (2, 3), (12, 14), down) == (0, 1)
