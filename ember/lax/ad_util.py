"""Primitives autodiff itself needs: ``add_any`` (summing tangents) and ``stop_gradient``.

Importing this module also sets the hooks of ``ember.interpreters.ad``: ``zeros_like_aval``
(a zeros array of an abstract value, staged when a trace is active) and ``add_jaxvals``.

Example:
    >>> print(ember.make_jaxpr(lax.add_any)(1.0, 2.0))
    { lambda ; a:f32[] b:f32[]. let c:f32[] = add_any a b in (c,) }
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import _pytree, core, dtypes
from ember.core import ShapedArray
from ember.interpreters import ad
from ember.interpreters.batching import axis_size_of, not_mapped
from ember.lax import batch_util, elementwise, shape

# ---------------------------------------------------------------- add_any

add_any_p = core.Primitive("add_any")


@add_any_p.def_abstract_eval
def _add_any_abstract_eval(x: ShapedArray, y: ShapedArray) -> ShapedArray:
    if (x.shape, x.dtype) != (y.shape, y.dtype):
        raise TypeError(f"add_any: arguments must have equal types, got {x.str_short()} and "
                        f"{y.str_short()}")
    return ShapedArray(x.shape, x.dtype, x.weak_type and y.weak_type)


add_any_p.def_impl(lambda x, y: np.add(x, y, dtype=x.dtype))
add_any_p.def_lowering(lambda ctx, x, y: ctx.b.op("add", x, y))
ad.deflinear(add_any_p, lambda ct: [ct, ct])


@add_any_p.def_batching
def _add_any_batch(vals, dims):
    # Both operands have one shape, so they align once their batch dims agree: the other
    # operand moves (or, unmapped, is broadcast) to the first mapped operand's batch dim.
    (x, y), (dx, dy) = vals, dims
    if dx == dy:
        return add_any_p.bind(x, y), dx
    dst = dx if dx is not not_mapped else dy
    size = axis_size_of(vals, dims)
    return add_any_p.bind(batch_util.move_to(x, dx, dst, size),
                          batch_util.move_to(y, dy, dst, size)), dst


def add_any(x: Any, y: Any) -> Any:
    """``x + y`` for two tangents of one abstract value (JAX's ``add_any``).

    Example:
        >>> lax.add_any(jnp.ones(2), jnp.ones(2))
        Array([2., 2.], dtype=float32)
    """
    return add_any_p.bind(x, y)


def zeros_like_aval(aval: ShapedArray) -> Any:
    """Zeros of ``aval``'s shape, dtype and weak type (a NumPy float0 array for float0)."""
    if aval.dtype == dtypes.float0:
        return np.zeros(aval.shape, dtypes.float0)
    scalar = elementwise.convert_element_type(np.zeros((), aval.dtype), aval.dtype,
                                              aval.weak_type)
    return shape.broadcast(scalar, aval.shape)


ad.zeros_like_aval = zeros_like_aval
ad.add_jaxvals = add_any

# ---------------------------------------------------------------- stop_gradient

stop_gradient_p = core.Primitive("stop_gradient")
stop_gradient_p.def_impl(lambda x: x)
stop_gradient_p.def_abstract_eval(lambda x: x)
stop_gradient_p.def_lowering(lambda ctx, x: x)
ad.defjvp_zero(stop_gradient_p)
batch_util.defvectorized(stop_gradient_p)


def stop_gradient(x: Any) -> Any:
    """The identity on a pytree, with zero derivative: gradients do not flow through it.

    Every leaf becomes an array (of its canonical dtype), as in JAX.

    Example:
        >>> ember.grad(lambda x: x * lax.stop_gradient(x))(3.0)
        Array(3., dtype=float32, weak_type=True)
    """
    return _pytree.tree_map(stop_gradient_p.bind, x)


__all__ = ["add_any", "add_any_p", "stop_gradient", "stop_gradient_p", "zeros_like_aval"]
