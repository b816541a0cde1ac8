"""Dtypes: the JAX promotion lattice with weak types, and 64-to-32-bit canonicalization.

Python scalars are *weakly typed*: ``int``, ``float`` and ``complex`` sit at the bottom of
their kind in the lattice (written ``i*``, ``f*``, ``c*``) so they adopt the dtype of the
array they meet. With ``jax_enable_x64`` off (the default), 64-bit types canonicalize to
their 32-bit counterparts.
"""

from __future__ import annotations

import functools
from typing import Any

import ml_dtypes
import numpy as np

from ember.config import config

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
bfloat16 = np.dtype(ml_dtypes.bfloat16)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

# float0 is the dtype of tangents of integer/bool values (no data).
float0 = np.dtype([("float0", np.void, 0)])

_SUPPORTED = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
              float16, bfloat16, float32, float64, complex64, complex128)
supported_dtypes: tuple[np.dtype, ...] = _SUPPORTED

class _WeakType:
    """A weak lattice element (``i*``, ``f*``, ``c*``); compared by identity, never with dtypes."""

    def __init__(self, name: str, python_type: type):
        self.name, self.python_type = name, python_type

    def __repr__(self) -> str:
        return self.name


_I, _F, _C = _WeakType("i*", int), _WeakType("f*", float), _WeakType("c*", complex)
_weak_types = (_I, _F, _C)
_WEAK_OF_PYTYPE = {int: _I, float: _F, complex: _C}

_LATTICE_X64: dict[Any, list[Any]] = {
    bool_: [_I],
    _I: [uint8, int8],
    uint8: [int16, uint16], uint16: [int32, uint32], uint32: [int64, uint64], uint64: [_F],
    int8: [int16], int16: [int32], int32: [int64], int64: [_F],
    _F: [bfloat16, float16, _C],
    bfloat16: [float32], float16: [float32], float32: [float64, complex64], float64: [complex128],
    _C: [complex64], complex64: [complex128], complex128: [],
}
# With x64 off no promotion may form a 64-bit type from narrower inputs. The only such edge is
# uint32 | int32 -> int64; as in JAX it becomes uint32 | int32 -> int32.
_LATTICE_X32: dict[Any, list[Any]] = {**_LATTICE_X64, uint32: [int32, uint64]}


def _upper_bounds(lattice: dict[Any, list[Any]]) -> dict[Any, frozenset]:
    bounds: dict[Any, frozenset] = {}

    def visit(node):
        if node not in bounds:
            above = {node}
            for parent in lattice[node]:
                above |= visit(parent)
            bounds[node] = frozenset(above)
        return bounds[node]

    for node in lattice:
        visit(node)
    return bounds


# ``jax_numpy_dtype_promotion="strict"``: a weak type promotes to any type of its kind (and
# i* to f*, f* to c*); distinct strong types never promote.
_LATTICE_STRICT: dict[Any, list[Any]] = {
    _I: [_F, int8, int16, int32, int64, uint8, uint16, uint32, uint64],
    _F: [_C, bfloat16, float16, float32, float64],
    _C: [complex64, complex128],
    **{t: [] for t in _SUPPORTED},
}

# [x64] for the standard lattices, ["strict"] for the strict one.
_UPPER = {True: _upper_bounds(_LATTICE_X64), False: _upper_bounds(_LATTICE_X32),
          "strict": _upper_bounds(_LATTICE_STRICT)}


class TypePromotionError(ValueError):
    """Raised when dtypes have no implicit promotion path (as ``jax.dtypes``'s)."""


def _node_name(node: Any) -> str:
    return str(node.python_type) if isinstance(node, _WeakType) else str(node)


@functools.lru_cache(maxsize=512)
def _least_upper_bound(lattice: Any, *nodes) -> Any:
    """The join of ``nodes`` in the lattice ``lattice`` (x64 flag, or "strict")."""
    upper = _UPPER[lattice]
    common = functools.reduce(frozenset.intersection, (upper[n] for n in nodes))
    least = [c for c in common if all(o in upper[c] for o in common)]
    if len(least) != 1:
        names = tuple(_node_name(n) for n in nodes)
        if lattice == "strict":
            raise TypePromotionError(
                f"Input dtypes {names} have no available implicit dtype promotion path when "
                "jax_numpy_dtype_promotion=strict. Try explicitly casting inputs to the "
                "desired output type, or set jax_numpy_dtype_promotion=standard.")
        raise TypePromotionError(  # pragma: no cover - the standard lattices are lattices
            f"Input dtypes {names} have no available implicit dtype promotion path.")
    return least[0]


def x64_enabled() -> bool:
    return config.x64_enabled


def default_int_dtype() -> np.dtype:
    return int64 if x64_enabled() else int32


def default_uint_dtype() -> np.dtype:
    return uint64 if x64_enabled() else uint32


def default_float_dtype() -> np.dtype:
    return float64 if x64_enabled() else float32


def default_complex_dtype() -> np.dtype:
    return complex128 if x64_enabled() else complex64


_TO_32 = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}


_canon_cache: tuple[dict, dict] = ({}, {})  # [x64] -> {dtype-like: canonical dtype}


def canonicalize_dtype(dtype: Any) -> np.dtype:
    """The dtype ember actually uses for ``dtype``: 64-bit types become 32-bit without x64."""
    cache = _canon_cache[config.x64_enabled]
    try:
        return cache[dtype]
    except (KeyError, TypeError):
        pass
    out = _canonicalize_dtype(dtype)
    try:
        cache[dtype] = out
    except TypeError:  # unhashable dtype-like
        pass
    return out


def _canonicalize_dtype(dtype: Any) -> np.dtype:
    dt = np.dtype(dtype)
    if dt == float0:
        return dt
    if dt not in _SUPPORTED:
        raise TypeError(f"dtype {dt} is not a valid ember array type")
    if not x64_enabled():
        return _TO_32.get(dt, dt)
    return dt


def _python_scalar_dtype(x) -> np.dtype:
    if isinstance(x, (bool, np.bool_)):
        return bool_
    if isinstance(x, int):
        return default_int_dtype()
    if isinstance(x, float):
        return default_float_dtype()
    if isinstance(x, complex):
        return default_complex_dtype()
    raise TypeError(type(x))


_PY_SCALARS = frozenset((bool, int, float, complex))


def is_python_scalar(x) -> bool:
    t = type(x)
    if t in _PY_SCALARS:
        return True
    if t is np.ndarray or hasattr(t, "aval"):
        return False
    return isinstance(x, (int, float, complex)) and not isinstance(x, np.generic)


def is_weakly_typed(x) -> bool:
    """True for Python int/float/complex scalars and for weakly typed arrays or tracers."""
    if type(x) in (int, float, complex):
        return True
    if type(x) is bool:
        return False
    return bool(getattr(x, "weak_type", False))


def dtype(x: Any, *, canonicalize: bool = False) -> np.dtype:
    """The dtype of a value, dtype-like or Python scalar (Python types give defaults).

    Example:
        >>> dtype(1.0)
        dtype('float32')
    """
    if isinstance(x, np.dtype):
        return canonicalize_dtype(x) if canonicalize else x
    if x is None:
        raise ValueError("Invalid argument to dtype: None.")
    if isinstance(x, type) and x in (bool, int, float, complex):
        dt = _python_scalar_dtype(x(0))
    elif is_python_scalar(x):
        dt = _python_scalar_dtype(x)
    elif hasattr(x, "dtype") and not isinstance(x, type):
        dt = np.dtype(x.dtype)
    elif hasattr(x, "dtype") and isinstance(x, type) and issubclass(x, np.generic):
        dt = np.dtype(x)
    else:
        try:
            dt = np.dtype(getattr(x, "dtype", x))
        except TypeError as e:
            raise TypeError(f"Cannot determine dtype of {x!r}") from e
    return canonicalize_dtype(dt) if canonicalize else dt


def _lattice_node(dt: np.dtype, weak: bool):
    if not weak:
        return dt
    if dt == bool_:
        return bool_
    if np.issubdtype(dt, np.complexfloating):
        return _C
    if np.issubdtype(dt, np.inexact) or dt == bfloat16:
        return _F
    return _I


def _node_to_dtype(node) -> np.dtype:
    if node is _I:
        return default_int_dtype()
    if node is _F:
        return default_float_dtype()
    if node is _C:
        return default_complex_dtype()
    return canonicalize_dtype(node)


def _dtype_and_weakness(x) -> tuple[np.dtype, bool]:
    t = type(x)
    if t is float or t is int or t is complex:
        return _python_scalar_dtype(x), True
    aval = getattr(x, "aval", None)  # ember.Array and tracers
    if aval is not None and hasattr(aval, "weak_type"):
        return aval.dtype, aval.weak_type
    if isinstance(x, type) and x in (int, float, complex):
        return _python_scalar_dtype(x(0)), True
    if isinstance(x, type) and x is bool:
        return bool_, False
    if is_python_scalar(x):
        return _python_scalar_dtype(x), type(x) is not bool
    if hasattr(x, "dtype") and not isinstance(x, (type, np.dtype)):
        return np.dtype(x.dtype), bool(getattr(x, "weak_type", False))
    return np.dtype(x), False


def _check_supported(dt: np.dtype, fn: str) -> None:
    if dt not in _SUPPORTED and dt != float0:
        raise TypeError(f"{fn}: dtype {dt} is not a valid ember array type")


def result_type(*args: Any, return_weak_type_flag: bool = False):
    """JAX's promotion: the least upper bound of the arguments' dtypes in the weak lattice.

    Example:
        >>> result_type(np.int8, 2.0)
        dtype('float32')
    """
    if not args:
        raise ValueError("at least one array or dtype is required")
    pairs = tuple(_dtype_and_weakness(a) for a in args)
    key = (pairs, config.promotion_key)
    try:
        out = _result_type_cache[key]
    except KeyError:
        out = _lattice_result_type(pairs)
        if len(_result_type_cache) > 4096:
            _result_type_cache.clear()
        _result_type_cache[key] = out
    return out if return_weak_type_flag else out[0]


_result_type_cache: dict = {}


def _lattice_result_type(pairs) -> tuple[np.dtype, bool]:
    for dt, _ in pairs:
        _check_supported(dt, "result_type")
    if any(dt == float0 for dt, _ in pairs):  # (float0 joins only itself, as in JAX)
        if all(dt == float0 for dt, _ in pairs):
            return float0, False
        raise ValueError(f"dtype={float0!r} is not a valid dtype for JAX type promotion.")
    x64 = x64_enabled()
    if not x64:  # as in JAX, inputs are canonicalized before they meet in the x32 lattice
        pairs = tuple((_TO_32.get(dt, dt), w) for dt, w in pairs)
    if config.strict_promotion:
        node = _least_upper_bound("strict", *{_lattice_node(dt, w) for dt, w in pairs})
        weak = any(node is t for t in _weak_types)
    elif all(w for _, w in pairs):
        node = _least_upper_bound(x64, *{dt for dt, _ in pairs})
        weak = True
    else:
        node = _least_upper_bound(x64, *{_lattice_node(dt, w) for dt, w in pairs})
        weak = any(node is t for t in _weak_types)
    return _node_to_dtype(node), weak


def promote_types(a: Any, b: Any) -> np.dtype:
    """The promoted dtype of two dtypes, as the lattice gives it (not canonicalized to 32 bits).

    Python types count as weak; a weak result is that Python type's 64-bit dtype. With x64
    off the x32 lattice is used, which forms no 64-bit type from narrower inputs
    (``uint32 | int32`` is ``int32``), but 64-bit inputs keep their width.

    Example:
        >>> promote_types(np.float64, np.float32)
        dtype('float64')
    """
    da, db = _dtype_and_weakness_type(a), _dtype_and_weakness_type(b)
    node = _least_upper_bound("strict" if config.strict_promotion else x64_enabled(), da, db)
    if isinstance(node, _WeakType):
        return np.dtype(node.python_type)
    return node


def _dtype_and_weakness_type(a):
    if isinstance(a, type) and a in (int, float, complex):
        return _WEAK_OF_PYTYPE[a]
    dt = np.dtype(a)
    _check_supported(dt, "promote_types")
    return dt


def to_inexact_dtype(dt: np.dtype) -> np.dtype:
    """The dtype an integer/bool value takes when a float is required, as in JAX: 64-bit
    integers become the default float (float64 under x64), narrower integers and bool
    become float32 (``jnp.sin(int32)`` is float32 even under x64)."""
    dt = np.dtype(dt)
    if issubdtype(dt, np.inexact):
        return dt
    if dt.kind in "iu" and dt.itemsize == 8:
        return default_float_dtype()
    return float32


class extended(np.generic):  # noqa: N801 (JAX's name)
    """Abstract scalar class of extended dtypes (PRNG key dtypes), as ``jax.dtypes``."""


class prng_key(extended):  # noqa: N801 (JAX's name)
    """Abstract scalar class of PRNG key dtypes (``random.key(0).dtype``), as ``jax.dtypes``."""


# (a, b) -> issubdtype(a, b): NumPy's own takes ~1.5 us, and the dtype predicates below run
# on every traced and eager operation.
_subdtype_memo: dict[tuple[Any, Any], bool] = {}
_SUBDTYPE_MEMO_MAX = 4096
# The argument types memoized: NumPy dtypes and scalar types (``type`` for classes such as
# ``np.floating``), whose equality is the dtype's (not Python numbers: ``1 == 1.0 == True``).
_MEMO_KEYS = frozenset({type, type(np.dtype(np.float32))}) | {
    type(np.dtype(t)) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                np.uint16, np.uint32, np.uint64, np.float16, np.float64,
                                np.complex64, np.complex128)}


def issubdtype(a: Any, b: Any) -> bool:
    """np.issubdtype that knows bfloat16 is a floating type (and key dtypes are extended)."""
    key = (a, b)
    out = _subdtype_memo.get(key) if type(a) in _MEMO_KEYS and type(b) in _MEMO_KEYS else 0
    if out is not None:
        return _issubdtype(a, b) if out == 0 else out
    out = _issubdtype(a, b)
    if len(_subdtype_memo) >= _SUBDTYPE_MEMO_MAX:
        _subdtype_memo.clear()
    _subdtype_memo[key] = out
    return out


def _issubdtype(a: Any, b: Any) -> bool:
    if a is None:
        return False
    if isinstance(getattr(a, "type", None), type) and issubclass(a.type, extended):
        if isinstance(getattr(b, "type", None), type) and not isinstance(b, type):
            return a == b  # (a key dtype against a dtype instance: the same dtype)
        return isinstance(b, type) and issubclass(a.type, b)
    try:
        da = np.dtype(a)
    except TypeError:
        return False
    if da == bfloat16:  # numpy does not know bfloat16 is a float
        if b in (np.floating, np.inexact, np.number, np.generic):
            return True
        try:
            return da == np.dtype(b)
        except TypeError:
            return False
    return bool(np.issubdtype(da, b))


def is_float(dt: Any) -> bool:
    return issubdtype(dt, np.floating)


def is_complex(dt: Any) -> bool:
    return issubdtype(dt, np.complexfloating)


def is_inexact(dt: Any) -> bool:
    return issubdtype(dt, np.inexact)


def is_integer(dt: Any) -> bool:
    return issubdtype(dt, np.integer)


def is_unsigned(dt: Any) -> bool:
    return issubdtype(dt, np.unsignedinteger)


def is_bool(dt: Any) -> bool:
    return np.dtype(dt) == bool_


def can_cast(from_: Any, to: Any, casting: str = "safe") -> bool:
    """np.can_cast on dtypes, with bfloat16 and weak Python types understood."""
    src = dtype(from_)
    dst = np.dtype(to)
    return bool(np.can_cast(src, dst, casting=casting))


def finfo(dt: Any) -> Any:
    """Machine limits for floating types (ml_dtypes' finfo, which knows bfloat16)."""
    return ml_dtypes.finfo(np.dtype(dtype(dt)))


def iinfo(dt: Any) -> Any:
    """Machine limits for integer types."""
    return np.iinfo(np.dtype(dtype(dt)))


def short_name(dt: np.dtype) -> str:
    """Names as jaxprs print them: f32, i32, u8, bf16, bool, c64."""
    dt = np.dtype(dt)
    if dt == bfloat16:
        return "bf16"
    if dt == bool_:
        return "bool"
    if dt == float0:
        return "float0"
    return {"f": "f", "i": "i", "u": "u", "c": "c"}[dt.kind] + str(dt.itemsize * 8)



def itemsize_bits(dtype: Any) -> int:
    """The size of one element of ``dtype`` in bits (4 for ``int4``, 8 for ``bool``).

    Example:
        >>> itemsize_bits(np.float32), itemsize_bits(ml_dtypes.int4)
        (32, 4)
    """
    if dtype is None:
        raise ValueError("itemsize_bits: dtype cannot be None.")
    dt = np.dtype(dtype)
    if dt.kind == "V" and dt.itemsize == 1 and dt != float0:  # (ml_dtypes' sub-byte types)
        try:
            return int(ml_dtypes.iinfo(dt).bits)
        except ValueError:
            return int(ml_dtypes.finfo(dt).bits)
    return dt.itemsize * 8


def scalar_type_of(x: Any) -> type:
    """The Python scalar type (``bool``, ``int``, ``float`` or ``complex``) matching the
    dtype of ``x``.

    Example:
        >>> scalar_type_of(np.int32(1)), scalar_type_of(jnp.ones(2))
        (<class 'int'>, <class 'float'>)
    """
    dt = dtype(x)
    if dt == np.dtype(bool):
        return bool
    if np.issubdtype(dt, np.integer):
        return int
    if np.issubdtype(dt, np.complexfloating):
        return complex
    if np.issubdtype(dt, np.inexact) or dt.kind == "V":
        return float
    raise TypeError(f"scalar_type_of: invalid scalar value {x!r}")
