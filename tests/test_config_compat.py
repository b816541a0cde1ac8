"""JAX configuration compatibility: every JAX 0.10 option accepted or rejected as JAX does,
the options with an effect (rank promotion, debug NaNs/infs, strict dtype promotion, ...), the
top-level context managers, and the small top-level functions around them.

Expected values were taken from JAX 0.10.2 and are written here as literals.
"""

import logging
import os
import subprocess
import sys
import typing
import warnings

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.dtypes import TypePromotionError


@pytest.fixture(autouse=True)
def restore_config():
    """Every option gets its value back after each test."""
    saved = dict(ember.config._values)
    yield
    for name, value in saved.items():
        if ember.config._values[name] is not value:
            ember.config._set(name, value)


# Every option JAX 0.10.2 defines (``jax.config._value_holders``).
JAX_OPTIONS = """
check_vma eager_constant_folding jax2tf_associative_scan_reductions
jax2tf_default_native_serialization jax_allow_f16_reductions jax_array_garbage_collection_guard
jax_auto_pcast jax_backend_target jax_bcoo_cusparse_lowering
jax_captured_constants_report_frames jax_captured_constants_warn_bytes jax_check_proxy_envs
jax_check_static_indices jax_check_tracer_leaks jax_compilation_cache_check_contents
jax_compilation_cache_dir jax_compilation_cache_expect_pgle
jax_compilation_cache_include_metadata_in_key jax_compilation_cache_max_size
jax_compiler_detailed_logging_min_ops jax_compiler_enable_remat_pass
jax_cpu_collectives_implementation jax_cpu_enable_async_dispatch
jax_cpu_get_global_topology_timeout_minutes jax_cpu_get_local_topology_timeout_minutes
jax_cross_host_transfer_socket_address jax_cross_host_transfer_timeout_seconds
jax_cross_host_transfer_transfer_size jax_cross_host_transport_addresses
jax_cuda_visible_devices jax_custom_vjp3 jax_debug_infs jax_debug_key_reuse
jax_debug_leaked_clients_on_clear_backends jax_debug_log_modules jax_debug_nans
jax_default_device jax_default_matmul_precision jax_default_prng_impl jax_disable_bwd_checks
jax_disable_jit jax_disable_most_optimizations jax_disable_vmap_shmap_error
jax_disallow_mesh_context_manager jax_distributed_debug jax_dump_ir_modes jax_dump_ir_to
jax_embedded_constants_max_bytes jax_enable_checks jax_enable_compilation_cache
jax_enable_custom_prng jax_enable_pgle jax_enable_preemption_service
jax_enable_recoverability jax_enable_x64 jax_error_checking_behavior_divide
jax_error_checking_behavior_nan jax_error_checking_behavior_oob
jax_exec_time_optimization_effort jax_experimental_unsafe_xla_runtime_errors
jax_explain_cache_misses jax_explicit_x64_dtypes jax_export_calling_convention_version
jax_export_ignore_forward_compatibility jax_force_dcn_cross_host_transfers
jax_high_dynamic_range_gumbel jax_hlo_source_file_canonicalization_regex
jax_include_debug_info_in_dumps jax_include_full_tracebacks_in_locations jax_legacy_prng_key
jax_log_checkpoint_residuals jax_log_compiles jax_logging_level jax_memory_fitting_effort
jax_memory_fitting_level jax_mock_gpu_topology jax_mosaic_allow_hlo jax_mutable_array_checks
jax_no_execution jax_no_tracing jax_num_cpu_devices jax_numpy_dtype_promotion
jax_numpy_rank_promotion jax_oneapi_visible_devices jax_optimization_level
jax_pallas_enable_debug_checks jax_pallas_poison_buffers jax_pallas_use_mosaic_gpu
jax_pallas_verbose_errors jax_persistent_cache_enable_xla_caches
jax_persistent_cache_min_compile_time_secs jax_persistent_cache_min_entry_size_bytes
jax_pgle_aggregation_percentile jax_pgle_profiling_runs jax_pjrt_client_create_options
jax_platform_name jax_platforms jax_pprint_use_color
jax_ragged_dot_use_gpu_pallas_triton_lowering jax_ragged_dot_use_ragged_dot_instruction
jax_raise_persistent_cache_errors jax_random_seed_offset jax_refs_to_pins jax_remat3
jax_remove_custom_partitioning_ptr_from_cache_key jax_remove_size_one_mesh_axis_from_type
jax_rocm_visible_devices jax_scan3 jax_send_traceback_to_runtime jax_serialization_version
jax_share_binary_between_hosts jax_share_binary_between_hosts_timeout_ms
jax_softmax_custom_jvp jax_sort_devices_by_process_index jax_source_url_schema jax_thread_guard
jax_threefry_gpu_kernel_lowering jax_threefry_partitionable jax_traceback_filtering
jax_traceback_in_locations_limit jax_tracer_error_num_traceback_frames jax_transfer_guard
jax_transfer_guard_device_to_device jax_transfer_guard_device_to_host
jax_transfer_guard_host_to_device jax_use_direct_linearize jax_use_emit_pipeline_primitive
jax_use_magma jax_use_shardy_partitioner jax_use_simplified_jaxpr_constants
jax_xla_backend jax_xla_profile_version mock_num_gpu_processes
""".split()


def test_every_jax_option_exists_and_takes_its_own_value():
    assert len(JAX_OPTIONS) == 133
    for name in JAX_OPTIONS:
        value = ember.config.read(name)
        ember.config.update(name, value)
        assert ember.config.read(name) == value
        assert getattr(ember.config, name) == value


# Defaults (JAX 0.10.2, no environment variables set).
DEFAULTS = [
    ("jax_platforms", None), ("jax_platform_name", ""), ("jax_debug_nans", False),
    ("jax_debug_infs", False), ("jax_default_matmul_precision", None),
    ("jax_numpy_rank_promotion", "allow"), ("jax_numpy_dtype_promotion", "standard"),
    ("jax_check_tracer_leaks", False), ("jax_enable_checks", False),
    ("jax_traceback_filtering", "auto"), ("jax_default_prng_impl", "threefry2x32"),
    ("jax_threefry_partitionable", True), ("jax_persistent_cache_min_compile_time_secs", 1.0),
    ("jax_persistent_cache_min_entry_size_bytes", 0), ("jax_compilation_cache_max_size", -1),
    ("jax_explain_cache_misses", False), ("jax_transfer_guard", None),
    ("jax_softmax_custom_jvp", False), ("jax_cpu_enable_async_dispatch", True),
    ("jax_memory_fitting_level", "O2"), ("jax_optimization_level", "UNKNOWN"),
    ("jax_legacy_prng_key", "allow"), ("jax_num_cpu_devices", -1),
    ("jax_default_device", None), ("jax_logging_level", "NOTSET"),
]


@pytest.mark.parametrize("name,value", DEFAULTS)
def test_defaults(name, value):
    if name.upper() in os.environ:
        pytest.skip(f"{name.upper()} is set")
    assert ember.config.read(name) == value


# (option, value, what JAX stores or the error it raises)
ACCEPTED = [
    ("jax_platforms", "cpu", "cpu"),
    ("jax_platforms", "cpu,gpu", "cpu,gpu"),
    ("jax_platforms", None, None),
    ("jax_platform_name", "cpu", "cpu"),
    ("jax_default_matmul_precision", "highest", "highest"),
    ("jax_default_matmul_precision", "float32", "float32"),
    ("jax_default_matmul_precision", "BF16_BF16_F32", "BF16_BF16_F32"),
    ("jax_default_matmul_precision", None, None),
    ("jax_debug_nans", 1, True),
    ("jax_debug_nans", "yes", True),
    ("jax_debug_infs", 0, False),
    ("jax_numpy_dtype_promotion", "strict", "strict"),
    ("jax_numpy_rank_promotion", "warn", "warn"),
    ("jax_check_tracer_leaks", True, True),
    ("jax_enable_checks", True, True),
    ("jax_traceback_filtering", "off", "off"),
    ("jax_default_prng_impl", "rbg", "rbg"),
    ("jax_threefry_partitionable", False, False),
    ("jax_persistent_cache_min_compile_time_secs", 0, 0),
    ("jax_persistent_cache_min_compile_time_secs", 2.5, 2.5),
    ("jax_persistent_cache_min_entry_size_bytes", -1, -1),
    ("jax_compilation_cache_max_size", 10, 10),
    ("jax_explain_cache_misses", True, True),
    ("jax_transfer_guard", "disallow", "disallow"),
    ("jax_softmax_custom_jvp", True, True),
    ("jax_cpu_enable_async_dispatch", False, False),
    ("jax_memory_fitting_level", "O1", "O1"),
    ("jax_optimization_level", "O3", "O3"),
    ("jax_legacy_prng_key", "warn", "warn"),
    ("jax_default_device", "cpu", "cpu"),
    ("jax_num_cpu_devices", 1, 1),
    ("jax_logging_level", "INFO", "INFO"),
    ("jax_enable_x64", "x", True),
    ("jax_compilation_cache_dir", None, None),
    ("jax_dynamic_shapes", False, False),  # (gone from JAX; False is accepted)
]


@pytest.mark.parametrize("name,value,stored", ACCEPTED)
def test_update_accepts(name, value, stored):
    ember.config.update(name, value)
    assert ember.config.read(name) == stored
    assert getattr(ember.config, name) == stored


REJECTED = [  # as JAX 0.10.2 rejects them
    ("jax_platforms", 3, ValueError, "must be None or of type str"),
    ("jax_default_matmul_precision", "bogus", ValueError, "must be None or in"),
    ("jax_default_matmul_precision", "HIGHEST", ValueError, "must be None or in"),
    ("jax_numpy_dtype_promotion", "bogus", ValueError, "is not a valid NumpyDtypePromotion"),
    ("jax_numpy_dtype_promotion", 3, TypeError, "must be an instance of"),
    ("jax_numpy_rank_promotion", "bogus", ValueError,
     r"new enum value must be in \['allow', 'warn', 'raise'\], got bogus"),
    ("jax_numpy_rank_promotion", None, ValueError, "new enum value must be in"),
    ("jax_traceback_filtering", "bad", ValueError, "new enum value must be in"),
    ("jax_default_prng_impl", "bad", ValueError, "new enum value must be in"),
    ("jax_persistent_cache_min_compile_time_secs", "1", ValueError,
     "new float config value must be None or of type float"),
    ("jax_persistent_cache_min_entry_size_bytes", 1.5, ValueError,
     "new int config value must be None or of type int"),
    ("jax_compilation_cache_max_size", "x", ValueError, "new int config value"),
    ("jax_transfer_guard", "bad", ValueError, "must be None or in"),
    ("jax_compilation_cache_dir", 3, ValueError, "new string config value"),
    ("jax_memory_fitting_level", "bad", ValueError, "new enum value must be in"),
    ("jax_legacy_prng_key", "bad", ValueError, "is not a valid LegacyPrngKeyState"),
    ("jax_default_device", "xpu", ValueError, "jax.default_device must be passed"),
    ("jax_pjrt_client_create_options", 3, ValueError, "dict | str"),
    ("jax_no_such_option", 1, AttributeError, "Unrecognized config option: jax_no_such_option"),
]


@pytest.mark.parametrize("name,value,error,match", REJECTED)
def test_update_rejects_as_jax(name, value, error, match):
    before = ember.config._values.get(name)
    with pytest.raises(error, match=match):
        ember.config.update(name, value)
    assert ember.config._values.get(name) == before


UNSUPPORTED = [  # values JAX accepts that ember cannot honour: a clear error, not silence
    ("jax_platforms", "tpu", RuntimeError, "ember runs only on the host CPU"),
    ("jax_platforms", "gpu,tpu", RuntimeError, "ember runs only on the host CPU"),
    ("jax_platforms", "foo", RuntimeError, "Unknown backend 'foo'"),
    ("jax_platforms", "cpu,foo", RuntimeError, "Unknown backend 'foo'"),
    ("jax_platform_name", "gpu", RuntimeError, "ember runs only on the host CPU"),
    ("jax_default_device", "gpu", RuntimeError, "host CPU"),
    ("jax_num_cpu_devices", 8, NotImplementedError, "jax_num_cpu_devices=8"),
    ("jax_dynamic_shapes", True, AttributeError, "static shapes"),
    ("jax_explicit_x64_dtypes", "allow", NotImplementedError, "jax_explicit_x64_dtypes"),
    ("jax_allow_f16_reductions", False, NotImplementedError, "jax_allow_f16_reductions"),
    ("jax_error_checking_behavior_nan", "raise", NotImplementedError, "ignore"),
    ("jax_no_execution", True, NotImplementedError, "jax_no_execution"),
]


@pytest.mark.parametrize("name,value,error,match", UNSUPPORTED)
def test_update_rejects_what_ember_cannot_honour(name, value, error, match):
    before = ember.config.read(name)
    with pytest.raises(error, match=match):
        ember.config.update(name, value)
    assert ember.config.read(name) == before


def test_read_unknown_and_values():
    with pytest.raises(AttributeError, match="Unrecognized config option: jax_nope"):
        ember.config.read("jax_nope")
    with pytest.raises(AttributeError):
        ember.config.jax_nope  # noqa: B018
    values = ember.config.values
    assert values["jax_enable_x64"] == ember.config.jax_enable_x64
    values["jax_enable_x64"] = "changed"  # (a copy)
    assert ember.config.jax_enable_x64 in (False, True)


def test_transfer_guard_sets_every_direction():
    ember.config.update("jax_transfer_guard", "log")
    for direction in ("host_to_device", "device_to_device", "device_to_host"):
        assert ember.config.read(f"jax_transfer_guard_{direction}") == "log"
    with ember.transfer_guard("disallow"):
        assert ember.config.jax_transfer_guard_device_to_host == "disallow"
        assert (jnp.ones(3) + 1).shape == (3,)  # (nothing to guard: host memory)
    assert ember.config.jax_transfer_guard_device_to_host == "log"
    with pytest.raises(ValueError, match="must be None or in"):
        ember.transfer_guard("bad").__enter__()


def test_parse_flags_with_absl(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["prog", "--jax_numpy_rank_promotion=warn",
                                      "--jax_debug_infs", "--other=1", "--",
                                      "--jax_enable_checks"])
    ember.config.config_with_absl()
    ember.config.parse_flags_with_absl()
    assert ember.config.jax_numpy_rank_promotion == "warn"
    assert ember.config.jax_debug_infs is True
    assert ember.config.jax_enable_checks is False


# ------------------------------------------------------------------ environment variables


def _run(code: str, **env) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True,
                          text=True, timeout=60)


def test_environment_variables():
    code = ("import ember; c = ember.config; print(c.jax_numpy_rank_promotion, "
            "c.jax_debug_nans, c.jax_default_matmul_precision, c.jax_platforms, "
            "c.jax_persistent_cache_min_compile_time_secs, c.jax_numpy_dtype_promotion)")
    out = _run(code, JAX_NUMPY_RANK_PROMOTION="raise", JAX_DEBUG_NANS="true",
               JAX_DEFAULT_MATMUL_PRECISION="highest", JAX_PLATFORMS="cpu",
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0.5",
               JAX_NUMPY_DTYPE_PROMOTION="strict")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["raise", "True", "highest", "cpu", "0.5", "strict"]
    bad = _run("import ember", JAX_NUMPY_RANK_PROMOTION="bogus", JAX_PLATFORMS="tpu")
    assert bad.returncode != 0
    assert 'Invalid value "bogus" for JAX flag jax_numpy_rank_promotion' in bad.stderr


# ------------------------------------------------------------------------- context managers


def test_context_managers_set_and_restore():
    cases = [(ember.numpy_rank_promotion, "jax_numpy_rank_promotion", "raise"),
             (ember.numpy_dtype_promotion, "jax_numpy_dtype_promotion", "strict"),
             (ember.default_matmul_precision, "jax_default_matmul_precision", "float32"),
             (ember.debug_nans, "jax_debug_nans", True),
             (ember.debug_infs, "jax_debug_infs", True),
             (ember.log_compiles, "jax_log_compiles", True),
             (ember.check_tracer_leaks, "jax_check_tracer_leaks", True),
             (ember.explain_cache_misses, "jax_explain_cache_misses", True),
             (ember.default_prng_impl, "jax_default_prng_impl", "rbg"),
             (ember.threefry_partitionable, "jax_threefry_partitionable", False),
             (ember.softmax_custom_jvp, "jax_softmax_custom_jvp", True),
             (ember.enable_checks, "jax_enable_checks", True)]
    for state, name, value in cases:
        before = ember.config.read(name)
        with state(value):
            assert ember.config.read(name) == value
            assert state.value == value
        assert ember.config.read(name) == before
        with pytest.raises(KeyError), state(value):
            raise KeyError("restored after an error too")
        assert ember.config.read(name) == before


def test_context_manager_defaults_and_errors():
    with ember.debug_nans():  # (boolean options default to True)
        assert ember.config.jax_debug_nans is True
    with ember.checking_leaks():
        assert ember.config.jax_check_tracer_leaks is True
    assert ember.config.jax_check_tracer_leaks is False
    with pytest.raises(TypeError, match="requires an argument"):
        ember.numpy_rank_promotion()
    with pytest.raises(ValueError, match="new enum value must be in"):
        ember.numpy_rank_promotion("bad")
    with pytest.raises(TypeError, match="bool\\(\\) not supported"):
        bool(ember.enable_x64)
    assert ember.enable_x64.__name__ == "enable_x64"


def test_context_manager_as_decorator_and_x64():
    @ember.numpy_rank_promotion("raise")
    def level():
        return ember.config.jax_numpy_rank_promotion

    assert level() == "raise"
    assert ember.config.jax_numpy_rank_promotion == "allow"
    with ember.enable_x64(True):
        assert jnp.ones(2).dtype == np.float64
        assert ember.config.x64_enabled
    assert jnp.ones(2).dtype == np.float32


# ---------------------------------------------------------------------------- rank promotion

RANK_WARNING = ("Following NumPy automatic rank promotion for add on shapes (3,) (2, 3). Set "
                "the jax_numpy_rank_promotion config option to 'allow' to disable this "
                "warning; for more information, see "
                "https://docs.jax.dev/en/latest/rank_promotion_warning.html.")
RANK_ERROR = ("Operands could not be broadcast together for add on shapes (3,) (2, 3) and "
              "with the config option jax_numpy_rank_promotion='raise'. For more "
              "information, see https://docs.jax.dev/en/latest/rank_promotion_warning.html.")


def test_rank_promotion_warn():
    a3, a23 = jnp.ones(3), jnp.ones((2, 3))
    for _ in range(3):
        (a3 + a23).block_until_ready()  # (the eager fast path has the signature compiled)
    ember.config.update("jax_numpy_rank_promotion", "warn")
    for _ in range(3):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = jnp.add(a3, a23)
        assert [(w.category, str(w.message)) for w in caught] == [(UserWarning, RANK_WARNING)]
        assert out.shape == (2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a23 + 1.0, a23 * jnp.float32(2), jnp.ones((1, 3)) + a23  # noqa: B018 - no warning


def test_rank_promotion_raise():
    a3, a23 = jnp.ones(3), jnp.ones((2, 3))
    f = ember.jit(lambda x, y: x + y)
    assert f(a3, a23).shape == (2, 3)  # compiled under "allow"
    with ember.numpy_rank_promotion("raise"):
        for call in (lambda: jnp.add(a3, a23), lambda: a3 + a23, lambda: f(a3, a23)):
            with pytest.raises(ValueError) as info:
                call()
            assert str(info.value) == RANK_ERROR
        with pytest.raises(ValueError, match="for maximum on shapes"):
            jnp.maximum(a3, a23)
        with pytest.raises(ValueError, match="for arctan2 on shapes"):
            jnp.arctan2(a3, a23)
        with pytest.raises(ValueError, match="for add on shapes \\(4,\\) \\(2, 3\\)"):
            jnp.ones(4) + a23  # (reported before the shapes are found incompatible)
        # Scalars, equal ranks, where, and lax are not NumPy rank promotion.
        assert (a23 + 1.0).shape == (2, 3)
        assert (jnp.ones((1, 3)) + a23).shape == (2, 3)
        assert jnp.where(a3 > 0, a23, 0.0).shape == (2, 3)
        assert jnp.where(a3 > 0, a3, a23).shape == (2, 3)
        with pytest.raises(TypeError):
            lax.add(a3, a23)
    assert f(a3, a23).shape == (2, 3)


# --------------------------------------------------------------------------- debug nans/infs


def test_debug_nans_eager():
    x = jnp.array([-1.0, 2.0])
    for _ in range(3):
        jnp.log(x)  # (warm the eager fast path: it must not skip the check)
    assert np.isnan(np.asarray(jnp.log(x))[0])
    ember.config.update("jax_debug_nans", True)
    for _ in range(2):
        with pytest.raises(FloatingPointError, match=r"^invalid value \(nan\) encountered in log$"):
            jnp.log(x)
    with pytest.raises(FloatingPointError, match=r"invalid value \(nan\) encountered in div"):
        jnp.zeros(2) / jnp.zeros(2)
    with pytest.raises(FloatingPointError, match=r"invalid value \(nan\) encountered in sqrt"):
        lax.sqrt(-1.0)
    assert float(jnp.ones(2)[0] / 0.0) == np.inf  # (infs are jax_debug_infs's)
    assert (jnp.ones(2, jnp.int32) // 0).dtype == np.int32  # (integers are not checked)
    assert jnp.log(jnp.array([-1 + 0j])).dtype == np.complex64  # (finite)
    ember.config.update("jax_debug_nans", False)
    assert np.isnan(np.asarray(jnp.log(x))[0])


def test_debug_infs_eager():
    with ember.debug_infs(True):
        with pytest.raises(FloatingPointError, match=r"invalid value \(inf\) encountered in div"):
            jnp.ones(2) / jnp.zeros(2)
        with pytest.raises(FloatingPointError, match=r"invalid value \(inf\) encountered in log"):
            jnp.log(0.0)
        assert np.isnan(float(jnp.log(-1.0)))  # (NaNs are jax_debug_nans's)


def test_debug_nans_jit(capsys):
    @ember.jit
    def f(x):
        return jnp.log(x) * 2

    x = jnp.array([-1.0, 1.0])
    assert np.isnan(np.asarray(f(x))[0])  # (compiled and cached without the check)
    with ember.debug_nans(True):
        with pytest.raises(FloatingPointError, match=r"^invalid value \(nan\) encountered in log$"):
            f(x)
        assert "Calling the de-optimized version" in capsys.readouterr().out
        with pytest.raises(FloatingPointError, match=r"encountered in log"):
            ember.grad(lambda v: jnp.log(v))(-1.0)

        @ember.jit
        def g(x):
            return x - x  # nan for inf inputs; inf - inf in the op-by-op rerun too

        with pytest.raises(FloatingPointError, match=r"encountered in sub"):
            g(jnp.float32(np.inf))
        assert float(f(jnp.array([1.0, 2.0]))[0]) == 0.0
    assert np.isnan(np.asarray(f(x))[0])


def test_debug_nans_jit_without_culprit():
    nan = jnp.array([np.nan, 1.0])

    @ember.jit
    def f(x):
        return x

    with ember.debug_nans(True), pytest.raises(FloatingPointError) as info:
        f(nan)
    assert str(info.value).startswith(
        "invalid value (nan) encountered in jit(f). Because jax_config.debug_nans.value "
        "and/or config.jax_debug_infs is set, the de-optimized function")


# ------------------------------------------------------------------------ strict promotion

STRICT = ("have no available implicit dtype promotion path when "
          "jax_numpy_dtype_promotion=strict. Try explicitly casting inputs to the desired "
          "output type, or set jax_numpy_dtype_promotion=standard.")


def test_strict_dtype_promotion():
    f32, i32 = jnp.ones(3, jnp.float32), jnp.ones(3, jnp.int32)
    b, f16 = jnp.ones(3, bool), jnp.ones(3, jnp.float16)
    assert (f32 + i32).dtype == np.float32
    with ember.numpy_dtype_promotion("strict"):
        for call in (lambda: f32 + i32, lambda: f32 + f16, lambda: i32 + 1.0,
                     lambda: b + 1, lambda: b + i32, lambda: f32 + 1j,
                     lambda: jnp.ones(3, jnp.uint8) + jnp.ones(3, jnp.int8),
                     lambda: jnp.result_type(jnp.float32, jnp.int32),
                     lambda: jnp.promote_types(jnp.float32, jnp.int32),
                     lambda: jnp.where(b, f32, i32), lambda: jnp.concatenate([f32, i32]),
                     lambda: ember.jit(lambda a, c: a + c)(f32, i32)):
            with pytest.raises(TypePromotionError, match=STRICT):
                call()
        assert issubclass(TypePromotionError, ValueError)
        # Weak Python scalars still promote within their kind; equal dtypes need nothing.
        assert (f32 + 1.0).dtype == np.float32 and not (f32 + 1.0).weak_type
        assert (f32 + 1).dtype == np.float32
        assert (i32 + 1).dtype == np.int32
        assert (b & b).dtype == np.bool_
        out = jnp.add(1, 2.0)
        assert (out.dtype, out.weak_type) == (np.float32, True)
        assert jnp.promote_types(jnp.float32, float) == np.float32
        assert jnp.sin(i32).dtype == np.float32
        assert jnp.sum(b).dtype == np.int32
    assert (f32 + i32).dtype == np.float32


def test_default_matmul_precision_is_accepted():
    a = jnp.asarray(np.arange(12, dtype=np.float32).reshape(3, 4) / 7)
    expected = np.asarray(a @ a.T)
    for precision in ("bfloat16", "tensorfloat32", "float32", "highest"):
        with ember.default_matmul_precision(precision):
            np.testing.assert_array_equal(np.asarray(a @ a.T), expected)


# ------------------------------------------------------------------------ other options


def test_no_tracing_and_explain_cache_misses(caplog):
    f = ember.jit(lambda x: x * 2)
    f(jnp.ones(3))
    with ember.no_tracing(True):
        assert f(jnp.ones(3)).shape == (3,)  # (cached)
        with pytest.raises(RuntimeError, match="'no_tracing' is set"):
            f(jnp.ones(4))
    with ember.explain_cache_misses(True), caplog.at_level(logging.WARNING, "ember"):
        f(jnp.ones(5))
    assert "cache miss" in caplog.text


def test_async_dispatch_and_effects_barrier(monkeypatch):
    from ember.runtime import dispatch

    f = ember.jit(lambda x: jnp.tanh(jnp.exp(x)).sum(axis=0))
    x = jnp.ones((512, 1024))  # (queued, without waking the worker)
    f(x).block_until_ready()
    y = f(x)
    ember.effects_barrier()
    assert y.is_ready()
    submitted = []
    submit = dispatch._WORKER.submit
    monkeypatch.setattr(dispatch._WORKER, "submit",
                        lambda *a, **k: submitted.append(a) or submit(*a, **k))
    f(x).block_until_ready()
    queued = len(submitted)
    assert queued > 0
    ember.config.update("jax_cpu_enable_async_dispatch", False)
    z = f(x)
    assert len(submitted) == queued  # (ran on the calling thread)
    np.testing.assert_array_equal(np.asarray(z), np.asarray(y))


# -------------------------------------------------------------------- top-level functions


def test_typing_names():
    from ember.typing import ArrayLike, DTypeLike

    for value in (jnp.ones(2), np.ones(2), np.float32(1), np.bool_(True), True, 1, 1.0, 1j):
        assert isinstance(value, ArrayLike)
    for value in ([1.0], "1.0", None):
        assert not isinstance(value, ArrayLike)
    # (As JAX's, DTypeLike is for annotations: it holds type[Any], which isinstance rejects.)
    assert {str, np.dtype} <= set(typing.get_args(DTypeLike))
    assert isinstance("float32", DTypeLike)
    assert isinstance(jnp.float32, ember.typing.SupportsDType)
    assert ember.typing.ArrayLike is ArrayLike


def test_host_functions_and_copy_to_host_async():
    with pytest.warns(UserWarning, match="renamed to ember.process_count"):
        assert ember.host_count() == 1
    with pytest.warns(UserWarning, match="renamed to ember.process_index"):
        assert ember.host_id() == 0
    with pytest.warns(UserWarning, match="renamed to ember.process_indices"):
        assert ember.host_ids() == [0]
    assert ember.process_indices() == [0]
    tree = [jnp.ones(3), 1.0, np.ones(2)]
    assert ember.copy_to_host_async(tree) is tree
    assert jnp.ones(2).copy_to_host_async() is None
    assert ember.effects_barrier() is None
