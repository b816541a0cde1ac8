"""Short-row kernels (``ember/backends/cpu/short_rows.py``): row fusions over rows of 2 to 15
elements, vectorized across rows.

Each program is compiled twice from the same optimized module, with short-row kernels and
without (the looped row kernel of ``row_kernel.py``); the two must agree bit for bit (the
short-row kernel adds float sums in ``LaneSums``' order), and both against float64 NumPy.
Kernels are also called directly on ranges of rows that start and end anywhere (blocks of
a range overlap the rows before it): every split gives the same bits.
"""

import itertools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.backends.cpu import llvm_support, short_rows
from ember.backends.cpu.executable import CpuExecutable, _ffi
from ember.backends.cpu.program import KernelStep, ProgramBuilder
from tests.backends.cpu.helpers import optimized

rng = np.random.default_rng(7)
_names = itertools.count()


@pytest.fixture(autouse=True)
def small_arrays_too(monkeypatch):
    """Short-row kernels for any number of elements (by default only from
    ``SHORT_ROW_MIN_WORK``), so small arrays exercise them."""
    monkeypatch.setattr(short_rows, "SHORT_ROW_MIN_WORK", 0)


def build(module, short: bool):
    """(executable, program) of ``module`` with or without short-row kernels, under fresh
    symbol names (the disk cache does not know the flag, so it is bypassed)."""
    program = ProgramBuilder(module, prefix=f"t{next(_names)}short{int(short)}",
                             short_rows=short).build()
    lib = llvm_support.LoadedObject(llvm_support.compile_ir(program.ir_text).object_code)
    return CpuExecutable(program, lib, module), program


def both(f, *args):
    """Runs ``f``'s optimized module with and without short-row kernels: (short outputs,
    looped outputs, the short program)."""
    module = optimized(f, *args)
    arrays = [np.asarray(a) for a in args]
    short, program = build(module, True)
    looped, plain = build(module, False)
    assert program.short_row_kernels >= 1 and plain.short_row_kernels == 0
    assert all(isinstance(s, KernelStep) for s in program.steps)
    return short.execute(arrays), looped.execute(arrays), program


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def softmax(x):
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)


def logsumexp(x):
    m = jnp.max(x, axis=-1, keepdims=True)
    return jnp.log(jnp.sum(jnp.exp(x - m), axis=-1)) + m[..., 0]


def layernorm(x):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    return (x - mu) / jnp.sqrt(jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True) + 1e-5)


def softmax64(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def logsumexp64(x):
    x = x.astype(np.float64)
    m = x.max(-1, keepdims=True)
    return np.log(np.exp(x - m).sum(-1)) + m[..., 0]


def layernorm64(x):
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)


PROGRAMS = {"softmax": (softmax, softmax64), "logsumexp": (logsumexp, logsumexp64),
            "layernorm": (layernorm, layernorm64)}
# Rows of 2..7 (each column gathered by a chain of shuffles) and 8..15 (a vector per row,
# transposed as a square); 16 * 5 + 3 rows: whole blocks and an overlapping last one.
ROW_SIZES = [2, 3, 5, 7, 8, 9, 10, 12, 15]


@pytest.mark.parametrize("n", ROW_SIZES)
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_short_rows_match_the_looped_kernel_bitwise_and_float64_numpy(name, n):
    f, ref = PROGRAMS[name]
    x = (rng.standard_normal((83, n)) * 3).astype(np.float32)
    (short,), (looped,), _ = both(f, x)
    same_bits(short, looped)
    np.testing.assert_allclose(short.astype(np.float64), ref(x), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("n", [16, 17, 24, 31, 32])
def test_rows_up_to_32_when_every_output_has_one_value_per_row(n):
    # Longer rows take short-row kernels only when nothing of the full shape is stored:
    # each row is then loaded as two vectors and transposed as two squares.
    x = (rng.standard_normal((83, n)) * 3).astype(np.float32)
    (short,), (looped,), program = both(logsumexp, x)
    same_bits(short, looped)
    np.testing.assert_allclose(short.astype(np.float64), logsumexp64(x), rtol=2e-5, atol=2e-6)
    if n <= 32:
        assert ProgramBuilder(optimized(softmax, x)).build().short_row_kernels == 0


@pytest.mark.parametrize("n", [8, 10, 15])
def test_reductions_alone_over_short_rows(n):
    # No reduce result consumed: a reduction fusion that the short-row kernel takes from 8
    # elements a row (shorter rows are vectorized across rows by LLVM already).
    x = (rng.standard_normal((3, 37, n)) * 10).astype(np.float32)
    x[0, 3, 1] = np.nan

    def f(a):
        return jnp.sum(a * 2.0, axis=-1), jnp.max(a, axis=-1), jnp.min(a, axis=-1), a * 3.0
    short, looped, _ = both(f, x)
    for s, lp in zip(short, looped):
        same_bits(s, lp)
    a = x.astype(np.float64)
    np.testing.assert_allclose(short[0], (a * 2).sum(-1), rtol=1e-6, atol=1e-5)
    np.testing.assert_array_equal(short[1], x.max(-1))
    np.testing.assert_array_equal(short[2], x.min(-1))
    np.testing.assert_array_equal(short[3], x * np.float32(3))


def test_float_sums_add_in_lane_sums_order():
    # Cancelling pairs of huge values at random places: another order of additions gives
    # other bits. The looped kernel's order is checked against NumPy in test_row_kernels;
    # here the short-row kernel must match it on rows of every short length.
    # (Rows of more than 16 share lanes: float32 additions inside a lane, a tail of lanes.)
    for n in range(2, 33):
        x = rng.standard_normal((40, n))
        for row in x:
            i, j = rng.choice(n, 2, replace=False)
            row[i], row[j] = 2.0 ** 60, -(2.0 ** 60)
        x = x.astype(np.float32)
        if n <= short_rows.SHORT_ROW_MAX:
            (short,), (looped,), _ = both(lambda a: a - jnp.sum(a, axis=1, keepdims=True), x)
            same_bits(short, looped)
        # (A row kernel storing the sum itself: the maximum is read but changes nothing.)
        (short,), (looped,), _ = both(
            lambda a: jnp.sum(a, axis=1) * (1.0 + 0.0 * jnp.max(a, axis=1)), x)
        same_bits(short, looped)


def test_row_and_column_parameters_and_row_outputs():
    # Per-row (bias) and per-column (scale) parameters beside the one read at the rows'
    # positions; outputs of one value per row and of the full shape.
    x = rng.standard_normal((50, 10)).astype(np.float32)
    bias = rng.standard_normal(50).astype(np.float32)
    scale = rng.standard_normal(10).astype(np.float32)

    def f(x, bias, scale):
        z = x * scale + bias[:, None]
        top = jnp.max(z, axis=1)
        e = jnp.exp(z - top[:, None])
        return e * scale, jnp.sum(e, axis=1) + bias, top
    short, looped, _ = both(f, x, bias, scale)
    for s, lp in zip(short, looped):
        same_bits(s, lp)
    z = x.astype(np.float64) * scale + bias[:, None]
    top = z.max(1)
    e = np.exp(z - top[:, None])
    for got, want in zip(short, [e * scale, e.sum(1) + bias, top]):
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-5, atol=2e-5)


def test_cross_entropy_with_integer_labels():
    logits = rng.standard_normal((70, 10)).astype(np.float32)
    labels = rng.integers(0, 10, 70).astype(np.int32)

    def f(x, y):
        m = jnp.max(x, axis=-1, keepdims=True)
        lse = jnp.log(jnp.sum(jnp.exp(x - m), axis=-1)) + m[:, 0]
        return lse - jnp.take_along_axis(x, y[:, None], axis=-1)[:, 0]
    (short,), (looped,), _ = both(f, logits, labels)
    same_bits(short, looped)
    want = logsumexp64(logits) - logits[np.arange(70), labels]
    np.testing.assert_allclose(short.astype(np.float64), want, rtol=2e-5, atol=2e-5)


def test_rows_spanning_two_dims_and_several_row_dims():
    x = rng.standard_normal((3, 11, 2, 5)).astype(np.float32)

    def f(a):
        mu = jnp.mean(a, axis=(-2, -1), keepdims=True)
        return (a - mu) * jnp.max(jnp.abs(a - mu), axis=(-2, -1), keepdims=True)
    (short,), (looped,), _ = both(f, x)
    same_bits(short, looped)
    a = x.astype(np.float64)
    mu = a.mean((-2, -1), keepdims=True)
    want = (a - mu) * np.abs(a - mu).max((-2, -1), keepdims=True)
    np.testing.assert_allclose(short, want, rtol=2e-5, atol=2e-5)


def test_nan_inf_and_signed_zero_rows():
    x = rng.standard_normal((40, 9)).astype(np.float32)
    x[1, 3] = np.nan
    x[2, :] = np.inf
    x[3, 4] = -np.inf
    x[4, :] = -np.inf
    x[5, :] = -0.0
    x[6, ::2] = 0.0
    x[6, 1::2] = -0.0
    for f in (softmax, logsumexp, lambda a: jnp.max(a, axis=1, keepdims=True) - a):
        (short,), (looped,), _ = both(f, x)
        same_bits(short, looped)
    (mx,), _, _ = both(lambda a: jnp.max(a, axis=1) * (1.0 + 0.0 * jnp.sum(a, axis=1)), x)
    assert np.signbit(mx[5]) and not np.signbit(mx[6])  # (-0 below +0, as XLA)


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8])
def test_integer_rows(dtype):
    x = rng.integers(0, 100, (45, 6)).astype(dtype)

    def f(a):
        return a - jnp.max(a, axis=1, keepdims=True) + jnp.sum(a, axis=1, keepdims=True)
    (short,), (looped,), _ = both(f, x)
    same_bits(short, looped)
    want = np.asarray(ember.jit(f, backend="interpreter")(x))
    np.testing.assert_array_equal(short, want)


def test_boolean_float64_and_low_precision_rows(x64):
    x = rng.standard_normal((37, 7))  # float64: 8 rows a vector on AVX-512

    def f(a):
        hit = jnp.any(a > 1.0, axis=1, keepdims=True)
        return jnp.where(hit, a - jnp.mean(a, axis=1, keepdims=True), 0.0), hit
    (out, hit), (out2, hit2), _ = both(f, x)
    same_bits(out, out2)
    same_bits(hit, hit2)
    a = x.astype(np.float64)
    np.testing.assert_allclose(out, np.where((a > 1).any(1, keepdims=True),
                                             a - a.mean(1, keepdims=True), 0.0), rtol=1e-13,
                               atol=1e-15)
    y = rng.standard_normal((30, 12))  # rows longer than a vector: columns by chains
    (short,), (looped,), _ = both(layernorm, y)
    same_bits(short, looped)
    np.testing.assert_allclose(short, layernorm64(y), rtol=1e-12, atol=1e-12)
    for dtype in (np.float16, jnp.bfloat16):
        y = rng.standard_normal((40, 11)).astype(dtype)
        (short,), (looped,), _ = both(softmax, y)
        same_bits(short, looped)
        np.testing.assert_allclose(short.astype(np.float64), softmax64(y), rtol=2e-2,
                                   atol=2e-3)


def _kernel_runner(program, lib_exe, name):
    """Calls the program's only kernel on ``[lo, hi)`` with the given buffers."""
    fn = _ffi.cast("void(*)(char**, long, long)", lib_exe._lib.address(name))

    def run(buffers, lo, hi):
        ptrs = _ffi.new("char*[]", [_ffi.from_buffer(b) for b in buffers])
        fn(ptrs, lo, hi)
    return run


@pytest.mark.parametrize("n", [3, 10])
def test_any_split_of_the_rows_gives_the_same_bits(n):
    rows = 16 * 4 + 7
    x = (rng.standard_normal((rows, n)) * 4).astype(np.float32)
    module = optimized(softmax, x)
    exe, program = build(module, True)
    (step,) = program.steps
    run = _kernel_runner(program, exe, step.info.name)
    whole = np.empty_like(x)
    run([x, whole], 0, rows)
    np.testing.assert_allclose(whole, softmax64(x), rtol=2e-5, atol=2e-6)
    for cuts in ([1], [5, 6, 7], [15, 16, 17, 40], list(range(0, rows, 3)),
                 sorted(rng.choice(np.arange(1, rows), 9, replace=False))):
        out = np.full_like(x, np.nan)
        bounds = [0, *cuts, rows]
        for lo, hi in zip(bounds, bounds[1:]):
            run([x, out], lo, hi)
        same_bits(out, whole)
    # Ranges reaching past the rows are clamped; an empty range writes nothing.
    out = np.full_like(x, 7.0)
    run([x, out], 10, 10)
    run([x, out], rows, rows + 50)
    assert np.all(out == 7.0)
    run([x, out], -5, rows + 50)
    same_bits(out, whole)


def _guarded(values: np.ndarray, at_end: bool):
    """A copy of ``values`` in memory that an inaccessible page follows (``at_end``) or
    precedes: touching an element past that end faults. Returns (array, keep-alive)."""
    import ctypes
    import mmap

    page = mmap.PAGESIZE
    span = -(-values.nbytes // page) * page
    buf = mmap.mmap(-1, span + 2 * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    libc = ctypes.CDLL(None)
    for start in (base, base + span + page):
        assert libc.mprotect(ctypes.c_void_p(start), ctypes.c_size_t(page), 0) == 0
    offset = page + (span - values.nbytes if at_end else 0)
    arr = np.frombuffer(buf, values.dtype, values.size, offset).reshape(values.shape)
    arr[...] = values
    return arr, buf


@pytest.mark.parametrize("n", [2, 7, 8, 13, 15, 24, 32])
@pytest.mark.parametrize("rows", [16, 33])
def test_kernels_touch_nothing_outside_their_buffers(n, rows):
    # Inputs and outputs placed against inaccessible pages (a fault ends the test run):
    # the blocks' vector loads and stores, the last row's included, stay inside.
    x = (rng.standard_normal((rows, n))).astype(np.float32)
    f, ref = (softmax, softmax64) if n <= short_rows.SHORT_ROW_MAX else (logsumexp,
                                                                         logsumexp64)
    module = optimized(f, x)
    exe, program = build(module, True)
    (step,) = program.steps
    run = _kernel_runner(program, exe, step.info.name)
    want = ref(x)
    for at_end in (True, False):
        src, keep_src = _guarded(x, at_end)
        dst, keep_dst = _guarded(np.zeros(want.shape, np.float32), at_end)
        run([src, dst], 0, rows)
        np.testing.assert_allclose(dst, want, rtol=2e-5, atol=2e-6)
        del src, dst


def test_short_rows_vectorize_across_rows_without_gathers(tmp_path, monkeypatch):
    import ember.backends.cpu as cpu_backend

    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    monkeypatch.setattr(cpu_backend, "TIERED_COMPILATION", False)
    x = rng.standard_normal((5000, 10)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(ember.jit(logsumexp)(x)), logsumexp64(x),
                               rtol=2e-5, atol=2e-6)
    opt = open(next(tmp_path.glob("*.llvm.opt.ll"))).read()
    lanes = short_rows._vector_bytes() // 4
    assert f"<{lanes} x float>" in opt and "shufflevector" in opt
    assert "gather" not in opt


def test_only_large_arrays_take_short_rows(monkeypatch):
    monkeypatch.setattr(short_rows, "SHORT_ROW_MIN_WORK", 1 << 14)
    small = optimized(softmax, np.ones((100, 10), np.float32))
    large = optimized(softmax, np.ones((2000, 10), np.float32))
    assert ProgramBuilder(small).build().short_row_kernels == 0
    assert ProgramBuilder(large).build().short_row_kernels == 1
    assert ProgramBuilder(large, short_rows=False).build().short_row_kernels == 0
    long_rows = optimized(softmax, np.ones((2000, 16), np.float32))
    assert ProgramBuilder(long_rows).build().short_row_kernels == 0


def test_quick_tier_uses_the_looped_kernel_with_the_same_bits(monkeypatch):
    # The first call runs code compiled unoptimized from a program rebuilt without
    # short-row kernels (their shuffles compile slowly); later calls the optimized code.
    import ember.backends.cpu as cpu_backend

    monkeypatch.setattr(cpu_backend, "TIERED_COMPILATION", True)
    x = (rng.standard_normal((3000, 12)) * 2).astype(np.float32)
    backend = cpu_backend.CpuBackend()
    compiled = []
    real = llvm_support.compile_ir

    def spy(text, *args, **kwargs):
        compiled.append(("shufflevector" in text, kwargs.get("opt_level", 3)))
        return real(text, *args, **kwargs)
    monkeypatch.setattr(llvm_support, "compile_ir", spy)
    module = optimized(layernorm, x)
    exe = backend.compile(module)
    first = exe.execute([x])[0]
    later = [exe.execute([x])[0] for _ in range(3)]  # (the quick code while the O3 compiles)
    backend.wait_for_background()
    later.append(exe.execute([x])[0])
    assert (False, 0) in compiled and (True, 3) in compiled
    assert exe._tier is None and exe.program.entry_name.startswith("m")
    for out in later:
        same_bits(out, first)
    np.testing.assert_allclose(first, layernorm64(x), rtol=2e-5, atol=2e-5)


def test_a_lane_loop_that_does_not_vectorize_compiles_without_warnings(capfd):
    """The lane loop asks for a vector width but does not force vectorization: a loop LLVM
    cannot vectorize (here reading a row-broadcast parameter at ``row // 32``, whose bounds
    it cannot identify) compiles to scalar code without LLVM's "loop not vectorized"
    warning on stderr."""
    def matvec_grad_like(m, v, s, x):
        rows = jnp.sum(m * v[..., None, :], axis=-1) * s[..., None] + x
        return jnp.where(x > 0, rows, rows * (x + 1))

    m = rng.standard_normal((4, 64, 32, 32)).astype(np.float32)
    v, x = (rng.standard_normal((4, 64, 32)).astype(np.float32) for _ in range(2))
    s = rng.standard_normal((4, 64)).astype(np.float32)
    capfd.readouterr()
    (short,), (looped,), _ = both(matvec_grad_like, m, v, s, x)
    assert "loop not vectorized" not in capfd.readouterr().err
    same_bits(short, looped)
    m64, v64, s64, x64 = (a.astype(np.float64) for a in (m, v, s, x))
    rows = (m64 * v64[..., None, :]).sum(-1) * s64[..., None] + x64
    np.testing.assert_allclose(short, np.where(x64 > 0, rows, rows * (x64 + 1)),
                               rtol=1e-5, atol=1e-5)
