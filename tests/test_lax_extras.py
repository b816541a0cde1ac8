"""The lax names added after the first roadmap steps: bitcast_convert_type, mulhi, scatter_sub,
scatter_apply, split, tile, stack, unstack, broadcast_shapes, broadcast_like, index_take, empty,
dtype, optimization_barrier, approx_max_k/approx_min_k and associative_scan.

Each is checked against NumPy or hand-computed references (eagerly, under jit on both
backends, under vmap and grad where they apply) and, in the ``jax`` tests, against JAX itself
(skipped where jax is not installed). The op-record rows for the new primitives live in
tests/op_records/.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax

BACKENDS = ("cpu", "interpreter")
SDN = lax.ScatterDimensionNumbers
BF16 = np.dtype(ml_dtypes.bfloat16)


def _bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    assert a.tobytes() == b.tobytes()


def _all_ways(fn, *args):
    """Eager and jitted (both backends) results of ``fn``; they must agree bit for bit."""
    eager = fn(*args)
    for backend in BACKENDS:
        jitted = ember.jit(fn, backend=backend)(*args)
        for e, j in zip(ember.tree_util.tree_leaves(eager), ember.tree_util.tree_leaves(jitted)):
            _bits_equal(j, e)
            assert j.weak_type == e.weak_type
    return eager


# ---------------------------------------------------------------- bitcast_convert_type

# Quiet and signalling NaNs with payloads, both signs, infinities, zeros, denormals.
NAN_BITS = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0xFFFFFFFF, 0x7FC12345,
                     0x7F800000, 0xFF800000, 0x00000000, 0x80000000, 0x00000001, 0x3F800000],
                    np.uint32)


@pytest.mark.parametrize("src,dst", [(np.uint32, np.float32), (np.uint32, np.int32),
                                     (np.int32, np.uint32)])
def test_bitcast_same_width_keeps_nan_payloads(src, dst):
    x = NAN_BITS.astype(src)
    out = _all_ways(lambda v: lax.bitcast_convert_type(v, dst), x)
    _bits_equal(out, x.view(dst))
    back = _all_ways(lambda v: lax.bitcast_convert_type(lax.bitcast_convert_type(v, dst), src),
                     x)
    _bits_equal(back, x)


def test_bitcast_low_precision_floats():
    bits = np.array([0x7E01, 0xFFFF, 0x7C00, 0x8000, 0x3C00, 0x0001], np.uint16)
    for dt in (np.dtype(np.float16), BF16):
        out = _all_ways(lambda v, dt=dt: lax.bitcast_convert_type(v, dt), bits)
        _bits_equal(out, bits.view(dt))
        _bits_equal(_all_ways(lambda v: lax.bitcast_convert_type(v, np.int16), out),
                    bits.view(np.int16))


def test_bitcast_narrowing_and_widening():
    x = NAN_BITS.view(np.float32).reshape(3, 4)
    narrow = _all_ways(lambda v: lax.bitcast_convert_type(v, np.uint8), x)
    assert narrow.shape == (3, 4, 4)
    _bits_equal(narrow, x.reshape(-1).view(np.uint8).reshape(3, 4, 4))  # little-endian order
    halves = _all_ways(lambda v: lax.bitcast_convert_type(v, BF16), x)
    assert halves.shape == (3, 4, 2) and halves.dtype == BF16
    wide = _all_ways(lambda v: lax.bitcast_convert_type(v, np.float32), narrow)
    _bits_equal(wide, x)
    _bits_equal(_all_ways(lambda v: lax.bitcast_convert_type(v, np.float32), halves), x)
    # Rank 0 narrows to a vector; a vector of the right length widens to a scalar.
    s = lax.bitcast_convert_type(np.float32(1.0), np.uint16)
    np.testing.assert_array_equal(s, [0, 0x3F80])
    assert lax.bitcast_convert_type(s, np.float32).shape == ()


def test_bitcast_empty_and_weak_type():
    e = _all_ways(lambda v: lax.bitcast_convert_type(v, np.int8), np.zeros((0, 3), np.float32))
    assert e.shape == (0, 3, 4) and e.dtype == np.int8
    w = _all_ways(lambda v: lax.bitcast_convert_type(v, np.uint8), np.zeros((0, 4), np.uint8))
    assert w.shape == (0, 4)
    weak = lax.bitcast_convert_type(1.0, np.int32)  # a Python float is weakly typed f32
    assert int(weak) == 0x3F800000 and not weak.weak_type
    assert str(ember.make_jaxpr(lambda v: lax.bitcast_convert_type(v, jnp.int16))(
        np.ones(2, np.float32))).count("bitcast_convert_type[new_dtype=int16]") == 1


def test_bitcast_x64(x64):
    x = np.array([1.0, -np.nan, 2.0 ** -1074], np.float64)
    out = _all_ways(lambda v: lax.bitcast_convert_type(v, np.int64), x)
    _bits_equal(out, x.view(np.int64))
    pairs = _all_ways(lambda v: lax.bitcast_convert_type(v, np.uint32), x)
    _bits_equal(pairs, x.view(np.uint32).reshape(3, 2))
    _bits_equal(_all_ways(lambda v: lax.bitcast_convert_type(v, np.float64), pairs), x)


def test_bitcast_vmap():
    x = np.arange(24, dtype=np.uint8).reshape(4, 6)  # batch along axis 1 (the last)
    out = ember.vmap(lambda v: lax.bitcast_convert_type(v, np.int32), in_axes=1)(x)
    _bits_equal(out, np.ascontiguousarray(x.T).view(np.int32).reshape(6))
    out = ember.vmap(lambda v: lax.bitcast_convert_type(v, np.uint16))(
        np.ones((2, 3), np.float32))
    assert out.shape == (2, 3, 2)
    out = ember.jit(ember.vmap(lambda v: lax.bitcast_convert_type(v, np.float32)))(
        np.zeros((5, 4), np.int8))
    np.testing.assert_array_equal(out, np.zeros(5, np.float32))


def test_bitcast_has_zero_derivative():
    x = jnp.array([1.0, 2.0])
    g = ember.grad(lambda v: lax.bitcast_convert_type(v, np.float32).sum())(x)
    np.testing.assert_array_equal(g, [0.0, 0.0])
    g = ember.grad(lambda v: v.sum() + lax.bitcast_convert_type(v, np.int32).sum())(x)
    np.testing.assert_array_equal(g, [1.0, 1.0])
    _, t = ember.jvp(lambda v: lax.bitcast_convert_type(v, np.float32), (x,), (x,))
    np.testing.assert_array_equal(t, [0.0, 0.0])


def test_bitcast_errors():
    with pytest.raises(TypeError, match="bitcast_convert_type"):
        lax.bitcast_convert_type(np.ones(2, np.bool_), np.uint8)
    with pytest.raises(TypeError, match="bitcast_convert_type"):
        lax.bitcast_convert_type(np.ones(2, np.complex64), np.float64)
    with pytest.raises(ValueError, match="bitcast_convert_type"):
        lax.bitcast_convert_type(np.ones((2, 3), np.uint8), np.float32)
    with pytest.raises(ValueError, match="bitcast_convert_type"):
        lax.bitcast_convert_type(np.uint8(1), np.int16)
    with pytest.raises(TypeError, match="new_dtype"):
        lax.bitcast_convert_type(np.ones(2, np.float32), "not-a-dtype")
    with pytest.raises(TypeError, match="bitcast_convert_type"):
        lax.bitcast_convert_type([1.0], np.int32)
    np.testing.assert_array_equal(lax.bitcast_convert_type(np.ones(2, np.bool_), np.bool_),
                                  [True, True])


def test_bitcast_matches_jax(jax):
    x = NAN_BITS.view(np.float32)
    for dt in (np.int32, np.uint8, np.uint16, BF16):
        _bits_equal(lax.bitcast_convert_type(x, dt), jax.lax.bitcast_convert_type(x, dt))
    b = x.view(np.uint8).reshape(-1, 4)
    _bits_equal(lax.bitcast_convert_type(b, np.float32),
                jax.lax.bitcast_convert_type(b, np.float32))
    assert lax.bitcast_convert_type(1.0, np.int32).weak_type == \
        jax.lax.bitcast_convert_type(1.0, np.int32).weak_type
    g = jax.grad(lambda v: jax.lax.bitcast_convert_type(v, np.float32).sum())(np.ones(2,
                                                                                       "f4"))
    np.testing.assert_array_equal(
        ember.grad(lambda v: lax.bitcast_convert_type(v, np.float32).sum())(np.ones(2, "f4")),
        g)
    for bad in ((np.ones(2, np.bool_), np.uint8), (np.ones((2, 3), np.uint8), np.float32)):
        with pytest.raises(Exception) as jax_err:
            jax.lax.bitcast_convert_type(*bad)
        with pytest.raises(type(jax_err.value)):
            lax.bitcast_convert_type(*bad)


# ---------------------------------------------------------------- mulhi

INT_TYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32]


def _mulhi_ref(x, y):
    x, y = np.broadcast_arrays(x, y)
    n = x.dtype.itemsize * 8
    out = [((int(a) * int(b)) >> n) % (1 << n) for a, b in zip(x.ravel(), y.ravel())]
    return np.array(out, np.uint64).astype(x.dtype).reshape(x.shape)


def _extreme_ints(dt, n=40, seed=0):
    info = np.iinfo(dt)
    rng = np.random.default_rng(seed)
    edges = [info.min, info.min + 1, -1, 0, 1, 2, info.max - 1, info.max, info.max // 2]
    edges = [v for v in edges if info.min <= v <= info.max]
    rand = rng.integers(info.min, info.max, size=n, endpoint=True, dtype=dt)
    return np.concatenate([np.array(edges, dt), rand])


@pytest.mark.parametrize("dt", INT_TYPES)
def test_mulhi_matches_big_integers(dt):
    x = _extreme_ints(dt)
    y = np.roll(_extreme_ints(dt, seed=1), 3)
    out = _all_ways(lax.mulhi, x, y)
    np.testing.assert_array_equal(out, _mulhi_ref(x, y))
    assert out.dtype == np.dtype(dt)


def test_mulhi_64_bits(x64):
    for dt in (np.int64, np.uint64):
        x = _extreme_ints(dt)
        y = np.roll(_extreme_ints(dt, seed=2), 5)
        np.testing.assert_array_equal(_all_ways(lax.mulhi, x, y), _mulhi_ref(x, y))


def test_mulhi_scalars_broadcasting_and_weak_types():
    assert int(lax.mulhi(jnp.int32(-5), jnp.int32(7))) == -1
    w = lax.mulhi(-5, 7)
    assert int(w) == -1 and w.weak_type and w.dtype == np.int32
    x = np.array([[2 ** 30, -(2 ** 31)], [3, -3]], np.int32)
    np.testing.assert_array_equal(_all_ways(lambda a: lax.mulhi(a, np.int32(4)), x),
                                  _mulhi_ref(x, np.int32(4)))
    assert lax.mulhi(np.zeros((0, 2), np.uint8), np.zeros((0, 2), np.uint8)).shape == (0, 2)


def test_mulhi_vmap_and_grad():
    x = _extreme_ints(np.int32, n=6).reshape(3, 5)
    y = np.int32(-123456789)
    out = ember.vmap(lambda a: lax.mulhi(a, y))(x)
    np.testing.assert_array_equal(out, _mulhi_ref(x, y))
    y2 = np.ascontiguousarray(x.T[::-1])  # (5, 3): mapped along axis 0, x along axis 1
    out = ember.vmap(lax.mulhi, in_axes=(1, 0))(x, y2)
    np.testing.assert_array_equal(out, _mulhi_ref(x.T, y2))
    # Integer-valued: the derivative of anything through it is zero (JAX: defjvp_zero).
    f = ember.grad(lambda v: v + lax.convert_element_type(
        lax.mulhi(lax.convert_element_type(v, np.int32), np.int32(7)), np.float32))
    assert float(f(3.0)) == 1.0


def test_mulhi_errors():
    with pytest.raises(TypeError, match="mulhi"):
        lax.mulhi(np.ones(2, np.float32), np.ones(2, np.float32))
    with pytest.raises(TypeError, match="mulhi"):
        lax.mulhi(np.ones(2, np.bool_), np.ones(2, np.bool_))
    with pytest.raises(TypeError, match="mulhi"):
        lax.mulhi(np.ones(2, np.int32), np.ones(2, np.int16))
    with pytest.raises(TypeError, match="mulhi"):
        lax.mulhi(np.ones(2, np.int32), np.ones(3, np.int32))


def test_mulhi_matches_jax(jax):
    for dt in (np.int8, np.uint16, np.int32, np.uint32):
        x, y = _extreme_ints(dt, n=10), _extreme_ints(dt, n=10, seed=3)
        np.testing.assert_array_equal(lax.mulhi(x, y), jax.lax.mulhi(x, y))
    assert lax.mulhi(-5, 7).weak_type == jax.lax.mulhi(-5, 7).weak_type
    with pytest.raises(TypeError):
        jax.lax.mulhi(np.ones(2, np.float32), np.ones(2, np.float32))


# ---------------------------------------------------------------- scatter_sub / scatter_apply

ROWS = SDN(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
POINTS = SDN(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
IDX = np.array([[1], [3], [1], [9], [-1], [0]], np.int32)  # repeats and out-of-bounds


def test_scatter_sub_eager_jit_vmap_grad():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    u = np.arange(18, dtype=np.float32).reshape(6, 3) / 4
    ref = x.copy()
    for (r,), row in zip(IDX, u):
        if 0 <= r < 4:
            ref[r] -= row
    out = _all_ways(lambda a, b: lax.scatter_sub(a, IDX, b, ROWS), x, u)
    np.testing.assert_allclose(out, ref)
    clip = lax.scatter_sub(x, IDX, u, ROWS, mode="clip")
    ref_clip = x.copy()
    for (r,), row in zip(np.clip(IDX, 0, 3), u):
        ref_clip[r] -= row
    np.testing.assert_allclose(clip, ref_clip)
    xs, us = np.stack([x, 2 * x]), np.stack([u, -u])
    out = ember.vmap(lambda a, b: lax.scatter_sub(a, IDX, b, ROWS))(xs, us)
    for k in range(2):
        np.testing.assert_allclose(out[k], lax.scatter_sub(xs[k], IDX, us[k], ROWS))
    gx, gu = ember.grad(lambda a, b: (lax.scatter_sub(a, IDX, b, ROWS) * x).sum(),
                        argnums=(0, 1))(x, u)
    np.testing.assert_allclose(gx, x)
    want = np.array([-x[r] if 0 <= r < 4 else np.zeros(3, np.float32) for (r,) in IDX])
    np.testing.assert_allclose(gu, want)
    ints = lax.scatter_sub(np.zeros(3, np.uint8), np.array([[0], [0]]), np.ones(2, np.uint8),
                           POINTS)
    np.testing.assert_array_equal(ints, [254, 0, 0])  # wraps
    with pytest.raises(TypeError, match="scatter-sub"):
        lax.scatter_sub(np.ones(2, np.bool_), np.array([[0]]), np.ones(1, np.bool_), POINTS)
    assert "scatter-sub" in str(ember.make_jaxpr(
        lambda a, b: lax.scatter_sub(a, IDX, b, ROWS))(x, u))


def test_scatter_apply_repeats_and_modes():
    x = np.arange(4, dtype=np.float32)
    idx = np.array([[0], [0], [2], [9]], np.int32)

    def f(v, mode=None):
        return lax.scatter_apply(v, idx, lambda e: e * 2 + 1, POINTS, update_shape=(4,),
                                 mode=mode)
    np.testing.assert_array_equal(_all_ways(f, x), [3, 1, 5, 3])  # index 0 twice: twice
    np.testing.assert_array_equal(_all_ways(lambda v: f(v, "clip"), x), [3, 1, 5, 7])
    np.testing.assert_array_equal(_all_ways(f, np.arange(4, dtype=np.int32)), [3, 1, 5, 3])
    sin = _all_ways(lambda v: lax.scatter_apply(v, idx, jnp.sin, POINTS, update_shape=(4,)), x)
    np.testing.assert_allclose(sin, [np.sin(np.sin(np.float32(0))), 1, np.sin(2.0), 3],
                               rtol=1e-6)
    c = np.float32(3.0)  # a concrete captured constant is fine
    np.testing.assert_array_equal(
        _all_ways(lambda v: lax.scatter_apply(v, idx, lambda e: e * c, POINTS,
                                              update_shape=(4,)), x), [0, 1, 6, 3])
    rows = lax.scatter_apply(np.ones((3, 2), np.float32), np.array([[2]]), lambda e: -e, ROWS,
                             update_shape=(1, 2))
    np.testing.assert_array_equal(rows, [[1, 1], [1, 1], [-1, -1]])
    out = ember.vmap(f)(np.stack([x, x + 1]))
    np.testing.assert_array_equal(out, [[3, 1, 5, 3], [7, 2, 7, 4]])
    jaxpr = str(ember.make_jaxpr(f)(x))
    assert "update_jaxpr={ lambda ; " in jaxpr and "scatter[" in jaxpr


def test_scatter_apply_errors():
    x = np.arange(4, dtype=np.float32)
    idx = np.array([[0]], np.int32)
    with pytest.raises(NotImplementedError, match="scatter_apply"):
        ember.grad(lambda v: lax.scatter_apply(v, idx, jnp.sin, POINTS,
                                               update_shape=(1,)).sum())(x)
    with pytest.raises(NotImplementedError, match="traced"):
        ember.jit(lambda v, s: lax.scatter_apply(v, idx, lambda e: e * s, POINTS,
                                                 update_shape=(1,)))(x, np.float32(2))
    with pytest.raises(TypeError, match="scatter_apply"):
        lax.scatter_apply(x, idx, lambda e: e.astype(np.int32), POINTS, update_shape=(1,))
    with pytest.raises(TypeError, match="callable"):
        lax.scatter_apply(x, idx, 3, POINTS, update_shape=(1,))
    with pytest.raises(ValueError, match="scatter"):
        lax.scatter_apply(x, idx, jnp.sin, POINTS, update_shape=(2,))


def test_scatter_sub_and_apply_match_jax(jax):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    u = np.arange(18, dtype=np.float32).reshape(6, 3)
    np.testing.assert_array_equal(lax.scatter_sub(x, IDX, u, ROWS),
                                  jax.lax.scatter_sub(x, IDX, u, ROWS))
    np.testing.assert_array_equal(lax.scatter_sub(x, IDX, u, ROWS, mode="clip"),
                                  jax.lax.scatter_sub(x, IDX, u, ROWS, mode="clip"))
    ours = ember.grad(lambda a, b: (lax.scatter_sub(a, IDX, b, ROWS) ** 2).sum(),
                      argnums=(0, 1))(x, u)
    theirs = jax.grad(lambda a, b: (jax.lax.scatter_sub(a, IDX, b, ROWS) ** 2).sum(),
                      argnums=(0, 1))(x, u)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o, t)
    for mode in (None, "clip"):
        np.testing.assert_array_equal(
            lax.scatter_apply(x, IDX, lambda e: e * 2 + 1, ROWS, update_shape=(6, 3), mode=mode),
            jax.lax.scatter_apply(x, IDX, lambda e: e * 2 + 1, ROWS, update_shape=(6, 3),
                                  mode=mode))


# ---------------------------------------------------------------- split, tile, stack, ...


def test_split_primitive():
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    parts = _all_ways(lambda v: lax.split(v, (2, 0, 3), axis=1), x)
    for p, r in zip(parts, np.split(x, [2, 2], axis=1)):
        np.testing.assert_array_equal(p, r)
    assert "split[axis=1 sizes=(2, 0, 3)]" in str(ember.make_jaxpr(
        lambda v: lax.split(v, (2, 0, 3), axis=-1))(x))
    out = ember.vmap(lambda v: lax.split(v, (1, 4)), in_axes=1)(x.T)  # batch dim last
    np.testing.assert_array_equal(out[1], x[:, 1:])
    g = ember.grad(lambda v: sum((p * (i + 1)).sum() for i, p in enumerate(
        lax.split(v, (2, 3), axis=1))))(x)
    np.testing.assert_array_equal(g, [[1, 1, 2, 2, 2]] * 2)
    g = ember.grad(lambda v: lax.split(v, (2, 3), axis=1)[1].sum())(x)  # a zero cotangent
    np.testing.assert_array_equal(g, [[0, 0, 1, 1, 1]] * 2)
    with pytest.raises(ValueError, match="split"):
        lax.split(x, (1, 2))
    with pytest.raises(ValueError, match="split"):
        lax.split(x, (3, -1), axis=0)
    with pytest.raises(ValueError, match="split"):
        lax.split(x, (5,), axis=2)
    with pytest.raises(ValueError, match="split"):
        lax.split(np.float32(1), ())


def test_tile_stack_unstack():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.testing.assert_array_equal(_all_ways(lambda v: lax.tile(v, (2, 3)), x), np.tile(x, (2, 3)))
    np.testing.assert_array_equal(lax.tile(x, (0, 2)), np.tile(x, (0, 2)))
    assert lax.tile(np.float32(3), ()).shape == ()
    with pytest.raises(TypeError, match="tile"):
        lax.tile(x, (2,))
    with pytest.raises(ValueError, match="tile"):
        lax.tile(x, (-1, 1))
    g = ember.grad(lambda v: (lax.tile(v, (3,)) * np.arange(6.0)).sum())(np.ones(2, "f4"))
    np.testing.assert_array_equal(g, [0 + 2 + 4, 1 + 3 + 5])

    s = _all_ways(lambda a, b: lax.stack([a, b], axis=-1), x, -x)
    np.testing.assert_array_equal(s, np.stack([x, -x], -1))
    w = lax.stack([1.0, 2.0])
    assert w.weak_type and w.shape == (2,)
    np.testing.assert_array_equal(lax.stack(jnp.asarray(x)), x)
    with pytest.raises(TypeError, match="stack"):
        lax.stack([np.ones(2, np.float32), np.ones(2, np.int32)])
    with pytest.raises(ValueError, match="stack"):
        lax.stack([np.ones(2), np.ones(3)])
    with pytest.raises(ValueError, match="stack"):
        lax.stack([np.ones(2), np.ones(2)], axis=2)
    with pytest.raises(ValueError, match="stack"):
        lax.stack([])

    parts = _all_ways(lambda v: lax.unstack(v, axis=-1), x)
    assert isinstance(parts, tuple) and len(parts) == 3
    np.testing.assert_array_equal(parts[2], x[:, 2])
    assert lax.unstack(np.zeros((0, 3))) == ()
    with pytest.raises(ValueError, match="unstack"):
        lax.unstack(np.float32(1))
    out = ember.vmap(lambda v: lax.stack(lax.unstack(v)[::-1]))(np.arange(12).reshape(2, 3, 2))
    np.testing.assert_array_equal(out, np.arange(12).reshape(2, 3, 2)[:, ::-1])


def test_broadcast_helpers_empty_and_dtype():
    assert lax.broadcast_shapes((3, 1), (1, 4), (5, 1, 1)) == (5, 3, 4)
    assert lax.broadcast_shapes((1,), (0,)) == (0,)
    assert lax.broadcast_shapes((2, 3)) == (2, 3)
    with pytest.raises(ValueError, match="broadcast_shapes"):
        lax.broadcast_shapes((3,), (4,))
    with pytest.raises(ValueError, match="broadcast_shapes"):
        lax.broadcast_shapes()
    b = _all_ways(lambda a: lax.broadcast_like(a, np.zeros((3, 2, 4))), np.ones((2, 1), "f4"))
    assert b.shape == (3, 2, 4)
    w = lax.broadcast_like(1.0, np.zeros((2, 3), np.float32))
    assert w.shape == (2, 3) and w.weak_type
    with pytest.raises(ValueError, match="broadcast_like"):
        lax.broadcast_like(np.ones(3), np.ones((2, 4)))
    g = ember.grad(lambda a: lax.broadcast_like(a, np.zeros((2, 3))).sum())(np.ones((1, 3),
                                                                                    "f4"))
    np.testing.assert_array_equal(g, [[2, 2, 2]])

    e = _all_ways(lambda: lax.empty((2, 3), jnp.int8))
    assert e.shape == (2, 3) and e.dtype == np.int8 and not e.weak_type
    assert lax.empty(4, "float32").shape == (4,)
    assert lax.empty((1,), float).dtype == np.float32  # canonicalized (x64 off)
    with pytest.raises(TypeError, match="empty"):  # (a negative size: TypeError in lax)
        lax.empty((-1,), jnp.float32)
    with pytest.raises(TypeError, match="empty"):
        lax.empty((2,), "nope")

    assert lax.dtype(1.0) == np.float32 and lax.dtype(1) == np.int32
    assert lax.dtype(np.arange(3, dtype=np.int64)) == np.int32
    assert lax.dtype("float64") == np.float32 and lax.dtype(float) == np.float32
    assert lax.dtype(jnp.ones(2, jnp.bfloat16)) == BF16
    with pytest.raises(ValueError):
        lax.dtype(None)


def test_index_take():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    idx = (np.array([0, -1, 5], np.int32), np.array([3, -4, 9], np.int32))
    out = _all_ways(lambda v: lax.index_take(v, idx, (1, 2)), x)
    rows, cols = idx[0] % 3, idx[1] % 4
    np.testing.assert_array_equal(out, np.moveaxis(x[:, rows, cols], 1, 0))
    out = lax.index_take(x, (idx[1], idx[0]), (2, 1))  # axes in any order
    np.testing.assert_array_equal(out, np.moveaxis(x[:, rows, cols], 1, 0))
    g = ember.grad(lambda v: lax.index_take(v, (np.array([1, 1, -1]),), (0,)).sum())(
        np.ones(2, "f4"))
    np.testing.assert_array_equal(g, [0, 3])
    out = ember.vmap(lambda v: lax.index_take(v, (np.array([2, 0]),), (0,)))(x[0])
    np.testing.assert_array_equal(out, x[0][:, [2, 0]])
    with pytest.raises(ValueError, match="index_take"):
        lax.index_take(x, (idx[0],), (0, 1))
    with pytest.raises(TypeError, match="index_take"):
        lax.index_take(x, (np.array([0.5]),), (0,))


# ---------------------------------------------------------------- optimization_barrier


def test_optimization_barrier():
    tree = {"a": np.ones(2, np.float32), "b": (np.int32(3), 2.0)}
    out = lax.optimization_barrier(tree)
    assert set(out) == {"a", "b"} and out["b"][1].weak_type and out["b"][0].dtype == np.int32
    f = ember.jit(lambda x: lax.optimization_barrier((x, x * 2)))
    np.testing.assert_array_equal(f(np.float32(3))[1], 6)
    for backend in BACKENDS:
        a, b = ember.jit(lambda x: lax.optimization_barrier((x, x + 1)), backend=backend)(
            np.arange(3, dtype=np.float32))
        np.testing.assert_array_equal(b, [1, 2, 3])
    jaxpr = str(ember.make_jaxpr(lambda x: lax.optimization_barrier((x, x * 2)))(1.0))
    assert "c:f32[] d:f32[] = optimization_barrier a b" in jaxpr
    assert "optimization_barrier" in str(ember.make_jaxpr(ember.jit(
        lambda x: lax.optimization_barrier(x) * 2))(1.0))
    assert float(ember.grad(lambda x: lax.optimization_barrier((x, x * 2))[1] * x)(3.0)) == 12
    _, t = ember.jvp(lambda x: lax.optimization_barrier([x, 5.0]), (2.0,), (1.0,))
    assert float(t[0]) == 1 and float(t[1]) == 0
    out = ember.vmap(lambda x, y: lax.optimization_barrier((x, y)), in_axes=(1, None))(
        np.ones((2, 3)), 4.0)
    assert out[0].shape == (3, 2) and out[1].shape == (3,)
    assert lax.optimization_barrier(()) == ()
    with pytest.raises(TypeError, match="optimization_barrier"):
        lax.optimization_barrier(("x",))


def test_optimization_barrier_matches_jax(jax):
    args = (np.float32(3), np.ones(2, np.int32))
    ours = lax.optimization_barrier((args[0], 2.0, args[1]))
    theirs = jax.lax.optimization_barrier((args[0], 2.0, args[1]))
    for o, t in zip(ours, theirs):
        np.testing.assert_array_equal(o, t)
        assert o.dtype == t.dtype and o.weak_type == t.weak_type
    g_ours = ember.grad(lambda x: lax.optimization_barrier(x * x) * x)(3.0)
    g_theirs = jax.grad(lambda x: jax.lax.optimization_barrier(x * x) * x)(3.0)
    assert float(g_ours) == float(g_theirs)


# ---------------------------------------------------------------- approx_max_k / approx_min_k


def test_approx_top_k_exact():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 50)).astype(np.float32)
    v, i = _all_ways(lambda a: lax.approx_max_k(a, 5), x)
    order = np.argsort(-x, axis=1)[:, :5]
    np.testing.assert_array_equal(i, order)
    np.testing.assert_array_equal(v, np.take_along_axis(x, order, 1))
    v, i = _all_ways(lambda a: lax.approx_min_k(a, 4, reduction_dimension=0), x.T)
    order = np.argsort(x.T, axis=0)[:4]
    np.testing.assert_array_equal(i, order)
    np.testing.assert_array_equal(v, np.take_along_axis(x.T, order, 0))
    nan = np.array([3.0, np.nan, -1.0, 2.0], np.float32)
    np.testing.assert_array_equal(lax.approx_min_k(nan, 3)[0], [-1.0, 2.0, 3.0])  # NaN last
    v, _ = lax.approx_max_k(nan, 2)
    assert np.isnan(v[0]) and v[1] == 3.0  # NaN first, as in top_k
    out = lax.approx_max_k(np.ones(3, BF16), 1)
    assert isinstance(out, list) and out[0].dtype == BF16 and out[1].dtype == np.int32


def test_approx_top_k_candidate_counts():
    x = np.random.default_rng(1).random((2, 1000)).astype(np.float32)
    v, i = lax.approx_max_k(x, 10, aggregate_to_topk=False)
    assert v.shape == i.shape == (2, 256)  # XLA's candidate count for this size and recall
    np.testing.assert_array_equal(v, -np.sort(-x, axis=1)[:, :256])
    assert lax.approx_max_k(x, 10, recall_target=0.99, aggregate_to_topk=False)[0].shape == \
        (2, 1000)
    assert lax.approx_max_k(x[0], 1, aggregate_to_topk=False)[0].shape == (1000,)
    assert lax.approx_min_k(x, 1, aggregate_to_topk=False)[0].shape == (2, 128)
    assert lax.approx_max_k(x, 10, reduction_input_size_override=100000,
                            aggregate_to_topk=False)[0].shape == (2, 128)


def test_approx_top_k_vmap_grad_and_errors():
    x = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, -1.0]], np.float32)
    v, i = ember.vmap(lambda a: lax.approx_min_k(a, 2))(x)
    np.testing.assert_array_equal(v, [[1, 2], [-1, 0]])
    v, i = ember.vmap(lambda a: lax.approx_max_k(a, 1), in_axes=1)(x)
    np.testing.assert_array_equal(v, [[3], [5], [2]])
    g = ember.grad(lambda a: lax.approx_min_k(a, 2)[0].sum())(x[0])
    np.testing.assert_array_equal(g, [0, 1, 1])
    g = ember.grad(lambda a: (lax.approx_max_k(a, 2)[0] * np.array([2.0, 1.0])).sum())(x[1])
    np.testing.assert_array_equal(g, [1, 2, 0])
    for kwargs, err in ((dict(k=4), ValueError), (dict(k=0), ValueError),
                        (dict(k=1, reduction_dimension=2), ValueError),
                        (dict(k=1, recall_target=1.5), ValueError),
                        (dict(k=1, recall_target=0.0), ValueError),
                        (dict(k=2.0), TypeError)):
        with pytest.raises(err, match="approx_max_k"):
            lax.approx_max_k(x, **kwargs)
    with pytest.raises(ValueError, match="floating"):
        lax.approx_min_k(np.ones(3, np.int32), 1)
    with pytest.raises(TypeError, match="dimension"):
        lax.approx_max_k(np.float32(1), 1)
    with pytest.raises(ValueError, match="reduction_input_size_override"):
        lax.approx_max_k(np.ones((2, 300), np.float32), 2, reduction_input_size_override=10,
                         aggregate_to_topk=False)


def test_approx_top_k_matches_jax(jax):
    x = np.random.default_rng(2).normal(size=(2, 300)).astype(np.float32)
    for fn, jfn in ((lax.approx_max_k, jax.lax.approx_max_k),
                    (lax.approx_min_k, jax.lax.approx_min_k)):
        for kwargs in (dict(k=3), dict(k=2, reduction_dimension=0),
                       dict(k=5, aggregate_to_topk=False),
                       dict(k=1, recall_target=0.5, aggregate_to_topk=False)):
            ours, theirs = fn(x, **kwargs), jfn(x, **kwargs)
            assert isinstance(ours, list) and isinstance(theirs, list)
            for o, t in zip(ours, theirs):
                assert o.shape == t.shape and o.dtype == t.dtype
                np.testing.assert_array_equal(o, t)
    g_ours = ember.grad(lambda a: lax.approx_max_k(a, 3)[0].sum())(x)
    g_theirs = jax.grad(lambda a: jax.lax.approx_max_k(a, 3)[0].sum())(x)
    np.testing.assert_array_equal(g_ours, g_theirs)


# ---------------------------------------------------------------- associative_scan


def _affine(a, b):
    # (m, c) maps v -> m * v + c; applying a then b. Associative, not commutative.
    return {"m": a["m"] * b["m"], "c": a["c"] * b["m"] + b["c"]}


def _affine_ref(m, c, reverse=False):
    out_m, out_c = np.empty_like(m), np.empty_like(c)
    order = range(len(m) - 1, -1, -1) if reverse else range(len(m))
    am, ac = None, None
    for i in order:
        # reverse: the scan of the reversed sequence, reversed (later elements on the left)
        if am is None:
            am, ac = m[i], c[i]
        else:
            am, ac = am * m[i], ac * m[i] + c[i]
        out_m[i], out_c[i] = am, ac
    return out_m, out_c


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17])
def test_associative_scan_lengths(n):
    x = np.arange(1, n + 1, dtype=np.int32)
    np.testing.assert_array_equal(lax.associative_scan(lax.add, x), np.cumsum(x))
    np.testing.assert_array_equal(lax.associative_scan(lax.add, x, reverse=True),
                                  np.cumsum(x[::-1])[::-1])
    rng = np.random.default_rng(n)
    m = rng.uniform(0.5, 1.5, n).astype(np.float64)
    c = rng.normal(size=n)
    out = lax.associative_scan(_affine, {"m": m.astype("f4"), "c": c.astype("f4")})
    ref_m, ref_c = _affine_ref(m, c)
    np.testing.assert_allclose(out["m"], ref_m, rtol=1e-5)
    np.testing.assert_allclose(out["c"], ref_c, rtol=1e-4, atol=1e-5)


def test_associative_scan_axes_reverse_jit_vmap_grad():
    x = np.random.default_rng(3).uniform(0.5, 1.5, (3, 6)).astype(np.float32)
    out = _all_ways(lambda a: lax.associative_scan(lax.mul, a, axis=1), x)
    np.testing.assert_allclose(out, np.cumprod(x, axis=1), rtol=1e-6)
    out = _all_ways(lambda a: lax.associative_scan(lax.max, a, reverse=True, axis=-2), x)
    np.testing.assert_array_equal(out, np.maximum.accumulate(x[::-1], axis=0)[::-1])
    m, c = _affine_ref(x[0].astype(np.float64), x[1].astype(np.float64), reverse=True)
    out = lax.associative_scan(_affine, {"m": x[0], "c": x[1]}, reverse=True)
    np.testing.assert_allclose(out["m"], m, rtol=1e-5)
    np.testing.assert_allclose(out["c"], c, rtol=1e-5)
    out = ember.vmap(lambda a: lax.associative_scan(lax.add, a))(x)
    np.testing.assert_allclose(out, np.cumsum(x, axis=1), rtol=1e-6)
    g = ember.grad(lambda a: lax.associative_scan(lax.add, a).sum())(np.ones(5, "f4"))
    np.testing.assert_array_equal(g, [5, 4, 3, 2, 1])
    g = ember.grad(lambda a: lax.associative_scan(lax.mul, a)[-1])(x[0])
    np.testing.assert_allclose(g, np.prod(x[0]) / x[0], rtol=1e-5)
    b = lax.associative_scan(lax.bitwise_or, np.array([False, True, False]))
    np.testing.assert_array_equal(b, [False, True, True])


def test_associative_scan_errors():
    with pytest.raises(ValueError, match="associative_scan"):
        lax.associative_scan(lax.add, (np.ones(3), np.ones(4)))
    with pytest.raises(ValueError, match="associative_scan"):
        lax.associative_scan(lax.add, np.float32(1))
    with pytest.raises(ValueError, match="associative_scan"):
        lax.associative_scan(lax.add, np.ones(3), axis=1)
    with pytest.raises(ValueError, match="associative_scan"):
        lax.associative_scan(lax.add, ())
    with pytest.raises(TypeError, match="associative_scan"):
        lax.associative_scan(lambda a, b: (a, b), np.ones(3))
    with pytest.raises(TypeError, match="callable"):
        lax.associative_scan(None, np.ones(3))


def test_associative_scan_matches_jax(jax):
    x = np.random.default_rng(4).uniform(0.5, 1.5, (2, 7)).astype(np.float32)
    # (JAX runs jitted here: eagerly it compiles each of the scan's many small ops.)
    for fn, jfn, kwargs in ((lax.add, jax.lax.add, dict(axis=1, reverse=True)),
                            (lax.mul, jax.lax.mul, dict())):
        np.testing.assert_allclose(
            lax.associative_scan(fn, x, **kwargs),
            jax.jit(lambda a, jfn=jfn, kw=kwargs: jax.lax.associative_scan(jfn, a, **kw))(x),
            rtol=1e-6)
    tree = {"m": x[0], "c": x[1]}
    ours = lax.associative_scan(_affine, tree, reverse=True)
    theirs = jax.jit(lambda t: jax.lax.associative_scan(_affine, t, reverse=True))(tree)
    for k in ("m", "c"):
        np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-6)
    g_ours = ember.grad(lambda a: lax.associative_scan(lax.mul, a).sum())(x[0])
    g_theirs = jax.jit(jax.grad(lambda a: jax.lax.associative_scan(jax.lax.mul, a).sum()))(
        x[0])
    np.testing.assert_allclose(g_ours, g_theirs, rtol=1e-5)


def test_shape_helpers_match_jax(jax):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    pairs = [
        (lambda L: L.split(x, (1, 0, 3), axis=1)), (lambda L: L.tile(x, (2, 1))),
        (lambda L: L.stack([x, x], axis=1)), (lambda L: L.unstack(x, axis=1)),
        (lambda L: L.broadcast_like(x[:1], np.zeros((2, 3, 4)))),
        (lambda L: L.index_take(x, (np.array([2, -1, 7]),), (1,))),
        (lambda L: L.empty((2, 3), np.int32)), (lambda L: L.stack([1.0, 2.0])),
    ]
    for make in pairs:
        ours, theirs = make(lax), make(jax.lax)
        assert isinstance(ours, list) == isinstance(theirs, list)
        assert isinstance(ours, tuple) == isinstance(theirs, tuple)
        ours = ours if isinstance(ours, (list, tuple)) else [ours]
        theirs = theirs if isinstance(theirs, (list, tuple)) else [theirs]
        for o, t in zip(ours, theirs):
            assert (o.shape, o.dtype, o.weak_type) == (t.shape, t.dtype, t.weak_type)
            np.testing.assert_array_equal(o, t)
    assert lax.broadcast_shapes((3, 1), (1, 4), (5, 1, 1)) == \
        jax.lax.broadcast_shapes((3, 1), (1, 4), (5, 1, 1))
    for v in (1.0, 1, True, np.arange(2), "float32", np.int8):
        assert lax.dtype(v) == jax.lax.dtype(v)
    g_ours = ember.grad(lambda a: (lax.split(a, (1, 3), axis=1)[1] ** 2).sum())(x)
    g_theirs = jax.grad(lambda a: (jax.lax.split(a, (1, 3), axis=1)[1] ** 2).sum())(x)
    np.testing.assert_array_equal(g_ours, g_theirs)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint32])
def test_select_n_takes_any_integer_which(dtype):
    # (JAX accepts them; ember converts them to int32.)
    which = np.array([0, 2, 1, 2], dtype)
    cases = [np.full(4, float(k), np.float32) for k in range(3)]
    for f in (lax.select_n, ember.jit(lax.select_n)):
        np.testing.assert_array_equal(np.asarray(f(which, *cases)), [0.0, 2.0, 1.0, 2.0])
