"""Host callbacks: Python functions called from traced and compiled programs.

Three primitives, with JAX's names and rules:

- ``pure_callback``: a pure function of its operands giving results of declared types.
  Dropped when its results are unused; not differentiable (a ValueError, as in JAX: wrap it
  in ``custom_jvp``); under vmap it follows its ``vmap_method``.
- ``io_callback``: the same with a side effect: never dropped, merged or differentiated;
  under vmap it runs once per batch element (not when ``ordered``).
- ``debug_callback``: a side effect without results (``ember.debug.print`` and
  ``ember.debug.callback``). Under jvp it sees the primals, under vmap it runs once per
  batch element, and it has no transpose (it contributes nothing to a gradient).

Eagerly each calls its function at once. Under jit each lowers to a ``custom_call`` of
``ember.host_callback`` (``compiler.host_callbacks``), side-effecting except for
``pure_callback``, which the CPU backend runs as a library step. The function gets ember
Arrays (JAX gives its own arrays) and its results are checked against the declared types.

Example:
    >>> f = lambda x: ember.pure_callback(np.sin, jax.ShapeDtypeStruct((3,), jnp.float32), x)
    >>> ember.jit(f)(jnp.zeros(3))
    Array([0., 0., 0.], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import _pytree, core, dtypes
from ember.compiler import host_callbacks
from ember.compiler.hlo import Shape
from ember.errors import JaxRuntimeError
from ember.lax import base, batch_util
from ember.lax.shape import broadcast

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                "legacy_vectorized", None)


class FlatCallback:
    """``fn`` called with flat leaves: rebuilds ``(args, kwargs)`` from ``in_tree``, putting
    the static (non-array) leaves back at their indices, and returns the result's leaves.

    Equal when built from the same function, tree and static leaves, so a retrace gives the
    same params (and the same compiled program)."""

    __slots__ = ("fn", "in_tree", "static", "_key")

    def __init__(self, fn: Callable, in_tree: Any, static: Sequence[tuple[int, Any]] = ()):
        self.fn, self.in_tree, self.static = fn, in_tree, tuple(static)
        self._key = (_hashable(fn), in_tree, tuple((i, _hashable(v)) for i, v in self.static))

    def __call__(self, *leaves: Any) -> list:
        leaves = list(leaves)
        for i, value in self.static:
            leaves.insert(i, value)
        args, kwargs = _pytree.tree_unflatten(self.in_tree, leaves)
        return _pytree.tree_leaves(self.fn(*args, **kwargs))

    def __eq__(self, other: Any) -> bool:
        return type(other) is FlatCallback and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return getattr(self.fn, "__qualname__", repr(self.fn))


def _hashable(value: Any) -> Any:
    try:
        hash(value)
        return value
    except TypeError:
        return ("id", id(value))


def flatten_callback(fn: Callable, args: tuple, kwargs: dict, name: str
                     ) -> tuple[FlatCallback, list]:
    """``fn`` as a ``FlatCallback`` of the array leaves of ``(args, kwargs)``, and those
    leaves; other leaves (strings, functions...) stay static, as in JAX."""
    if not callable(fn):
        raise TypeError(f"{name}: the callback must be callable, got {type(fn).__name__}")
    leaves, in_tree = _pytree.tree_flatten((args, kwargs))
    static, dynamic = [], []
    for i, leaf in enumerate(leaves):
        if core.is_array_like(leaf):
            dynamic.append(leaf)
        else:
            static.append((i, leaf))
    return FlatCallback(fn, in_tree, static), dynamic


def result_avals(result_shape_dtypes: Any, name: str) -> tuple[list, Any]:
    """The flat ``ShapedArray``s of a pytree of objects with ``shape`` and ``dtype``."""
    leaves, tree = _pytree.tree_flatten(result_shape_dtypes)
    avals = []
    for leaf in leaves:
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            raise TypeError(f"{name}: result_shape_dtypes leaves need .shape and .dtype "
                            f"(jax.ShapeDtypeStruct), got {type(leaf).__name__}")
        dtype = np.dtype(leaf.dtype)
        if dtypes.canonicalize_dtype(dtype) != dtype:
            raise ValueError(f"{name}: result_shape_dtypes cannot specify 64-bit types when "
                             "`jax_enable_x64` is disabled")
        shape = base.check_shape(name, "result_shape_dtypes", leaf.shape)
        avals.append(core.ShapedArray(shape, dtype))
    return avals, tree


def _as_arrays(values: Sequence[Any]) -> list:
    # (A writeable NumPy array is copied: the read-only Array made of it must not freeze a
    # caller's array, nor see later writes to it.)
    return [core.concrete_array(np.array(v) if isinstance(v, np.ndarray) and v.flags.writeable
                                else np.asarray(v), core.get_aval(v)) for v in values]


def _checked_results(results: Sequence[Any], avals: Sequence[core.ShapedArray], name: str
                     ) -> list[np.ndarray]:
    results = list(results)
    if len(results) != len(avals):
        raise JaxRuntimeError(f"{name}: the callback returned {len(results)} arrays, "
                           f"result_shape_dtypes declares {len(avals)}")
    out = []
    for i, (value, aval) in enumerate(zip(results, avals)):
        value = np.asarray(value)
        try:
            dtype = dtypes.canonicalize_dtype(value.dtype)
        except TypeError:  # (strings, objects: reported as a wrong dtype)
            dtype = value.dtype
        if dtype != aval.dtype:
            raise JaxRuntimeError(f"{name}: result {i} has dtype {value.dtype}, "
                               f"result_shape_dtypes declares {aval.dtype}")
        if value.shape != aval.shape:
            raise JaxRuntimeError(f"{name}: result {i} has shape {value.shape}, "
                               f"result_shape_dtypes declares {aval.shape}")
        out.append(np.asarray(value, aval.dtype))
    return out


class HostCall:
    """What a program calls: the callback on ember Arrays, its results checked and returned
    as NumPy arrays. Equal for equal callbacks and types (one registry number).

    A failure (the callback's exception, or results of the wrong types) is raised as a
    ``JaxRuntimeError`` caused by it, as JAX reports a failed program; ``wrap_errors=False``
    (a debug callback run eagerly) lets the callback's own exception through."""

    __slots__ = ("callback", "avals", "name", "wrap_errors")

    def __init__(self, callback: Callable, avals: Sequence[core.ShapedArray], name: str,
                 wrap_errors: bool = True):
        self.callback, self.avals, self.name = callback, tuple(avals), name
        self.wrap_errors = wrap_errors

    def __call__(self, *values: Any) -> list[np.ndarray]:
        try:
            results = self.callback(*_as_arrays(values))
        except Exception as e:
            if not self.wrap_errors:
                raise
            raise JaxRuntimeError(f"{self.name}: the callback raised "
                                  f"{type(e).__name__}: {e}") from e
        return _checked_results(results, self.avals, self.name)

    def _key(self) -> tuple:
        return (self.callback, self.avals, self.name, self.wrap_errors)

    def __eq__(self, other: Any) -> bool:
        return type(other) is HostCall and other._key() == self._key()

    def __hash__(self) -> int:
        return hash(self._key())


class Sequential:
    """``callback`` run once per batch element (batched operands are mapped along axis 0,
    others passed whole); results (of types ``avals``, one element's) stacked along axis 0.
    How vmap runs a callback that cannot see a batch: the loop runs on the host, inside one
    call. A batch of size 0 never calls it, as in JAX."""

    __slots__ = ("callback", "batched", "size", "avals")

    def __init__(self, callback: Callable, batched: Sequence[bool], size: int,
                 avals: Sequence[core.ShapedArray] = ()):
        self.callback, self.batched, self.size = callback, tuple(batched), size
        self.avals = tuple(avals)

    def __call__(self, *values: Any) -> list:
        rows = [self.callback(*[v[i] if b else v for v, b in zip(values, self.batched)])
                for i in range(self.size)]
        if not rows:
            return [np.zeros((0, *a.shape), a.dtype) for a in self.avals]
        return [np.stack([np.asarray(r[k]) for r in rows]) for k in range(len(rows[0]))]

    def __repr__(self) -> str:  # (as jaxprs print it)
        return f"sequential(size={self.size}, {self.callback!r})"

    def _key(self) -> tuple:
        return (self.callback, self.batched, self.size, self.avals)

    def __eq__(self, other: Any) -> bool:
        return type(other) is Sequential and other._key() == self._key()

    def __hash__(self) -> int:
        return hash(self._key())


def _lower_host_call(ctx, operands, call: Callable, side_effect: bool) -> list:
    shape = Shape.tuple([Shape(a.dtype, a.shape) for a in ctx.avals_out])
    out = ctx.b.op("custom_call", *operands, shape=shape,
                   call_target_name=host_callbacks.TARGET,
                   callback_id=host_callbacks.register(call), has_side_effect=side_effect)
    return [ctx.b.op("get_tuple_element", out, index=i) for i in range(len(ctx.avals_out))]


def _mapped_to_front(vals, dims) -> tuple[list, list[bool], int]:
    size = next(v.shape[d] for v, d in zip(vals, dims) if d is not None)
    moved = [v if d is None else batch_util.moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    return moved, [d is not None for d in dims], size


def _batched(avals: Sequence[core.ShapedArray], size: int) -> tuple:
    return tuple(core.ShapedArray((size, *a.shape), a.dtype) for a in avals)


# --------------------------------------------------------------------------- pure and io


def _define_result_callback(prim: core.Primitive, jvp_error: str, transpose_error: str) -> None:
    """The rules ``pure_callback`` and ``io_callback`` share (they differ in their batching
    and in whether they have a side effect): the impl runs the callback (a pure one without
    results is never called, as in JAX), abstract evaluation gives the declared types,
    lowering a host call, and differentiation raises JAX's ValueError."""
    name = prim.name

    def impl(*values, callback, result_avals, **_):
        if not result_avals and not prim.has_side_effect:
            return []
        return HostCall(callback, result_avals, name)(*values)

    def lowering(ctx, *operands, callback, result_avals, **_):
        return _lower_host_call(ctx, operands, HostCall(callback, result_avals, name),
                                side_effect=prim.has_side_effect)

    def jvp(primals, tangents, **params):
        raise ValueError(jvp_error)

    def transpose(cts, *args, **params):
        raise ValueError(transpose_error)

    prim.def_impl(impl)
    prim.def_abstract_eval(lambda *avals, result_avals, **_: list(result_avals))
    prim.def_lowering(lowering)
    prim.def_jvp(jvp)
    prim.def_transpose(transpose)


pure_callback_p = core.MultipleResultsPrimitive("pure_callback")
_define_result_callback(
    pure_callback_p,
    "Pure callbacks do not support JVP. Please use `jax.custom_jvp` to use callbacks while "
    "taking gradients.",
    "Pure callbacks do not support transpose. Please use `jax.custom_vjp` to use callbacks "
    "while taking gradients.")

io_callback_p = core.MultipleResultsPrimitive("io_callback")
io_callback_p.has_side_effect = True
_define_result_callback(io_callback_p, "IO callbacks do not support JVP.",
                        "IO callbacks do not support transpose.")


@pure_callback_p.def_batching
def _pure_callback_batch(vals, dims, *, callback, result_avals, vmap_method):
    moved, batched, size = _mapped_to_front(vals, dims)
    out_avals = _batched(result_avals, size)
    if vmap_method in ("sequential", "sequential_unrolled"):
        callback = Sequential(callback, batched, size, result_avals)
    elif vmap_method in ("expand_dims", "broadcast_all"):
        lead = size if vmap_method == "broadcast_all" else 1
        moved = [v if b else broadcast(v, (lead,)) for v, b in zip(moved, batched)]
    elif vmap_method != "legacy_vectorized":
        raise NotImplementedError(
            "vmap is only supported for the pure_callback primitive when vmap_method is one "
            "of 'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
            f"'legacy_vectorized'. Got vmap_method={vmap_method}.")
    outs = pure_callback_p.bind(*moved, callback=callback, result_avals=out_avals,
                                vmap_method=vmap_method)
    return outs, [0] * len(outs)


@io_callback_p.def_batching
def _io_callback_batch(vals, dims, *, callback, result_avals, ordered):
    if ordered:
        raise ValueError("Cannot `vmap` ordered IO callback.")
    moved, batched, size = _mapped_to_front(vals, dims)
    outs = io_callback_p.bind(*moved, callback=Sequential(callback, batched, size, result_avals),
                              result_avals=_batched(result_avals, size), ordered=False)
    return outs, [0] * len(outs)


# --------------------------------------------------------------------------- debug_callback

debug_callback_p = core.MultipleResultsPrimitive("debug_callback")
debug_callback_p.has_side_effect = True


class _Discarding:
    """``callback`` with its result dropped (a debug callback has none)."""

    __slots__ = ("callback",)

    def __init__(self, callback: Callable):
        self.callback = callback

    def __call__(self, *args: Any) -> tuple:
        self.callback(*args)
        return ()

    def __eq__(self, other: Any) -> bool:
        return type(other) is _Discarding and other.callback == self.callback

    def __hash__(self) -> int:
        return hash(("discarding", self.callback))


@debug_callback_p.def_impl
def _debug_callback_impl(*values, callback, ordered, partitioned):
    HostCall(_Discarding(callback), (), "debug_callback", wrap_errors=False)(*values)
    return []


@debug_callback_p.def_abstract_eval
def _debug_callback_abstract_eval(*avals, callback, ordered, partitioned):
    return []


@debug_callback_p.def_lowering
def _debug_callback_lowering(ctx, *operands, callback, ordered, partitioned):
    call = HostCall(_Discarding(callback), (), "debug_callback")
    return _lower_host_call(ctx, operands, call, side_effect=True)


@debug_callback_p.def_jvp
def _debug_callback_jvp(primals, tangents, **params):
    return debug_callback_p.bind(*primals, **params), []


@debug_callback_p.def_transpose
def _debug_callback_transpose(cts, *args, **params):
    return [None] * len(args)


@debug_callback_p.def_batching
def _debug_callback_batch(vals, dims, *, callback, **params):
    moved, batched, size = _mapped_to_front(vals, dims)
    return bind_debug_callback(moved, callback=Sequential(callback, batched, size),
                               **params), []


def bind_debug_callback(args: Sequence[Any], *, callback: Callable, ordered: bool,
                        partitioned: bool) -> list:
    """Stages a ``debug_callback`` of ``args``; eagerly, calls ``callback`` at once with the
    arrays as given, weak types included, as JAX does (its impl would see NumPy values)."""
    if isinstance(core.current_trace(), core.EvalTrace) and \
            not any(isinstance(a, core.Tracer) for a in args):
        HostCall(_Discarding(callback), (), "debug_callback", wrap_errors=False)(*args)
        return []
    return debug_callback_p.bind(*args, callback=callback, ordered=ordered,
                                 partitioned=partitioned)


# --------------------------------------------------------------------------- API

def pure_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any,
                  sharding: Any = None, vmap_method: str | None = None, **kwargs: Any) -> Any:
    """Calls a pure Python function from traced code; works under jit, vmap and grad (with
    ``custom_jvp``).

    ``callback(*args, **kwargs)`` gets ember Arrays and returns arrays matching
    ``result_shape_dtypes``. Being pure, it may be called more than once, or not at all when
    its results are unused.

    Args:
        callback: the function to call on the host.
        result_shape_dtypes: a pytree of objects with ``shape`` and ``dtype``
            (``ShapeDtypeStruct``) giving the results' types.
        *args: arguments of ``callback`` (array leaves are traced; others pass unchanged).
        sharding: accepted for compatibility (one device).
        vmap_method: how vmap calls it: ``"sequential"`` (once per batch element),
            ``"sequential_unrolled"`` (the same), ``"expand_dims"`` (once, unbatched
            arguments given a leading axis of size 1), ``"broadcast_all"`` (once, every
            argument with the full batch axis), ``"legacy_vectorized"`` (once, unbatched
            arguments as they are); None makes vmap raise NotImplementedError.
        **kwargs: keyword arguments of ``callback``.

    Returns:
        A pytree like ``result_shape_dtypes`` of arrays.

    Example:
        >>> out = jax.ShapeDtypeStruct((3,), jnp.float32)
        >>> ember.jit(lambda x: ember.pure_callback(np.cos, out, x))(jnp.zeros(3))
        Array([1., 1., 1.], dtype=float32)
    """
    del sharding
    if vmap_method not in VMAP_METHODS:
        raise ValueError(f"vmap_method must be on of the allowed methods {list(VMAP_METHODS)}, "
                         f"but got: {vmap_method}")
    avals, out_tree = result_avals(result_shape_dtypes, "pure_callback")
    flat, dynamic = _flatten_all(callback, args, kwargs, "pure_callback")
    outs = pure_callback_p.bind(*dynamic, callback=flat, result_avals=tuple(avals),
                                vmap_method=vmap_method)
    return _pytree.tree_unflatten(out_tree, list(outs))


def io_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any,
                sharding: Any = None, ordered: bool = False, **kwargs: Any) -> Any:
    """Calls a Python function with side effects from traced code (never dropped).

    Args:
        callback: the function to call on the host.
        result_shape_dtypes: a pytree of objects with ``shape`` and ``dtype`` (the results).
        *args: arguments of ``callback``.
        sharding: accepted for compatibility (one device).
        ordered: whether calls keep their program order (they always do here); an ordered
            callback cannot be vmapped.
        **kwargs: keyword arguments of ``callback``.

    Returns:
        A pytree like ``result_shape_dtypes`` of arrays.

    Example:
        >>> seen = []
        >>> log = lambda x: (seen.append(float(x)), np.float32(0))[1]
        >>> ember.jit(lambda x: io_callback(log, jax.ShapeDtypeStruct((), jnp.float32), x))(2.)
        Array(0., dtype=float32)
    """
    del sharding
    avals, out_tree = result_avals(result_shape_dtypes, "io_callback")
    flat, dynamic = _flatten_all(callback, args, kwargs, "io_callback")
    outs = io_callback_p.bind(*dynamic, callback=flat, result_avals=tuple(avals),
                              ordered=bool(ordered))
    return _pytree.tree_unflatten(out_tree, list(outs))


def _flatten_all(callback, args, kwargs, name) -> tuple[FlatCallback, list]:
    """Like ``flatten_callback``, but every leaf is an operand (pure and io callbacks take
    array arguments only, as in JAX)."""
    if not callable(callback):
        raise TypeError(f"{name}: the callback must be callable, got "
                        f"{type(callback).__name__}")
    leaves, in_tree = _pytree.tree_flatten((args, kwargs))
    leaves = [base.as_operand(x, name, f"argument leaf {i}") for i, x in enumerate(leaves)]
    return FlatCallback(callback, in_tree), leaves


__all__ = ["bind_debug_callback", "debug_callback_p", "io_callback", "io_callback_p",
           "pure_callback", "pure_callback_p"]
