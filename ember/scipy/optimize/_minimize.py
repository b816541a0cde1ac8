"""``minimize``: SciPy's interface with JAX's methods (BFGS)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import ember.numpy as jnp
from ember.scipy.optimize._bfgs import minimize_bfgs


class OptimizeResults(NamedTuple):
    """The result of :func:`minimize`.

    Attributes:
        x: the solution found.
        success: whether the optimization converged.
        status: solver return code: 0 converged, 1 maximum iterations reached, 3 the line
            search's zoom failed, 5 the line search's iteration limit reached, -1 undefined.
        fun: the objective at ``x``.
        jac: the gradient at ``x``.
        hess_inv: the final inverse-Hessian estimate.
        nfev: number of objective evaluations.
        njev: number of gradient evaluations.
        nit: number of iterations.
    """
    x: Any
    success: Any
    status: Any
    fun: Any
    jac: Any
    hess_inv: Any
    nfev: Any
    njev: Any
    nit: Any


def minimize(fun: Callable, x0, args: tuple = (), *, method: str, tol: float | None = None,
             options: Mapping[str, Any] | None = None) -> OptimizeResults:
    """Minimizes a scalar function of one or more variables.

    Gradients come from automatic differentiation; ``method`` is required. Works under
    ``jit`` and ``vmap`` (the solver is a ``lax.while_loop``).

    Args:
        fun: the objective ``fun(x, *args) -> scalar`` with ``x`` of shape ``(n,)``;
            must be differentiable.
        x0: the initial guess, a real array of shape ``(n,)``.
        args: extra positional arguments to ``fun`` (a tuple).
        method: ``"BFGS"``.
        tol: accepted for SciPy compatibility and ignored, as in JAX (use
            ``options={"gtol": ...}``).
        options: solver options: ``maxiter`` (default ``200 * n``), ``norm`` (order of the
            gradient norm, default ``inf``), ``gtol`` (default ``1e-5``),
            ``line_search_maxiter`` (default 10).

    Returns:
        An :class:`OptimizeResults`.

    Example:
        >>> f = lambda x: jnp.sum((x - jnp.array([1.0, 2.0])) ** 2)
        >>> minimize(f, jnp.zeros(2), method="BFGS").x.round(3)
        Array([1., 2.], dtype=float32)
    """
    options = {} if options is None else dict(options)
    if not isinstance(args, tuple):
        raise TypeError("args argument to jax.scipy.optimize.minimize must be a tuple, "
                        f"got {args}")
    if not isinstance(method, str):
        raise TypeError(f"minimize: method must be a string, got {method!r}")
    x0 = jnp.asarray(x0)
    if x0.ndim != 1:
        raise ValueError(f"minimize: x0 must be a 1-D array, got shape {x0.shape}")
    if method.lower() == "bfgs":
        r = minimize_bfgs(lambda x: fun(x, *args), x0, **options)
        return OptimizeResults(x=r.x_k, success=r.converged & ~r.failed, status=r.status,
                               fun=r.f_k, jac=r.g_k, hess_inv=r.H_k, nfev=r.nfev,
                               njev=r.ngev, nit=r.k)
    raise ValueError(f"Method {method} not recognized")
