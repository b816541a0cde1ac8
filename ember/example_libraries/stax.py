"""stax: a tiny neural-network library of (init_fun, apply_fun) layer pairs, as JAX's.

A layer is a pair of functions: ``init_fun(rng, input_shape) -> (output_shape, params)``
and ``apply_fun(params, inputs, **kwargs) -> outputs``. Constructors such as :func:`Dense`
return a layer; ready-made layers such as :data:`Relu` or :data:`Flatten` are layers
themselves; :func:`serial` and :func:`parallel` combine layers into layers. Parameters are
drawn with the same keys, splits and initializers as JAX's stax, so the same key gives the
same parameters.

Example:
    >>> import ember as jax
    >>> from ember.example_libraries import stax
    >>> init_fun, apply_fun = stax.serial(stax.Dense(8), stax.Relu, stax.Dense(2))
    >>> out_shape, params = init_fun(jax.random.PRNGKey(0), (-1, 3))
    >>> out_shape
    (-1, 2)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import ember.numpy as jnp
from ember import lax, random
from ember.nn import (
    elu,
    gelu,
    leaky_relu,
    log_softmax,
    relu,
    selu,
    sigmoid,
    softmax,
    softplus,
    standardize,
)
from ember.nn.initializers import glorot_normal, normal, ones, zeros

__all__ = [
    "AvgPool", "BatchNorm", "Conv", "Conv1DTranspose", "ConvTranspose", "Dense", "Dropout",
    "Elu", "Exp", "FanInConcat", "FanInSum", "FanOut", "Flatten", "Gelu", "GeneralConv",
    "GeneralConvTranspose", "Identity", "LeakyRelu", "LogSoftmax", "MaxPool", "Relu", "Selu",
    "Sigmoid", "Softmax", "Softplus", "SumPool", "Tanh", "elementwise", "elu", "gelu",
    "glorot", "glorot_normal", "leaky_relu", "log_softmax", "logsoftmax", "normal", "ones",
    "parallel", "randn", "relu", "selu", "serial", "shape_dependent", "sigmoid", "softmax",
    "softplus", "standardize", "zeros",
]

# JAX's stax aliases.
glorot = glorot_normal
randn = normal
logsoftmax = log_softmax

InitFun = Callable[[Any, Any], tuple[Any, Any]]
ApplyFun = Callable[..., Any]
Layer = tuple[InitFun, ApplyFun]


# Default initializers (module-level, shared by every layer built with the default).
_GLOROT_NORMAL = glorot_normal()
_NORMAL = normal()
_TINY_NORMAL = normal(1e-6)


def _no_params(rng: Any, input_shape: Any) -> tuple[Any, tuple]:
    return input_shape, ()


# ---------------------------------------------------------------------------- parameter layers

def Dense(out_dim: int, W_init: Callable = _GLOROT_NORMAL,
          b_init: Callable = _NORMAL) -> Layer:
    """A fully connected layer: ``inputs @ W + b``.

    Args:
        out_dim: the number of output features.
        W_init: initializer of the ``(in_dim, out_dim)`` weight matrix.
        b_init: initializer of the ``(out_dim,)`` bias.

    Returns:
        An ``(init_fun, apply_fun)`` pair.

    Example:
        >>> init_fun, apply_fun = Dense(3)
        >>> shape, (W, b) = init_fun(random.PRNGKey(0), (5, 2))
        >>> shape, W.shape
        ((5, 3), (2, 3))
    """
    def init_fun(rng, input_shape):
        w_key, b_key = random.split(rng)
        params = (W_init(w_key, (input_shape[-1], out_dim)), b_init(b_key, (out_dim,)))
        return tuple(input_shape[:-1]) + (out_dim,), params

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return jnp.dot(inputs, W) + b

    return init_fun, apply_fun


def _kernel_shape(lhs_spec: str, rhs_spec: str, input_shape: Sequence[int], out_chan: int,
                  filter_shape: Sequence[int]) -> list[int]:
    # The kernel's 'O' is out_chan, its 'I' the input's 'C', its spatial dims the filter's.
    spatial = iter(filter_shape)
    in_chan = input_shape[lhs_spec.index("C")]
    return [out_chan if c == "O" else in_chan if c == "I" else next(spatial)
            for c in rhs_spec]


def _conv_layer(transpose: bool, dimension_numbers: tuple[str, str, str], out_chan: int,
                filter_shape: Sequence[int], strides: Sequence[int] | None, padding: Any,
                W_init: Callable | None, b_init: Callable) -> Layer:
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    unit = (1,) * len(filter_shape)
    strides = tuple(strides) if strides else unit
    if W_init is None:
        W_init = glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))
    shape_rule = lax.conv_transpose_shape_tuple if transpose else lax.conv_general_shape_tuple

    def init_fun(rng, input_shape):
        kernel_shape = _kernel_shape(lhs_spec, rhs_spec, input_shape, out_chan, filter_shape)
        output_shape = shape_rule(input_shape, kernel_shape, strides, padding,
                                  dimension_numbers)
        bias_shape = [out_chan if c == "C" else 1 for c in out_spec]
        w_key, b_key = random.split(rng)
        return output_shape, (W_init(w_key, kernel_shape), b_init(b_key, bias_shape))

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        if transpose:
            out = lax.conv_transpose(inputs, W, strides, padding,
                                     dimension_numbers=dimension_numbers)
        else:
            out = lax.conv_general_dilated(inputs, W, strides, padding, unit, unit,
                                           dimension_numbers=dimension_numbers)
        return out + b

    return init_fun, apply_fun


def GeneralConv(dimension_numbers: tuple[str, str, str], out_chan: int,
                filter_shape: Sequence[int], strides: Sequence[int] | None = None,
                padding: Any = "VALID", W_init: Callable | None = None,
                b_init: Callable = _TINY_NORMAL) -> Layer:
    """A convolution layer with explicit dimension numbers.

    Args:
        dimension_numbers: ``(lhs_spec, rhs_spec, out_spec)`` strings such as
            ``("NHWC", "HWIO", "NHWC")``.
        out_chan: the number of output channels.
        filter_shape: the spatial shape of the kernel.
        strides: the window strides (default all ones).
        padding: ``"VALID"``, ``"SAME"`` or explicit ``(low, high)`` pairs.
        W_init: kernel initializer (default Glorot normal over the kernel's I and O axes).
        b_init: bias initializer.

    Returns:
        An ``(init_fun, apply_fun)`` pair.

    Example:
        >>> init_fun, apply_fun = GeneralConv(("NCHW", "OIHW", "NCHW"), 4, (3, 3))
        >>> init_fun(random.PRNGKey(0), (1, 2, 8, 8))[0]
        (1, 4, 6, 6)
    """
    return _conv_layer(False, dimension_numbers, out_chan, filter_shape, strides, padding,
                       W_init, b_init)


def GeneralConvTranspose(dimension_numbers: tuple[str, str, str], out_chan: int,
                         filter_shape: Sequence[int], strides: Sequence[int] | None = None,
                         padding: Any = "VALID", W_init: Callable | None = None,
                         b_init: Callable = _TINY_NORMAL) -> Layer:
    """A transposed-convolution layer (``lax.conv_transpose``) with explicit dimension numbers.

    Args:
        dimension_numbers: ``(lhs_spec, rhs_spec, out_spec)`` strings.
        out_chan: the number of output channels.
        filter_shape: the spatial shape of the kernel.
        strides: the strides of the transposed convolution (default all ones).
        padding: ``"VALID"``, ``"SAME"`` or explicit ``(low, high)`` pairs.
        W_init: kernel initializer (default Glorot normal over the kernel's I and O axes).
        b_init: bias initializer.

    Returns:
        An ``(init_fun, apply_fun)`` pair.

    Example:
        >>> init_fun, apply_fun = GeneralConvTranspose(("NHC", "HIO", "NHC"), 2, (3,), (2,))
        >>> init_fun(random.PRNGKey(0), (1, 5, 3))[0]
        (1, 11, 2)
    """
    return _conv_layer(True, dimension_numbers, out_chan, filter_shape, strides, padding,
                       W_init, b_init)


Conv = partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))
Conv1DTranspose = partial(GeneralConvTranspose, ("NHC", "HIO", "NHC"))
ConvTranspose = partial(GeneralConvTranspose, ("NHWC", "HWIO", "NHWC"))


def BatchNorm(axis: int | Sequence[int] = (0, 1, 2), epsilon: float = 1e-5,
              center: bool = True, scale: bool = True, beta_init: Callable = zeros,
              gamma_init: Callable = ones) -> Layer:
    """Batch normalization over ``axis`` with a learned shift (beta) and scale (gamma).

    Args:
        axis: the axes normalized over (the statistics' axes).
        epsilon: added to the variance.
        center: whether to learn and add beta.
        scale: whether to learn and multiply by gamma.
        beta_init: beta's initializer.
        gamma_init: gamma's initializer.

    Returns:
        An ``(init_fun, apply_fun)`` pair; params are ``(beta, gamma)``, ``()`` for each one
        turned off.

    Example:
        >>> init_fun, apply_fun = BatchNorm(axis=0)
        >>> shape, (beta, gamma) = init_fun(random.PRNGKey(0), (8, 3))
        >>> beta.shape
        (3,)
    """
    axes = (axis,) if jnp.isscalar(axis) else tuple(axis)

    def init_fun(rng, input_shape):
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axes)
        beta_key, gamma_key = random.split(rng)
        beta = beta_init(beta_key, shape) if center else ()
        gamma = gamma_init(gamma_key, shape) if scale else ()
        return input_shape, (beta, gamma)

    def apply_fun(params, x, **kwargs):
        beta, gamma = params
        # Broadcast the per-feature parameters back over the normalized axes.
        expand = tuple(None if i in axes else slice(None) for i in range(jnp.ndim(x)))
        z = standardize(x, axes, epsilon=epsilon)
        if scale:
            z = gamma[expand] * z
        if center:
            z = z + beta[expand]
        return z

    return init_fun, apply_fun


# ---------------------------------------------------------------------------- elementwise layers

def elementwise(fun: Callable, **fun_kwargs: Any) -> Layer:
    """A parameter-free layer applying ``fun(inputs, **fun_kwargs)``.

    Args:
        fun: the function applied to the inputs.
        **fun_kwargs: keyword arguments passed to ``fun``.

    Returns:
        An ``(init_fun, apply_fun)`` pair.

    Example:
        >>> init_fun, apply_fun = elementwise(jnp.square)
        >>> apply_fun((), jnp.array([1.0, 2.0]))
        Array([1., 4.], dtype=float32)
    """
    def apply_fun(params, inputs, **kwargs):
        return fun(inputs, **fun_kwargs)

    return _no_params, apply_fun


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


# ---------------------------------------------------------------------------- pooling layers

def _window_counts(inputs: Any, window: tuple[int, ...], strides: tuple[int, ...],
                   padding: Any, spec: str | None) -> Any:
    # How many real (unpadded) elements each output window covers, shaped to broadcast
    # against the pooled output (size-1 batch and channel axes).
    batch_chan = (0, inputs.ndim - 1) if spec is None else (spec.index("N"), spec.index("C"))
    spatial = tuple(d for i, d in enumerate(inputs.shape) if i not in batch_chan)
    counts = lax.reduce_window(jnp.ones(spatial, inputs.dtype), 0., lax.add,
                               window, strides, padding)
    for i in sorted(batch_chan):
        counts = jnp.expand_dims(counts, i)
    return counts


def _pooling(reducer: Callable, init_val: float, average: bool = False) -> Callable[..., Layer]:
    def pool(window_shape: Sequence[int], strides: Sequence[int] | None = None,
             padding: Any = "VALID", spec: str | None = None) -> Layer:
        spatial_window = tuple(window_shape)
        spatial_strides = tuple(strides) if strides else (1,) * len(spatial_window)
        batch_chan = ((0, len(spatial_window) + 1) if spec is None
                      else (spec.index("N"), spec.index("C")))
        window, full_strides = list(spatial_window), list(spatial_strides)
        for i in sorted(batch_chan):
            window.insert(i, 1)
            full_strides.insert(i, 1)
        window, full_strides = tuple(window), tuple(full_strides)

        def init_fun(rng, input_shape):
            pads = lax.padtype_to_pads(input_shape, window, full_strides, padding)
            unit = (1,) * len(window)
            return lax.reduce_window_shape_tuple(input_shape, window, full_strides, pads,
                                                 unit, unit), ()

        def apply_fun(params, inputs, **kwargs):
            out = lax.reduce_window(inputs, init_val, reducer, window, full_strides, padding)
            if average:
                out = out / _window_counts(inputs, spatial_window, spatial_strides, padding,
                                           spec)
            return out

        return init_fun, apply_fun

    pool.__doc__ = _POOL_DOC.format(what="an average" if average else
                                    "a max" if reducer is lax.max else "a sum")
    return pool


_POOL_DOC = """Builds {what}-pooling layer over the spatial axes.

    Args:
        window_shape: the spatial window shape.
        strides: the spatial strides (default all ones).
        padding: ``"VALID"``, ``"SAME"`` or explicit ``(low, high)`` pairs over all axes.
        spec: the input layout such as ``"NHWC"`` (default: batch first, channels last).

    Returns:
        An ``(init_fun, apply_fun)`` pair.

    Example:
        >>> init_fun, apply_fun = MaxPool((2, 2), strides=(2, 2))
        >>> init_fun(None, (1, 4, 4, 3))[0]
        (1, 2, 2, 3)
    """

MaxPool = _pooling(lax.max, -jnp.inf)
MaxPool.__name__ = MaxPool.__qualname__ = "MaxPool"
SumPool = _pooling(lax.add, 0.)
SumPool.__name__ = SumPool.__qualname__ = "SumPool"
AvgPool = _pooling(lax.add, 0., average=True)
AvgPool.__name__ = AvgPool.__qualname__ = "AvgPool"


# ---------------------------------------------------------------------------- shape layers

def _flatten_init(rng, input_shape):
    return (input_shape[0], math.prod(input_shape[1:])), ()


def _flatten_apply(params, inputs, **kwargs):
    return jnp.reshape(inputs, (inputs.shape[0], -1))


Flatten: Layer = (_flatten_init, _flatten_apply)
"""Flattens all but the leading (batch) axis."""

Identity: Layer = (_no_params, lambda params, inputs, **kwargs: inputs)
"""Returns its inputs unchanged."""


def FanOut(num: int) -> Layer:
    """A layer that copies its input into a list of ``num`` outputs (for :func:`parallel`).

    Args:
        num: the number of copies.

    Returns:
        An ``(init_fun, apply_fun)`` pair.

    Example:
        >>> init_fun, apply_fun = FanOut(2)
        >>> init_fun(None, (3,))[0]
        [(3,), (3,)]
    """
    def init_fun(rng, input_shape):
        return [input_shape] * num, ()

    def apply_fun(params, inputs, **kwargs):
        return [inputs] * num

    return init_fun, apply_fun


FanInSum: Layer = (lambda rng, input_shape: (input_shape[0], ()),
                   lambda params, inputs, **kwargs: sum(inputs))
"""Sums a list of inputs of one shape."""


def FanInConcat(axis: int = -1) -> Layer:
    """A layer that concatenates a list of inputs along ``axis``.

    Args:
        axis: the concatenation axis.

    Returns:
        An ``(init_fun, apply_fun)`` pair.

    Example:
        >>> init_fun, apply_fun = FanInConcat()
        >>> init_fun(None, [(2, 3), (2, 4)])[0]
        (2, 7)
    """
    def init_fun(rng, input_shape):
        first = tuple(input_shape[0])
        ax = axis % len(first)
        size = sum(shape[ax] for shape in input_shape)
        return first[:ax] + (size,) + first[ax + 1:], ()

    def apply_fun(params, inputs, **kwargs):
        return jnp.concatenate(inputs, axis)

    return init_fun, apply_fun


def Dropout(rate: float, mode: str = "train") -> Layer:
    """A dropout layer; ``apply_fun`` needs an ``rng=`` key in ``"train"`` mode.

    As in JAX's stax, ``rate`` is the probability of *keeping* an element, and kept
    elements are divided by ``rate``.

    Args:
        rate: the keep probability.
        mode: ``"train"`` drops elements; any other mode returns the inputs.

    Returns:
        An ``(init_fun, apply_fun)`` pair.

    Example:
        >>> init_fun, apply_fun = Dropout(0.5)
        >>> apply_fun((), jnp.ones(4), rng=random.PRNGKey(0)).shape
        (4,)
    """
    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.get("rng")
        if rng is None:
            raise ValueError(
                "Dropout layer requires apply_fun to be called with a PRNG key argument: "
                "call it as apply_fun(params, inputs, rng=key) where key is a PRNG key "
                "(e.g. from ember.random.key).")
        if mode != "train":
            return inputs
        keep = random.bernoulli(rng, rate, inputs.shape)
        return jnp.where(keep, inputs / rate, 0)

    return _no_params, apply_fun


# ---------------------------------------------------------------------------- combinators

def _layer_keys(rng: Any, n: int) -> Sequence[Any]:
    return random.split(rng, n) if rng is not None else (None,) * n


def serial(*layers: Layer) -> Layer:
    """Composes layers in sequence.

    Args:
        *layers: ``(init_fun, apply_fun)`` pairs.

    Returns:
        An ``(init_fun, apply_fun)`` pair whose params are the list of the layers' params;
        an ``rng=`` key given to ``apply_fun`` is split among the layers.

    Example:
        >>> init_fun, apply_fun = serial(Dense(4), Relu)
        >>> init_fun(random.PRNGKey(0), (2, 3))[0]
        (2, 4)
    """
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng, input_shape):
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, layer_params = init(layer_rng, input_shape)
            params.append(layer_params)
        return input_shape, params

    def apply_fun(params, inputs, **kwargs):
        keys = _layer_keys(kwargs.pop("rng", None), len(apply_funs))
        for fun, layer_params, key in zip(apply_funs, params, keys):
            inputs = fun(layer_params, inputs, rng=key, **kwargs)
        return inputs

    return init_fun, apply_fun


def parallel(*layers: Layer) -> Layer:
    """Applies layers side by side to a sequence of inputs (often between FanOut and FanInSum).

    Args:
        *layers: ``(init_fun, apply_fun)`` pairs, one per input.

    Returns:
        An ``(init_fun, apply_fun)`` pair mapping a sequence of inputs to the list of the
        layers' outputs.

    Example:
        >>> init_fun, apply_fun = parallel(Dense(2), Identity)
        >>> init_fun(random.PRNGKey(0), [(1, 3), (1, 5)])[0]
        ((1, 2), (1, 5))
    """
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng, input_shape):
        keys = random.split(rng, len(init_funs))
        results = [init(key, shape) for init, key, shape in zip(init_funs, keys, input_shape)]
        shapes = tuple(shape for shape, _ in results)
        params = tuple(p for _, p in results)
        return shapes, params

    def apply_fun(params, inputs, **kwargs):
        keys = _layer_keys(kwargs.pop("rng", None), len(apply_funs))
        return [f(p, x, rng=k, **kwargs) for f, p, x, k in zip(apply_funs, params, inputs, keys)]

    return init_fun, apply_fun


def shape_dependent(make_layer: Callable[[Any], Layer]) -> Layer:
    """Delays building a layer until the input shape is known.

    Args:
        make_layer: maps an input shape to an ``(init_fun, apply_fun)`` pair.

    Returns:
        An ``(init_fun, apply_fun)`` pair.

    Example:
        >>> init_fun, apply_fun = shape_dependent(lambda shape: Dense(shape[-1]))
        >>> init_fun(random.PRNGKey(0), (2, 3))[0]
        (2, 3)
    """
    def init_fun(rng, input_shape):
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params, inputs, **kwargs):
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)

    return init_fun, apply_fun
