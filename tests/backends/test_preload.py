"""``import ember`` preloads the default backend's compiler (``EMBER_PRELOAD``): the CPU
backend's modules, llvmlite and the HLO passes are loaded at import, as ``import jax`` loads
XLA, unless the switch is off or the default backend is the interpreter."""

import json
import os
import subprocess
import sys

import pytest

PROGRAM = """
import json, sys
before = set(sys.modules)
import ember, ember.numpy as jnp
loaded = sorted(m for m in set(sys.modules) - before if m.startswith(("ember.backends.cpu",
                "llvmlite", "ember.compiler.passes")))
f = ember.jit(lambda a: jnp.sum(jnp.tanh(a * 2.0 + 1.0)))
value = float(f(jnp.arange(8, dtype=jnp.float32) / 8))
print(json.dumps({"loaded": loaded, "value": value}))
"""

EXPECTED = sum(__import__("math").tanh(i / 8 * 2.0 + 1.0) for i in range(8))


def run_import(**env):
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("EMBER_PRELOAD", "EMBER_BACKEND", "EMBER_DUMP_TO")}
    full_env.update(env)
    out = subprocess.run([sys.executable, "-c", PROGRAM], env=full_env, check=True,
                         capture_output=True, text=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_preloads_the_cpu_compiler():
    result = run_import()
    loaded = set(result["loaded"])
    for name in ("ember.backends.cpu", "ember.backends.cpu.llvm_support",
                 "ember.backends.cpu.program", "ember.backends.cpu.row_kernel",
                 "llvmlite.binding", "ember.compiler.passes.fusion",
                 "ember.compiler.passes.algebraic_simplifier"):
        assert name in loaded, name
    assert result["value"] == pytest.approx(EXPECTED, rel=1e-6)


@pytest.mark.parametrize("env", [{"EMBER_PRELOAD": "0"}, {"EMBER_BACKEND": "interpreter"}])
def test_no_preload_when_switched_off_or_not_the_default(env):
    result = run_import(**env)
    assert not any(m.startswith(("llvmlite", "ember.backends.cpu")) for m in result["loaded"])
    assert result["value"] == pytest.approx(EXPECTED, rel=1e-6)


def test_unknown_default_backend_still_imports_and_fails_at_first_use():
    env = {k: v for k, v in os.environ.items() if k != "EMBER_PRELOAD"}
    env["EMBER_BACKEND"] = "no-such-backend"
    out = subprocess.run([sys.executable, "-c", "import ember\n"
                          "try:\n"
                          "    ember.jit(lambda a: a + 1)(1.0)\n"
                          "except ValueError as e:\n"
                          "    print('ValueError', e)\n"], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "ValueError unknown backend 'no-such-backend'" in out.stdout
