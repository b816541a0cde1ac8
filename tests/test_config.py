"""ember.config: JAX's option names, update/read, x64 effects, environment variables."""

import os
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.numpy as jnp


@pytest.fixture
def restore_x64():
    previous = ember.config.jax_enable_x64
    yield
    ember.config.update("jax_enable_x64", previous)


def test_defaults():
    assert ember.config.read("jax_enable_x64") is False or os.environ.get("JAX_ENABLE_X64")
    assert ember.config.jax_numpy_rank_promotion == "allow"
    assert ember.config.read("jax_disable_jit") in (False, True)


def test_update_and_read(restore_x64):
    ember.config.update("jax_enable_x64", True)
    assert ember.config.jax_enable_x64 is True
    assert ember.config.read("jax_enable_x64") is True
    assert ember.config.x64_enabled
    ember.config.update("jax_enable_x64", False)
    assert ember.config.jax_enable_x64 is False
    assert not ember.config.x64_enabled


def test_unknown_option():
    with pytest.raises(AttributeError, match="jax_no_such_option"):
        ember.config.update("jax_no_such_option", 1)
    with pytest.raises(AttributeError, match="jax_no_such_option"):
        ember.config.read("jax_no_such_option")
    with pytest.raises(AttributeError):
        ember.config.jax_no_such_option  # noqa: B018


def test_x64_effects(restore_x64):
    ember.config.update("jax_enable_x64", True)
    assert jnp.array(1.0).dtype == np.float64
    assert jnp.array(1).dtype == np.int64
    assert jnp.zeros(3).dtype == np.float64
    assert jnp.asarray(np.float64(1.5)).dtype == np.float64
    assert (jnp.ones(2) + 1).dtype == np.float64
    assert str(ember.make_jaxpr(jnp.sin)(1.0)) == (
        "{ lambda ; a:f64[]. let b:f64[] = sin a in (b,) }")
    ember.config.update("jax_enable_x64", False)
    assert jnp.array(1.0).dtype == np.float32
    assert jnp.array(1).dtype == np.int32
    assert jnp.asarray(np.float64(1.5)).dtype == np.float32
    assert jnp.asarray(np.arange(3, dtype=np.uint64)).dtype == np.uint32
    assert str(ember.make_jaxpr(jnp.sin)(1.0)) == (
        "{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) }")


def test_x64_toggle_does_not_poison_eager_caches(restore_x64):
    x32 = jnp.add(jnp.ones(2), 1.0)
    ember.config.update("jax_enable_x64", True)
    x64 = jnp.add(jnp.ones(2), 1.0)
    ember.config.update("jax_enable_x64", False)
    again = jnp.add(jnp.ones(2), 1.0)
    assert (x32.dtype, x64.dtype, again.dtype) == (np.float32, np.float64, np.float32)


def _run(code: str, **env) -> str:
    full_env = {k: v for k, v in os.environ.items() if k not in ("JAX_ENABLE_X64",
                                                                  "EMBER_ENABLE_X64")}
    full_env.update(env)
    out = subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_env_var_read_at_import():
    code = ("import ember, ember.numpy as jnp; "
            "print(ember.config.jax_enable_x64, jnp.array(1.0).dtype)")
    assert _run(code, JAX_ENABLE_X64="1") == "True float64"
    assert _run(code, JAX_ENABLE_X64="true") == "True float64"
    assert _run(code, JAX_ENABLE_X64="0") == "False float32"
    assert _run(code) == "False float32"
