"""Batching rules at the lax level: vmap against a per-example Python loop (or NumPy).

The loop reference slices each mapped argument with NumPy, runs the unbatched function
eagerly (the primitives' impls, no batching rule involved) and stacks the results along
``out_axes``. Cases target what op-record tests miss: mapped scalars next to unmapped
arrays, batch dims in the middle or last, operands mapped along different axes, nested vmap,
bool/int/float16/bfloat16/complex dtypes, empty arrays, and where each rule puts the result's
batch dim (no needless transposes or broadcasts in the jaxpr).

Section V2: elementwise, shape, dot and sorting primitives.
"""

import sys

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.interpreters.batching import not_mapped
from ember.lax import elementwise as E
from ember.lax import shape as S
from ember.lax import sorting as lax_sorting

lax_dot = sys.modules["ember.lax.dot"]  # ember.lax.dot is also the function lax.dot

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _fresh_rng():
    """Each test draws the same data whether run alone or with the others."""
    global RNG
    RNG = np.random.default_rng(0)


def rand(shape, dtype=np.float32):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return RNG.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return RNG.integers(max(info.min, -50), min(info.max, 50), shape).astype(dtype)
    if np.issubdtype(dtype, np.complexfloating):
        return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def loop_reference(f, args, in_axes, out_axes=0):
    """``f`` run per batch element on NumPy slices, results stacked along ``out_axes``."""
    size = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = []
    for b in range(size):
        ex = [a if ax is None else np.take(a, b, axis=ax) for a, ax in zip(args, in_axes)]
        outs.append(f(*[jnp.asarray(a) for a in ex]))
    if isinstance(outs[0], (list, tuple)):
        return [np.stack([np.asarray(o[i]) for o in outs], axis=out_axes)
                for i in range(len(outs[0]))]
    return np.stack([np.asarray(o) for o in outs], axis=out_axes)


def check(f, args, in_axes, out_axes=0, jit=False):
    """vmap(f) equals the loop: same shapes, dtypes and (exact or close) values."""
    args = [np.asarray(a) for a in args]
    fn = ember.vmap(f, in_axes=tuple(in_axes), out_axes=out_axes)
    if jit:
        fn = ember.jit(fn)
    got = fn(*[jnp.asarray(a) for a in args])
    want = loop_reference(f, args, in_axes, out_axes)
    if isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _assert_same(g, w)
    else:
        _assert_same(got, want)
    return got


def _assert_same(got, want):
    g = np.asarray(got)
    assert (g.shape, g.dtype) == (want.shape, want.dtype), (g.shape, g.dtype, want.shape,
                                                           want.dtype)
    if np.issubdtype(want.dtype, np.inexact) or want.dtype.name == "bfloat16":
        np.testing.assert_allclose(g.astype(np.complex128 if np.iscomplexobj(g) else np.float64),
                                   want.astype(np.complex128 if np.iscomplexobj(want)
                                               else np.float64),
                                   rtol=2e-2 if want.dtype.itemsize <= 2 else 1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(g, want)


def check_empty_batch(f, args, in_axes):
    """A batch of size 0: the result has the per-example shape with a leading 0 axis."""
    args = [jnp.asarray(a) for a in args]
    got = ember.vmap(f, in_axes=tuple(in_axes))(*args)
    example = [a if ax is None else jnp.zeros(np.delete(a.shape, ax), a.dtype)
               for a, ax in zip(args, in_axes)]
    want = ember.eval_shape(f, *example)
    assert np.asarray(got).shape == (0,) + tuple(want.shape)
    assert np.asarray(got).dtype == want.dtype


def jaxpr_text(f, args, in_axes, out_axes=0):
    return str(ember.make_jaxpr(ember.vmap(f, in_axes=tuple(in_axes), out_axes=out_axes))(
        *[jnp.asarray(a) for a in args]))


# =============================================================== V2: elementwise


@pytest.mark.parametrize("fn", [lax.exp, lax.sin, lax.tanh, lax.abs, lax.neg, lax.floor,
                                lax.is_finite, lax.logistic, lax.erf, lax.sqrt])
def test_unary_batch_dim_anywhere(fn):
    x = np.abs(rand((2, 3, 4))) + 0.1
    for ax in (0, 1, 2):
        check(fn, [x], (ax,))
    check(fn, [x], (1,), out_axes=2)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int32, np.float16,
                                   "bfloat16", np.float32, np.complex64])
def test_unary_dtypes(dtype):
    dtype = np.dtype(jnp.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    x = rand((3, 2), dtype)
    if dtype == np.bool_ or np.issubdtype(dtype, np.integer):
        check(lax.bitwise_not, [x], (1,))
        check(lambda v: lax.convert_element_type(v, np.float32), [x], (0,))
    else:
        check(lax.neg, [x], (1,))
        check(lambda v: lax.convert_element_type(v, np.int32), [x.real if np.iscomplexobj(x)
                                                              else x], (1,))


def test_unary_with_params():
    x = rand((4, 3)) * 3
    check(lambda v: lax.round(v, lax.RoundingMethod.TO_NEAREST_EVEN), [x], (1,))
    check(lambda v: lax.round(v), [np.array([[0.5, 1.5], [2.5, -0.5]], np.float32)], (1,))
    check(lambda v: lax.integer_pow(v, 3), [x], (1,))
    check(lambda v: lax.integer_pow(v, -2), [x + 10], (0,))
    check(lambda v: lax.integer_pow(v, 5), [rand((3, 2), np.int32)], (1,))
    check(lambda v: lax.reduce_precision(v, exponent_bits=5, mantissa_bits=3), [x], (1,))
    check(lambda v: lax.convert_element_type(v, jnp.bfloat16), [x], (1,))
    check(lambda v: lax.convert_element_type(v, np.bool_), [x], (0,))
    z = rand((3, 2), np.complex64)
    for fn in (lax.real, lax.imag, lax.conj):
        check(fn, [z], (1,))
    check(lax.conj, [x], (1,))  # a real input gives a complex result


@pytest.mark.parametrize("fn", [lax.add, lax.mul, lax.sub, lax.max, lax.atan2, lax.nextafter,
                                lax.lt, lax.eq])
def test_binary_mapped_and_unmapped(fn):
    x, y = rand((3, 4, 5)), rand((4, 5))
    check(fn, [x, y], (0, None))
    check(fn, [y, rand((4, 3, 5))], (None, 1))
    check(fn, [x, rand((4, 5, 3))], (0, 2))       # different batch dims
    check(fn, [x, rand((3, 5, 4))], (1, 2))
    check(fn, [x, np.float32(2.5)], (2, None))    # unmapped scalar
    check(fn, [rand((3,)), y], (0, None))          # mapped scalar, unmapped array
    check(fn, [y, rand((3,))], (None, 0))
    check(fn, [rand((4, 3, 5)), rand((3,))], (1, 0))  # mapped array, mapped scalar
    check(fn, [rand((3,)), rand((3,))], (0, 0))    # two mapped scalars
    check(fn, [rand((3,)), np.float32(1.0)], (0, None))


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int32, np.float16,
                                   "bfloat16", np.complex64])
def test_binary_dtypes(dtype):
    dtype = np.dtype(jnp.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    x, y, s = rand((2, 3), dtype), rand((3,), dtype), rand((2,), dtype)
    if dtype == np.bool_:
        fns = [lax.bitwise_and, lax.bitwise_xor, lax.ne]
    elif np.issubdtype(dtype, np.integer):
        fns = [lax.add, lax.bitwise_or, lax.shift_left, lax.rem, lax.max, lax.ge]
        y, s = np.abs(y) % 5 + 1, np.abs(s) % 5 + 1
    else:
        fns = [lax.add, lax.mul, lax.eq]
    for fn in fns:
        check(fn, [x, y], (0, None))
        check(fn, [y, s], (None, 0))
        check(fn, [x, x.T.copy()], (0, 1))


def test_pow_and_complex():
    x, n = np.abs(rand((3, 4))) + 0.5, rand((4,), np.int32) % 4
    check(lax.pow, [x, n], (0, None))
    check(lax.pow, [x[:, 0], n], (0, None))       # mapped scalar base, unmapped int exponents
    check(lax.pow, [x, x.T.copy()], (0, 1))
    check(lax.complex, [rand((3, 4)), rand((4,))], (0, None))
    check(lax.complex, [rand((3,)), rand((4, 3))], (0, 1))


def test_select_n():
    # Batch size 3, unbatched case shape (4, 5).
    c, cu, cu2, cm1 = rand((3, 4, 5)), rand((4, 5)), rand((4, 5)), rand((4, 3, 5))
    pm, ps, pu = rand((3, 4, 5), np.bool_), rand((3,), np.bool_), rand((4, 5), np.bool_)
    check(lax.select_n, [pm, c, c + 1], (0, 0, 0))
    check(lax.select_n, [pm, cu, cu2], (0, None, None))     # only the predicate mapped
    check(lax.select_n, [rand((4, 5, 3), np.bool_), cu, cu2], (2, None, None))
    check(lax.select_n, [ps, cu, cm1], (0, None, 1))        # mapped scalar predicate
    check(lax.select_n, [pu, c, cm1], (None, 0, 1))         # unmapped full predicate
    check(lax.select_n, [np.bool_(True), c, cu], (None, 0, None))  # unmapped scalar pred
    check(lax.select_n, [np.bool_(False), cu, cm1], (None, None, 1))
    check(lax.select_n, [ps, np.float32(1), np.float32(2)], (0, None, None))
    check(lax.select_n, [ps, rand((3,)), np.float32(2)], (0, 0, None))
    which = (rand((3, 4, 5), np.int32) % 3).astype(np.int32)
    check(lax.select_n, [which, cu, cm1, cu2], (0, None, 1, None))
    check(lax.select_n, [which[:, 0, 0], cu, c, cu2], (0, None, 0, None))
    check(lax.select_n, [pm, cu], (0, None))                # a single case
    check(lax.select_n, [pm, cu.astype(np.int8), c.astype(np.int8)], (0, None, 0))


def test_select_n_rule_keeps_unmapped_scalar_predicate():
    # An unmapped scalar predicate is not broadcast, and aligned cases are not moved.
    c = rand((2, 3, 4))
    out, dim = E.select_n_p.batch([jnp.asarray(True), jnp.asarray(c), jnp.asarray(c + 1)],
                                  [not_mapped, 1, 1])
    assert dim == 1
    np.testing.assert_array_equal(np.asarray(out), c + 1)
    text = jaxpr_text(lambda a, b: lax.select_n(True, a, b), [c, c], (1, 1), out_axes=1)
    assert "broadcast_in_dim" not in text and "transpose" not in text


def test_clamp():
    x = rand((3, 4)) * 3
    lo, hi = -np.abs(rand((3,))), np.abs(rand((3,)))
    check(lax.clamp, [np.float32(-1), x, np.float32(1)], (None, 0, None))
    check(lax.clamp, [lo, x, hi], (0, 0, 0))
    check(lax.clamp, [lo, x[0], hi], (0, None, 0))          # mapped scalar bounds
    check(lax.clamp, [lo, x[0], np.float32(1)], (0, None, None))
    check(lax.clamp, [lo, np.float32(0.3), hi], (0, None, 0))  # rank-0 x
    check(lax.clamp, [x.T - 1, x, x.T + 1], (1, 0, 1))      # full bounds, other batch dim
    check(lax.clamp, [np.int32(-2), rand((4, 3), np.int32), rand((3,), np.int32)],
          (None, 1, 0))


def test_elementwise_empty_arrays():
    check(lax.add, [rand((3, 0)), rand((0,))], (0, None))
    check(lax.select_n, [rand((3, 0), np.bool_), rand((0,)), rand((0,))], (0, None, None))
    check_empty_batch(lax.mul, [rand((0, 4)), rand((4,))], (0, None))
    check_empty_batch(lax.select_n, [rand((0,), np.bool_), rand((4,)), rand((4,))],
                      (0, None, None))
    check_empty_batch(lax.clamp, [np.float32(0), rand((0, 2)), np.float32(1)], (None, 0, None))


def test_elementwise_nested_vmap():
    x, y = rand((2, 3, 4)), rand((3, 4, 5))
    f = ember.vmap(ember.vmap(lax.mul, in_axes=(0, None)), in_axes=(None, 2))
    got = np.asarray(f(jnp.asarray(x), jnp.asarray(y)))  # (5, 2, 3, 4)
    want = x[None] * np.moveaxis(y, 2, 0)[:, None]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    g = ember.vmap(ember.vmap(lax.select_n, in_axes=(0, None, 0)), in_axes=(1, 0, None))
    p, a, b = rand((3, 2), np.bool_), rand((2, 4)), rand((3, 4))
    got = np.asarray(g(jnp.asarray(p), jnp.asarray(a), jnp.asarray(b)))
    want = np.where(p.T[:, :, None], b[None, :, :], a[:, None, :])
    np.testing.assert_array_equal(got, want)


def test_elementwise_under_jit():
    x, y = rand((3, 4)), rand((4,))
    check(lax.add, [x, y], (0, None), jit=True)
    check(lax.select_n, [rand((3,), np.bool_), x, y], (0, 0, None), jit=True)
    check(lax.clamp, [rand((3,)) - 1, y, np.float32(1)], (0, None, None), jit=True)


def test_broadcasting_rule_batch_dim_placement():
    # The first full-rank mapped operand's batch dim wins; no transpose of it.
    x, y = rand((4, 3, 5)), rand((4, 5))
    out, dim = E.add_p.batch([jnp.asarray(x), jnp.asarray(y)], [1, not_mapped])
    assert dim == 1
    np.testing.assert_allclose(np.asarray(out), x + y[:, None, :])
    out, dim = E.mul_p.batch([jnp.asarray(rand((3,))), jnp.asarray(x)], [0, 1])
    assert dim == 1 and np.asarray(out).shape == (4, 3, 5)
    assert "transpose" not in jaxpr_text(lax.add, [x, y], (1, None), out_axes=1)


# =============================================================== V2: shape


def test_broadcast_in_dim():
    x = rand((2, 3, 4))  # batch 2, unbatched (3, 4)
    f = lambda v: lax.broadcast_in_dim(v, (3, 5, 4), (0, 2))  # noqa: E731
    for ax in (0, 1, 2):
        check(f, [np.moveaxis(x, 0, ax)], (ax,))
        check(f, [np.moveaxis(x, 0, ax)], (ax,), jit=True)
    check(lambda v: lax.broadcast_in_dim(v, (3, 4), ()), [rand((5,))], (0,))
    check(lambda v: lax.broadcast_in_dim(v, (2, 3, 4), (0, 2)), [rand((2, 5, 1))], (1,))
    check(lambda v: lax.broadcast_in_dim(v, (6, 2), (1,)), [rand((2, 3), np.int8)], (1,))
    xm = np.moveaxis(x, 0, 1)
    out, dim = S.broadcast_in_dim_p.batch([jnp.asarray(xm)], [1], shape=(3, 5, 4),
                                          broadcast_dimensions=(0, 2))
    assert dim == 1 and np.asarray(out).shape == (3, 2, 5, 4)
    assert "transpose" not in jaxpr_text(f, [xm], (1,), out_axes=1)


def test_reshape():
    for ax in (0, 1, 2):  # batch 5, unbatched (4, 2)
        check(lambda v: lax.reshape(v, (2, 4)), [np.moveaxis(rand((5, 4, 2)), 0, ax)], (ax,))
    x = rand((2, 3, 4))
    check(lambda v: lax.reshape(v, (12,)), [x], (0,))
    check(lambda v: lax.reshape(v, (6,)), [x], (2,))
    check(lambda v: lax.reshape(v, (8,)), [x], (1,))
    g = lambda v: lax.reshape(v, (2, 6), dimensions=(1, 0))  # noqa: E731
    check(g, [rand((3, 4, 5))], (2,))   # unbatched (3, 4)
    check(g, [rand((5, 3, 4))], (0,))
    check(g, [rand((3, 5, 4))], (1,))
    check(lambda v: lax.reshape(v, (1,)), [rand((5,))], (0,))   # a mapped scalar
    check(lambda v: lax.reshape(v, ()), [rand((1, 5))], (1,))
    check(lambda v: lax.reshape(v, (0, 3)), [rand((3, 0))], (0,))
    # A trailing batch dim stays trailing: no transpose.
    assert "transpose" not in jaxpr_text(lambda v: lax.reshape(v, (6,)), [x], (2,), out_axes=1)


def test_squeeze_transpose_rev():
    x = rand((1, 3, 1, 4))
    for ax in range(4):
        xb = np.stack([x] * 2, axis=ax) + rand(np.stack([x] * 2, axis=ax).shape)
        check(lambda v: lax.squeeze(v, (0, 2)), [xb], (ax,))
        check(lambda v: lax.transpose(v, (3, 1, 0, 2)), [xb], (ax,))
        check(lambda v: lax.rev(v, (1, 3)), [xb], (ax,))
    check(lambda v: lax.squeeze(v, (0,)), [rand((5, 1))], (0,))
    check(lambda v: lax.rev(v, ()), [rand((5, 2))], (1,))
    out, dim = S.transpose_p.batch([jnp.asarray(rand((2, 5, 3)))], [1], permutation=(1, 0))
    assert dim == 1 and np.asarray(out).shape == (3, 5, 2)
    out, dim = S.squeeze_p.batch([jnp.asarray(rand((1, 2, 5)))], [2], dimensions=(0,))
    assert dim == 1 and np.asarray(out).shape == (2, 5)


@pytest.mark.parametrize("config", [((1, 2, 0), (0, 1, 1)), ((-1, 1, 0), (2, -1, 2)),
                                    ((0, 0, 0), (0, 0, 0))])
def test_pad(config):
    x = rand((3, 4, 5))  # batch 3, unbatched (4, 5)
    v = rand((3,))
    f = lambda a, b: lax.pad(a, b, config)  # noqa: E731
    check(f, [x, np.float32(7)], (0, None))
    check(f, [np.moveaxis(x, 0, 2), np.float32(7)], (2, None))
    check(f, [x, v], (0, 0))            # mapped padding value: a select
    check(f, [np.moveaxis(x, 0, 1), v], (1, 0))
    check(f, [x[0], v], (None, 0))      # only the padding value mapped
    check(f, [x[0], v], (None, 0), jit=True)
    check(f, [np.moveaxis(x, 0, 2).astype(np.int32), v.astype(np.int32)], (2, 0))
    check(f, [np.moveaxis(x, 0, 1) > 0, v > 0], (1, 0))


def test_pad_empty_and_scalar():
    f = lambda a, b: lax.pad(a, b, ((1, 1, 2),))  # noqa: E731
    check(f, [rand((3, 0)), rand((3,))], (0, 0))        # empty operand, mapped value
    check(f, [rand((3, 0)), np.float32(1)], (0, None))
    check(lambda a, b: lax.pad(a, b, ()), [rand((3,)), rand((3,))], (0, 0))  # rank-0 operand


def test_concatenate():
    a, b, c = rand((3, 2, 4)), rand((2, 5)), rand((2, 1, 3))  # batch 3
    f = lambda x, y, z: lax.concatenate([x, y, z], 1)  # noqa: E731
    check(f, [a, b, c], (0, None, 2))
    check(f, [a, b, c], (0, None, 2), jit=True)
    check(f, [np.moveaxis(a, 0, 1).copy(), b, c], (1, None, 2))
    check(lambda x, y: lax.concatenate([x, y], 0), [rand((4, 3)), rand((2,))], (1, None))
    check(lambda x, y: lax.concatenate([x, y], 0), [rand((4,), np.bool_), rand((3, 2), np.bool_)],
          (None, 0))
    check(lambda x, y: lax.concatenate([x, y], 0), [rand((3, 0)), rand((3, 2))], (0, 0))


def test_shape_nested_vmap():
    x = rand((2, 3, 4, 5))
    f = lambda v: lax.rev(lax.reshape(v, (15,)), (0,))  # noqa: E731
    got = ember.vmap(ember.vmap(f, in_axes=1), in_axes=0)(jnp.asarray(x))
    want = x.transpose(0, 2, 1, 3).reshape(2, 4, 15)[..., ::-1]
    np.testing.assert_array_equal(np.asarray(got), want)
    g = ember.vmap(ember.vmap(lambda a, b: lax.pad(a, b, ((1, 0, 1),)), in_axes=(0, None)),
                   in_axes=(None, 0))
    a, vals = rand((3, 4)), rand((2,))
    got = np.asarray(g(jnp.asarray(a), jnp.asarray(vals)))
    for i in range(2):
        for j in range(3):
            want = np.full(8, vals[i], np.float32)
            want[1::2] = a[j]
            np.testing.assert_array_equal(got[i, j], want)


# =============================================================== V2: dot_general


def _dg(dims, **kw):
    return lambda a, b: lax.dot_general(a, b, dims, **kw)


MATMUL = (((1,), (0,)), ((), ()))
BATCHED = (((2,), (1,)), ((0,), (0,)))


def test_dot_general_both_mapped():
    x, y = rand((5, 2, 3)), rand((5, 3, 4))
    check(_dg(MATMUL), [x, y], (0, 0))
    check(_dg(MATMUL), [x, np.moveaxis(y, 0, 2).copy()], (0, 2))
    check(_dg(MATMUL), [np.moveaxis(x, 0, 1).copy(), np.moveaxis(y, 0, 1).copy()], (1, 1))
    check(_dg(BATCHED), [rand((2, 5, 6, 3)), rand((5, 2, 3, 4))], (1, 0))
    check(_dg(BATCHED), [rand((2, 6, 3, 5)), rand((2, 3, 5, 4))], (3, 2), jit=True)
    out, dim = lax_dot.dot_general_p.batch(
        [jnp.asarray(x), jnp.asarray(y)], [0, 0], dimension_numbers=MATMUL, precision=None,
        preferred_element_type=None)
    assert dim == 0
    np.testing.assert_allclose(np.asarray(out), np.einsum("bij,bjk->bik", x, y), rtol=1e-5,
                               atol=1e-5)


def test_dot_general_one_side_mapped():
    x, y = rand((5, 2, 3)), rand((3, 4))
    check(_dg(MATMUL), [x, y], (0, None))
    check(_dg(MATMUL), [np.moveaxis(x, 0, 2).copy(), y], (2, None))
    check(_dg(MATMUL), [x[0], rand((3, 5, 4))], (None, 1))
    check(_dg(MATMUL), [x[0], rand((5, 3, 4))], (None, 0), jit=True)
    check(_dg(BATCHED), [rand((2, 6, 3)), rand((2, 3, 6, 4))], (None, 2))
    check(_dg(BATCHED), [rand((2, 6, 3, 5)), rand((2, 3, 4))], (3, None))
    check(_dg((((0,), (0,)), ((), ()))), [rand((3, 5)), rand((3,))], (1, None))  # vec . vec
    check(_dg((((), ()), ((), ()))), [rand((5, 2)), rand((3,))], (0, None))      # outer
    check(_dg((((), ()), ((), ()))), [rand(()), rand((5,))], (None, 0))          # scalars


def test_dot_general_one_side_mapped_materializes_nothing():
    # The mapped side's batch axis is a free dim: no broadcast of the unmapped operand, and
    # the result lands where that free dim is (no transpose when out_axes says so).
    x, y = rand((2, 5, 3)), rand((3, 4))
    text = jaxpr_text(_dg(MATMUL), [x, y], (1, None), out_axes=1)
    assert "broadcast_in_dim" not in text and "transpose" not in text, text
    text = jaxpr_text(_dg(MATMUL), [rand((2, 3)), rand((3, 5, 4))], (None, 1), out_axes=1)
    assert "broadcast_in_dim" not in text and "transpose" not in text, text
    out, dim = lax_dot.dot_general_p.batch(
        [jnp.asarray(x), jnp.asarray(y)], [1, not_mapped], dimension_numbers=MATMUL,
        precision=None, preferred_element_type=None)
    assert dim == 1
    np.testing.assert_allclose(np.asarray(out), np.einsum("ibj,jk->ibk", x, y), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.float16, "bfloat16", np.complex64,
                                   np.bool_])
def test_dot_general_dtypes(dtype):
    dtype = np.dtype(jnp.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    x, y = rand((4, 2, 3), dtype), rand((3, 2), dtype)
    check(_dg(MATMUL), [x, y], (0, None))
    check(_dg(MATMUL), [x, rand((4, 3, 2), dtype)], (0, 0))


def test_dot_general_params_pass_through():
    x, y = rand((4, 2, 3), np.int8), rand((3, 2), np.int8)
    got = check(_dg(MATMUL, preferred_element_type=np.int32), [x, y], (0, None))
    assert np.asarray(got).dtype == np.int32
    got = check(_dg(MATMUL, precision=lax.Precision.HIGHEST,
                    preferred_element_type=np.float32),
                [rand((4, 2, 3), np.float16), rand((3, 2), np.float16)], (0, None))
    assert np.asarray(got).dtype == np.float32


def test_dot_general_empty_and_nested():
    check(_dg(MATMUL), [rand((3, 2, 0)), rand((0, 4))], (0, None))
    check(_dg(MATMUL), [rand((3, 0, 2)), rand((3, 2, 4))], (0, 0))
    check_empty_batch(_dg(MATMUL), [rand((0, 2, 3)), rand((3, 4))], (0, None))
    x, y = rand((2, 3, 4)), rand((4, 5, 6))
    f = ember.vmap(ember.vmap(lambda a, b: lax.dot(a, b), in_axes=(0, None)),
                   in_axes=(None, 1))
    got = np.asarray(f(jnp.asarray(x), jnp.asarray(y)))  # (5, 2, 3, 6)
    np.testing.assert_allclose(got, np.einsum("ijk,klm->lijm", x, y), rtol=1e-5, atol=1e-5)
    g = ember.vmap(ember.vmap(lax.dot, in_axes=(0, 0)), in_axes=(0, None))
    a, b = rand((2, 3, 4)), rand((3, 4, 5))
    np.testing.assert_allclose(np.asarray(g(jnp.asarray(a), jnp.asarray(b))),
                               np.einsum("ijk,jkl->ijl", a, b), rtol=1e-5, atol=1e-5)


# =============================================================== V2: sorting


def test_sort_single():
    x = rand((3, 4, 5))
    for ax in range(3):
        check(lambda v: lax.sort(v, dimension=0), [x], (ax,))
        check(lambda v: lax.sort(v, dimension=1), [x], (ax,))
    x[0, 1, 2] = np.nan
    check(lambda v: lax.sort(v), [x], (1,))
    check(lambda v: lax.sort(v), [rand((3, 4), np.bool_)], (0,))
    check(lambda v: lax.sort(v), [rand((3, 4), np.int8)], (1,), jit=True)
    check(lambda v: lax.sort(v), [rand((3, 4), np.dtype(jnp.bfloat16))], (1,))
    check(lambda v: lax.sort(v), [rand((3, 0))], (0,))


def test_sort_multiple_operands():
    # Ties in the first key, broken by the second key against the original order.
    keys = np.array([[1, 0, 1, 0, 1, 0], [2, 2, 2, 1, 1, 1], [0, 0, 0, 0, 0, 0]], np.int32)
    keys2 = np.repeat(np.arange(6, dtype=np.int32)[::-1, None], 3, axis=1)
    vals = rand((6,))
    f1 = lambda k, v: lax.sort((k, v), num_keys=1)  # noqa: E731
    check(f1, [keys, vals], (0, None))              # unmapped values follow mapped keys
    check(f1, [keys[0], rand((6, 3))], (None, 1))   # mapped values, unmapped keys
    check(f1, [keys, rand((6, 3))], (0, 1))
    f2 = lambda a, b, v: lax.sort((a, b, v), num_keys=2)  # noqa: E731
    check(f2, [keys, keys2, vals], (0, 1, None))
    check(f2, [keys, keys2, vals], (0, 1, None), jit=True)
    check(lambda k, v: lax.sort_key_val(k, v, dimension=0),
          [rand((4, 3, 2)), rand((4, 2))], (1, None))
    out, dims = lax_sorting.sort_p.batch([jnp.asarray(rand((4, 3, 5))), jnp.asarray(rand((4, 5)))],
                                         [1, not_mapped], dimension=1, is_stable=True,
                                         num_keys=1)
    assert dims == [1, 1]


def test_top_k():
    x = rand((3, 4, 6))
    for ax in range(3):
        check(lambda v: lax.top_k(v, 3), [x], (ax,))
    check(lambda v: lax.top_k(v, 2), [x], (2,), jit=True)
    check(lambda v: lax.top_k(v, 2), [rand((5, 3), np.int32)], (1,))
    check(lambda v: lax.top_k(v, 0), [rand((5, 3))], (0,))
    check(lambda v: lax.top_k(v, 2, axis=0), [rand((4, 3, 2))], (2,))
    out, dims = lax_sorting.top_k_p.batch([jnp.asarray(x)], [1], k=2)
    assert dims == [1, 1] and np.asarray(out[0]).shape == (3, 4, 2)
    out, dims = lax_sorting.top_k_p.batch([jnp.asarray(x)], [2], k=2)
    assert dims == [0, 0] and np.asarray(out[1]).shape == (6, 3, 2)


def test_sorting_nested_vmap():
    x = rand((2, 3, 5))
    got = ember.vmap(ember.vmap(lambda v: lax.sort(v), in_axes=1), in_axes=0)(jnp.asarray(
        np.moveaxis(x, 2, 1).copy()))
    np.testing.assert_array_equal(np.asarray(got), np.sort(x, axis=-1))
    keys, vals = rand((2, 5)), rand((3, 5))
    f = ember.vmap(ember.vmap(lambda k, v: lax.sort_key_val(k, v), in_axes=(None, 0)),
                   in_axes=(0, None))
    ks, vs = f(jnp.asarray(keys), jnp.asarray(vals))
    order = np.argsort(keys, axis=-1)
    np.testing.assert_array_equal(np.asarray(ks), np.broadcast_to(
        np.sort(keys, -1)[:, None], (2, 3, 5)))
    np.testing.assert_array_equal(np.asarray(vs), vals[np.arange(3)[None, :, None],
                                                       order[:, None, :]])


# =============================================================== V2: compositions


def _mixed(x, w):
    y = lax.tanh(lax.dot(x, w))
    y = lax.pad(y, np.float32(0.5), ((1, 1, 1),))
    z = lax.top_k(lax.sort(y), 3)[0]
    c = lax.clamp(np.float32(-0.2), y, np.float32(0.3))
    return jnp.sum(z * z) + jnp.sum(lax.select_n(lax.gt(y, 0.0), c, y))


def test_vmap_of_grad_and_jit_through_v2_rules():
    # grad's JVP and transpose rules bind these primitives again, now under the batch trace.
    x, w = rand((5, 4)), rand((4, 3))
    check(ember.grad(_mixed, argnums=(0, 1)), [x, w], (0, None))
    check(ember.grad(_mixed), [x[0], np.stack([w, w * 2], 2)], (None, 2))
    check(_mixed, [x[1], np.stack([w, w * 2], 2)], (None, 2), jit=True)


# =============================================================== V2: coverage


def test_every_v2_primitive_with_operands_has_a_rule():
    prims = [v for mod in (E, S, lax_dot, lax_sorting) for v in vars(mod).values()
             if isinstance(v, ember.core.Primitive)]
    missing = sorted({p.name for p in prims if p.batch is None and p is not S.iota_p})
    assert not missing, missing
