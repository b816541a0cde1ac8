"""A small Wadler-style pretty printer: text, concatenation, nesting, breaks and groups.

A group prints on one line when it fits in the remaining width; otherwise each break that
belongs directly to it becomes a newline indented by the enclosing nesting.
"""

from __future__ import annotations


class Doc:
    def __add__(self, other: Doc) -> Doc:
        return Concat([self, other])

    def format(self, width: int = 80) -> str:
        out: list[str] = []
        _render(self, width, out)
        return "".join(out)


class Text(Doc):
    def __init__(self, text: str):
        self.text = text


class Concat(Doc):
    def __init__(self, children):
        self.children = list(children)


class Nest(Doc):
    def __init__(self, indent: int, child: Doc):
        self.indent, self.child = indent, child


class Break(Doc):
    def __init__(self, text: str = " "):
        self.text = text


class Group(Doc):
    def __init__(self, child: Doc):
        self.child = child


def text(s: str) -> Doc:
    return Text(s)


def concat(docs) -> Doc:
    return Concat(docs)


def nest(indent: int, doc: Doc) -> Doc:
    return Nest(indent, doc)


def brk(s: str = " ") -> Doc:
    return Break(s)


def group(doc: Doc) -> Doc:
    return Group(doc)


def join(sep: Doc, docs) -> Doc:
    docs = list(docs)
    parts: list[Doc] = []
    for i, d in enumerate(docs):
        if i:
            parts.append(sep)
        parts.append(d)
    return Concat(parts)


nil = Concat([])


def _flat_width(doc: Doc, limit: int) -> int:
    """Width of ``doc`` printed flat, stopping early once past ``limit``."""
    total = 0
    stack = [doc]
    while stack and total <= limit:
        d = stack.pop()
        if isinstance(d, Text):
            if "\n" in d.text:
                return limit + 1
            total += len(d.text)
        elif isinstance(d, Break):
            total += len(d.text)
        elif isinstance(d, Concat):
            stack.extend(reversed(d.children))
        elif isinstance(d, (Nest, Group)):
            stack.append(d.child)
    return total


def _render(doc: Doc, width: int, out: list[str]) -> None:
    # Work items: (indent, flat, doc). Column is tracked from the output.
    column = 0
    stack: list[tuple[int, bool, Doc]] = [(0, False, doc)]
    while stack:
        indent, flat, d = stack.pop()
        if isinstance(d, Text):
            out.append(d.text)
            column += len(d.text)
        elif isinstance(d, Break):
            if flat:
                out.append(d.text)
                column += len(d.text)
            else:
                out.append("\n" + " " * indent)
                column = indent
        elif isinstance(d, Concat):
            for child in reversed(d.children):
                stack.append((indent, flat, child))
        elif isinstance(d, Nest):
            stack.append((indent + d.indent, flat, d.child))
        elif isinstance(d, Group):
            fits = flat or column + _flat_width(d.child, width - column) <= width
            stack.append((indent, fits, d.child))
