"""ember.monitoring: named events for metrics, as ``jax.monitoring``.

Code marks points as named events (``record_event``), durations (``record_event_duration_secs``),
time spans (``record_event_time_span``) and scalar values (``record_scalar``); every listener
registered for that kind is called with the event's name, its value and its keyword arguments.

ember itself records the events JAX records where it does the same work:

- ``/jax/core/compile/jaxpr_trace_duration``: tracing a jitted function to a jaxpr;
- ``/jax/core/compile/jaxpr_to_mlir_module_duration``: lowering the jaxpr to an HLO module;
- ``/jax/core/compile/backend_compile_duration``: the backend's code generation (native code
  for the CPU backend). ember's HLO pass pipeline, which XLA counts as part of its backend
  compile, is reported on its own as ``/ember/core/compile/hlo_optimize_duration``;
- ``/ember/cpu/background_compile_duration``: the CPU backend's work in background threads
  (the optimized tier of a program, linking shared libraries, writing cache entries), with
  ``fun_name=`` the program's native cache key (empty for other work);
- ``/jax/compilation_cache/compile_requests_use_cache``, ``.../cache_hits``,
  ``.../cache_misses`` (events) and ``.../cache_retrieval_time_sec`` (a duration): compiles
  that consult the persistent (disk) compilation cache, and what they found.

Duration events also call the scalar listeners with the start time (``time.time()``) when
the work begins, and the time-span listeners with its start and end, as JAX does. Each
carries ``fun_name=`` (the jitted function's name). With no listener registered (and no
profiler trace running) the hooks cost one list check.

Example:
    >>> durations = []
    >>> ember.monitoring.register_event_duration_secs_listener(
    ...     lambda event, secs, **kw: durations.append((event, secs)))
    >>> ember.jit(lambda x: x + 1)(1.0)
    >>> [e for e, _ in durations][:1]
    ['/jax/core/compile/jaxpr_trace_duration']
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

__all__ = [
    "clear_event_listeners", "get_event_duration_listeners", "get_event_listeners",
    "get_event_time_span_listeners", "get_scalar_listeners", "record_event",
    "record_event_duration_secs", "record_event_time_span", "record_scalar",
    "register_event_duration_secs_listener", "register_event_listener",
    "register_event_time_span_listener", "register_scalar_listener",
    "unregister_event_duration_listener", "unregister_event_listener",
    "unregister_event_time_span_listener", "unregister_scalar_listener",
]

# The events ember records (JAX's names where the work matches).
JAXPR_TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
JAXPR_TO_MODULE_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
HLO_OPTIMIZE_EVENT = "/ember/core/compile/hlo_optimize_duration"
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
BACKGROUND_WORK_EVENT = "/ember/cpu/background_compile_duration"
CACHE_REQUEST_EVENT = "/jax/compilation_cache/compile_requests_use_cache"
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
CACHE_MISS_EVENT = "/jax/compilation_cache/cache_misses"
CACHE_RETRIEVAL_EVENT = "/jax/compilation_cache/cache_retrieval_time_sec"


class EventListenerWithMetadata(Protocol):
    def __call__(self, event: str, **kwargs: str | int) -> None: ...


class EventDurationListenerWithMetadata(Protocol):
    def __call__(self, event: str, duration_secs: float, **kwargs: str | int) -> None: ...


class EventTimeSpanListenerWithMetadata(Protocol):
    def __call__(self, event: str, start_time: float, end_time: float,
                 **kwargs: str | int) -> None: ...


class ScalarListenerWithMetadata(Protocol):
    def __call__(self, event: str, value: float | int, **kwargs: str | int) -> None: ...


# (Mutated in place, never rebound: ember's hooks hold no copies, but keep it simple.)
_event_listeners: list[EventListenerWithMetadata] = []
_event_duration_secs_listeners: list[EventDurationListenerWithMetadata] = []
_event_time_span_listeners: list[EventTimeSpanListenerWithMetadata] = []
_scalar_listeners: list[ScalarListenerWithMetadata] = []
# The running profiler trace's span recorder (``ember.profiler``), if any: called with
# (event or span name, start perf_counter_ns, end perf_counter_ns, args) for each timed phase
# and each run of a compiled program.
_span_sink: list[Callable[[str, int, int, dict], None]] = []


def record_event(event: str, **kwargs: str | int) -> None:
    """Records that ``event`` happened: calls every event listener.

    Args:
        event: the event's name, by convention a path (``"/my_app/steps"``).
        **kwargs: metadata passed on to the listeners (pass the same names in the same order
            for every call of one event).

    Example:
        >>> ember.monitoring.record_event("/my_app/checkpoint_saved", step=10)
    """
    for callback in _event_listeners:
        callback(event, **kwargs)


def record_event_duration_secs(event: str, duration: float, **kwargs: str | int) -> None:
    """Records that ``event`` took ``duration`` seconds: calls every duration listener.

    Example:
        >>> ember.monitoring.record_event_duration_secs("/my_app/step_time", 0.25)
    """
    for callback in _event_duration_secs_listeners:
        callback(event, duration, **kwargs)


def record_event_time_span(event: str, start_time: float, end_time: float,
                           **kwargs: str | int) -> None:
    """Records that ``event`` ran from ``start_time`` to ``end_time`` (seconds, as
    ``time.time()``): calls every time-span listener.

    Example:
        >>> t0 = time.time(); work(); ember.monitoring.record_event_time_span(
        ...     "/my_app/work", t0, time.time())
    """
    for callback in _event_time_span_listeners:
        callback(event, start_time, end_time, **kwargs)


def record_scalar(event: str, value: float | int, **kwargs: str | int) -> None:
    """Records a scalar summary ``value`` for ``event``: calls every scalar listener.

    Example:
        >>> ember.monitoring.record_scalar("/my_app/loss", 0.5)
    """
    for callback in _scalar_listeners:
        callback(event, value, **kwargs)


def register_event_listener(callback: EventListenerWithMetadata) -> None:
    """Calls ``callback(event, **kwargs)`` on every ``record_event``.

    Example:
        >>> ember.monitoring.register_event_listener(lambda event, **kw: print(event))
    """
    _event_listeners.append(callback)


def register_event_time_span_listener(callback: EventTimeSpanListenerWithMetadata) -> None:
    """Calls ``callback(event, start_time, end_time, **kwargs)`` on every
    ``record_event_time_span``.

    Example:
        >>> ember.monitoring.register_event_time_span_listener(
        ...     lambda event, t0, t1, **kw: print(event, t1 - t0))
    """
    _event_time_span_listeners.append(callback)


def register_event_duration_secs_listener(callback: EventDurationListenerWithMetadata) -> None:
    """Calls ``callback(event, duration_secs, **kwargs)`` on every
    ``record_event_duration_secs``.

    Example:
        >>> ember.monitoring.register_event_duration_secs_listener(
        ...     lambda event, secs, **kw: print(event, secs))
    """
    _event_duration_secs_listeners.append(callback)


def register_scalar_listener(callback: ScalarListenerWithMetadata) -> None:
    """Calls ``callback(event, value, **kwargs)`` on every ``record_scalar``.

    Example:
        >>> ember.monitoring.register_scalar_listener(lambda event, v, **kw: print(event, v))
    """
    _scalar_listeners.append(callback)


def get_event_duration_listeners() -> list[EventDurationListenerWithMetadata]:
    """A copy of the registered duration listeners.

    Example:
        >>> ember.monitoring.get_event_duration_listeners()
        []
    """
    return list(_event_duration_secs_listeners)


def get_event_time_span_listeners() -> list[EventTimeSpanListenerWithMetadata]:
    """A copy of the registered time-span listeners.

    Example:
        >>> ember.monitoring.get_event_time_span_listeners()
        []
    """
    return list(_event_time_span_listeners)


def get_event_listeners() -> list[EventListenerWithMetadata]:
    """A copy of the registered event listeners.

    Example:
        >>> ember.monitoring.get_event_listeners()
        []
    """
    return list(_event_listeners)


def get_scalar_listeners() -> list[ScalarListenerWithMetadata]:
    """A copy of the registered scalar listeners.

    Example:
        >>> ember.monitoring.get_scalar_listeners()
        []
    """
    return list(_scalar_listeners)


def clear_event_listeners() -> None:
    """Unregisters every listener of every kind.

    Example:
        >>> ember.monitoring.clear_event_listeners()
    """
    _event_listeners.clear()
    _event_duration_secs_listeners.clear()
    _event_time_span_listeners.clear()
    _scalar_listeners.clear()


def _unregister(listeners: list, callback: Any, function: str) -> None:
    # (JAX asserts; the class is kept, with a message that says what went wrong.)
    if callback not in listeners:
        raise AssertionError(f"{function}: {callback!r} is not a registered listener")
    listeners.remove(callback)


def unregister_event_duration_listener(callback: EventDurationListenerWithMetadata) -> None:
    """Unregisters a duration listener (AssertionError if it is not registered).

    Example:
        >>> ember.monitoring.unregister_event_duration_listener(listener)
    """
    _unregister(_event_duration_secs_listeners, callback, "unregister_event_duration_listener")


def unregister_event_time_span_listener(callback: EventTimeSpanListenerWithMetadata) -> None:
    """Unregisters a time-span listener (AssertionError if it is not registered).

    Example:
        >>> ember.monitoring.unregister_event_time_span_listener(listener)
    """
    _unregister(_event_time_span_listeners, callback, "unregister_event_time_span_listener")


def unregister_event_listener(callback: EventListenerWithMetadata) -> None:
    """Unregisters an event listener (AssertionError if it is not registered).

    Example:
        >>> ember.monitoring.unregister_event_listener(listener)
    """
    _unregister(_event_listeners, callback, "unregister_event_listener")


def unregister_scalar_listener(callback: ScalarListenerWithMetadata) -> None:
    """Unregisters a scalar listener (AssertionError if it is not registered).

    Example:
        >>> ember.monitoring.unregister_scalar_listener(listener)
    """
    _unregister(_scalar_listeners, callback, "unregister_scalar_listener")


# --------------------------------------------------------------------------- ember's hooks
# One-line calls from the compiler and the runtime (``ember.runtime.dispatch``, ``ember.api``).

def _timed(event: str, fun_name: str, fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, reported as a duration ``event`` (and a profiler span)."""
    if not (_event_duration_secs_listeners or _event_time_span_listeners or _scalar_listeners
            or _span_sink):
        return fn(*args, **kwargs)
    start = time.time()
    record_scalar(event, start, fun_name=fun_name)
    t0 = time.perf_counter_ns()
    try:
        return fn(*args, **kwargs)
    finally:
        t1 = time.perf_counter_ns()
        for sink in _span_sink:
            sink(event, t0, t1, {"fun_name": fun_name})
        record_event_duration_secs(event, (t1 - t0) * 1e-9, fun_name=fun_name)
        record_event_time_span(event, start, start + (t1 - t0) * 1e-9, fun_name=fun_name)


def _cache_read(fn: Callable, key: Any) -> Any:
    """``fn(key)``, a persistent-cache lookup; a hit is reported with its retrieval time."""
    if not (_event_listeners or _event_duration_secs_listeners):
        return fn(key)
    t0 = time.perf_counter()
    hit = fn(key)
    if hit is not None:
        record_event(CACHE_HIT_EVENT)
        record_event_duration_secs(CACHE_RETRIEVAL_EVENT, time.perf_counter() - t0)
    return hit


def _cache_request(caching: bool) -> None:
    """A compile that consults the persistent cache (``caching``) starts."""
    if caching and _event_listeners:
        record_event(CACHE_REQUEST_EVENT)


def _cache_miss(caching: bool) -> None:
    """A compile that consulted the persistent cache found nothing and compiles."""
    if caching and _event_listeners:
        record_event(CACHE_MISS_EVENT)


_in_span = threading.local()  # .run: the run about to start is the traced call's own


def _span_turn() -> bool:
    """Whether the run starting on this thread should be recorded as a span (False for the
    inner call that ``_execution_span`` makes, which it records itself)."""
    if getattr(_in_span, "run", False):
        _in_span.run = False
        return False
    return True


def _execution_span(executable: Any, args: list) -> list:
    """Runs ``executable`` (a ``LoadedExecutable``) on ``args`` as a profiler span."""
    start = time.perf_counter_ns()
    _in_span.run = True
    try:
        return executable._run(args)
    finally:
        _in_span.run = False
        end = time.perf_counter_ns()
        for sink in _span_sink:
            sink(executable.name, start, end, {"backend": executable.backend})
