"""Scalar types as callables (``jnp.float32(1.0)``), dtype helpers and numeric constants."""

from __future__ import annotations

import builtins
from typing import Any

import ml_dtypes
import numpy as np

from ember import core, dtypes
from ember.numpy.creation import asarray
from ember.runtime.array import Array

_bool = builtins.bool  # this module defines ``bool`` (= bool_) at its end


class _ScalarMeta(type):
    """Metaclass of the jnp scalar types: calling one makes an ember array of its dtype."""

    dtype: np.dtype

    def __hash__(cls) -> int:
        return hash(cls.dtype.type)

    def __eq__(cls, other: Any) -> bool:
        return cls is other or cls.dtype.type == other

    def __ne__(cls, other: Any) -> bool:
        return not cls == other

    def __call__(cls, x: Any = 0) -> Any:
        return asarray(x, dtype=cls.dtype)

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, cls.dtype.type)

    def __repr__(cls) -> str:
        return f"<class 'ember.numpy.{cls.__name__}'>"


def _make_scalar_type(np_type: Any, name: str | None = None) -> _ScalarMeta:
    dt = np.dtype(np_type)
    name = name or dt.name
    doc = (f"The {dt.name} scalar type: ``jnp.{name}(x)`` converts ``x`` to an array of dtype "
           f"{dt.name} (64-bit types become 32-bit unless x64 is enabled).\n\n"
           f"    Example:\n        >>> jnp.{name}(1).dtype\n"
           f"        dtype('{dtypes.canonicalize_dtype(dt).name}')\n")
    return _ScalarMeta(name, (object,), {"dtype": dt, "__doc__": doc})


bool_ = _make_scalar_type(np.bool_, "bool_")
int8 = _make_scalar_type(np.int8)
int16 = _make_scalar_type(np.int16)
int32 = _make_scalar_type(np.int32)
int64 = _make_scalar_type(np.int64)
uint8 = _make_scalar_type(np.uint8)
uint16 = _make_scalar_type(np.uint16)
uint32 = _make_scalar_type(np.uint32)
uint64 = _make_scalar_type(np.uint64)
float16 = _make_scalar_type(np.float16)
bfloat16 = _make_scalar_type(ml_dtypes.bfloat16, "bfloat16")
float32 = _make_scalar_type(np.float32)
float64 = _make_scalar_type(np.float64)
complex64 = _make_scalar_type(np.complex64)
complex128 = _make_scalar_type(np.complex128)

int_ = int64
uint = uint64
float_ = float64
complex_ = complex128
single = float32
double = float64
half = float16
csingle = complex64
cdouble = complex128

# NumPy's abstract scalar classes (for issubdtype).
generic = np.generic
number = np.number
integer = np.integer
signedinteger = np.signedinteger
unsignedinteger = np.unsignedinteger
inexact = np.inexact
floating = np.floating
complexfloating = np.complexfloating
character = np.character
flexible = np.flexible

dtype = np.dtype
ndarray = Array

pi = np.pi
e = np.e
inf = np.inf
nan = np.nan
euler_gamma = np.euler_gamma
newaxis = None


def _to_dtype_like(x: Any) -> Any:
    """jnp scalar types become their numpy dtypes; everything else passes through."""
    return x.dtype if isinstance(x, _ScalarMeta) else x


def _np_dtype(x: Any) -> np.dtype:
    if x in (bool, int, float, complex):  # (NumPy's types for them, as JAX's finfo/can_cast)
        return np.dtype(x)
    return np.dtype(dtypes.dtype(_to_dtype_like(x)))


def finfo(dtype: Any) -> Any:
    """Machine limits of a floating type (knows bfloat16).

    Example:
        >>> jnp.finfo(jnp.bfloat16).eps
        0.0078125
    """
    if type(dtype) in (bool, int, float, complex):  # (a value, not a type: as JAX/NumPy)
        raise TypeError(f"finfo: cannot interpret {dtype!r} as a data type")
    dt = _np_dtype(dtype)
    if not dtypes.is_inexact(dt):
        raise ValueError(f"finfo: data type {dt} is not inexact")
    return ml_dtypes.finfo(dt)


def iinfo(int_type: Any) -> Any:
    """Machine limits of an integer type.

    Example:
        >>> jnp.iinfo(jnp.int8).max
        127
    """
    # (A Python scalar value has NumPy's dtype for its type, as np.iinfo(1) is int64's.)
    dt = _np_dtype(type(int_type) if type(int_type) in (bool, int, float, complex)
                   else int_type)
    if not dtypes.is_integer(dt):
        raise ValueError(f"iinfo: invalid integer data type {dt}")
    return ml_dtypes.iinfo(dt)


def result_type(*args: Any) -> np.dtype:
    """The dtype JAX's promotion gives for arrays, dtypes and scalars together.

    Example:
        >>> jnp.result_type(jnp.int8, 1.0)
        dtype('float32')
    """
    return dtypes.result_type(*[_to_dtype_like(a) for a in args])


def promote_types(a: Any, b: Any) -> np.dtype:
    """The promoted type of two dtypes under JAX's lattice (no 64-bit canonicalization).

    Example:
        >>> jnp.promote_types(jnp.int8, jnp.uint8)
        dtype('int16')
    """
    def dtype_like(x):
        return x if isinstance(x, type) and x in (int, float, complex) else _to_dtype_like(x)

    return dtypes.promote_types(dtype_like(a), dtype_like(b))


def can_cast(from_: Any, to: Any, casting: str = "safe") -> bool:
    """Whether a cast between the dtypes can occur under ``casting`` (NumPy's rule).

    Example:
        >>> jnp.can_cast(jnp.int8, jnp.int32)
        True
    """
    if casting not in ("no", "equiv", "safe", "same_kind", "unsafe"):
        raise ValueError(f"can_cast: casting must be one of 'no', 'equiv', 'safe', "
                         f"'same_kind' or 'unsafe', got {casting!r}")
    if type(from_) in (int, float, complex):
        raise TypeError("can_cast() does not support Python ints, floats, and complex because "
                        "the result used to depend on the value.")
    return _bool(np.can_cast(_np_dtype(from_), _np_dtype(to), casting=casting))


def issubdtype(arg1: Any, arg2: Any) -> bool:
    """np.issubdtype that understands jnp scalar types and bfloat16.

    Example:
        >>> jnp.issubdtype(jnp.bfloat16, jnp.floating)
        True
    """
    arg1 = _to_dtype_like(arg1)
    if isinstance(getattr(arg1, "type", None), type) and issubclass(arg1.type, dtypes.extended):
        return dtypes.issubdtype(arg1, arg2)  # (a PRNG key dtype)
    if isinstance(getattr(arg2, "type", None), type) and issubclass(arg2.type, dtypes.extended):
        return False  # (only a key dtype is a key dtype)
    if isinstance(arg2, _ScalarMeta):
        arg2 = arg2.dtype.type
    elif isinstance(arg2, np.dtype):
        arg2 = arg2.type
    elif isinstance(arg2, str):
        arg2 = np.dtype(arg2).type
    if arg1 is None:
        return False
    try:
        d1 = np.dtype(dtypes.dtype(arg1)) if not isinstance(arg1, type) or \
            issubclass(arg1, np.generic) or hasattr(arg1, "dtype") else np.dtype(arg1)
    except TypeError:
        # An abstract class (np.floating, np.integer...) is a kind of dtypes, not a dtype:
        # NumPy's class hierarchy answers.
        abstract = isinstance(arg1, type) and issubclass(arg1, np.generic)
        return abstract and isinstance(arg2, type) and bool(np.issubdtype(arg1, arg2))
    if d1 == dtypes.bfloat16:
        return arg2 in (np.floating, np.inexact, np.number, np.generic, dtypes.bfloat16.type)
    if arg2 is dtypes.bfloat16.type:
        return False
    return _bool(np.issubdtype(d1, arg2))


_ISDTYPE_KINDS = {
    "bool": lambda d: d == dtypes.bool_,
    "signed integer": lambda d: dtypes.is_integer(d) and not dtypes.is_unsigned(d),
    "unsigned integer": lambda d: dtypes.is_unsigned(d),
    "integral": lambda d: dtypes.is_integer(d),
    "real floating": lambda d: dtypes.is_float(d),
    "complex floating": lambda d: dtypes.is_complex(d),
    "numeric": lambda d: d != dtypes.bool_,
}


def isdtype(dtype: Any, kind: Any) -> bool:
    """Array-API dtype test: ``kind`` is a dtype, a kind name or a tuple of them.

    Example:
        >>> jnp.isdtype(jnp.float32, 'real floating')
        True
    """
    dt = np.dtype(_to_dtype_like(dtype))
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str):
            if k not in _ISDTYPE_KINDS:
                raise ValueError(f"isdtype: unknown kind {k!r}; expected one of "
                                 f"{sorted(_ISDTYPE_KINDS)}")
            if _ISDTYPE_KINDS[k](dt):
                return True
        elif dt == np.dtype(_to_dtype_like(k)):
            return True
    return False


def _dtype_of(x: Any) -> np.dtype:
    if isinstance(x, core.Tracer) or core.is_array_like(x):
        return core.get_aval(x).dtype
    return np.asarray(x).dtype


def iscomplexobj(x: Any) -> bool:
    """True when ``x`` has a complex dtype.

    Example:
        >>> jnp.iscomplexobj(jnp.ones(2))
        False
    """
    if x is None:
        return False
    return dtypes.is_complex(_dtype_of(x))


def isrealobj(x: Any) -> bool:
    """True when ``x`` does not have a complex dtype.

    Example:
        >>> jnp.isrealobj(jnp.ones(2))
        True
    """
    return not iscomplexobj(x)


def isscalar(element: Any) -> bool:
    """True for Python/NumPy scalars and (unlike NumPy) 0-d arrays.

    Example:
        >>> jnp.isscalar(jnp.float32(1.0))
        True
    """
    if np.isscalar(element):
        return True
    if isinstance(element, (np.ndarray, Array, core.Tracer)):
        return element.ndim == 0
    return False


__all__ = [
    "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128", "int_", "uint",
    "float_", "complex_", "single", "double", "half", "csingle", "cdouble", "bool",
    "generic", "number", "integer", "signedinteger", "unsignedinteger", "inexact", "floating",
    "complexfloating", "character", "flexible", "dtype", "ndarray", "pi", "e", "inf", "nan",
    "euler_gamma", "newaxis", "finfo", "iinfo", "result_type", "promote_types", "can_cast",
    "issubdtype", "isdtype", "iscomplexobj", "isrealobj", "isscalar",
]

bool = bool_  # noqa: A001 - jnp.bool (defined last: the builtin is used above)
