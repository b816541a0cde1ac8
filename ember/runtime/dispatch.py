"""Compiling closed jaxprs into executables and running them, synchronously or not.

``compile_closed_jaxpr`` runs the pipeline: lower (``ember.compiler.lower``) → optimize
(``ember.compiler.pipeline``) → backend compile, and wraps the result in a ``LoadedExecutable``
that takes and returns ``ember.Array``s. Dispatch is asynchronous: a call queues the work on
the device's worker thread and returns pending arrays at once; using their value waits (see
``Array._resolve``), and an error raised by the executable surfaces there. Executables whose
estimated run time is short (``INLINE_MAX_MICROSECONDS``) run inline on the calling thread
instead, where the thread hand-offs would cost a large part of the work (with
``jax_cpu_enable_async_dispatch`` off, every executable does). Work estimated to
run for less than ``WAKE_MIN_MICROSECONDS`` is queued without waking an idle worker: the
thread that waits for it runs it, or the next queued work wakes the worker for both.

``EMBER_DUMP_TO=dir`` (read at each compile) writes ``<name>.<n>.jaxpr.txt`` and the HLO
before and after every pass (``<name>.<n>.<stage>.hlo.txt``).

Example:
    >>> exe = compile_closed_jaxpr(ember.make_jaxpr(jnp.sin)(1.0), "sin")
    >>> exe.execute([jnp.float32(0.5)])
    [Array(0.47942555, dtype=float32, weak_type=True)]
"""

from __future__ import annotations

import collections
import itertools
import os
import re
import threading
from concurrent.futures import Future
from typing import Any

import numpy as np

from ember import core, dtypes
from ember import monitoring as _monitoring
from ember.backends import canonical_name, get_backend
from ember.compiler.cost_analysis import cost_analysis
from ember.compiler.host_callbacks import calls_host
from ember.compiler.lower import hoisted_constants, lower_closed_jaxpr
from ember.compiler.lowering_fingerprint import lowering_fingerprint
from ember.compiler.pipeline import optimize
from ember.config import config
from ember.interpreters.pjit import pjit_p
from ember.jaxpr import ClosedJaxpr, Jaxpr, Var
from ember.runtime.array import Array, kernel_value

# Executables estimated to run for less than this many microseconds run on the calling
# thread: a call that is then waited for pays ~30 µs for the two thread hand-offs of
# asynchronous dispatch (jnp.sum of 1e6 float32, called and waited for: 82 µs async, 52
# inline), and a shorter run leaves the caller little to overlap with it.
INLINE_MAX_MICROSECONDS = 200.0
# The estimate (``estimated_microseconds``): memory traffic, arithmetic and transcendental
# functions at rates measured on a 2-core machine (per microsecond), and a cap on the bytes.
_BYTES_PER_US = 40e3
_FLOPS_PER_US = 50e3
# ... and the flops of products, which BLAS runs far faster: (128, 784) @ (784, 512) takes
# ~0.34 ms on an AVX-512 2-core machine (~300e3 flops a microsecond), an MLP train step's
# products ~1.7 ms (~240e3); this rate leaves room for smaller products and AVX2 machines.
_DOT_FLOPS_PER_US = 150e3
_TRANSCENDENTALS_PER_US = 4e3
INLINE_BYTES_LIMIT = 16 << 20
# Work estimated to run for less than this many microseconds does not wake an idle worker
# (``_DeviceWorker.submit``): the wake-up cost the caller 40-60 µs here (the futex wake, then
# the woken thread's turn at the GIL while the caller runs the work itself), 5-9% of a
# softmax over (4096, 1024) called and waited for (1.35 -> 1.28 ms without it). A caller that
# does not wait soon loses at most this much overlap, and only until it queues more work.
WAKE_MIN_MICROSECONDS = 5000.0


def estimated_microseconds(cost: dict) -> float:
    """A rough run time of a program with this cost analysis (``"dot flops"``, where given,
    at BLAS's rate)."""
    dot = cost.get("dot flops", 0.0)
    return (cost.get("bytes accessed", 0.0) / _BYTES_PER_US
            + (cost.get("flops", 0.0) - dot) / _FLOPS_PER_US + dot / _DOT_FLOPS_PER_US
            + cost.get("transcendentals", 0.0) / _TRANSCENDENTALS_PER_US)

_ndarray = np.ndarray
_new_array = object.__new__


# --------------------------------------------------------------------------- device worker


class _DeviceWorker:
    """One thread per device running queued executables in submission order.

    FIFO order matters: work reading a pending array always runs after the work producing it.
    A thread that waits for a result the worker has not started yet runs the queue's work
    itself, in order, up to that result (``_Job.result``): waking a sleeping thread costs
    tens of microseconds here, so "call, then block" should not pay a thread handoff. For
    the same reason short work may be queued without a wake-up (``submit(wake=False)``).
    """

    def __init__(self, name: str):
        self.name = name
        self._jobs: collections.deque = collections.deque()
        self._ready = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None

    @property
    def ident(self) -> int | None:
        return self._thread.ident if self._thread is not None else None

    def start(self) -> None:
        """Starts the thread if it is not running (``submit`` would start it otherwise)."""
        with self._ready:
            self._start_locked()

    def _start_locked(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()

    def forget_thread(self) -> None:
        """In a forked child: the parent's thread is not there (a later ``submit`` starts
        one), and its lock may have been held at the fork."""
        self._ready = threading.Condition(threading.Lock())
        self._thread = None

    def submit(self, fn: Any, *args: Any, wake: bool = True) -> Future:
        """Queues ``fn(*args)``. ``wake=False``: an idle worker is left asleep while this is
        the only queued work; it runs when a thread waits for it, when the worker finishes
        what it is running, or when later work is queued (which wakes the worker)."""
        job = _Job(self, fn, args)
        with self._ready:
            jobs = self._jobs
            jobs.append(job)
            self._start_locked()
            if wake or len(jobs) > 1:
                self._ready.notify()
        return job

    def wake(self) -> None:
        """Wakes an idle worker to run what is queued (``submit(wake=False)`` left it
        asleep)."""
        with self._ready:
            if self._jobs:
                self._ready.notify()

    def _next(self, block: bool) -> _Job | None:
        with self._ready:
            while not self._jobs:
                if not block:
                    return None
                self._ready.wait()
            return self._jobs.popleft()

    def _loop(self) -> None:
        while True:
            self._next(block=True).run()

    def help_until_started(self, job: _Job) -> None:
        """Runs queued work on the calling thread, in order, until ``job`` has started."""
        while not (job.running() or job.done()):
            head = self._next(block=False)
            if head is None:
                return
            head.run()


class _Job(Future):
    """Queued work: its result is a future's; waiting for it helps the queue along."""

    def __init__(self, worker: _DeviceWorker, fn: Any, args: tuple):
        super().__init__()
        self._worker = worker
        self._work: tuple | None = (fn, args)

    def run(self) -> None:
        if not self.set_running_or_notify_cancel():
            return
        fn, args = self._work
        self._work = None  # no reference to the work outlives the run
        outer = getattr(_running, "job", None)
        _running.job = self  # (work it dispatches runs inline: see ``on_worker_thread``)
        try:
            result = fn(*args)
        except BaseException as e:  # the error belongs to whoever waits on the result
            self.set_exception(e)
        else:
            self.set_result(result)
        finally:
            _running.job = outer

    def result(self, timeout: float | None = None) -> Any:
        if not self.done() and threading.get_ident() != self._worker.ident:
            self._worker.help_until_started(self)
        return super().result(timeout)

    def nudge(self) -> None:
        """Makes sure the worker will run this job even if nobody waits for it (someone
        polls ``Array.is_ready`` instead)."""
        if not (self.running() or self.done()):
            self._worker.wake()


_WORKER = _DeviceWorker("ember-cpu-0")
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_WORKER.forget_thread)


def start_worker() -> None:
    """Starts the device worker's thread ahead of the first asynchronous run (``import
    ember`` does). Started by ``submit`` instead, the thread took that first job as it came
    up, while the caller waited for it: a first run on a brand-new thread, where the MLP
    train step's first BLAS call took 3-24 ms instead of ~1.5 ms. A thread already waiting
    leaves the job to the caller that waits for it (``_Job.result``), as in every later call.
    """
    _WORKER.start()


def effects_barrier() -> None:
    """Waits until every computation queued so far has run (as ``jax.effects_barrier``;
    host callbacks run during their computation, so their effects have happened too).

    Example:
        >>> y = f(x)                 # queued
        >>> ember.effects_barrier()  # f has run
    """
    if on_worker_thread():  # (queued work runs in order: what came before has run)
        return
    # (No wake-up: waiting runs the queue on this thread, or the busy worker gets to it.)
    _WORKER.submit(_nothing, wake=False).result()


def _nothing() -> None:
    return None


_running = threading.local()  # .job: the queued work this thread is running, if any


def on_worker_thread() -> bool:
    """Whether the caller is running queued work: the device worker, or a thread helping
    it (work submitted from there runs inline)."""
    return getattr(_running, "job", None) is not None


# --------------------------------------------------------------------------- executables


class LoadedExecutable:
    """A compiled module with its calling convention: Arrays in, Arrays out.

    ``in_avals``/``out_avals`` are the jaxpr's; ``consts`` are the hoisted constants appended
    to the arguments; ``cost`` is the optimized module's cost analysis; ``inline`` says whether
    calls run on the calling thread, ``wake`` whether queued calls wake an idle worker.
    """

    __slots__ = ("name", "backend", "_module", "executable", "in_avals", "out_avals", "consts",
                 "cost", "inline", "wake", "_exact_run")

    def __init__(self, name: str, backend: str, module: Any, executable: Any,
                 in_avals: list, out_avals: list, consts: list, cost: dict):
        self.name = name
        self.backend = backend
        self._module = module  # the optimized module, or its text (parsed when asked for)
        self.executable = executable
        self.in_avals = in_avals
        self.out_avals = out_avals
        self.consts = consts
        self.cost = cost
        estimate = estimated_microseconds(cost)
        # (Host callbacks run during the call, on the calling thread: prints appear in
        # program order with the caller's, and a callback may use ember freely.)
        self.inline = calls_host(module) or (cost.get("bytes accessed", 0.0) < INLINE_BYTES_LIMIT
                                             and estimate < INLINE_MAX_MICROSECONDS)
        self.wake = estimate >= WAKE_MIN_MICROSECONDS  # (see ``_DeviceWorker.submit``)
        # Backends may offer ``execute_exact``: outputs already of the exact dtypes and shapes,
        # read-only (the CPU backend's generated single-call runner).
        self._exact_run = getattr(executable, "execute_exact", None)
        # Backends that swap in better code later (tiered compilation) say when.
        on_upgrade = getattr(executable, "on_upgrade", None)
        if on_upgrade is not None:
            on_upgrade(self._refresh_exact_run)

    def _refresh_exact_run(self) -> None:
        self._exact_run = getattr(self.executable, "execute_exact", None)

    @property
    def module(self) -> Any:
        """The optimized HLO module (a warm disk-cache hit keeps only its text until now)."""
        module = self._module
        if isinstance(module, str):
            from ember.compiler.parser import parse_module
            module = self._module = parse_module(module)
        return module

    def execute(self, args: list) -> list[Array]:
        """Runs on ``args`` (Arrays, or values already converted to the input dtypes)."""
        if self.inline or not config.async_dispatch or on_worker_thread():
            return self._wrap_outputs(self._run(args))
        future = _WORKER.submit(self._run, args, wake=self.wake)
        return [Array._make_pending(aval, future, i) for i, aval in enumerate(self.out_avals)]

    def execute_now(self, args: list) -> list[Array]:
        """``execute``, run before it returns (never queued)."""
        return self._wrap_outputs(self._run(args))

    def execute_values(self, values: list) -> list[np.ndarray]:
        """Runs synchronously on NumPy values; returns NumPy outputs of the exact out types."""
        return self._run(values)

    def _run(self, args: list) -> list[np.ndarray]:
        if _monitoring._span_sink and _monitoring._span_turn():  # (a profiler trace runs)
            return _monitoring._execution_span(self, args)
        values = [kernel_value(a) if type(a) is Array else a for a in args]
        if self.consts:
            values.extend(self.consts)
        if self._exact_run is not None and all(type(v) is _ndarray for v in values):
            return self._exact_run(values)
        outs = self.executable.execute(values)
        return [_exact(o, aval, self.name) for o, aval in zip(outs, self.out_avals)]

    def _wrap_outputs(self, outs: list[np.ndarray]) -> list[Array]:
        result = []
        for value, aval in zip(outs, self.out_avals):
            out = _new_array(Array)
            out._value = value
            out.aval = aval
            result.append(out)
        return result


def _exact(value: Any, aval: core.ShapedArray, name: str) -> np.ndarray:
    if type(value) is not _ndarray:
        value = np.asarray(value)
    if value.dtype != aval.dtype:
        value = value.astype(aval.dtype)
    if value.shape != aval.shape:
        raise RuntimeError(f"{name}: the executable produced shape {value.shape} where the "
                           f"jaxpr says {aval.str_short()}")
    if value.flags.writeable:
        value.flags.writeable = False
    return value


# --------------------------------------------------------------------------- compiling

_dump_ids = itertools.count()


_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]")  # (compiled at import, not per compile)


def _sanitize(name: str) -> str:
    return _UNSAFE_NAME_CHARS.sub("_", name).strip("_") or "fn"


class _Dumper:
    """Writes the jaxpr and each pipeline stage's HLO under ``EMBER_DUMP_TO``."""

    def __init__(self, directory: str, name: str):
        self.prefix = os.path.join(directory, f"{_sanitize(name)}.{next(_dump_ids)}")
        os.makedirs(directory, exist_ok=True)

    def write(self, suffix: str, text: str) -> None:
        with open(f"{self.prefix}.{suffix}", "w") as f:
            f.write(text if text.endswith("\n") else text + "\n")

    def stage(self, stage: str, text: str) -> None:
        self.write(f"{_sanitize(stage)}.hlo.txt", text)


def compile_closed_jaxpr(closed: Any, name: str, backend: str | None = None) -> LoadedExecutable:
    """Lowers, optimizes and compiles ``closed`` for ``backend``.

    Example:
        >>> exe = compile_closed_jaxpr(ember.make_jaxpr(jnp.cos)(0.0), "cos")
    """
    backend_name = canonical_name(backend or config.read("jax_default_backend"))
    stripped = _without_float0(closed)
    if stripped is not None:
        return _Float0Boundary(compile_closed_jaxpr(stripped, name, backend_name),
                               list(closed.in_avals), list(closed.out_avals))
    module_name = f"jit_{_sanitize(name)}"
    directory = os.environ.get("EMBER_DUMP_TO")
    dumper = _Dumper(directory, module_name) if directory else None
    if dumper is not None:
        dumper.write("jaxpr.txt", str(closed))
    backend_obj = get_backend(backend_name)
    consts = hoisted_constants(closed)
    # Backends with a disk cache of whole compilations (``load_lowered``) may skip the HLO
    # pipeline and code generation for a jaxpr (by its lowering fingerprint) or a lowered
    # module compiled before.
    caching = (dumper is None and hasattr(backend_obj, "caches_lowered")
               and backend_obj.caches_lowered())
    _monitoring._cache_request(caching)
    fkey = lkey = None
    if caching:
        fingerprint = lowering_fingerprint(closed, module_name)
        if fingerprint is not None:
            fkey = backend_obj.fingerprint_key(fingerprint)
            hit = _monitoring._cache_read(backend_obj.load_lowered, fkey)
            if hit is not None:
                return _loaded_hit(hit, module_name, backend_name, closed.in_avals,
                                   closed.out_avals, consts)
    lowered = _monitoring._timed(_monitoring.JAXPR_TO_MODULE_EVENT, name, lower_closed_jaxpr,
                                 closed, name=module_name)
    if caching:
        lkey = backend_obj.lowered_key(lowered.module.to_text())
        hit = _monitoring._cache_read(backend_obj.load_lowered, lkey)
        if hit is not None:
            if fkey is not None:
                backend_obj.alias_lowered(fkey, lkey)
            return _loaded_hit(hit, module_name, backend_name, closed.in_avals,
                               closed.out_avals, consts)
    _monitoring._cache_miss(caching)
    loaded = compile_module(lowered.module, name, module_name, backend_name,
                            list(closed.in_avals), list(closed.out_avals), consts, dumper)
    if caching:
        backend_obj.remember_lowered([k for k in (lkey, fkey) if k is not None],
                                     loaded.executable, loaded.cost)
    return loaded


def compile_module(module: Any, name: str, module_name: str, backend_name: str,
                   in_avals: list, out_avals: list, consts: list,
                   dumper: Any = None) -> LoadedExecutable:
    """Optimizes and compiles a lowered HLO ``module`` (what ``compile_closed_jaxpr`` does
    after lowering; ``ember.export`` compiles a parsed module with it) for ``backend_name``;
    ``name`` is the function's (for the monitoring events), ``consts`` are the hoisted
    constants its trailing parameters take."""
    module = _monitoring._timed(_monitoring.HLO_OPTIMIZE_EVENT, name, optimize, module,
                                dump=dumper.stage if dumper is not None else None)
    executable = _monitoring._timed(
        _monitoring.BACKEND_COMPILE_EVENT, name, get_backend(backend_name).compile, module,
        dump=dumper.write if dumper is not None else None)
    return LoadedExecutable(module_name, backend_name, module, executable, in_avals, out_avals,
                            consts, dict(cost_analysis(module, dot_flops=True)))


# --------------------------------------------------------------------------- float0 values

def _is_float0(atom: Any) -> bool:
    return atom.aval.dtype == dtypes.float0


def _without_float0(closed: Any) -> Any:
    """``closed`` without its ``float0`` inputs, outputs and constants (the tangent type of
    integers: no data, so nothing to compute or lower), or None when it has none, or when an
    equation reads one (lowering then reports the type)."""
    jaxpr = closed.jaxpr
    if not any(_is_float0(v) for v in (*jaxpr.invars, *jaxpr.outvars, *jaxpr.constvars)):
        return None
    if any(isinstance(v, Var) and _is_float0(v) for e in jaxpr.eqns for v in e.invars):
        return None
    constvars, consts = [], []
    for var, const in zip(jaxpr.constvars, closed.consts):
        if not _is_float0(var):
            constvars.append(var)
            consts.append(const)
    return ClosedJaxpr(Jaxpr(constvars, [v for v in jaxpr.invars if not _is_float0(v)],
                             [v for v in jaxpr.outvars if not _is_float0(v)], jaxpr.eqns),
                       consts)


class _Float0Boundary:
    """An executable of a jaxpr with ``float0`` inputs or outputs: runs the one compiled
    without them (``_without_float0``), dropping those arguments and returning NumPy
    ``float0`` zeros for those outputs, as JAX does."""

    def __init__(self, inner: LoadedExecutable, in_avals: list, out_avals: list):
        self.inner = inner
        self.in_avals, self.out_avals = in_avals, out_avals
        self._keep = [i for i, a in enumerate(in_avals) if a.dtype != dtypes.float0]

    def __getattr__(self, name: str) -> Any:  # (module, cost, backend, name...)
        if name == "inner":  # (not set yet: a copy being made)
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _merge(self, outs: list) -> list:
        it = iter(outs)
        return [np.zeros(a.shape, dtypes.float0) if a.dtype == dtypes.float0 else next(it)
                for a in self.out_avals]

    def execute(self, args: list) -> list:
        return self._merge(self.inner.execute([args[i] for i in self._keep]))

    def execute_now(self, args: list) -> list:
        return self._merge(self.inner.execute_now([args[i] for i in self._keep]))

    def execute_values(self, values: list) -> list:
        return self._merge(self.inner.execute_values([values[i] for i in self._keep]))


def _loaded_hit(hit: tuple, module_name: str, backend_name: str, in_avals: list,
                out_avals: list, consts: list) -> LoadedExecutable:
    executable, module_text, cost = hit
    return LoadedExecutable(module_name, backend_name, module_text, executable, list(in_avals),
                            list(out_avals), consts, cost)


# --------------------------------------------------------------------------- pjit impl

# id(closed jaxpr) -> (closed jaxpr, executable); the jaxpr is held so its id stays unique.
_pjit_executables: dict[int, tuple[Any, LoadedExecutable]] = {}
_PJIT_CACHE_SIZE = 256


def _pjit_impl(*values: Any, jaxpr: Any, name: str) -> list[np.ndarray]:
    hit = _pjit_executables.get(id(jaxpr))
    if hit is None or hit[0] is not jaxpr:
        if len(_pjit_executables) >= _PJIT_CACHE_SIZE:
            _pjit_executables.pop(next(iter(_pjit_executables)))
        hit = _pjit_executables[id(jaxpr)] = (jaxpr, compile_closed_jaxpr(jaxpr, name))
    return hit[1].execute_values(list(values))


pjit_p.def_impl(_pjit_impl)
