"""``pmap`` on this single-device runtime: a compiled ``vmap`` over the mapped axis.

Each "device" of the map is one slice of the batch: the collectives of ``ember.lax``
(``psum``, ``all_gather``, ``axis_index``, ...) see pmap's ``axis_name`` as they see vmap's.
As in JAX, the mapped axis may not be larger than the number of devices (one here).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ember import _pytree, core
from ember._vmap_api import _broadcast_prefix, vmap
from ember.api import jit

__all__ = ["pmap"]


def _as_tuple(x: int | Iterable[int], what: str) -> tuple[int, ...]:
    if isinstance(x, int):
        return (x,)
    try:
        return tuple(int(i) for i in x)
    except TypeError:
        raise TypeError(f"pmap: {what} must be an int or a sequence of ints, got {x!r}") from None


def pmap(fun: Callable, axis_name: Any = None, *, in_axes: Any = 0, out_axes: Any = 0,
         static_broadcasted_argnums: int | Iterable[int] = (),
         devices: Sequence[Any] | None = None, backend: str | None = None,
         axis_size: int | None = None, donate_argnums: int | Iterable[int] = ()) -> Callable:
    """Maps ``fun`` over the leading axis (or ``in_axes``) of its arguments, one slice per
    device, compiled once.

    Args:
        fun: the function; it sees one slice of each mapped argument.
        axis_name: a name for the mapped axis, for collectives (``lax.psum(x, name)``).
        in_axes: as in ``vmap`` (ints or None, a prefix of the positional arguments).
        out_axes: as in ``vmap``.
        static_broadcasted_argnums: positional arguments passed whole as Python values
            (hashable); a new value compiles again.
        devices: the devices to map over (at most ``local_device_count()`` of them).
        backend: accepted for compatibility (the default backend runs the map).
        axis_size: the size of the mapped axis (needed when ``in_axes`` maps nothing).
        donate_argnums: accepted for compatibility (nothing is donated).

    Returns:
        The mapped function; its outputs are ember Arrays.

    Raises:
        ValueError: when the mapped axis is larger than the number of devices, or no
            argument is mapped.

    Example:
        >>> f = ember.pmap(lambda x: x / lax.psum(x, "i"), axis_name="i")
        >>> f(jnp.ones((1, 3)))
        Array([[1., 1., 1.]], dtype=float32)
    """
    if not callable(fun):
        raise TypeError(f"pmap: expected a callable, got {type(fun).__name__}")
    static = _as_tuple(static_broadcasted_argnums, "static_broadcasted_argnums")
    _as_tuple(donate_argnums, "donate_argnums")
    if devices is not None:
        devices = list(devices)
        if not devices:
            raise ValueError("pmap: devices must not be empty")
    compiled: dict[Any, Callable] = {}

    @functools.wraps(fun)
    def pmap_f(*args: Any, **kwargs: Any) -> Any:
        nargs = len(args)
        st = tuple(i % nargs if -nargs <= i < nargs else i for i in static)
        for i in st:
            if not 0 <= i < nargs:
                raise ValueError(f"pmap: static_broadcasted_argnums {static_broadcasted_argnums}"
                                 f" out of range for {nargs} positional arguments")
        dyn = [a for i, a in enumerate(args) if i not in st]
        spec = in_axes
        if isinstance(in_axes, (list, tuple)) and st:
            if len(in_axes) == nargs:
                spec = type(in_axes)(a for i, a in enumerate(in_axes) if i not in st)
        spec = tuple(spec) if isinstance(spec, list) else spec
        leaves = _pytree.tree_leaves(tuple(dyn))
        axes = ([spec] * len(leaves) if spec is None or isinstance(spec, int)
                else _broadcast_prefix(spec, tuple(dyn), "in_axes"))
        sizes = []
        for x, a in zip(leaves + _pytree.tree_leaves(kwargs),
                        axes + [0] * len(_pytree.tree_leaves(kwargs))):
            shape = core.get_aval(x).shape
            if a is not None and -len(shape) <= a < len(shape):
                sizes.append(shape[a])
        if not sizes:
            raise ValueError("pmap requires at least one argument with a mapped axis.")
        size = axis_size if axis_size is not None else sizes[0]
        from ember.runtime.topology import local_device_count
        available = len(devices) if devices is not None else local_device_count()
        if size > available:
            raise ValueError(
                f"compiling computation that requires {size} logical devices, but only "
                f"{available} XLA devices are available (num_replicas={size})")
        static_vals = tuple(args[i] for i in st)
        try:
            key = (static_vals, st, nargs)
            hash(key)
        except TypeError:
            raise ValueError("pmap: the arguments in static_broadcasted_argnums must be "
                             "hashable") from None
        f = compiled.get(key)
        if f is None:
            def dyn_fun(*d: Any, **kw: Any) -> Any:
                it = iter(d)
                full = [args_i if i in st else next(it)
                        for i, args_i in enumerate(_placeholders(nargs, st, static_vals))]
                return fun(*full, **kw)
            f = jit(_unreplicated(vmap(dyn_fun, in_axes=spec, out_axes=_none_to_zero(out_axes),
                                       axis_name=axis_name, axis_size=axis_size), out_axes))
            compiled[key] = f
        return f(*dyn, **kwargs)

    return pmap_f


def _none_to_zero(out_axes: Any) -> Any:
    return _pytree.tree_map(lambda a: 0 if a is None else a, out_axes,
                              is_leaf=lambda a: a is None)


def _unreplicated(f: Callable, out_axes: Any) -> Callable:
    # out_axes=None: the value of the first device (it is the same on every device).
    def g(*args: Any, **kwargs: Any) -> Any:
        out = f(*args, **kwargs)
        leaves, tree = _pytree.tree_flatten(out)
        axes = _broadcast_prefix(out_axes, out, "out_axes")
        return _pytree.tree_unflatten(tree, [x[0] if a is None else x
                                               for x, a in zip(leaves, axes)])
    return g


def _placeholders(nargs: int, st: tuple[int, ...], static_vals: tuple) -> list:
    # The static values at their positions; the others are filled from the dynamic ones.
    vals = dict(zip(st, static_vals))
    return [vals.get(i) for i in range(nargs)]

