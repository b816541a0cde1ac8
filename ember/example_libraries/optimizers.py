"""optimizers: JAX's example first-order optimizers as ``(init, update, get_params)`` triples.

Each optimizer constructor returns an :class:`Optimizer` triple working on any pytree of
parameters: ``opt_state = init_fun(params)``, ``opt_state = update_fun(step, grads,
opt_state)``, ``params = get_params(opt_state)``. The state is an :class:`OptimizerState`
pytree, so update functions can be jitted.

Example:
    >>> import ember as jax
    >>> import ember.numpy as jnp
    >>> from ember.example_libraries import optimizers
    >>> opt_init, opt_update, get_params = optimizers.sgd(0.1)
    >>> state = opt_init({"w": jnp.ones(2)})
    >>> state = opt_update(0, {"w": jnp.ones(2)}, state)
    >>> get_params(state)["w"]
    Array([0.9, 0.9], dtype=float32)
"""

from __future__ import annotations

import functools
from collections import namedtuple
from collections.abc import Callable
from typing import Any, NamedTuple

import ember.numpy as jnp
from ember import _pytree

__all__ = [
    "JoinPoint", "Optimizer", "OptimizerState", "adagrad", "adam", "adamax", "clip_grads",
    "constant", "exponential_decay", "inverse_time_decay", "l2_norm", "make_schedule",
    "momentum", "nesterov", "optimizer", "pack_optimizer_state", "piecewise_constant",
    "polynomial_decay", "rmsprop", "rmsprop_momentum", "sgd", "sm3", "unpack_optimizer_state",
]

Array = Any
Params = Any
State = Any
Updates = Params
Step = int
Schedule = Callable[[Step], float]

# The flat list of per-leaf states is the only child; the two treedefs are static data.
OptimizerState = namedtuple("OptimizerState", ["packed_state", "tree_def", "subtree_defs"])
_pytree.register_pytree_node(
    OptimizerState,
    lambda s: ((s.packed_state,), (s.tree_def, s.subtree_defs)),
    lambda aux, children: OptimizerState(children[0], aux[0], aux[1]))

InitFn = Callable[[Params], OptimizerState]
UpdateFn = Callable[[Step, Updates, OptimizerState], OptimizerState]
ParamsFn = Callable[[OptimizerState], Params]


class Optimizer(NamedTuple):
    """An ``(init_fn, update_fn, params_fn)`` triple."""
    init_fn: InitFn
    update_fn: UpdateFn
    params_fn: ParamsFn


def _flatten_states(states: list) -> tuple[list, list]:
    pairs = [_pytree.tree_flatten(s) for s in states]
    return [leaves for leaves, _ in pairs], [tree for _, tree in pairs]


def _unflatten_states(subtrees: list, states_flat: list) -> list:
    if len(subtrees) != len(states_flat):
        raise ValueError("optimizer state has mismatched lengths: "
                         f"{len(subtrees)} subtrees and {len(states_flat)} leaf states")
    return [_pytree.tree_unflatten(t, s) for t, s in zip(subtrees, states_flat)]


def optimizer(opt_maker: Callable[..., tuple[Callable, Callable, Callable]]
              ) -> Callable[..., Optimizer]:
    """Lifts an optimizer written for single arrays to one working on pytrees of arrays.

    Args:
        opt_maker: a function returning ``(init, update, get_params)`` on single arrays:
            ``init(x0) -> state``, ``update(i, g, state) -> state``,
            ``get_params(state) -> x``, where a state may be any pytree of arrays.

    Returns:
        A function with ``opt_maker``'s signature returning an :class:`Optimizer` whose
        functions take and give pytrees of parameters and an :class:`OptimizerState`.

    Example:
        >>> @optimizer
        ... def halve():
        ...     return (lambda x: x), (lambda i, g, x: x / 2), (lambda x: x)
        >>> init, update, get = halve()
        >>> get(update(0, [jnp.ones(1)], init([jnp.ones(1)])))
        [Array([0.5], dtype=float32)]
    """
    @functools.wraps(opt_maker)
    def tree_opt_maker(*args, **kwargs):
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def tree_init(x0_tree):
            x0_flat, tree = _pytree.tree_flatten(x0_tree)
            states_flat, subtrees = _flatten_states([init(x0) for x0 in x0_flat])
            return OptimizerState(states_flat, tree, subtrees)

        @functools.wraps(update)
        def tree_update(i, grad_tree, opt_state):
            states_flat, tree, subtrees = opt_state
            grad_flat, grad_tree_def = _pytree.tree_flatten(grad_tree)
            if grad_tree_def != tree:
                raise TypeError(
                    "optimizer update function was passed a gradient tree that did not match "
                    "the parameter tree structure with which it was initialized: parameter "
                    f"tree {tree} and grad tree {grad_tree_def}.")
            states = _unflatten_states(subtrees, states_flat)
            new_states = [update(i, g, s) for g, s in zip(grad_flat, states)]
            new_flat, new_subtrees = _flatten_states(new_states)
            for before, after in zip(subtrees, new_subtrees):
                if before != after:
                    raise TypeError(
                        "optimizer update function produced an output structure that did "
                        f"not match its input structure: input {before} and output {after}.")
            return OptimizerState(new_flat, tree, subtrees)

        @functools.wraps(get_params)
        def tree_get_params(opt_state):
            states_flat, tree, subtrees = opt_state
            states = _unflatten_states(subtrees, states_flat)
            return _pytree.tree_unflatten(tree, [get_params(s) for s in states])

        return Optimizer(tree_init, tree_update, tree_get_params)

    return tree_opt_maker


def _first(state):
    return state[0]


# ---------------------------------------------------------------------------- optimizers

@optimizer
def sgd(step_size: float | Schedule) -> Optimizer:
    """Stochastic gradient descent: ``x -= step_size(i) * g``.

    Args:
        step_size: a positive scalar or a schedule mapping the step index to one.

    Returns:
        An ``(init_fun, update_fun, get_params)`` triple.

    Example:
        >>> init, update, get = sgd(0.5)
        >>> get(update(0, jnp.ones(2), init(jnp.ones(2))))
        Array([0.5, 0.5], dtype=float32)
    """
    step_size = make_schedule(step_size)

    def update(i, g, x):
        return x - step_size(i) * g

    return Optimizer(lambda x0: x0, update, lambda x: x)


def _momentum_optimizer(step_size: float | Schedule, mass: float, lookahead: bool):
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        direction = mass * velocity + g if lookahead else velocity
        return x - step_size(i) * direction, velocity

    return init, update, _first


@optimizer
def momentum(step_size: float | Schedule, mass: float):
    """SGD with (heavy-ball) momentum: ``v = mass * v + g; x -= step_size(i) * v``.

    Args:
        step_size: a positive scalar or a schedule mapping the step index to one.
        mass: the momentum coefficient.

    Returns:
        An ``(init_fun, update_fun, get_params)`` triple.

    Example:
        >>> init, update, get = momentum(0.1, mass=0.9)
    """
    return _momentum_optimizer(step_size, mass, lookahead=False)


@optimizer
def nesterov(step_size: float | Schedule, mass: float):
    """SGD with Nesterov momentum: ``v = mass * v + g; x -= step_size(i) * (mass * v + g)``.

    Args:
        step_size: a positive scalar or a schedule mapping the step index to one.
        mass: the momentum coefficient.

    Returns:
        An ``(init_fun, update_fun, get_params)`` triple.

    Example:
        >>> init, update, get = nesterov(0.1, mass=0.9)
    """
    return _momentum_optimizer(step_size, mass, lookahead=True)


def _inv_sqrt_or_zero(x):
    return jnp.where(x > 0, 1. / jnp.sqrt(x), 0.0)


@optimizer
def adagrad(step_size: float | Schedule, momentum: float = 0.9):
    """Adagrad (Duchi et al., 2011) with momentum on the normalized gradient.

    Args:
        step_size: a positive scalar or a schedule mapping the step index to one.
        momentum: the momentum coefficient.

    Returns:
        An ``(init_fun, update_fun, get_params)`` triple.

    Example:
        >>> init, update, get = adagrad(0.1)
    """
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, g_sq, m = state
        g_sq = g_sq + jnp.square(g)
        m = (1. - momentum) * (g * _inv_sqrt_or_zero(g_sq)) + momentum * m
        return x - step_size(i) * m, g_sq, m

    return init, update, _first


@optimizer
def rmsprop(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8):
    """RMSProp: scales the step by a running RMS of the gradients.

    Args:
        step_size: a positive scalar or a schedule mapping the step index to one.
        gamma: the decay of the running average of squared gradients.
        eps: added under the square root.

    Returns:
        An ``(init_fun, update_fun, get_params)`` triple.

    Example:
        >>> init, update, get = rmsprop(0.01)
    """
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, avg_sq_grad = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1. - gamma)
        return x - step_size(i) * g / jnp.sqrt(avg_sq_grad + eps), avg_sq_grad

    return init, update, _first


@optimizer
def rmsprop_momentum(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8,
                     momentum: float = 0.9):
    """RMSProp with momentum on the scaled step.

    Args:
        step_size: a positive scalar or a schedule mapping the step index to one.
        gamma: the decay of the running average of squared gradients.
        eps: added under the square root.
        momentum: the momentum coefficient.

    Returns:
        An ``(init_fun, update_fun, get_params)`` triple.

    Example:
        >>> init, update, get = rmsprop_momentum(0.01)
    """
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, avg_sq_grad, mom = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1. - gamma)
        mom = momentum * mom + step_size(i) * g / jnp.sqrt(avg_sq_grad + eps)
        return x - mom, avg_sq_grad, mom

    return init, update, _first


def _bias_correction(b, i, dtype):
    # 1 - b**(i+1) in the moments' dtype (i may be a traced step index).
    return 1 - jnp.asarray(b, dtype) ** (i + 1)


@optimizer
def adam(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8):
    """Adam (Kingma and Ba, 2015).

    Args:
        step_size: a positive scalar or a schedule mapping the step index to one.
        b1: the decay of the first-moment estimate.
        b2: the decay of the second-moment estimate.
        eps: added to the denominator.

    Returns:
        An ``(init_fun, update_fun, get_params)`` triple.

    Example:
        >>> init, update, get = adam(1e-3)
    """
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        mhat = m / _bias_correction(b1, i, m.dtype)
        vhat = v / _bias_correction(b2, i, m.dtype)
        return x - step_size(i) * mhat / (jnp.sqrt(vhat) + eps), m, v

    return init, update, _first


@optimizer
def adamax(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999,
           eps: float = 1e-8):
    """AdaMax: Adam with the infinity norm in place of the second moment.

    Args:
        step_size: a positive scalar or a schedule mapping the step index to one.
        b1: the decay of the first-moment estimate.
        b2: the decay of the infinity-norm estimate.
        eps: added to the denominator.

    Returns:
        An ``(init_fun, update_fun, get_params)`` triple.

    Example:
        >>> init, update, get = adamax(2e-3)
    """
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        x = x - (step_size(i) / _bias_correction(b1, i, m.dtype)) * m / (u + eps)
        return x, m, u

    return init, update, _first


@optimizer
def sm3(step_size: float | Schedule, momentum: float = 0.9):
    """SM3 (Anil et al., 2019): Adagrad with one accumulator vector per axis.

    Args:
        step_size: a positive scalar or a schedule mapping the step index to one.
        momentum: the momentum coefficient.

    Returns:
        An ``(init_fun, update_fun, get_params)`` triple.

    Example:
        >>> init, update, get = sm3(0.1)
    """
    step_size = make_schedule(step_size)

    def along(ndim, v, axis):
        # v (one accumulator per index of `axis`) shaped to broadcast against a rank-ndim array.
        return v[tuple(slice(None) if d == axis else None for d in range(ndim))]

    def init(x0):
        shape = jnp.shape(x0)
        x0 = jnp.atleast_1d(x0)
        accumulators = [jnp.zeros(n, dtype=x0.dtype) for n in x0.shape]
        return x0, jnp.zeros_like(x0), accumulators, shape

    def update(i, g, state):
        x, m, accumulators, shape = state
        bounds = [along(g.ndim, v, axis) for axis, v in enumerate(accumulators)]
        accum = functools.reduce(jnp.minimum, bounds) + jnp.square(g)
        m = (1. - momentum) * (g * _inv_sqrt_or_zero(accum)) + momentum * m
        x = x - step_size(i) * m
        accumulators = [accum.max(tuple(d for d in range(x.ndim) if d != axis))
                        for axis in range(x.ndim)]
        return x, m, accumulators, shape

    def get_params(state):
        x, _, _, shape = state
        return x.reshape(shape)

    return init, update, get_params


# ---------------------------------------------------------------------------- schedules

def constant(step_size: float) -> Schedule:
    """A schedule returning ``step_size`` at every step.

    Example:
        >>> constant(0.1)(7)
        0.1
    """
    def schedule(i):
        return step_size
    return schedule


def exponential_decay(step_size: float, decay_steps: float, decay_rate: float) -> Schedule:
    """A schedule ``step_size * decay_rate ** (i / decay_steps)``.

    Example:
        >>> float(exponential_decay(1.0, 10, 0.5)(10))
        0.5
    """
    def schedule(i):
        return step_size * decay_rate ** (i / decay_steps)
    return schedule


def inverse_time_decay(step_size: float, decay_steps: float, decay_rate: float,
                       staircase: bool = False) -> Schedule:
    """A schedule ``step_size / (1 + decay_rate * i / decay_steps)`` (floored with staircase).

    Example:
        >>> float(inverse_time_decay(1.0, 10, 1.0, staircase=True)(15))
        0.5
    """
    if staircase:
        def schedule(i):
            return step_size / (1 + decay_rate * jnp.floor(i / decay_steps))
    else:
        def schedule(i):
            return step_size / (1 + decay_rate * i / decay_steps)
    return schedule


def polynomial_decay(step_size: float, decay_steps: int, final_step_size: float,
                     power: float = 1.0) -> Schedule:
    """A schedule decaying polynomially from ``step_size`` to ``final_step_size``.

    Example:
        >>> float(polynomial_decay(1.0, 10, 0.0)(5))
        0.5
    """
    def schedule(step_num):
        step_num = jnp.minimum(step_num, decay_steps)
        step_mult = (1 - step_num / decay_steps) ** power
        return step_mult * (step_size - final_step_size) + final_step_size
    return schedule


def piecewise_constant(boundaries: Any, values: Any) -> Schedule:
    """A schedule taking ``values[k]`` once the step exceeds ``k`` of the ``boundaries``.

    Args:
        boundaries: increasing step boundaries, one fewer than ``values``.
        values: the step sizes.

    Returns:
        The schedule.

    Raises:
        ValueError: if the arguments are not sequences of compatible lengths.

    Example:
        >>> float(piecewise_constant([10], [1.0, 0.5])(11))
        0.5
    """
    boundaries = jnp.array(boundaries)
    values = jnp.array(values)
    if not boundaries.ndim == values.ndim == 1:
        raise ValueError("boundaries and values must be sequences")
    if boundaries.shape[0] != values.shape[0] - 1:
        raise ValueError("boundaries length must be one shorter than values length")

    def schedule(i):
        return values[jnp.sum(i > boundaries)]
    return schedule


def make_schedule(scalar_or_schedule: float | Schedule) -> Schedule:
    """Returns a callable schedule as is and wraps a scalar in :func:`constant`.

    Raises:
        TypeError: for anything else (e.g. a non-scalar array).

    Example:
        >>> make_schedule(0.1)(3)
        0.1
    """
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if jnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(type(scalar_or_schedule))


# ---------------------------------------------------------------------------- utilities

def l2_norm(tree: Any) -> Array:
    """The l2 norm of all the arrays in a pytree together.

    Example:
        >>> float(l2_norm([jnp.array([3.0]), jnp.array([4.0])]))
        5.0
    """
    leaves = _pytree.tree_leaves(tree)
    return jnp.sqrt(sum(jnp.vdot(x, x) for x in leaves))


def clip_grads(grad_tree: Any, max_norm: float) -> Any:
    """Scales a pytree of gradients down so that its :func:`l2_norm` is at most ``max_norm``.

    Example:
        >>> clip_grads([jnp.array([3.0, 4.0])], 1.0)[0]
        Array([0.6, 0.8], dtype=float32)
    """
    norm = l2_norm(grad_tree)

    def clip(g):
        return jnp.where(norm < max_norm, g, g * (max_norm / norm))

    return _pytree.tree_map(clip, grad_tree)


class JoinPoint:
    """Marks where an outer pytree's leaf holds an inner pytree (a leaf's optimizer state)."""

    def __init__(self, subtree: Any):
        self.subtree = subtree

    def __iter__(self):
        # Pytree serializers treat iterable leaves as containers of arrays.
        yield self.subtree


def unpack_optimizer_state(opt_state: OptimizerState) -> Any:
    """Turns an :class:`OptimizerState` into the parameter pytree of :class:`JoinPoint` leaves.

    Each leaf's JoinPoint holds that parameter's state pytree; this is meant for
    serialization, and :func:`pack_optimizer_state` inverts it.

    Example:
        >>> init, update, get = momentum(0.1, 0.9)
        >>> marked = unpack_optimizer_state(init({"w": jnp.ones(2)}))
        >>> type(marked["w"]).__name__
        'JoinPoint'
    """
    states_flat, tree_def, subtree_defs = opt_state
    subtrees = _unflatten_states(subtree_defs, states_flat)
    return _pytree.tree_unflatten(tree_def, [JoinPoint(s) for s in subtrees])


def pack_optimizer_state(marked_pytree: Any) -> OptimizerState:
    """Turns a pytree of :class:`JoinPoint` leaves back into an :class:`OptimizerState`.

    Raises:
        TypeError: if a leaf is not a JoinPoint.

    Example:
        >>> init, update, get = momentum(0.1, 0.9)
        >>> state = init({"w": jnp.ones(2)})
        >>> pack_optimizer_state(unpack_optimizer_state(state)).tree_def == state.tree_def
        True
    """
    sentinels, tree_def = _pytree.tree_flatten(marked_pytree)
    for s in sentinels:
        if not isinstance(s, JoinPoint):
            raise TypeError("pack_optimizer_state: every leaf of marked_pytree must be a "
                            f"JoinPoint, got {type(s).__name__}")
    states_flat, subtree_defs = _flatten_states([s.subtree for s in sentinels])
    return OptimizerState(states_flat, tree_def, subtree_defs)
