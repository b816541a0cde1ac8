"""ember: a JAX-compatible array framework (``import ember as jax``)."""

from ember import (
    ad_checkpoint,
    custom_batching,
    custom_derivatives,
    debug,
    dlpack,
    dtypes,
    errors,
    experimental,
    flatten_util,
    lax,
    nn,
    numpy,
    random,
    test_util,
    tree,
    tree_util,
    typing,
)
from ember._pmap_api import pmap
from ember._runtime_api import Device, live_arrays
from ember.ad_checkpoint import checkpoint_policies
from ember.api import (
    ShapeDtypeStruct,
    checkpoint,
    closure_convert,
    custom_gradient,
    custom_jvp,
    custom_vjp,
    disable_jit,
    ensure_compile_time_eval,
    eval_shape,
    fwd_and_bwd,
    grad,
    hessian,
    jacfwd,
    jacrev,
    jit,
    jvp,
    linear_transpose,
    linearize,
    make_jaxpr,
    named_call,
    named_scope,
    remat,
    typeof,
    value_and_grad,
    vjp,
    vmap,
)
from ember.config import (
    allow_f16_reductions,
    check_tracer_leaks,
    checking_leaks,
    config,
    debug_infs,
    debug_key_reuse,
    debug_nans,
    default_matmul_precision,
    default_prng_impl,
    enable_checks,
    enable_custom_prng,
    enable_x64,
    explain_cache_misses,
    legacy_prng_key,
    log_compiles,
    no_execution,
    no_tracing,
    numpy_dtype_promotion,
    numpy_rank_promotion,
    softmax_custom_jvp,
    threefry_partitionable,
    transfer_guard,
    transfer_guard_device_to_device,
    transfer_guard_device_to_host,
    transfer_guard_host_to_device,
)
from ember.dtypes import float0
from ember.lax.callback import pure_callback
from ember.runtime import Array, block_until_ready, device_get, device_put, devices
from ember.runtime.array import copy_to_host_async
from ember.runtime.compile_cache import clear_caches
from ember.runtime.dispatch import effects_barrier
from ember.runtime.topology import (
    default_backend,
    default_device,
    device_count,
    host_count,
    host_id,
    host_ids,
    local_device_count,
    local_devices,
    print_environment_info,
    process_count,
    process_index,
    process_indices,
)
from ember.version import __version__  # (one source: ember.version)

jacobian = jacrev  # (``jax.jacobian`` is reverse mode too)


__all__ = [
    "Array", "ShapeDtypeStruct", "block_until_ready", "clear_caches", "config", "device_get",
    "device_put", "devices", "disable_jit", "dtypes", "errors", "eval_shape", "jit", "lax",
    "make_jaxpr", "numpy", "tree_util",
    "checkpoint", "custom_jvp", "custom_vjp", "grad", "hessian", "jacfwd", "jacrev", "jvp",
    "linearize", "remat", "value_and_grad", "vjp", "vmap", "ad_checkpoint", "custom_derivatives",
    "test_util", "default_backend", "flatten_util", "float0", "jacobian", "named_scope", "tree",
    "closure_convert", "custom_gradient", "default_device", "device_count",
    "ensure_compile_time_eval", "linear_transpose", "local_device_count", "local_devices",
    "named_call", "print_environment_info", "process_count", "process_index", "typeof",
    "debug", "experimental", "pure_callback",
    "allow_f16_reductions", "check_tracer_leaks", "checking_leaks", "copy_to_host_async",
    "debug_infs", "debug_key_reuse", "debug_nans", "default_matmul_precision",
    "default_prng_impl", "effects_barrier", "enable_checks", "enable_custom_prng",
    "enable_x64", "explain_cache_misses", "host_count", "host_id", "host_ids",
    "legacy_prng_key", "log_compiles", "no_execution", "no_tracing", "numpy_dtype_promotion",
    "numpy_rank_promotion", "process_indices", "softmax_custom_jvp", "threefry_partitionable",
    "transfer_guard", "transfer_guard_device_to_device", "transfer_guard_device_to_host",
    "transfer_guard_host_to_device", "typing",
    "checkpoint_policies", "custom_batching", "pmap", "dlpack", "Device", "live_arrays",
    "fwd_and_bwd",
]

from ember import core as _core  # noqa: E402

# Namespaces that load on first use (``ember.ops``, ``ember.image``, ``ember.scipy``), as
# attributes or through ``import ember.image``: they define no primitives.
_LAZY_MODULES = frozenset({"image", "ops", "scipy", "sharding", "export", "stages",
                           "profiler", "distributed", "example_libraries"})
# Top-level names defined in a namespace that loads on first use: name -> module.
_LAZY_NAMES = {name: "ember._sharding_api" for name in (
    "make_mesh", "set_mesh", "shard_map", "NamedSharding", "P", "reshard", "Shard",
    "make_array_from_callback", "make_array_from_single_device_arrays",
    "make_array_from_process_local_data")}


def __getattr__(name: str):
    import importlib
    if name in _LAZY_MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY_NAMES:
        return getattr(importlib.import_module(_LAZY_NAMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_core.seal_builtin_primitives()  # (every primitive of ember exists by now)

# Loads the default backend's compiler now, as ``import jax`` loads XLA (``EMBER_PRELOAD=0``
# defers it to the first compile; see ``ember.backends``).
from ember.backends import preload_default_backend  # noqa: E402
from ember.runtime.dispatch import start_worker  # noqa: E402

preload_default_backend()
start_worker()  # (its thread waits for asynchronous work: see ``start_worker``)
