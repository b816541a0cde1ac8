"""Targeted tests of the shape functions and lax shape primitives (NumPy is the reference)."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.errors import ConcretizationTypeError


def _eq(actual, expected):
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected), (actual.shape, np.shape(expected))
    np.testing.assert_array_equal(actual, expected)


A = np.arange(24, dtype=np.int32).reshape(2, 3, 4)


@pytest.mark.parametrize("shape", [(-1,), (4, -1), (-1, 2, 3), (24,), (2, 12), (1, 24, 1)])
def test_reshape_minus_one(shape):
    _eq(jnp.reshape(jnp.asarray(A), shape), A.reshape(shape))
    _eq(jnp.asarray(A).reshape(*shape), A.reshape(shape))


def test_reshape_size_zero_and_scalar():
    z = np.zeros((0, 3), np.float32)
    _eq(jnp.reshape(jnp.asarray(z), (3, 0, 5)), z.reshape(3, 0, 5))
    _eq(jnp.reshape(jnp.asarray(z), (-1, 3)), z.reshape(-1, 3))
    _eq(jnp.reshape(jnp.asarray(np.float32(2)), (1, 1)), np.reshape(np.float32(2), (1, 1)))
    _eq(jnp.reshape(jnp.ones((1, 1)), ()), np.ones(()))


@pytest.mark.parametrize("axes", [None, (1, 0, 2), (-1, 0, 1), (2, 1, 0)])
def test_transpose(axes):
    _eq(jnp.transpose(jnp.asarray(A), axes), np.transpose(A, axes))


def test_transpose_method_and_T():
    x = jnp.asarray(A)
    _eq(x.T, A.T)
    _eq(x.transpose(1, 0, 2), A.transpose(1, 0, 2))


@pytest.mark.parametrize("src,dst", [(0, -1), (-1, 0), ((0, 2), (2, 0)), ((0, 1), (-1, -2))])
def test_moveaxis(src, dst):
    _eq(jnp.moveaxis(jnp.asarray(A), src, dst), np.moveaxis(A, src, dst))


@pytest.mark.parametrize("axis", [0, -1, 3, (0, 2), (-1, -3)])
def test_expand_dims(axis):
    _eq(jnp.expand_dims(jnp.asarray(A), axis), np.expand_dims(A, axis))


def test_squeeze_negative_axis_and_size_zero():
    x = np.zeros((1, 0, 1), np.float32)
    _eq(jnp.squeeze(jnp.asarray(x), -1), np.squeeze(x, -1))
    _eq(jnp.squeeze(jnp.asarray(x)), np.squeeze(x))
    _eq(jnp.squeeze(jnp.asarray(x), (0, 2)), np.squeeze(x, (0, 2)))


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_concatenate_axes(axis):
    x, y = A, A + 100
    _eq(jnp.concatenate([jnp.asarray(x), jnp.asarray(y)], axis=axis),
        np.concatenate([x, y], axis=axis))


def test_concatenate_promotes_dtypes():
    out = jnp.concatenate([jnp.ones(2, jnp.int8), jnp.ones(2, jnp.float32)])
    assert out.dtype == np.float32
    out = jnp.concatenate([jnp.ones(2, jnp.int8), np.ones(2, np.uint8)])
    assert out.dtype == np.int16
    assert jnp.concatenate([jnp.ones(2), jnp.ones(1)], dtype=jnp.int32).dtype == np.int32


def test_stack_and_friends_match_numpy():
    xs = [A[0], A[1] + 50]
    for name in ("stack", "hstack", "vstack", "dstack", "column_stack"):
        _eq(getattr(jnp, name)([jnp.asarray(x) for x in xs]), getattr(np, name)(xs))
    _eq(jnp.stack([jnp.asarray(x) for x in xs], axis=-1), np.stack(xs, axis=-1))
    _eq(jnp.stack(jnp.asarray(A), axis=1), np.stack(list(A), axis=1))


@pytest.mark.parametrize("ios", [2, [1, 3], [0, 0, 4], [], np.array([1, 2])])
def test_split_indices(ios):
    x = np.arange(12).reshape(4, 3)
    expected = np.split(x, ios)
    got = jnp.split(jnp.asarray(x), ios)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        _eq(g, e)


@pytest.mark.parametrize("n,k", [(7, 3), (5, 5), (2, 4), (0, 3)])
def test_array_split_uneven(n, k):
    x = np.arange(n)
    for g, e in zip(jnp.array_split(jnp.asarray(x), k), np.array_split(x, k)):
        _eq(g, e)


def test_hsplit_vsplit():
    x = np.arange(16).reshape(4, 4)
    for g, e in zip(jnp.hsplit(jnp.asarray(x), 2), np.hsplit(x, 2)):
        _eq(g, e)
    for g, e in zip(jnp.vsplit(jnp.asarray(x), [1, 3]), np.vsplit(x, [1, 3])):
        _eq(g, e)


@pytest.mark.parametrize("reps", [2, (2, 1), (1, 0, 3), (3, 1, 1, 2)])
def test_tile(reps):
    _eq(jnp.tile(jnp.asarray(A), reps), np.tile(A, reps))


@pytest.mark.parametrize("repeats,axis", [(2, None), (0, 1), (3, -1), ([1, 0, 2], 1),
                                           (np.array([2, 1]), 0), ([2], 2)])
def test_repeat(repeats, axis):
    _eq(jnp.repeat(jnp.asarray(A), np.asarray(repeats), axis=axis),
        np.repeat(A, repeats, axis=axis))


def test_repeat_total_repeat_length():
    x = np.array([1, 2, 3])
    _eq(jnp.repeat(jnp.asarray(x), np.array([1, 2, 1]), total_repeat_length=6),
        np.array([1, 2, 2, 3, 3, 3]))
    _eq(jnp.repeat(jnp.asarray(x), 2, total_repeat_length=4), np.array([1, 1, 2, 2]))


@pytest.mark.parametrize("shift,axis", [(1, None), (-7, None), (2, 0), ((1, 2), (1, 2)),
                                        (5, (0, 2)), (3, -1), (0, 1)])
def test_roll(shift, axis):
    _eq(jnp.roll(jnp.asarray(A), shift, axis), np.roll(A, shift, axis))


def test_roll_traced_shift():
    x = np.arange(5)
    f = ember.make_jaxpr(lambda s: jnp.roll(jnp.asarray(x), s))
    closed = f(2)
    from ember.jaxpr import eval_jaxpr
    for s in (-3, 0, 2, 7):
        (out,) = eval_jaxpr(closed.jaxpr, closed.consts, jnp.asarray(np.int32(s)))
        _eq(out, np.roll(x, s))


@pytest.mark.parametrize("k", [-3, -1, 0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("axes", [(0, 1), (1, 0), (2, 0), (-1, -2)])
def test_rot90(k, axes):
    _eq(jnp.rot90(jnp.asarray(A), k, axes), np.rot90(A, k, axes))


def test_flips():
    x = jnp.asarray(A)
    _eq(jnp.flip(x), np.flip(A))
    _eq(jnp.flip(x, 1), np.flip(A, 1))
    _eq(jnp.flip(x, (0, -1)), np.flip(A, (0, -1)))
    _eq(jnp.fliplr(x), np.fliplr(A))
    _eq(jnp.flipud(x), np.flipud(A))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap"])
@pytest.mark.parametrize("pad_width", [0, 3, (1, 2), ((0, 1), (4, 0), (2, 5)), [[9, 1]]])
def test_pad_modes_match_numpy(mode, pad_width):
    _eq(jnp.pad(jnp.asarray(A), pad_width, mode=mode), np.pad(A, pad_width, mode=mode))


@pytest.mark.parametrize("mode", ["edge", "reflect", "symmetric", "wrap"])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_pad_large_widths_1d(mode, n):
    x = np.arange(n) * 10
    for lo, hi in [(0, 9), (7, 0), (5, 11), (1, 1)]:
        _eq(jnp.pad(jnp.asarray(x), (lo, hi), mode=mode), np.pad(x, (lo, hi), mode=mode))


def test_pad_constant_values():
    x = np.ones((2, 3), np.float32)
    cv = ((1.5, 2.5), (3.5, 4.5))
    _eq(jnp.pad(jnp.asarray(x), 1, constant_values=cv), np.pad(x, 1, constant_values=cv))
    _eq(jnp.pad(jnp.asarray(x), (2, 0), constant_values=-1), np.pad(x, (2, 0),
                                                                   constant_values=-1))
    _eq(jnp.pad(jnp.asarray(np.float32(3)), 2), np.pad(np.float32(3), 2))


def test_pad_traced_constant_value():
    f = ember.make_jaxpr(lambda x, v: jnp.pad(x, 1, constant_values=v))
    closed = f(jnp.ones(2), 5.0)
    assert "pad" in str(closed)
    from ember.jaxpr import eval_jaxpr
    (out,) = eval_jaxpr(closed.jaxpr, closed.consts, jnp.ones(2), jnp.asarray(np.float32(7)))
    _eq(out, np.array([7, 1, 1, 7], np.float32))


def test_broadcast_functions():
    assert jnp.broadcast_shapes((2, 1), (3,), ()) == (2, 3)
    assert jnp.broadcast_shapes(3, (2, 1)) == (2, 3)
    xs = jnp.broadcast_arrays(jnp.ones((3, 1)), jnp.zeros(4), 1.0)
    assert [x.shape for x in xs] == [(3, 4)] * 3
    _eq(jnp.broadcast_to(jnp.arange(3), (2, 3)), np.broadcast_to(np.arange(3), (2, 3)))
    _eq(jnp.broadcast_to(jnp.ones((0, 1)), (2, 0, 5)), np.ones((2, 0, 5)))


def test_atleast_nd():
    for fn in ("atleast_1d", "atleast_2d", "atleast_3d"):
        for shape in [(), (3,), (2, 3), (1, 2, 3, 4)]:
            x = np.zeros(shape)
            assert getattr(jnp, fn)(jnp.asarray(x)).shape == getattr(np, fn)(x).shape
    a, b = jnp.atleast_2d(1.0, jnp.ones(3))
    assert a.shape == (1, 1) and b.shape == (1, 3)


def test_shape_ndim_size():
    x = jnp.ones((2, 3, 4))
    assert jnp.shape(x) == (2, 3, 4) and jnp.ndim(x) == 3 and jnp.size(x) == 24
    assert jnp.size(x, -1) == 4 and jnp.shape([1, 2]) == (2,) and jnp.ndim(1.0) == 0


def test_lax_pad_matches_slow_loop():
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    cfg = [(2, -1, 2), (-1, 3, 1)]
    out_shape = [lo + hi + n + (n - 1) * i for n, (lo, hi, i) in zip(x.shape, cfg)]
    ref = np.full(out_shape, -1, np.float32)
    for (r, c), v in np.ndenumerate(x):
        pr, pc = 2 + r * 3, -1 + c * 2
        if 0 <= pr < out_shape[0] and 0 <= pc < out_shape[1]:
            ref[pr, pc] = v
    _eq(lax.pad(jnp.asarray(x), np.float32(-1), cfg), ref)


def test_lax_iota_and_full():
    _eq(lax.iota(np.int32, 4), np.arange(4))
    _eq(lax.broadcasted_iota(np.float32, (2, 3), 0), np.array([[0.] * 3, [1.] * 3]))
    out = lax.full((2, 2), 3)
    assert out.dtype == np.int32 and out.weak_type
    assert lax.full((2,), 3, np.float16).dtype == np.float16
    assert lax.full_like(jnp.ones(3, jnp.int8), 7.9).dtype == np.int8


def test_lax_jaxpr_params():
    x = jnp.ones((2, 3))
    text = str(ember.make_jaxpr(lambda x: lax.rev(lax.transpose(x, (1, 0)), (0,)))(x))
    assert "transpose[permutation=(1, 0)]" in text and "rev[dimensions=(0,)]" in text
    text = str(ember.make_jaxpr(lambda x: lax.squeeze(lax.expand_dims(x, (0,)), (0,)))(x))
    assert "squeeze[dimensions=(0,)]" in text
    text = str(ember.make_jaxpr(lambda x: lax.concatenate([x, x], 1))(x))
    assert "concatenate[dimension=1]" in text
    text = str(ember.make_jaxpr(lambda x: lax.pad(x, 0.0, [(1, 0, 0), (0, 2, 1)]))(x))
    assert "pad[padding_config=((1, 0, 0), (0, 2, 1))]" in text


def test_traced_shape_functions_stage_primitives():
    f = lambda x: jnp.concatenate(jnp.split(jnp.flip(x.reshape(2, 3), 1), 3, axis=1), 0)
    closed = ember.make_jaxpr(f)(jnp.ones(6))
    for name in ("reshape", "rev", "concatenate"):
        assert name in str(closed)


# ---------------------------------------------------------------- bad calls


def test_reshape_wrong_size():
    with pytest.raises(TypeError, match=r"reshape: cannot reshape array of shape \(2, 3, 4\)"
                                        r".*into shape \(5, 5\)"):
        jnp.reshape(jnp.asarray(A), (5, 5))
    with pytest.raises(TypeError, match="can only specify one unknown dimension"):
        jnp.reshape(jnp.asarray(A), (-1, -1))
    with pytest.raises(TypeError, match=r"cannot reshape array of shape \(2, 3, 4\)"):
        jnp.reshape(jnp.asarray(A), (5, -1))


def test_transpose_bad_permutation():
    with pytest.raises(TypeError, match="transpose: permutation \\(0, 0\\) is not a "
                                        "permutation of the operand dimensions \\(0, 1\\)"):
        lax.transpose(jnp.ones((2, 3)), (0, 0))
    with pytest.raises(TypeError, match=r"transpose: axes \(1, 1\) are not a permutation"):
        jnp.transpose(jnp.ones((2, 3)), (1, 1))
    with pytest.raises(TypeError, match=r"transpose: axes \(0,\) are not a permutation"):
        jnp.transpose(jnp.ones((2, 3)), (0,))


def test_concatenate_mismatched():
    with pytest.raises(TypeError, match="concatenate: all the input array dimensions except "
                                        "for the concatenation axis 0 must match"):
        jnp.concatenate([jnp.ones((2, 3)), jnp.ones((2, 4))])
    with pytest.raises(TypeError, match="concatenate: all the input arrays must have the same "
                                        "number of dimensions"):
        jnp.concatenate([jnp.ones((2, 3)), jnp.ones(3)])
    with pytest.raises(ValueError, match="zero-dimensional arrays cannot be concatenated"):
        jnp.concatenate([jnp.ones(()), jnp.ones(())])
    with pytest.raises(TypeError, match="concatenate: operand shapes must match except in "
                                        "dimension 0"):
        lax.concatenate([jnp.ones((2, 3)), jnp.ones((2, 4))], 0)
    with pytest.raises(TypeError, match="concatenate requires arguments to have the same "
                                        "dtypes"):
        lax.concatenate([jnp.ones(2), jnp.ones(2, jnp.int32)], 0)
    with pytest.raises(TypeError, match=r"concatenate requires ndarray or scalar arguments"):
        jnp.concatenate([[1, 2], [3]])


def test_squeeze_non_unit_axis():
    with pytest.raises(ValueError, match=r"squeeze: cannot select an axis to squeeze out which "
                                         r"has size not equal to one: axis 1 of shape \(1, 3\)"):
        jnp.squeeze(jnp.ones((1, 3)), 1)
    with pytest.raises(ValueError, match="squeeze: cannot squeeze dimension 0 of size 2"):
        lax.squeeze(jnp.ones((2, 3)), (0,))


def test_axis_out_of_range_and_non_int():
    with pytest.raises(ValueError, match="swapaxes: axis 2 is out of bounds for array of "
                                         "dimension 2"):
        jnp.swapaxes(jnp.ones((2, 3)), 0, 2)
    with pytest.raises(ValueError, match="expand_dims: axis 3 is out of bounds"):
        jnp.expand_dims(jnp.ones((2,)), 3)
    with pytest.raises(TypeError, match="flip: axis must be an integer"):
        jnp.flip(jnp.ones(3), 1.5)
    with pytest.raises(TypeError, match="concatenate: axis must be an integer"):
        jnp.concatenate([jnp.ones(3)], axis="0")
    with pytest.raises(ValueError, match="roll: axis -3 is out of bounds"):
        jnp.roll(jnp.ones((2, 2)), 1, -3)
    with pytest.raises(TypeError, match="squeeze: axis must be an integer"):
        jnp.squeeze(jnp.ones((1, 2)), 0.0)


@pytest.mark.parametrize("ios", [[5, 2], [-2], [1, 6], [3, 1]])
def test_split_points_out_of_order_or_range_raise(ios):
    # JAX (unlike NumPy) neither wraps negative points nor clamps or reorders them.
    with pytest.raises(ValueError, match="sizes passed to split must be nonnegative"):
        jnp.split(jnp.arange(4), ios)


def test_split_bad():
    with pytest.raises(ValueError, match="split: array split does not result in an equal "
                                         "division"):
        jnp.split(jnp.ones(5), 2)
    with pytest.raises(ValueError, match="number of sections must be larger than 0"):
        jnp.array_split(jnp.ones(5), 0)
    with pytest.raises(ValueError, match="vsplit: only works on arrays of 1 or more"):
        jnp.vsplit(jnp.ones(()), 1)  # (1-d arrays split as in JAX: tests/test_shape_compat.py)


def test_other_bad_calls():
    with pytest.raises(ValueError, match="stack: all input arrays must have the same shape"):
        jnp.stack([jnp.ones(2), jnp.ones(3)])
    with pytest.raises(ValueError, match=r"broadcast_to: incompatible shapes for broadcasting: "
                                         r"\(3,\) and requested shape \(4,\)"):
        jnp.broadcast_to(jnp.ones(3), (4,))
    with pytest.raises(ValueError, match="broadcast_shapes: incompatible shapes"):
        jnp.broadcast_shapes((2,), (3,))
    with pytest.raises(NotImplementedError, match="pad: unimplemented padding mode 'mode'"):
        jnp.pad(jnp.ones(3), 1, mode="mode")
    with pytest.raises(ValueError, match="pad: pad_width must be non-negative"):
        jnp.pad(jnp.ones(3), -1)
    with pytest.raises(ValueError, match="pad: can't extend empty axis 0"):
        jnp.pad(jnp.ones(0), 1, mode="edge")
    with pytest.raises(ValueError, match="rot90: axes must be different"):
        jnp.rot90(jnp.ones((2, 2)), axes=(1, 1))
    with pytest.raises(ValueError, match="repeat: repeats of shape"):
        jnp.repeat(jnp.ones(3), np.array([1, 2]))
    with pytest.raises(ValueError, match="tile: reps must be non-negative"):
        jnp.tile(jnp.ones(3), -1)
    with pytest.raises(TypeError, match="reshape requires ndarray or scalar arguments"):
        jnp.reshape([1, 2], (2,))


def test_lax_bad_params():
    with pytest.raises(ValueError, match=r"pad: padding_config .* gives a negative dimension"):
        lax.pad(jnp.ones(2), 0.0, [(-2, -1, 0)])
    with pytest.raises(ValueError, match="pad: interior padding must be non-negative"):
        lax.pad(jnp.ones(2), 0.0, [(0, 0, -1)])
    with pytest.raises(ValueError, match="pad: padding_config .* must have one"):
        lax.pad(jnp.ones(2), 0.0, [(0, 0, 0), (0, 0, 0)])
    with pytest.raises(TypeError, match="pad: operand and padding_value must have the same "
                                        "dtype"):
        lax.pad(jnp.ones(2), jnp.ones((), jnp.int32), [(0, 0, 0)])
    with pytest.raises(TypeError, match=r"rev: dimensions \(1,\) contains 1, out of range"):
        lax.rev(jnp.ones(2), (1,))
    with pytest.raises(ValueError, match="iota: dimension 2 is out of range"):
        lax.broadcasted_iota(np.int32, (2, 2), 2)
    with pytest.raises(TypeError, match="iota does not accept dtype bool"):
        lax.iota(np.bool_, 3)
    with pytest.raises(ValueError, match="broadcast_to_rank: rank 1 is smaller"):
        lax.broadcast_to_rank(jnp.ones((2, 2)), 1)
    with pytest.raises(TypeError, match="full: fill_value must be a scalar"):
        lax.full((2,), jnp.ones(2))


def test_repeat_traced_repeats_error():
    with pytest.raises(ConcretizationTypeError, match="repeat: repeats must be concrete"):
        ember.make_jaxpr(lambda r: jnp.repeat(jnp.ones(3), r))(np.array([1, 2, 3]))


@pytest.mark.parametrize("mode", ["edge", "reflect", "symmetric", "wrap"])
def test_stencils_of_padded_arrays_under_jit(mode):
    # Slices of a padded array read only the pieces they lie in (slice of concatenate): an
    # edge-padded stencil's shifted views fuse into one kernel (4 before), with NumPy's values.
    x = np.random.default_rng(5).standard_normal((37, 29)).astype(np.float32)

    def laplacian(m, a):
        p = m.pad(a, 1, mode=mode)
        return p[2:, 1:-1] + p[:-2, 1:-1] + p[1:-1, 2:] + p[1:-1, :-2] - 4 * a

    np.testing.assert_allclose(np.asarray(ember.jit(lambda a: laplacian(jnp, a))(x)),
                               laplacian(np, x), rtol=1e-5, atol=1e-5)
    # (reflect/symmetric pads narrower than x are its reversed end pieces, not a tiling of
    # periods: one kernel, which had been five reading a (39, 4 * 29) tiling)
    text = ember.jit(lambda a: laplacian(jnp, a)).lower(x).compile().as_text()
    assert text[text.index("ENTRY"):].count("fusion(") == 1


@pytest.mark.parametrize("mode", ["reflect", "symmetric", "wrap"])
@pytest.mark.parametrize("n", [2, 3, 5])
def test_mirror_pads_around_one_period_wide(mode, n):
    # Widths on both sides of the widest end-piece pad (n - 1 for reflect, n otherwise),
    # eagerly and under jit, in one axis of two.
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2) * 3 - 1
    for lo, hi in [(n - 1, 0), (0, n - 1), (n, n), (n - 1, n + 1), (n + 1, 1), (n, 2 * n)]:
        want = np.pad(x, ((lo, hi), (0, 0)), mode=mode)
        _eq(jnp.pad(jnp.asarray(x), ((lo, hi), (0, 0)), mode=mode), want)
        _eq(ember.jit(lambda a, lo=lo, hi=hi: jnp.pad(a, ((lo, hi), (0, 0)), mode=mode))(x),
            want)


@pytest.mark.parametrize("start,stop,step", [(0, 2, 1), (1, 6, 1), (2, 9, 2), (3, 4, 1),
                                             (0, 9, 3), (5, 9, 1), (6, 7, 1), (1, 8, 4)])
def test_slices_of_concatenates_under_jit(start, stop, step):
    # A slice of a concatenate reads the pieces it lies in (zero-size pieces included);
    # the values are NumPy's for every start, stop and stride.
    rng = np.random.default_rng(start * 10 + stop)
    pieces = [rng.standard_normal((n, 3)).astype(np.float32) for n in (2, 0, 4, 3)]

    def f(*ps):
        return jnp.concatenate(ps, axis=0)[start:stop:step, 1:]

    np.testing.assert_array_equal(np.asarray(ember.jit(f)(*pieces)),
                                  np.concatenate(pieces, axis=0)[start:stop:step, 1:])
