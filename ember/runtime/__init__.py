"""Runtime: device arrays, devices, device_put, eager execution, compiled-code dispatch."""

from ember.runtime import dispatch  # noqa: F401 - installs the pjit impl
from ember.runtime.array import Array, CpuDevice, block_until_ready, device_get, device_put, devices
from ember.runtime.eager import apply_primitive

__all__ = ["Array", "CpuDevice", "apply_primitive", "block_until_ready", "device_get",
           "device_put", "devices"]
