"""ember.nn.initializers against jax.nn.initializers: the same keys give JAX's values."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import random as er
from ember.nn import initializers as ei


def _check(got, want, exact):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        tol = 64 * float(np.finfo(got.dtype).eps)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# (factory name, args, kwargs, shape, dtype, bit-exact?)
_CASES = [
    ("constant", (-7.0,), {}, (2, 3), None, True),
    ("uniform", (10.0,), {}, (2, 3), None, True),
    ("normal", (5.0,), {}, (4,), None, False),
    ("truncated_normal", (5.0,), {"lower": -1.0, "upper": 3.0}, (3, 4), None, False),
    ("glorot_uniform", (), {}, (3, 4), None, True),
    ("glorot_normal", (), {}, (3, 4), None, False),
    ("xavier_uniform", (), {"in_axis": 0, "out_axis": 1}, (4, 5, 2), None, True),
    ("he_uniform", (), {"batch_axis": 0}, (2, 3, 4), None, True),
    ("he_normal", (), {"in_axis": (0, 1), "out_axis": -1}, (2, 3, 4), None, False),
    ("kaiming_normal", (), {}, (3, 3, 2, 4), "float16", False),
    ("lecun_uniform", (), {}, (5, 3), None, True),
    ("lecun_normal", (), {}, (5, 3), None, False),
    ("variance_scaling", (2.0, "fan_geo_avg", "normal"), {}, (4, 6), None, False),
    ("variance_scaling", (0.5, "fan_out", "uniform"), {}, (4, 6), "complex64", False),
    ("variance_scaling", (1.0, "fan_avg", "truncated_normal"), {}, (3, 2), "complex64", False),
    ("orthogonal", (), {}, (4, 4), None, False),
    ("orthogonal", (2.0,), {"column_axis": 0}, (3, 2, 4), None, False),
    ("delta_orthogonal", (), {}, (3, 3, 4), None, False),
    ("delta_orthogonal", (), {}, (3, 2, 4, 5), None, False),
]


@pytest.mark.parametrize("typed", [False, True])
def test_initializers_match_jax(jax, typed):
    ji = jax.nn.initializers
    for i, (name, args, kwargs, shape, dtype, exact) in enumerate(_CASES):
        k_e = er.key(i) if typed else er.PRNGKey(i)
        k_j = jax.random.key(i) if typed else jax.random.PRNGKey(i)
        got = getattr(ei, name)(*args, **kwargs)(k_e, shape, dtype)
        want = getattr(ji, name)(*args, **kwargs)(k_j, shape, dtype)
        _check(got, want, exact)
    for f in ("zeros", "ones"):
        _check(getattr(ei, f)(er.key(0), (2, 3)), getattr(ji, f)(jax.random.key(0), (2, 3)),
               True)
        _check(getattr(ei, f)(None, (2,), "int32"), getattr(ji, f)(None, (2,), "int32"), True)


def test_initializers_jit_and_statistics():
    k = er.key(0)
    w = ember.jit(lambda k: ei.he_uniform()(k, (64, 128)))(k)
    np.testing.assert_array_equal(w, ei.he_uniform()(k, (64, 128)))
    bound = np.sqrt(3 * 2.0 / 64)
    assert np.all(np.abs(np.asarray(w)) <= bound) and np.asarray(w).max() > 0.95 * bound
    # glorot_normal: the truncated normal is rescaled to the requested variance 2 / (in+out)
    w = np.asarray(ei.glorot_normal()(k, (200, 300)))
    np.testing.assert_allclose(w.var(), 2 / 500, rtol=0.03)
    q = np.asarray(ei.orthogonal()(k, (5, 3)))
    np.testing.assert_allclose(q.T @ q, np.eye(3), atol=1e-5)
    d = np.asarray(ei.delta_orthogonal()(k, (3, 3, 4, 4)))
    np.testing.assert_allclose(d[1, 1] @ d[1, 1].T, np.eye(4), atol=1e-5)
    assert np.count_nonzero(d) == np.count_nonzero(d[1, 1])


def test_initializer_errors():
    k = er.key(0)
    with pytest.raises(ValueError, match="Can't compute input and output sizes"):
        ei.glorot_uniform()(k, (5,))
    with pytest.raises(ValueError, match="invalid mode"):
        ei.variance_scaling(1.0, "fan_max", "normal")(k, (2, 2))
    with pytest.raises(ValueError, match="invalid distribution"):
        ei.variance_scaling(1.0, "fan_in", "cauchy")(k, (2, 2))
    with pytest.raises(ValueError, match="at least a 2D shape"):
        ei.orthogonal()(k, (3,))
    with pytest.raises(ValueError, match="3D, 4D or 5D"):
        ei.delta_orthogonal()(k, (3, 3))
    with pytest.raises(ValueError, match="must be less or equal"):
        ei.delta_orthogonal()(k, (3, 4, 2))
