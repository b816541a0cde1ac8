"""Reads the HLO text format written by ``printer.py`` back into a ``Module``.

``parse_module(module_to_text(m))`` rebuilds ``m`` with new instruction objects and the same
names, shapes, attributes and calls, so that printing it again gives the same text. The parser
checks the syntax and the references (operands defined earlier in the same computation,
callees defined earlier in the module); the types are checked by the verifier. Malformed text
raises ``ValueError`` naming the line and column.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from ember.compiler.hlo import OPCODES, Computation, Instruction, Module, Shape, element_type
from ember.compiler.printer import parse_float_elements
from ember.compiler.shape_inference import infer_shape

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_BARE_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_NUMBER = re.compile(r"-?(?:inf|nan|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)")
_INT = re.compile(r"-?\d+")
_OPCODE = re.compile(r"[a-z_][a-z0-9_]*")
_ELEMENT_TYPE = re.compile(r"[a-z]+[0-9]*")
# A constant's value: anything up to the closing parenthesis, complex elements "(re,im)".
_CONSTANT_BODY = re.compile(r"(?:[^()]|\([^()]*\))*")
_CONSTANT_TOKEN = re.compile(r"[{}]|\([^()]*\)|[^,{}\s]+")
_KEYWORDS = {"true": True, "false": False, "none": None, "nan": float("nan"),
             "inf": float("inf")}


def parse_module(text: str) -> Module:
    """The module that ``text`` (``Module.to_text()``'s format) describes.

    Example:
        >>> m = parse_module('''HloModule m
        ...
        ... ENTRY %main (x.1: f32[2]) -> f32[2] {
        ...   %x.1 = f32[2] parameter(0)
        ...   ROOT %negate.2 = f32[2] negate(%x.1)
        ... }
        ... ''')
        >>> m.entry.root.opcode
        'negate'
    """
    return _ModuleParser(text).parse()


class _Line:
    """A cursor over one line of text; errors name the line and column."""

    def __init__(self, text: str, lineno: int):
        self.s = text
        self.i = 0
        self.lineno = lineno

    def error(self, msg: str) -> ValueError:
        return ValueError(f"HLO parse error at line {self.lineno}, column {self.i + 1}: {msg}"
                          f"\n  {self.s.strip()}")

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i].isspace():
            self.i += 1

    def peek(self) -> str:
        self.ws()
        return self.s[self.i] if self.i < len(self.s) else ""

    def accept(self, token: str) -> bool:
        self.ws()
        if self.s.startswith(token, self.i):
            self.i += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.accept(token):
            found = self.s[self.i:self.i + 10] or "the end of the line"
            raise self.error(f"expected {token!r}, found {found!r}")

    def match(self, pattern: re.Pattern, what: str) -> str:
        self.ws()
        m = pattern.match(self.s, self.i)
        if not m or not m.group():
            raise self.error(f"expected {what}")
        self.i = m.end()
        return m.group()

    def end(self) -> None:
        self.ws()
        if self.i != len(self.s):
            raise self.error(f"unexpected text {self.s[self.i:self.i + 20]!r}")

    def json_string(self) -> str:
        self.ws()
        try:
            value, self.i = json.JSONDecoder().raw_decode(self.s, self.i)
        except json.JSONDecodeError as e:
            raise self.error(f"bad quoted string: {e.msg}") from None
        if not isinstance(value, str):
            raise self.error("expected a quoted string")
        return value

    def name(self) -> str:
        """A bare or JSON-quoted name (without its ``%``)."""
        if self.peek() == '"':
            return self.json_string()
        return self.match(_BARE_NAME, "a name")

    def ref(self) -> str:
        self.expect("%")
        return self.name()

    def shape(self) -> Shape:
        if self.accept("("):
            parts: list[Shape] = []
            if not self.accept(")"):
                parts.append(self.shape())
                while self.accept(","):
                    parts.append(self.shape())
                self.expect(")")
            return Shape.tuple(parts)
        type_name = self.match(_ELEMENT_TYPE, "a shape")
        try:
            dtype = element_type(type_name)
        except ValueError as e:
            raise self.error(str(e)) from None
        self.expect("[")
        dims: list[int] = []
        if not self.accept("]"):
            dims.append(int(self.match(_INT, "a dimension size")))
            while self.accept(","):
                dims.append(int(self.match(_INT, "a dimension size")))
            self.expect("]")
        if any(d < 0 for d in dims):
            raise self.error(f"negative dimension size in {dims}")
        return Shape(dtype, dims)

    def attr_value(self) -> Any:
        c = self.peek()
        if c == "{":
            self.i += 1
            items: list[Any] = []
            if not self.accept("}"):
                items.append(self.attr_value())
                while self.accept(","):
                    items.append(self.attr_value())
                self.expect("}")
            return tuple(items)
        if c == '"':
            return self.json_string()
        if c == "-" or c.isdigit():
            tok = self.match(_NUMBER, "a number")
            return int(tok) if _INT.fullmatch(tok) else float(tok)
        word = self.match(_WORD, "an attribute value")
        return _KEYWORDS.get(word, word)


class _ModuleParser:
    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.pos = 0
        self.module: Module | None = None
        self.comps: dict[str, Computation] = {}

    def next_line(self) -> _Line | None:
        """The next line that is not blank or a ``//`` comment."""
        while self.pos < len(self.lines):
            text = self.lines[self.pos]
            self.pos += 1
            stripped = text.strip()
            if stripped and not stripped.startswith("//"):
                return _Line(text, self.pos)
        return None

    def parse(self) -> Module:
        first = self.next_line()
        if first is None:
            raise ValueError("HLO parse error: empty text, expected 'HloModule <name>'")
        first.expect("HloModule")
        name = first.s[first.i:].strip()
        if not name:
            raise first.error("expected the module name")
        module = self.module = Module(name)
        entry_seen = False
        while (line := self.next_line()) is not None:
            if entry_seen:
                raise line.error("the ENTRY computation must be the last one")
            entry_seen = line.accept("ENTRY")
            comp = self.computation(line)
            module.add_computation(comp, entry=entry_seen)
        if not entry_seen:
            raise ValueError("HLO parse error: the module has no ENTRY computation")
        return module

    def computation(self, head: _Line) -> Computation:
        name = head.ref()
        if name in self.comps:
            raise head.error(f"computation %{name} is defined twice")
        head.expect("(")
        params: list[tuple[str, Shape]] = []
        if not head.accept(")"):
            while True:
                pname = head.name()
                head.expect(":")
                params.append((pname, head.shape()))
                if not head.accept(","):
                    break
            head.expect(")")
        head.expect("->")
        result = head.shape()
        head.expect("{")
        head.end()

        env: dict[str, Instruction] = {}
        instructions: list[Instruction] = []
        root: Instruction | None = None
        while True:
            line = self.next_line()
            if line is None:
                raise head.error(f"computation %{name} is not closed by '}}'")
            if line.accept("}"):
                line.end()
                break
            is_root = line.accept("ROOT")
            inst = self.instruction(line, env)
            if is_root:
                if root is not None:
                    raise line.error(f"computation %{name} has a second ROOT")
                root = inst
            env[inst.name] = inst
            instructions.append(inst)
        if root is None:
            raise head.error(f"computation %{name} has no ROOT instruction")
        comp = Computation(name, instructions, root)
        got = [(p.name, p.shape) for p in comp.parameters]
        if got != params:
            raise head.error(f"the header's parameters of %{name} do not match its parameter "
                             f"instructions")
        if result != root.shape:
            raise head.error(f"%{name} is declared to return {result}, its root is "
                             f"{root.shape}")
        self.comps[name] = comp
        self.module.note_name(name)
        return comp

    def instruction(self, line: _Line, env: dict[str, Instruction]) -> Instruction:
        name = line.ref()
        if name in env:
            raise line.error(f"instruction %{name} is defined twice")
        line.expect("=")
        shape = line.shape()
        opcode = line.match(_OPCODE, "an opcode")
        if opcode not in OPCODES:
            raise line.error(f"unknown opcode {opcode!r}")
        line.expect("(")
        attrs: dict[str, Any] = {}
        operands: list[Instruction] = []
        if opcode == "parameter":
            attrs["index"] = int(line.match(_INT, "a parameter index"))
        elif opcode == "constant":
            attrs["value"] = self.constant(line, shape)
        elif line.peek() != ")":
            operands.append(self.operand(line, env))
            while line.accept(","):
                operands.append(self.operand(line, env))
        line.expect(")")
        calls: list[Computation] = []
        while line.accept(","):
            key = line.match(_WORD, "an attribute name")
            line.expect("=")
            if key == "calls":
                calls = self.calls(line)
                continue
            if key in attrs:
                raise line.error(f"attribute {key} is given twice")
            attrs[key] = line.attr_value()
        line.end()
        # A malformed instruction (a missing or bad attribute, operands of the wrong type)
        # is rejected here, as the builder rejects it, before any pass or backend reads it.
        try:
            inferred = infer_shape(opcode, [op.shape for op in operands], attrs, calls, shape)
        except (ValueError, TypeError) as e:
            raise line.error(f"%{name}: {e}") from None
        if inferred != shape:
            raise line.error(f"%{name} is declared {shape}, its operands and attributes give "
                             f"{inferred}")
        self.module.note_name(name)
        return Instruction(opcode, operands, shape, attrs, calls, name)

    def operand(self, line: _Line, env: dict[str, Instruction]) -> Instruction:
        ref = line.ref()
        if ref not in env:
            raise line.error(f"operand %{ref} is not defined earlier in this computation")
        return env[ref]

    def calls(self, line: _Line) -> list[Computation]:
        line.expect("{")
        out: list[Computation] = []
        if not line.accept("}"):
            while True:
                ref = line.ref()
                if ref not in self.comps:
                    raise line.error(f"called computation %{ref} is not defined earlier")
                out.append(self.comps[ref])
                if not line.accept(","):
                    break
            line.expect("}")
        return out

    def constant(self, line: _Line, shape: Shape) -> np.ndarray:
        if shape.is_tuple:
            raise line.error(f"a constant must have an array shape, got {shape}")
        line.ws()
        m = _CONSTANT_BODY.match(line.s, line.i)
        text = m.group()
        tokens = _CONSTANT_TOKEN.findall(text)
        elems: list[str] = []
        if tokens == ["{", "}"] and shape.dims and not math.prod(shape.dims):
            pass  # (an array of no elements, whatever its shape)
        elif _nested_elements(tokens, 0, shape.dims, 0, elems) != len(tokens):
            raise line.error(f"constant value does not have the shape {shape}")
        try:
            value = _elements_to_array(elems, shape.dtype).reshape(shape.dims)
        except (ValueError, OverflowError) as e:
            raise line.error(f"bad constant element for {shape}: {e}") from None
        line.i = m.end()
        value.flags.writeable = False
        return value


def _nested_elements(tokens: list[str], i: int, dims: tuple[int, ...], level: int,
                     out: list[str]) -> int:
    """Checks the braces of ``tokens[i:]`` against ``dims``; collects the elements.

    Returns the index after the value, or -1 when the nesting does not match the shape.
    """
    if level == len(dims):
        if i >= len(tokens) or tokens[i] in "{}":
            return -1
        out.append(tokens[i])
        return i + 1
    if i >= len(tokens) or tokens[i] != "{":
        return -1
    i += 1
    for _ in range(dims[level]):
        i = _nested_elements(tokens, i, dims, level + 1, out)
        if i < 0:
            return -1
    if i >= len(tokens) or tokens[i] != "}":
        return -1
    return i + 1


def _elements_to_array(elems: list[str], dtype: np.dtype) -> np.ndarray:
    if dtype == np.bool_:
        bad = [e for e in elems if e not in ("true", "false")]
        if bad:
            raise ValueError(f"{bad[0]!r} is not true or false")
        return np.array([e == "true" for e in elems], dtype=np.bool_)
    if dtype.kind in "iu":
        bad = [e for e in elems if not _INT.fullmatch(e)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not an integer")
        return np.array([int(e) for e in elems], dtype=dtype)
    if dtype.kind == "c":
        parts = [e[1:-1].split(",") if e.startswith("(") else [] for e in elems]
        if any(len(p) != 2 for p in parts):
            raise ValueError("complex elements are written (re,im)")
        part_dtype = np.dtype(np.float32 if dtype == np.complex64 else np.float64)
        re_ = parse_float_elements([_float_token(p[0]) for p in parts], part_dtype)
        im = parse_float_elements([_float_token(p[1]) for p in parts], part_dtype)
        out = np.empty(len(elems), dtype)
        out.real, out.imag = re_, im  # not re + 1j * im: that turns an infinite part into nan
        return out
    return parse_float_elements([_float_token(e) for e in elems], dtype)


def _float_token(text: str) -> str:
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        raise ValueError(f"{text!r} is not a number")
    return text
