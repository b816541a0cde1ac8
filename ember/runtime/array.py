"""``ember.Array``: an immutable array on a device (a CPU buffer), with JAX's interface.

Operators and the NumPy-style methods (``sum``, ``reshape``, ``x.at[...]``) are installed by
``ember.numpy`` at import; this module holds what is about the buffer itself.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import _pytree, core, dtypes
from ember.core import ShapedArray
from ember.errors import UnexpectedTracerError

# ``buffer_pool.MIN_BYTES``: the smallest arrays worth pooled (aligned) memory. The pool is
# imported at first use: importing it loads the CPU backend, which ``EMBER_PRELOAD=0`` and
# other backends leave unloaded at ``import ember`` (tests/backends/test_preload.py).
POOLED_MIN_BYTES = 1 << 18


def _buffer_pool():
    from ember.backends.cpu import buffer_pool
    return buffer_pool

_IMMUTABLE_MESSAGE = (
    "'{}' object does not support item assignment. JAX arrays are immutable. Instead of "
    "``x[idx] = y``, use ``x = x.at[idx].set(y)`` or another .at[] method: "
    "https://docs.jax.dev/en/latest/_autosummary/jax.numpy.ndarray.at.html")


class CpuDevice:
    """The host CPU as a device: ``platform`` is ``"cpu"``."""

    platform = "cpu"
    device_kind = "cpu"

    def __init__(self, id: int = 0):
        self.id = id
        self.process_index = 0

    def __repr__(self) -> str:
        return f"CpuDevice(id={self.id})"

    def __eq__(self, other) -> bool:
        return isinstance(other, CpuDevice) and other.id == self.id

    def __hash__(self) -> int:
        return hash(("cpu", self.id))


_CPU = CpuDevice(0)
_DELETED = ("deleted",)  # ``Array._pending`` of a deleted array
_setflags = np.ndarray.setflags  # positional setflags(a, False): the cheapest way to freeze


def devices(backend: str | None = None) -> list[CpuDevice]:
    """The devices ember can run on: one CPU device.

    Example:
        >>> ember.devices()
        [CpuDevice(id=0)]
    """
    if backend not in (None, "cpu", "interpreter"):
        raise RuntimeError(f"devices: unknown backend {backend!r}; ember runs on 'cpu'")
    return [_CPU]


class _ArrayType(type):
    """``isinstance(x, Array)`` holds for traced values too (a ``core.Tracer`` stands for an
    array inside ``jit``, ``grad``, ``vmap``...), as ``isinstance(x, jax.Array)`` does in JAX,
    so code that filters a pytree's arrays with it works the same under transformations.
    So does a typed PRNG key array (a class in ``other_array_types``), as in JAX.
    ember's own code asks ``type(x) is Array`` for a concrete array."""

    other_array_types: set[type] = set()

    def __instancecheck__(cls, obj: Any) -> bool:
        return (type(obj) is cls or isinstance(obj, core.Tracer)
                or type(obj) in _ArrayType.other_array_types)


class Array(core.AvalProperties, metaclass=_ArrayType):
    """An immutable n-dimensional array on a device.

    Example:
        >>> import ember.numpy as jnp
        >>> jnp.array([1.0, 2.0])
        Array([1., 2.], dtype=float32)
    """

    # A pending array (the result of an asynchronously dispatched executable) leaves the
    # ``_value`` slot unset and holds ``_pending = (future, output index)``; reading
    # ``_value`` then falls through to ``__getattr__``, which waits. Ready arrays never set
    # ``_pending``, so the eager path pays nothing for asynchrony.
    # ``_sharding`` is set only by ``device_put`` with a sharding (unset: the default one).
    __slots__ = ("_value", "_pending", "aval", "_sharding", "__weakref__")
    __array_priority__ = 100

    def __init__(self, value: Any, weak_type: bool = False):
        arr = np.asarray(value)
        # (A copy: the caller's array is neither shared nor frozen.)
        arr = device_buffer(arr, dtypes.canonicalize_dtype(arr.dtype))
        dt = arr.dtype
        arr.flags.writeable = False
        self._value = arr
        self.aval = ShapedArray(arr.shape, dt, weak_type)

    @classmethod
    def _wrap(cls, value: np.ndarray, aval: ShapedArray) -> Array:
        """Fast constructor for a fresh buffer whose aval is already known."""
        self = object.__new__(cls)
        _setflags(value, False)
        self._value = value
        self.aval = aval
        return self

    @classmethod
    def _make_pending(cls, aval: ShapedArray, future: Any, index: int) -> Array:
        """An array whose value is output ``index`` of ``future``'s result (a list)."""
        self = object.__new__(cls)
        self.aval = aval
        self._pending = (future, index)
        return self

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: an unset slot (pending value, no _pending).
        if name == "_value":
            return self._resolve()
        if name == "_pending" or name == "_sharding":
            return None
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def _resolve(self) -> np.ndarray:
        pending = self._pending
        if pending is _DELETED:
            raise RuntimeError(f"Array has been deleted with shape={self.aval.str_short()}.")
        if pending is None:  # pragma: no cover - an Array always has one or the other
            raise AttributeError("Array has neither a value nor a pending computation")
        future, index = pending
        # Raises the executable's error (every wait on a failed computation raises it).
        value = future.result()[index]
        self._value = value
        self._pending = None
        return value

    # -- metadata: shape, dtype, ndim, size, weak_type, nbytes, itemsize (core.AvalProperties)
    @property
    def device(self) -> CpuDevice:
        return _CPU

    def devices(self) -> set[CpuDevice]:
        return {_CPU}

    @property
    def sharding(self):
        """The array's ``Sharding`` (``ember.sharding``): a ``SingleDeviceSharding`` unless
        it was placed with another (``device_put``, ``jit``'s ``out_shardings``)."""
        s = self._sharding
        if s is None:
            from ember.sharding import default_sharding
            return default_sharding()
        return s

    @property
    def committed(self) -> bool:
        """Whether the array was placed explicitly (``device_put`` with a device/sharding)."""
        return self._sharding is not None

    @property
    def addressable_shards(self) -> list:
        """The shards on this process's devices (ember: one, the whole array)."""
        from ember._sharding_api import shards_of
        return shards_of(self)

    global_shards = addressable_shards

    @property
    def format(self):
        from ember._sharding_api import Format
        return Format(None, self.sharding)

    @property
    def is_fully_replicated(self) -> bool:
        return True

    @property
    def is_fully_addressable(self) -> bool:
        return True

    # -- synchronization and conversion
    def block_until_ready(self) -> Array:
        """Waits until the value is computed (raising the computation's error, if any)."""
        self._value  # noqa: B018 - a ready array reads its slot; a pending one waits in __getattr__
        return self

    def is_ready(self) -> bool:
        """Whether the value is computed (a failed computation counts as ready)."""
        pending = self._pending
        if pending is None or pending is _DELETED or pending[0].done():
            return True
        nudge = getattr(pending[0], "nudge", None)
        if nudge is not None:  # (queued work may wait for a waiter: a poller counts as one)
            nudge()
        return False

    def copy_to_host_async(self) -> None:
        """Starts making the value available on the host (as ``jax.Array``'s). ember's
        buffers are host memory: this only makes sure a queued computation will run."""
        self.is_ready()

    def delete(self) -> None:
        """Releases the buffer now (as ``jax.Array.delete``); any later use of the array
        raises RuntimeError."""
        try:
            del self._value
        except AttributeError:  # (pending: the computation's result is dropped when done)
            pass
        self._pending = _DELETED

    def is_deleted(self) -> bool:
        return self._pending is _DELETED

    def __array__(self, dtype=None, copy=None):
        # Without a copy NumPy gets a read-only view of the buffer (no data is copied).
        value = self._value
        if dtype is not None and np.dtype(dtype) != value.dtype:
            if copy is False:
                raise ValueError(f"Unable to avoid copy while converting an ember Array of "
                                 f"dtype {value.dtype} to dtype {np.dtype(dtype)}")
            return value.astype(dtype)
        if copy:
            return value.copy()
        # (A view, not the buffer: NumPy lets the owner of memory make itself writeable
        # again, never a view of a read-only array.)
        return value.view()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        # NumPy exports the read-only buffer marked read-only, which only DLPack 1.0 can
        # say: a consumer of the older protocol (no ``max_version``) gets a copy.
        value = self._value
        if (max_version is None or tuple(max_version) < (1, 0)) and not value.flags.writeable:
            if copy is False:
                raise BufferError("__dlpack__: an ember Array is read-only; exporting it "
                                  "under DLPack < 1.0 needs a copy (copy=False given)")
            value = value.copy()
        return value.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device,
                                copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._value.__dlpack_device__()

    def __setitem__(self, idx, value):
        raise TypeError(_IMMUTABLE_MESSAGE.format(type(self).__name__))

    def copy(self) -> Array:
        return Array._wrap(self._value.copy(), self.aval)

    def __copy__(self) -> Array:
        return self.copy()

    def __deepcopy__(self, memo) -> Array:
        return self.copy()

    def __reduce__(self):
        return (_rebuild, (np.array(self._value), self.aval.weak_type))

    def item(self, *args):
        return self._value.item(*args)

    def tolist(self):
        return self._value.tolist()

    def tobytes(self, order: str = "C") -> bytes:
        return self._value.tobytes(order)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __int__(self) -> int:
        return int(self._value)

    def __float__(self) -> float:
        return float(self._value)

    def __complex__(self) -> complex:
        return complex(self._value)

    def __index__(self) -> int:
        if not dtypes.is_integer(self.dtype) and self.dtype != dtypes.bool_:
            raise TypeError(f"only integer arrays can be used as an index, got {self.dtype}")
        return self._value.__index__()

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        aval = ShapedArray(self.shape[1:], self.dtype, self.weak_type)
        value = self._value
        # (``value[i, ...]`` is an array even where ``value[i]`` would be a NumPy scalar.)
        return (Array._wrap(value[i, ...], aval) for i in range(len(value)))

    def __hash__(self):
        raise TypeError("unhashable type: 'Array'")

    def __format__(self, spec: str) -> str:
        # As JAX (and NumPy): a 0-d array formats as its scalar; others take no format spec.
        value = self._value
        return format(value if self.ndim else value[()], spec)

    def __repr__(self) -> str:
        # JAX's layout: NumPy's array2string body, then the dtype after one space when it
        # fits in the line width, else after len("Array(") spaces (still on the last line:
        # JAX prints ``Array([...],      dtype=float32)``).
        prefix = "Array("
        dtype_str = f"dtype={self.dtype.name}"
        if self.weak_type:
            dtype_str += ", weak_type=True"
        dtype_str += ")"
        line_width = np.get_printoptions()["linewidth"]
        if self._value.size == 0:
            body = f"[], shape={self.shape}"
        else:
            body = np.array2string(self._value, prefix=prefix, suffix=",", separator=", ",
                                   max_line_width=line_width)
        last_line_len = len(body) - body.rfind("\n") + 1
        sep = " "
        if last_line_len + len(dtype_str) + 1 > line_width:
            sep = " " * len(prefix)
        return f"{prefix}{body},{sep}{dtype_str}"

    def __str__(self) -> str:
        return str(self._value)

    @property
    def addressable_data(self):
        return lambda index=0: self

    def unsafe_buffer_pointer(self) -> int:
        return self._value.ctypes.data


def _rebuild(value: np.ndarray, weak_type: bool) -> Array:
    return Array(value, weak_type)


core.pytype_aval_mappings[Array] = lambda x: x.aval


def device_buffer(value: Any, dtype: Any = None) -> np.ndarray:
    """A new C-contiguous copy of host data for a device array: ``np.array(value, dtype)``,
    except that a NumPy array of the buffer pool's sizes (``buffer_pool.pooled``) is copied
    into pooled memory. That memory is 64-byte aligned where NumPy's is 16-byte aligned, so
    each 512-bit load and store of a kernel touches one cache line instead of two: the
    layernorm kernel over (4096, 1024) float32 ran in 1.22 ms from an aligned input, 1.48 ms
    with input and output 16 bytes off, and 2.0 ms from an input 16 bytes off into an aligned
    output (one thread), which is what the kernels saw for every ``device_put`` array."""
    if isinstance(value, np.ndarray):
        dt = np.dtype(dtype) if dtype is not None else value.dtype
        if not dt.hasobject and dt.kind in "biufcV" \
                and value.size * dt.itemsize >= POOLED_MIN_BYTES:
            out = device_empty(value.shape, dt)
            np.copyto(out, value, casting="unsafe")  # (np.array's casting)
            return out
    return np.array(value, dtype=dtype)


def device_empty(shape: tuple, dtype: Any) -> np.ndarray:
    """A new uninitialized C-contiguous array for a device array's value: pooled memory
    (64-byte aligned, see ``device_buffer``) when large."""
    dtype = np.dtype(dtype)
    if math.prod(shape) * dtype.itemsize < POOLED_MIN_BYTES:
        return np.empty(shape, dtype)
    return _buffer_pool().empty(shape, dtype)


def aligned_result(value: np.ndarray) -> np.ndarray:
    """``value`` (a NumPy result of eager code), copied into pooled memory if it is large,
    C-contiguous and not 64-byte aligned (see ``device_buffer``); strided views are left as
    they are (a kernel gets a contiguous copy of them anyway). ``kernel_value`` uses it."""
    if value.nbytes >= POOLED_MIN_BYTES and value.flags.c_contiguous \
            and value.__array_interface__["data"][0] % 64 \
            and _buffer_pool().pooled(value.nbytes) \
            and not value.dtype.hasobject:
        return device_buffer(value)
    return value


def kernel_value(a: Array) -> np.ndarray:
    """``a``'s value for a compiled program: a large, C-contiguous value that is not 64-byte
    aligned (a NumPy result of eager code) is first replaced, once and for good, by an
    aligned copy (``aligned_result``; the array is immutable, so its value may move). Eager
    results are not copied when they are made: an eager chain would pay a copy per op (a
    16 MiB ``lax.add`` ~5.5 ms against ~3 ms), where a program's kernels pay for misaligned
    operands on every call (layernorm's kernel reads a misaligned input at ~60% of the
    speed)."""
    value = a._value
    if value.nbytes >= POOLED_MIN_BYTES:  # (the one check small arrays pay, per call)
        moved = aligned_result(value)
        if moved is not value:
            _setflags(moved, False)
            a._value = value = moved
    return value


def device_put(x: Any, device: Any = None, *, src: Any = None, donate: bool = False,
               may_alias: bool | None = None) -> Any:
    """Copies a pytree of arrays/scalars onto the device as ``ember.Array``s. An ``Array``
    already there is returned as it is unless ``may_alias=False`` or ``donate=True`` ask for
    a new one (as JAX on CPU); ``src`` is accepted for JAX's sake (one device). ``device``
    may be a device, a ``Sharding`` or a pytree prefix of them: the result's ``.sharding``.

    Example:
        >>> ember.device_put(np.ones(2))
        Array([1., 1.], dtype=float32)
    """
    if src is not None and not isinstance(src, CpuDevice):
        raise ValueError(f"device_put: unsupported src {src!r}; use ember.devices()[0]")
    if device is not None:  # (a device or sharding, or a pytree prefix of them: commits)
        from ember._sharding_api import device_put_placed
        return device_put_placed(x, device, may_alias, donate)
    copy = may_alias is False or bool(donate)

    def put(leaf):
        if type(leaf) is Array:
            return leaf.copy() if copy else leaf
        if isinstance(leaf, core.Tracer):
            if core.is_eval_context():  # (no transformation is running: it leaked)
                raise UnexpectedTracerError(leaf, "It was passed to device_put outside of "
                                                  "the transformation that created it.")
            return leaf
        aval = core.get_aval(leaf)
        return Array._wrap(device_buffer(leaf, aval.dtype), aval)

    return _pytree.tree_map(put, x)


def device_get(x: Any) -> Any:
    """Fetches a pytree of arrays to the host as NumPy arrays. As in JAX, any other leaf
    that converts to a NumPy array (``__array__``: NumPy scalars) is converted; the rest
    (Python scalars, tracers, ...) pass through."""

    def get(leaf):
        if type(leaf) is Array:
            return np.asarray(leaf.block_until_ready())
        if hasattr(leaf, "__array__") and not isinstance(leaf, core.Tracer):
            return np.asarray(leaf)
        return leaf

    return _pytree.tree_map(get, x)


def copy_to_host_async(x: Any) -> Any:
    """Calls ``copy_to_host_async`` on each leaf of a pytree that has it; returns the pytree
    (ember's arrays are in host memory already, so nothing is copied).

    Example:
        >>> ember.copy_to_host_async([jnp.ones(2), 1.0])
        [Array([1., 1.], dtype=float32), 1.0]
    """
    for leaf in _pytree.tree_leaves(x):
        copy = getattr(leaf, "copy_to_host_async", None)
        if copy is not None and not isinstance(leaf, core.Tracer):
            copy()
    return x


def block_until_ready(x: Any) -> Any:
    """Waits for every array in a pytree to be computed; returns the pytree."""
    if type(x) is Array:  # (a lone array: no pytree walk)
        return x.block_until_ready()
    for leaf in _pytree.tree_leaves(x):
        if type(leaf) is Array:
            leaf.block_until_ready()
    return x
