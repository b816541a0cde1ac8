"""Calling native code on NumPy arrays in ~25 ns instead of ~0.5-1 µs.

A cffi call of ``kernel(char* x, char* y, long n)`` costs ~0.37 µs, and each pointer taken
from an array with ``ffi.from_buffer`` another ~0.12 µs: for a small eager ``jnp.maximum`` or
a cached call of a small jitted program that is more than the work itself. This module
compiles, once per machine (disk-cached like every native library), three *trampolines*:
native functions with CPython's ``METH_FASTCALL`` signature, made into Python builtins with
``PyCFunction_NewEx``. A call ``f(a0, ..., ak)`` goes straight from the interpreter into the
trampoline, which reads each array's data pointer from its ``PyArrayObject`` (the ``data``
field right after the object header, part of NumPy's stable ABI), calls the kernel and returns
its last argument. The kernel's address and an extra integer live in the builtin's ``self``,
a small int64 array, so the three trampolines serve every kernel.

Tails (what follows the k data pointers in the kernel's signature):

- ``PLAIN``: ``kernel(p0, ..., pk)``;
- ``SIZE``: ``kernel(p0, ..., pk, n)``, ``n`` the element count of the last array;
- ``SIZE_EXTRA``: ``kernel(p0, ..., pk, n, extra)``.

The contract, checked where it is cheap: the kernel's number of arguments, each an exact
``numpy.ndarray`` (a trampoline refuses other counts and objects, raising ``SystemError``,
never reading a foreign object's memory); layout, dtype and size are the caller's to
guarantee, as with the pointers it would otherwise pass through cffi. A call holds the GIL:
callers use it for short work (small arrays), and keep cffi (which releases the GIL) for
long calls.

Where the trampolines cannot be made or trusted (not CPython, a free-threaded build, not
64-bit, a NumPy whose array layout differs from the one probed, no native code),
``function`` returns a cffi-based function with the same behaviour.

Example:
    >>> f = function(lib.address("ember_eager_exponential_float32"), 2, SIZE)
    >>> y = f(x, np.empty_like(x))   # y[i] = exp(x[i]); returns y
"""

from __future__ import annotations

import ctypes
import logging
import sys
import sysconfig
import threading
from collections.abc import Callable

import numpy as np

_log = logging.getLogger(__name__)

PLAIN, SIZE, SIZE_EXTRA = "plain", "size", "size_extra"
TAILS = (PLAIN, SIZE, SIZE_EXTRA)
# The most arrays one call takes (longer calls use cffi).
MAX_ARRAYS = 32
# CPython's calling convention flag for ``f(self, args, nargs)`` builtins.
_METH_FASTCALL = 0x0080
# Byte offsets in CPython's object header and NumPy's ``PyArrayObject_fields`` (probed on the
# first use against ``ndarray.ctypes``; see ``_layout_ok``).
_TYPE_OFFSET, _DATA_OFFSET, _NDIM_OFFSET, _DIMS_OFFSET = 8, 16, 24, 32

_lock = threading.Lock()
_state: dict = {}  # "builtins": {tail: its PyMethodDef's address} once made, or None


def _symbol(tail: str) -> str:
    return f"ember_array_call_{tail}"


def trampolines_ir() -> str:
    """The LLVM IR of the three trampolines (see the module docstring).

    Each is ``PyObject *f(PyObject *self, PyObject *const *args, Py_ssize_t nargs)``:
    ``self``'s int64 data holds (kernel address, extra, address of ``numpy.ndarray``'s type
    object, the kernel's number of arrays). Given that many exact arrays it calls the kernel
    and returns ``args[nargs - 1]`` with a new reference; otherwise it returns NULL, which
    the interpreter raises as ``SystemError``."""
    from llvmlite import ir

    i8p, i32, i64 = ir.IntType(8).as_pointer(), ir.IntType(32), ir.IntType(64)
    module = ir.Module(name="ember_array_call")

    def field(b, obj, offset, ty):
        return b.load(b.bitcast(b.gep(obj, [ir.Constant(i64, offset)], inbounds=True),
                                ty.as_pointer()))

    def size_of(fn, b, array):
        """The product of ``array``'s dimensions (1 for a 0-d array)."""
        ndim = field(b, array, _NDIM_OFFSET, i32)
        dims = field(b, array, _DIMS_OFFSET, i64.as_pointer())
        start = b.block
        loop, done = fn.append_basic_block("dims"), fn.append_basic_block("sized")
        b.cbranch(b.icmp_signed(">", ndim, ir.Constant(i32, 0)), loop, done)
        b.position_at_end(loop)
        k, acc = b.phi(i32), b.phi(i64)
        k.add_incoming(ir.Constant(i32, 0), start)
        acc.add_incoming(ir.Constant(i64, 1), start)
        product = b.mul(acc, b.load(b.gep(dims, [k], inbounds=True)))
        nxt = b.add(k, ir.Constant(i32, 1))
        k.add_incoming(nxt, loop)
        acc.add_incoming(product, loop)
        b.cbranch(b.icmp_signed("<", nxt, ndim), loop, done)
        b.position_at_end(done)
        n = b.phi(i64)
        n.add_incoming(ir.Constant(i64, 1), start)
        n.add_incoming(product, loop)
        return n

    for tail in TAILS:
        fn = ir.Function(module, ir.FunctionType(i8p, [i8p, i8p.as_pointer(), i64]),
                         _symbol(tail))
        this, args, nargs = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        refuse = fn.append_basic_block("refuse")
        slots = b.alloca(ir.ArrayType(i8p, MAX_ARRAYS))  # the arrays' data pointers
        words = b.bitcast(field(b, this, _DATA_OFFSET, i8p), i64.as_pointer())
        target = b.load(words)
        extra = b.load(b.gep(words, [ir.Constant(i64, 1)], inbounds=True))
        array_type = b.load(b.gep(words, [ir.Constant(i64, 2)], inbounds=True))
        expected = b.load(b.gep(words, [ir.Constant(i64, 3)], inbounds=True))
        in_range = b.and_(b.icmp_unsigned("==", nargs, expected),
                          b.icmp_unsigned("<=", nargs, ir.Constant(i64, MAX_ARRAYS)))
        entry, check = b.block, fn.append_basic_block("check")
        b.cbranch(b.and_(in_range, b.icmp_unsigned(">", nargs, ir.Constant(i64, 0))),
                  check, refuse)
        # every argument an exact numpy.ndarray (one loop, before anything is read)
        b.position_at_end(check)
        j = b.phi(i64)
        j.add_incoming(ir.Constant(i64, 0), entry)
        array = b.load(b.gep(args, [j], inbounds=True))
        exact = b.icmp_unsigned("==", b.ptrtoint(field(b, array, _TYPE_OFFSET, i8p), i64),
                                array_type)
        more, checked = fn.append_basic_block("more"), fn.append_basic_block("checked")
        b.cbranch(exact, more, refuse)
        b.position_at_end(more)
        b.store(field(b, array, _DATA_OFFSET, i8p),
                b.gep(slots, [ir.Constant(i32, 0), j], inbounds=True))
        nxt = b.add(j, ir.Constant(i64, 1))
        j.add_incoming(nxt, more)
        b.cbranch(b.icmp_unsigned("<", nxt, nargs), check, checked)
        b.position_at_end(checked)
        last = b.load(b.gep(args, [b.sub(nargs, ir.Constant(i64, 1))], inbounds=True))
        tail_values, tail_types = [], []
        if tail != PLAIN:
            tail_values.append(size_of(fn, b, last))
            tail_types.append(i64)
        if tail == SIZE_EXTRA:
            tail_values.append(extra)
            tail_types.append(i64)
        switch = b.switch(nargs, refuse)
        for k in range(1, MAX_ARRAYS + 1):
            case = fn.append_basic_block(f"arrays{k}")
            switch.add_case(ir.Constant(i64, k), case)
            b.position_at_end(case)
            values = [b.load(b.gep(slots, [ir.Constant(i32, 0), ir.Constant(i32, j)],
                                   inbounds=True)) for j in range(k)]
            kernel = b.inttoptr(target, ir.FunctionType(ir.VoidType(),
                                                        [i8p] * k + tail_types).as_pointer())
            b.call(kernel, values + tail_values)
            refcount = b.bitcast(last, i64.as_pointer())
            b.store(b.add(b.load(refcount), ir.Constant(i64, 1)), refcount)
            b.ret(last)
        b.position_at_end(refuse)
        b.ret(ir.Constant(i8p, None))
    return str(module)


class _MethodDef(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("meth", ctypes.c_void_p),
                ("flags", ctypes.c_int), ("doc", ctypes.c_void_p)]


def _immortal_method_def(name: str, address: int) -> int:
    """The address of a ``PyMethodDef`` for the trampoline at ``address``, in memory that is
    never freed: builtins read their definition until they are deallocated, which at
    interpreter exit may come after this module's objects are gone."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    text = name.encode() + b"\0"
    name_address = libc.malloc(len(text))
    definition = libc.malloc(ctypes.sizeof(_MethodDef))
    if not name_address or not definition:
        raise MemoryError("array_call: no memory for a method definition")
    ctypes.memmove(name_address, text, len(text))
    ctypes.memmove(definition, ctypes.byref(_MethodDef(name_address, address, _METH_FASTCALL,
                                                       None)), ctypes.sizeof(_MethodDef))
    return definition


def _layout_ok() -> bool:
    """Whether this interpreter and NumPy lay objects out as the trampolines read them."""
    if sys.implementation.name != "cpython" or ctypes.sizeof(ctypes.c_void_p) != 8 \
            or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return False
    probe = np.zeros((3, 5), np.float32)
    address = id(probe)
    word = lambda offset: ctypes.c_int64.from_address(address + offset).value  # noqa: E731
    dims = ctypes.cast(word(_DIMS_OFFSET), ctypes.POINTER(ctypes.c_int64))
    return (word(_TYPE_OFFSET) == id(np.ndarray) and word(_DATA_OFFSET) == probe.ctypes.data
            and ctypes.c_int32.from_address(address + _NDIM_OFFSET).value == 2
            and (dims[0], dims[1]) == (3, 5))


def _builtins() -> dict | None:
    """{tail: address of its trampoline's ``PyMethodDef``}: loaded (or built) once; None
    where trampolines are unavailable."""
    if "builtins" in _state:
        return _state["builtins"]
    with _lock:
        if "builtins" not in _state:
            _state["builtins"] = _load_builtins()
    return _state["builtins"]


def _load_builtins() -> dict | None:
    from ember.backends.cpu import _shared_libraries_enabled, _source_stamp, native_lib
    try:
        if not _layout_ok():
            return None
        # (unoptimized: a trampoline is a few loads and a call, as fast at O0; O2 would cost
        # ~0.15 s of compile on a first use, in the middle of someone's second call)
        lib = native_lib.load_or_build(f"ember-array-call:{_source_stamp()}",
                                       trampolines_ir, 0, _shared_libraries_enabled())
        _state["library"] = lib  # (never unloaded: the builtins point into it)
        return {tail: _immortal_method_def(_symbol(tail), lib.address(_symbol(tail)))
                for tail in TAILS}
    except Exception as e:  # noqa: BLE001 - the cffi calls still work
        _log.debug("no array-call trampolines: %s", e)
        return None


def _new_builtin(method_def: int, this: np.ndarray) -> Callable:
    new = ctypes.pythonapi.PyCFunction_NewEx
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p]
    return new(method_def, this, None)


def function(address: int, n_arrays: int, tail: str, extra: int = 0,
             trampoline: bool = True) -> Callable:
    """``f(a0, ..., a{n_arrays-1})``: calls the kernel at ``address`` on the arrays' data
    pointers followed by ``tail``'s arguments (see the module docstring) and returns the
    last array. A trampoline builtin where available (and ``trampoline``), else cffi."""
    if tail not in TAILS:
        raise ValueError(f"array_call.function: tail must be one of {TAILS}, got {tail!r}")
    if n_arrays < 1:
        raise ValueError(f"array_call.function: n_arrays must be >= 1, got {n_arrays}")
    builtins = _builtins() if trampoline and n_arrays <= MAX_ARRAYS else None
    if builtins is not None:
        this = np.array([address, extra, id(np.ndarray), n_arrays], np.int64)
        return _new_builtin(builtins[tail], this)
    return _cffi_function(address, n_arrays, tail, extra)


def _cffi_function(address: int, n_arrays: int, tail: str, extra: int) -> Callable:
    from ember.backends.cpu.executable import _ffi
    signature = ["char*"] * n_arrays + ["long"] * TAILS.index(tail)
    kernel = _ffi.cast(f"void(*)({', '.join(signature)})", address)
    fb = _ffi.from_buffer

    def call(*arrays):
        if len(arrays) != n_arrays or any(type(a) is not np.ndarray for a in arrays):
            raise SystemError(f"array call: expected {n_arrays} numpy.ndarray arguments")
        tail_args = () if tail == PLAIN else (arrays[-1].size,) if tail == SIZE \
            else (arrays[-1].size, extra)
        kernel(*[fb(a) for a in arrays], *tail_args)
        return arrays[-1]

    return call


def available() -> bool:
    """Whether ``function`` hands out trampolines here."""
    return _builtins() is not None
