"""odeint: adaptive Dormand-Prince (dopri5) integration with adjoint gradients, as JAX's.

The solver takes 5th-order Runge-Kutta steps with an embedded 4th-order error estimate,
accepts a step when the RMS of the error relative to ``atol + rtol * |y|`` is at most one,
picks each next step size from that ratio (Hairer, Norsett and Wanner's controller, with
their initial-step heuristic), and evaluates the solution at the requested times from a
4th-order interpolating polynomial of the step that covers them. The loop is a
``lax.while_loop`` per output time inside a ``lax.scan``; reverse-mode derivatives solve the
adjoint system backwards in time (Chen et al. 2018, appendix C) through a ``custom_vjp``,
so memory does not grow with the number of steps.

Example:
    >>> import ember.numpy as jnp
    >>> from ember.experimental.ode import odeint
    >>> ys = odeint(lambda y, t, k: -k * y, jnp.float32(1.0), jnp.array([0.0, 1.0]), 2.0)
    >>> float(ys[1])  # exp(-2)
    0.1353...
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable
from functools import partial
from typing import Any

import ember.numpy as jnp
from ember import (
    _pytree,
    closure_convert,
    core,
    custom_vjp,
    default_matmul_precision,
    jit,
    lax,
    vjp,
    vmap,
)
from ember.flatten_util import ravel_pytree

__all__ = ["odeint"]

# ---------------------------------------------------------------------------- Dormand-Prince

# Stage times (as fractions of the step) of stages 2..7, the stage matrix (row s gives the
# weights of the earlier stages' slopes for stage s + 2), the 5th-order solution weights, the
# difference between the 5th- and 4th-order weights (the error estimate), and the weights
# giving the solution at the step's midpoint (for the interpolating polynomial).
_NODES = (1 / 5, 3 / 10, 4 / 5, 8 / 9, 1., 1., 0.)
_SOLUTION = (35 / 384, 0., 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.)
_STAGES = (
    (1 / 5, 0., 0., 0., 0., 0., 0.),
    (3 / 40, 9 / 40, 0., 0., 0., 0., 0.),
    (44 / 45, -56 / 15, 32 / 9, 0., 0., 0., 0.),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0., 0., 0.),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656, 0., 0.),
    _SOLUTION,
)
_ERROR = (35 / 384 - 1951 / 21600, 0., 500 / 1113 - 22642 / 50085, 125 / 192 - 451 / 720,
          -2187 / 6784 + 12231 / 42400, 11 / 84 - 649 / 6300, -1. / 60.)
_MIDPOINT = tuple(w / 2 for w in (
    6025192743 / 30085553152, 0., 51252292925 / 65400821598, -2691868925 / 45128329728,
    187940372067 / 1594534317056, -1776094331 / 19743644256, 11237099 / 235043384))


def _dopri_step(f: Callable, y: Any, fy: Any, t: Any, h: Any):
    """One step of size h from (t, y) with slope fy: (y_next, f_next, error, slopes)."""
    dtype = fy.dtype
    nodes = jnp.array(_NODES, h.dtype)
    stages = jnp.array(_STAGES, dtype)
    hy = h.astype(dtype)

    def stage(s, k):
        y_s = y + hy * jnp.dot(stages[s - 1], k)
        return k.at[s].set(f(y_s, t + h * nodes[s - 1]))

    k = jnp.zeros((7,) + fy.shape, dtype).at[0].set(fy)
    k = lax.fori_loop(1, 7, stage, k)
    y_next = hy * jnp.dot(jnp.array(_SOLUTION, dtype), k) + y
    error = hy * jnp.dot(jnp.array(_ERROR, dtype), k)
    # The 7th stage is evaluated at the new point: it is the next step's first slope (FSAL).
    return y_next, k[-1], error, k


def _interpolant(y: Any, y_next: Any, k: Any, h: Any) -> Any:
    """Coefficients (highest power first) of the quartic through the step, in s = (t-t0)/h."""
    h = h.astype(y.dtype)
    y_mid = y + h * jnp.dot(jnp.array(_MIDPOINT, y.dtype), k)
    dy0, dy1 = h * k[0], h * k[-1]
    a = -2. * dy0 + 2. * dy1 - 8. * y - 8. * y_next + 16. * y_mid
    b = 5. * dy0 - 3. * dy1 + 18. * y + 14. * y_next - 32. * y_mid
    c = -4. * dy0 + dy1 - 11. * y - 5. * y_next + 16. * y_mid
    return jnp.stack([a, b, c, dy0, y])


def _initial_step(f: Callable, t0: Any, y0: Any, f0: Any, rtol: float, atol: float,
                  order: int = 4) -> Any:
    # Hairer, Norsett and Wanner, Solving ODEs I, section II.4: a first guess from the sizes
    # of y0 and f0, refined by one explicit Euler step's estimate of the second derivative.
    scale = (atol + jnp.abs(y0) * rtol).astype(y0.dtype)
    d0 = jnp.linalg.norm(y0 / scale)
    d1 = jnp.linalg.norm(f0 / scale)
    h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    f1 = f(y0 + h0.astype(y0.dtype) * f0, t0 + h0)
    d2 = jnp.linalg.norm((f1 - f0) / scale) / h0
    h1 = jnp.where((d1 <= 1e-15) & (d2 <= 1e-15), jnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / jnp.maximum(d1, d2)) ** (1. / (order + 1.)))
    return jnp.minimum(100. * h0, h1)


def _error_ratio(error: Any, rtol: float, atol: float, y: Any, y_next: Any) -> Any:
    tol = atol + rtol * jnp.maximum(jnp.abs(y), jnp.abs(y_next))
    ratio = error / tol.astype(error.dtype)
    sq = ratio.real ** 2 + ratio.imag ** 2 if jnp.iscomplexobj(ratio) else ratio ** 2
    return jnp.sqrt(jnp.mean(sq))


def _next_step_size(h: Any, ratio: Any, safety: float = 0.9, ifactor: float = 10.0,
                    dfactor: float = 0.2, order: float = 5.0) -> Any:
    # Grow by at most ifactor; shrink by at most dfactor, and only after a rejected step.
    dfactor = jnp.where(ratio < 1, 1.0, dfactor)
    factor = jnp.minimum(ifactor, jnp.maximum(ratio ** (-1.0 / order) * safety, dfactor))
    return jnp.where(ratio == 0, h * ifactor, h * factor)


# ---------------------------------------------------------------------------- the solver

@partial(custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4))
def _solve(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    """Integrates the flat system ``func(y, t, *args)`` from ts[0], returning y at every ts."""
    with default_matmul_precision("highest"):
        return _solve_impl(func, rtol, atol, mxstep, hmax, y0, ts, *args)


def _solve_impl(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    def f(y, t):
        return func(y, t, *args)

    def advance_to(carry, target_t):
        def keep_going(state):
            i, _, _, t, h, _, _ = state
            return (t < target_t) & (i < mxstep) & (h > 0)

        def attempt(state):
            i, y, fy, t, h, last_t, coeffs = state
            y_next, f_next, error, k = _dopri_step(f, y, fy, t, h)
            ratio = _error_ratio(error, rtol, atol, y, y_next)
            h_new = jnp.clip(_next_step_size(h, ratio), min=0., max=hmax)
            accepted = [i + 1, y_next, f_next, t + h, h_new, t, _interpolant(y, y_next, k, h)]
            rejected = [i + 1, y, fy, t, h_new, last_t, coeffs]
            return [jnp.where(ratio <= 1., a, r) for a, r in zip(accepted, rejected)]

        _, *carry = lax.while_loop(keep_going, attempt, [0] + carry)
        _, _, t, _, last_t, coeffs = carry
        s = (target_t - last_t) / (t - last_t)
        return carry, jnp.polyval(coeffs, s.astype(coeffs.dtype))

    f0 = f(y0, ts[0])
    h0 = jnp.clip(_initial_step(f, ts[0], y0, f0, rtol, atol), min=0., max=hmax)
    carry = [y0, f0, ts[0], h0, ts[0], jnp.stack([y0] * 5)]
    _, ys = lax.scan(advance_to, carry, ts[1:])
    return jnp.concatenate([y0[None], ys])


def _solve_fwd(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    ys = _solve(func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _solve_bwd(func, rtol, atol, mxstep, hmax, residuals, g):
    ys, ts, args = residuals
    # args are leaves; integer ones get no cotangent (and stay out of the adjoint state).
    inexact = [jnp.issubdtype(jnp.result_type(a), jnp.inexact) for a in args]

    def adjoint_dynamics(state, neg_t, *args):
        # Integrated over negative time so the solver runs forward: d/d(-t) of (y, a, ...)
        # is (-f, a^T df/dy, a^T df/dt, a^T df/dargs).
        y, y_bar, *_ = state
        y_dot, pullback = vjp(func, y, -neg_t, *args)
        y_ct, t_ct, *args_ct = pullback(y_bar)
        return -y_dot, y_ct, t_ct, [c for c, d in zip(args_ct, inexact) if d]

    def back_one_interval(carry, i):
        y_bar, t0_bar, args_bar = carry
        # Moving output time ts[i] changes the loss by g[i] . f(y(ts[i])).
        t_bar = jnp.dot(func(ys[i], ts[i], *args), g[i]).real
        t0_bar = t0_bar - t_bar
        _, y_bar, t0_bar, args_bar = odeint(
            adjoint_dynamics, (ys[i], y_bar, t0_bar, args_bar), jnp.stack([-ts[i], -ts[i - 1]]),
            *args, rtol=rtol, atol=atol, mxstep=mxstep, hmax=hmax)
        y_bar, t0_bar, args_bar = _pytree.tree_map(operator.itemgetter(1),
                                                     (y_bar, t0_bar, args_bar))
        return (y_bar + g[i - 1], t0_bar, args_bar), t_bar

    with default_matmul_precision("highest"):
        init = (g[-1], 0., [jnp.zeros_like(a) for a, d in zip(args, inexact) if d])
        (y_bar, t0_bar, args_bar), ts_bar_rev = lax.scan(
            back_one_interval, init, jnp.arange(len(ts) - 1, 0, -1))
        ts_bar = jnp.concatenate([jnp.array([t0_bar]), ts_bar_rev[::-1]])
    diff_bars = iter(args_bar)
    return (y_bar, ts_bar, *(next(diff_bars) if d else None for d in inexact))


_solve.defvjp(_solve_fwd, _solve_bwd)


@partial(jit, static_argnums=(0, 1, 2, 3, 4))
def _odeint_flat(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    # The solver works on one flat vector and the args' leaves; the user's pytree is
    # restored on the way out.
    y0_flat, unravel = ravel_pytree(y0)
    arg_leaves, args_tree = _pytree.tree_flatten(args)

    def flat_func(y, t, *arg_leaves):
        args = _pytree.tree_unflatten(args_tree, arg_leaves)
        return ravel_pytree(func(unravel(y), t, *args))[0]

    ys = _solve(flat_func, rtol, atol, mxstep, hmax, y0_flat, ts, *arg_leaves)
    return vmap(unravel)(ys)


# closure_convert's result per (func, argument structure and types), so that repeated calls
# hit _odeint_flat's jit cache (as JAX's closure_convert cache does). Only outside every
# transformation: under one, func may close over that trace's tracers (integer ones stay
# inside the converted function), which a later call must not see.
_CONVERTED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _convert(func: Callable, *example_args: Any) -> tuple[Callable, list]:
    if not isinstance(core.current_trace(), core.EvalTrace):
        return closure_convert(func, *example_args)
    leaves, tree = _pytree.tree_flatten(example_args)
    key = (tree, tuple(core.get_aval(x) for x in leaves))
    try:
        per_func = _CONVERTED.setdefault(func, {})
    except TypeError:  # not weakly referenceable: convert afresh each call
        return closure_convert(func, *example_args)
    if key not in per_func:
        converted, consts = closure_convert(func, *example_args)
        assert not consts, "no tracers outside a transformation"
        per_func[key] = converted
    return per_func[key], []


def odeint(func: Callable, y0: Any, t: Any, *args: Any, rtol: float = 1.4e-8,
           atol: float = 1.4e-8, mxstep: float = float("inf"),
           hmax: float = float("inf")) -> Any:
    """Solves ``dy/dt = func(y, t, *args)`` from ``y(t[0]) = y0``, returning y at each ``t``.

    An adaptive Dormand-Prince (4th/5th-order Runge-Kutta) solver with JAX's step-size
    control. Differentiable in reverse mode (adjoint method) in ``y0``, ``t`` and ``args``;
    works under ``jit`` and ``vmap``.

    Args:
        func: the time derivative, called as ``func(y, t, *args)``; it returns a pytree
            shaped like ``y``.
        y0: the initial state, an array or pytree of arrays.
        t: strictly increasing float times, e.g. ``jnp.linspace(0., 10., 101)``.
        *args: extra arguments for ``func``: arrays, scalars or pytrees of them.
        rtol: relative local error tolerance.
        atol: absolute local error tolerance.
        mxstep: the most steps taken to reach each time in ``t``.
        hmax: the largest step size allowed.

    Returns:
        The solution at each time: ``y0``'s structure with a new leading axis of ``len(t)``.

    Raises:
        TypeError: if an ``args`` leaf is not an array or scalar, ``t`` is not floating, or
            ``y0`` holds only integers.

    Example:
        >>> ys = odeint(lambda y, t: -y, jnp.ones(2), jnp.linspace(0., 1., 3))
        >>> ys.shape
        (3, 2)
    """
    for arg in _pytree.tree_leaves(args):
        if not core.valid_jaxtype(arg):
            raise TypeError("The contents of odeint *args must be arrays or scalars, but got "
                            f"{arg}.")
    t = jnp.asarray(t)
    if not jnp.issubdtype(t.dtype, jnp.floating):
        raise TypeError(f"t must be an array of floats, but got {t}.")
    # The solver works on y0's leaves raveled into one vector of their common dtype.
    y0_leaves = _pytree.tree_leaves(y0)
    if not y0_leaves or not jnp.issubdtype(jnp.result_type(*y0_leaves), jnp.inexact):
        raise TypeError("odeint: y0 must hold floating-point or complex arrays, got "
                        f"{[str(jnp.result_type(x)) for x in y0_leaves]}")
    if t.ndim != 1 or t.shape[0] < 1:
        raise ValueError(f"odeint: t must be a non-empty 1-D array of times, got shape {t.shape}")
    converted, consts = _convert(func, y0, t[0], *args)
    return _odeint_flat(converted, rtol, atol, mxstep, hmax, y0, t, *args, *consts)
