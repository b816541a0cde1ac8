"""Installs operators and NumPy-style methods on ember.Array and on tracers.

Both concrete arrays and tracers forward ``x + y``, ``x.sum()``, ``x[i]``, ``x.at[i].set(v)``
... to the ember.numpy functions, so the same user code runs eagerly and under tracing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import core
from ember.core import Tracer
from ember.numpy._fastpath import operator_method
from ember.numpy._util import check_arraylike
from ember.runtime.array import Array

# operator -> (numpy function name, swap arguments)
_BINARY_OPERATORS = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "power", "matmul": "matmul",
    "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
    "lshift": "left_shift", "rshift": "right_shift",
}
_COMPARISONS = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
                "gt": "greater", "ge": "greater_equal"}
_UNARY_OPERATORS = {"neg": "negative", "pos": "positive", "abs": "abs", "invert": "invert"}

# method name -> numpy function name (called as fn(self, *args, **kwargs))
_METHODS = {
    "sum": "sum", "mean": "mean", "max": "max", "min": "min", "prod": "prod",
    "argmax": "argmax", "argmin": "argmin", "all": "all", "any": "any", "std": "std",
    "var": "var", "cumsum": "cumsum", "cumprod": "cumprod", "clip": "clip", "round": "round",
    "dot": "dot", "ravel": "ravel", "flatten": "ravel", "squeeze": "squeeze",
    "swapaxes": "swapaxes", "take": "take", "repeat": "repeat", "sort": "sort",
    "argsort": "argsort", "nonzero": "nonzero", "conj": "conjugate", "conjugate": "conjugate",
    "diagonal": "diagonal", "trace": "trace", "ptp": "ptp", "searchsorted": "searchsorted",
    "argpartition": "argpartition",
}


_SYMBOLS = {
    "add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
    "pow": "**", "matmul": "@", "and": "&", "or": "|", "xor": "^", "lshift": "<<",
    "rshift": ">>", "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
}

# Operand types that never defer (checked first: the common case costs one set lookup).
_OPERAND_TYPES = frozenset((Array, int, float, complex, bool))
# Operand types refused outright, as in JAX: ``x == [1, 2]`` raises instead of being False,
# ``x + [1]`` instead of looking like concatenation (other operators just defer). Exact
# types, so a NamedTuple that defines the operator still gets its turn.
_REJECTED_TYPES = {"eq": frozenset((dict, list, set, tuple)),
                   "ne": frozenset((dict, list, set, tuple)),
                   "add": frozenset((list, tuple)), "mul": frozenset((list, tuple))}


def _defer(other: Any) -> bool:
    return not (isinstance(other, Tracer) or core.is_array_like(other))


def _binary_method(fn: Any, reflected: bool, op: str):
    symbol, rejected = _SYMBOLS[op], _REJECTED_TYPES.get(op, frozenset())

    def other_operand(self, other):
        # An object with ``__jax_array__`` takes part as that array (as in JAX); JAX's refused
        # types raise; anything else defers to the other operand's method.
        convert = getattr(other, "__jax_array__", None)
        if convert is not None:
            other = convert()
            return fn(other, self) if reflected else fn(self, other)
        if type(other) in rejected:
            left, right = (other, self) if reflected else (self, other)
            raise TypeError(f"unsupported operand type(s) for {symbol}: "
                            f"{type(left).__name__!r} and {type(right).__name__!r}")
        return NotImplemented

    if reflected:
        def method(self, other):
            if type(other) not in _OPERAND_TYPES and _defer(other):
                return other_operand(self, other)
            return fn(other, self)
    else:
        def method(self, other):
            if type(other) not in _OPERAND_TYPES and _defer(other):
                return other_operand(self, other)
            return fn(self, other)
    return method


def _unary_method(fn: Any):
    def method(self):
        return fn(self)
    return method


def _forwarding_method(fn_name: str):
    def method(self, *args, **kwargs):
        return getattr(_jnp, fn_name)(self, *args, **kwargs)
    method.__name__ = fn_name
    return method


def _reshape(self, *shape, order="C"):
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = shape[0]
    return _jnp.reshape(self, shape, order=order)


def _transpose(self, *axes):
    if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], int)):
        axes = axes[0]
    return _jnp.transpose(self, axes or None)


def _astype(self, dtype, copy=False, device=None):
    return _jnp.astype(self, dtype, copy=copy, device=device)


def _view(self, dtype=None, type=None):  # noqa: A002 - NumPy's name
    """The array's bits read as ``dtype`` (a bitcast; NumPy's ``ndarray.view``): the last
    axis shrinks or grows when the item size changes; bool counts as one byte, a complex
    number as its real and imaginary parts."""
    if type is not None:
        raise NotImplementedError("view: the type argument is not supported")
    if dtype is None:
        return self
    target = np.dtype(dtype)
    source = np.dtype(self.dtype)
    if self.ndim == 0:
        if target.itemsize != source.itemsize:
            raise ValueError("view: a 0-d array can only be viewed as a dtype of its item size")
        return _view(self.reshape(1), target).reshape(())
    if self.shape[-1] * source.itemsize % target.itemsize:
        raise ValueError(f"view: the last axis ({self.shape[-1]} x {source.itemsize} bytes) is "
                         f"not a multiple of {target} ({target.itemsize} bytes)")
    if source == target:
        return self
    if source == np.bool_:
        return _view(self.astype(np.uint8), target)
    if source.kind == "c":  # (interleaved real and imaginary parts, as in memory)
        parts = _jnp.stack([_jnp.real(self), _jnp.imag(self)], axis=-1)
        return _view(parts.reshape(*self.shape[:-1], 2 * self.shape[-1]), target)
    if target == np.bool_:
        return _view(self, np.uint8) != 0
    if target.kind == "c":
        parts = _view(self, np.dtype(f"f{target.itemsize // 2}"))
        pairs = parts.reshape(*parts.shape[:-1], parts.shape[-1] // 2, 2)
        return _jnp.asarray(pairs[..., 0] + 1j * pairs[..., 1], target)
    from ember import lax
    if target.itemsize == source.itemsize:
        return lax.bitcast_convert_type(self, target)
    if target.itemsize < source.itemsize:
        out = lax.bitcast_convert_type(self, target)
        return out.reshape(*self.shape[:-1], self.shape[-1] * out.shape[-1])
    ratio = target.itemsize // source.itemsize
    grouped = self.reshape(*self.shape[:-1], self.shape[-1] // ratio, ratio)
    return lax.bitcast_convert_type(grouped, target)


def _contains(self, other):
    # As JAX (departing from NumPy's oddities): a 1-d array and a scalar query.
    if other is None or isinstance(other, str):
        raise TypeError(f"Array.__contains__: unsupported operand type {type(other)}.")
    check_arraylike("Array.__contains__", other)
    query = _jnp.asarray(other)
    if self.ndim != 1:
        raise ValueError(f"Array.__contains__: search array must be one-dimensional, got "
                         f"arr.shape={self.shape}.")
    if query.ndim != 0:
        raise ValueError(f"Array.__contains__: query value must be a scalar, got "
                         f"query.shape={query.shape}")
    return _jnp.any(self == query)


def _flat(self):
    raise NotImplementedError("JAX Arrays do not implement the arr.flat property: consider "
                              "arr.flatten() instead.")


def _choose(self, choices, out=None, mode="raise"):
    return _jnp.choose(self, choices, out=out, mode=mode)


def _array_namespace(self, *, api_version=None):
    if api_version is not None and api_version != "2024.12":
        raise ValueError(f"api_version={api_version!r} is not available; available versions "
                         f"are: ['2024.12']")
    return _jnp


def _byteswap(self, inplace=False):
    """Each element's bytes reversed (little- and big-endian exchanged), in the same dtype."""
    if inplace:
        raise ValueError("byteswap: inplace=True is not supported (arrays are immutable)")
    from ember import lax
    if self.dtype.kind == "c":
        return lax.complex(_byteswap(self.real), _byteswap(self.imag))
    if self.dtype.itemsize == 1:
        return _jnp.copy(self)
    swapped = lax.rev(lax.bitcast_convert_type(self, np.uint8), (self.ndim,))
    return lax.bitcast_convert_type(swapped, self.dtype)


def _to_device(self, device, *, stream=None):
    if stream is not None:
        raise NotImplementedError("to_device: the stream argument is not supported")
    from ember.runtime.array import device_put
    return device_put(self, device)


def _compress(self, condition, axis=None, *, out=None, size=None, fill_value=0):
    return _jnp.compress(condition, self, axis, out=out, size=size, fill_value=fill_value)


def _builtin_round(self, ndigits=None):
    # As JAX: ``round(x)`` rounds half to even into the default integer type (as a float's
    # ``round`` returns an int); ``round(x, n)`` keeps the dtype.
    out = _jnp.round(self, decimals=ndigits or 0)
    return out.astype(int) if ndigits is None else out


_jnp: Any = None


def install(jnp_module: Any) -> None:
    """Sets the operators and methods on Array and Tracer, forwarding to ``jnp_module``."""
    global _jnp
    _jnp = jnp_module
    for cls in (Array, Tracer):
        for op, fn_name in _BINARY_OPERATORS.items():
            fn = getattr(jnp_module, fn_name)
            for name, reflected in ((f"__{op}__", False), (f"__r{op}__", True)):
                method = _binary_method(fn, reflected, op)
                if cls is Array:  # (tracers never take the eager fast path)
                    method = operator_method(fn, method, reflected)
                setattr(cls, name, method)
        for op, fn_name in _COMPARISONS.items():
            fn = getattr(jnp_module, fn_name)
            method = _binary_method(fn, False, op)
            setattr(cls, f"__{op}__",
                    operator_method(fn, method, False) if cls is Array else method)
        for op, fn_name in _UNARY_OPERATORS.items():
            setattr(cls, f"__{op}__", _unary_method(getattr(jnp_module, fn_name)))
        for name, fn_name in _METHODS.items():
            setattr(cls, name, _forwarding_method(fn_name))
        cls.reshape = _reshape
        cls.transpose = _transpose
        cls.astype = _astype
        cls.__round__ = _builtin_round
        cls.view = _view
        cls.compress = _compress
        cls.choose = _choose
        cls.byteswap = _byteswap
        cls.to_device = _to_device
        cls.__contains__ = _contains
        cls.__array_namespace__ = _array_namespace
        cls.flat = property(_flat)
        cls.T = property(lambda self: _jnp.transpose(self))
        cls.mT = property(lambda self: _jnp.swapaxes(self, -1, -2))
        cls.real = property(lambda self: _jnp.real(self))
        cls.imag = property(lambda self: _jnp.imag(self))
        cls.__getitem__ = lambda self, idx: _jnp._getitem(self, idx)
        cls.at = property(lambda self: _jnp._IndexUpdateHelper(self))
        cls.__divmod__ = lambda self, other: _jnp.divmod(self, other)
        cls.__rdivmod__ = lambda self, other: _jnp.divmod(other, self)
    # (A concrete array copies its buffer; a tracer's copy is jnp.copy, as in JAX.)
    Tracer.copy = Tracer.__copy__ = _forwarding_method("copy")
    Tracer.__deepcopy__ = lambda self, memo: _jnp.copy(self)
    # Comparison operators make Array unhashable unless __hash__ is kept explicit.
    Array.__hash__ = Array.__dict__.get("__hash__")
    Tracer.__hash__ = Tracer.__dict__.get("__hash__")
