"""ember.distributed: the multi-process runtime's setup, as ``jax.distributed``.

ember runs one process (``ember.process_count() == 1``): ``initialize`` accepts the
single-process setup (no arguments, or ``num_processes=1``/``process_id=0`` and any coordinator
address), records it, and raises a clear error for anything that needs more processes.
There is no coordination service to start, so nothing listens on the coordinator address.

Example:
    >>> ember.distributed.initialize()
    >>> ember.distributed.is_initialized()
    True
    >>> ember.distributed.shutdown()
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["initialize", "is_initialized", "shutdown"]


@dataclass
class _State:
    """What ``initialize`` recorded (``None`` fields: not initialized)."""

    coordinator_address: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    local_device_ids: list[int] | None = None
    partition_index: int | None = None
    initialized: bool = False


global_state = _State()
_lock = threading.Lock()


def _check_int(name: str, value: object, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a {what} int. Got {name}={value!r} of type "
                        f"{type(value)}.")


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None,
               local_device_ids: int | Sequence[int] | None = None,
               cluster_detection_method: str | None = None, initialization_timeout: int = 300,
               heartbeat_timeout_seconds: int = 100, shutdown_timeout_seconds: int = 300,
               coordinator_bind_address: str | None = None, slice_index: int | None = None,
               partition_index: int | None = None) -> None:
    """Sets up the distributed runtime for this process (call it once, before the program's
    work).

    ember has one process: with ``num_processes`` None or 1 and ``process_id`` None or 0 this
    records the setup (``is_initialized()`` then says True); ``JAX_COORDINATOR_ADDRESS``,
    ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID`` and ``JAX_LOCAL_DEVICE_IDS`` fill in missing
    arguments, as JAX's environment detection does. The timeouts and the bind address
    configure a coordination service that one process does not need.

    Args:
        coordinator_address: ``host:port`` of process 0's coordination service.
        num_processes: the number of processes (only 1 is possible).
        process_id: this process's index (only 0 is possible).
        local_device_ids: this process's device ids (a subset of ``[0]``, ember's device).
        cluster_detection_method: ``None``, ``"deactivate"`` or a cluster name; ember detects
            no cluster (SLURM, MPI, TPU pods), so a named method raises.
        initialization_timeout, heartbeat_timeout_seconds, shutdown_timeout_seconds,
        coordinator_bind_address: accepted for compatibility.
        slice_index: the deprecated name of ``partition_index``.
        partition_index: recorded.

    Raises:
        RuntimeError: called twice, or asked for more than one process.
        TypeError, ValueError: malformed arguments (as JAX).

    Example:
        >>> ember.distributed.initialize(coordinator_address="localhost:1234",
        ...                              num_processes=1, process_id=0)
    """
    env = os.environ
    coordinator_address = coordinator_address or env.get("JAX_COORDINATOR_ADDRESS")
    if num_processes is None and env.get("JAX_NUM_PROCESSES"):
        num_processes = int(env["JAX_NUM_PROCESSES"])
    if process_id is None and env.get("JAX_PROCESS_ID"):
        process_id = int(env["JAX_PROCESS_ID"])
    if local_device_ids is None and env.get("JAX_LOCAL_DEVICE_IDS"):
        local_device_ids = [int(i) for i in env["JAX_LOCAL_DEVICE_IDS"].split(",")]
    if isinstance(local_device_ids, int):
        local_device_ids = [local_device_ids]
    if cluster_detection_method not in (None, "deactivate"):
        raise RuntimeError(f"initialize: cluster_detection_method="
                           f"{cluster_detection_method!r} needs a multi-process cluster, and "
                           "ember runs one process (num_processes=1)")
    num_processes = 1 if num_processes is None else num_processes
    process_id = 0 if process_id is None else process_id
    _check_int("process_id", process_id, "nonnegative")
    _check_int("num_processes", num_processes, "positive")
    if not 0 <= process_id < num_processes:
        raise ValueError("process_id and num_processes must be nonnegative, with process_id "
                         f"< num_processes. Got process_id={process_id}, "
                         f"num_processes={num_processes}.")
    if num_processes != 1:
        raise RuntimeError(f"initialize: num_processes={num_processes} needs a multi-process "
                           "runtime, and ember runs one process (its process_count() is 1); "
                           "run with num_processes=1")
    if coordinator_address is not None and not isinstance(coordinator_address, str):
        raise TypeError(f"initialize: coordinator_address must be a str 'host:port', got "
                        f"{type(coordinator_address).__name__}")
    if local_device_ids is not None:
        local_device_ids = list(local_device_ids)
        if any(i != 0 for i in local_device_ids):
            raise ValueError(f"initialize: local_device_ids={local_device_ids} names devices "
                             "this process does not have (its only device has id 0)")
    with _lock:
        if global_state.initialized:
            raise RuntimeError("distributed.initialize should only be called once.")
        global_state.coordinator_address = coordinator_address
        global_state.num_processes = num_processes
        global_state.process_id = process_id
        global_state.local_device_ids = local_device_ids
        global_state.partition_index = slice_index if partition_index is None \
            else partition_index
        global_state.initialized = True


def is_initialized() -> bool:
    """Whether ``initialize`` ran (and ``shutdown`` has not since).

    Example:
        >>> ember.distributed.is_initialized()
        False
    """
    return global_state.initialized


def shutdown() -> None:
    """Shuts the distributed runtime down (forgets ``initialize``'s setup); does nothing
    when it is not running.

    Example:
        >>> ember.distributed.shutdown()
    """
    with _lock:
        global_state.__init__()
