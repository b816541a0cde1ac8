"""Counting samplers: poisson, binomial, multinomial (JAX 0.10.2's algorithms).

Each runs a vectorized rejection loop (``while_loop`` over the whole array until every
element is accepted) on the same threefry bits as JAX, so the counts equal JAX's except where
a ``log``/``lgamma`` rounding difference flips an acceptance test exactly on its boundary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import dtypes, lax
from ember.random.distributions import _check_arraylike, _check_shape, _jnp, _uniform
from ember.random.keys import canonical_shape, check_key, split_data, user_dtype


def _poisson_knuth(key, lam, shape, dtype, max_iters):
    # Multiply uniforms until the product drops below exp(-lam) (in log space).
    jnp = _jnp()

    def body(carry):
        i, k, rng, log_prod = carry
        ks = split_data(rng, (2,))
        k = lax.select(log_prod > -lam, k + np.array(1, dtype), k)
        u = _uniform(ks[1], shape, np.dtype(np.float32), 0.0, 1.0)
        return i + 1, k, ks[0], log_prod + jnp.log(u)

    def cond(carry):
        i, log_prod = carry[0], carry[3]
        return jnp.any(log_prod > -lam) & (i < max_iters)

    init = (np.int32(0), jnp.zeros(shape, dtype), key, jnp.zeros(shape, np.float32))
    k = lax.while_loop(cond, body, init)[1]
    return (k - np.array(1, dtype)).astype(dtype)


def _poisson_rejection(key, lam, shape, dtype, max_iters):
    # Hormann's transformed rejection (PTRS) for lam >= 10.
    jnp = _jnp()
    log_lam = lax.log(lam)
    b = 0.931 + 2.53 * lax.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(carry):
        i, k_out, accepted, rng = carry
        ks = split_data(rng, (3,))
        u = _uniform(ks[1], shape, lam.dtype, 0.0, 1.0) - 0.5
        v = _uniform(ks[2], shape, lam.dtype, 0.0, 1.0)
        us = 0.5 - abs(u)
        k = lax.floor((2 * a / us + b) * u + lam + 0.43)
        s = lax.log(v * inv_alpha / (a / (us * us) + b))
        t = -lam + k * log_lam - lax.lgamma(k + 1)
        accept1 = (us >= 0.07) & (v <= v_r)
        reject = (k < 0) | ((us < 0.013) & (v > us))
        accept = accept1 | (~reject & (s <= t))
        return i + 1, lax.select(accept, k, k_out), accepted | accept, ks[0]

    def cond(carry):
        return jnp.any(~carry[2]) & (carry[0] < max_iters)

    init = (np.int32(0), jnp.full(shape, -1, lam.dtype), jnp.zeros(shape, bool), key)
    return lax.while_loop(cond, body, init)[1].astype(dtype)


def poisson(key: Any, lam: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Poisson samples with rate ``lam`` (Knuth below 10, transformed rejection above).

    Args:
        key: a PRNG key.
        lam: rates ``>= 0`` (computed in float32, as JAX), broadcast to ``shape``.
        shape: the result shape (default ``lam``'s shape).
        dtype: an integer dtype (default int32, int64 under x64).

    Returns:
        A ``dtype`` array of ``shape``.

    Example:
        >>> random.poisson(random.PRNGKey(0), 3.0, (4,))
    """
    jnp = _jnp()
    key = check_key("poisson", key)
    dtype = user_dtype(dtype, int)
    if not dtypes.issubdtype(dtype, np.integer):
        raise ValueError(f"dtype argument to `poisson` must be an int dtype, got {dtype}")
    shape = canonical_shape(shape) if shape is not None else tuple(np.shape(lam))
    lam = lax.convert_element_type(jnp.broadcast_to(lam, shape), np.float32)
    use_knuth = jnp.isnan(lam) | (lam < 10)
    lam_knuth = lax.select(use_knuth, lam, jnp.zeros_like(lam))
    lam_rej = lax.select(use_knuth, jnp.full_like(lam, 1e5), lam)
    max_iters = int(dtypes.iinfo(dtype).max) if dtypes.iinfo(dtype).bits <= 32 else 2 ** 31 - 1
    max_iters = min(max_iters, 2 ** 31 - 1)
    result = lax.select(use_knuth, _poisson_knuth(key, lam_knuth, shape, dtype, max_iters),
                        _poisson_rejection(key, lam_rej, shape, dtype, max_iters))
    return lax.select(lam == 0, jnp.zeros_like(result), result)


_STIRLING_TAIL = [0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                  0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                  0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                  0.00833056343336287]


def _stirling_tail(k):
    # log(k!) - Stirling's approximation: a table for k <= 9, the asymptotic series above.
    jnp = _jnp()
    table = jnp.array(_STIRLING_TAIL, dtype=k.dtype)
    small = k <= 9
    k = lax.clamp(np.array(0, k.dtype), k, np.array(9, k.dtype))
    kp1sq = (k + 1) * (k + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    return lax.select(small, table[jnp.floor(k).astype(np.int32)], approx)


def _binomial_inversion(key, count, prob, shape, dtype, max_iters):
    # Sum geometric waiting times until they exceed count.
    jnp = _jnp()
    log1mp = jnp.log1p(-prob)

    def body(carry):
        i, num_geom, geom_sum, rng = carry
        ks = split_data(rng, (2,))  # (JAX: subkey, key = split(key))
        num_geom = lax.select(geom_sum <= count, num_geom + 1, num_geom)
        u = _uniform(ks[0], shape, prob.dtype, 0.0, 1.0)
        geom = jnp.ceil(jnp.log(u) / log1mp)
        return i + 1, num_geom, geom_sum + geom, ks[1]

    def cond(carry):
        return jnp.any(carry[2] <= count) & (carry[0] < max_iters)

    zeros = jnp.zeros(shape, prob.dtype)
    k = lax.while_loop(cond, body, (np.int32(0), zeros, zeros, key))[1]
    return (k - 1).astype(dtype)


def _btrs(key, count, prob, shape, dtype, max_iters):
    # Hormann's BTRS transformed rejection for count * prob > 10.
    jnp = _jnp()
    stddev = jnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = jnp.floor((count + 1) * prob)

    def body(carry):
        i, k_out, accepted, rng = carry
        ks = split_data(rng, (3,))
        u = _uniform(ks[1], shape, prob.dtype, 0.0, 1.0)
        v = _uniform(ks[2], shape, prob.dtype, 0.0, 1.0)
        u = u - 0.5
        us = 0.5 - jnp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        k = jnp.floor((2 * a / us + b) * u + c)
        reject = (k < 0) | (k > count)
        v = jnp.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * jnp.log((m + 1) / (r * (count - m + 1)))
              + (count + 1) * jnp.log((count - m + 1) / (count - k + 1))
              + (k + 0.5) * jnp.log(r * (count - k + 1) / (k + 1))
              + _stirling_tail(m) + _stirling_tail(count - m)
              - _stirling_tail(k) - _stirling_tail(count - k))
        accept = accept1 | (~reject & (v <= ub))
        return i + 1, lax.select(accept, k, k_out), accepted | accept, ks[0]

    def cond(carry):
        return jnp.any(~carry[2]) & (carry[0] < max_iters)

    init = (np.int32(0), jnp.full(shape, -1, prob.dtype), jnp.zeros(shape, bool), key)
    return lax.while_loop(cond, body, init)[1].astype(dtype)


def _binomial(key, n, p, shape, dtype):
    jnp = _jnp()
    if shape is None:
        shape = tuple(np.broadcast_shapes(np.shape(n), np.shape(p)))
    else:
        _check_shape("binomial", shape, np.shape(n), np.shape(p))
    p = jnp.asarray(p)
    if not dtypes.issubdtype(p.dtype, np.inexact):
        p = p.astype(dtypes.to_inexact_dtype(p.dtype))
    count = jnp.broadcast_to(lax.convert_element_type(n, p.dtype), shape)
    prob = jnp.broadcast_to(p, shape)
    p_lt_half = prob < 0.5
    q = lax.select(p_lt_half, prob, 1.0 - prob)
    count_bad = jnp.isnan(count) | (count < 0.0)
    count_inf = jnp.isinf(count)
    q_nan, q_neg = jnp.isnan(q), q < 0.0
    q = lax.select(q_nan | q_neg, jnp.full_like(q, 0.01), q)
    use_inversion = count_bad | (count * q <= 10.0)
    count = jnp.floor(count)
    count_inv = lax.select(use_inversion, count, jnp.zeros_like(count))
    count_btrs = lax.select(use_inversion, jnp.full_like(count, 1e4), count)
    q_btrs = lax.select(use_inversion, jnp.full_like(q, 0.5), q)
    max_iters = 2 ** 31 - 1
    samples = lax.select(use_inversion,
                         _binomial_inversion(key, count_inv, q, shape, dtype, max_iters),
                         _btrs(key, count_btrs, q_btrs, shape, dtype, max_iters))
    invalid = q_neg | q_nan | count_bad
    samples = lax.select(invalid, jnp.full_like(samples, np.nan), samples)
    samples = lax.select(count_inf & ~invalid, jnp.full_like(samples, np.inf), samples)
    return lax.select(p_lt_half | count_bad | q_nan | count_inf, samples,
                      count.astype(dtype) - samples)


def binomial(key: Any, n: Any, p: Any, shape: Sequence[int] | None = None,
             dtype: Any = None) -> Any:
    """Binomial(n, p) samples as floats (inversion for ``n p <= 10``, BTRS above).

    Args:
        key: a PRNG key.
        n: numbers of trials (floats; NaN or negative give NaN, inf gives inf).
        p: success probabilities.
        shape: the result shape (default the broadcast shape of ``n`` and ``p``).
        dtype: a float dtype (default float32, float64 under x64).

    Returns:
        A ``dtype`` array of ``shape``.

    Example:
        >>> random.binomial(random.PRNGKey(0), 10.0, 0.3, (4,))
    """
    key = check_key("binomial", key)
    _check_arraylike("binomial", n, p)
    dtype = user_dtype(dtype, float)
    if not dtypes.issubdtype(dtype, np.floating):
        raise ValueError(f"dtype argument to `binomial` must be a float dtype, got {dtype}")
    if shape is not None:
        shape = canonical_shape(shape)
    return _binomial(key, n, p, shape, dtype)


def multinomial(key: Any, n: Any, p: Any, *, shape: Sequence[int] | None = None,
                dtype: Any = None, unroll: int | bool = 1) -> Any:
    """Multinomial counts of ``n`` trials over the outcomes along ``p``'s last axis.

    Sequential conditional binomials (one ``scan`` step per outcome), as JAX.

    Args:
        key: a PRNG key.
        n: numbers of trials, broadcastable to ``p.shape[:-1]``.
        p: outcome probabilities along the last axis.
        shape: the result shape including the outcome axis (default ``p.shape``).
        dtype: a float dtype for the counts.
        unroll: the ``scan``'s unroll.

    Example:
        >>> random.multinomial(random.PRNGKey(0), 10.0, jnp.array([0.2, 0.3, 0.5]))
    """
    jnp = _jnp()
    key = check_key("multinomial", key)
    _check_arraylike("multinomial", n, p)
    n, p = jnp.asarray(n), jnp.asarray(p)
    common = dtypes.to_inexact_dtype(dtypes.result_type(n, p))
    n, p = n.astype(common), p.astype(common)
    shape = tuple(p.shape) if shape is None else canonical_shape(shape)
    n = jnp.broadcast_to(n, shape[:-1])
    p = jnp.broadcast_to(p, shape)
    p = jnp.moveaxis(p, -1, 0)
    remaining = lax.cumsum(p, 0, reverse=True)
    ratios = p / jnp.where(remaining == 0, 1, remaining)
    keys = split_data(key, (ratios.shape[0],))

    def step(rem, ratio_key):
        ratio, k = ratio_key
        count = _binomial(k, rem, jnp.clip(ratio, 0, 1), None, rem.dtype)
        return rem - count, count

    _, counts = lax.scan(step, n, (ratios, keys), unroll=unroll)
    return jnp.moveaxis(counts, 0, -1).astype(user_dtype(dtype, float))


__all__ = ["binomial", "multinomial", "poisson"]
