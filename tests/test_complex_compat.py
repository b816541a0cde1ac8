"""Complex special values as JAX (XLA) computes them, eager and under jit.

Expected values were computed with JAX 0.10.2 (XLA's formulas, not C99's) and are written
here as literals.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp

inf, nan = np.inf, np.nan


def _both(fn, *args):
    """``fn`` eager and under jit, as NumPy arrays."""
    args = [jnp.asarray(a) for a in args]
    return np.asarray(fn(*args)), np.asarray(ember.jit(fn)(*args))


def _assert_same(got, want):
    """Equal values, NaNs in the same places and zeros of the same sign."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype
    for g, w in ((got.real, want.real), (got.imag, want.imag)):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        ok = ~np.isnan(w)
        np.testing.assert_allclose(g[ok], w[ok], rtol=1e-6)
        np.testing.assert_array_equal(np.signbit(g[ok & (w == 0)]), np.signbit(w[ok & (w == 0)]))


@pytest.mark.parametrize("fn, want", [
    (jnp.maximum, [0j, complex(1, 1), complex(1, 2), complex(2, -0.0), 0j]),
    (jnp.minimum, [complex(-1, nan), complex(1, 1), complex(1, 1), complex(2, -0.0), 0j]),
])
def test_maximum_minimum_compare_parts_without_propagating_nan(fn, want):
    x = np.array([0, complex(1, nan), complex(1, 2), complex(nan, 0), -0.0 + 0j], np.complex64)
    y = np.array([complex(-1, nan), complex(1, 1), complex(1, 1), complex(2, -0.0), 0j],
                 np.complex64)
    for got in _both(fn, x, y):
        _assert_same(got, np.array(want, np.complex64))


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_divide_special_values(dt):
    x = np.array([0, 0, 1, complex(1, nan), complex(-1, 0), complex(inf, 1), complex(inf, inf),
                  complex(2, 3)], dt)
    y = np.array([complex(inf, inf), complex(-inf, nan), complex(-0.0, 0), complex(-0.0, 0),
                  complex(0, 0), complex(1, 1), complex(1, 0), complex(nan, inf)], dt)
    want = np.array([0j, complex(0, -0.0), complex(-inf, nan), complex(-inf, nan),
                     complex(-inf, nan), complex(inf, -inf), complex(inf, inf),
                     complex(0, -0.0)], dt)
    with _x64():
        for got in _both(lambda a, b: a / b, x, y):
            _assert_same(got, want)


class _x64:
    def __enter__(self):
        self.old = ember.config.jax_enable_x64
        ember.config.update("jax_enable_x64", True)

    def __exit__(self, *exc):
        ember.config.update("jax_enable_x64", self.old)


@pytest.mark.parametrize("fn, want", [
    (jnp.sqrt, [1j, complex(0, inf), complex(nan, nan), complex(nan, nan), complex(1, -0.0)]),
    (jnp.log, [complex(0, -np.pi), complex(inf, -np.pi), complex(nan, nan), complex(nan, nan),
               complex(0, -0.0)]),
    (jnp.abs, [1, inf, nan, nan, 1]),
])
def test_sqrt_log_abs_special_values(fn, want):
    x = np.array([complex(-1, -0.0), complex(-inf, -0.0), complex(inf, nan), complex(nan, -inf),
                  complex(1, -0.0)], np.complex64)
    want = np.array(want, np.float32 if fn is jnp.abs else np.complex64)
    for got in _both(fn, x):
        _assert_same(got, want)



_SPECIAL = np.array([complex(inf, inf), complex(-inf, nan), complex(inf, 0), complex(nan, 0),
                     complex(0.5, inf), complex(0, nan), complex(inf, 1), complex(-inf, 1),
                     complex(1, inf)])
_NAN = complex(nan, nan)


@pytest.mark.parametrize("fn, want", [
    (jnp.exp, [_NAN, _NAN, complex(inf, 0), complex(nan, 0), _NAN, _NAN, complex(inf, inf), 0j,
               _NAN]),
    (jnp.exp2, [_NAN] * 9),
    (jnp.sin, [_NAN, _NAN, _NAN, _NAN, complex(inf, inf), complex(0, nan), _NAN, _NAN,
               complex(inf, inf)]),
    (jnp.cos, [_NAN, _NAN, _NAN, _NAN, complex(inf, -inf), complex(nan, 0), _NAN, _NAN,
               complex(inf, -inf)]),
    (jnp.tan, [1j, _NAN, _NAN, _NAN, 1j, complex(0, nan), _NAN, _NAN, 1j]),
    (jnp.sinh, [_NAN, _NAN, complex(inf, 0), complex(nan, 0), _NAN, _NAN, complex(inf, inf),
                complex(-inf, inf), _NAN]),
    (jnp.cosh, [_NAN, _NAN, complex(inf, 0), complex(nan, 0), _NAN, _NAN, complex(inf, inf),
                complex(inf, -inf), _NAN]),
    (jnp.tanh, [complex(1, 0), complex(-1, 0), complex(1, 0), complex(nan, 0), _NAN, _NAN,
                complex(1, 0), complex(-1, 0), _NAN]),
])
@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_exp_and_trigonometric_special_values(fn, want, dt):
    # XLA gives nan + nan j where C99 keeps a part (C99's sinh(0 + inf j) is 0 + nan j)
    with _x64():
        for got in _both(fn, _SPECIAL.astype(dt)):
            _assert_same(got, np.array(want, dt))


def test_logistic_special_values():
    # 1 / (1 + exp(-x)) with XLA's exp and division (NumPy's division gave nan at -inf + 1j)
    x = np.array([complex(inf, inf), complex(inf, nan), complex(-inf, 1), complex(-inf, -1)],
                 np.complex64)
    want = np.array([_NAN, _NAN, 0j, complex(0, -0.0)], np.complex64)
    for got in _both(ember.lax.logistic, x):
        _assert_same(got, want)


def test_zero_dimensional_complex_functions_run_eagerly():
    # (np.log of a 0-d array is a NumPy scalar, whose parts cannot be assigned.)
    z = np.complex64(1 + 1j)
    for name in ("log", "log2", "log10", "sqrt", "abs", "exp", "sin", "tanh"):
        got = getattr(jnp, name)(jnp.asarray(z))
        np.testing.assert_allclose(got, getattr(np, name)(z), rtol=1e-6, err_msg=name)
