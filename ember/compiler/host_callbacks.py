"""Python functions that compiled programs call: the ``ember.host_callback`` custom call.

A lowering rule registers the function (``register``) and emits a ``custom_call`` whose
``callback_id`` attr is the number it got; running the instruction (the evaluator, the CPU
backend's library steps) calls the function with the operands as NumPy arrays and takes its
results, one array per leaf of the instruction's shape. Equal functions share a number, so
retracing a function with the same callback gives the same module text (and compile-cache
hits). Numbers are this process's own: a disk-cache entry holding one is looked up by its
module text, which names the number, so it always calls this process's function of that
number. Registered functions are kept for the life of the process, as the compiled programs
that call them are.

Example:
    >>> i = register(lambda x: [x + 1])
    >>> b.op("custom_call", x, shape=Shape.tuple([x.shape]), call_target_name=TARGET,
    ...      callback_id=i, has_side_effect=False)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

from ember.compiler.evaluator import register_custom_call_target

TARGET = "ember.host_callback"

_lock = threading.Lock()
_functions: list[Callable] = []
_numbers: dict[Hashable, int] = {}


def register(fn: Callable) -> int:
    """The number of ``fn`` (``fn(*arrays) -> sequence of arrays``): ``callback_id``."""
    with _lock:
        number = _numbers.get(fn)
        if number is None:
            number = _numbers[fn] = len(_functions)
            _functions.append(fn)
        return number


def _call(*operands: Any, callback_id: int, **_attrs: Any) -> tuple:
    return tuple(_functions[callback_id](*operands))


register_custom_call_target(TARGET, _call)


def calls_host(module: Any) -> bool:
    """Whether ``module`` (a ``Module``, or its text) calls a host callback."""
    if isinstance(module, str):
        return TARGET in module
    return any(inst.opcode == "custom_call" and inst.attrs.get("call_target_name") == TARGET
               for comp in module.computations for inst in comp.instructions)

__all__ = ["TARGET", "calls_host", "register"]
