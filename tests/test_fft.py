"""lax.fft and jnp.fft against NumPy and JAX: values, dtypes, norms, vjp, jit, vmap."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax

rng = np.random.RandomState(0)
X = rng.randn(3, 4, 5).astype(np.float32)


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_fft_1d_matches_numpy(name, norm):
    out = getattr(jnp.fft, name)(X, n=6, axis=1, norm=norm)
    ref = getattr(np.fft, name)(X.astype(np.float64), n=6, axis=1, norm=norm)
    assert out.dtype == (np.complex64 if ref.dtype.kind == "c" else np.float32)
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn"])
def test_fftn_matches_numpy(name):
    y = rng.randn(2, 3, 2, 3, 2).astype(np.float32)  # 5 axes: more than one lax.fft call
    for s, axes in [(None, None), ((3, 4, 2, 3, 4), None), ((4, 3), (0, 3))]:
        out = getattr(jnp.fft, name)(y, s=s, axes=axes)
        ref = getattr(np.fft, name)(y.astype(np.float64), s=s,
                                    axes=axes if s is None or axes else range(-len(s), 0))
        np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fft_type, shape, lengths", [
    ("FFT", (3, 4, 6), (4, 6)), ("IFFT", (2, 5), (5,)), ("RFFT", (3, 4, 6), (4, 6)),
    ("RFFT", (2, 7), (7,)), ("IRFFT", (3, 4, 4), (4, 6)), ("IRFFT", (2, 4), (7,)),
])
def test_lax_fft_vjp_jit_vmap_match_jax(jax, fft_type, shape, lengths):
    x = rng.randn(*shape).astype(np.float32)
    if fft_type != "RFFT":
        x = (x + 1j * rng.randn(*shape)).astype(np.complex64)
    jtype = getattr(jax.lax.FftType, fft_type)
    ref = np.asarray(jax.lax.fft(x, jtype, lengths))
    f = lambda a: lax.fft(a, fft_type, lengths)  # noqa: E731
    np.testing.assert_allclose(np.asarray(f(x)), ref, rtol=1e-5, atol=1e-5)
    for backend in ("cpu", "interpreter"):
        np.testing.assert_allclose(np.asarray(ember.jit(f, backend=backend)(x)), ref,
                                   rtol=1e-5, atol=1e-5)
    ct = rng.randn(*ref.shape).astype(np.float32)
    if ref.dtype.kind == "c":
        ct = (ct + 1j * rng.randn(*ref.shape)).astype(ref.dtype)
    got = ember.vjp(f, x)[1](ct)[0]
    want = jax.vjp(lambda a: jax.lax.fft(a, jtype, lengths), x)[1](ct)[0]
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    xs = np.stack([x, 2 * x])
    np.testing.assert_allclose(np.asarray(ember.vmap(f)(xs)), np.stack([ref, 2 * ref]),
                               rtol=1e-5, atol=1e-5)


def test_fft_grad_of_real_loss_matches_jax(jax):
    def loss(np_):
        return lambda x: (np_.abs(np_.fft.rfft2(x, norm="ortho")) ** 2).sum() + np_.real(
            np_.fft.ifft(x * 1j).sum())
    np.testing.assert_allclose(np.asarray(ember.grad(loss(jnp))(X)),
                               np.asarray(jax.grad(loss(jax.numpy))(X)), rtol=1e-4, atol=1e-4)


def test_freqs_and_shifts():
    for n, d in [(5, 0.1), (6, 1.0)]:
        np.testing.assert_allclose(np.asarray(jnp.fft.fftfreq(n, d)), np.fft.fftfreq(n, d),
                                   rtol=1e-6)
        np.testing.assert_allclose(np.asarray(jnp.fft.rfftfreq(n, d)), np.fft.rfftfreq(n, d),
                                   rtol=1e-6)
    assert jnp.fft.fftfreq(4).dtype == np.float32
    a = np.arange(12).reshape(3, 4)
    for axes in (None, 1, (0,)):
        np.testing.assert_array_equal(np.asarray(jnp.fft.fftshift(a, axes)),
                                      np.fft.fftshift(a, axes))
        np.testing.assert_array_equal(np.asarray(jnp.fft.ifftshift(a, axes)),
                                      np.fft.ifftshift(a, axes))


def test_fft_errors():
    with pytest.raises(ValueError, match="norm"):
        jnp.fft.fft(X, norm="bad")
    with pytest.raises(ValueError, match="only real valued inputs"):  # JAX's class
        jnp.fft.rfft(X.astype(np.complex64))
    with pytest.raises(ValueError, match="only supports 2 axes"):
        jnp.fft.fft2(X, axes=(0, 1, 2))
    with pytest.raises(ValueError, match="repeated axes"):
        jnp.fft.fftn(X, axes=(0, 0))
    with pytest.raises(TypeError, match="multiple axes"):
        jnp.fft.fft(X, axis=(0, 1))
    with pytest.raises(ValueError, match="dimensions of the operand"):
        lax.fft(X.astype(np.complex64), "FFT", (4, 4))
    # As in JAX, a real operand of a complex transform is converted to complex.
    np.testing.assert_allclose(np.asarray(lax.fft(X, "FFT", (5,))), np.fft.fft(X),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="only real valued inputs"):
        lax.fft(X.astype(np.complex64), "RFFT", (5,))
