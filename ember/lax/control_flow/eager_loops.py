"""Eager loops (and composite functions) that compile themselves once they have run long enough.

Outside ``jit``, ``while_loop``, ``fori_loop`` and ``scan`` start by evaluating their body
jaxpr op by op: ~3-5 µs per operation, nothing to compile, the right choice for short loops.
A long loop (or a short one called over and over, as in a training loop) pays that on every
iteration; JAX instead compiles every eager loop before its first iteration (~60 ms here)
and then runs it at compiled speed. ember does both, the way a tiered JIT does: each loop,
identified by the lowering fingerprint of its one-equation jaxpr (the primitive, its body
jaxprs and the operand types: ``compiler.lowering_fingerprint``, ~25 µs), keeps count of the
seconds it has spent op by op, across calls. Once that passes ``COMPILE_AFTER_S`` the loop is
compiled like a jitted function (disk cache included), and every later run of it is compiled
from its start. A run never switches midway: its result is either the op-by-op one or the
compiled one (which ``jit`` of the same loop gives), never a mix that would depend on when
the switch happened.

Elementwise composite primitives (``lax.special``'s ``igamma``, ``zeta``, ``betainc``...:
tens of operations, loops among them, per element) tier the same way (``composite``): op by op
first, compiled once they have spent the budget, as JAX runs such functions jitted.

Loops stay op by op under ``disable_jit``, with ``jax_debug_nans``/``jax_debug_infs`` (which
name the failing primitive op by op), when the default backend is not the native ``cpu``
one, and when the fingerprint cannot vouch for the lowering: a user-defined primitive or a
host callback (its Python function) in the body.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

from ember import core
from ember.compiler.lowering_fingerprint import lowering_fingerprint
from ember.config import config
from ember.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Var
from ember.runtime import compile_cache

# Seconds of op-by-op evaluation after which a loop is compiled (ski rental: about one
# compile's cost, so no loop pays more than twice the better of the two strategies).
COMPILE_AFTER_S = 0.03
_MAX_LOOPS = 256  # loops remembered (their time spent, their executables)

_spent: OrderedDict[str, float] = OrderedDict()  # fingerprint -> op-by-op seconds so far
_compiled: OrderedDict[str, Any] = OrderedDict()  # fingerprint -> LoadedExecutable
_lock = threading.Lock()


class EagerLoop:
    """One eager run of a loop primitive: ``compiled()`` gives its executable when it has
    one (compiling it once the loop has spent its budget op by op), else the run goes op by
    op and ``finished_op_by_op()`` records its time."""

    __slots__ = ("_parts", "_closed", "_name", "_key", "_spent_before", "_start")

    def __init__(self, prim: core.Primitive, params: dict, in_avals: list,
                 out_avals: list, key: Any = None):
        """``key``, where given, stands for the fingerprint: a cheaper identity that fixes
        the lowering as surely (``composite``'s: the primitive and the operand types); the
        jaxpr is then built only if the run compiles."""
        self._key = None
        self._closed = None
        if _eligible():
            self._parts = (prim, params, in_avals, out_avals)
            self._name = f"eager_{prim.name}"
            self._key = key if key is not None else lowering_fingerprint(self._jaxpr(),
                                                                         self._name)
        self._spent_before = _spent.get(self._key, 0.0) if self._key is not None else 0.0
        self._start = time.perf_counter()

    def compiled(self) -> Any | None:
        """The loop's executable if it has one, or if it has spent its budget (then it is
        compiled now); None to run op by op."""
        if self._key is None:
            return None
        exe = _compiled.get(self._key)
        if exe is None and self._spent_before >= COMPILE_AFTER_S:
            exe = self.compile()
        return exe

    def _jaxpr(self) -> ClosedJaxpr:
        """The loop's one-equation jaxpr (built once)."""
        if self._closed is None:
            prim, params, in_avals, out_avals = self._parts
            invars = [Var(a) for a in in_avals]
            outvars = [Var(a) for a in out_avals]
            self._closed = ClosedJaxpr(
                Jaxpr([], invars, outvars, [JaxprEqn(invars, outvars, prim, params)]), [])
        return self._closed

    def compile(self) -> Any:
        from ember.runtime.dispatch import compile_closed_jaxpr
        exe = compile_closed_jaxpr(self._jaxpr(), self._name)
        _remember(_compiled, self._key, exe)
        with _lock:
            _spent.pop(self._key, None)
        return exe

    def finished_op_by_op(self) -> None:
        """Records the time this run spent op by op."""
        if self._key is not None:
            _remember(_spent, self._key,
                      self._spent_before + time.perf_counter() - self._start)


def composite(prim: core.Primitive, avals: list, out_aval: Any) -> EagerLoop:
    """The tiering of one eager call of an elementwise composite primitive (``lax.special``'s
    ``igamma``, ``zeta``...: a body of tens of operations and loops, evaluated op by op): as
    a loop's, keyed by the primitive and the operand types, which fix its lowering."""
    return EagerLoop(prim, {}, avals, [out_aval],
                     key=("composite", prim.name, config.trace_key, *avals))


def clear() -> None:
    """Forgets every loop's time and executable (``ember.clear_caches`` calls it)."""
    _spent.clear()
    _compiled.clear()


compile_cache.on_clear(clear)


def _eligible() -> bool:
    if config.jit_disabled or config.debug_checks:
        return False
    from ember.backends import canonical_name
    return canonical_name(config.read("jax_default_backend")) == "cpu"


def _remember(table: OrderedDict, key: str, value: Any) -> None:
    with _lock:  # (eager loops may run on several threads)
        table[key] = value
        table.move_to_end(key)
        if len(table) > _MAX_LOOPS:
            table.popitem(last=False)
