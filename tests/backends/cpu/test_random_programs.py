"""The random-program fuzzer (``random_programs``): ``jit`` on the CPU backend (its quick
and its optimized code), ``jit(grad)``, ``jit(vmap)`` and programs under ``jax_enable_x64``,
each against eager execution. The default run takes a few hundred programs; ``-m slow``
thousands more, on bigger inputs."""

import pytest

from tests.backends.cpu.helpers import x64
from tests.backends.cpu.random_programs import check_gradient, check_program, check_vmapped


@pytest.mark.parametrize("seed", range(60))
def test_random_program_matches_eager(seed):
    check_program(seed, max_size=40_000)


@pytest.mark.parametrize("seed", range(30))
def test_random_program_gradient_matches_eager(seed):
    check_gradient(seed, max_size=40_000)


@pytest.mark.parametrize("seed", range(20))
def test_random_program_with_x64_matches_eager(seed):
    with x64():
        check_program(seed, max_size=40_000)


@pytest.mark.parametrize("seed", range(20))
def test_vmapped_random_program_matches_eager(seed):
    check_vmapped(seed, max_size=10_000)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(60, 3000))
def test_random_program_fuzz(seed):
    """The long fuzz run (``pytest -m slow``): bigger inputs, thousands more programs."""
    check_program(seed, max_size=300_000)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(30, 1500))
def test_random_program_gradient_fuzz(seed):
    check_gradient(seed, max_size=300_000)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20, 1500))
def test_random_program_with_x64_fuzz(seed):
    with x64():
        check_program(seed, max_size=300_000)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20, 1500))
def test_vmapped_random_program_fuzz(seed):
    check_vmapped(seed, max_size=100_000)
