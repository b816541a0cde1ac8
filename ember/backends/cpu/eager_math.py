"""Native kernels for eager float math: ``jnp.exp(x)`` outside jit runs the backend's vector math.

Eager primitives run NumPy kernels (``runtime.eager``). For some float functions NumPy has no
fast kernel (``erf`` and ``erfc`` have only a float64 reference; ``logistic`` and ``rsqrt``
take several passes) or a slower one than the code ``vecmath`` emits (``exp``, ``expm1``).
The CPU backend registers this module's ``kernel`` with ``compiler.eval_elementwise``
(``register_native_math``): the eager impls of the functions in ``OPCODES`` then call a loop
compiled from the same ``vecmath.emit_unary`` as the jit kernels, so eager and jitted code
give the same bits for them. (The other functions stay on NumPy: on AVX-512 hosts NumPy's
float32 sine, tanh, tan, cbrt and inverse functions are as fast as ``vecmath``'s or faster.)

Each (opcode, dtype) is one small library, compiled at its first use (~20-60 ms of LLVM and
``cc``) and kept in the disk cache, so a later process loads it in well under a millisecond.
A library has two entry points over contiguous buffers:

- ``<name>(x, y, n)``: ``y[i] = f(x[i])`` for ``i < n``: one call, no pointer table;
- ``<name>_range(buffers, lo, hi)``: the same on ``[lo, hi)``, the signature of the
  parallel runtime's tasks, for arrays large enough to split across the cores.

Example:
    >>> run = kernel("exponential", np.dtype(np.float32))
    >>> run(np.zeros(3, np.float32))
    array([1., 1., 1.], dtype=float32)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import numpy as np

_log = logging.getLogger(__name__)

# The functions with an eager native kernel (measured on 1e4 elements against NumPy's, float32
# and float64: exp and expm1 1.3-2x faster, logistic and rsqrt 2-7x, log1p 1.7-3.4x; erf and
# erfc 8-12 us against ~1 ms for the evaluator's element-by-element float64 reference, ~100x;
# lgamma, digamma and erf_inv likewise replace Python-level references).
OPCODES = frozenset({"exponential", "exponential_minus_one", "logistic", "rsqrt", "erf", "erfc",
                     "log_plus_one", "lgamma", "digamma", "erf_inv"})
# Binary functions with an eager native kernel, on two arrays of one shape or an array and a
# single value: XLA's maximum and minimum (NaN propagates, -0 below +0) in one pass, where
# NumPy's kernel needs a second pass to order the zeros (1e4 float32: 5.1-5.7 us -> ~2 us).
# (Not the arithmetic operations: with two NaN operands, which NaN a compiled loop returns
# depends on how the compiler ordered the operands, so NaN signs would differ from NumPy's.)
BINARY_OPCODES = frozenset({"maximum", "minimum"})
# Threefry-2x32 on uint32 counters (four operands, two results: ``eager_threefry``).
THREEFRY = "threefry2x32"
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# Elements from which a call is split across the parallel runtime's threads (each hand-off
# costs a few microseconds; the cheapest functions take ~0.1 ns per element).
PARALLEL_MIN_ELEMENTS = 1 << 16
TASKS_PER_THREAD = 4

_kernels: dict[tuple[str, np.dtype], Callable | None] = {}
_lock = threading.Lock()


def kernel(opcode: str, dtype: np.dtype) -> Callable | None:
    """``run(x)``: the unary ``opcode`` applied to the float32/float64 array ``x``, as a new
    C-ordered array; for a binary opcode, ``run(x, y)``, or None where the operands' layout
    has no native loop (see ``_make_binary_runner``). None for other opcodes and dtypes, or
    where no native code can be made."""
    key = (opcode, dtype)
    try:
        return _kernels[key]
    except KeyError:
        pass
    threefry = opcode == THREEFRY and dtype == np.uint32
    if not threefry and (opcode not in OPCODES | BINARY_OPCODES or dtype not in DTYPES):
        return None
    with _lock:
        if key not in _kernels:
            try:
                lib, name = _load(opcode, dtype)
                if threefry:
                    from ember.backends.cpu.eager_threefry import make_runner as make
                else:
                    make = _make_binary_runner if opcode in BINARY_OPCODES else _make_runner
                _kernels[key] = make(lib, name, dtype)
            except Exception as e:  # noqa: BLE001 - NumPy's kernels still work
                _log.debug("no native eager kernel for %s %s: %s", opcode, dtype, e)
                _kernels[key] = None
    return _kernels[key]


def _symbol(opcode: str, dtype: np.dtype) -> str:
    return f"ember_eager_{opcode}_{dtype.name}"


def kernel_ir(opcode: str, dtype: np.dtype) -> str:
    """The LLVM IR of the (opcode, dtype) library (see the module docstring)."""
    from llvmlite import ir

    from ember.backends.cpu import vecmath

    ptr = (ir.FloatType() if dtype == np.float32 else ir.DoubleType()).as_pointer()
    module = ir.Module(name=_symbol(opcode, dtype))

    def body(b, pointers, i, _):
        x, y = pointers
        value = vecmath.emit_unary(b, opcode, b.load(b.gep(x, [i], inbounds=True)))
        b.store(value, b.gep(y, [i], inbounds=True))

    emit_kernel(module, _symbol(opcode, dtype), [ptr, ptr], body)
    return str(module)


def emit_kernel(module, name: str, pointer_types: list, body: Callable,
                prologue: Callable | None = None) -> None:
    """Adds to ``module`` an elementwise loop over buffers of ``pointer_types`` and its two
    entry points (see the module docstring): ``name(*buffers, n)`` and
    ``name_range(buffers, lo, hi)``. ``body(b, pointers, i, state)`` emits iteration ``i``;
    ``state`` is what ``prologue(b, pointers)`` emitted once before the loop (or None). The
    pointers are noalias: the outputs are new arrays."""
    from llvmlite import ir

    i64, i8p = ir.IntType(64), ir.IntType(8).as_pointer()
    loop_fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [*pointer_types, i64, i64]),
                          name + "_loop")
    loop_fn.linkage = "internal"
    loop_fn.attributes.add("alwaysinline")
    *pointers, lo, hi = loop_fn.args
    for arg in pointers:
        arg.add_attribute("noalias")
    entry = loop_fn.append_basic_block("entry")
    loop = loop_fn.append_basic_block("body")
    done = loop_fn.append_basic_block("done")
    b = ir.IRBuilder(entry)
    state = prologue(b, pointers) if prologue is not None else None
    b.cbranch(b.icmp_signed("<", lo, hi), loop, done)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(lo, entry)
    body(b, pointers, i, state)
    nxt = b.add(i, ir.Constant(i64, 1), flags=["nsw"])
    i.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, hi), loop, done)
    b.position_at_end(done)
    b.ret_void()

    k = len(pointer_types)
    direct = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p] * k + [i64]), name)
    b = ir.IRBuilder(direct.append_basic_block("entry"))
    b.call(loop_fn, [b.bitcast(a, t) for a, t in zip(direct.args[:k], pointer_types)]
           + [ir.Constant(i64, 0), direct.args[k]])
    b.ret_void()

    ranged = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p.as_pointer(), i64, i64]),
                         name + "_range")
    bufs, lo, hi = ranged.args
    b = ir.IRBuilder(ranged.append_basic_block("entry"))
    loaded = [b.bitcast(b.load(b.gep(bufs, [ir.Constant(i64, j)], inbounds=True)), t)
              for j, t in enumerate(pointer_types)]
    b.call(loop_fn, [*loaded, lo, hi])
    b.ret_void()


# Layouts of a binary kernel's operands: two arrays of one shape, or one of them a single
# value read once.
BOTH, SECOND_SCALAR, FIRST_SCALAR = 0, 1, 2


def binary_kernel_ir(opcode: str, dtype: np.dtype) -> str:
    """The LLVM IR of the binary (opcode, dtype) library: ``<name>(x, y, out, n, layout)``
    and ``<name>_range(buffers, lo, hi)`` with ``buffers`` = (x, y, out, &layout), where
    ``layout`` is ``BOTH``, ``SECOND_SCALAR`` or ``FIRST_SCALAR``; one loop per layout."""
    from llvmlite import ir

    from ember.backends.cpu import scalar_ops

    ty = ir.FloatType() if dtype == np.float32 else ir.DoubleType()
    i64, i8p, ptr = ir.IntType(64), ir.IntType(8).as_pointer(), ty.as_pointer()
    module = ir.Module(name=_symbol(opcode, dtype))
    name = _symbol(opcode, dtype)
    is_max = opcode == "maximum"

    loop_fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr, i64, i64,
                                                                 i64]), name + "_loop")
    loop_fn.linkage = "internal"
    loop_fn.attributes.add("alwaysinline")
    loop_fn.args[2].add_attribute("noalias")  # (the output is a new array)
    x, y, out, lo, hi, layout = loop_fn.args
    b = ir.IRBuilder(loop_fn.append_basic_block("entry"))
    done = loop_fn.append_basic_block("done")
    loops = [loop_fn.append_basic_block(f"layout{k}") for k in range(3)]
    switch = b.switch(layout, done)
    for k, block in enumerate(loops):
        switch.add_case(ir.Constant(i64, k), block)
        b.position_at_end(block)
        first = b.load(x) if k == FIRST_SCALAR else None  # (read once, outside the loop)
        second = b.load(y) if k == SECOND_SCALAR else None
        head, body = (loop_fn.append_basic_block(f"{s}{k}") for s in ("head", "body"))
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(i64)
        i.add_incoming(lo, block)
        b.cbranch(b.icmp_signed("<", i, hi), body, done)
        b.position_at_end(body)
        xi = first if first is not None else b.load(b.gep(x, [i], inbounds=True))
        yi = second if second is not None else b.load(b.gep(y, [i], inbounds=True))
        b.store(scalar_ops.max_min(b, xi, yi, dtype, is_max), b.gep(out, [i], inbounds=True))
        i.add_incoming(b.add(i, ir.Constant(i64, 1), flags=["nsw"]), body)
        b.branch(head)
    b.position_at_end(done)
    b.ret_void()

    direct = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p, i8p, i8p, i64, i64]),
                         name)
    b = ir.IRBuilder(direct.append_basic_block("entry"))
    x, y, out, n, layout = direct.args
    b.call(loop_fn, [b.bitcast(x, ptr), b.bitcast(y, ptr), b.bitcast(out, ptr),
                     ir.Constant(i64, 0), n, layout])
    b.ret_void()

    ranged = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p.as_pointer(), i64, i64]),
                         name + "_range")
    bufs, lo, hi = ranged.args
    b = ir.IRBuilder(ranged.append_basic_block("entry"))
    raw = [b.load(b.gep(bufs, [ir.Constant(i64, k)], inbounds=True)) for k in range(4)]
    layout = b.load(b.bitcast(raw[3], i64.as_pointer()))
    b.call(loop_fn, [b.bitcast(r, ptr) for r in raw[:3]] + [lo, hi, layout])
    b.ret_void()
    return str(module)


def _load(opcode: str, dtype: np.dtype):
    """(library, name): the compiled code of (opcode, dtype), from the disk cache or built
    (``native_lib.load_or_build``; object code through MCJIT where the backend links no
    shared libraries, ``EMBER_CPU_SHARED_LIBRARIES=0``)."""
    from ember.backends.cpu import _shared_libraries_enabled, _source_stamp, native_lib

    name = _symbol(opcode, dtype)
    if opcode == THREEFRY:
        from ember.backends.cpu.eager_threefry import kernel_ir as threefry_ir
        build = lambda: threefry_ir(name)  # noqa: E731
    else:
        make_ir = binary_kernel_ir if opcode in BINARY_OPCODES else kernel_ir
        build = lambda: make_ir(opcode, dtype)  # noqa: E731
    lib = native_lib.load_or_build(f"ember-eager-math:{name}:{_source_stamp()}", build, 3,
                                   _shared_libraries_enabled())
    return lib, name


def start_thread(work: Callable[[], object]) -> None:
    """Runs ``work`` on a daemon thread (``parallel_runtime.prepare``'s background build);
    shared with the other native library kernels (FFT, small linear algebra, threefry)."""
    threading.Thread(target=work, name="ember-parallel-runtime", daemon=True).start()


def run_split(ranged, pointers: list, n: int) -> None:
    """``ranged(buffers, lo, hi)`` over ``[0, n)`` split across the cores: on the native
    runtime, loaded from the disk cache, or built in the background while the Python pool
    runs the ranges (the same results either way)."""
    from ember import _threads as threads
    from ember.backends.cpu import parallel_runtime
    from ember.backends.cpu.executable import _ffi

    parallel_runtime.prepare(start_thread)
    runtime = parallel_runtime.ready()
    bufs = _ffi.new("char*[]", pointers)
    if runtime is not None:
        runtime.run(ranged, _ffi.new("char**[]", [bufs]), 0, n,
                    min(n, runtime.size * TASKS_PER_THREAD))
    else:
        pool = threads.pool()
        pool.run(lambda lo, hi: ranged(bufs, lo, hi), threads.split(n, pool.size))


def _make_runner(lib, name: str, dtype: np.dtype) -> Callable[[np.ndarray], np.ndarray]:
    from ember.backends.cpu import array_call
    from ember.backends.cpu.executable import _ffi

    direct = array_call.function(lib.address(name), 2, array_call.SIZE)
    ranged = _ffi.cast("void(*)(char**, long, long)", lib.address(name + "_range"))
    fb, empty, asarray, ndarray = _ffi.from_buffer, np.empty, np.asarray, np.ndarray

    def run(x: np.ndarray) -> np.ndarray:
        if type(x) is not ndarray or x.dtype is not dtype or not x.flags.c_contiguous:
            x = asarray(x, dtype, order="C")  # (~0.2 us: only where needed)
        y = empty(x.shape, dtype)
        if x.size < PARALLEL_MIN_ELEMENTS:
            return direct(x, y)  # (holds the GIL: short)
        run_split(ranged, [fb(x), fb(y)], x.size)
        return y

    run._library = lib  # keeps the code loaded while the runner lives
    run.fp_quiet = True  # (native loops leave NumPy's floating-point error state alone)
    return run


def _broadcasts_into(small: tuple, big: tuple) -> bool:
    """Whether broadcasting ``small`` against ``big`` gives ``big``."""
    return not small or (len(small) <= len(big) and all(
        s == 1 or s == b for s, b in zip(reversed(small), reversed(big))))


def _no_loop(x, y) -> None:
    return None


def _make_binary_runner(lib, name: str, dtype: np.dtype,
                        fallback: Callable = _no_loop) -> Callable:
    """``run(x, y)``: the kernel where it has a loop for the operands' layout, else
    ``fallback(x, y)`` (by default None). ``run.with_fallback(f)`` is the runner with ``f``."""
    from ember.backends.cpu import array_call
    from ember.backends.cpu.executable import _ffi

    # (one direct call per layout: the layout is the call's extra argument)
    direct = [array_call.function(lib.address(name), 3, array_call.SIZE_EXTRA, layout)
              for layout in (BOTH, SECOND_SCALAR, FIRST_SCALAR)]
    ranged = _ffi.cast("void(*)(char**, long, long)", lib.address(name + "_range"))
    fb, empty, ndarray = _ffi.from_buffer, np.empty, np.ndarray

    def single(v) -> np.ndarray | None:
        """``v`` as one contiguous value when all its elements are one (a size-1 array or
        a broadcast view, every stride 0), else None."""
        if v.size == 1:
            return v if v.flags.c_contiguous else v.reshape(())
        if v.size and not any(v.strides):
            return np.asarray(v[(0,) * v.ndim])
        return None

    def run(x, y) -> np.ndarray | None:
        if type(x) is not ndarray or type(y) is not ndarray or x.dtype is not dtype \
                or y.dtype is not dtype:
            return fallback(x, y)
        shape = x.shape
        if shape == y.shape and x.flags.c_contiguous and y.flags.c_contiguous:
            layout = BOTH
        elif not y.shape and x.flags.c_contiguous:  # (an array and a 0-d value: common)
            layout = SECOND_SCALAR
        elif x.flags.c_contiguous and (one := single(y)) is not None \
                and _broadcasts_into(y.shape, shape):
            layout, y = SECOND_SCALAR, one
        elif y.flags.c_contiguous and (one := single(x)) is not None \
                and _broadcasts_into(x.shape, y.shape):
            layout, shape, x = FIRST_SCALAR, y.shape, one
        else:
            return fallback(x, y)  # (NumPy's code broadcasts the other layouts)
        out = empty(shape, dtype)
        n = out.size
        if n < PARALLEL_MIN_ELEMENTS:
            return direct[layout](x, y, out)  # (holds the GIL: short)
        code = np.array(layout, np.int64)
        run_split(ranged, [fb(x), fb(y), fb(out), fb(code)], n)
        return out

    run._library = lib  # keeps the code loaded while the runner lives
    run.with_fallback = lambda f: _make_binary_runner(lib, name, dtype, f)
    # Native loops leave NumPy's floating-point error state alone: no warnings, unless the
    # fallback may warn.
    run.fp_quiet = fallback is _no_loop or getattr(fallback, "fp_quiet", False)
    return run
