"""Gamma-based samplers: gamma, loggamma, beta, dirichlet, chisquare, t, f,
generalized_normal, ball (JAX 0.10.2's algorithms on the same threefry bits).

``gamma`` is Marsaglia and Tsang's rejection method run per element (one key per element,
split from the key in row-major order, a ``while_loop`` per element mapped with ``vmap``), as
JAX; values agree with JAX's to the rounding of ``log``/``erf_inv`` (a rejection decision on
the boundary could differ, vanishingly rarely). Its derivative in ``a`` is the implicit
reparameterization gradient (JAX's ``random_gamma_grad``): ``-(dP/da) / p(x)`` with ``P`` the
regularized lower incomplete gamma function, so ``d sample / d a`` keeps the sample's CDF
value fixed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import dtypes, lax
from ember.custom_derivatives import custom_jvp
from ember.random.continuous import _exponential, _normal_real, _safe_cast_check
from ember.random.distributions import (
    _broadcast_shapes,
    _check_shape,
    _float_dtype,
    _jnp,
    _uniform,
)
from ember.random.keys import canonical_shape, check_key, split_data


def _c(x: Any, v: float) -> Any:
    return lax.full((), v, x.dtype)


def _gamma_one(key: Any, alpha: Any, log_space: bool) -> Any:
    """One Gamma(alpha) sample (scalar ``alpha``) by Marsaglia-Tsang with a boost for a < 1."""
    dtype = alpha.dtype
    zero, one = _c(alpha, 0), _c(alpha, 1)
    boost_mask = lax.ge(alpha, one)
    alpha_orig = alpha
    alpha = lax.select(boost_mask, alpha, lax.add(alpha, one))  # Gamma(a) = Gamma(a+1) U^(1/a)
    d = lax.sub(alpha, _c(alpha, 1 / 3))
    c = lax.div(_c(alpha, 1 / 3), lax.sqrt(d))

    def rejected(state):
        _, x2, v, u = state  # (x2 = x*x, v = (1 + c x)**3)
        squeeze = lax.ge(u, lax.sub(one, lax.mul(_c(alpha, 0.0331), lax.mul(x2, x2))))
        log_test = lax.ge(lax.log(u), lax.add(lax.mul(x2, _c(alpha, 0.5)),
                                              lax.mul(d, lax.add(lax.sub(one, v), lax.log(v)))))
        return lax.bitwise_and(squeeze, log_test)

    def propose(state):
        def next_v(kxv):
            ks = split_data(kxv[0], (2,))
            x = _normal_real(ks[1], (), dtype)
            return ks[0], x, lax.add(one, lax.mul(x, c))

        ks = split_data(state[0], (3,))
        _, x, v = lax.while_loop(lambda kxv: lax.le(kxv[2], zero), next_v,
                                 (ks[1], zero, _c(alpha, -1)))
        u = _uniform(ks[2], (), dtype, 0.0, 1.0)
        return ks[0], lax.mul(x, x), lax.mul(lax.mul(v, v), v), u

    ks = split_data(key, (2,))
    _, _, v, _ = lax.while_loop(rejected, propose, (ks[0], zero, one, _c(alpha, 2)))
    if log_space:
        log_u = lax.neg(_exponential(ks[1], (), dtype))
        log_boost = lax.select(lax.bitwise_or(boost_mask, lax.eq(log_u, zero)), zero,
                               lax.mul(log_u, lax.div(one, alpha_orig)))
        return lax.add(lax.add(lax.log(d), lax.log(v)), log_boost)
    u = lax.sub(one, _uniform(ks[1], (), dtype, 0.0, 1.0))
    boost = lax.select(boost_mask, one, lax.pow(u, lax.div(one, alpha_orig)))
    return lax.mul(lax.mul(d, v), boost)


def _gamma_impl(key: Any, a: Any, log_space: bool) -> Any:
    from ember import vmap
    shape = tuple(a.shape)
    n = int(np.prod(shape, dtype=np.int64))
    keys = split_data(key, (n,))
    flat = lax.reshape(a, (n,))
    if n == 0:
        return a
    out = vmap(lambda k, al: _gamma_one(k, al, log_space))(keys, flat)
    return lax.reshape(out, shape)


# d x / d a of a Gamma(a) sample x holding its CDF fixed, -(dP/da) / p(x; a): lax's primitive
# (as JAX), kept under this name for callers of ember.random.gamma.
random_gamma_grad = lax.random_gamma_grad


def _make_gamma(log_space: bool):
    @custom_jvp
    def sample(key, a):
        return _gamma_impl(key, a, log_space)

    @sample.defjvp
    def _jvp(primals, tangents):
        key, a = primals
        ans = sample(key, a)
        x = ans
        if log_space:  # d log x = dx / x; exp may underflow to 0: use the smallest normal
            x = lax.exp(ans)
            x = lax.select(lax.eq(x, lax.full_like(x, 0)), lax.full_like(x, dtypes.finfo(
                x.dtype).tiny), x)
            grad = random_gamma_grad(a, x) / x
        else:
            grad = random_gamma_grad(a, x)
        return ans, tangents[1] * lax.stop_gradient(grad)

    return sample


_gamma_sample = _make_gamma(False)
_loggamma_sample = _make_gamma(True)


def _gamma(name, key, a, shape, dtype, log_space):
    jnp = _jnp()
    key = check_key(name, key)
    dtype = _float_dtype(name if name != "loggamma" else "gamma", dtype)
    if shape is not None:
        shape = canonical_shape(shape)
    else:
        shape = tuple(np.shape(a))
    _check_shape("gamma", shape, np.shape(a))
    a = lax.convert_element_type(a, dtype)
    if tuple(np.shape(a)) != shape:
        a = jnp.broadcast_to(a, shape)
    return (_loggamma_sample if log_space else _gamma_sample)(key, a)


def gamma(key: Any, a: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Standard Gamma(a) samples (unit scale), differentiable in ``a``.

    Args:
        key: a PRNG key.
        a: the shape parameter(s) ``a > 0``, broadcast to ``shape``.
        shape: the result shape (default ``a``'s shape).
        dtype: a float dtype (default float32, float64 under x64).

    Returns:
        A ``dtype`` array of ``shape``.

    Example:
        >>> random.gamma(random.PRNGKey(0), 2.0, (3,))
    """
    return _gamma("gamma", key, a, shape, dtype, False)


def loggamma(key: Any, a: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """The logarithms of Gamma(a) samples, computed in log space (accurate for tiny ``a``).

    Example:
        >>> random.loggamma(random.PRNGKey(0), 0.01, (3,))
    """
    return _gamma("loggamma", key, a, shape, dtype, True)


def beta(key: Any, a: Any, b: Any, shape: Sequence[int] | None = None,
         dtype: Any = None) -> Any:
    """Beta(a, b) samples: ``Ga / (Ga + Gb)`` from two log-gamma draws.

    Example:
        >>> random.beta(random.PRNGKey(0), 2.0, 3.0, (3,))
    """
    jnp = _jnp()
    key = check_key("beta", key)
    dtype = _float_dtype("beta", dtype)
    _safe_cast_check("beta", dtype, a, b)
    shape = _broadcast_shapes("beta", shape, a, b)
    ks = split_data(key, (2,))
    a = jnp.broadcast_to(lax.convert_element_type(a, dtype), shape)
    b = jnp.broadcast_to(lax.convert_element_type(b, dtype), shape)
    log_ga = loggamma(ks[0], a, shape, dtype)
    log_gb = loggamma(ks[1], b, shape, dtype)
    log_max = lax.max(log_ga, log_gb)  # (the ratio without overflow)
    ga, gb = jnp.exp(log_ga - log_max), jnp.exp(log_gb - log_max)
    return ga / (ga + gb)


def dirichlet(key: Any, alpha: Any, shape: Sequence[int] | None = None,
              dtype: Any = None) -> Any:
    """Dirichlet(alpha) samples along the last axis (a softmax of log-gamma draws).

    Args:
        key: a PRNG key.
        alpha: ``(..., n)`` concentrations.
        shape: the batch shape (default ``alpha.shape[:-1]``); the result is
            ``shape + (n,)``.
        dtype: a float dtype.

    Example:
        >>> random.dirichlet(random.PRNGKey(0), jnp.array([1.0, 2.0, 3.0]))
    """
    from ember.nn import softmax
    key = check_key("dirichlet", key)
    dtype = _float_dtype("dirichlet", dtype)
    if shape is not None:
        shape = canonical_shape(shape)
    if not np.ndim(alpha) >= 1:
        raise ValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == "
                         f"{np.ndim(alpha)}")
    if shape is None:
        shape = tuple(np.shape(alpha)[:-1])
    else:
        _check_shape("dirichlet", shape, np.shape(alpha)[:-1])
    alpha = lax.convert_element_type(alpha, dtype)
    log_g = loggamma(key, alpha, shape + tuple(np.shape(alpha)[-1:]), dtype)
    return softmax(log_g, -1)


def chisquare(key: Any, df: Any, shape: Sequence[int] | None = None,
              dtype: Any = None) -> Any:
    """Chi-square samples with ``df`` degrees of freedom: ``2 Gamma(df / 2)``.

    Example:
        >>> random.chisquare(random.PRNGKey(0), 3.0, (3,))
    """
    key = check_key("chisquare", key)
    dtype = _float_dtype("chisquare", dtype)
    _safe_cast_check("chisquare", dtype, df)
    shape = _broadcast_shapes("chisquare", shape, df)
    half = lax.div(lax.convert_element_type(df, dtype), np.array(2, dtype))
    return lax.exp(loggamma(key, half, shape, dtype)) * np.array(2, dtype)


def t(key: Any, df: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Student's t samples: ``n * sqrt(df / (2 g))`` with ``g ~ Gamma(df / 2)``.

    Example:
        >>> random.t(random.PRNGKey(0), 5.0, (3,))
    """
    jnp = _jnp()
    key = check_key("t", key)
    dtype = _float_dtype("t", dtype)
    _safe_cast_check("t", dtype, df)
    shape = _broadcast_shapes("t", shape, df) if shape is not None else tuple(np.shape(df))
    ks = split_data(key, (2,))
    df = lax.convert_element_type(df, dtype)
    n = _normal_real(ks[0], shape, dtype)
    half_df = lax.div(df, np.array(2, dtype))
    g = gamma(ks[1], half_df, shape, dtype)
    return n * jnp.sqrt(half_df / g)


def f(key: Any, dfnum: Any, dfden: Any, shape: Sequence[int] | None = None,
      dtype: Any = None) -> Any:
    """F-distribution samples: ``(X1 / dfnum) / (X2 / dfden)`` for chi-square ``X1, X2``.

    Example:
        >>> random.f(random.PRNGKey(0), 3.0, 5.0, (3,))
    """
    key = check_key("f", key)
    dtype = _float_dtype("f", dtype)
    _safe_cast_check("f", dtype, dfnum, dfden)
    shape = (_broadcast_shapes("f", shape, dfnum, dfden) if shape is not None
             else tuple(np.broadcast_shapes(np.shape(dfnum), np.shape(dfden))))
    jnp = _jnp()
    dfnum = jnp.broadcast_to(lax.convert_element_type(dfnum, dtype), shape)
    dfden = jnp.broadcast_to(lax.convert_element_type(dfden, dtype), shape)
    ks = split_data(key, (2,))
    chi_num = chisquare(ks[1], dfnum, shape, dtype)
    chi_den = chisquare(ks[0], dfden, shape, dtype)
    return lax.div(lax.div(chi_num, dfnum), lax.div(chi_den, dfden))


def generalized_normal(key: Any, p: float, shape: Sequence[int] = (),
                       dtype: Any = None) -> Any:
    """Samples with density proportional to ``exp(-|x|**p)``: ``sign * Gamma(1/p) ** (1/p)``.

    Example:
        >>> random.generalized_normal(random.PRNGKey(0), 1.5, (3,))
    """
    from ember.random.distributions import rademacher
    key = check_key("generalized_normal", key)
    dtype = _float_dtype("generalized_normal", dtype)
    shape = canonical_shape(shape)
    ks = split_data(key, (2,))
    g = gamma(ks[0], 1 / p, shape, dtype)
    r = rademacher(ks[1], shape, dtype)
    return r * g ** (1 / p)


def ball(key: Any, d: int, p: float = 2, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Uniform samples from the unit Lp ball in ``d`` dimensions: ``shape + (d,)``.

    Example:
        >>> random.ball(random.PRNGKey(0), 3, shape=(2,))
    """
    import operator

    from ember import core
    from ember.random.continuous import exponential
    jnp = _jnp()
    key = check_key("ball", key)
    dtype = _float_dtype("ball", dtype)
    shape = canonical_shape(shape)
    d = operator.index(core.concrete_or_error(d, "The error occurred in jax.random.ball()")
                       if hasattr(d, "aval") else d)
    ks = split_data(key, (2,))
    g = generalized_normal(ks[0], p, (*shape, d), dtype)
    e = exponential(ks[1], shape, dtype)
    return g / (((jnp.abs(g) ** p).sum(-1) + e) ** (1 / p))[..., None]


def orthogonal(key: Any, n: int, shape: Sequence[int] = (), dtype: Any = None,
               m: int | None = None) -> Any:
    """Uniform samples from O(n) (U(n) for complex dtypes); semi-orthogonal when ``m != n``.

    The QR factorization of a normal matrix with the signs of R's diagonal moved into Q
    (Mezzadri 2007), as JAX.

    Args:
        key: a PRNG key.
        n: the number of rows.
        shape: batch dimensions. Default ``()``.
        dtype: a float or complex dtype.
        m: the number of columns (default ``n``).

    Returns:
        A ``(*shape, n, m)`` array.

    Example:
        >>> q = random.orthogonal(random.PRNGKey(0), 3)
    """
    import operator

    from ember import core
    from ember.numpy import linalg
    jnp = _jnp()
    key = check_key("orthogonal", key)
    dtype = _float_dtype("orthogonal", dtype, np.inexact, "a float or complex")
    shape = canonical_shape(shape)
    _check_shape("orthogonal", shape)
    msg = "The error occurred in jax.random.orthogonal()"
    n = operator.index(core.concrete_or_error(n, msg) if hasattr(n, "aval") else n)
    m_ = n if m is None else operator.index(
        core.concrete_or_error(m, msg) if hasattr(m, "aval") else m)
    from ember.random.continuous import _normal
    z = _normal(key, (*shape, max(n, m_), min(n, m_)), dtype)
    q, r = linalg.qr(z)
    diag = jnp.diagonal(r, axis1=-2, axis2=-1)
    x = q * jnp.expand_dims(jnp.sign(diag), -2)
    return jnp.swapaxes(x, -1, -2) if n < m_ else x


__all__ = ["ball", "beta", "chisquare", "dirichlet", "f", "gamma", "generalized_normal",
           "loggamma", "orthogonal", "t"]
