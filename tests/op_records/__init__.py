"""The op-record table: one record per primitive / numpy function drives the per-op tests.

A record names the function, its NumPy reference, the dtypes and shapes to try, how to draw
arguments, a tolerance and whether it is differentiable. Records live in topic modules
(``elementwise``, ``shape``, ...); ``ALL_RECORDS`` is the one table the tests iterate.
"""

from __future__ import annotations

import importlib
import pkgutil

from tests.op_records.base import (  # noqa: F401
    BINARY_SHAPES,
    UNARY_SHAPES,
    OpRecord,
    make_args,
    tolerance,
)

_TOPICS = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name != "base")

ALL_RECORDS: list[OpRecord] = []
for _topic in _TOPICS:
    ALL_RECORDS.extend(importlib.import_module(f"tests.op_records.{_topic}").RECORDS)

_names = [r.name for r in ALL_RECORDS]
assert len(_names) == len(set(_names)), "duplicate op-record names: " + str(
    sorted({n for n in _names if _names.count(n) > 1}))
