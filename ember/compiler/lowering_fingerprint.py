"""A digest of everything ``lower_closed_jaxpr`` reads from a closed jaxpr.

Two closed jaxprs with the same fingerprint lower to the same HLO module (with the same ember
sources), so a disk cache may map the fingerprint straight to a compiled program and skip
lowering and printing the module on a warm start (``runtime.dispatch``). The fingerprint
covers the module's name, every equation (primitive, operands by position, literal bytes,
params, result types), the avals, the bytes of each constant that lowering embeds and the type
of each one it hoists into a parameter. Walking the equations costs a tenth of lowering them.

It is None where it cannot vouch for the lowering: a primitive that is not one of ember's own
(``core.is_builtin``: a user's primitive, or a replaced lowering rule), a param of a type it
does not know (a param object may vouch for itself with a ``lowering_fingerprint()`` method
giving a stable text of what lowering reads from it), or an aval that is not a
``ShapedArray``.
"""

from __future__ import annotations

import enum
import hashlib
from typing import Any

import numpy as np

from ember import core
from ember.compiler.lower import is_hoisted
from ember.jaxpr import ClosedJaxpr, Jaxpr, Literal

_SCALARS = frozenset({int, float, complex, str, bool, type(None)})
# dtype -> its name (NumPy computes ``dtype.name`` in Python, ~3 µs: most of the walk's time).
_dtype_names: dict[np.dtype, str] = {}


def _dtype_name(dtype: np.dtype) -> str:
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = dtype.name
    return name


class _Unknown(Exception):
    """Something the fingerprint cannot vouch for."""


def lowering_fingerprint(closed: ClosedJaxpr, name: str) -> str | None:
    """The fingerprint of lowering ``closed`` as the module ``name``, or None.

    Example:
        >>> len(lowering_fingerprint(ember.make_jaxpr(jnp.sin)(1.0), "jit_sin"))
        64
    """
    out: list = [name]
    try:
        _closed(closed, out, hoisting=True)
    except (_Unknown, KeyError):
        return None
    return hashlib.sha256(repr(out).encode()).hexdigest()


def _closed(closed: ClosedJaxpr, out: list, hoisting: bool) -> None:
    # The entry computation hoists large constants into parameters (only their types reach
    # the module); a nested one (pjit, custom_jvp...) embeds every constant.
    for v, value in zip(closed.jaxpr.constvars, closed.consts):
        if hoisting and is_hoisted(v.aval):
            out.append("hoisted")
        else:
            out.append(_digest(np.asarray(value, dtype=v.aval.dtype)))
    _jaxpr(closed.jaxpr, out)


def _jaxpr(jaxpr: Jaxpr, out: list) -> None:
    ids: dict[int, int] = {}

    def define(v) -> None:
        ids[v.id] = len(ids)
        out.append(_aval(v.aval))

    def atom(a) -> None:
        if type(a) is Literal:
            out.append(_digest(np.asarray(a.val, dtype=a.aval.dtype)))
        else:
            out.append(ids[a.id])

    out.append("{")
    for v in jaxpr.constvars:
        define(v)
    out.append(";")
    for v in jaxpr.invars:
        define(v)
    for eqn in jaxpr.eqns:
        prim = eqn.primitive
        if not core.is_builtin(prim):
            raise _Unknown(prim.name)
        out.append(prim.name)
        for a in eqn.invars:
            atom(a)
        ignores = prim.lowering_ignores
        for key, value in eqn.params.items():
            out.append(key)
            if key not in ignores:
                _param(value, out)
        out.append("=")
        for v in eqn.outvars:
            define(v)
    out.append("in")
    for a in jaxpr.outvars:
        atom(a)
    out.append("}")


def _aval(aval: Any) -> str:
    if type(aval) is not core.ShapedArray:
        raise _Unknown(type(aval).__name__)
    return f"{_dtype_name(aval.dtype)}{aval.shape}{'w' if aval.weak_type else ''}"


def _digest(array: np.ndarray) -> str:
    if array.dtype.hasobject:
        raise _Unknown("object array")
    data = np.ascontiguousarray(array).tobytes()
    digest = hashlib.blake2b(data, digest_size=16).hexdigest()
    return f"{_dtype_name(array.dtype)}{array.shape}:{digest}"


def _param(value: Any, out: list) -> None:
    t = type(value)
    if t in _SCALARS:
        out.append(repr(value))
    elif t is tuple or t is list:
        out.append("(" if t is tuple else "[")
        for x in value:
            _param(x, out)
        out.append(")")
    elif isinstance(value, np.dtype):
        out.append(f"dtype:{_dtype_name(value)}")
    elif t is ClosedJaxpr:
        _closed(value, out, hoisting=False)
    elif t is Jaxpr:
        _jaxpr(value, out)
    elif isinstance(value, (np.ndarray, np.generic)):
        out.append(_digest(np.asarray(value)))
    elif isinstance(value, enum.Enum):
        out.append(f"{t.__module__}.{t.__qualname__}.{value.name}")
    elif isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple
        out.append(f"{t.__module__}.{t.__qualname__}(")
        for x in value:
            _param(x, out)
        out.append(")")
    elif callable(getattr(value, "lowering_fingerprint", None)):
        # (a param object that states what lowering reads from it: shardings, meshes)
        out.append(f"{t.__module__}.{t.__qualname__}:{value.lowering_fingerprint()}")
    else:
        raise _Unknown(t.__name__)
