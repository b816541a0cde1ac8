"""Global settings, read and written with JAX's option names (``jax_enable_x64``, ...).

``ember.config.update(name, value)`` accepts every option JAX 0.10 defines, validated as JAX
validates it (a bad enum value is a ``ValueError``, a bad type the error JAX raises); each
option's initial value comes from its environment variable (``JAX_ENABLE_X64=1``,
``JAX_NUMPY_RANK_PROMOTION=raise``, ...) when set. Options with a context manager in JAX have
one here too, exported at the top level (``ember.enable_x64(True)``,
``ember.numpy_rank_promotion("raise")``, ``ember.debug_nans()``, ...). The context managers
set the process-wide value for the block and restore the previous one after it (JAX's are
thread-local).

What the options do in ember:

* honoured: ``jax_enable_x64``, ``jax_disable_jit``, ``jax_log_compiles``,
  ``jax_explain_cache_misses`` (logs why a jitted function recompiles),
  ``jax_numpy_rank_promotion`` (``"warn"``: a ``UserWarning``, ``"raise"``: a ``ValueError``
  when an ``ember.numpy`` function broadcasts operands of different ranks),
  ``jax_numpy_dtype_promotion`` (``"strict"``: implicit promotion between different dtypes in
  ``ember.numpy`` raises ``ember.dtypes.TypePromotionError``; weakly typed Python scalars still
  promote within their kind), ``jax_debug_nans``/``jax_debug_infs`` (a ``FloatingPointError``
  naming the primitive whose eager result has a NaN/inf; a jitted function with one in its
  outputs is run again op by op to name it), ``jax_enable_compilation_cache``,
  ``jax_compilation_cache_dir``, ``jax_cpu_enable_async_dispatch`` (``False``: jitted
  computations run on the calling thread), ``jax_no_tracing`` (``True``: tracing a jitted
  function raises ``RuntimeError``).
* checked: ``jax_platforms``/``jax_platform_name`` (ember runs on the host CPU: a platform
  list must name ``"cpu"``, an unknown platform is an error), ``jax_default_device`` (the CPU
  device, ``"cpu"`` or None), ``jax_num_cpu_devices`` (1 or -1), ``jax_dynamic_shapes`` (gone
  from JAX; ember accepts only ``False``), ``jax_explicit_x64_dtypes`` (only ``"warn"``),
  ``jax_allow_f16_reductions`` (only ``True``), ``jax_error_checking_behavior_*`` (only
  ``"ignore"``): a value ember cannot honour raises at ``update``.
* accepted without effect: ``jax_default_matmul_precision`` (CPU float32 dots and
  convolutions always compute at full float32 precision, JAX's behaviour on CPU too), the
  transfer guards (ember's arrays live in host memory: there are no transfers to guard),
  ``jax_check_tracer_leaks`` (a leaked tracer is reported when it is used, as an
  ``UnexpectedTracerError``), ``jax_enable_checks``, ``jax_traceback_filtering`` (ember's
  tracebacks are not filtered), the PRNG options (``jax_default_prng_impl``,
  ``jax_threefry_partitionable``, ``jax_enable_custom_prng``, ``jax_legacy_prng_key``, ...:
  stored for a random module), ``jax_softmax_custom_jvp``, the persistent-cache tuning knobs
  (``jax_persistent_cache_min_compile_time_secs``, ``..._min_entry_size_bytes``,
  ``jax_compilation_cache_max_size``, ...), the XLA/compiler knobs
  (``jax_optimization_level``, ``jax_memory_fitting_level``, ...), and every GPU, TPU,
  multi-host, export and Pallas option.

Example:
    >>> import ember
    >>> ember.config.update("jax_numpy_rank_promotion", "raise")
    >>> ember.config.jax_numpy_rank_promotion
    'raise'
    >>> with ember.numpy_rank_promotion("allow"):
    ...     pass
"""

from __future__ import annotations

import contextlib
import enum
import functools
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any


class NumpyDtypePromotion(enum.StrEnum):
    """Values of ``jax_numpy_dtype_promotion`` (compare equal to their strings)."""
    STANDARD = "standard"
    STRICT = "strict"


class LegacyPrngKeyState(enum.StrEnum):
    """Values of ``jax_legacy_prng_key``."""
    ALLOW = "allow"
    WARN = "warn"
    ERROR = "error"


class ExplicitX64Mode(enum.IntEnum):
    """Values of ``jax_explicit_x64_dtypes`` (also given by name: ``"warn"``, ...)."""
    WARN = 1
    ERROR = 2
    ALLOW = 3

    @classmethod
    def _missing_(cls, value: object) -> ExplicitX64Mode | None:
        return {"warn": cls.WARN, "error": cls.ERROR, "allow": cls.ALLOW}.get(value)  # type: ignore[arg-type]


class RuntimeTracebackMode(enum.StrEnum):
    """Values of ``jax_send_traceback_to_runtime`` (names in any case)."""
    OFF = "off"
    ON = "on"
    FULL = "full"

    @classmethod
    def _missing_(cls, value: object) -> RuntimeTracebackMode | None:
        if isinstance(value, str):
            return cls.__members__.get(value.upper())
        return None


# ------------------------------------------------------------------------ value parsers
# Each kind of option checks a new value as JAX's does (same error classes and messages).


def _parse_bool(value: Any) -> bool:
    return bool(value)


def _enum_parser(values: tuple[str, ...], optional: bool = False) -> Callable[[Any], Any]:
    def parse(value: Any) -> Any:
        if optional and value is None:
            return None
        if type(value) is not str or value not in values:
            what = "None or in" if optional else "in"
            raise ValueError(f"new enum value must be {what} {list(values)}, "
                             f"got {value} of type {type(value)}.")
        return value
    return parse


def _enum_class_parser(cls: type[enum.Enum]) -> Callable[[Any], Any]:
    def parse(value: Any) -> Any:
        if isinstance(value, str):
            return cls(value)
        if not isinstance(value, cls):
            raise TypeError(f"new enum value must be an instance of {cls}, got {value} of "
                            f"type {type(value)}.")
        return value
    return parse


def _parse_int(value: Any) -> Any:
    if value is not None and not isinstance(value, int):
        raise ValueError("new int config value must be None or of type int, "
                         f"got {value} of type {type(value)}")
    return value


def _parse_float(value: Any) -> Any:
    if value is not None and not isinstance(value, (float, int)):
        raise ValueError("new float config value must be None or of type float, "
                         f"got {value} of type {type(value)}")
    return value


def _parse_str(value: Any) -> Any:
    if not isinstance(value, str):
        raise TypeError("new string config value must be of type str, "
                        f"got {value} of type {type(value)}.")
    return value


def _parse_optional_str(value: Any) -> Any:
    if value is not None and not isinstance(value, str):
        raise ValueError("new string config value must be None or of type str, "
                         f"got {value} of type {type(value)}.")
    return value


def _parse_any(value: Any) -> Any:
    return value


# --------------------------------------------------------- environment variable parsers


def _env_bool(name: str, text: str) -> bool:
    text = text.lower()
    if text in ("y", "yes", "t", "true", "on", "1"):
        return True
    if text in ("n", "no", "f", "false", "off", "0"):
        return False
    raise ValueError(f"invalid truth value {text!r} for environment {name.upper()!r}")


def _env_checked(parse: Callable[[Any], Any], convert: Callable[[str], Any] = str
                 ) -> Callable[[str, str], Any]:
    def from_env(name: str, text: str) -> Any:
        try:
            return parse(convert(text))
        except (ValueError, TypeError):
            raise ValueError(f'Invalid value "{text}" for JAX flag {name}') from None
    return from_env


def _env_raw(name: str, text: str) -> str:
    return text


class _Option:
    __slots__ = ("name", "default", "parse", "from_env", "context", "check")

    def __init__(self, name: str, default: Any, parse: Callable[[Any], Any],
                 from_env: Callable[[str, str], Any], context: bool,
                 check: Callable[[Any], None] | None):
        self.name = name
        self.default = default
        self.parse = parse  # JAX's type/enum check: returns the value to store
        self.from_env = from_env
        self.context = context  # whether JAX has a context manager (a ``State``) for it
        self.check = check  # ember's own check: raises for values ember cannot honour


_OPTIONS: dict[str, _Option] = {}


def _define(name: str, default: Any, parse: Callable[[Any], Any],
            from_env: Callable[[str, str], Any], context: bool = True,
            check: Callable[[Any], None] | None = None) -> None:
    _OPTIONS[name] = _Option(name, default, parse, from_env, context, check)


def _bool(name: str, default: bool, context: bool = True,
          check: Callable[[Any], None] | None = None) -> None:
    _define(name, default, _parse_bool if context else _parse_any, _env_bool, context, check)


def _enum(name: str, values: tuple[str, ...], default: str | None, optional: bool = False,
          context: bool = True, check: Callable[[Any], None] | None = None) -> None:
    parse = _enum_parser(values, optional)
    _define(name, default, parse, _env_checked(parse), context, check)


def _enum_class(name: str, cls: type[enum.Enum], default: enum.Enum,
                check: Callable[[Any], None] | None = None) -> None:
    parse = _enum_class_parser(cls)
    _define(name, default, parse, _env_checked(parse), True, check)


def _int(name: str, default: int, context: bool = True,
         check: Callable[[Any], None] | None = None) -> None:
    parse = _parse_int if context else _parse_any
    _define(name, default, parse, _env_checked(_parse_int, int), context, check)


def _float(name: str, default: float) -> None:
    _define(name, default, _parse_float, _env_checked(_parse_float, float))


def _str(name: str, default: str | None, optional: bool = True, context: bool = True) -> None:
    parse = (_parse_optional_str if optional else _parse_str) if context else _parse_any
    _define(name, default, parse, _env_raw, context)


def _object(name: str, default: Any, check: Callable[[Any], None] | None = None) -> None:
    _define(name, default, _parse_any, _env_raw, True, check)


# ------------------------------------------------------------- checks of ember's limits

_PLATFORMS = ("cpu", "gpu", "cuda", "rocm", "tpu", "metal")


def _check_platforms(value: Any) -> None:
    if not value:
        return
    names = [p.strip().lower() for p in value.split(",")]
    for p in names:
        if p not in _PLATFORMS:
            raise RuntimeError(f"Unknown backend {p!r} in jax_platforms={value!r}: known "
                               f"platforms are {list(_PLATFORMS)}, and ember runs on 'cpu'")
    if "cpu" not in names:
        raise RuntimeError(f"Unable to initialize backend {names[0]!r} (jax_platforms="
                           f"{value!r}): ember runs only on the host CPU; set jax_platforms "
                           "to 'cpu' or leave it unset")


def _check_platform_name(value: Any) -> None:
    if value in (None, ""):
        return
    if not isinstance(value, str):
        raise TypeError(f"jax_platform_name must be a string, got {value!r}")
    if value.lower() not in _PLATFORMS:
        raise RuntimeError(f"Unknown backend {value!r} (jax_platform_name); ember runs on 'cpu'")
    if value.lower() != "cpu":
        raise RuntimeError(f"Unable to initialize backend {value!r} (jax_platform_name): "
                           "ember runs only on the host CPU")


def _check_default_device(value: Any) -> None:
    if value is None or value == "cpu" or type(value).__name__ == "CpuDevice":
        return
    if value in ("gpu", "tpu"):
        raise RuntimeError(f"jax_default_device={value!r}: ember runs only on the host CPU")
    raise ValueError("jax.default_device must be passed either a Device object (e.g. "
                     "`jax.devices('cpu')[0]`) or a platform name string like 'cpu' or "
                     f"'gpu', got: {value!r}")


def _only(name: str, *allowed: Any) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value not in allowed:
            raise NotImplementedError(
                f"{name}={value!r} is not supported by ember (it accepts "
                f"{' or '.join(repr(a) for a in allowed)})")
    return check


def _check_pjrt_options(value: Any) -> None:
    if value is not None and not isinstance(value, (str, dict)):
        raise ValueError("new string config value must be None or of type dict | str, got "
                         f"{value} of type {type(value)}.")


def _check_dynamic_shapes(value: Any) -> None:
    if value:
        raise AttributeError("jax_dynamic_shapes=True is not supported: ember (like JAX, "
                             "which has removed the option) traces with static shapes only")


# ------------------------------------------------------------------------------ options
# JAX 0.10's options with their defaults and kinds (see the module docstring for what each
# does here). ``context=False``: a JAX "flag" (no context manager, no type check).

_bool("jax_enable_x64", False)
_bool("jax_disable_jit", False)
_bool("jax_log_compiles", False)
_bool("jax_explain_cache_misses", False)
_bool("jax_debug_nans", False)
_bool("jax_debug_infs", False)
_enum("jax_numpy_rank_promotion", ("allow", "warn", "raise"), "allow")
_enum_class("jax_numpy_dtype_promotion", NumpyDtypePromotion, NumpyDtypePromotion.STANDARD)
_enum("jax_default_matmul_precision",
      ("default", "high", "highest", "bfloat16", "tensorfloat32", "float32",
       "ANY_F8_ANY_F8_F32", "ANY_F8_ANY_F8_F32_FAST_ACCUM", "ANY_F8_ANY_F8_ANY",
       "ANY_F8_ANY_F8_ANY_FAST_ACCUM", "F16_F16_F16", "F16_F16_F32", "BF16_BF16_BF16",
       "BF16_BF16_F32", "BF16_BF16_F32_X3", "BF16_BF16_F32_X6", "BF16_BF16_F32_X9",
       "TF32_TF32_F32", "TF32_TF32_F32_X3", "F32_F32_F32", "F64_F64_F64"), None, optional=True)
_bool("jax_check_tracer_leaks", False)
_bool("jax_enable_checks", False)
_enum("jax_traceback_filtering",
      ("off", "tracebackhide", "remove_frames", "quiet_remove_frames", "auto"), "auto")
_bool("jax_no_tracing", False)
_bool("jax_no_execution", False, check=_only("jax_no_execution", False))
# Platforms and devices.
_str("jax_platforms", None)
_str("jax_platform_name", "", context=False)
_str("jax_default_backend", "")  # (ember's: the backend jit compiles for by default)
_object("jax_default_device", None, check=_check_default_device)
_int("jax_num_cpu_devices", -1, check=_only("jax_num_cpu_devices", -1, 1))
_bool("jax_cpu_enable_async_dispatch", True, context=False)
_bool("jax_dynamic_shapes", False, context=False, check=_check_dynamic_shapes)
# Dtypes.
_enum_class("jax_explicit_x64_dtypes", ExplicitX64Mode, ExplicitX64Mode.WARN,
            check=_only("jax_explicit_x64_dtypes", ExplicitX64Mode.WARN))
_bool("jax_allow_f16_reductions", True, check=_only("jax_allow_f16_reductions", True))
for _kind in ("nan", "divide", "oob"):
    _enum(f"jax_error_checking_behavior_{_kind}", ("ignore", "raise"), "ignore",
          check=_only(f"jax_error_checking_behavior_{_kind}", "ignore"))
# Compilation caches.
_bool("jax_enable_compilation_cache", True)
_str("jax_compilation_cache_dir", None)
_float("jax_persistent_cache_min_compile_time_secs", 1.0)
_int("jax_persistent_cache_min_entry_size_bytes", 0)
_int("jax_compilation_cache_max_size", -1)
_bool("jax_raise_persistent_cache_errors", False)
_str("jax_persistent_cache_enable_xla_caches", "xla_gpu_per_fusion_autotune_cache_dir")
_bool("jax_compilation_cache_include_metadata_in_key", False)
_bool("jax_compilation_cache_check_contents", False)
_bool("jax_compilation_cache_expect_pgle", False)
_bool("jax_remove_custom_partitioning_ptr_from_cache_key", False)
# Random numbers.
_enum("jax_default_prng_impl",
      ("threefry2x32", "threefry4x32", "rbg", "unsafe_rbg", "philox2x32", "philox4x32"),
      "threefry2x32")
_bool("jax_threefry_partitionable", True)
_bool("jax_threefry_gpu_kernel_lowering", False)
_bool("jax_enable_custom_prng", False)
_enum_class("jax_legacy_prng_key", LegacyPrngKeyState, LegacyPrngKeyState.ALLOW)
_bool("jax_debug_key_reuse", False)
_int("jax_random_seed_offset", 0)
_bool("jax_high_dynamic_range_gumbel", False)
_bool("jax_softmax_custom_jvp", False)
# Transfer and garbage-collection guards.
_TRANSFER_LEVELS = ("allow", "log", "disallow", "log_explicit", "disallow_explicit")
for _direction in ("", "_host_to_device", "_device_to_device", "_device_to_host"):
    _enum(f"jax_transfer_guard{_direction}", _TRANSFER_LEVELS, None, optional=True)
_enum("jax_array_garbage_collection_guard", ("allow", "log", "fatal"), None, optional=True)
_bool("jax_thread_guard", False)
# Compiler knobs (XLA's; ember's pipeline has its own fixed settings).
_float("jax_exec_time_optimization_effort", 0.0)
_float("jax_memory_fitting_effort", 0.0)
_enum("jax_optimization_level", ("UNKNOWN", "O0", "O1", "O2", "O3"), "UNKNOWN")
_enum("jax_memory_fitting_level", ("UNKNOWN", "O0", "O1", "O2", "O3"), "O2")
_bool("jax_compiler_enable_remat_pass", True)
_bool("jax_disable_most_optimizations", False, context=False)
_int("jax_compiler_detailed_logging_min_ops", 10, context=False)
_bool("jax_use_shardy_partitioner", True)
_bool("jax_enable_pgle", False)
_int("jax_pgle_profiling_runs", 3)
_int("jax_pgle_aggregation_percentile", 90)
_int("jax_xla_profile_version", 0)
_bool("jax_experimental_unsafe_xla_runtime_errors", False)
_enum_class("jax_send_traceback_to_runtime", RuntimeTracebackMode, RuntimeTracebackMode.OFF)
# Tracing and debugging internals.
_bool("jax_check_static_indices", False)
_int("jax_captured_constants_warn_bytes", 2 * 10 ** 9)
_int("jax_captured_constants_report_frames", 0)
_bool("jax_log_checkpoint_residuals", False)
_bool("jax_use_direct_linearize", True)
_bool("jax_use_simplified_jaxpr_constants", False)
_int("jax_embedded_constants_max_bytes", 32)
_bool("jax_mutable_array_checks", True)
_bool("jax_refs_to_pins", False)
_bool("jax_disable_bwd_checks", False)
_bool("jax_disable_vmap_shmap_error", False)
_bool("jax_scan3", False)
_bool("jax_remat3", False)
_bool("jax_custom_vjp3", False)
_bool("eager_constant_folding", False)
_bool("jax_auto_pcast", True)
_bool("check_vma", False)
_bool("jax_remove_size_one_mesh_axis_from_type", False)
_bool("jax_disallow_mesh_context_manager", False)
_bool("jax_distributed_debug", False)
_bool("jax_debug_leaked_clients_on_clear_backends", False)
_int("jax_tracer_error_num_traceback_frames", 5, context=False)
_bool("jax_pprint_use_color", True)
_str("jax_hlo_source_file_canonicalization_regex", None)
_str("jax_source_url_schema", None)
_bool("jax_include_full_tracebacks_in_locations", True)
_int("jax_traceback_in_locations_limit", 100)
_str("jax_debug_log_modules", "", optional=False)
_enum("jax_logging_level", ("NOTSET", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
      "NOTSET", optional=True)
_str("jax_dump_ir_to", "", context=False)
_str("jax_dump_ir_modes", "stablehlo", context=False)
_bool("jax_include_debug_info_in_dumps", True, context=False)
# Export, serialization, multi-host, accelerators.
_int("jax_serialization_version", 0)
_int("jax_export_calling_convention_version", 10)
_bool("jax_export_ignore_forward_compatibility", False)
_bool("jax2tf_associative_scan_reductions", False)
_bool("jax2tf_default_native_serialization", True)
_object("jax_pjrt_client_create_options", None, check=_check_pjrt_options)
_bool("jax_share_binary_between_hosts", False)
_int("jax_share_binary_between_hosts_timeout_ms", 20 * 60 * 1000)
_enum("jax_cpu_collectives_implementation", ("gloo", "mpi", "megascale"), "gloo",
      optional=True)
_int("jax_cpu_get_local_topology_timeout_minutes", 2)
_int("jax_cpu_get_global_topology_timeout_minutes", 5)
_enum("jax_use_magma", ("off", "on", "auto"), "auto")
_bool("jax_bcoo_cusparse_lowering", False)
_bool("jax_use_emit_pipeline_primitive", False)
_bool("jax_ragged_dot_use_ragged_dot_instruction", True)
_bool("jax_ragged_dot_use_gpu_pallas_triton_lowering", False)
_bool("jax_pallas_enable_debug_checks", False)
_bool("jax_pallas_use_mosaic_gpu", True)
_bool("jax_pallas_poison_buffers", False)
_bool("jax_pallas_verbose_errors", False, context=False)
_bool("jax_mosaic_allow_hlo", False)
for _name, _default in (("jax_xla_backend", ""), ("jax_backend_target", ""),
                        ("jax_cuda_visible_devices", "all"), ("jax_rocm_visible_devices", "all"),
                        ("jax_oneapi_visible_devices", "all"), ("jax_mock_gpu_topology", ""),
                        ("jax_cross_host_transfer_socket_address", ""),
                        ("jax_cross_host_transport_addresses", "")):
    _str(_name, _default, context=False)
for _name, _bdefault in (("jax_force_dcn_cross_host_transfers", False),
                         ("jax_sort_devices_by_process_index", True),
                         ("jax_check_proxy_envs", True)):
    _bool(_name, _bdefault, context=False)
_bool("jax_enable_recoverability", False)
_bool("jax_enable_preemption_service", True)
for _name, _idefault in (("mock_num_gpu_processes", 0),
                         ("jax_cross_host_transfer_timeout_seconds", None),
                         ("jax_cross_host_transfer_transfer_size", None)):
    _int(_name, _idefault, context=False)

_OPTIONS["jax_platforms"].check = _check_platforms
_OPTIONS["jax_platform_name"].check = _check_platform_name

# Environment variables ember read before it took JAX's names for everything.
_EMBER_ENV = {"jax_enable_x64": "EMBER_ENABLE_X64",
              "jax_default_backend": "EMBER_BACKEND",
              "jax_enable_compilation_cache": "EMBER_ENABLE_COMPILATION_CACHE"}


def _initial_value(option: _Option) -> Any:
    for var in (option.name.upper(), _EMBER_ENV.get(option.name)):
        text = os.environ.get(var) if var else None
        if text is not None:
            value = option.from_env(option.name, text)
            if option.name in ("jax_platforms", "jax_platform_name") and value is not None:
                value = value.lower()
            if option.check is not None:
                option.check(value)
            return value
    return option.default


_log = logging.getLogger("ember")


class Config:
    """Holds ember's settings; ``ember.config.update("jax_enable_x64", True)`` changes one.

    ``update``/``read`` take JAX's option names; ``config.<name>`` reads one too. The module
    docstring of ``ember.config`` says which options have an effect.

    Example:
        >>> import ember
        >>> ember.config.update("jax_enable_x64", False)
        >>> ember.config.jax_enable_x64
        False
    """

    def __init__(self) -> None:
        self._values: dict[str, Any] = {name: _initial_value(option)
                                        for name, option in _OPTIONS.items()}
        self._listeners: list = []
        self._refresh()

    def _refresh(self) -> None:
        values = self._values
        # Plain attributes (not properties), read on hot paths: x64 on every dtype decision,
        # the others on every jitted call or eager miss.
        self.x64_enabled: bool = bool(values["jax_enable_x64"])
        self.jit_disabled: bool = bool(values["jax_disable_jit"])
        rank = values["jax_numpy_rank_promotion"]
        strict = values["jax_numpy_dtype_promotion"] == NumpyDtypePromotion.STRICT
        nans, infs = bool(values["jax_debug_nans"]), bool(values["jax_debug_infs"])
        self.rank_promotion: str = rank
        self.strict_promotion: bool = strict
        self.debug_checks: bool = nans or infs
        # Whether eager ember.numpy calls must take the ordinary path (the fast path's
        # cached programs skip rank-promotion warnings and NaN checks).
        self.eager_checks: bool = nans or infs or rank != "allow"
        self.async_dispatch: bool = bool(values["jax_cpu_enable_async_dispatch"])
        # Keys the dtype promotion cache (``dtypes.result_type``) and jit's caches: just the
        # x64 flag while the options that change tracing have their defaults.
        self.promotion_key: Any = (self.x64_enabled, "strict") if strict else self.x64_enabled
        if rank == "allow" and not strict and not nans and not infs:
            self.trace_key: Any = self.x64_enabled
        else:
            self.trace_key = (self.x64_enabled, rank, strict, nans, infs)

    def update(self, name: str, value: Any) -> None:
        """Sets the option ``name`` to ``value``: checked as JAX checks it, and against what
        ember supports; unknown names raise AttributeError.

        Example:
            >>> ember.config.update("jax_debug_nans", True)
        """
        option = _OPTIONS.get(name)
        if option is None:
            raise AttributeError(f"Unrecognized config option: {name}")
        self._set(name, option.parse(value))
        if name == "jax_transfer_guard":  # (sets the three directions, as in JAX)
            for direction in ("host_to_device", "device_to_device", "device_to_host"):
                self._set(f"jax_transfer_guard_{direction}", value)

    def _set(self, name: str, value: Any) -> None:
        option = _OPTIONS[name]
        if option.check is not None:
            option.check(value)
        self._values[name] = value
        self._refresh()
        for listener in self._listeners:
            listener(name, value)

    def read(self, name: str) -> Any:
        """The value of the option ``name``.

        Example:
            >>> ember.config.read("jax_enable_x64")
            False
        """
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"Unrecognized config option: {name}") from None

    @property
    def values(self) -> dict[str, Any]:
        """Every option's current value, by name."""
        return dict(self._values)

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values", {})
        if name in values:
            return values[name]
        raise AttributeError(f"'Config' object has no attribute {name!r}")

    def config_with_absl(self) -> None:
        """JAX's hook for absl apps: ember reads ``--jax_...`` arguments itself
        (``parse_flags_with_absl``), so there is nothing to register."""

    def parse_flags_with_absl(self) -> None:
        """Applies ``--jax_name=value`` arguments of ``sys.argv`` (before a ``--``), as
        JAX's does; booleans may be given as ``--jax_name`` or ``--nojax_name``."""
        import sys
        for arg in sys.argv[1:]:
            if arg == "--":
                break
            if not arg.startswith(("--jax", "--nojax")):
                continue
            text = arg[2:]
            name, _, raw = text.partition("=")
            negate = name.startswith("no") and name[2:] in _OPTIONS
            if negate:
                name = name[2:]
            option = _OPTIONS.get(name)
            if option is None:
                continue
            if option.from_env is _env_bool and not raw:
                value: Any = not negate
            else:
                value = option.from_env(name, raw)
            self._set(name, value)


config = Config()


# ---------------------------------------------------------------- context managers

_NO_DEFAULT = object()


class State:
    """An option's context manager, as JAX exports them (``ember.enable_x64``, ...):
    ``with ember.debug_nans(True): ...`` sets the option for the block (boolean options
    default to True); also a decorator. ``.value`` is the option's current value.

    Example:
        >>> with ember.numpy_rank_promotion("raise"):
        ...     jnp.ones(3) + jnp.ones((2, 3))  # ValueError
    """

    def __init__(self, name: str):
        self._name = name
        self.__name__ = name[4:] if name.startswith("jax_") else name
        self.__doc__ = f"Context manager for `{name}` config option."

    @property
    def name(self) -> str:
        return self._name

    @property
    def value(self) -> Any:
        return config._values[self._name]

    def __bool__(self) -> bool:
        raise TypeError("bool() not supported for instances of type 'State' "
                        "(did you mean to use 'State.value' instead?)")

    def __call__(self, new_val: Any = _NO_DEFAULT) -> StateContextManager:
        return StateContextManager(self, new_val)

    def __repr__(self) -> str:
        return f"<ember config State {self._name}={self.value!r}>"


class StateContextManager:
    """Sets an option for a ``with`` block (or a decorated function's calls)."""

    __slots__ = ("state", "new_val", "prev")

    def __init__(self, state: State, new_val: Any):
        option = _OPTIONS[state._name]
        if new_val is _NO_DEFAULT:
            if option.parse is not _parse_bool:
                raise TypeError(f"Context manager for {state.__name__} config option "
                                "requires an argument representing the new value for the "
                                "config option.")
            new_val = True
        self.state = state
        self.new_val = option.parse(new_val)

    def __enter__(self) -> None:
        self.prev = config._values[self.state._name]
        config._set(self.state._name, self.new_val)

    def __exit__(self, *exc: Any) -> None:
        config._set(self.state._name, self.prev)

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with StateContextManager(self.state, self.new_val):
                return func(*args, **kwargs)
        return wrapper


enable_x64 = State("jax_enable_x64")
log_compiles = State("jax_log_compiles")
explain_cache_misses = State("jax_explain_cache_misses")
debug_nans = State("jax_debug_nans")
debug_infs = State("jax_debug_infs")
numpy_rank_promotion = State("jax_numpy_rank_promotion")
numpy_dtype_promotion = State("jax_numpy_dtype_promotion")
default_matmul_precision = State("jax_default_matmul_precision")
check_tracer_leaks = State("jax_check_tracer_leaks")
checking_leaks = functools.partial(check_tracer_leaks, True)
enable_checks = State("jax_enable_checks")
default_prng_impl = State("jax_default_prng_impl")
threefry_partitionable = State("jax_threefry_partitionable")
enable_custom_prng = State("jax_enable_custom_prng")
legacy_prng_key = State("jax_legacy_prng_key")
debug_key_reuse = State("jax_debug_key_reuse")
softmax_custom_jvp = State("jax_softmax_custom_jvp")
allow_f16_reductions = State("jax_allow_f16_reductions")
no_tracing = State("jax_no_tracing")
no_execution = State("jax_no_execution")
transfer_guard_host_to_device = State("jax_transfer_guard_host_to_device")
transfer_guard_device_to_device = State("jax_transfer_guard_device_to_device")
transfer_guard_device_to_host = State("jax_transfer_guard_device_to_host")
array_garbage_collection_guard = State("jax_array_garbage_collection_guard")
thread_guard = State("jax_thread_guard")
auto_pcast = State("jax_auto_pcast")
remove_size_one_mesh_axis_from_type = State("jax_remove_size_one_mesh_axis_from_type")
jax2tf_associative_scan_reductions = State("jax2tf_associative_scan_reductions")


@contextlib.contextmanager
def transfer_guard(new_val: str) -> Iterator[None]:
    """Sets the transfer guard level of all three directions for the block. ember's arrays
    live in host memory, so there are no transfers to guard: the levels are only recorded.

    Example:
        >>> with ember.transfer_guard("disallow"):
        ...     y = x + 1
    """
    with contextlib.ExitStack() as stack:
        stack.enter_context(transfer_guard_host_to_device(new_val))
        stack.enter_context(transfer_guard_device_to_device(new_val))
        stack.enter_context(transfer_guard_device_to_host(new_val))
        stack.enter_context(State("jax_transfer_guard")(new_val))
        yield
