"""A native runtime for parallel kernels: worker threads that never touch Python.

``threads.Pool`` hands kernel ranges to Python threads; every hand-off wakes a sleeping
thread (tens of microseconds on a virtual machine) and takes the GIL twice. This module
builds, as LLVM IR, a small task runner in the style of an OpenMP runtime:

- ``ember_rt_start(n)`` starts ``n`` detached worker threads (``pthread_create``).
- ``ember_rt_run(fn, tables, per_task, extent, n_tasks)`` runs the kernel ``fn`` (signature
  ``void(i8** buffers, i64 lo, i64 hi)``) on ``n_tasks`` consecutive slices of ``[0,
  extent)``; task ``t`` gets ``tables[t]`` (``per_task``) or ``tables[0]`` as its buffers.
  The caller takes tasks too; workers that are awake join and take tasks from a shared
  counter. Which thread runs a task never changes what the task computes (on x86-64 the
  workers take the caller's MXCSR with the job: its denormal flushing, ``denormals``).
- Workers spin for a short while after a job (so back-to-back kernels find them awake),
  then sleep on a futex; a job wakes sleepers only when there are any. ``ember_rt_rest()``
  sends spinning workers to sleep at once: a BLAS call about to run on its own threads
  would otherwise share its cores with them.
- The caller, done with the tasks, waits for workers still in theirs: it spins ~50 µs,
  then sleeps on a futex that the last worker out bumps. A worker that late has usually
  lost its core (to a BLAS thread spinning after a GEMM, or another process); a caller
  spinning on the other core would keep the scheduler from moving it there for
  milliseconds.
- ``ember_rt_stop()`` (at exit) stops the workers before the process unloads code.

Only one job runs at a time: a second caller (another Python thread) runs its tasks itself.

The code is compiled once per machine and kept in the disk cache as a shared library (or,
without a linker, loaded through MCJIT). ``get()`` is None where the runtime cannot work
(not Linux on x86-64 or AArch64, one core, or no way to compile it): callers then use
``threads.Pool``. ``import ember`` loads a cached runtime (``load_if_cached``); a compile
calls ``prepare(start_background)``, which loads a cached runtime at once but builds a
missing one in the background (~70 ms of LLVM and ``cc``, once per
machine): until it is there, ``ready()`` is None and kernels run on ``threads.Pool``, which
computes the same results.
"""

from __future__ import annotations

import atexit
import logging
import os
import platform
import threading
from collections.abc import Callable

from ember.backends.cpu import denormals

_log = logging.getLogger(__name__)

# Cycles a worker spins (polling for the next job) before it sleeps: ~100 µs at 3 GHz.
SPIN_CYCLES = 300_000
SPIN_ITERATIONS = 200_000  # (a bound for targets whose cycle counter reads 0)
# Cycles the caller spins waiting for workers still inside a job's tasks before it sleeps
# (~50 µs). A worker that is that late has usually been preempted (another process's
# thread, or a BLAS thread spinning after a GEMM, shares its core): a spinning caller would
# keep its own core busy, so the scheduler would not move the preempted worker there for
# milliseconds. Sleeping frees the core at once.
DRAIN_SPIN_CYCLES = 150_000
_FUTEX = {"x86_64": 202, "aarch64": 98}  # the futex system call's number
_FUTEX_WAIT_PRIVATE, _FUTEX_WAKE_PRIVATE = 128, 129
_CLOSED = 1 << 31
_ACTIVE_MASK = _CLOSED - 1

_runtime: Runtime | None = None
_tried = False
_building = False  # a background build is under way (``prepare``)
_lock = threading.Lock()


class _NotBuilt(Exception):
    """The runtime is not in the disk cache (``_load(build=False)``)."""


class Runtime:
    """The loaded runtime: ``run(fn, tables, per_task, extent, n_tasks)``; ``size`` threads
    (the workers and the caller)."""

    def __init__(self, lib, size: int):
        from ember.backends.cpu.executable import _ffi
        self._lib = lib  # keeps the code loaded
        self.size = size
        self.run = _ffi.cast("void(*)(void*, char***, long, long, long)",
                             lib.address("ember_rt_run"))
        start = _ffi.cast("void(*)(long)", lib.address("ember_rt_start"))
        self._stop = _ffi.cast("void(*)(void)", lib.address("ember_rt_stop"))
        # (how many times a caller slept waiting for late workers: a diagnostic)
        self.drain_sleeps = _ffi.cast("long(*)(void)", lib.address("ember_rt_drain_sleeps"))
        self.sleepers = _ffi.cast("int(*)(void)", lib.address("ember_rt_sleepers"))
        # (``rest()``: workers spinning for the next job sleep at once; called before work
        # that runs on other threads, BLAS's, which spinning workers would slow)
        self.rest = _ffi.cast("void(*)(void)", lib.address("ember_rt_rest"))
        # (``run`` and ``rest`` as the ``char*`` arguments native loops and steps take)
        self.run_address = _ffi.cast("char*", self.run)
        self.rest_address = _ffi.cast("char*", self.rest)
        self._pid = os.getpid()
        start(size - 1)
        atexit.register(self.stop)

    def stop(self) -> None:
        """Stops the workers (at exit; only in the process that started them)."""
        if os.getpid() == self._pid:
            self._stop()


def _forget_in_child() -> None:
    """A forked child has none of the workers: it uses the Python pool."""
    global _runtime, _tried, _building
    _runtime, _tried, _building = None, True, False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def get() -> Runtime | None:
    """The process's runtime (loaded, or built, at the first call), or None where it is
    unavailable."""
    global _runtime, _tried, _building
    if _tried:
        return _runtime
    with _lock:
        if not _tried:
            try:
                _runtime = _load()
            except Exception as e:  # noqa: BLE001 - the Python pool still works
                _log.debug("parallel runtime unavailable: %s", e)
                _runtime = None
            _tried, _building = True, False
    return _runtime


def ready() -> Runtime | None:
    """The runtime if it is loaded; None while a background build is under way (callers
    use ``threads.Pool`` meanwhile) or where it is unavailable."""
    if _tried:
        return _runtime
    if _building:
        return None
    return get()


def prepare(start_background: Callable[[Callable[[], object]], None]) -> None:
    """Makes the runtime available to the kernels about to run: loads it now from the
    disk cache, or, when it must be built, hands ``get`` to ``start_background`` (which
    runs it on another thread) so that the build is off the caller's path."""
    global _building
    if _tried or _building:  # (every large eager op calls this: no lock once settled)
        return
    with _lock:
        if _load_cached() is not False:
            return
        _building = True
    start_background(get)


def load_if_cached() -> None:
    """Loads the runtime now if the disk cache has it, leaving a missing one to the first
    compile's ``prepare``. ``import ember`` calls this (``backends.cpu.preload``): started
    then, the workers are up and their stacks touched before a program's first parallel
    kernel, which otherwise waited ~0.5 ms for a thread started just before it."""
    with _lock:
        _load_cached()


def _load_cached() -> bool | None:
    """(Under ``_lock``.) None when the runtime was tried before or is being built; else
    loads it from the disk cache and returns True, or False when it is not built yet."""
    global _runtime, _tried
    if _tried or _building:
        return None
    try:
        _runtime = _load(build=False)
    except _NotBuilt:
        return False
    except Exception as e:  # noqa: BLE001 - the Python pool still works
        _log.debug("parallel runtime unavailable: %s", e)
        _runtime = None
    _tried = True
    return True


def _load(build: bool = True) -> Runtime | None:
    from ember import _threads as threads
    from ember.backends.cpu import native_lib
    size = threads.cpu_count()
    machine = platform.machine()
    if size < 2 or machine not in _FUTEX or not native_lib.available():
        return None
    if os.environ.get("EMBER_CPU_NATIVE_THREADS", "1") == "0":
        return None
    from ember.backends.cpu import _source_stamp
    # (The backend's source stamp: editing this generator never reuses a stale library.)
    lib = native_lib.load_or_build(
        f"ember-cpu-parallel-runtime:{_source_stamp()}",
        lambda: runtime_ir(_FUTEX[machine], machine == "x86_64"), 2,
        native_lib.linker() is not None, build=build)
    if lib is None:
        raise _NotBuilt
    return Runtime(lib, size)


def runtime_ir(futex_number: int, x86: bool, drain_spin_cycles: int = DRAIN_SPIN_CYCLES,
               spin_cycles: int = SPIN_CYCLES, spin_iterations: int = SPIN_ITERATIONS) -> str:
    """The runtime's LLVM module (text); ``drain_spin_cycles``: how long a caller spins
    waiting for late workers before it sleeps (tests pass 0 to sleep at once);
    ``spin_cycles`` and ``spin_iterations``: how long a worker spins for the next job."""
    from llvmlite import ir

    i8p = ir.IntType(8).as_pointer()
    i32, i64 = ir.IntType(32), ir.IntType(64)
    tables_t = i8p.as_pointer().as_pointer()
    kernel_t = ir.FunctionType(ir.VoidType(), [i8p.as_pointer(), i64, i64])
    m = ir.Module(name="ember_parallel_runtime")

    def global_(name, ty, value=0):
        g = ir.GlobalVariable(m, ty, name)
        g.linkage = "internal"
        g.initializer = ir.Constant(ty, value) if not isinstance(ty, ir.PointerType) \
            else ir.Constant(ty, None)
        g.align = 64  # one cache line each: no false sharing between the hot words
        return g

    state = global_("rt_state", i64)      # generation << 32 | closed << 31 | active workers
    gen32 = global_("rt_gen32", i32)      # the generation's low bits: the futex word
    sleepers = global_("rt_sleepers", i32)
    quit_ = global_("rt_quit", i32)
    alive = global_("rt_alive", i32)
    busy = global_("rt_busy", i32)
    next_task = global_("rt_next", i64)
    job_fn = global_("rt_fn", kernel_t.as_pointer())
    job_tables = global_("rt_tables", tables_t)
    job_per_task = global_("rt_per_task", i64)
    job_extent = global_("rt_extent", i64)
    job_tasks = global_("rt_tasks", i64)
    job_mxcsr = global_("rt_mxcsr", i32)  # the caller's MXCSR (x86-64)
    drain_waiting = global_("rt_drain_waiting", i32)  # the caller sleeps in the drain
    drained_word = global_("rt_drained", i32)  # the drain's futex word (bumped to wake it)
    drain_sleeps = global_("rt_drain_sleeps", i64)  # how often a caller slept (diagnostics)
    rest = global_("rt_rest", i32)  # bumped by ``ember_rt_rest``: spinning workers sleep

    syscall = ir.Function(m, ir.FunctionType(i64, [i64], var_arg=True), "syscall")
    thread_fn_t = ir.FunctionType(i8p, [i8p])
    pthread_create = ir.Function(
        m, ir.FunctionType(i32, [i64.as_pointer(), i8p, thread_fn_t.as_pointer(), i8p]),
        "pthread_create")
    pthread_detach = ir.Function(m, ir.FunctionType(i32, [i64]), "pthread_detach")
    sched_yield = ir.Function(m, ir.FunctionType(i32, []), "sched_yield")
    cycles = ir.Function(m, ir.FunctionType(i64, []), "llvm.readcyclecounter")
    pause = (ir.Function(m, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause")
             if x86 else None)

    def c64(v):
        return ir.Constant(i64, v)

    def c32(v):
        return ir.Constant(i32, v)

    def load(b, ptr):
        return b.load_atomic(ptr, "seq_cst", ptr.type.pointee.width // 8)

    def store(b, value, ptr):
        b.store_atomic(value, ptr, "seq_cst", value.type.width // 8)

    def relax(b):
        if pause is not None:
            b.call(pause, [])

    def futex(b, op, value, word=gen32):  # (variadic: every argument a full register)
        b.call(syscall, [c64(futex_number), b.bitcast(word, i8p), c64(op),
                         b.zext(value, i64), ir.Constant(i8p, None)])

    # void task(fn, tables, per_task, extent, n_tasks, t): runs task t of a job.
    task = ir.Function(m, ir.FunctionType(ir.VoidType(), [kernel_t.as_pointer(), tables_t,
                                                          i64, i64, i64, i64]), "rt_task")
    task.linkage = "internal"
    fn, tables, per_task, extent, n_tasks, t = task.args
    b = ir.IRBuilder(task.append_basic_block("entry"))
    lo = b.sdiv(b.mul(t, extent), n_tasks)
    hi = b.sdiv(b.mul(b.add(t, c64(1)), extent), n_tasks)
    index = b.select(b.icmp_signed("!=", per_task, c64(0)), t, c64(0))
    b.call(fn, [b.load(b.gep(tables, [index])), lo, hi])
    b.ret_void()

    # void run_tasks(): takes tasks of the published job from the shared counter until none
    # is left.
    run_tasks = ir.Function(m, ir.FunctionType(ir.VoidType(), []), "rt_run_tasks")
    run_tasks.linkage = "internal"
    b = ir.IRBuilder(run_tasks.append_basic_block("entry"))
    loop, body, done = (run_tasks.append_basic_block(n) for n in ("loop", "body", "done"))
    b.branch(loop)
    b.position_at_end(loop)
    t = b.atomic_rmw("add", next_task, c64(1), "seq_cst")
    n_tasks = b.load(job_tasks)
    b.cbranch(b.icmp_signed(">=", t, n_tasks), done, body)
    b.position_at_end(body)
    b.call(task, [b.load(job_fn), b.load(job_tables), b.load(job_per_task),
                  b.load(job_extent), n_tasks, t])
    b.branch(loop)
    b.position_at_end(done)
    b.ret_void()

    # i8* worker(i8*): join jobs as they are published; spin, then sleep, in between.
    worker = ir.Function(m, thread_fn_t, "rt_worker")
    worker.linkage = "internal"
    blocks = {n: worker.append_basic_block(n) for n in (
        "entry", "outer", "stop", "check", "join", "cas", "work", "wait", "spin", "spin_body",
        "sleep")}
    b = ir.IRBuilder(blocks["entry"])
    seen = b.alloca(i64)
    spun = b.alloca(i64)
    started = b.alloca(i64)
    rest_seen = b.alloca(i32)
    b.store(b.lshr(load(b, state), c64(32)), seen)
    b.branch(blocks["outer"])

    b.position_at_end(blocks["outer"])
    b.cbranch(b.icmp_signed("!=", load(b, quit_), c32(0)), blocks["stop"], blocks["check"])

    b.position_at_end(blocks["stop"])
    b.atomic_rmw("sub", alive, c32(1), "seq_cst")
    b.ret(ir.Constant(i8p, None))

    b.position_at_end(blocks["check"])
    s = load(b, state)
    g = b.lshr(s, c64(32))
    b.cbranch(b.icmp_unsigned("!=", g, b.load(seen)), blocks["join"], blocks["wait"])

    # A new generation: join unless the caller has closed it (then it needs nobody).
    b.position_at_end(blocks["join"])
    b.store(g, seen)
    b.branch(blocks["cas"])
    b.position_at_end(blocks["cas"])
    cur = b.phi(i64)
    cur.add_incoming(s, blocks["join"])
    open_ = b.and_(b.icmp_unsigned("==", b.and_(cur, c64(_CLOSED)), c64(0)),
                   b.icmp_unsigned("==", b.lshr(cur, c64(32)), g))
    try_join = worker.append_basic_block("try_join")
    b.cbranch(open_, try_join, blocks["outer"])
    b.position_at_end(try_join)
    pair = b.cmpxchg(state, cur, b.add(cur, c64(1)), "seq_cst", "seq_cst")
    cur.add_incoming(b.extract_value(pair, 0), try_join)
    b.cbranch(b.extract_value(pair, 1), blocks["work"], blocks["cas"])

    b.position_at_end(blocks["work"])
    if x86:  # (the job's floating-point mode: the caller's, see ``ember_rt_run``)
        denormals.emit_mxcsr(b, m, "ldmxcsr", job_mxcsr)
    b.call(run_tasks, [])
    before = b.atomic_rmw("sub", state, c64(1), "seq_cst")
    # The last worker out wakes a caller sleeping in its drain.
    last = b.icmp_unsigned("==", b.and_(before, c64(_ACTIVE_MASK)), c64(1))
    wake_caller = worker.append_basic_block("wake_caller")
    b.cbranch(b.and_(last, b.icmp_signed("!=", load(b, drain_waiting), c32(0))),
              wake_caller, blocks["outer"])
    b.position_at_end(wake_caller)
    b.atomic_rmw("add", drained_word, c32(1), "seq_cst")
    futex(b, _FUTEX_WAKE_PRIVATE, c32(1), drained_word)
    b.branch(blocks["outer"])

    # Nothing new: spin a while, then sleep until the futex word changes.
    b.position_at_end(blocks["wait"])
    b.store(c64(0), spun)
    b.store(b.call(cycles, []), started)
    b.store(load(b, rest), rest_seen)
    b.branch(blocks["spin"])
    b.position_at_end(blocks["spin"])
    new_job = b.icmp_unsigned("!=", b.lshr(load(b, state), c64(32)), b.load(seen))
    quitting = b.icmp_signed("!=", load(b, quit_), c32(0))
    n_spun = b.load(spun)
    spent = b.sub(b.call(cycles, []), b.load(started))
    tired = b.or_(b.or_(b.icmp_signed(">=", n_spun, c64(spin_iterations)),
                        b.icmp_unsigned(">=", spent, c64(spin_cycles))),
                  b.icmp_unsigned("!=", load(b, rest), b.load(rest_seen)))
    b.cbranch(b.or_(new_job, quitting), blocks["outer"], blocks["spin_body"])
    b.position_at_end(blocks["spin_body"])
    relax(b)
    b.store(b.add(n_spun, c64(1)), spun)
    b.cbranch(tired, blocks["sleep"], blocks["spin"])
    b.position_at_end(blocks["sleep"])
    b.atomic_rmw("add", sleepers, c32(1), "seq_cst")
    # (Sleeps only while the futex word still holds the generation this worker has seen.)
    futex(b, _FUTEX_WAIT_PRIVATE, b.trunc(b.load(seen), i32))
    b.atomic_rmw("sub", sleepers, c32(1), "seq_cst")
    b.branch(blocks["outer"])

    # void ember_rt_start(i64 n)
    start = ir.Function(m, ir.FunctionType(ir.VoidType(), [i64]), "ember_rt_start")
    b = ir.IRBuilder(start.append_basic_block("entry"))
    tid = b.alloca(i64)
    i = b.alloca(i64)
    b.store(c64(0), i)
    head, body, end = (start.append_basic_block(n) for n in ("head", "body", "end"))
    b.branch(head)
    b.position_at_end(head)
    b.cbranch(b.icmp_signed("<", b.load(i), start.args[0]), body, end)
    b.position_at_end(body)
    ok = b.call(pthread_create, [tid, ir.Constant(i8p, None), worker, ir.Constant(i8p, None)])
    created, next_ = start.append_basic_block("created"), start.append_basic_block("next")
    b.cbranch(b.icmp_signed("==", ok, c32(0)), created, end)
    b.position_at_end(created)
    b.atomic_rmw("add", alive, c32(1), "seq_cst")
    b.call(pthread_detach, [b.load(tid)])
    b.branch(next_)
    b.position_at_end(next_)
    b.store(b.add(b.load(i), c64(1)), i)
    b.branch(head)
    b.position_at_end(end)
    b.ret_void()

    # void ember_rt_run(fn, tables, per_task, extent, n_tasks)
    run = ir.Function(m, ir.FunctionType(ir.VoidType(), [i8p, tables_t, i64, i64, i64]),
                      "ember_rt_run")
    fn, tables, per_task, extent, n_tasks = run.args
    b = ir.IRBuilder(run.append_basic_block("entry"))
    own, alone = run.append_basic_block("own"), run.append_basic_block("alone")
    pair = b.cmpxchg(busy, c32(0), c32(1), "seq_cst", "seq_cst")
    b.cbranch(b.extract_value(pair, 1), own, alone)

    b.position_at_end(own)
    if x86:  # Workers run the tasks in the caller's floating-point mode (MXCSR): flushing
        # denormals or not (``denormals``), every thread computes a task alike.
        denormals.emit_mxcsr(b, m, "stmxcsr", job_mxcsr)
    b.store(b.bitcast(fn, kernel_t.as_pointer()), job_fn)
    b.store(tables, job_tables)
    b.store(per_task, job_per_task)
    b.store(extent, job_extent)
    b.store(n_tasks, job_tasks)
    store(b, c64(0), next_task)
    generation = b.add(b.lshr(load(b, state), c64(32)), c64(1))
    store(b, b.shl(generation, c64(32)), state)  # (no worker is active here)
    store(b, b.trunc(generation, i32), gen32)
    wake, go = run.append_basic_block("wake"), run.append_basic_block("go")
    b.cbranch(b.icmp_signed(">", load(b, sleepers), c32(0)), wake, go)
    b.position_at_end(wake)
    futex(b, _FUTEX_WAKE_PRIVATE, c32(0x7FFFFFFF))
    b.branch(go)
    b.position_at_end(go)
    b.call(run_tasks, [])
    b.atomic_rmw("or", state, c64(_CLOSED), "seq_cst")
    # Wait for the workers still in their tasks: spin a while, then sleep until the last
    # one out wakes this thread (``rt_drain_waiting`` and the state are each written before
    # the other is read, so either the worker sees the flag or this thread sees no worker).
    drain, drained = run.append_basic_block("drain"), run.append_basic_block("drained")
    drain_started = b.call(cycles, [])
    b.branch(drain)
    b.position_at_end(drain)

    def any_active(b):
        return b.icmp_unsigned("!=", b.and_(load(b, state), c64(_ACTIVE_MASK)), c64(0))

    relax_block, sleep_block = (run.append_basic_block(n) for n in ("relax", "sleep"))
    b.cbranch(any_active(b), relax_block, drained)
    b.position_at_end(relax_block)
    relax(b)
    spent = b.sub(b.call(cycles, []), drain_started)
    b.cbranch(b.icmp_unsigned(">=", spent, c64(drain_spin_cycles)), sleep_block, drain)
    b.position_at_end(sleep_block)
    seen_drained = load(b, drained_word)
    store(b, c32(1), drain_waiting)
    do_wait, woke = run.append_basic_block("sleep.wait"), run.append_basic_block("sleep.woke")
    b.cbranch(any_active(b), do_wait, woke)
    b.position_at_end(do_wait)
    b.atomic_rmw("add", drain_sleeps, c64(1), "monotonic")
    futex(b, _FUTEX_WAIT_PRIVATE, seen_drained, drained_word)
    b.branch(woke)
    b.position_at_end(woke)
    store(b, c32(0), drain_waiting)
    b.branch(drain)
    b.position_at_end(drained)
    store(b, c32(0), busy)
    b.ret_void()

    # (Another caller holds the workers: run every task here, in order.)
    b.position_at_end(alone)
    k = b.alloca(i64)
    b.store(c64(0), k)
    ahead, abody, aend = (run.append_basic_block(n) for n in ("a.head", "a.body", "a.end"))
    b.branch(ahead)
    b.position_at_end(ahead)
    t = b.load(k)
    b.cbranch(b.icmp_signed("<", t, n_tasks), abody, aend)
    b.position_at_end(abody)
    b.call(task, [b.bitcast(fn, kernel_t.as_pointer()), tables, per_task, extent, n_tasks, t])
    b.store(b.add(t, c64(1)), k)
    b.branch(ahead)
    b.position_at_end(aend)
    b.ret_void()

    # void ember_rt_rest(): workers spinning for the next job sleep now (their cores are
    # about to be someone else's: BLAS's threads).
    rest_fn = ir.Function(m, ir.FunctionType(ir.VoidType(), []), "ember_rt_rest")
    b = ir.IRBuilder(rest_fn.append_basic_block("entry"))
    b.atomic_rmw("add", rest, c32(1), "seq_cst")
    b.ret_void()

    # i64 ember_rt_drain_sleeps(): how many times a caller has slept waiting for workers.
    sleeps_fn = ir.Function(m, ir.FunctionType(i64, []), "ember_rt_drain_sleeps")
    b = ir.IRBuilder(sleeps_fn.append_basic_block("entry"))
    b.ret(load(b, drain_sleeps))

    # i32 ember_rt_sleepers(): how many workers sleep now (a diagnostic).
    sleepers_fn = ir.Function(m, ir.FunctionType(i32, []), "ember_rt_sleepers")
    b = ir.IRBuilder(sleepers_fn.append_basic_block("entry"))
    b.ret(load(b, sleepers))

    # void ember_rt_stop(): workers leave their loops; waits (yielding) until they have.
    stop = ir.Function(m, ir.FunctionType(ir.VoidType(), []), "ember_rt_stop")
    b = ir.IRBuilder(stop.append_basic_block("entry"))
    store(b, c32(1), quit_)
    b.atomic_rmw("add", gen32, c32(1), "seq_cst")
    futex(b, _FUTEX_WAKE_PRIVATE, c32(0x7FFFFFFF))
    sh, sb, se = (stop.append_basic_block(n) for n in ("head", "body", "end"))
    tries = b.alloca(i64)
    b.store(c64(0), tries)
    b.branch(sh)
    b.position_at_end(sh)
    n_tries = b.load(tries)
    more = b.and_(b.icmp_signed(">", load(b, alive), c32(0)),
                  b.icmp_signed("<", n_tries, c64(1_000_000)))
    b.cbranch(more, sb, se)
    b.position_at_end(sb)
    b.call(sched_yield, [])
    b.store(b.add(n_tries, c64(1)), tries)
    b.branch(sh)
    b.position_at_end(se)
    b.ret_void()
    return str(m)
