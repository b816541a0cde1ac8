"""The convolution kernel's fast paths against plain references: transposed convolutions
(input dilation) split by output phase, and the gradients of strided convolutions that use
them."""

import itertools

import numpy as np
import pytest

import ember
import ember.lax.convolution as C
from ember import lax


def _reference(x, w, monkeypatch, **kw):
    """The plain im2col kernel on the zero-dilated input, in float64."""
    with monkeypatch.context() as m:
        m.setattr(C, "_FAST_PATHS", False)
        return C.conv_numpy(x.astype(np.float64), w.astype(np.float64),
                            **dict(kw, out_dtype="float64"))


def _cases():
    rng = np.random.default_rng(7)
    cases = []
    for _ in range(120):
        nsp = int(rng.integers(1, 3))
        ints = lambda lo, hi, n=nsp: tuple(int(v) for v in rng.integers(lo, hi, n))  # noqa: E731
        groups = int(rng.choice([1, 1, 2, 3]))
        feature = bool(rng.integers(0, 2))
        cases.append(dict(ns=ints(1, 8), ks=ints(1, 5), strides=ints(1, 4),
                          pads=ints(-2, 4, 2 * nsp), ld=ints(2, 5), rd=ints(1, 3),
                          gf=groups if feature else 1, gb=1 if feature else groups))
    return cases


@pytest.mark.parametrize("case", _cases())
def test_phases_match_dilated_reference(monkeypatch, case):
    rng = np.random.default_rng(0)
    nsp, gf, gb = len(case["ns"]), case["gf"], case["gb"]
    x = rng.standard_normal((2 * gb, 2 * gf) + case["ns"]).astype(np.float32)
    w = rng.standard_normal((2 * max(gf, gb), 2) + case["ks"]).astype(np.float32)
    spec = tuple(range(nsp + 2))
    kw = dict(window_strides=case["strides"], padding=case["pads"], lhs_dilation=case["ld"],
              rhs_dilation=case["rd"], lhs_spec=spec, rhs_spec=spec, out_spec=spec,
              feature_group_count=gf, batch_group_count=gb)
    want = _reference(x, w, monkeypatch, **kw)
    got = C.conv_numpy(x, w, **kw, out_dtype="float32")
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.int32, np.float16, np.bool_])
def test_phases_other_dtypes(monkeypatch, dtype):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 3, (2, 5, 6, 3)).astype(dtype)
    w = rng.integers(0, 3, (3, 2, 3, 4)).astype(dtype)
    kw = dict(window_strides=(1, 1), padding=(1, 2, 2, 1), lhs_dilation=(2, 3),
              rhs_dilation=(1, 1), lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1),
              out_spec=(0, 3, 1, 2), feature_group_count=1, batch_group_count=1)
    with monkeypatch.context() as m:
        m.setattr(C, "_FAST_PATHS", False)
        want = C.conv_numpy(x, w, **kw, out_dtype=np.dtype(dtype).name)
    got = C.conv_numpy(x, w, **kw, out_dtype=np.dtype(dtype).name)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_phases_split_the_work(monkeypatch):
    # A stride-2 2-d transposed convolution runs four convolutions of the undilated input,
    # with 4, 2, 2 and 1 of the 3x3 kernel's taps.
    calls = []
    flat = C._conv_flat

    def spy(lhs, rhs, strides, pads, lhs_dilation, *rest):
        calls.append((tuple(lhs.shape), tuple(rhs.shape), tuple(lhs_dilation)))
        return flat(lhs, rhs, strides, pads, lhs_dilation, *rest)

    monkeypatch.setattr(C, "_conv_flat", spy)
    monkeypatch.setattr(C, "_conv_scatter", lambda *a: None)  # (the phases' own test)
    x = np.ones((1, 4, 4, 8), np.float32)
    w = np.ones((3, 3, 8, 2), np.float32)
    out = np.asarray(ember.jit(lambda x, w: lax.conv_transpose(
        x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))(x, w))
    assert out.shape == (1, 8, 8, 2)
    assert sorted(c[1][:2] for c in calls) == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert all(c[0] == (1, 4, 4, 8) and c[2] == (1, 1) for c in calls)


def test_phase_taps_cover_every_tap_once():
    # Across phases, each tap that ever reads an input element is used exactly once per
    # output phase it reaches: compare with a direct enumeration of (output, tap, input).
    for n, k, s, lo, dl, dr in itertools.product((3, 5), (1, 3, 4), (1, 2, 3), (-1, 0, 2),
                                                 (2, 3), (1, 2)):
        padded = (n - 1) * dl + 1 + lo + 1
        eff = (k - 1) * dr + 1
        if padded < eff:
            continue
        out = (padded - eff) // s + 1
        phases, found = C._phase_taps(n, k, s, lo, dl, dr, out)
        got = set()
        for r, taps, (ss, plo, _, sd) in found:
            for q in range(-(-(out - r) // phases)):
                for j, t in enumerate(range(k)[taps]):
                    i = q * ss + j * sd - plo
                    if 0 <= i < n:
                        got.add((q * phases + r, t, i))
        want = {(o, t, (o * s + t * dr - lo) // dl) for o in range(out) for t in range(k)
                if (o * s + t * dr - lo) % dl == 0 and 0 <= (o * s + t * dr - lo) // dl < n}
        assert got == want, (n, k, s, lo, dl, dr)


jax = pytest.importorskip("jax")


def _layouts(nsp):
    return {1: ("NWC", "WIO", "NWC"), 2: ("NHWC", "HWIO", "NHWC")}[nsp]


@pytest.mark.parametrize("shape,kernel,strides,padding", [
    ((2, 7, 7, 16), (3, 3, 16, 8), (2, 2), "SAME"),
    ((2, 6, 5, 8), (4, 4, 8, 4), (2, 2), "VALID"),
    ((1, 5, 6, 4), (3, 2, 4, 6), (3, 2), "SAME"),
    ((3, 9, 4), (5, 4, 8), (2,), "SAME"),
    ((2, 6, 3), (2, 3, 5), (4,), ((2, 1),)),
])
@pytest.mark.parametrize("transpose_kernel", [False, True])
def test_conv_transpose_matches_jax(shape, kernel, strides, padding, transpose_kernel):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    k = rng.standard_normal(kernel).astype(np.float32)
    if transpose_kernel:  # the kernel of the forward convolution: I and O swapped
        k = np.ascontiguousarray(np.swapaxes(k, -1, -2))
    dn = _layouts(len(shape) - 2)
    got = ember.jit(lambda x, k: lax.conv_transpose(
        x, k, strides, padding, dimension_numbers=dn, transpose_kernel=transpose_kernel))(x, k)
    want = jax.jit(lambda x, k: jax.lax.conv_transpose(
        x, k, strides, padding, dimension_numbers=dn, transpose_kernel=transpose_kernel))(x, k)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)


def test_transpose_holes_are_not_multiplied():
    # Nothing reads the dilated input's holes: an infinite kernel tap over a hole gives no
    # NaN (0 * inf), as in JAX.
    x = np.ones((1, 4, 1), np.float32)
    k = np.array([1.0, np.inf, 1.0], np.float32).reshape(3, 1, 1)
    f = lambda lx: lambda x, k: lx.conv_general_dilated(x, k, (1,), ((0, 0),), (2,),  # noqa: E731
                                                         dimension_numbers=("NWC", "WIO", "NWC"))
    got = np.asarray(ember.jit(f(lax))(x, k))
    want = np.asarray(jax.jit(f(jax.lax))(x, k))
    np.testing.assert_array_equal(got, want)
    assert not np.isnan(got).any()


@pytest.mark.parametrize("shape,kernel,strides,groups", [
    ((2, 9, 9, 8), (3, 3, 8, 16), (2, 2), 1),
    ((2, 10, 7, 6), (3, 3, 3, 6), (2, 3), 2),
    ((2, 8, 8, 4), (3, 3, 1, 4), (2, 2), 4),
    ((3, 17, 8), (5, 8, 4), (3,), 1),
])
def test_strided_conv_gradients_match_jax(shape, kernel, strides, groups):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    k = rng.standard_normal(kernel).astype(np.float32)
    dn = _layouts(len(shape) - 2)

    def loss(lx, m):
        def f(x, k):
            y = lx.conv_general_dilated(x, k, strides, "SAME", dimension_numbers=dn,
                                        feature_group_count=groups)
            return m.sum(m.sin(y))
        return f

    got = ember.jit(ember.grad(loss(lax, ember.numpy), argnums=(0, 1)))(x, k)
    want = jax.jit(jax.grad(loss(jax.lax, jax.numpy), argnums=(0, 1)))(x, k)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-4)


def _pad_dilate_reference(x, axes, pads, dilation):
    """Dilation then padding (negative pads crop) with plain NumPy, one axis at a time."""
    out = x
    for ax, (lo, hi), d in zip(axes, pads, dilation):
        n = out.shape[ax]
        shape = list(out.shape)
        shape[ax] = max(0, (n - 1) * d + 1) if n else 0
        dil = np.zeros(shape, x.dtype)
        index = [slice(None)] * x.ndim
        index[ax] = slice(None, None, d)
        dil[tuple(index)] = out
        widths = [(0, 0)] * x.ndim
        widths[ax] = (max(lo, 0), max(hi, 0))
        dil = np.pad(dil, widths)
        index = [slice(None)] * x.ndim
        index[ax] = slice(max(-lo, 0), dil.shape[ax] - max(-hi, 0))
        out = dil[tuple(index)]
    return out


@pytest.mark.parametrize("seed", range(40))
def test_pad_dilate_zeroes_every_position_it_does_not_copy(monkeypatch, seed):
    # Scratch memory arrives dirty (NaN here): a border left unwritten would show.
    monkeypatch.setattr(C._scratch, "_empty", lambda shape, dtype: np.full(shape, np.nan, dtype))
    rng = np.random.default_rng(seed)
    nsp = int(rng.integers(1, 3))
    x = rng.standard_normal((2, *rng.integers(1, 6, nsp), 3)).astype(np.float32)
    axes = range(1, nsp + 1)
    pads = [tuple(int(v) for v in rng.integers(-2, 4, 2)) for _ in axes]
    dilation = [int(rng.choice([1, 1, 2, 3])) for _ in axes]
    got = C._pad_dilate(x, axes, pads, dilation)
    want = _pad_dilate_reference(x, axes, pads, dilation)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("rows, cols", [(4096, 160), (1000, 7), (5, 30000), (33, 4096)])
def test_patch_chunks_cover_each_row_once_and_share_it_evenly(monkeypatch, rows, cols):
    monkeypatch.setattr(C, "_chunk_parts", lambda view, nrow: 2)
    x = np.arange(3 * rows * cols, dtype=np.float32).reshape(3, rows, cols)
    seen = np.zeros(3 * rows, int)
    per_part = [0, 0]
    sizes = []

    def work(part, q0, q1, patches):
        np.testing.assert_array_equal(patches, x.reshape(-1, cols)[q0:q1])
        seen[q0:q1] += 1
        per_part[part] += q1 - q0
        sizes.append(q1 - q0)

    C._patch_chunks(x, 2, work)
    np.testing.assert_array_equal(seen, 1)
    assert max(sizes) - min(sizes) <= max(1, rows // max(1, len(sizes)))  # no stub piece
    assert abs(per_part[0] - per_part[1]) <= max(sizes)


def _scatter_cases():
    rng = np.random.default_rng(11)
    cases = []
    while len(cases) < 60:
        nsp = int(rng.integers(1, 4))
        ints = lambda lo, hi, n=nsp: tuple(int(v) for v in rng.integers(lo, hi, n))  # noqa: E731
        ld = ints(1, 5)
        if max(ld) == 1:
            ld = (2,) + ld[1:]
        case = dict(n=int(rng.integers(2, 6)), c=int(rng.integers(1, 9)),
                    o=int(rng.integers(1, 9)), ns=ints(1, 7 if nsp < 3 else 4), ks=ints(1, 5),
                    pads=ints(-2, 5, 2 * nsp), ld=ld, layout=int(rng.integers(0, 2)))
        sizes = [(m - 1) * d + 1 + lo + hi - k + 1 for m, d, lo, hi, k in zip(
            case["ns"], ld, case["pads"][::2], case["pads"][1::2], case["ks"])]
        if min(sizes) > 0:  # (an empty output has nothing to scatter)
            cases.append(case)
    return cases


@pytest.mark.parametrize("case", _scatter_cases())
def test_scatter_transposed_convolution_matches_reference(monkeypatch, case):
    rng = np.random.default_rng(3)
    nsp = len(case["ns"])
    x = rng.standard_normal((case["n"], case["c"]) + case["ns"]).astype(np.float32)
    w = rng.standard_normal((case["o"], case["c"]) + case["ks"]).astype(np.float32)
    spec = tuple(range(nsp + 2))
    if case["layout"]:  # channels last, kernel (K..., I, O)
        x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
        w = np.ascontiguousarray(np.transpose(w, tuple(range(2, nsp + 2)) + (1, 0)))
        lspec = (0, nsp + 1) + tuple(range(1, nsp + 1))
        rspec = (nsp + 1, nsp) + tuple(range(nsp))
    else:
        lspec = rspec = spec
    kw = dict(window_strides=(1,) * nsp, padding=case["pads"], lhs_dilation=case["ld"],
              rhs_dilation=(1,) * nsp, lhs_spec=lspec, rhs_spec=rspec, out_spec=lspec,
              feature_group_count=1, batch_group_count=1)
    used = []
    scatter = C._conv_scatter
    monkeypatch.setattr(C, "_conv_scatter", lambda *a: used.append(1) or scatter(*a))
    got = C.conv_numpy(x, w, **kw, out_dtype="float32")
    monkeypatch.setattr(C, "_conv_scatter", scatter)
    want = _reference(x, w, monkeypatch, **kw)
    assert used and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_scatter_gives_the_same_bits_on_any_number_of_threads(monkeypatch):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 9, 9, 16)).astype(np.float32)
    w = rng.standard_normal((3, 3, 16, 8)).astype(np.float32)
    kw = dict(window_strides=(1, 1), padding=(1, 2, 1, 2), lhs_dilation=(2, 2),
              rhs_dilation=(1, 1), lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1),
              out_spec=(0, 3, 1, 2), feature_group_count=1, batch_group_count=1)
    results = []
    monkeypatch.setattr(C, "_SCATTER_CHUNK_ELEMENTS", 1)  # a chunk per batch element
    for threads in (1, 2, 3):
        monkeypatch.setattr(C, "_threads", lambda t=threads: t)
        results.append(C.conv_numpy(x, w, **kw, out_dtype="float32"))
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    np.testing.assert_allclose(results[0], _reference(x, w, monkeypatch, **kw),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", _scatter_cases()[:30])
def test_native_tap_sums_give_the_numpy_adds_bits(monkeypatch, case, dtype):
    # The CPU backend's native loop (tap_sum_kernel) adds each output's taps in the order of
    # the NumPy adds it replaces: the same bits, on one and two spatial dims.
    from ember.compiler.evaluator import CUSTOM_CALL_TARGETS
    if C.TAP_SUMS_TARGET not in CUSTOM_CALL_TARGETS:
        pytest.skip("no native tap sums registered")
    rng = np.random.default_rng(4)
    nsp = len(case["ns"])
    x = rng.standard_normal((case["n"], case["c"]) + case["ns"])
    w = rng.standard_normal((case["o"], case["c"]) + case["ks"])
    x, w = x.astype(dtype), w.astype(dtype)
    spec = tuple(range(nsp + 2))
    kw = dict(window_strides=(1,) * nsp, padding=case["pads"], lhs_dilation=case["ld"],
              rhs_dilation=(1,) * nsp, lhs_spec=spec, rhs_spec=spec, out_spec=spec,
              feature_group_count=1, batch_group_count=1)
    calls = []
    native = CUSTOM_CALL_TARGETS[C.TAP_SUMS_TARGET]
    monkeypatch.setitem(CUSTOM_CALL_TARGETS, C.TAP_SUMS_TARGET,
                        lambda *a: calls.append(native(*a)) or calls[-1])
    got = C.conv_numpy(x, w, **kw, out_dtype=np.dtype(dtype).name)
    assert calls and all(calls) == (nsp <= 2)
    monkeypatch.delitem(CUSTOM_CALL_TARGETS, C.TAP_SUMS_TARGET)
    want = C.conv_numpy(x, w, **kw, out_dtype=np.dtype(dtype).name)
    assert got.tobytes() == want.tobytes()


def test_native_tap_sums_against_a_loop():
    from ember.backends.cpu import tap_sum_kernel as T
    rng = np.random.default_rng(9)
    n, ih, iw, kh, kw, o = 2, 5, 4, 3, 2, 5
    strides, lows, out_h, out_w = (3, 2), (2, -1), 13, 6
    y = rng.standard_normal((n, ih, iw, kh * kw, o)).astype(np.float32)
    out = np.full((n, out_h, out_w, o), np.nan, np.float32)
    assert T.tap_sums(y, out, strides, lows, (kh, kw))
    want = np.zeros_like(out)
    for b, i, j, th, tw in itertools.product(range(n), range(ih), range(iw), range(kh),
                                             range(kw)):
        oh, ow = strides[0] * i + lows[0] - th, strides[1] * j + lows[1] - tw
        if 0 <= oh < out_h and 0 <= ow < out_w:
            want[b, oh, ow] += y[b, i, j, th * kw + tw]
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    halves = np.full_like(out, np.nan)  # (row ranges: (batch, out_h) pairs)
    rows = T.rows_of(out.shape)
    assert rows == n * out_h
    assert T.tap_sums(y, halves, strides, lows, (kh, kw), (0, 7))
    assert np.isnan(halves.reshape(rows, -1)[7:]).all()
    assert T.tap_sums(y, halves, strides, lows, (kh, kw), (7, rows))
    assert halves.tobytes() == out.tobytes()
    with pytest.raises(ValueError, match="rows"):
        T.tap_sums(y, halves, strides, lows, (kh, kw), (0, rows + 1))
    # what it has no loop for: three spatial dims, integers, strided or read-only operands
    three = np.zeros((1, 2, 2, 2, 1, 1), np.float32)
    assert not T.tap_sums(three, np.zeros((1, 2, 2, 2, 1), np.float32), (1, 1, 1),
                          (0, 0, 0), (1, 1, 1))
    assert not T.tap_sums(y.astype(np.int32), out.astype(np.int32), strides, lows, (kh, kw))
    assert not T.tap_sums(y, out[:, ::2], strides, lows, (kh, kw))
    frozen = out.copy()
    frozen.flags.writeable = False
    assert not T.tap_sums(y, frozen, strides, lows, (kh, kw))
    assert not T.tap_sums(y, out, strides, lows, (kh, kw + 1))  # (taps do not match)


@pytest.mark.parametrize("nsp", [1, 2])
def test_small_batches_scatter_by_rows_with_the_same_bits_on_any_thread_count(monkeypatch,
                                                                              nsp):
    # Fewer batch elements than threads: the threads split the GEMM's rows (fixed blocks)
    # and then the output rows of the native tap sums.
    from ember.compiler.evaluator import CUSTOM_CALL_TARGETS
    if C.TAP_SUMS_TARGET not in CUSTOM_CALL_TARGETS:
        pytest.skip("no native tap sums registered")
    rng = np.random.default_rng(8)
    ns, ks = (23, 17)[:nsp], (3, 4)[:nsp]
    x = rng.standard_normal((1, 12) + ns).astype(np.float32)
    w = rng.standard_normal((7, 12) + ks).astype(np.float32)
    spec = tuple(range(nsp + 2))
    kw = dict(window_strides=(1,) * nsp, padding=(2, 1, 1, 3)[:2 * nsp],
              lhs_dilation=(2, 3)[:nsp], rhs_dilation=(1,) * nsp, lhs_spec=spec,
              rhs_spec=spec, out_spec=spec, feature_group_count=1, batch_group_count=1)
    monkeypatch.setattr(C, "_SCATTER_ROW_BLOCK", 40)  # (several GEMM blocks)
    by_rows = C._scatter_by_rows
    used = []
    monkeypatch.setattr(C, "_scatter_by_rows", lambda *a: used.append(1) or by_rows(*a))
    results = []
    for threads in (2, 3, 4):
        monkeypatch.setattr(C, "_threads", lambda t=threads: t)
        results.append(C.conv_numpy(x, w, **kw, out_dtype="float32"))
    assert len(used) == 3
    for r in results[1:]:
        assert r.tobytes() == results[0].tobytes()
    np.testing.assert_allclose(results[0], _reference(x, w, monkeypatch, **kw),
                               rtol=1e-5, atol=1e-5)
    # without the native sums (or in float16) one batch element takes the phases instead
    monkeypatch.delitem(CUSTOM_CALL_TARGETS, C.TAP_SUMS_TARGET)
    np.testing.assert_allclose(C.conv_numpy(x, w, **kw, out_dtype="float32"), results[0],
                               rtol=1e-5, atol=1e-5)
    assert len(used) == 3
