"""Indexing and ``x.at[]`` updates against JAX's semantics (expected values computed with JAX
0.10 and written in as literals)."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax


def _check(out, expected, dtype, weak=False):
    assert out.dtype == np.dtype(dtype)
    assert out.aval.weak_type == weak
    np.testing.assert_array_equal(np.asarray(out), np.asarray(expected, dtype))


# -------------------------------------------------- update dtypes: the scatter runs promoted

# JAX promotes x with the values, scatters in that dtype, then converts back to x's dtype:
# float updates of an int array accumulate (and scale) as floats before truncating.
PROMOTED_UPDATES = [
    (lambda x: x.at[jnp.array([0, 0, 2])].add(jnp.array([1.5, 2.5, 3.5])), [5, 2, 6, 4, 5]),
    (lambda x: x.at[jnp.array([1, 1, 1])].add(jnp.array([1.5, 2.5, 3.5])), [1, 9, 3, 4, 5]),
    (lambda x: x.at[2].multiply(1.5), [1, 2, 4, 4, 5]),
    (lambda x: x.at[jnp.array([1, 1, 1])].multiply(jnp.array([1.5, 2.5, 3.5])),
     [1, 26, 3, 4, 5]),
    (lambda x: x.at[jnp.array([1, 1, 1])].subtract(jnp.array([1.5, 2.5, 3.5])),
     [1, -5, 3, 4, 5]),
    (lambda x: x.at[jnp.array([1, 1, 1])].power(jnp.array([1.5, 2.5, 3.5])),
     [1, 8192, 3, 4, 5]),
]


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("case", range(len(PROMOTED_UPDATES)))
def test_float_updates_of_int_array_scatter_in_float(case, jit):
    f, expected = PROMOTED_UPDATES[case]
    x = jnp.arange(1, 6)
    _check((ember.jit(f) if jit else f)(x), expected, np.int32)


def test_unsigned_subtract_of_floats_saturates_after_the_scatter():
    x = jnp.arange(5, dtype=jnp.uint8)
    _check(x.at[jnp.array([0, 0, 2])].subtract(jnp.array([1.5, 2.5, 3.5])), [0, 1, 0, 3, 4],
           np.uint8)
    _check(x.at[None].subtract(jnp.array([[1.0]])), [0, 0, 1, 2, 3], np.uint8)
    # A Python int in x's range takes x's dtype (no promotion): uint8 arithmetic wraps.
    _check(x.at[0].subtract(1), [255, 1, 2, 3, 4], np.uint8)


def test_bool_array_updates_promote_python_ints():
    x = jnp.array([True, False, True, False, True])
    _check(x.at[-1].add(-1), [True, False, True, False, False], np.bool_)
    _check(x.at[jnp.array([0, 0, 2])].add(-1), [True, False, False, False, True], np.bool_)
    _check(x.at[1].min(-1), [True, True, True, False, True], np.bool_)
    _check(x.at[1].max(-1), [True, False, True, False, True], np.bool_)
    _check(x.at[1].subtract(2), [True, True, True, False, True], np.bool_)
    # power: ones scattered with the (promoted) exponents, then jnp.power of two bools.
    _check(x.at[1].power(2), [1, 0, 1, 0, 1], np.int32)


@pytest.mark.parametrize("method", ["add", "multiply", "power"])
def test_bool_add_and_multiply_are_type_errors(method):
    x = jnp.array([True, False])
    with pytest.raises(TypeError):
        getattr(x.at[0], method)(True)


@pytest.mark.parametrize("fn", [lax.scatter_add, lax.scatter_mul, lax.scatter_sub])
def test_lax_scatter_arithmetic_rejects_bool(fn):
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    with pytest.raises(TypeError):
        fn(jnp.array([True, False]), jnp.array([[1]]), jnp.array([True]), dn)


def test_lax_scatter_min_max_accept_bool():
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    x, i, u = jnp.array([True, False]), jnp.array([[1]]), jnp.array([True])
    _check(lax.scatter_max(x, i, u, dn), [True, True], np.bool_)
    _check(lax.scatter_min(x, i, u, dn), [True, False], np.bool_)


def test_weak_array_updates_keep_the_weak_type():
    x = jnp.asarray(2.0)  # weak float32
    _check(x.at[()].power(3), 8.0, np.float32, weak=True)
    _check(x.at[()].add(jnp.float16(1)), 3.0, np.float32, weak=True)


# -------------------------------------------------- index functions


@pytest.mark.parametrize("jit", [False, True])
def test_choose_clip_clips_negative_entries_to_zero(jit):
    def f(a):
        return jnp.choose(a, [jnp.arange(4), jnp.arange(4) * 10, jnp.arange(4) * 100],
                          mode="clip")
    out = (ember.jit(f) if jit else f)(jnp.array([0, 1, 5, -1]))
    _check(out, [0, 10, 200, 3], np.int32)


def test_raise_mode_under_jit_names_the_other_modes():
    # (JAX's message: the checked indices must be concrete, 'wrap' and 'clip' work traced)
    with pytest.raises(ember.errors.ConcretizationTypeError, match="mode='wrap' or mode='clip'"):
        ember.jit(lambda a: jnp.choose(a, [jnp.arange(2), jnp.ones(2, int)]))(jnp.array([0, 1]))
    with pytest.raises(ember.errors.ConcretizationTypeError, match="ravel_multi_index was jit"):
        ember.jit(lambda i: jnp.ravel_multi_index((i, i), (3, 3)))(jnp.array([0, 1]))


def test_take_along_axis_axis_none_needs_1d_indices():
    x = jnp.arange(4.0).reshape(2, 2)
    with pytest.raises(ValueError):
        jnp.take_along_axis(x, jnp.array([[0, 1]]), axis=None)
    _check(jnp.take_along_axis(x, jnp.array([0, 3]), axis=None), [0.0, 3.0], np.float32)


@pytest.mark.parametrize("jit", [False, True])
def test_compress_and_extract_with_size_under_tracing(jit):
    def f(c, a):
        return (jnp.compress(c, a, axis=0, size=2, fill_value=-1),
                jnp.extract(c, a[:, 0], size=3, fill_value=-7))
    c, a = jnp.array([False, False, True]), jnp.arange(6).reshape(3, 2)
    rows, flat = (ember.jit(f) if jit else f)(c, a)
    _check(rows, [[4, 5], [-1, -1]], np.int32)
    _check(flat, [4, -7, -7], np.int32)


def test_compress_size_rules():
    a = jnp.arange(3)
    # A condition shorter than the axis: the axis is cut to it, false entries fill.
    _check(jnp.compress(jnp.array([True, False]), a, size=2), [0, 0], np.int32)
    # With size, true entries beyond the axis are ignored; without it they are an error.
    _check(jnp.compress(jnp.array([True, False, True, True]), a, size=3), [0, 2, 0],
           np.int32)
    with pytest.raises(ValueError):
        jnp.compress(jnp.array([True, False, True, True]), a)
    for size in (3, -1):
        with pytest.raises(ValueError):
            jnp.compress(jnp.array([True, False]), a, size=size)
    with pytest.raises(ValueError):
        jnp.extract(jnp.array([True, False, True]), a, size=4)


@pytest.mark.parametrize("jit", [False, True])
def test_ravel_multi_index_dtypes_and_modes(jit):
    def f(i8, u8, i32):
        return (jnp.ravel_multi_index((u8, i8), (3, 4), mode="clip"),
                jnp.ravel_multi_index((u8, u8), (3, 4), mode="clip"),
                jnp.ravel_multi_index((i32, i32), (3, 4), mode="wrap", dtype=jnp.int16),
                jnp.ravel_multi_index((i32, i32), (3, 4), mode="ignore"))
    i8, u8 = jnp.array([1, 3], jnp.int8), jnp.array([0, 5], jnp.uint8)
    i32 = jnp.array([1, -2])
    outs = (ember.jit(f) if jit else f)(i8, u8, i32)
    _check(outs[0], [1, 11], np.int16)
    _check(outs[1], [0, 11], np.uint8)
    _check(outs[2], [5, 6], np.int16)
    _check(outs[3], [5, -10], np.int32)


def test_ravel_multi_index_dtype_errors():
    u8 = jnp.array([0, 2], jnp.uint8)
    with pytest.raises(ValueError):  # uint8 cannot hold flat indices up to 1199
        jnp.ravel_multi_index((u8, u8), (30, 40))
    with pytest.raises(ValueError):
        jnp.ravel_multi_index((u8, u8), (3, 4), dtype=jnp.float32)
    _check(jnp.ravel_multi_index((), ()), 0, np.int32)


# -------------------------------------------------- wrap_negative_indices=False


@pytest.mark.parametrize("jit", [False, True])
def test_wrap_negative_indices_false_makes_negatives_out_of_bounds(jit):
    def f(x, i):
        return (x.at[-1].get(wrap_negative_indices=False),  # clamps to 0
                x.at[i].get(mode="fill", fill_value=-1.0, wrap_negative_indices=False),
                x.at[i].set(9.0, wrap_negative_indices=False),  # dropped
                x.at[i].add(9.0, mode="clip", wrap_negative_indices=False),
                x.at[-3:].set(7.0, wrap_negative_indices=False),  # slices keep their meaning
                x.at[-1].apply(lambda v: v + 1, wrap_negative_indices=False))
    x = jnp.arange(5.0)
    outs = (ember.jit(f) if jit else f)(x, jnp.array([-1, 2, -6, 9]))
    _check(outs[0], 0.0, np.float32)
    _check(outs[1], [-1.0, 2.0, -1.0, -1.0], np.float32)
    _check(outs[2], [0.0, 1.0, 9.0, 3.0, 4.0], np.float32)
    _check(outs[3], [18.0, 1.0, 11.0, 3.0, 13.0], np.float32)
    _check(outs[4], [0.0, 1.0, 7.0, 7.0, 7.0], np.float32)
    _check(outs[5], [0.0, 1.0, 2.0, 3.0, 4.0], np.float32)


def test_wrap_negative_indices_false_traced_scalar_and_2d():
    x = jnp.arange(20.0).reshape(4, 5)
    out = ember.jit(lambda x, i: x.at[i].get(wrap_negative_indices=False))(x, -1)
    _check(out, [0.0, 1.0, 2.0, 3.0, 4.0], np.float32)
    out = x.at[jnp.array([-1, 1]), -1].set(-9.0, wrap_negative_indices=False)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x))
    out = x.at[jnp.array([-1, 1])].divide(2.0, wrap_negative_indices=False)
    expected = np.arange(20.0, dtype=np.float32).reshape(4, 5)
    expected[1] /= 2
    _check(out, expected, np.float32)


# -------------------------------------------------- index and fill_value types


def test_python_bool_slice_bounds_are_ints():
    x = jnp.arange(5.0)
    _check(x[True:3], [1.0, 2.0], np.float32)
    with pytest.raises(TypeError):
        x[np.bool_(True):3]


@pytest.mark.parametrize("idx", [{}, object(), {1, 2}])
def test_unsupported_index_objects_are_index_errors(idx):
    with pytest.raises(IndexError):
        jnp.arange(5.0)[idx]


def test_string_index_is_a_type_error():
    with pytest.raises(TypeError):
        jnp.arange(5.0)["a"]


def test_gather_fill_value_checks():
    x = jnp.arange(5.0)
    with pytest.raises(ValueError):
        x.at[jnp.array([1, 7])].get(mode="fill", fill_value=jnp.array([1.0]))
    with pytest.raises(TypeError):  # the imaginary part cannot be dropped silently
        x.at[jnp.array([1, 7])].get(mode="fill", fill_value=1j)
    out = (x + 0j).at[jnp.array([1, 7])].get(mode="fill", fill_value=1j)
    _check(out, [1.0, 1j], np.complex64)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("mode", [None, "clip", "wrap", "fill"])
def test_take_along_axis_batch_dims_values_grads_and_vmap(axis, mode):
    # Without broadcasting, the other dims are the gather's batch dims (one index per
    # element, as JAX lowers it): values against NumPy (out of range: NaN by default and for
    # "fill", clamped for "clip", wrapped for "wrap"), gradients against a scatter-add loop,
    # vmap against stacked results.
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    n = x.shape[axis]
    shape = list(x.shape)
    shape[axis] = 6
    idx = rng.integers(-n - 2, n + 2, shape).astype(np.int32)
    if mode == "clip":  # (negative indices count from the end first, as in JAX)
        want_idx = np.clip(np.where(idx < 0, idx + n, idx), 0, n - 1)
    elif mode == "wrap":
        want_idx = np.mod(idx, n)
    else:
        want_idx = np.where(idx < 0, idx + n, idx)
    valid = (want_idx >= 0) & (want_idx < n)
    want = np.where(valid, np.take_along_axis(x, np.clip(want_idx, 0, n - 1), axis), np.nan)
    for f in (lambda a, i: jnp.take_along_axis(a, i, axis=axis, mode=mode),
              ember.jit(lambda a, i: jnp.take_along_axis(a, i, axis=axis, mode=mode))):
        np.testing.assert_array_equal(np.asarray(f(x, idx)), want)
    g = ember.grad(lambda a: jnp.nansum(jnp.take_along_axis(a, idx, axis=axis, mode=mode)
                                        * 2.0))(x)
    want_g = np.zeros_like(x)
    moved = np.moveaxis(want_g, axis, -1)
    for pos in np.ndindex(*np.moveaxis(want_idx, axis, -1).shape):
        j = np.moveaxis(want_idx, axis, -1)[pos]
        if 0 <= j < n:
            moved[pos[:-1] + (j,)] += 2.0
    np.testing.assert_array_equal(np.asarray(g), want_g)
    batched = ember.vmap(lambda a, i: jnp.take_along_axis(a, i, axis=axis, mode=mode))
    np.testing.assert_array_equal(np.asarray(batched(np.stack([x, x]), np.stack([idx, idx]))),
                                  np.stack([want, want]))
