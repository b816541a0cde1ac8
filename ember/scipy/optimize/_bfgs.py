"""BFGS (Nocedal & Wright, Numerical Optimization, algorithm 6.1) as one ``lax.while_loop``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import ember.numpy as jnp
from ember import lax
from ember._ad_api import value_and_grad
from ember.scipy.optimize._line_search import line_search


class BFGSResults(NamedTuple):
    """The final BFGS state: ``converged`` (gradient norm below ``gtol``), ``failed`` (the
    line search failed), iteration ``k``, evaluation counts, the iterate ``x_k`` with its
    value ``f_k``, gradient ``g_k`` and inverse-Hessian estimate ``H_k``, and ``status``
    (0 converged, 1 maxiter reached, 2 + the line search's status on its failure)."""
    converged: Any
    failed: Any
    k: Any
    nfev: Any
    ngev: Any
    nhev: Any
    x_k: Any
    f_k: Any
    g_k: Any
    H_k: Any
    old_old_fval: Any
    status: Any
    line_search_status: Any


def _dot(a, b):
    return jnp.dot(a, b, precision=lax.Precision.HIGHEST)


def minimize_bfgs(fun: Callable, x0, maxiter: int | None = None, norm=np.inf,
                  gtol: float = 1e-5, line_search_maxiter: int = 10) -> BFGSResults:
    """Minimizes ``fun`` from ``x0`` (a 1-D array) with BFGS and a strong-Wolfe line search.

    Args:
        fun: a real scalar function of a 1-D array, differentiable.
        x0: the starting point, shape ``(n,)``.
        maxiter: most iterations (default ``200 * n``).
        norm: the order of the gradient norm tested against ``gtol``.
        gtol: convergence when ``norm(grad) < gtol``.
        line_search_maxiter: most outer iterations of each line search.

    Returns:
        A :class:`BFGSResults`.

    Example:
        >>> r = minimize_bfgs(lambda x: jnp.sum((x - 1.0) ** 2), jnp.zeros(2))
        >>> bool(r.converged)
        True
    """
    if maxiter is None:
        maxiter = np.size(x0) * 200
    n = x0.shape[0]
    f0, g0 = value_and_grad(fun)(x0)
    i32 = lambda v: jnp.asarray(v, np.int32)
    state = BFGSResults(
        converged=jnp.linalg.norm(g0, ord=norm) < gtol, failed=jnp.asarray(False),
        k=i32(0), nfev=i32(1), ngev=i32(1), nhev=i32(0), x_k=x0, f_k=f0, g_k=g0,
        H_k=jnp.eye(n, dtype=x0.dtype),
        # makes the first line search start from a step of 1 (see its first-step guess)
        old_old_fval=f0 + jnp.linalg.norm(g0) / 2, status=i32(0),
        line_search_status=i32(0))

    def body(s: BFGSResults) -> BFGSResults:
        p = -_dot(s.H_k, s.g_k)
        ls = line_search(fun, s.x_k, p, old_fval=s.f_k, old_old_fval=s.old_old_fval,
                         gfk=s.g_k, maxiter=line_search_maxiter)
        step = ls.a_k.astype(p.dtype) * p
        y = ls.g_k - s.g_k
        rho = jnp.reciprocal(_dot(y, step))
        # H <- (I - rho s y^T) H (I - rho y s^T) + rho s s^T
        w = jnp.eye(n, dtype=rho.dtype) - rho * jnp.outer(step, y)
        h_new = _dot(_dot(w, s.H_k), w.T) + rho * jnp.outer(step, step)
        return s._replace(
            converged=jnp.linalg.norm(ls.g_k, ord=norm) < gtol, failed=ls.failed,
            k=s.k + 1, nfev=s.nfev + ls.nfev, ngev=s.ngev + ls.ngev,
            x_k=s.x_k + step, f_k=ls.f_k.astype(s.f_k.dtype), g_k=ls.g_k,
            H_k=jnp.where(jnp.isfinite(rho), h_new, s.H_k), old_old_fval=s.f_k,
            line_search_status=ls.status.astype(np.int32))

    state = lax.while_loop(lambda s: ~s.converged & ~s.failed & (s.k < maxiter), body, state)
    status = jnp.where(state.converged, 0,
                       jnp.where(state.k == maxiter, 1,
                                 jnp.where(state.failed, 2 + state.line_search_status, -1)))
    return state._replace(status=status.astype(np.int32))
