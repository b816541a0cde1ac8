"""The HLO text format: a deterministic, readable printing that ``parser.py`` reads back.

A module prints as ``HloModule <name>``, a blank line, then its computations (callees first,
the entry last and marked ``ENTRY``), separated by blank lines::

    HloModule jit_f

    %region_sum.3 (Arg_0.1: f32[], Arg_1.2: f32[]) -> f32[] {
      %Arg_0.1 = f32[] parameter(0)
      %Arg_1.2 = f32[] parameter(1)
      ROOT %add.3 = f32[] add(%Arg_0.1, %Arg_1.2)
    }

    ENTRY %main (Arg_0.4: f32[3,4]) -> (f32[3]) {
      %Arg_0.4 = f32[3,4] parameter(0)
      %constant.5 = f32[] constant(0)
      %reduce.6 = f32[3] reduce(%Arg_0.4, %constant.5), dimensions={1}, calls={%region_sum.3}
      ROOT %tuple.7 = (f32[3]) tuple(%reduce.6)
    }

An instruction is ``[ROOT ]%name = <shape> <opcode>(<operands>)`` followed by its attributes
sorted by name (``, name=value``) and ``, calls={%a, %b}`` last. A parameter prints its index
as ``parameter(0)``; a constant prints its whole value as nested braces in its element type
(``constant({{1,2},{3,4}})``; an array of no elements as ``{}``), floats in the shortest
form that reads back bit-exactly, pred as ``true``/``false``, complex numbers as ``(re,im)``.
Attribute values: ints, floats (Python's ``repr``: ``1.0``, ``1e-05``, ``nan``, ``-inf``),
``true``/``false``, ``none``, strings bare when identifier-like (else JSON-quoted), tuples as
``{1,2}`` nested ``{{0,1},{2,3}}``. Names are printed bare when they match ``[A-Za-z0-9_.-]+``, else
JSON-quoted (``%"odd name"``).
"""

from __future__ import annotations

import json
import math
import re
import struct
from typing import Any

import numpy as np

from ember.compiler.hlo import Computation, Instruction, Module, normalize_attr

_BARE_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_BARE_STRING = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
# Bare words with another meaning in attribute values: strings spelled like them are quoted.
KEYWORDS = frozenset({"true", "false", "none", "nan", "inf"})


def module_to_text(module: Module) -> str:
    """The text of ``module``; ``parser.parse_module`` reads it back.

    Example:
        >>> from ember.compiler.hlo import Builder, Module, Shape
        >>> m = Module("m")
        >>> b = Builder(m, "main")
        >>> x = b.parameter(0, Shape(np.float32, (2,)))
        >>> _ = b.build(b.op("negate", x), entry=True)
        >>> print(module_to_text(m))
        HloModule m
        <BLANKLINE>
        ENTRY %main (Arg_0.1: f32[2]) -> f32[2] {
          %Arg_0.1 = f32[2] parameter(0)
          ROOT %negate.2 = f32[2] negate(%Arg_0.1)
        }
        <BLANKLINE>
    """
    comps = module.computations
    parts = [f"HloModule {module.name}"]
    for i, comp in enumerate(comps):
        parts.append(computation_to_text(comp, entry=i == len(comps) - 1))
    return "\n\n".join(parts) + "\n"


def computation_to_text(comp: Computation, entry: bool = False) -> str:
    """The text of one computation (``ENTRY`` first when ``entry``).

    Example:
        >>> print(computation_to_text(comp))  # doctest: +SKIP
        %add_f32.3 (Arg_0.1: f32[], Arg_1.2: f32[]) -> f32[] {
          ...
        }
    """
    params = ", ".join(f"{name_text(p.name)}: {p.shape.to_text()}" for p in comp.parameters)
    head = f"{'ENTRY ' if entry else ''}%{name_text(comp.name)} ({params}) -> " \
           f"{comp.root.shape.to_text()} {{"
    lines = [head]
    for inst in comp.instructions:
        lines.append("  " + instruction_to_text(inst, root=inst is comp.root))
    lines.append("}")
    return "\n".join(lines)


def instruction_to_text(inst: Instruction, root: bool = False) -> str:
    """One instruction line, without indentation.

    Example:
        >>> instruction_to_text(inst)  # doctest: +SKIP
        '%add.3 = f32[] add(%Arg_0.1, %Arg_1.2)'
    """
    attrs = dict(inst.attrs)
    if inst.opcode == "parameter":
        args = str(attrs.pop("index"))
    elif inst.opcode == "constant":
        args = constant_to_text(attrs.pop("value"))
    else:
        args = ", ".join(f"%{name_text(op.name)}" for op in inst.operands)
    text = f"{'ROOT ' if root else ''}%{name_text(inst.name)} = {inst.shape.to_text()} " \
           f"{inst.opcode}({args})"
    for key in sorted(attrs):
        text += f", {key}={attr_to_text(attrs[key])}"
    if inst.calls:
        text += ", calls={" + ", ".join(f"%{name_text(c.name)}" for c in inst.calls) + "}"
    return text


def name_text(name: str) -> str:
    """A computation or instruction name, JSON-quoted unless it is plain."""
    return name if _BARE_NAME.fullmatch(name) else json.dumps(name)


# --------------------------------------------------------------------------- attributes


def attr_to_text(value: Any) -> str:
    """An attribute value's text: ``3``, ``0.5``, ``true``, ``none``, ``LT``, ``{1,2}``."""
    value = normalize_attr(value)
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float_attr(value)
    if isinstance(value, str):
        if _BARE_STRING.fullmatch(value) and value not in KEYWORDS:
            return value
        return json.dumps(value)
    if isinstance(value, tuple):
        return "{" + ",".join(attr_to_text(v) for v in value) + "}"
    raise TypeError(f"HLO printer: unsupported attribute value {value!r} "
                    f"({type(value).__name__})")


def _float_attr(value: float) -> str:
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    return repr(value)


# --------------------------------------------------------------------------- constants


def constant_to_text(value: np.ndarray) -> str:
    """A constant's value as nested braces (a scalar bare): ``{{1,2},{3,4}}``, ``2.5``."""
    value = np.asarray(value)
    if value.size == 0 and value.ndim:
        return "{}"  # (whatever the shape: f32[256,256,0] would be 65536 pairs of braces)
    flat = value.reshape(-1)
    if value.dtype == np.bool_:
        elems = ["true" if v else "false" for v in flat.tolist()]
    elif value.dtype.kind in "iu":
        elems = [str(v) for v in flat.tolist()]
    elif value.dtype.kind == "c":
        re_, im = _float_texts(flat.real), _float_texts(flat.imag)
        elems = [f"({a},{b})" for a, b in zip(re_, im)]
    else:
        elems = _float_texts(flat)
    items = iter(elems)

    def nest(level: int) -> str:
        if level == value.ndim:
            return next(items)
        return "{" + ",".join(nest(level + 1) for _ in range(value.shape[level])) + "}"

    return nest(0)


def _float_texts(flat: np.ndarray) -> list[str]:
    """Shortest texts that read back (``float(text)`` cast to the dtype) bit-exactly."""
    if flat.dtype == np.float64:
        texts = [_float_attr(v) for v in flat.tolist()]
    else:
        texts = [_short_float(v) for v in flat]
    texts = [t[:-2] if t.endswith(".0") else t for t in texts]
    if not texts:
        return texts
    for i in _misread_texts(texts, flat):
        # Double rounding through f64 missed: print the exact f64 value instead.
        texts[i] = repr(float(flat[i]))
    return texts


# Formats of ``struct`` that round a Python float like NumPy's cast (``float(t)`` cast to
# the dtype, as the parser reads it); the dtypes of scalar constants in nearly every program.
_STRUCT_FORMATS = {np.dtype(np.float32): "=f", np.dtype(np.float64): "=d"}
_SMALL = 64


def _misread_texts(texts: list[str], flat: np.ndarray) -> list[int]:
    """The positions of the texts that do not read back as their element, bit for bit."""
    fmt = _STRUCT_FORMATS.get(flat.dtype)
    if fmt is not None and len(texts) <= _SMALL:
        # Small constants (most are scalars) are checked in Python: a handful of NumPy
        # calls on tiny arrays costs more, above all the first time in a process.
        raw, size = flat.tobytes(), flat.dtype.itemsize
        bad = []
        for i, t in enumerate(texts):
            try:
                same = struct.pack(fmt, float(t)) == raw[i * size:(i + 1) * size]
            except OverflowError:
                same = False
            if not same:
                bad.append(i)
        return bad
    back = parse_float_elements(texts, flat.dtype)
    bits = f"u{flat.dtype.itemsize}"
    return np.flatnonzero(back.view(bits) != flat.view(bits)).tolist()


def _short_float(v: Any) -> str:
    f = float(v)
    if math.isnan(f):
        return "-nan" if np.signbit(v) else "nan"
    return str(v)


def parse_float_elements(texts: list[str], dtype: np.dtype) -> np.ndarray:
    """The array of ``dtype`` that float texts denote (shared with the parser)."""
    return np.array([float(t) for t in texts], dtype=np.float64).astype(dtype)
