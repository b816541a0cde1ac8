"""Library steps of compiled programs: a custom call's target and attributes are looked up
once (``evaluator.CustomCall``), and the linear-algebra targets run their kernels without
the checks of an eager call (``compiled``: the program's shapes are known)."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.compiler import evaluator

rng = np.random.default_rng(3)


def _custom_calls(f, *args):
    exe = ember.jit(f).lower(*args).compile()._executable.executable
    return [p for s in exe._steps if type(s) is tuple
            for p in [s[1]] if isinstance(p, evaluator.CustomCall)]


@pytest.mark.parametrize("dtype", [np.complex128])
def test_an_inverse_runs_its_targets_compiled_functions(dtype):
    # (complex128: LAPACK's LU and solves through the library; real and complex64 ones are
    # kernels)
    a = (rng.standard_normal((65, 65)) + 1j * rng.standard_normal((65, 65)) +
         8 * np.eye(65)).astype(dtype)
    with ember.enable_x64(dtype == np.complex128):
        calls = _custom_calls(jnp.linalg.inv, a)
        targets = evaluator.COMPILED_CUSTOM_CALL_TARGETS
        assert len(calls) == 3 and all(c.fn in targets.values() for c in calls)
        assert {c.attrs.get("lower") for c in calls} == {None, True, False}
        got = np.asarray(ember.jit(jnp.linalg.inv)(a))
    np.testing.assert_allclose(got @ a.astype(np.complex128), np.eye(65),
                               atol=5e-5 if dtype == np.complex64 else 1e-12)


def test_empty_operands_take_the_full_library_call():
    # (no kernel runs on an empty batch: the eager call's zeros and identities)
    x = np.zeros((0, 3, 3), np.float32)
    q, r = ember.jit(jnp.linalg.qr)(x)
    assert q.shape == (0, 3, 3) and r.shape == (0, 3, 3)
    lu = ember.jit(lambda x: ember.lax.linalg.lu(x))(x)
    assert [v.shape for v in lu] == [(0, 3, 3), (0, 3), (0, 3)]


def test_solves_of_several_sizes_share_no_scratch():
    # (LAPACK's input-only integer arguments are cells shared by every call; the results
    # of interleaved sizes stay right)
    outs = []
    for n in (65, 70, 65, 100, 70):  # (LAPACK's sizes: past linalg_steps.MAX_DIM)
        a = rng.standard_normal((n, n)).astype(np.float32) + n * np.eye(n, dtype=np.float32)
        b = rng.standard_normal((n, 3)).astype(np.float32)
        x = np.asarray(ember.jit(jnp.linalg.solve)(a, b))
        outs.append(np.abs(a.astype(np.float64) @ x - b).max())
    assert max(outs) < 1e-4
