"""Devices and processes, as JAX reports them: ember runs in one process on one CPU device."""

from __future__ import annotations

import contextlib
import platform
import sys
import warnings
from typing import Any

from ember.runtime.array import CpuDevice, devices

_BACKENDS = (None, "cpu", "interpreter")


def _check_backend(fn: str, backend: Any) -> None:
    if backend not in _BACKENDS and not isinstance(backend, CpuDevice):
        raise RuntimeError(f"{fn}: unknown backend {backend!r}; ember runs on 'cpu'")


def device_count(backend: str | None = None) -> int:
    """The number of devices: 1 (the host CPU).

    Example:
        >>> ember.device_count()
        1
    """
    _check_backend("device_count", backend)
    return len(devices())


def local_device_count(backend: str | None = None) -> int:
    """The number of devices this process drives: 1.

    Example:
        >>> ember.local_device_count()
        1
    """
    _check_backend("local_device_count", backend)
    return len(devices())


def local_devices(process_index: int | None = None,
                  backend: str | None = None) -> list[CpuDevice]:
    """The devices of process ``process_index`` (this one, 0, by default).

    Example:
        >>> ember.local_devices()
        [CpuDevice(id=0)]
    """
    _check_backend("local_devices", backend)
    if process_index not in (None, 0):
        raise ValueError(f"local_devices: unknown process_index {process_index}; ember runs "
                         "in one process (index 0)")
    return devices()


def process_index(backend: str | None = None) -> int:
    """The index of this process among those of the computation: 0.

    Example:
        >>> ember.process_index()
        0
    """
    _check_backend("process_index", backend)
    return 0


def process_count(backend: str | None = None) -> int:
    """The number of processes of the computation: 1.

    Example:
        >>> ember.process_count()
        1
    """
    _check_backend("process_count", backend)
    return 1


def process_indices(backend: str | None = None) -> list[int]:
    """The indices of the processes of the computation: ``[0]``.

    Example:
        >>> ember.process_indices()
        [0]
    """
    _check_backend("process_indices", backend)
    return [0]


def _renamed(old: str, new: str) -> None:
    warnings.warn(f"ember.{old} has been renamed to ember.{new} (as jax.{old} to jax.{new}). "
                  "This alias will eventually be removed; please update your code.",
                  stacklevel=3)


def host_count(backend: str | None = None) -> int:
    """The old name of ``process_count`` (warns, as JAX's does)."""
    _renamed("host_count", "process_count")
    return process_count(backend)


def host_id(backend: str | None = None) -> int:
    """The old name of ``process_index`` (warns, as JAX's does)."""
    _renamed("host_id", "process_index")
    return process_index(backend)


def host_ids(backend: str | None = None) -> list[int]:
    """The old name of ``process_indices`` (warns, as JAX's does)."""
    _renamed("host_ids", "process_indices")
    return process_indices(backend)


@contextlib.contextmanager
def default_device(device: CpuDevice | None):
    """Within the block, computations without placement run on ``device`` (``None``: the
    default). ember has one device, so the block only checks its argument.

    Example:
        >>> with ember.default_device(ember.devices()[0]):
        ...     y = jnp.ones(3)
    """
    if device is not None and not isinstance(device, CpuDevice) and device not in ("cpu",):
        raise ValueError(f"default_device: expected a device or None, got {device!r}")
    yield


def default_backend() -> str:
    """The platform name of the default backend, as ``jax.default_backend()``: ``"cpu"``
    (ember's native backend and its NumPy interpreter both run on the host CPU).

    Example:
        >>> ember.default_backend()
        'cpu'
    """
    from ember.backends import get_backend
    from ember.config import config

    return get_backend(config.read("jax_default_backend") or None).platform


def print_environment_info(return_string: bool = False) -> str | None:
    """Prints (or, with ``return_string``, returns) the versions of ember and its
    dependencies, Python, the platform and the devices: what to put in a bug report.

    Example:
        >>> print(ember.print_environment_info(return_string=True).splitlines()[0])
        ember:    0.1.0
    """
    import numpy

    import ember

    try:
        import llvmlite
        llvm = llvmlite.__version__
    except ImportError:  # pragma: no cover - a dependency
        llvm = "not installed"
    lines = [f"ember:    {ember.__version__}", f"numpy:    {numpy.__version__}",
             f"llvmlite: {llvm}", f"python:   {sys.version}",
             f"device info: cpu-{device_count()}, {process_count()} local devices",
             f"process_count: {process_count()}", f"platform: {platform.uname()}"]
    text = "\n".join(lines) + "\n"
    if return_string:
        return text
    print(text, end="")
    return None
