"""``dot_general`` contracting few elements runs as a native kernel (``is_small_dot``), each
result element summed in registers, and agrees with the evaluator (NumPy's ``matmul``):
floats within rounding, integers and booleans exactly, for every arrangement of batch, free
and contracting dims."""


import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends import get_backend
from ember.backends.cpu import kernel_gen
from tests.backends.cpu.helpers import optimized, x64

rng = np.random.default_rng(0)


def plan(f, *args):
    exe = get_backend("cpu").compile(optimized(f, *args))
    return [type(s).__name__ for s in exe.program.steps]


def all_native(f, *args):
    """Every step a kernel (lowering may add conversions around the dot)."""
    steps = plan(f, *args)
    return bool(steps) and set(steps) == {"KernelPlan"}


def both(f, *args):
    return (np.asarray(ember.jit(f, backend="cpu")(*args)),
            np.asarray(ember.jit(f, backend="interpreter")(*args)))


def values(dtype, shape):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)  # extremes included: products and sums wrap
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


DIMENSION_NUMBERS = {
    # name: (lhs shape, rhs shape, ((lhs contracting, rhs contracting), (lhs batch, rhs batch)))
    "batched 3x3": ((50, 3, 3), (50, 3, 3), (((2,), (1,)), ((0,), (0,)))),
    "batched 8x8": ((20, 8, 8), (20, 8, 8), (((2,), (1,)), ((0,), (0,)))),
    "batched matvec": ((30, 4, 5), (30, 5), (((2,), (1,)), ((0,), (0,)))),
    "points times matrix": ((1000, 3), (3, 3), (((1,), (0,)), ((), ()))),
    "contract leading dims": ((4, 7), (6, 4), (((0,), (1,)), ((), ()))),
    "two contracting dims": ((2, 5, 4), (4, 9, 2), (((0, 2), (2, 0)), ((), ()))),
    "batch dims not leading": ((3, 6, 2), (2, 3, 5), (((2,), (0,)), ((0,), (1,)))),
    "outer product": ((7,), (9,), (((), ()), ((), ()))),
    "empty contraction": ((5, 0), (0, 4), (((1,), (0,)), ((), ()))),
    "vector dot": ((8,), (8,), (((0,), (0,)), ((), ()))),
}


@pytest.mark.parametrize("name", sorted(DIMENSION_NUMBERS))
def test_every_arrangement_of_dims(name):
    lshape, rshape, dn = DIMENSION_NUMBERS[name]
    a, b = values(np.float32, lshape), values(np.float32, rshape)

    def f(x, y):
        return lax.dot_general(x, y, dn)

    assert plan(f, a, b) == ["KernelPlan"]
    cpu, ref = both(f, a, b)
    assert cpu.shape == ref.shape and cpu.dtype == ref.dtype
    np.testing.assert_allclose(cpu, ref, rtol=1e-5, atol=1e-5)
    # independently: einsum in float64
    want = np.tensordot(a.astype(np.float64), b.astype(np.float64), dn[0]) if not dn[1][0] \
        else None
    if want is not None:
        np.testing.assert_allclose(cpu, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int8, np.uint16, np.bool_,
                                   np.float16, jnp.bfloat16, np.complex64, np.complex128])
def test_dtypes(dtype):
    a, b = values(dtype, (40, 3, 5)), values(dtype, (40, 5, 2))
    with x64(np.dtype(dtype).itemsize == 8 or dtype == np.complex128):
        assert all_native(jnp.matmul, a, b)
        cpu, ref = both(jnp.matmul, a, b)
    assert cpu.dtype == ref.dtype == np.dtype(dtype)
    if np.dtype(dtype).kind in "iub":
        np.testing.assert_array_equal(cpu, ref)  # wrapping, as the evaluator
    else:
        tol = 20 * float(jnp.finfo(dtype).eps)
        np.testing.assert_allclose(cpu.astype(np.complex128), ref.astype(np.complex128),
                                   rtol=tol, atol=tol)


def test_low_floats_accumulate_in_float32():
    # 1 + 4 * 2**-11: each term is lost to float16 rounding, their float32 sum is not
    a = np.array([[1.0, 2.0 ** -11, 2.0 ** -11, 2.0 ** -11, 2.0 ** -11]], np.float16)
    b = np.ones((5, 1), np.float16)
    cpu, ref = both(jnp.matmul, a, b)
    assert cpu[0, 0] == ref[0, 0] == np.float16(1 + 4 * 2.0 ** -11)


def test_preferred_element_type_converts_operands_first():
    a, b = values(np.int8, (64, 4)), values(np.int8, (4, 16))

    def f(x, y):
        return lax.dot_general(x, y, (((1,), (0,)), ((), ())), preferred_element_type=jnp.int32)

    assert all_native(f, a, b)
    cpu, _ = both(f, a, b)
    np.testing.assert_array_equal(cpu, a.astype(np.int32) @ b.astype(np.int32))


def test_nan_and_inf_propagate_as_in_blas():
    a = np.array([[np.inf, 0.0, 1.0], [np.nan, 1.0, 1.0], [1.0, 2.0, 3.0]], np.float32)
    b = np.array([[0.0, 1.0], [1.0, 1.0], [1.0, -np.inf]], np.float32)
    cpu, ref = both(jnp.matmul, a, b)
    np.testing.assert_array_equal(cpu, ref)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(cpu, a @ b)


def test_larger_contractions_still_use_blas():
    k = kernel_gen.SMALL_DOT_K + 1
    a, b = values(np.float32, (10, 6, k)), values(np.float32, (10, k, 6))
    assert plan(jnp.matmul, a, b) == ["DotPlan"]
    a, b = values(np.float32, (10, 6, k - 1)), values(np.float32, (10, k - 1, 6))
    assert plan(jnp.matmul, a, b) == ["KernelPlan"]


def test_many_small_products_split_across_threads():
    a, b = values(np.float32, (100_000, 3, 3)), values(np.float32, (100_000, 3, 3))
    cpu, _ = both(jnp.matmul, a, b)
    want = np.einsum("bij,bjk->bik", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(cpu, want, rtol=1e-5, atol=1e-5)
