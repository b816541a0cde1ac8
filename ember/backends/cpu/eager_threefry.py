"""A native kernel for the eager ``threefry2x32`` primitive (the hash behind ``ember.random``).

Eagerly, ``random.bits``/``uniform``/``normal``/``split`` hash their counters with
``threefry2x32``, whose NumPy impl takes ~120 array passes (20 rounds of adds, xors and
rotations): ~150 us for 1e3 counters, where JAX's compiled samplers take ~100 us in all. This
kernel does the hash in one pass (~1 us for 1e3 counters), from the same round function that
the impl and the jit lowering use (``lax.prng._hash``), so the bits are the same everywhere.

``eager_math`` builds, caches and loads it like its own kernels (opcode ``threefry2x32`` on
uint32), with the same two entry points over contiguous uint32 buffers, the keys being single
words: ``name(k1, k2, x1, x2, y1, y2, n)`` and ``name_range(buffers, lo, hi)``.

Example:
    >>> run = runner()
    >>> zero = np.zeros((), np.uint32)
    >>> y1, y2 = run(zero, zero, np.zeros(3, np.uint32), np.arange(3, dtype=np.uint32))
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_U32 = np.dtype(np.uint32)


def kernel_ir(name: str) -> str:
    """The LLVM IR of the library, its entry points called ``name`` (module docstring)."""
    from llvmlite import ir

    from ember.backends.cpu.eager_math import emit_kernel
    from ember.lax.prng import _hash

    i32 = ir.IntType(32)
    module = ir.Module(name=name)

    def keys(b, pointers):
        return b.load(pointers[0]), b.load(pointers[1])

    def body(b, pointers, i, key_words):
        x1, x2 = (b.load(b.gep(p, [i], inbounds=True)) for p in pointers[2:4])

        def rotl(v, r):
            return b.or_(b.shl(v, ir.Constant(i32, r)), b.lshr(v, ir.Constant(i32, 32 - r)))

        y1, y2 = _hash(b.add, b.xor, rotl, lambda c: ir.Constant(i32, c), *key_words, x1, x2)
        b.store(y1, b.gep(pointers[4], [i], inbounds=True))
        b.store(y2, b.gep(pointers[5], [i], inbounds=True))

    emit_kernel(module, name, [i32.as_pointer()] * 6, body, prologue=keys)
    return str(module)


def runner() -> Callable | None:
    """``run(k1, k2, x1, x2) -> [y1, y2]`` on uint32 NumPy arrays (single-word keys; the
    counters broadcast against each other), or None where no native code can be made."""
    from ember.backends.cpu.eager_math import THREEFRY, kernel
    return kernel(THREEFRY, _U32)


def make_runner(lib, name: str, dtype: np.dtype) -> Callable:
    """The runner of a loaded library (``eager_math.kernel``'s maker for threefry)."""
    from ember.backends.cpu import array_call
    from ember.backends.cpu.eager_math import PARALLEL_MIN_ELEMENTS, run_split
    from ember.backends.cpu.executable import _ffi

    direct = array_call.function(lib.address(name), 6, array_call.SIZE)
    ranged = _ffi.cast("void(*)(char**, long, long)", lib.address(name + "_range"))
    fb = _ffi.from_buffer

    def run(k1: np.ndarray, k2: np.ndarray, x1: np.ndarray, x2: np.ndarray) -> list:
        k1, k2 = (np.ascontiguousarray(k, _U32).reshape(()) for k in (k1, k2))
        shape = np.broadcast_shapes(x1.shape, x2.shape)
        x1, x2 = (np.ascontiguousarray(np.broadcast_to(x, shape), _U32) for x in (x1, x2))
        y1, y2 = np.empty(shape, _U32), np.empty(shape, _U32)
        n = y1.size
        if n >= PARALLEL_MIN_ELEMENTS:
            run_split(ranged, [fb(k1), fb(k2), fb(x1), fb(x2), fb(y1), fb(y2)], n)
        else:
            direct(k1, k2, x1, x2, y1, y2)  # (holds the GIL: short)
        return [y1, y2]

    run._library = lib  # keeps the code loaded while the runner lives
    return run
