"""Strong-Wolfe line search with zoom (Nocedal & Wright, Numerical Optimization, alg. 3.5/3.6).

Everything is written with ``lax.while_loop`` and selects (no data-dependent Python control
flow), so the search works under ``jit`` and ``vmap``. The search state is a dict of scalars
of the search's real dtype; ``phi`` is the function along the line and ``dphi`` its slope.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import ember.numpy as jnp
from ember import lax
from ember._ad_api import value_and_grad

_C1, _C2 = 1e-4, 0.9  # sufficient decrease and curvature constants
_CUBIC_MARGIN, _QUAD_MARGIN = 0.2, 0.1  # interpolants closer to the bracket ends are rejected
_ZOOM_MAXITER = 30


class LineSearchResults(NamedTuple):
    """Outcome of :func:`line_search`: ``failed``, the number of outer iterations ``nit``,
    function/gradient evaluation counts, the step ``a_k`` with the function value ``f_k``
    and gradient ``g_k`` there, and ``status`` (0 ok, 1 zoom failed, 3 maxiter reached)."""
    failed: Any
    nit: Any
    nfev: Any
    ngev: Any
    k: Any
    a_k: Any
    f_k: Any
    g_k: Any
    status: Any


def _select(pred, new: dict, old: dict) -> dict:
    """``old`` with the keys of ``new`` replaced where ``pred`` holds."""
    return {**old, **{k: jnp.where(pred, v, old[k]) for k, v in new.items()}}


def _cubic_min(a, fa, fpa, b, fb, c, fc):
    """Minimizer of the cubic through (a, fa) with slope fpa at a, (b, fb) and (c, fc)."""
    db, dc = b - a, c - a
    rb = fb - fa - fpa * db
    rc = fc - fa - fpa * dc
    denom = (db * dc) ** 2 * (db - dc)
    p = (dc ** 2 * rb - db ** 2 * rc) / denom      # cubic coefficient
    q = (-dc ** 3 * rb + db ** 3 * rc) / denom     # quadratic coefficient
    return a + (-q + jnp.sqrt(q * q - 3.0 * p * fpa)) / (3.0 * p)


def _quad_min(a, fa, fpa, b, fb):
    """Minimizer of the parabola through (a, fa) with slope fpa at a and through (b, fb)."""
    db = b - a
    curv = (fb - fa - fpa * db) / (db * db)
    return a - fpa / (2.0 * curv)


def _zoom(phi_and_grad: Callable, armijo_fails: Callable, curvature_holds: Callable,
          lo: tuple, hi: tuple, g0, skip, dtype) -> dict:
    """Shrinks the bracket [lo, hi] (each a (step, phi, dphi) triple; lo has the lower phi)
    until a step satisfies the strong Wolfe conditions. ``skip`` makes it a no-op."""
    f = lambda v: jnp.asarray(v, dtype)
    st = dict(
        done=jnp.asarray(False), failed=jnp.asarray(False), j=jnp.asarray(0, np.int32),
        a_lo=f(lo[0]), phi_lo=f(lo[1]), dphi_lo=f(lo[2]),
        a_hi=f(hi[0]), phi_hi=f(hi[1]), dphi_hi=f(hi[2]),
        # the previous hi end ("recent"), the third point of the cubic interpolant
        a_rec=f((lo[0] + hi[0]) / 2.0), phi_rec=f((lo[1] + hi[1]) / 2.0),
        a_star=f(1.0), phi_star=f(lo[1]), dphi_star=f(lo[2]), g_star=g0,
        nfev=jnp.asarray(0, np.int32))
    threshold = 1e-5 if jnp.finfo(dtype).bits < 64 else 1e-10

    def body(st):
        width = st["a_hi"] - st["a_lo"]  # signed: hi may lie left of lo
        left = jnp.minimum(st["a_lo"], st["a_hi"])
        right = jnp.maximum(st["a_lo"], st["a_hi"])
        # A bracket narrower than the threshold ends the search (a failure). The width's
        # magnitude is compared: JAX 0.10 compares the signed width, which makes every zoom
        # entered with hi < lo fail after one step (jax-ml/jax#40228).
        failed = st["failed"] | (jnp.abs(width) <= threshold)
        a_cub = _cubic_min(st["a_lo"], st["phi_lo"], st["dphi_lo"], st["a_hi"], st["phi_hi"],
                           st["a_rec"], st["phi_rec"])
        m = _CUBIC_MARGIN * width
        use_cub = (st["j"] > 0) & (a_cub > left + m) & (a_cub < right - m)
        a_quad = _quad_min(st["a_lo"], st["phi_lo"], st["dphi_lo"], st["a_hi"], st["phi_hi"])
        m = _QUAD_MARGIN * width
        use_quad = ~use_cub & (a_quad > left + m) & (a_quad < right - m)
        a_j = jnp.where(use_cub, a_cub,
                        jnp.where(use_quad, a_quad, (st["a_lo"] + st["a_hi"]) / 2.0))
        phi_j, dphi_j, g_j = phi_and_grad(a_j)

        new_hi = armijo_fails(a_j, phi_j) | (phi_j >= st["phi_lo"])
        accept = curvature_holds(dphi_j) & ~new_hi
        new_lo = ~new_hi & ~accept
        flip = new_lo & (dphi_j * width >= 0.0)  # the old lo becomes the hi end
        nxt = dict(st, failed=failed, done=st["done"] | accept, j=st["j"] + 1,
                   nfev=st["nfev"] + 1)
        nxt = _select(new_hi, dict(a_hi=a_j, phi_hi=phi_j, dphi_hi=dphi_j,
                                   a_rec=st["a_hi"], phi_rec=st["phi_hi"]), nxt)
        nxt = _select(accept, dict(a_star=a_j, phi_star=phi_j, dphi_star=dphi_j, g_star=g_j),
                      nxt)
        nxt = _select(flip, dict(a_hi=st["a_lo"], phi_hi=st["phi_lo"], dphi_hi=st["dphi_lo"],
                                 a_rec=st["a_hi"], phi_rec=st["phi_hi"]), nxt)
        nxt = _select(new_lo & ~flip, dict(a_rec=st["a_lo"], phi_rec=st["phi_lo"]), nxt)
        nxt = _select(new_lo, dict(a_lo=a_j, phi_lo=phi_j, dphi_lo=dphi_j), nxt)
        nxt["failed"] = nxt["failed"] | (nxt["j"] >= _ZOOM_MAXITER)
        return nxt

    return lax.while_loop(lambda s: ~s["done"] & ~skip & ~s["failed"], body, st)


def line_search(f: Callable, xk, pk, old_fval=None, old_old_fval=None, gfk=None,
                c1: float = _C1, c2: float = _C2, maxiter: int = 20) -> LineSearchResults:
    """Finds a step ``a`` along the descent direction ``pk`` from ``xk`` satisfying the
    strong Wolfe conditions for ``f`` (sufficient decrease ``c1``, curvature ``c2``).

    Args:
        f: a real scalar function of a 1-D array, differentiable.
        xk: the starting point.
        pk: a descent direction.
        old_fval: ``f(xk)`` if known (with ``gfk``, saves an evaluation).
        old_old_fval: the previous iterate's value, used for the first trial step.
        gfk: the gradient at ``xk`` if known.
        c1: sufficient decrease constant.
        c2: curvature constant.
        maxiter: most outer iterations (step doublings).

    Returns:
        A :class:`LineSearchResults`.

    Example:
        >>> res = line_search(lambda x: jnp.sum(x ** 2), jnp.array([1.0]), jnp.array([-1.0]))
        >>> float(res.a_k)
        1.0
    """
    xk, pk = jnp.asarray(xk), jnp.asarray(pk)
    dtype = jnp.result_type(xk, pk, float)
    xk, pk = xk.astype(dtype), pk.astype(dtype)
    rdtype = jnp.finfo(dtype).dtype
    vg = value_and_grad(f)

    def phi_and_grad(t):
        val, g = vg(xk + jnp.asarray(t, dtype) * pk)
        dphi = jnp.real(jnp.dot(g, pk, precision=lax.Precision.HIGHEST))
        return jnp.asarray(val, rdtype), dphi.astype(rdtype), g.astype(dtype)

    evaluated = old_fval is None or gfk is None
    if evaluated:
        phi0, dphi0, gfk = phi_and_grad(0.0)
    else:
        phi0 = jnp.asarray(old_fval, rdtype)
        gfk = jnp.asarray(gfk, dtype)
        dphi0 = jnp.real(jnp.dot(gfk, pk, precision=lax.Precision.HIGHEST)).astype(rdtype)
    if old_old_fval is None:
        a_first = jnp.asarray(1.0, rdtype)
    else:  # the step a quadratic model through the last decrease predicts (at most 1)
        guess = 1.01 * 2 * (phi0 - old_old_fval) / dphi0
        a_first = jnp.where(guess > 1, 1.0, guess).astype(rdtype)

    armijo_fails = lambda a, phi: phi > phi0 + c1 * a * dphi0
    curvature_holds = lambda dphi: jnp.abs(dphi) <= -c2 * dphi0
    r = lambda v: jnp.asarray(v, rdtype)
    n0 = jnp.asarray(1 if evaluated else 0, np.int32)
    st = dict(done=jnp.asarray(False), failed=jnp.asarray(False), i=jnp.asarray(1, np.int32),
              a_prev=r(0.0), phi_prev=phi0, dphi_prev=dphi0, nfev=n0,
              a_star=r(0.0), phi_star=phi0, dphi_star=dphi0, g_star=gfk)

    def body(st):
        a_i = jnp.where(st["i"] == 1, a_first, st["a_prev"] * 2.0)
        phi_i, dphi_i, g_i = phi_and_grad(a_i)
        # [prev, a_i] brackets a Wolfe step when a_i overshoots (zoom with lo = prev) or the
        # slope turned non-negative (zoom with lo = a_i); otherwise a_i may itself be accepted.
        overshoot = armijo_fails(a_i, phi_i) | ((phi_i >= st["phi_prev"]) & (st["i"] > 1))
        accept = curvature_holds(dphi_i) & ~overshoot
        uphill = (dphi_i >= 0.0) & ~overshoot & ~accept
        prev = (st["a_prev"], st["phi_prev"], st["dphi_prev"])
        cur = (a_i, phi_i, dphi_i)
        lo = tuple(jnp.where(overshoot, p, c) for p, c in zip(prev, cur))
        hi = tuple(jnp.where(overshoot, c, p) for p, c in zip(prev, cur))
        z = _zoom(phi_and_grad, armijo_fails, curvature_holds, lo, hi, gfk,
                  ~(overshoot | uphill), rdtype)
        zoomed = overshoot | uphill
        nxt = dict(st, done=st["done"] | zoomed | accept,
                   failed=st["failed"] | (zoomed & z["failed"]),
                   nfev=st["nfev"] + 1 + z["nfev"], i=st["i"] + 1,
                   a_prev=a_i, phi_prev=phi_i, dphi_prev=dphi_i)
        keys = ("a_star", "phi_star", "dphi_star", "g_star")
        nxt = _select(zoomed, {k: z[k] for k in keys}, nxt)
        return _select(accept, dict(zip(keys, (a_i, phi_i, dphi_i, g_i))), nxt)

    st = lax.while_loop(lambda s: ~s["done"] & (s["i"] <= maxiter) & ~s["failed"], body, st)
    status = jnp.where(st["failed"], 1, jnp.where(st["i"] > maxiter, 3, 0))
    a_k = st["a_star"]
    if jnp.finfo(rdtype).bits != 64:  # a floor on the step keeps single precision moving
        a_k = jnp.where(jnp.abs(a_k) < 1e-8, jnp.sign(a_k) * 1e-8, a_k)
    return LineSearchResults(failed=st["failed"] | ~st["done"], nit=st["i"] - 1,
                             nfev=st["nfev"], ngev=st["nfev"], k=st["i"], a_k=a_k,
                             f_k=st["phi_star"], g_k=st["g_star"], status=status)
