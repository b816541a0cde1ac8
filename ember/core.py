"""The tracing core: abstract values, primitives, traces and tracers.

One trace is *current* at a time (held per thread). ``Primitive.bind`` hands the primitive to
the current trace's ``process_primitive``. A transformation's trace knows its parent (the trace
that was current when it was made) and binds on the parent while processing, so nested
transformations compose without numbered levels. The eval trace at the bottom runs each
primitive eagerly through the handler the runtime installs.
"""

from __future__ import annotations

import collections
import math
import operator
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import dtypes
from ember.errors import (
    ConcretizationTypeError,
    TracerArrayConversionError,
    TracerBoolConversionError,
    TracerIntegerConversionError,
    UnexpectedTracerError,  # noqa: F401 - re-exported
)

# --------------------------------------------------------------------------- avals


class ShapedArray:
    """The abstract value of an array: shape, dtype and whether its type is weak.

    Example:
        >>> ShapedArray((2, 3), np.dtype("float32")).str_short()
        'f32[2,3]'
    """

    __slots__ = ("shape", "dtype", "weak_type", "_hash")

    def __init__(self, shape: Sequence[int], dtype: Any, weak_type: bool = False):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.weak_type = bool(weak_type)
        self._hash = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(math.prod(self.shape))

    def update(self, shape=None, dtype=None, weak_type=None) -> ShapedArray:
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type)

    def strip_weak_type(self) -> ShapedArray:
        return self if not self.weak_type else ShapedArray(self.shape, self.dtype)

    def str_short(self) -> str:
        return f"{dtypes.short_name(self.dtype)}[{','.join(str(d) for d in self.shape)}]"

    def __eq__(self, other) -> bool:
        return other is self or (type(other) is ShapedArray and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self) -> int:
        # (Cached: the jit fast path hashes the avals of every call's arguments.)
        h = self._hash
        if h is None:
            h = self._hash = hash((self.shape, self.dtype, self.weak_type))
        return h

    def _long(self) -> str:
        name = "float0" if self.dtype == dtypes.float0 else self.dtype.name  # (NumPy: "void")
        return f"{name}[{','.join(str(d) for d in self.shape)}]"

    def __repr__(self) -> str:  # as JAX: ShapedArray(float32[2,3], weak_type=True)
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self._long()}{weak})"

    def __str__(self) -> str:  # as JAX: float32[2,3], ~float32[] when weakly typed
        return ("~" if self.weak_type else "") + self._long()


def _scalar_aval(x) -> ShapedArray:
    return ShapedArray((), dtypes.dtype(x, canonicalize=True), dtypes.is_weakly_typed(x))


def _numpy_aval(x) -> ShapedArray:
    return ShapedArray(x.shape, dtypes.canonicalize_dtype(x.dtype))


# Maps Python types to functions giving their aval; the runtime registers ember.Array.
pytype_aval_mappings: dict[type, Callable[[Any], ShapedArray]] = {
    bool: _scalar_aval, int: _scalar_aval, float: _scalar_aval, complex: _scalar_aval,
    np.ndarray: _numpy_aval,
}
for _t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
           np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128,
           dtypes.bfloat16.type):
    pytype_aval_mappings[_t] = _numpy_aval


def _masked_aval(x) -> ShapedArray:
    # (Its mask would be dropped without a word: JAX refuses it too.)
    raise ValueError("numpy masked arrays are not supported as ember values; use "
                     "x.filled(value) or np.asarray(x) to choose what the masked elements are")


pytype_aval_mappings[np.ma.MaskedArray] = _masked_aval


def get_aval(x: Any) -> ShapedArray:
    """The abstract value of a tracer, array or scalar; TypeError for anything else."""
    if isinstance(x, Tracer):
        return x.aval
    handler = pytype_aval_mappings.get(type(x))
    if handler is not None:
        return handler(x)
    for t in type(x).__mro__[1:]:
        handler = pytype_aval_mappings.get(t)
        if handler is not None:
            return handler(x)
    raise TypeError(f"Value {x!r} of type {type(x).__name__} is not a valid ember type")


def is_array_like(x: Any) -> bool:
    if isinstance(x, Tracer):
        return True
    t = type(x)
    return t in pytype_aval_mappings or any(b in pytype_aval_mappings for b in t.__mro__[1:])


# --------------------------------------------------------------------------- primitives


class Primitive:
    """A named operation; its rules (impl, abstract eval, jvp, ...) are attached to it.

    Example:
        >>> sin_p = Primitive("sin")
        >>> sin_p.def_impl(np.sin)
        >>> sin_p.def_abstract_eval(lambda x: x)
    """

    multiple_results = False
    # Params the lowering rule never reads (callables such as a custom_vjp's ``fwd``): a key
    # for what the lowering produces may leave them out (``compiler.lowering_fingerprint``).
    lowering_ignores: tuple[str, ...] = ()
    # Params printed first, in this order (the rest follow sorted), like JAX's per-primitive
    # printing rules: pjit prints ``name`` before its ``jaxpr``.
    pp_param_order: tuple[str, ...] = ()
    # The param holding a sub-jaxpr whose inputs and outputs are the equation's operands and
    # results: its binders print with the same names (JAX's pjit printing rule).
    pp_aliased_jaxpr: str | None = None
    # The params as printed, where JAX's printing rule leaves some out (None: all of them).
    pp_params: Callable[[dict], dict] | None = None
    # Whether it must run even when its outputs are unused (host callbacks with effects):
    # DCE keeps it (``jaxpr.has_side_effect``).
    has_side_effect = False

    def __init__(self, name: str):
        self.name = name
        self.impl: Callable | None = None
        self.abstract_eval: Callable | None = None
        self.jvp: Callable | None = None
        self.transpose: Callable | None = None
        self.batch: Callable | None = None
        self.lowering: Callable | None = None
        if _made_before_seal is not None:
            _made_before_seal.append(self)

    def __repr__(self) -> str:
        return self.name

    def bind(self, *args, **params):
        return _ctx.trace.process_primitive(self, args, params)  # (current_trace(), inlined)

    def def_impl(self, impl: Callable) -> Callable:
        self.impl = impl
        return impl

    def def_abstract_eval(self, rule: Callable) -> Callable:
        self.abstract_eval = rule
        return rule

    def def_jvp(self, rule: Callable) -> Callable:
        self.jvp = rule
        return rule

    def def_transpose(self, rule: Callable) -> Callable:
        self.transpose = rule
        return rule

    def def_batching(self, rule: Callable) -> Callable:
        self.batch = rule
        return rule

    def def_lowering(self, rule: Callable) -> Callable:
        self.lowering = rule
        return rule


class MultipleResultsPrimitive(Primitive):
    multiple_results = True


_made_before_seal: list[Primitive] | None = []  # (None once sealed: later ones are not kept)
_builtin: dict[str, tuple[Primitive, Callable | None]] = {}


def seal_builtin_primitives() -> None:
    """Records the primitives made so far (``import ember`` calls it once at its end) with
    their lowering rules: ``is_builtin`` tells them from primitives made later, such as a
    user's, whose rules are code a cache key cannot vouch for. Names made twice are left out."""
    global _made_before_seal
    if _made_before_seal is None:
        return
    made = collections.Counter(p.name for p in _made_before_seal)
    _builtin.update((p.name, (p, p.lowering)) for p in _made_before_seal if made[p.name] == 1)
    _made_before_seal = None


def is_builtin(prim: Primitive) -> bool:
    """Whether ``prim`` is one of ember's own primitives with its own lowering rule."""
    entry = _builtin.get(prim.name)
    return entry is not None and entry[0] is prim and entry[1] is prim.lowering


# --------------------------------------------------------------------------- traces


class Trace:
    """Base of all traces; ``parent`` is the trace current when this one was created."""

    def __init__(self):
        self.parent: Trace | None = _ctx.trace
        self.alive = True

    def process_primitive(self, primitive: Primitive, args: Sequence[Any], params: dict):
        raise NotImplementedError

    def invalidate(self) -> None:
        self.alive = False

    def __repr__(self) -> str:
        return type(self).__name__


class EvalTrace(Trace):
    """The bottom trace: primitives run at once on concrete values."""

    def process_primitive(self, primitive, args, params):
        # The eager handler (ember.runtime.eager) raises UnexpectedTracerError for tracers
        # that outlived their transformation; checking here too would slow every eager op.
        if _eager_handler is None:  # pragma: no cover - set when ember is imported
            raise RuntimeError("ember runtime not initialized")
        return _eager_handler(primitive, args, params)


_eager_handler: Callable | None = None
_array_factory: Callable | None = None


def set_eager_handler(handler: Callable, array_factory: Callable) -> None:
    """Installs how primitives run eagerly and how concrete arrays are made (by the runtime)."""
    global _eager_handler, _array_factory
    _eager_handler = handler
    _array_factory = array_factory


def concrete_array(value: np.ndarray, aval: ShapedArray) -> Any:
    """A concrete device array (ember.Array) holding ``value`` with abstract value ``aval``."""
    return _array_factory(value, aval)


class _TraceContext(threading.local):
    def __init__(self):
        self.trace: Trace = EvalTrace.__new__(EvalTrace)
        self.trace.parent = None
        self.trace.alive = True


_ctx = _TraceContext()


def current_trace() -> Trace:
    return _ctx.trace


class set_current_trace:  # noqa: N801 - used like a function: ``with set_current_trace(t):``
    """Makes ``trace`` current for the duration of the block. (A class, not a generator
    context manager: tracing enters one per staged primitive, and a generator's costs 4x.)"""

    __slots__ = ("_trace", "_previous")

    def __init__(self, trace: Trace):
        self._trace = trace

    def __enter__(self) -> Trace:
        self._previous = _ctx.trace
        _ctx.trace = self._trace
        return self._trace

    def __exit__(self, *exc_info) -> None:
        _ctx.trace = self._previous


def eval_trace() -> Trace:
    """The bottom trace (an EvalTrace) of this thread."""
    trace = _ctx.trace
    while trace.parent is not None:
        trace = trace.parent
    return trace


def is_eval_context() -> bool:
    return isinstance(_ctx.trace, EvalTrace)


# --------------------------------------------------------------------------- tracers


def _concrete_only_method(name: str, kind: str = "method") -> Callable:
    """A Tracer method (or property getter) for what only a concrete array has: it raises
    ConcretizationTypeError, as JAX's tracers do."""
    def method(self, *args, **kwargs):
        raise ConcretizationTypeError(self, f"The {name} {kind} was called on a traced array.")
    method.__name__ = name.rstrip("()")
    return method


class AvalProperties:
    """The array metadata read from ``self.aval``: shared by tracers and ``ember.Array``."""

    __slots__ = ()

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self.aval.dtype

    @property
    def ndim(self) -> int:
        return len(self.aval.shape)

    @property
    def size(self) -> int:
        return self.aval.size

    @property
    def weak_type(self) -> bool:
        return self.aval.weak_type

    @property
    def nbytes(self) -> int:
        return self.aval.size * self.aval.dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self.aval.dtype.itemsize


class Tracer(AvalProperties):
    """A value being traced; operators are installed by ember.numpy at import."""

    __slots__ = ("_trace", "__weakref__")
    __array_priority__ = 1000

    def __init__(self, trace: Trace):
        self._trace = trace

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    def to_concrete_value(self):
        """A concrete value behind this tracer when there is one (JVP primals), else None."""
        return None

    @property
    def sharding(self):
        raise AttributeError(f"The 'sharding' attribute is not available on traced array with "
                             f"shape {self.aval._long()}. To query sharding information on "
                             "tracers, use `jax.typeof(x)`.")

    # The conversions check as JAX's do: a concrete value converts; otherwise the shape is
    # checked (the NumPy error) before the tracer error. ``float`` and ``complex`` never use
    # a concrete value (JAX 0.10 raises for them even under ``grad``).
    def __bool__(self):
        value = self.to_concrete_value()
        if value is not None:
            return bool(value)
        if self.size == 0:
            raise ValueError("The truth value of an empty array is ambiguous. Use "
                             "`array.size > 0` to check that an array is not empty.")
        if self.size > 1:
            raise ValueError("The truth value of an array with more than one element is "
                             "ambiguous. Use a.any() or a.all()")
        raise TracerBoolConversionError(self)

    def __int__(self):  # (JAX: a concretization error; ``__index__`` is the integer one)
        value = self.to_concrete_value()
        if value is not None:
            return int(value)
        self._check_scalar_conversion()
        raise ConcretizationTypeError(self, "The problem arose with the `int` function.")

    def __index__(self):
        value = self.to_concrete_value()
        if value is not None:
            return operator.index(value)
        if self.shape != () or not dtypes.is_integer(self.dtype):
            raise TypeError("Only integer scalar arrays can be converted to a scalar index.")
        raise TracerIntegerConversionError(self)

    def __float__(self):
        self._check_scalar_conversion()
        raise ConcretizationTypeError(self, "The problem arose with the `float` function.")

    def __complex__(self):
        self._check_scalar_conversion()
        raise ConcretizationTypeError(self, "The problem arose with the `complex` function.")

    def _check_scalar_conversion(self) -> None:
        if self.ndim:
            raise TypeError(f"Only scalar arrays can be converted to Python scalars; got "
                            f"ndim={self.ndim}")

    def __array__(self, dtype=None, copy=None):
        raise TracerArrayConversionError(self)

    def __hash__(self):
        raise TypeError(f"unhashable type: {type(self).__name__} (traced arrays are not hashable)")

    def __setitem__(self, idx, value):
        raise TypeError(
            f"'{type(self).__name__}' object does not support item assignment. JAX arrays are "
            "immutable. Instead of ``x[idx] = y``, use ``x = x.at[idx].set(y)`` or another "
            ".at[] method: https://docs.jax.dev/en/latest/_autosummary/jax.numpy.ndarray.at.html")

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __reversed__(self):
        return iter(self[::-1])

    def __repr__(self) -> str:
        return f"Traced<{self.aval.str_short()}>with<{self._trace!r}>"

    def item(self, *args):
        value = self.to_concrete_value()
        if value is None:
            raise ConcretizationTypeError(self, "The item() method was called on a traced "
                                                "array.")
        return np.asarray(value).item(*args)

    # What only a concrete array has raises as in JAX (see ``_concrete_only`` below).
    tolist = _concrete_only_method("tolist()")
    tobytes = _concrete_only_method("tobytes()")
    devices = _concrete_only_method("devices()")
    delete = _concrete_only_method("delete()")
    is_deleted = _concrete_only_method("is_deleted()")
    addressable_data = _concrete_only_method("addressable_data()")
    unsafe_buffer_pointer = _concrete_only_method("unsafe_buffer_pointer()")
    __dlpack__ = _concrete_only_method("__dlpack__()")
    is_fully_replicated = property(_concrete_only_method("is_fully_replicated", "property"))
    is_fully_addressable = property(_concrete_only_method("is_fully_addressable", "property"))

    def __reduce__(self):
        raise ConcretizationTypeError(self, "The error occurred in the __reduce__ method, "
                                            "which may indicate an attempt to serialize/pickle "
                                            "a traced value.")


def concrete_or_error(value: Any, context: str = "") -> Any:
    """Returns a concrete value for ``value`` or raises ConcretizationTypeError.

    Used where a Python value is needed, e.g. a shape or an axis passed as an array.
    """
    if isinstance(value, Tracer):
        concrete = value.to_concrete_value()
        if concrete is None:
            raise ConcretizationTypeError(value, context)
        return concrete
    return value


def valid_jaxtype(x: Any) -> bool:
    try:
        get_aval(x)
    except TypeError:
        return False
    return True
