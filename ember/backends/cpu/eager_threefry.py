"""A native kernel for the eager ``threefry2x32`` primitive (the hash behind ``ember.random``).

Eagerly, ``random.bits``/``uniform``/``normal``/``split`` hash their counters with
``threefry2x32``, whose NumPy impl takes ~120 array passes (20 rounds of adds, xors and
rotations): ~150 us for 1e3 counters, where JAX's compiled samplers take ~100 us in all. This
kernel does the hash in one pass (~1 us for 1e3 counters), from the same round function that
the impl and the jit lowering use (``lax.prng._hash``), so the bits are the same everywhere.

The library has two entry points over contiguous uint32 buffers, the keys being single words:

- ``ember_eager_threefry2x32(k1, k2, x1, x2, y1, y2, n)``;
- ``ember_eager_threefry2x32_range(buffers, lo, hi)`` with ``buffers`` = (k1, k2, x1, x2,
  y1, y2), the parallel runtime's task signature, for arrays split across the cores.

It is compiled at its first use and kept in the disk cache, like ``eager_math``'s kernels.

Example:
    >>> run = runner()
    >>> zero = np.zeros((), np.uint32)
    >>> y1, y2 = run(zero, zero, np.zeros(3, np.uint32), np.arange(3, dtype=np.uint32))
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import numpy as np

_log = logging.getLogger(__name__)

NAME = "ember_eager_threefry2x32"
_U32 = np.dtype(np.uint32)
_runner: list = []  # [runner or None], once decided
_lock = threading.Lock()


def kernel_ir() -> str:
    """The LLVM IR of the library (see the module docstring)."""
    from llvmlite import ir

    from ember.lax.prng import _hash

    i32, i64, i8p = ir.IntType(32), ir.IntType(64), ir.IntType(8).as_pointer()
    ptr = i32.as_pointer()
    module = ir.Module(name=NAME)

    loop_fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr] * 6 + [i64, i64]),
                          NAME + "_loop")
    loop_fn.linkage = "internal"
    loop_fn.attributes.add("alwaysinline")
    for arg in loop_fn.args[4:6]:
        arg.add_attribute("noalias")  # (the outputs are new arrays)
    k1p, k2p, x1p, x2p, y1p, y2p, lo, hi = loop_fn.args
    entry = loop_fn.append_basic_block("entry")
    body = loop_fn.append_basic_block("body")
    done = loop_fn.append_basic_block("done")
    b = ir.IRBuilder(entry)
    k1, k2 = b.load(k1p), b.load(k2p)
    b.cbranch(b.icmp_signed("<", lo, hi), body, done)
    b.position_at_end(body)
    i = b.phi(i64)
    i.add_incoming(lo, entry)
    x1 = b.load(b.gep(x1p, [i], inbounds=True))
    x2 = b.load(b.gep(x2p, [i], inbounds=True))

    def rotl(v, r):
        return b.or_(b.shl(v, ir.Constant(i32, r)), b.lshr(v, ir.Constant(i32, 32 - r)))

    y1, y2 = _hash(b.add, b.xor, rotl, lambda c: ir.Constant(i32, c), k1, k2, x1, x2)
    b.store(y1, b.gep(y1p, [i], inbounds=True))
    b.store(y2, b.gep(y2p, [i], inbounds=True))
    nxt = b.add(i, ir.Constant(i64, 1), flags=["nsw"])
    i.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, hi), body, done)
    b.position_at_end(done)
    b.ret_void()

    direct = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p] * 6 + [i64]), NAME)
    b = ir.IRBuilder(direct.append_basic_block("entry"))
    b.call(loop_fn, [b.bitcast(a, ptr) for a in direct.args[:6]]
           + [ir.Constant(i64, 0), direct.args[6]])
    b.ret_void()

    ranged = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p.as_pointer(), i64, i64]),
                         NAME + "_range")
    bufs, lo, hi = ranged.args
    b = ir.IRBuilder(ranged.append_basic_block("entry"))
    ptrs = [b.bitcast(b.load(b.gep(bufs, [ir.Constant(i64, k)], inbounds=True)), ptr)
            for k in range(6)]
    b.call(loop_fn, [*ptrs, lo, hi])
    b.ret_void()
    return str(module)


def runner() -> Callable | None:
    """``run(k1, k2, x1, x2) -> [y1, y2]`` on uint32 NumPy arrays (single-word keys; the
    counters broadcast against each other), or None where no native code can be made."""
    if _runner:
        return _runner[0]
    with _lock:
        if not _runner:
            try:
                _runner.append(_make_runner(_load()))
            except Exception as e:  # noqa: BLE001 - NumPy's impl still works
                _log.debug("no native eager threefry2x32: %s", e)
                _runner.append(None)
    return _runner[0]


def _load():
    from ember.backends.cpu import _shared_libraries_enabled, _source_stamp, native_lib
    return native_lib.load_or_build(f"ember-eager-threefry:{_source_stamp()}", kernel_ir, 3,
                                    _shared_libraries_enabled())


def _make_runner(lib) -> Callable:
    from ember.backends.cpu.eager_math import PARALLEL_MIN_ELEMENTS, _run_split
    from ember.backends.cpu.executable import _ffi

    direct = _ffi.cast("void(*)(char*, char*, char*, char*, char*, char*, long)",
                       lib.address(NAME))
    ranged = _ffi.cast("void(*)(char**, long, long)", lib.address(NAME + "_range"))
    fb = _ffi.from_buffer

    def run(k1: np.ndarray, k2: np.ndarray, x1: np.ndarray, x2: np.ndarray) -> list:
        k1, k2 = (np.ascontiguousarray(k, _U32).reshape(()) for k in (k1, k2))
        shape = np.broadcast_shapes(x1.shape, x2.shape)
        x1, x2 = (np.ascontiguousarray(np.broadcast_to(x, shape), _U32) for x in (x1, x2))
        y1, y2 = np.empty(shape, _U32), np.empty(shape, _U32)
        n = y1.size
        buffers = [fb(k1), fb(k2), fb(x1), fb(x2), fb(y1), fb(y2)]
        if n >= PARALLEL_MIN_ELEMENTS:
            _run_split(ranged, buffers, n)
        elif n:
            direct(*buffers, n)
        return [y1, y2]

    run._library = lib  # keeps the code loaded while the runner lives
    return run
