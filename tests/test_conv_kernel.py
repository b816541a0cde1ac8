"""The NumPy/BLAS convolution kernel's paths (``ember/lax/convolution.py``): the shifted-rows
GEMM per tap (forward convolutions, input gradients), the threaded im2col chunks and the
stride-1 depthwise kernels (forward and input gradient, kernel gradient), against a float64
reference by taps and against the im2col path forced on, over layouts, batch and channel
counts, kernels, strides, dilations, padding modes and feature groups."""

import numpy as np
import pytest

import ember
from ember import lax
from ember.lax import _lapack
from ember.lax import convolution as C

NHWC = ("NHWC", "HWIO", "NHWC")


def ref_conv(x, w, strides, pads, rhs_dil=(1, 1), groups=1):
    """NHWC/HWIO convolution in float64: a sum over taps of shifted, strided slices."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    xp = np.pad(x, [(0, 0), *pads, (0, 0)])
    kh, kw, cin, cout = w.shape
    ho = (xp.shape[1] - (kh - 1) * rhs_dil[0] - 1) // strides[0] + 1
    wo = (xp.shape[2] - (kw - 1) * rhs_dil[1] - 1) // strides[1] + 1
    out = np.zeros((x.shape[0], ho, wo, cout))
    og = cout // groups
    for i in range(kh):
        for j in range(kw):
            h0, w0 = i * rhs_dil[0], j * rhs_dil[1]
            sl = xp[:, h0:h0 + (ho - 1) * strides[0] + 1:strides[0],
                    w0:w0 + (wo - 1) * strides[1] + 1:strides[1]]
            for g in range(groups):
                out[..., g * og:(g + 1) * og] += sl[..., g * cin:(g + 1) * cin] @ \
                    w[i, j, :, g * og:(g + 1) * og]
    return out


def ref_grads(x, w, ct, strides, pads, rhs_dil=(1, 1), groups=1):
    """Gradients ``(dx, dw)`` of ``sum(conv(x, w) * ct)`` in float64, tap by tap: each tap's
    slice of the padded input meets ``ct`` (dw) and scatters ``ct @ w.T`` back (dx)."""
    x, w, ct = (np.asarray(a, np.float64) for a in (x, w, ct))
    xp = np.pad(x, [(0, 0), *pads, (0, 0)])
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(w)
    kh, kw, cin, cout = w.shape
    ho, wo = ct.shape[1:3]
    og = cout // groups
    for i in range(kh):
        for j in range(kw):
            h0, w0 = i * rhs_dil[0], j * rhs_dil[1]
            idx = (slice(None), slice(h0, h0 + (ho - 1) * strides[0] + 1, strides[0]),
                   slice(w0, w0 + (wo - 1) * strides[1] + 1, strides[1]))
            for g in range(groups):
                ci, co = slice(g * cin, (g + 1) * cin), slice(g * og, (g + 1) * og)
                dw[i, j, :, co] += np.einsum("nhwc,nhwo->co", xp[idx][..., ci], ct[..., co])
                dxp[idx + (ci,)] += ct[..., co] @ w[i, j, :, co].T
    h, wd = x.shape[1:3]
    return dxp[:, pads[0][0]:pads[0][0] + h, pads[1][0]:pads[1][0] + wd], dw


def _pads(padding, x_shape, w_shape, strides, rhs_dil):
    if not isinstance(padding, str):
        return list(padding)
    ksp = [(k - 1) * d + 1 for k, d in zip(w_shape[:2], rhs_dil)]
    return lax.padtype_to_pads(x_shape[1:3], ksp, strides, padding)


@pytest.fixture
def spy(monkeypatch):
    """Counts the calls of the fast kernels that produced a result."""
    hits = {"shifted": 0, "depthwise": 0, "depthwise_kernel_grad": 0, "direct": 0}
    for name in hits:
        fn = getattr(C, "_conv_" + name)

        def wrapped(*a, _fn=fn, _name=name, **k):
            res = _fn(*a, **k)
            hits[_name] += res is not None
            return res
        monkeypatch.setattr(C, "_conv_" + name, wrapped)
    return hits


# (batch, H, W, C_in, C_out, kernel, strides, padding, rhs dilation, groups, fast path used
# by the forward conv: "shifted", "depthwise", "direct" or None for im2col)
CASES = [
    (2, 12, 11, 80, 32, (3, 3), (1, 1), "SAME", (1, 1), 1, "shifted"),
    (1, 9, 9, 64, 8, (1, 1), (1, 1), "VALID", (1, 1), 1, "direct"),
    (3, 10, 9, 96, 16, (3, 2), (1, 1), [(2, 1), (0, 2)], (2, 1), 1, "shifted"),
    (2, 12, 11, 32, 32, (3, 3), (1, 1), "SAME", (1, 1), 1, "direct"),  # few features
    (2, 14, 14, 17, 5, (7, 7), (1, 1), "SAME", (1, 1), 1, None),  # 5 outputs: no vectors
    (32, 6, 6, 3, 8, (3, 3), (1, 1), "SAME_LOWER", (1, 1), 1, "direct"),  # few features
    (2, 15, 13, 3, 16, (7, 7), (2, 2), "SAME", (1, 1), 1, "direct"),  # strided
    (2, 16, 16, 256, 8, (3, 3), (2, 1), "VALID", (1, 1), 1, None),
    (2, 12, 12, 16, 16, (3, 3), (1, 1), "SAME", (1, 1), 16, "depthwise"),
    (2, 12, 12, 8, 24, (3, 3), (1, 1), "SAME", (1, 2), 8, "depthwise"),  # multiplier 3
    (2, 12, 12, 32, 16, (3, 3), (1, 1), "SAME", (1, 1), 4, "direct"),  # grouped, 8 per group
    (2, 10, 10, 160, 32, (3, 3), (1, 1), "SAME", (1, 1), 2, "shifted"),  # 80 per group
    (2, 11, 11, 64, 64, (3, 3), (2, 2), "SAME", (1, 1), 32, None),  # many small groups
]


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_conv_paths_match_reference_and_im2col(case, spy, monkeypatch):
    # (Grouped convolutions of a few groups run the ungrouped paths per group.)
    n, h, wd, cin, cout, ks, strides, padding, rd, groups, path = case
    rng = np.random.RandomState(sum(ks) + cin)
    x = rng.randn(n, h, wd, cin).astype(np.float32)
    w = rng.randn(*ks, cin // groups, cout).astype(np.float32)
    pads = _pads(padding, x.shape, w.shape, strides, rd)

    def conv(x, w):
        return lax.conv_general_dilated(x, w, strides, padding, rhs_dilation=rd,
                                        dimension_numbers=NHWC, feature_group_count=groups)

    out = np.asarray(conv(x, w))
    used = [name for name in ("shifted", "depthwise", "direct") if spy[name]]
    assert used == ([path] if path else [])
    ref = ref_conv(x, w, strides, pads, rd, groups)
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5 * np.abs(ref).max())
    ct = rng.randn(*out.shape).astype(np.float32)
    _, vjp = ember.vjp(conv, x, w)
    dx, dw = (np.asarray(g) for g in vjp(ct))
    assert spy["depthwise_kernel_grad"] == int(path == "depthwise")
    rdx, rdw = ref_grads(x, w, ct, strides, pads, rd, groups)
    np.testing.assert_allclose(dx, rdx, rtol=2e-5, atol=2e-5 * np.abs(rdx).max())
    np.testing.assert_allclose(dw, rdw, rtol=2e-5, atol=2e-5 * np.abs(rdw).max())
    # The im2col path (one thread, large chunks: the previous kernel) agrees.
    monkeypatch.setattr(C, "_FAST_PATHS", False)
    monkeypatch.setattr(C, "_threads", lambda: 1)
    monkeypatch.setattr(C, "_CHUNK_ELEMENTS", 1 << 23)
    old = np.asarray(conv(x, w))
    np.testing.assert_allclose(out, old, rtol=1e-5, atol=1e-5 * np.abs(old).max())
    odx, odw = (np.asarray(g) for g in ember.vjp(conv, x, w)[1](ct))
    np.testing.assert_allclose(dx, odx, rtol=1e-5, atol=1e-5 * np.abs(odx).max())
    np.testing.assert_allclose(dw, odw, rtol=1e-5, atol=1e-5 * np.abs(odw).max())


def test_input_gradient_takes_the_shifted_path(spy):
    # Stride-1 3x3: the forward conv and the input gradient take the GEMMs per tap; the
    # kernel gradient (a long contraction with a small result) stays with im2col.
    # (80 features: more than the direct loop takes)
    rng = np.random.RandomState(0)
    x = rng.randn(4, 20, 20, 80).astype(np.float32)
    w = rng.randn(3, 3, 80, 80).astype(np.float32)
    conv = ember.jit(lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                                           dimension_numbers=NHWC))
    ct = rng.randn(4, 20, 20, 80).astype(np.float32)
    dx, dw = (np.asarray(g) for g in ember.vjp(conv, x, w)[1](ct))
    assert spy["shifted"] == 2
    rdx, rdw = ref_grads(x, w, ct, (1, 1), [(1, 1), (1, 1)])
    np.testing.assert_allclose(dx, rdx, rtol=2e-5, atol=2e-5 * np.abs(rdx).max())
    np.testing.assert_allclose(dw, rdw, rtol=2e-5, atol=2e-5 * np.abs(rdw).max())


@pytest.mark.parametrize("dn", [NHWC, ("NCHW", "OIHW", "NCHW")])
def test_layouts_threads_and_chunks(dn, monkeypatch):
    # NCHW operands, many small chunks over two threads (ragged last chunk), the im2col
    # path, and the BLAS binding turned off: all the same values.
    rng = np.random.RandomState(1)
    x = rng.randn(3, 11, 10, 64).astype(np.float32)
    w = rng.randn(3, 3, 64, 20).astype(np.float32)
    ref = ref_conv(x, w, (1, 1), [(1, 1), (1, 1)])
    if dn[0] == "NCHW":
        x, w = x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1)
        ref = ref.transpose(0, 3, 1, 2)

    def run():
        return np.asarray(lax.conv_general_dilated(np.ascontiguousarray(x),
                                                   np.ascontiguousarray(w), (1, 1), "SAME",
                                                   dimension_numbers=dn))

    tol = dict(rtol=2e-5, atol=2e-5 * np.abs(ref).max())
    np.testing.assert_allclose(run(), ref, **tol)
    monkeypatch.setattr(C, "_threads", lambda: 2)
    monkeypatch.setattr(C, "_CHUNK_ELEMENTS", 1000)
    monkeypatch.setattr(C, "_TAPS_BLOCK_ELEMENTS", 1000)
    np.testing.assert_allclose(run(), ref, **tol)
    monkeypatch.setattr(C, "_FAST_PATHS", False)  # the threaded im2col chunks
    np.testing.assert_allclose(run(), ref, **tol)
    monkeypatch.setattr(C, "_FAST_PATHS", True)
    _lapack.disable()
    try:
        assert _lapack.gemm_fn(np.float32) is None
        np.testing.assert_allclose(run(), ref, **tol)
    finally:
        _lapack.disable(False)


def test_integer_and_complex_operands():
    # No BLAS for integers (im2col in NumPy) and complex GEMMs on the shifted path.
    rng = np.random.RandomState(2)
    x = rng.randint(-3, 4, (2, 9, 9, 64)).astype(np.int32)
    w = rng.randint(-3, 4, (3, 3, 64, 4)).astype(np.int32)
    out = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=NHWC)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out),
                                  ref_conv(x, w, (1, 1), [(1, 1), (1, 1)]).astype(np.int32))
    xc = (rng.randn(2, 9, 9, 64) + 1j * rng.randn(2, 9, 9, 64)).astype(np.complex64)
    wc = (rng.randn(3, 3, 64, 4) + 1j * rng.randn(3, 3, 64, 4)).astype(np.complex64)
    out = np.asarray(lax.conv_general_dilated(xc, wc, (1, 1), "SAME",
                                              dimension_numbers=NHWC))
    ref = sum(ref_conv(a, b, (1, 1), [(1, 1), (1, 1)]) * s
              for a, b, s in ((xc.real, wc.real, 1), (xc.imag, wc.imag, -1),
                              (xc.real, wc.imag, 1j), (xc.imag, wc.real, 1j)))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


@pytest.mark.parametrize("dn,shape,ks,mult", [
    (("NCHW", "OIHW", "NCHW"), (2, 16, 10, 9), (3, 3), 1),
    (("NWC", "WIO", "NWC"), (3, 20, 8), (5,), 2)])
def test_depthwise_layouts_match_jax(jax, spy, dn, shape, ks, mult):
    # The depthwise kernels in other layouts and ranks, with gradients, against JAX (with a
    # channel multiplier the input gradient has two features per group: not depthwise).
    rng = np.random.RandomState(3)
    c = shape[dn[0].index("C")]
    x = rng.randn(*shape).astype(np.float32)
    sizes = dict(zip([ch for ch in dn[1] if ch not in "IO"], ks), I=1, O=mult * c)
    wshape = tuple(sizes[ch] for ch in dn[1])
    w = rng.randn(*wshape).astype(np.float32)

    def loss(lx):
        return lambda x, w: (lx.conv_general_dilated(x, w, (1,) * len(ks), "SAME",
                                                     dimension_numbers=dn,
                                                     feature_group_count=c) ** 3).sum()

    got = ember.value_and_grad(loss(lax), argnums=(0, 1))(x, w)
    want = jax.value_and_grad(loss(jax.lax), argnums=(0, 1))(x, w)
    assert spy["depthwise"] == 1 + (mult == 1) and spy["depthwise_kernel_grad"] == 1
    for g, r in zip([got[0], *got[1]], [want[0], *want[1]]):
        r = np.asarray(r)
        np.testing.assert_allclose(np.asarray(g), r, rtol=2e-4, atol=2e-4 * np.abs(r).max())


def test_forked_child_runs_threaded_chunks(monkeypatch):
    """The thread pool's threads stay in the parent: a forked child makes its own pool
    instead of queueing its chunks on the parent's (idle-counted, absent) threads."""
    import os
    monkeypatch.setattr(C, "_threads", lambda: 2)
    monkeypatch.setattr(C, "_CHUNK_ELEMENTS", 1000)
    monkeypatch.setattr(C, "_FAST_PATHS", False)  # the threaded im2col chunks
    rng = np.random.RandomState(2)
    x = rng.randn(2, 9, 9, 8).astype(np.float32)
    w = rng.randn(3, 3, 8, 4).astype(np.float32)
    expected = np.asarray(lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                                   dimension_numbers=NHWC))
    from ember import _threads
    assert _threads._POOL is not None  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        try:
            import signal
            signal.alarm(20)  # (a hang fails the test instead of blocking it)
            got = np.asarray(lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                                      dimension_numbers=NHWC))
            os._exit(0 if np.array_equal(got, expected) else 3)
        finally:
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    np.testing.assert_allclose(expected, ref_conv(x, w, (1, 1), [(1, 1), (1, 1)]),
                               rtol=2e-5, atol=1e-4)
