"""Activation functions, softmax/logsumexp, standardize and one_hot (``jax.nn``'s functions).

Written on ember.numpy and lax. Where JAX pins a derivative at a kink or for stability (relu and
relu6 at their corners, log1mexp, softmax under ``jax_softmax_custom_jvp``) the same rule is a
``custom_jvp`` here, so gradients agree with JAX's exactly at those points.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ember import dtypes, lax
from ember import numpy as jnp
from ember.config import config
from ember.custom_derivatives import custom_jvp
from ember.numpy._eager_jit import jit_when_large
from ember.numpy._util import array_arg, canonicalize_axes, promote_args_inexact

Array = Any
ArrayLike = Any
Axis = int | tuple[int, ...] | None

__all__ = [
    "celu", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh",
    "identity", "leaky_relu", "log1mexp", "log_sigmoid", "log_softmax", "logmeanexp",
    "logsumexp", "mish", "one_hot", "relu", "relu6", "selu", "sigmoid", "silu", "soft_sign",
    "softmax", "softplus", "sparse_plus", "sparse_sigmoid", "squareplus", "standardize",
    "swish", "tanh",
]


def identity(x: ArrayLike) -> Array:
    """Identity activation: returns ``x`` as an array.

    Example:
        >>> ember.nn.identity(jnp.array([1., -2.]))
        Array([ 1., -2.], dtype=float32)
    """
    return array_arg("identity", x)


@custom_jvp
def relu(x: ArrayLike) -> Array:
    """Rectified linear unit, ``max(x, 0)``; its derivative at 0 is taken to be 0 (as JAX).

    Example:
        >>> ember.nn.relu(jnp.array([-1., 0., 2.]))
        Array([0., 0., 2.], dtype=float32)
    """
    return jnp.maximum(array_arg("relu", x), 0)


relu.defjvps(lambda g, ans, x: lax.select(x > 0, g, lax.full_like(g, 0)))


@custom_jvp
def relu6(x: ArrayLike) -> Array:
    """``min(max(x, 0), 6)``; its derivative is 0 at both corners (as JAX).

    Example:
        >>> ember.nn.relu6(jnp.array([-1., 3., 7.]))
        Array([0., 3., 6.], dtype=float32)
    """
    return jnp.minimum(jnp.maximum(array_arg("relu6", x), 0), 6.0)


relu6.defjvps(lambda g, ans, x: lax.select((x > 0) & (x < 6), g, lax.full_like(g, 0)))


@jit_when_large()
def squareplus(x: ArrayLike, b: ArrayLike = 4) -> Array:
    """Squareplus, ``(x + sqrt(x**2 + b)) / 2``.

    Example:
        >>> ember.nn.squareplus(jnp.array([0.]))
        Array([1.], dtype=float32)
    """
    x, b = array_arg("squareplus", x), array_arg("squareplus", b)
    return (x + jnp.sqrt(jnp.square(x) + b)) / 2


@jit_when_large()
def softplus(x: ArrayLike) -> Array:
    """Softplus, ``log(1 + exp(x))`` computed stably as ``logaddexp(x, 0)``.

    Example:
        >>> ember.nn.softplus(jnp.array([0.]))
        Array([0.6931472], dtype=float32)
    """
    return jnp.logaddexp(array_arg("softplus", x), 0)


@jit_when_large()
def sparse_plus(x: ArrayLike) -> Array:
    """Sparse plus: 0 for ``x <= -1``, ``(x + 1)**2 / 4`` on (-1, 1), ``x`` for ``x >= 1``.

    Example:
        >>> ember.nn.sparse_plus(jnp.array([-2., 0., 2.]))
        Array([0.  , 0.25, 2.  ], dtype=float32)
    """
    x = array_arg("sparse_plus", x)
    return jnp.where(x <= -1.0, 0.0, jnp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4))


@jit_when_large()
def soft_sign(x: ArrayLike) -> Array:
    """Soft sign, ``x / (|x| + 1)``.

    Example:
        >>> ember.nn.soft_sign(jnp.array([1.]))
        Array([0.5], dtype=float32)
    """
    x = array_arg("soft_sign", x)
    return x / (jnp.abs(x) + 1)


def sigmoid(x: ArrayLike) -> Array:
    """Logistic sigmoid, ``1 / (1 + exp(-x))``.

    Example:
        >>> ember.nn.sigmoid(jnp.array([0.]))
        Array([0.5], dtype=float32)
    """
    return lax.logistic(array_arg("sigmoid", x))


@jit_when_large()
def sparse_sigmoid(x: ArrayLike) -> Array:
    """Sparse sigmoid, ``clip((x + 1) / 2, 0, 1)`` (the derivative of ``sparse_plus``).

    Example:
        >>> ember.nn.sparse_sigmoid(jnp.array([-2., 0., 2.]))
        Array([0. , 0.5, 1. ], dtype=float32)
    """
    return 0.5 * jnp.clip(array_arg("sparse_sigmoid", x) + 1.0, 0.0, 2.0)


@jit_when_large()
def silu(x: ArrayLike) -> Array:
    """SiLU (swish), ``x * sigmoid(x)``.

    Example:
        >>> ember.nn.silu(jnp.array([0., 1.]))
        Array([0.       , 0.7310586], dtype=float32)
    """
    x = array_arg("silu", x)
    return x * sigmoid(x)


swish = silu


@jit_when_large()
def mish(x: ArrayLike) -> Array:
    """Mish, ``x * tanh(softplus(x))``.

    Example:
        >>> ember.nn.mish(jnp.array([0.]))
        Array([0.], dtype=float32)
    """
    x = array_arg("mish", x)
    return x * jnp.tanh(softplus(x))


@jit_when_large()
def log_sigmoid(x: ArrayLike) -> Array:
    """``log(sigmoid(x))`` computed as ``-softplus(-x)``.

    Example:
        >>> ember.nn.log_sigmoid(jnp.array([0.]))
        Array([-0.6931472], dtype=float32)
    """
    return -softplus(-array_arg("log_sigmoid", x))


@jit_when_large()
def elu(x: ArrayLike, alpha: ArrayLike = 1.0) -> Array:
    """Exponential linear unit: ``x`` for ``x > 0``, ``alpha * (exp(x) - 1)`` otherwise.

    Example:
        >>> ember.nn.elu(jnp.array([-1., 1.]))
        Array([-0.63212055,  1.        ], dtype=float32)
    """
    x = array_arg("elu", x)
    # (exp of the clamped value, so large positive x does not give inf * 0 in the gradient.)
    return jnp.where(x > 0, x, alpha * jnp.expm1(jnp.where(x > 0, 0.0, x)))


@jit_when_large()
def leaky_relu(x: ArrayLike, negative_slope: ArrayLike = 1e-2) -> Array:
    """Leaky ReLU: ``x`` for ``x >= 0``, ``negative_slope * x`` otherwise.

    Example:
        >>> ember.nn.leaky_relu(jnp.array([-1., 1.]))
        Array([-0.01,  1.  ], dtype=float32)
    """
    x = array_arg("leaky_relu", x)
    return jnp.where(x >= 0, x, negative_slope * x)


@jit_when_large()
def hard_tanh(x: ArrayLike) -> Array:
    """``x`` clipped to [-1, 1].

    Example:
        >>> ember.nn.hard_tanh(jnp.array([-2., 0.5, 2.]))
        Array([-1. ,  0.5,  1. ], dtype=float32)
    """
    x = array_arg("hard_tanh", x)
    return jnp.where(x > 1, 1, jnp.where(x < -1, -1, x))


@jit_when_large()
def celu(x: ArrayLike, alpha: ArrayLike = 1.0) -> Array:
    """Continuously differentiable ELU: ``max(x, 0) + alpha * expm1(min(x, 0) / alpha)``.

    Example:
        >>> ember.nn.celu(jnp.array([-1., 1.]))
        Array([-0.63212055,  1.        ], dtype=float32)
    """
    x = array_arg("celu", x)
    return jnp.maximum(x, 0.0) + alpha * jnp.expm1(jnp.minimum(x, 0.0) / alpha)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@jit_when_large()
def selu(x: ArrayLike) -> Array:
    """Scaled ELU: ``scale * elu(x, alpha)`` with the self-normalizing constants.

    Example:
        >>> ember.nn.selu(jnp.array([1.]))
        Array([1.050701], dtype=float32)
    """
    return _SELU_SCALE * elu(array_arg("selu", x), _SELU_ALPHA)


@jit_when_large('approximate')
def gelu(x: ArrayLike, approximate: bool = True) -> Array:
    """Gaussian error linear unit: ``x * Phi(x)``, or its tanh approximation by default.

    Args:
        x: input array.
        approximate: use ``0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x**3)))`` for Phi.

    Example:
        >>> ember.nn.gelu(jnp.array([1.]), approximate=False)
        Array([0.8413447], dtype=float32)
    """
    [x] = promote_args_inexact("gelu", x)
    dt = np.dtype(x.dtype)
    if approximate:
        c = np.asarray(np.sqrt(2 / np.pi)).astype(dt)
        cdf = 0.5 * (1.0 + jnp.tanh(c * (x + 0.044715 * (x ** 3))))
        return x * cdf
    half = np.asarray(np.sqrt(0.5)).astype(dt)
    return jnp.asarray(0.5 * x * lax.erfc(-x * half), dtype=dt)


@jit_when_large('axis')
def glu(x: ArrayLike, axis: int = -1) -> Array:
    """Gated linear unit: ``a * sigmoid(b)`` where ``a, b`` are the halves of ``x`` on ``axis``.

    Example:
        >>> ember.nn.glu(jnp.array([1., 0.]))
        Array([0.5], dtype=float32)
    """
    x = array_arg("glu", x)
    if x.shape[axis] % 2 != 0:
        raise ValueError(f"glu: the size of axis {axis} must be divisible by 2, "
                         f"got shape {x.shape}")
    x1, x2 = jnp.split(x, 2, axis)
    return x1 * sigmoid(x2)


def tanh(x: ArrayLike, /) -> Array:
    """Hyperbolic tangent (``jnp.tanh``).

    Example:
        >>> ember.nn.tanh(jnp.array([0.]))
        Array([0.], dtype=float32)
    """
    return jnp.tanh(x)


@jit_when_large()
def hard_sigmoid(x: ArrayLike) -> Array:
    """``relu6(x + 3) / 6``.

    Example:
        >>> ember.nn.hard_sigmoid(jnp.array([0.]))
        Array([0.5], dtype=float32)
    """
    return relu6(array_arg("hard_sigmoid", x) + 3.0) / 6.0


@jit_when_large()
def hard_silu(x: ArrayLike) -> Array:
    """Hard SiLU (hard swish), ``x * hard_sigmoid(x)``.

    Example:
        >>> ember.nn.hard_silu(jnp.array([1.]))
        Array([0.6666667], dtype=float32)
    """
    x = array_arg("hard_silu", x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


@custom_jvp
def log1mexp(x: ArrayLike) -> Array:
    """``log(1 - exp(-x))`` for ``x >= 0``, accurate near 0 and for large ``x``.

    Example:
        >>> ember.nn.log1mexp(jnp.array([1.]))
        Array([-0.45867515], dtype=float32)
    """
    x = array_arg("log1mexp", x)
    return jnp.where(x < np.log(2.0), jnp.log(-jnp.expm1(-x)), jnp.log1p(-jnp.exp(-x)))


log1mexp.defjvps(lambda g, ans, x: g / jnp.expm1(x))


# ---------------------------------------------------------------- reductions


def _reduction_dims(fn: str, ndim: int, axis: Axis) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(positive axes sorted, the same) with None meaning every axis."""
    if axis is None:
        dims = tuple(range(ndim))
    else:
        dims = tuple(sorted(canonicalize_axes(fn, axis, ndim)))
    return dims, dims


@jit_when_large('axis', 'keepdims', 'return_sign')
def logsumexp(a: ArrayLike, axis: Axis = None, b: ArrayLike | None = None,
              keepdims: bool = False, return_sign: bool = False,
              where: ArrayLike | None = None) -> Array | tuple[Array, Array]:
    """``log(sum(b * exp(a)))`` over ``axis``, computed stably.

    Args:
        a: input array.
        axis: axis or axes to reduce (None: all).
        b: optional scale factors broadcastable to ``a``; may be negative.
        keepdims: keep the reduced axes as size 1.
        return_sign: also return the sign of the sum; the result is then ``log|sum|``.
        where: elements to include.

    Returns:
        The result, or ``(result, sign)`` with ``return_sign``. Without it, a negative sum
        gives NaN.

    Example:
        >>> ember.nn.logsumexp(jnp.array([0., 0.]))
        Array(0.6931472, dtype=float32)
    """
    if where is not None:
        a = jnp.where(where, a, 0)
    if b is not None:
        a_arr, b_arr = promote_args_inexact("logsumexp", a, b)
        a_arr = jnp.where(b_arr != 0, a_arr, -np.inf)
    else:
        (a_arr,) = promote_args_inexact("logsumexp", a)
        b_arr = None
    pos_dims, dims = _reduction_dims("logsumexp", a_arr.ndim, axis)
    amax = jnp.max(jnp.real(a_arr), axis=dims, keepdims=keepdims, where=where,
                   initial=-np.inf)
    # The shift is a constant for differentiation; infinite maxima shift by 0.
    amax = lax.stop_gradient(lax.select(jnp.isfinite(amax), amax, lax.full_like(amax, 0)))
    amax_dims = amax if keepdims else lax.expand_dims(amax, pos_dims)
    exp_a = lax.exp(lax.sub(a_arr, amax_dims.astype(a_arr.dtype)))
    if b_arr is not None:
        exp_a = lax.mul(exp_a, b_arr)
    sumexp = exp_a.sum(axis=dims, keepdims=keepdims, where=where)
    sign = lax.sign(sumexp)
    if return_sign or not jnp.issubdtype(a_arr.dtype, np.complexfloating):
        sumexp = abs(sumexp)
    out = lax.add(lax.log(sumexp), amax.astype(sumexp.dtype))
    if return_sign:
        return out, sign
    if b_arr is not None and not jnp.issubdtype(out.dtype, np.complexfloating):
        out = jnp.where(sign < 0, jnp.array(np.nan, dtype=out.dtype), out)
    return out


def _count(x: Array, axis: Axis, where: ArrayLike | None, keepdims: bool, dtype: Any) -> Array:
    if where is None:
        dims, _ = _reduction_dims("logmeanexp", x.ndim, axis)
        n = int(np.prod([x.shape[d] for d in dims]))
        shape = tuple(1 if d in dims else s for d, s in enumerate(x.shape)) if keepdims else \
            tuple(s for d, s in enumerate(x.shape) if d not in dims)
        return jnp.full(shape, n, dtype=dtype)
    return jnp.sum(jnp.broadcast_to(where, x.shape), axis=axis, keepdims=keepdims, dtype=dtype)


@jit_when_large('axis', 'keepdims')
def logmeanexp(x: ArrayLike, axis: Axis = None, where: ArrayLike | None = None,
               keepdims: bool = False) -> Array:
    """``log(mean(exp(x)))`` over ``axis``: ``logsumexp(x) - log(n)``.

    Example:
        >>> ember.nn.logmeanexp(jnp.array([0., 0.]))
        Array(0., dtype=float32)
    """
    x = array_arg("logmeanexp", x)
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    return lse - jnp.log(_count(x, axis, where, keepdims, lse.dtype))


@jit_when_large('axis')
def log_softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> Array:
    """``x - logsumexp(x, axis)``: log-probabilities; masked-out elements (``where``) are -inf.

    Example:
        >>> ember.nn.log_softmax(jnp.array([0., 0.]))
        Array([-0.6931472, -0.6931472], dtype=float32)
    """
    x = array_arg("log_softmax", x)
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    shifted = x_safe - lax.stop_gradient(x_max)
    shifted_lse = jnp.log(jnp.sum(jnp.exp(shifted), axis, where=where, keepdims=True))
    result = shifted - shifted_lse
    if where is not None:
        return jnp.where(where, result, -np.inf)
    return result


def _softmax_body(x: Array, axis: Axis, where: Any, initial: Any, stop: bool) -> Array:
    x_max = jnp.max(x, axis, where=where, initial=initial, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, initial)
    unnormalized = jnp.exp(x_safe - (lax.stop_gradient(x_max) if stop else x_max))
    result = unnormalized / jnp.sum(unnormalized, axis, where=where, keepdims=True)
    if where is not None:
        result = jnp.where(where, result, 0)
    return result


def _softmax_custom(x: Array, axis: Axis, where: Any, initial: Any) -> Array:
    return _softmax_body(x, axis, where, initial, stop=False)


_softmax_custom = custom_jvp(_softmax_custom, nondiff_argnums=(1,))


@_softmax_custom.defjvp
def _softmax_custom_jvp(axis, primals, tangents):
    (x, where, initial), (x_dot, _, _) = primals, tangents
    y = _softmax_custom(x, axis, where, initial)
    return y, y * (x_dot - (y * x_dot).sum(axis, where=where, keepdims=True))


@jit_when_large('axis')
def softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> Array:
    """``exp(x) / sum(exp(x), axis)``; masked-out elements (``where``) are 0.

    With ``jax_softmax_custom_jvp`` on, the derivative is the closed form
    ``y * (dx - sum(y * dx))`` (as JAX); otherwise it differentiates the stabilized formula.

    Example:
        >>> ember.nn.softmax(jnp.array([0., 0.]))
        Array([0.5, 0.5], dtype=float32)
    """
    x = array_arg("softmax", x)
    if config.jax_softmax_custom_jvp:
        return _softmax_custom(x, axis, where, -np.inf)
    return _softmax_body(x, axis, where, -np.inf, stop=True)


@jit_when_large('axis', 'algorithm')
def standardize(x: ArrayLike, axis: Axis = -1, mean: ArrayLike | None = None,
                variance: ArrayLike | None = None, epsilon: ArrayLike = 1e-5,
                where: ArrayLike | None = None, *, algorithm: str = "fast") -> Array:
    """``(x - mean) / sqrt(variance + epsilon)`` over ``axis``.

    Args:
        x: input array.
        axis: axis or axes over which mean and variance are taken.
        mean, variance: given statistics (computed from ``x`` when None).
        epsilon: added to the variance.
        where: elements used for the statistics.
        algorithm: ``"fast"`` (``E[x^2] - E[x]^2``, clipped at 0) or ``"stable"`` (two-pass).

    Example:
        >>> ember.nn.standardize(jnp.array([1., 3.]), epsilon=0.)
        Array([-1.,  1.], dtype=float32)
    """
    x = array_arg("standardize", x)
    for v in (mean, variance, where):
        if v is not None:
            array_arg("standardize", v)
    if mean is None:
        mean = jnp.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = jnp.mean(jnp.square(jnp.subtract(x, mean)), axis, keepdims=True,
                                where=where)
        elif algorithm == "fast":
            variance = jnp.mean(jnp.square(x), axis, keepdims=True, where=where) \
                - jnp.square(mean)
            variance = jnp.clip(variance, 0)
        else:
            raise ValueError(f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable'.")
    return jnp.subtract(x, mean) * lax.rsqrt(variance + epsilon)


def one_hot(x: Any, num_classes: int, *, dtype: Any | None = None, axis: int = -1) -> Array:
    """One-hot encoding of integer indices; out-of-range indices encode as all zeros.

    Args:
        x: indices.
        num_classes: length of the one-hot dimension (a concrete int).
        dtype: output dtype (default: the default float dtype).
        axis: where the new dimension goes in the output.

    Example:
        >>> ember.nn.one_hot(jnp.array([0, 2, 3]), 3)
        Array([[1., 0., 0.],
               [0., 0., 1.],
               [0., 0., 0.]], dtype=float32)
    """
    try:
        num_classes = operator.index(num_classes)
    except TypeError:
        raise TypeError("one_hot: num_classes must be a concrete integer, got "
                        f"{num_classes!r}. The error arose in jax.nn.one_hot argument "
                        "`num_classes`.") from None
    x = jnp.asarray(x)
    dtype = dtypes.canonicalize_dtype(jnp.float64) if dtype is None else dtype
    if not isinstance(axis, (int, np.integer)):
        raise TypeError(f"one_hot: axis must be an integer, got {axis!r}")
    out_axis = canonicalize_axes("one_hot", axis, x.ndim + 1)[0]
    lhs = lax.expand_dims(x, (out_axis,))
    rhs_shape = [1] * x.ndim
    rhs_shape.insert(out_axis, num_classes)
    rhs = lax.broadcasted_iota(x.dtype, tuple(rhs_shape), out_axis)
    return (lhs == rhs).astype(dtype)
