"""DLPack interchange (``jax.dlpack``): ``from_dlpack`` and ``is_supported_dtype``.

ember Arrays export ``__dlpack__``/``__dlpack_device__`` (a read-only CPU tensor), so
``numpy.from_dlpack(x)`` or ``torch.from_dlpack(x)`` read them without a copy.

Example:
    >>> x = ember.dlpack.from_dlpack(np.arange(3.0))
    >>> x
    Array([0., 1., 2.], dtype=float32)
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from ember import dtypes

__all__ = ["from_dlpack", "is_supported_dtype"]

_KDL_CPU = 1
_SUPPORTED = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
    np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128,
    ml_dtypes.bfloat16))


def is_supported_dtype(dtype: Any) -> bool:
    """Whether arrays of ``dtype`` can cross DLPack.

    Example:
        >>> ember.dlpack.is_supported_dtype(jnp.bfloat16), is_supported_dtype("U3")
        (True, False)
    """
    try:
        return np.dtype(dtype) in _SUPPORTED
    except TypeError:
        return False


def from_dlpack(external_array: Any, device: Any = None, copy: bool | None = None) -> Any:
    """An ember Array holding the data of a DLPack producer (an object with
    ``__dlpack__`` and ``__dlpack_device__``: NumPy, torch, CuPy on the CPU, ...).

    Args:
        external_array: the producer.
        device: where the result lives (the one CPU device; None for the default).
        copy: accepted as in JAX; the data is always copied (the producer may change
            its buffer later, and ember Arrays are immutable).

    Returns:
        The Array, with its dtype canonicalized (float64 becomes float32 unless
        ``jax_enable_x64`` is on).

    Raises:
        TypeError: if ``external_array`` has no ``__dlpack__``/``__dlpack_device__``.
        ValueError: for data on another device or of an unsupported dtype.
    """
    if not (hasattr(external_array, "__dlpack__")
            and hasattr(external_array, "__dlpack_device__")):
        raise TypeError("The array passed to from_dlpack must have __dlpack__ and "
                        "__dlpack_device__ methods.")
    kind, _ = external_array.__dlpack_device__()
    if int(kind) != _KDL_CPU:
        raise ValueError(f"from_dlpack: the array lives on DLPack device type {int(kind)}; "
                         "only CPU data (type 1) can be read on this runtime")
    try:
        value = np.from_dlpack(external_array)
    except (BufferError, TypeError) as e:
        raise ValueError(f"from_dlpack: could not read the array: {e}") from e
    if not is_supported_dtype(value.dtype):
        raise ValueError(f"from_dlpack: unsupported dtype {value.dtype}")
    from ember.runtime import device_put
    value = np.array(value, dtype=dtypes.canonicalize_dtype(value.dtype), copy=True)
    return device_put(value, device)
