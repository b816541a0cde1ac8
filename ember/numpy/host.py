"""NumPy's host-side helpers, as ``jax.numpy`` offers them: files and strings (``load``,
``save``, ``fromstring``...), print options, ``iterable`` and ``ComplexWarning``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes
from ember.numpy.creation import asarray

# The same objects as NumPy's (as in JAX): they act on the host, and ember arrays print
# through NumPy's formatting, so the print options apply to them.
array_repr = np.array_repr
array_str = np.array_str
get_printoptions = np.get_printoptions
iterable = np.iterable
printoptions = np.printoptions
save = np.save
savez = np.savez
set_printoptions = np.set_printoptions
ComplexWarning = np.exceptions.ComplexWarning


def load(file: Any, *args: Any, **kwargs: Any) -> Any:
    """``np.load``, with an array result as an ember array (bfloat16 data, which NumPy saves
    as two-byte voids, comes back as bfloat16). Other results (an ``.npz`` archive) are
    NumPy's.

    Example:
        >>> jnp.save(path, jnp.arange(3)); jnp.load(path)
        Array([0, 1, 2], dtype=int32)
    """
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray):
        if out.dtype == np.dtype("V2"):
            out = out.view(dtypes.bfloat16)
        try:
            out = asarray(out)
        except (TypeError, ValueError):  # a dtype ember does not support stays NumPy's
            pass
    return out


def fromstring(string: str, dtype: Any = float, count: int = -1, *, sep: str) -> Any:
    """The numbers in ``string`` separated by ``sep``, as a 1-D array (``np.fromstring``).

    Example:
        >>> jnp.fromstring("1 2 3", dtype=int, sep=" ")
        Array([1, 2, 3], dtype=int32)
    """
    return asarray(np.fromstring(string, dtype=dtype, count=count, sep=sep))


def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Any:
    """An array from an object with ``__dlpack__`` (a NumPy array, an ember Array, a
    PyTorch CPU tensor...); the data are copied onto ember's device.

    Example:
        >>> jnp.from_dlpack(np.arange(3.0))
        Array([0., 1., 2.], dtype=float32)
    """
    if device is not None and getattr(device, "platform", None) != "cpu":
        raise ValueError(f"from_dlpack: unsupported device {device!r}; ember runs on the CPU")
    return asarray(np.from_dlpack(x, copy=copy))


def _impure(name: str):
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"jnp.{name}() is not implemented because it may be non-pure and thus unsafe "
            f"under jit and other transformations; use jnp.asarray(np.{name}(...)) instead, "
            f"outside transformed functions")
    refuse.__name__ = name
    refuse.__doc__ = f"Not implemented, as in JAX: ``np.{name}`` consumes its input."
    return refuse


fromiter = _impure("fromiter")
fromfile = _impure("fromfile")

__all__ = ["ComplexWarning", "array_repr", "array_str", "from_dlpack", "fromfile", "fromiter",
           "fromstring", "get_printoptions", "iterable", "load", "printoptions", "save", "savez",
           "set_printoptions"]
