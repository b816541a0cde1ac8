"""lax convolutions against JAX (values, gradients, vmap, jit on both backends) and the
slow-loop reference of the op records."""

import numpy as np
import pytest

import ember
from ember import lax
from ember.test_util import check_grads
from tests.op_records.conv import conv_ref

CASES = [
    dict(ls=(2, 3, 7), rs=(4, 3, 3), strides=(1,), padding="SAME"),
    dict(ls=(2, 3, 9, 8), rs=(4, 3, 3, 2), strides=(2, 1), padding="VALID",
         rhs_dilation=(1, 2)),
    dict(ls=(2, 4, 9, 8), rs=(6, 2, 3, 2), strides=(2, 3), padding=[(1, 2), (-1, 3)],
         lhs_dilation=(2, 1), feature_group_count=2),
    dict(ls=(6, 4, 9), rs=(6, 4, 2), strides=(1,), padding=[(1, 0)], batch_group_count=3),
    dict(ls=(2, 9, 8, 3), rs=(3, 2, 3, 5), strides=(1, 1), padding="SAME_LOWER",
         dimension_numbers=("NHWC", "HWIO", "NHWC")),
    dict(ls=(2, 9, 8, 3), rs=(3, 2, 1, 6), strides=(2, 2), padding="SAME",
         dimension_numbers=("NHWC", "HWIO", "NCHW"), feature_group_count=3),
]


def _split(case):
    c = dict(case)
    return c.pop("ls"), c.pop("rs"), c.pop("strides"), c.pop("padding"), c


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_conv_matches_jax(jax, case):
    ls, rs, st, pd, kw = _split(case)
    rng = np.random.RandomState(0)
    x, w = rng.randn(*ls).astype(np.float32), rng.randn(*rs).astype(np.float32)

    def f(lx):
        return lambda a, b: lx.conv_general_dilated(a, b, st, pd, **kw)

    ref = np.asarray(jax.jit(f(jax.lax))(x, w))
    np.testing.assert_allclose(np.asarray(f(lax)(x, w)), ref, rtol=1e-5, atol=1e-5)
    for backend in ("cpu", "interpreter"):
        out = ember.jit(f(lax), backend=backend)(x, w)
        np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-5)

    def loss(lx, np_):
        return lambda a, b: (f(lx)(a, b) ** 2).sum() + np_.sin(f(lx)(a, b)).sum()

    g = ember.grad(loss(lax, ember.numpy), argnums=(0, 1))(x, w)
    jg = jax.jit(jax.grad(loss(jax.lax, jax.numpy), argnums=(0, 1)))(x, w)
    for a, b in zip(g, jg):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=2e-4)
    vx, vw = rng.randn(3, *ls).astype(np.float32), rng.randn(3, *rs).astype(np.float32)
    for axes in ((0, 0), (0, None), (None, 0)):
        a, b = (vx if axes[0] == 0 else x), (vw if axes[1] == 0 else w)
        np.testing.assert_allclose(np.asarray(ember.vmap(f(lax), axes)(a, b)),
                                   np.asarray(jax.jit(jax.vmap(f(jax.lax), axes))(a, b)),
                                   rtol=1e-5, atol=1e-5)


def test_conv_check_grads_order2():
    rng = np.random.RandomState(1)
    x, w = rng.randn(1, 4, 5, 4), rng.randn(4, 2, 2, 3)
    f = lambda a, b: lax.conv_general_dilated(  # noqa: E731
        a, b, (2, 1), [(1, 1), (0, 1)], rhs_dilation=(1, 2), feature_group_count=2)
    check_grads(f, (x.astype(np.float32), w.astype(np.float32)), order=2,
                atol=5e-2, rtol=5e-2)


def test_conv_reference_loop():
    rng = np.random.RandomState(2)
    x, w = rng.randn(2, 4, 6, 5).astype(np.float32), rng.randn(6, 2, 3, 2).astype(np.float32)
    out = lax.conv_general_dilated(x, w, (2, 1), [(2, -1), (1, 1)], lhs_dilation=(1, 2),
                                   rhs_dilation=(2, 1), feature_group_count=2)
    ref = conv_ref(x, w, (2, 1), [(2, -1), (1, 1)], (1, 2), (2, 1), groups=2)
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("padding", ["SAME", "VALID", [(2, 1)]])
@pytest.mark.parametrize("transpose_kernel", [False, True])
def test_conv_transpose_matches_jax(jax, padding, transpose_kernel):
    rng = np.random.RandomState(3)
    x = rng.randn(2, 5, 3).astype(np.float32)
    w = rng.randn(3, 3, 3).astype(np.float32)
    kw = dict(rhs_dilation=(2,), transpose_kernel=transpose_kernel)
    out = lax.conv_transpose(x, w, (2,), padding, **kw)
    ref = jax.lax.conv_transpose(x, w, (2,), padding, **kw)
    np.testing.assert_allclose(np.asarray(out), np.asarray(ref), rtol=1e-5, atol=1e-5)


def test_conv_patches_and_dimension_numbers(jax):
    rng = np.random.RandomState(4)
    x = rng.randn(2, 6, 5, 3).astype(np.float32)
    dn = ("NHWC", "OIHW", "NHWC")
    out = lax.conv_general_dilated_patches(x, (2, 3), (1, 2), "SAME", dimension_numbers=dn)
    ref = jax.lax.conv_general_dilated_patches(x, (2, 3), (1, 2), "SAME",
                                               dimension_numbers=dn)
    np.testing.assert_allclose(np.asarray(out), np.asarray(ref), rtol=1e-6)
    for spec in [("NHWC", "HWIO", "NHWC"), ("NCHW", "OIHW", "NCHW"), ("HNCW", "WHOI", "CWNH")]:
        got = lax.conv_dimension_numbers((1,) * 4, (1,) * 4, spec)
        want = jax.lax.conv_dimension_numbers((1,) * 4, (1,) * 4, spec)
        assert tuple(got) == tuple(tuple(s) for s in want)
    for args in [((7, 6), (3, 2), (2, 3), "SAME"), ((4, 5), (3, 2), (1, 1), "SAME_LOWER"),
                 ((4,), (5,), (2,), "VALID")]:
        assert lax.padtype_to_pads(*args) == [tuple(p) for p in jax.lax.padtype_to_pads(*args)]


def test_conv_dtypes_and_weak_types(jax):
    x = np.arange(10, dtype=np.int32).reshape(1, 2, 5)
    w = np.array([[[1, -1], [2, 0]]], np.int32)
    np.testing.assert_array_equal(np.asarray(lax.conv(x, w, (1,), "VALID")),
                                  np.asarray(jax.lax.conv(x, w, (1,), "VALID")))
    xb = x.astype(np.float16)
    out = lax.conv(xb, w.astype(np.float16), (1,), "SAME", preferred_element_type=np.float32)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), np.asarray(jax.lax.conv(
        xb, w.astype(np.float16), (1,), "SAME", preferred_element_type=np.float32)))


@pytest.mark.parametrize("call, err, msg", [
    (lambda: lax.conv(np.ones((1, 2, 5), np.float32), np.ones((3, 2, 2), np.float16), (1,),
                      "VALID"), TypeError, "same dtypes"),
    (lambda: lax.conv(np.ones((1, 3, 5)), np.ones((3, 2, 2)), (1,), "VALID"), ValueError,
     "rhs input feature"),
    (lambda: lax.conv_general_dilated(np.ones((1, 4, 5)), np.ones((3, 2, 2)), (1,), "VALID",
                                      feature_group_count=2), ValueError, "multiple of"),
    (lambda: lax.conv(np.ones((1, 4, 5)), np.ones((3, 4, 2)), (1, 1), "VALID"), ValueError,
     "window_strides"),
    (lambda: lax.conv(np.ones((1, 4, 5)), np.ones((3, 4, 2)), (1,), "FOO"), ValueError,
     "padding"),
    (lambda: lax.conv_general_dilated(np.ones((4, 4, 5)), np.ones((3, 4, 2)), (1,), "VALID",
                                      batch_group_count=3), ValueError, "batch_group_count"),
    (lambda: lax.conv_general_dilated(np.ones((4, 4, 5)), np.ones((3, 4, 2)), (1,),
                                      [(1, 2), (3, 4)]), TypeError, "explicit pads"),
    (lambda: lax.conv(np.ones((4, 4, 5)), np.ones((3, 4, 2, 3)), (1,), "VALID"), TypeError,
     "ndim"),
    (lambda: lax.conv_general_dilated(np.ones((4, 4, 5)), np.ones((3, 4, 2)), (1,), "VALID",
                                      dimension_numbers=("NCH", "OIW", "NCH")), TypeError,
     "spatial"),
])
def test_conv_errors(call, err, msg):
    with pytest.raises(err, match=msg):
        call()


# The ungrouped kernel (``_conv_flat``): the taps form (no more taps than outputs) and the
# outputs form (fewer outputs than taps), against the slow loop.
FLAT_CASES = [
    # (lhs shape NC..., rhs shape OI..., strides, pads, lhs_dilation, rhs_dilation)
    ((2, 3, 9), (4, 3, 3), (1,), [(1, 2)], (1,), (2,)),                       # taps, 1-d
    ((2, 3, 6, 7), (5, 3, 3, 2), (1, 1), [(1, 1), (0, -1)], (2, 1), (1, 2)),  # taps, 2-d
    ((1, 2, 4, 5, 3), (3, 2, 2, 2, 2), (1, 1, 1), [(1, 0), (0, 1), (1, 1)],
     (1, 1, 1), (1, 1, 1)),                                                   # taps, 3-d
    ((2, 3, 9, 8), (4, 3, 8, 6), (1, 1), [(1, 0), (0, 1)], (1, 1), (1, 1)),  # outputs
    ((3, 2, 10, 9), (2, 2, 6, 7), (2, 1), [(0, 1), (1, 1)], (1, 2), (1, 1)),  # outputs
    ((2, 3, 9, 8), (4, 3, 3, 2), (2, 3), [(1, 1), (0, 2)], (1, 1), (2, 1)),   # taps, strided
    ((2, 3, 12, 9), (4, 3, 5, 4), (3, 2), [(0, 0), (1, 0)], (1, 1), (2, 2)),  # outputs, both
]


@pytest.mark.parametrize("case", FLAT_CASES, ids=range(len(FLAT_CASES)))
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_conv_flat_kernels_match_reference(monkeypatch, case, dtype):
    from ember.lax import convolution as C

    ls, rs, strides, pads, ld, rd = case
    rng = np.random.RandomState(7)
    x, w = (rng.randint(-3, 4, s).astype(dtype) for s in (ls, rs))
    nd = len(ls)
    spec = tuple(range(nd))
    flat = C._conv_flat(x, w, strides, pads, ld, rd, spec, spec)
    assert flat is not None  # the case exercises a flat form
    ref = conv_ref(x, w, strides, pads, ld, rd)
    np.testing.assert_allclose(np.asarray(flat, np.float64), ref, rtol=1e-5)
    out = lax.conv_general_dilated(x, w, strides, pads, ld, rd)
    np.testing.assert_allclose(np.asarray(out, np.float64), ref, rtol=1e-5)
    # Channels-last layouts (the lhs transposed in memory) give the same values.
    perm = (0,) + tuple(range(2, nd)) + (1,)
    dn = ("N" + "HWD"[:nd - 2] + "C", "OI" + "HWD"[:nd - 2], "N" + "HWD"[:nd - 2] + "C")
    out = lax.conv_general_dilated(np.ascontiguousarray(x.transpose(perm)), w, strides, pads,
                                   ld, rd, dimension_numbers=dn)
    np.testing.assert_allclose(np.asarray(out, np.float64), ref.transpose(perm), rtol=1e-5)
    monkeypatch.setattr(C, "_CHUNK_ELEMENTS", 64)  # many chunks, a ragged last one
    monkeypatch.setattr(C, "_MIN_CHUNK_ROWS", 1)
    np.testing.assert_allclose(np.asarray(C._conv_flat(x, w, strides, pads, ld, rd, spec,
                                                       spec), np.float64), ref, rtol=1e-5)


def test_conv_kernel_gradient_nhwc_matches_jax(jax):
    # The CNN layer shapes of the speed benchmark, small: forward and both gradients.
    rng = np.random.RandomState(8)
    x = rng.randn(4, 9, 8, 3).astype(np.float32)
    w = rng.randn(3, 3, 3, 5).astype(np.float32)
    dn = ("NHWC", "HWIO", "NHWC")

    def loss(lx, np_):
        return lambda x, w: np_.sum(lx.conv_general_dilated(x, w, (1, 1), "SAME",
                                                            dimension_numbers=dn) ** 2)

    ref = jax.grad(loss(jax.lax, jax.numpy), argnums=(0, 1))(x, w)
    import ember.numpy as jnp
    out = ember.jit(ember.grad(loss(lax, jnp), argnums=(0, 1)))(x, w)
    for a, b in zip(out, ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=2e-4)
