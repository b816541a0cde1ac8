"""ember.image against jax.image: every method, antialiasing, odd shapes, scale_and_translate
with traced scales (under jit and grad), dtypes and errors. Per-op records (eager, jit, grads,
vmap against NumPy loops) are in tests/op_records/image.py."""

import numpy as np
import pytest

import ember
import ember.image as image
import ember.numpy as jnp

METHODS = ["nearest", "linear", "lanczos3", "lanczos5", "cubic", "cubic-pytorch", "area"]
CASES = [((5, 7), (9, 4)), ((2, 6, 3), (2, 3, 3)), ((3, 5), (0, 5))]


@pytest.fixture(scope="module")
def jimage(jax):
    import jax.image

    return jax.image


@pytest.mark.parametrize("method", METHODS)
def test_resize_matches_jax(jimage, method):
    rng = np.random.default_rng(0)
    for in_shape, out_shape in CASES:
        x = rng.normal(size=in_shape).astype(np.float32)
        for antialias in (True, False):
            ours = image.resize(x, out_shape, method, antialias=antialias)
            theirs = np.asarray(jimage.resize(x, out_shape, method, antialias=antialias))  # jitted
            assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
            np.testing.assert_allclose(ours, theirs, atol=2e-6, rtol=1e-5)


def test_resize_dtypes_and_enum(jimage):
    x = np.arange(24, dtype=np.int32).reshape(4, 6)
    assert image.resize(x, (3, 7), "nearest").dtype == np.int32
    np.testing.assert_array_equal(image.resize(x, (3, 7), image.ResizeMethod.NEAREST),
                                  jimage.resize(x, (3, 7), "nearest"))
    lin = image.resize(x, (3, 7), image.ResizeMethod.LINEAR)
    assert lin.dtype == np.float32
    np.testing.assert_allclose(lin, jimage.resize(x, (3, 7), "bilinear"), rtol=1e-6)
    assert image.ResizeMethod.from_string("tricubic") is image.ResizeMethod.CUBIC
    same = image.resize(np.ones((2, 2), np.float32), (2, 2), "cubic")
    np.testing.assert_array_equal(same, np.ones((2, 2)))


@pytest.mark.parametrize("method", ["linear", "area", "cubic-pytorch"])
def test_scale_and_translate_jit_and_grad_match_jax(jax, jimage, method):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 5)).astype(np.float32)
    scale, shift = np.array([1.3, 0.6], np.float32), np.array([0.5, -0.7], np.float32)

    def ours(x, s, t):
        return image.scale_and_translate(x, (7, 3), (0, 1), s, t, method)

    def theirs(x, s, t):
        return jimage.scale_and_translate(x, (7, 3), (0, 1), s, t, method)

    np.testing.assert_allclose(ember.jit(ours)(x, scale, shift),
                               jax.jit(theirs)(x, scale, shift),
                               atol=2e-6, rtol=1e-5)
    # gradients with respect to the image and the (traced) scale and translation
    loss = lambda f, np_: lambda x, s, t: np_.sum(np_.sin(f(x, s, t)))
    g_ours = ember.grad(loss(ours, jnp), argnums=(0, 1, 2))(x, scale, shift)
    g_theirs = jax.jit(jax.grad(loss(theirs, jax.numpy), argnums=(0, 1, 2)))(x, scale, shift)
    for a, b in zip(g_ours, g_theirs):
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-4)


def test_resize_grad_matches_jax(jax, jimage):
    x = np.random.default_rng(2).normal(size=(2, 6, 4)).astype(np.float32)
    f = lambda mod, np_, m: lambda x: np_.sum(mod.resize(x, (2, 4, 9), m) ** 2)
    for m in ("lanczos5", "nearest"):
        np.testing.assert_allclose(ember.grad(f(image, jnp, m))(x),
                                   jax.jit(jax.grad(f(jimage, jax.numpy, m)))(x),
                                   rtol=1e-5, atol=1e-5)


def test_bad_input():
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match="shape must have length"):
        image.resize(x, (3,), "linear")
    with pytest.raises(ValueError, match="Unknown resize method"):
        image.resize(x, (3, 5), "bogus")
    with pytest.raises(TypeError, match="method"):
        image.resize(x, (3, 5), 3)
    with pytest.raises(ValueError, match="Nearest neighbor"):
        image.scale_and_translate(x, (3, 5), (1,), np.ones(1), np.zeros(1), "nearest")
    with pytest.raises(ValueError, match="same length"):
        image.scale_and_translate(x, (3, 5), (0, 1), np.ones(1), np.zeros(1), "linear")
