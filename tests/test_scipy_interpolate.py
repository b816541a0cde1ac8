"""ember.scipy.interpolate.RegularGridInterpolator against JAX's and a NumPy loop."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.scipy.interpolate import RegularGridInterpolator


def _grid(rng, sizes):
    return tuple(np.sort(rng.uniform(-2, 2, size=n)).astype(np.float32) for n in sizes)


@pytest.mark.parametrize("method", ["linear", "nearest"])
def test_random_grids_match_jax(jax, method):
    from jax.scipy.interpolate import RegularGridInterpolator as JaxRGI

    rng = np.random.default_rng(0)
    for sizes, trailing in [((4, 6), ()), ((3, 4, 5), (2,))]:
        pts = _grid(rng, sizes)
        vals = rng.normal(size=sizes + trailing).astype(np.float32)
        xi = rng.uniform(-2.3, 2.3, size=(7, 2, len(sizes))).astype(np.float32)
        for fill in (-1.0, None):
            ours = RegularGridInterpolator(pts, vals, method, fill_value=fill)(xi)
            theirs = JaxRGI(pts, vals, method, fill_value=fill)(xi)
            assert ours.shape == theirs.shape == (7, 2) + trailing
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_linear_against_numpy_interp_and_tuple_points():
    rng = np.random.default_rng(1)
    g = np.sort(rng.uniform(0, 5, 8)).astype(np.float32)
    v = rng.normal(size=8).astype(np.float32)
    x = rng.uniform(g[0], g[-1], 20).astype(np.float32)
    interp = RegularGridInterpolator((g,), v)
    np.testing.assert_allclose(interp(x), np.interp(x, g, v), rtol=1e-5, atol=1e-6)
    # 2-D: a function linear in each variable is reproduced exactly; xi as a tuple
    gx, gy = np.linspace(0, 1, 4), np.linspace(-1, 2, 5)
    f = lambda x, y: 1 + 2 * x - y + 3 * x * y
    interp2 = RegularGridInterpolator((gx, gy), f(gx[:, None], gy[None, :]))
    px, py = rng.uniform(0, 1, 6), rng.uniform(-1, 2, 6)
    np.testing.assert_allclose(interp2((px, py)), f(px, py), rtol=1e-5, atol=1e-5)
    assert np.isnan(interp2(np.array([[1.5, 0.0]]))[0])


def test_jit_vmap_grad():
    g = np.linspace(0.0, 3.0, 4, dtype=np.float32)
    interp = RegularGridInterpolator((g,), np.array([0.0, 1.0, 4.0, 9.0], np.float32))
    f = ember.jit(lambda r, x: r(x[:, None]))
    np.testing.assert_allclose(f(interp, jnp.array([0.5, 2.5])), [0.5, 6.5])
    np.testing.assert_allclose(ember.vmap(lambda x: interp(x[None, None])[0])(
        jnp.array([1.5, 2.0])), [2.5, 4.0])
    # slope of the piece holding x
    np.testing.assert_allclose(ember.grad(lambda x: interp(x[None, None])[0])(2.25), 5.0)


def test_bad_input():
    g = (np.arange(3.0),)
    with pytest.raises(ValueError, match="not defined"):
        RegularGridInterpolator(g, np.zeros(3), method="cubic")
    with pytest.raises(NotImplementedError):
        RegularGridInterpolator(g, np.zeros(3), bounds_error=True)
    with pytest.raises(ValueError, match="point arrays"):
        RegularGridInterpolator(g * 2, np.zeros(3))
    with pytest.raises(ValueError, match="fill_value"):
        RegularGridInterpolator(g, np.zeros(3), fill_value=1j)
    with pytest.raises(ValueError, match="dimension"):
        RegularGridInterpolator(g, np.zeros(3))(np.zeros((2, 2)))
