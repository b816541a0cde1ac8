"""Top-level runtime names: ``Device`` and ``live_arrays``."""

from __future__ import annotations

import gc

from ember.runtime import Array
from ember.runtime.array import CpuDevice

Device = CpuDevice  # (the class of ``ember.devices()[0]``, as ``jax.Device``)

__all__ = ["Device", "live_arrays"]


def live_arrays(platform: str | None = None) -> list[Array]:
    """Every ember Array still alive in this process (ember keeps no list of them: the
    garbage collector's view of live objects is searched, so this is slow; for debugging).

    Args:
        platform: ``None`` or ``"cpu"`` (the only platform).

    Example:
        >>> x = jnp.ones(3)
        >>> any(a is x for a in ember.live_arrays())
        True
    """
    if platform not in (None, "cpu"):
        raise RuntimeError(f"live_arrays: unknown backend {platform!r} (only 'cpu' exists)")
    return [o for o in gc.get_objects() if type(o) is Array]
