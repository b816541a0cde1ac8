"""ember.profiler: traces of a program's annotations, compiles and executions, as
``jax.profiler``.

While a trace runs (``trace``, or ``start_trace``/``stop_trace``) ember records spans (name,
thread, start, duration, arguments) of:

- the user's annotations: ``TraceAnnotation``, ``StepTraceAnnotation`` (with its
  ``step_num``), functions decorated with ``annotate_function``;
- ember's compiles, phase by phase: ``trace_jaxpr``, ``lower``, ``optimize`` (the HLO pass
  pipeline), ``backend_compile`` (code generation), each with ``fun_name``, and the CPU
  backend's ``background_compile`` work (optimized code compiled after a quick first tier,
  shared libraries for the disk cache) on its ``ember-cpu-cache`` threads;
- every run of a compiled program (named after its module, ``jit_<function>``), on the thread
  that ran it (the device worker ``ember-cpu-0`` for asynchronous dispatch).

``stop_trace`` writes them as a Chrome trace-event file,
``<log_dir>/plugins/profile/<run>/<host>.trace.json.gz``, the layout TensorBoard's profile
plugin reads (``<run>`` is the time of the stop, ``YYYY_MM_DD_HH_MM_SS``, or the
``ProfileOptions.session_id``); ``create_perfetto_trace=True`` adds ``perfetto_trace.json.gz``
beside it for https://ui.perfetto.dev. JAX also writes an ``.xplane.pb``; ember does not.

``device_memory_profile`` describes the live arrays as a pprof profile; there is no profiler
server (``start_server`` raises).

Example:
    >>> with ember.profiler.trace("/tmp/tb"):
    ...     for step in range(3):
    ...         with ember.profiler.StepTraceAnnotation("train", step_num=step):
    ...             loss = train_step(params).block_until_ready()
"""

from __future__ import annotations

import functools
import gzip
import http.server
import json
import os
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ember import monitoring as _monitoring

__all__ = [
    "ProfileOptions", "StepTraceAnnotation", "TraceAnnotation", "annotate_function",
    "device_memory_profile", "register_subprocess", "save_device_memory_profile",
    "start_server", "start_trace", "stop_server", "stop_trace", "trace",
]

_perf_ns = time.perf_counter_ns


class ProfileOptions:
    """Options of a trace (``start_trace(profiler_options=...)``), with JAX's fields.

    ember reads ``host_tracer_level`` (0: record nothing; 1: the user's annotations; 2, the
    default, or more: ember's compiles and executions too) and ``session_id`` (the name of the
    run folder, instead of the time). The other fields configure collectors ember does not
    have (device tracers, the Python tracer, HLO protos, delayed or timed captures) and are
    kept for compatibility only.

    Example:
        >>> options = ember.profiler.ProfileOptions()
        >>> options.host_tracer_level = 1  # annotations only
    """

    def __init__(self) -> None:
        self.host_tracer_level = 2
        self.python_tracer_level = 1
        self.enable_hlo_proto = True
        self.include_dataset_ops = True
        self.start_timestamp_ns = 0
        self.duration_ms = 0
        self.raise_error_on_start_failure = False
        self.repository_path = ""
        self.session_id = ""
        self.advanced_configuration: dict = {}


class _Session:
    """A running trace: its spans, as ``(name, thread id, start ns, end ns, args)``."""

    def __init__(self, log_dir: str, perfetto_trace: bool, perfetto_link: bool,
                 options: ProfileOptions):
        self.log_dir = log_dir
        self.perfetto_trace = perfetto_trace or perfetto_link
        self.perfetto_link = perfetto_link
        self.session_id = options.session_id
        self.annotations = options.host_tracer_level >= 1
        self.runtime = options.host_tracer_level >= 2
        self.spans: list[tuple] = []
        self.threads: dict[int, str] = {}
        self.start_ns = _perf_ns()

    def add(self, name: str, start: int, end: int, args: dict) -> None:
        tid = threading.get_native_id()
        if tid not in self.threads:
            self.threads[tid] = threading.current_thread().name
        self.spans.append((name, tid, start, end, args))  # (list.append is atomic)

    def runtime_span(self, event: str, start: int, end: int, args: dict) -> None:
        self.add(_SPAN_NAMES.get(event, event), start, end, args)


# ember's timed phases (``ember.monitoring``) → span names.
_SPAN_NAMES = {
    _monitoring.JAXPR_TRACE_EVENT: "trace_jaxpr",
    _monitoring.JAXPR_TO_MODULE_EVENT: "lower",
    _monitoring.HLO_OPTIMIZE_EVENT: "optimize",
    _monitoring.BACKEND_COMPILE_EVENT: "backend_compile",
    _monitoring.BACKGROUND_WORK_EVENT: "background_compile",
}

_session: _Session | None = None
_lock = threading.Lock()


def start_trace(log_dir: os.PathLike | str, create_perfetto_link: bool = False,
                create_perfetto_trace: bool = False,
                profiler_options: ProfileOptions | None = None) -> None:
    """Starts recording a trace, written to ``log_dir`` by ``stop_trace``.

    Only one trace runs at a time.

    Args:
        log_dir: the folder to write the trace under (usually a TensorBoard log folder).
        create_perfetto_link: also write ``perfetto_trace.json.gz`` and, at the stop, serve
            it on ``127.0.0.1:9001`` and print a ui.perfetto.dev link to it; ``stop_trace``
            blocks until Perfetto has fetched the file.
        create_perfetto_trace: also write ``perfetto_trace.json.gz`` (Perfetto's format).
        profiler_options: a ``ProfileOptions``.

    Raises:
        RuntimeError: a trace is running already.

    Example:
        >>> ember.profiler.start_trace("/tmp/tb")
        >>> f(x).block_until_ready()
        >>> ember.profiler.stop_trace()
    """
    global _session
    if not isinstance(log_dir, (str, os.PathLike)):
        raise TypeError(f"start_trace: log_dir must be a str or a path, got "
                        f"{type(log_dir).__name__}")
    if profiler_options is None:
        profiler_options = ProfileOptions()
    elif not isinstance(profiler_options, ProfileOptions):
        raise TypeError(f"start_trace: profiler_options must be a ProfileOptions, got "
                        f"{type(profiler_options).__name__}")
    with _lock:
        if _session is not None:
            raise RuntimeError("Profile has already been started. Only one profile may be "
                               "run at a time.")
        session = _Session(os.fspath(log_dir), bool(create_perfetto_trace),
                           bool(create_perfetto_link), profiler_options)
        if session.runtime:
            _monitoring._span_sink.append(session.runtime_span)
        _session = session


def stop_trace() -> None:
    """Stops the running trace and writes it under its ``log_dir``.

    Raises:
        RuntimeError: no trace is running.

    Example:
        >>> ember.profiler.stop_trace()
    """
    global _session
    with _lock:
        session = _session
        if session is None:
            raise RuntimeError("No profile started")
        _session = None
        if session.runtime:
            _monitoring._span_sink.remove(session.runtime_span)
        perfetto = _write_trace(session)
    if session.perfetto_link:
        _serve_perfetto_file(perfetto)


@contextmanager
def trace(log_dir: os.PathLike | str, create_perfetto_link: bool = False,
          create_perfetto_trace: bool = False,
          profiler_options: ProfileOptions | None = None) -> Iterator[None]:
    """Records a trace of the code in the ``with`` block (``start_trace``/``stop_trace``).

    Example:
        >>> with ember.profiler.trace("/tmp/tb", create_perfetto_trace=True):
        ...     f(x).block_until_ready()
    """
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()


class TraceAnnotation:
    """A span named ``name`` over a ``with`` block, in the running trace (if any).

    Keyword arguments are recorded as the span's arguments (as strings). Without a running
    trace entering and leaving cost a few hundred nanoseconds.

    Example:
        >>> with ember.profiler.TraceAnnotation("load_batch", size=32):
        ...     batch = next(data)
    """

    __slots__ = ("_name", "_args", "_start")

    def __init__(self, name: str, **kwargs: Any):
        if not isinstance(name, str):
            raise TypeError(f"{type(self).__name__}: name must be a str, got "
                            f"{type(name).__name__}")
        self._name = name
        self._args = kwargs
        self._start = None

    def __enter__(self) -> TraceAnnotation:
        session = _session
        if session is not None and session.annotations:
            self._start = _perf_ns()
        return self

    def __exit__(self, *exc: Any) -> None:
        start = self._start
        if start is not None:
            self._start = None
            session = _session
            if session is not None:
                session.add(self._name, start, _perf_ns(), self._args)


class StepTraceAnnotation(TraceAnnotation):
    """A ``TraceAnnotation`` marking one step of a loop; pass ``step_num=``.

    Example:
        >>> for step in range(10):
        ...     with ember.profiler.StepTraceAnnotation("train", step_num=step):
        ...         state = train_step(state)
    """

    __slots__ = ()


def annotate_function(func: Callable, name: str | None = None, **decorator_kwargs: Any):
    """Decorates ``func`` so that each call is a span (named ``name``, or the function's
    qualified name) in the running trace.

    Example:
        >>> @ember.profiler.annotate_function
        ... def step(x):
        ...     return f(x).block_until_ready()
        >>> step = functools.partial(ember.profiler.annotate_function, name="s")(step)
    """
    name = name or getattr(func, "__qualname__", None) or func.__name__

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with TraceAnnotation(name, **decorator_kwargs):
            return func(*args, **kwargs)

    return wrapper


# --------------------------------------------------------------------------- trace files

def _trace_json(session: _Session, metadata: bool) -> dict:
    pid = os.getpid()
    events: list[dict] = [
        {"ph": "M", "pid": pid, "name": "process_name", "args": {"name": "/host:CPU"}},
        {"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": 0}},
    ]
    for index, (tid, thread) in enumerate(sorted(session.threads.items())):
        events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                       "args": {"name": thread}})
        events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index",
                       "args": {"sort_index": index}})
    origin = session.start_ns
    # (Sorted by start, longest first at equal starts: parents come before their children.)
    for name, tid, start, end, args in sorted(session.spans, key=lambda s: (s[2], -s[3])):
        event = {"ph": "X", "pid": pid, "tid": tid, "ts": (start - origin) / 1e3,
                 "dur": (end - start) / 1e3, "name": name}
        if args:
            event["args"] = {k: str(v) for k, v in args.items()}
        events.append(event)
    out: dict[str, Any] = {"displayTimeUnit": "ns"}
    if metadata:  # (Perfetto rejects the metadata field)
        out["metadata"] = {"highres-ticks": True}
    out["traceEvents"] = events
    return out


def _write_gzip_json(path: str, value: dict) -> None:
    with gzip.open(path, "wb") as f:
        f.write(json.dumps(value).encode("utf-8"))


def _run_folder(log_dir: str, session_id: str) -> str:
    base = os.path.join(os.path.abspath(log_dir), "plugins", "profile")
    name = session_id or time.strftime("%Y_%m_%d_%H_%M_%S")
    folder, n = os.path.join(base, name), 1
    while os.path.exists(folder) and not session_id:  # (two traces within one second)
        folder, n = os.path.join(base, f"{name}_{n}"), n + 1
    os.makedirs(folder, exist_ok=True)
    return folder


def _write_trace(session: _Session) -> str | None:
    """Writes the session's files; returns the Perfetto file's path (if one is asked for)."""
    folder = _run_folder(session.log_dir, session.session_id)
    host = socket.gethostname() or "localhost"
    _write_gzip_json(os.path.join(folder, f"{host}.trace.json.gz"),
                     _trace_json(session, metadata=True))
    if not session.perfetto_trace:
        return None
    path = os.path.join(folder, "perfetto_trace.json.gz")
    _write_gzip_json(path, _trace_json(session, metadata=False))
    return path


PERFETTO_PORT = 9001  # (ui.perfetto.dev fetches traces from 127.0.0.1:9001)


class _PerfettoHandler(http.server.SimpleHTTPRequestHandler):
    def end_headers(self) -> None:
        self.send_header("Access-Control-Allow-Origin", "*")  # (the page is on another origin)
        super().end_headers()

    def do_GET(self) -> None:
        self.server.last_path = self.path
        super().do_GET()

    def log_message(self, *args: Any) -> None:
        pass


def _serve_perfetto_file(path: str, port: int = PERFETTO_PORT) -> None:
    """Serves ``path`` on 127.0.0.1:``port`` until it has been fetched once."""
    folder, filename = os.path.split(path)
    handler = functools.partial(_PerfettoHandler, directory=folder)
    socketserver.TCPServer.allow_reuse_address = True
    with socketserver.TCPServer(("127.0.0.1", port), handler) as server:
        server.last_path = None
        print(f"Open URL in browser: https://ui.perfetto.dev/#!/?url=http://127.0.0.1:{port}/"
              f"{filename}", flush=True)
        while server.last_path != "/" + filename:
            server.handle_request()


# --------------------------------------------------------------------------- servers

def start_server(port: int, requires_backend: bool = True) -> None:
    """JAX starts a gRPC profiler server here, for TensorBoard's "capture profile" button;
    ember has none, so this raises.

    Raises:
        RuntimeError: always; record traces with ``trace`` or ``start_trace``/``stop_trace``
        instead (TensorBoard reads the files they write).

    Example:
        >>> ember.profiler.start_server(9999)  # doctest: +SKIP
        RuntimeError: ...
    """
    raise RuntimeError(
        f"start_server(port={port!r}): ember has no profiler server (JAX's is a gRPC server "
        "that TensorBoard's capture button connects to). Record the trace in the program "
        "instead with ember.profiler.trace(log_dir) or start_trace/stop_trace: TensorBoard "
        "and Perfetto load the files they write.")


def stop_server() -> None:
    """Stops the profiler server; ember never has one, so this raises ValueError as JAX does
    without a running server.

    Example:
        >>> ember.profiler.stop_server()  # doctest: +SKIP
        ValueError: No active profiler server.
    """
    raise ValueError("No active profiler server.")


def register_subprocess(pid: int, port: int) -> Callable[[], None]:
    """JAX adds a subprocess's profiler server to this process's profiles; ember has no
    profiler servers, so this raises RuntimeError (JAX's error for a failed registration).

    Example:
        >>> ember.profiler.register_subprocess(1234, 9999)  # doctest: +SKIP
        RuntimeError: ...
    """
    raise RuntimeError(f"register_subprocess(pid={pid!r}, port={port!r}): ember has no "
                       "profiler servers to connect to; profile each process with "
                       "ember.profiler.trace instead.")


# --------------------------------------------------------------------------- memory profiles

def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1  # (negative int64s as their two's complement)
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field_varint(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _field_bytes(number: int, data: bytes) -> bytes:
    return _varint((number << 3) | 2) + _varint(len(data)) + data


def _packed(number: int, values: list[int]) -> bytes:
    return _field_bytes(number, b"".join(_varint(v) for v in values))


class _Strings:
    """A pprof string table (index 0 is the empty string)."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {"": 0}

    def __call__(self, s: str) -> int:
        return self.index.setdefault(s, len(self.index))


def device_memory_profile(backend: str | None = None) -> bytes:
    """The live arrays' memory as a gzip-compressed pprof ``Profile`` protocol buffer.

    One sample per shape and dtype (a location whose function is named like ``f32[1024,1024]``),
    with two values, ``allocations``/``count`` and ``space``/``bytes`` (the default), and the
    labels ``kind=buffer`` and ``device=cpu:0``. Read it with ``pprof``.

    Args:
        backend: ``None`` or ``"cpu"``.

    Example:
        >>> profile = ember.profiler.device_memory_profile()
        >>> profile[:2] == b"\\x1f\\x8b"  # gzip
        True
    """
    import ember
    if backend not in (None, "cpu"):
        raise RuntimeError(f"device_memory_profile: unknown backend {backend!r} (only 'cpu' "
                           "exists)")
    groups: dict[str, list[int]] = {}
    for array in ember.live_arrays():
        if array.is_deleted():
            continue
        aval = array.aval
        nbytes = int(np.prod(aval.shape, dtype=np.int64)) * np.dtype(aval.dtype).itemsize
        group = groups.setdefault(aval.str_short(), [0, 0])
        group[0] += 1
        group[1] += nbytes
    strings = _Strings()
    body = b"".join(_field_bytes(1, _field_varint(1, strings(t)) + _field_varint(2, strings(u)))
                    for t, u in (("allocations", "count"), ("space", "bytes")))
    labels = (_field_bytes(3, _field_varint(1, strings("kind")) +
                           _field_varint(2, strings("buffer"))) +
              _field_bytes(3, _field_varint(1, strings("device")) +
                           _field_varint(2, strings("cpu:0"))))
    functions, locations = [], []
    for ident, (name, (count, nbytes)) in enumerate(sorted(groups.items()), start=1):
        body += _field_bytes(2, _packed(1, [ident]) + _packed(2, [count, nbytes]) + labels)
        locations.append(_field_bytes(4, _field_varint(1, ident) + _field_bytes(
            4, _field_varint(1, ident))))
        functions.append(_field_bytes(5, _field_varint(1, ident) +
                                      _field_varint(2, strings(name)) +
                                      _field_varint(3, strings(name))))
    body += b"".join(locations) + b"".join(functions)
    body += b"".join(_field_bytes(6, s.encode("utf-8")) for s in strings.index)
    body += _field_varint(9, time.time_ns()) + _field_varint(14, strings("space"))
    return gzip.compress(body)


def save_device_memory_profile(filename: os.PathLike | str, backend: str | None = None) -> None:
    """Writes ``device_memory_profile(backend)`` to ``filename``.

    Example:
        >>> ember.profiler.save_device_memory_profile("/tmp/memory.prof")
    """
    profile = device_memory_profile(backend)
    with open(filename, "wb") as f:
        f.write(profile)
