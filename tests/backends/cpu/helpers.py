"""Helpers shared by the CPU backend's tests."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable


def run_in_threads(work: Callable[[], None], count: int) -> list[BaseException]:
    """Runs ``work()`` on ``count`` threads at once; returns the exceptions they raised."""
    errors: list[BaseException] = []

    def guarded():
        try:
            work()
        except Exception as e:  # noqa: BLE001 - the caller asserts on them
            errors.append(e)

    threads = [threading.Thread(target=guarded) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def run_against_evaluator(m, args: list):
    """Runs the module ``m`` optimized (fused) natively, checks its first output against the
    evaluator's bit for bit, and returns (that output, the plan's steps)."""
    import numpy as np

    from ember.backends import get_backend
    from ember.compiler.evaluator import evaluate_computation
    from ember.compiler.pipeline import optimize

    want = evaluate_computation(m.entry, args)
    optimize(m)
    exe = get_backend("cpu").compile(m)
    got = exe.execute(args)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    return got, exe.program.steps


def optimized(f, *args):
    """The optimized HLO module of ``jit(f)`` for ``args``, parsed back from its text."""
    import ember
    from ember.compiler.parser import parse_module

    return parse_module(ember.jit(f).lower(*args).compile().as_text())


@contextlib.contextmanager
def x64(on=True):
    """``jax_enable_x64`` set to ``on`` inside the block, restored after it."""
    import ember

    previous = ember.config.read("jax_enable_x64")
    ember.config.update("jax_enable_x64", on)
    try:
        yield
    finally:
        ember.config.update("jax_enable_x64", previous)


def cpu_executable(f, *args):
    """The CPU backend's executable (``CpuExecutable``) of ``jit(f)`` for ``args``."""
    import ember

    return ember.jit(f).lower(*args).compile()._executable.executable


def replanned(exe, **fields):
    """An executable of ``exe``'s native code whose plan has ``fields`` replaced
    (``native_call=None``: its steps run from Python; ``segments=()``: no segments)."""
    from ember.backends.cpu import executable as cpu_exe

    plan = {f: getattr(exe.program, f) for f in cpu_exe.RunPlan.__slots__}
    plan.update(fields)
    return cpu_exe.CpuExecutable(cpu_exe.RunPlan(**plan), exe._lib)


def native_dots(exe) -> list:
    """The products of an executable's plan (nested ones included) with native ``gemm``
    code (a ``gemm`` layout)."""
    from ember.backends.cpu import executable as cpu_exe

    return [s for s in cpu_exe.nested_steps(exe.program.steps)
            if type(s) is cpu_exe.DotPlan and s.gemm is not None]
