"""A program stepped from Python (one with a library call, say) runs each run of native
steps between its library calls as one native call, a *segment*
(``program.ProgramBuilder._emit_segments``), with the bits of those steps run one by one
from Python."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import _blas_threads, lax
from ember.backends.cpu import executable as cpu_exe
from ember.backends.cpu import parallel_runtime
from tests.backends.cpu.helpers import cpu_executable as _executable
from tests.backends.cpu.helpers import replanned

rng = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def _no_stall_holds(monkeypatch):
    # (a product run on one BLAS thread while the stall guard holds can round differently
    # from one on BLAS's threads)
    monkeypatch.setattr(_blas_threads.blas_stall_guard, "run", lambda key, call: call())


def _without_segments(exe):
    """The same program and native code, every step run from Python."""
    return replanned(exe, segments=())


def _segments(exe) -> list:
    return [s for s in exe._steps if type(s) is cpu_exe._Segment]


def _check_same_bits(exe, *args):
    got = exe.execute(list(args))
    want = _without_segments(exe).execute(list(args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    return got


def _reads(step) -> list:
    refs = cpu_exe._plan_refs(step)
    if type(step) is cpu_exe.KernelPlan:
        return list(step.inputs)
    return refs


def _expm_like(a):
    # kernels, then a solve and a sort of its rows (a library call), then more kernels and
    # a squaring loop
    n = a.shape[0]
    norm = jnp.abs(a).sum(0).max()
    p = jnp.eye(n) * 2.0 + a + 0.5 * (a @ a)
    q = jnp.eye(n) * 2.0 - a + 0.5 * (a @ a)
    r = jnp.sort(jnp.linalg.solve(q, p), axis=1)
    r = lax.fori_loop(0, 3, lambda i, m: m @ m * 0.5, r)
    return r * jnp.tanh(norm), (r.sum(1) + 1.0) ** 2


def test_runs_of_native_steps_become_segments_with_the_same_bits():
    a = (rng.standard_normal((72, 72)) / 8).astype(np.float32)
    exe = _executable(_expm_like, a)
    plan = exe.program
    assert plan.segments and _segments(exe)
    for first, end, _ in plan.segments:
        assert end - first >= 2
        # a segment reads nothing a library call made (values live in Python)
        for step in cpu_exe.nested_steps(plan.steps[first:end]):
            assert all(r.kind != "value" for r in _reads(step))
    got = _check_same_bits(exe, a)
    # against NumPy in float64
    a64 = a.astype(np.float64)
    p = np.eye(72) * 2 + a64 + 0.5 * a64 @ a64
    q = np.eye(72) * 2 - a64 + 0.5 * a64 @ a64
    r = np.sort(np.linalg.solve(q, p), axis=1)
    for _ in range(3):
        r = r @ r * 0.5
    want = r * np.tanh(np.abs(a64).sum(0).max())
    np.testing.assert_allclose(got[0], want, rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(got[1], (r.sum(1) + 1) ** 2, rtol=2e-4)


def test_segment_with_a_product_on_blas_threads():
    # a product worth BLAS's threads (whole_gemm) and large kernels after a library call
    x = rng.standard_normal((512, 512)).astype(np.float32)
    w = (rng.standard_normal((512, 512)) / 20).astype(np.float32)

    def f(x, w):
        s = jnp.sort(x, axis=1)  # a library step
        h = jnp.tanh(x @ w) * 2.0 + 1.0
        return s[:, :4], jnp.exp(h).sum(1) * (h @ w).max()

    exe = _executable(f, x, w)
    assert _segments(exe)
    got = _check_same_bits(exe, x, w)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    h = np.tanh(x64 @ w64) * 2 + 1
    np.testing.assert_array_equal(got[0], np.sort(x, axis=1)[:, :4])
    np.testing.assert_allclose(got[1], np.exp(h).sum(1) * (h @ w64).max(), rtol=1e-4)


def test_without_the_parallel_runtime_segments_step_from_python(monkeypatch):
    a = (rng.standard_normal((72, 72)) / 8).astype(np.float32)
    exe = _executable(_expm_like, a)
    assert _segments(exe)
    with_runtime = exe.execute([a])
    monkeypatch.setattr(parallel_runtime, "ready", lambda: None)
    without = exe.execute([a])
    for g, w in zip(with_runtime, without):
        np.testing.assert_array_equal(g, w)


def test_segments_after_a_library_call_that_replaced_an_output():
    # the sorted rows are an output (set by the library call) and read by later kernels
    a = rng.standard_normal((72, 72)).astype(np.float32)

    def f(a):
        s = jnp.sort(jnp.tanh(a) * 2.0 + a, axis=1)
        return s, jnp.cos(s) * 3.0 + 1.0, (jnp.sin(s) @ s).sum(0) * 2.0

    exe = _executable(f, a)
    plan = exe.program
    library = [i for i, s in enumerate(plan.steps) if type(s) is cpu_exe.LibraryPlan]
    made = {r.index for i in library for r in plan.steps[i].outputs if r.kind == "output"}
    # a segment reads an output that the library call set
    assert any(r.kind == "output" and r.index in made
               for first, end, _ in plan.segments
               for step in cpu_exe.nested_steps(plan.steps[first:end]) for r in _reads(step))
    got = _check_same_bits(exe, a)
    a64 = a.astype(np.float64)
    np.testing.assert_allclose(got[0], np.sort(np.tanh(a64) * 2 + a64, axis=1), rtol=1e-6)
    s = got[0].astype(np.float64)
    np.testing.assert_allclose(got[1], np.cos(s) * 3 + 1, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got[2], (np.sin(s) @ s).sum(0) * 2, rtol=1e-4, atol=1e-3)


def test_jit_results_with_segments_match_numpy_across_calls():
    f = ember.jit(lambda a, b: (jnp.linalg.inv(a * 2.0 + jnp.eye(16) * 5.0) @ b).sum(0) * 2.0)
    for _ in range(3):
        a = rng.standard_normal((16, 16)).astype(np.float32)
        b = rng.standard_normal((16, 8)).astype(np.float32)
        want = (np.linalg.inv(a.astype(np.float64) * 2 + np.eye(16) * 5) @ b).sum(0) * 2
        np.testing.assert_allclose(np.asarray(f(a, b)), want, rtol=1e-4, atol=1e-5)


def test_renamed_plan_renames_segments():
    a = (rng.standard_normal((72, 72)) / 8).astype(np.float32)
    plan = _executable(_expm_like, a).program
    prefix = plan.entry_name.removesuffix("_entry")
    renamed = cpu_exe.renamed_plan(plan, prefix, "q" + prefix[1:])
    assert [(f, e) for f, e, _ in renamed.segments] == [(f, e) for f, e, _ in plan.segments]
    assert all(n.startswith("q" + prefix[1:] + "_segment_") for _, _, n in renamed.segments)
    assert set(n for _, _, n in renamed.segments) <= set(cpu_exe.plan_symbols(renamed))
