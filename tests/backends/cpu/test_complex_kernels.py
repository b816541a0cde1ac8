"""Complex numbers in native kernels (``complex_ops``) against NumPy.

Exact ops (parts moved, negated, compared, converted) must give NumPy's bits; multiply and
divide must give the bits of their formulas evaluated one NumPy op at a time; ``abs``, ``sign``,
``exp``, ``log`` and ``sqrt`` must be within a few ulp of a reference per part, with C99's
results at the special values (zeros' signs, infinities, NaNs). Also: these fusions compile
to kernels (no library thunk) and vectorize.
"""

import glob
import itertools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends import get_backend
from ember.compiler import eval_elementwise
from tests.backends.cpu.helpers import optimized, x64

DTYPES = [np.complex64, np.complex128]
PART = {np.complex64: np.float32, np.complex128: np.float64}


def special_parts(dtype):
    finfo = np.finfo(PART[dtype])
    values = [0.0, -0.0, 1.0, -1.5, 3.0, 0.6, 0.8, np.inf, -np.inf, np.nan, finfo.max,
              -finfo.max, finfo.tiny, finfo.smallest_subnormal, -finfo.smallest_subnormal,
              float(finfo.max) ** 0.5 * 4, 88.5, -100.0, 709.5, 720.0, 1e-30]
    with np.errstate(over="ignore"):
        return np.array(values).astype(PART[dtype])


def inputs(dtype, n_random=3000, seed=0):
    """Every pair of special parts, then random values over a wide range of magnitudes."""
    parts = special_parts(dtype)
    grid = np.array([complex(a, b) for a, b in itertools.product(parts, parts)], dtype)
    rng = np.random.default_rng(seed)
    mag = rng.standard_normal((2, n_random)) * np.exp(rng.uniform(-20, 20, (2, n_random)))
    return np.concatenate([grid, (mag[0] + 1j * mag[1]).astype(dtype)])


def _wide(args) -> bool:
    """x64 stays on where it is, and is on for complex128 arguments."""
    return ember.config.read("jax_enable_x64") or any(
        np.asarray(a).dtype == np.complex128 for a in args)


def run(f, *args):
    with x64(_wide(args)):
        return np.asarray(ember.jit(f)(*args))


def native_steps(f, *args):
    with x64(_wide(args)):
        exe = get_backend("cpu").compile(optimized(f, *args))
    return [type(s).__name__ for s in exe.program.steps]


def same_bits(got, want):
    """Equal values, zeros' signs included; NaN where NumPy has NaN (of either sign)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "c":
        same_bits(got.real, want.real)
        same_bits(got.imag, want.imag)
        return
    if got.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    np.testing.assert_array_equal(np.signbit(got[~nan]), np.signbit(want[~nan]))


def ulps(got, want):
    """Per-element distance in units of the last place of ``want`` (0 where both are NaN or
    equal, inf where only one is NaN or infinite)."""
    got, want = np.asarray(got), np.asarray(want)
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(got.astype(np.float64) - want.astype(np.float64))
        d = d / np.spacing(np.abs(want)).astype(np.float64)
    d = np.where(got == want, 0.0, d)
    d = np.where(np.isnan(got) & np.isnan(want), 0.0, d)
    return np.where(np.isnan(d), np.inf, d)


def assert_within(got, want, bound):
    for g, w in ((got.real, want.real), (got.imag, want.imag)) if got.dtype.kind == "c" \
            else ((got, want),):
        d = ulps(g, w)
        worst = int(np.argmax(d))
        assert d[worst] <= bound, (g.flat[worst], w.flat[worst], d[worst])
        exact = (w == 0) | np.isinf(w) | np.isnan(w)  # special results: exactly those
        same_bits(g[exact], w[exact])


# --------------------------------------------------------------------------- exact ops


EXACT = {
    "add": (lambda a, b: a + b, np.add),
    "subtract": (lambda a, b: a - b, np.subtract),
    "negate": (lambda a, b: -a, lambda a, b: -a),
    "conj": (lambda a, b: jnp.conj(a), lambda a, b: np.conj(a)),
    "real": (lambda a, b: jnp.real(a), lambda a, b: np.real(a)),
    "imag": (lambda a, b: jnp.imag(b), lambda a, b: np.imag(b)),
    "equal": (lambda a, b: a == b, np.equal),
    "not_equal": (lambda a, b: a != b, np.not_equal),
    "complex": (lambda a, b: lax.complex(jnp.real(a), jnp.imag(b)),
                lambda a, b: make(a.real, b.imag)),
    "where": (lambda a, b: jnp.where(jnp.real(a) > jnp.imag(b), a, b),
              lambda a, b: np.where(a.real > b.imag, a, b)),
    "to_bool": (lambda a, b: a.astype(bool), lambda a, b: a != 0),
    "to_int32": (lambda a, b: a.real.astype(jnp.int32) + jnp.imag(b).astype(jnp.int32),
                 lambda a, b: _saturate(a.real) + _saturate(b.imag)),
    "from_real": (lambda a, b: jnp.real(a).astype(a.dtype),
                  lambda a, b: make(a.real, np.zeros_like(a.real))),
}


def make(re, im):
    out = np.empty(re.shape, np.result_type(re.dtype, np.complex64))
    out.real, out.imag = re, im
    return out


def _saturate(x):
    x = np.where(np.isnan(x), 0, x)
    info = np.iinfo(np.int32)
    return np.clip(np.trunc(x.astype(np.float64)), info.min, info.max).astype(np.int32)


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
@pytest.mark.parametrize("name", sorted(EXACT))
def test_exact_ops_give_numpys_bits(name, dtype):
    f, ref = EXACT[name]
    a = inputs(dtype)
    b = np.roll(a, 7)
    assert native_steps(f, a, b) == ["KernelPlan"]
    with np.errstate(all="ignore"):
        want = np.asarray(ref(a, b))
    if want.dtype.kind == "c":
        want = want.astype(dtype)
    same_bits(run(f, a, b), want)


@pytest.mark.parametrize("src, dst", [(np.complex64, np.complex128),
                                      (np.complex128, np.complex64),
                                      (np.float32, np.complex64), (np.int32, np.complex128),
                                      (np.complex128, np.float32)])
def test_conversions(src, dst):
    a = inputs(np.complex128)
    with np.errstate(all="ignore"):
        x = (a.real.astype(np.int32) if src == np.int32 else
             a.real.astype(src) if np.dtype(src).kind == "f" else a.astype(src))
        want = (x.real if np.dtype(dst).kind == "f" else x).astype(dst)
    with x64():
        assert native_steps(lambda v: v.astype(dst), x) == ["KernelPlan"]
        same_bits(run(lambda v: v.astype(dst), x), want)


# --------------------------------------------------------------------------- arithmetic


def _multiply(a, b):
    return a.real * b.real - a.imag * b.imag, a.real * b.imag + a.imag * b.real


def _divide(a, b):
    """XLA's complex division as the evaluator computes it (Smith's method, C99's limits
    where both parts come out NaN), as parts."""
    from ember.compiler.eval_elementwise import divide
    q = divide(a, b)
    return q.real, q.imag


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
@pytest.mark.parametrize("op", ["multiply", "divide"])
def test_multiply_and_divide_follow_their_formulas(op, dtype):
    a = inputs(dtype)
    b = np.roll(a, 11)
    f = (lambda x, y: x * y) if op == "multiply" else (lambda x, y: x / y)
    assert native_steps(f, a, b) == ["KernelPlan"]
    with np.errstate(all="ignore"):
        want = make(*(_multiply if op == "multiply" else _divide)(a, b))
        numpy_result = f(a, b)
    got = run(f, a, b)
    same_bits(got, want)
    # and NumPy's own ufunc agrees where the result is finite
    finite = np.isfinite(numpy_result) & np.isfinite(got)
    np.testing.assert_allclose(got[finite], numpy_result[finite],
                               rtol=8 * np.finfo(PART[dtype]).eps,
                               atol=4 * np.finfo(PART[dtype]).tiny)


def exact(name, z):
    """``name`` of each finite ``z`` from mpmath at 200 bits, rounded to float64 parts."""
    mp = pytest.importorskip("mpmath")
    fn = {"abs": lambda w: mp.sqrt(w.real ** 2 + w.imag ** 2),
          "sign": lambda w: w / mp.sqrt(w.real ** 2 + w.imag ** 2) if w != 0 else w,
          "exp": mp.exp, "log": mp.log, "sqrt": mp.sqrt, "sinh": mp.sinh, "cosh": mp.cosh,
          "tanh": mp.tanh, "sin": mp.sin, "cos": mp.cos, "tan": mp.tan}[name]
    with mp.workprec(200):
        return np.array([complex(fn(mp.mpc(float(v.real), float(v.imag)))) for v in z])


def check_function(name, f, z, bound, special=None):
    """Within ``bound`` ulp of mpmath per part at finite inputs with nonzero parts (the exact
    values rounded to z's precision); at the others (infinite, NaN, signed zero parts), of
    ``special`` (default: NumPy's function), whose zeros, infinities and NaNs (C99's special
    values) must be matched exactly."""
    got = run(f, z)
    finite = np.isfinite(z) & (z.real != 0) & (z.imag != 0)
    with np.errstate(over="ignore"):
        want = exact(name, z[finite])
        want = want.real.astype(got.dtype) if got.dtype.kind == "f" else want.astype(z.dtype)
    assert_within(got[finite], want, bound)
    with np.errstate(all="ignore"):
        assert_within(got[~finite], (special or getattr(np, name))(z[~finite]), bound)


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
def test_abs_is_hypot(dtype):
    a = inputs(dtype)
    assert native_steps(jnp.abs, a) == ["KernelPlan"]
    assert run(jnp.abs, a).dtype == PART[dtype]
    check_function("abs", jnp.abs, a, 1, special=eval_elementwise.absolute)
    infinite = (np.isinf(a.real) | np.isinf(a.imag)) & ~np.isnan(a.real) & ~np.isnan(a.imag)
    assert np.isinf(run(jnp.abs, a)[infinite]).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
def test_sign_is_x_over_abs(dtype):
    a = inputs(dtype)
    assert native_steps(jnp.sign, a) == ["KernelPlan"]
    check_function("sign", jnp.sign, a, 2, special=eval_elementwise.sign)
    huge = np.array([np.finfo(PART[dtype]).max * (1 + 1j)], dtype)  # |x| overflows
    np.testing.assert_allclose(run(jnp.sign, huge), [(1 + 1j) / np.sqrt(2)], rtol=1e-6)


FUNCTIONS = {"exp": jnp.exp, "log": jnp.log, "sqrt": jnp.sqrt, "sinh": jnp.sinh,
             "cosh": jnp.cosh, "tanh": jnp.tanh, "sin": jnp.sin, "cos": jnp.cos, "tan": jnp.tan}


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_functions_within_4_ulp_with_xla_special_values(name, dtype):
    a = inputs(dtype)
    assert native_steps(FUNCTIONS[name], a) == ["KernelPlan"]
    # (complex128 tanh and tan: the quotient of two products carries up to 6 ulp; above 4
    # for about 1 in 5000 random inputs)
    bound = 6 if dtype == np.complex128 and name in ("tanh", "tan") else 4
    # (XLA's special values, as the evaluator's kernels give them: NumPy's are C99's)
    check_function(name, FUNCTIONS[name], a, bound, special=getattr(eval_elementwise, name))


def test_log_near_the_unit_circle_keeps_relative_accuracy():
    rng = np.random.default_rng(3)
    t = rng.uniform(0, 2 * np.pi, 2000)
    r = 1 + rng.standard_normal(2000) * np.exp(rng.uniform(-35, -1, 2000))
    z = r * np.exp(1j * t)
    want = exact("log", z).real
    got = run(jnp.log, z).real
    # within 4 ulp, or (points within ~1e-17 of the circle) 1e-32 absolute
    assert np.all((ulps(got, want) <= 4) | (np.abs(got - want) <= 1e-32))
    # where computing |z| first loses everything
    naive = np.log(np.hypot(z.real, z.imag))
    assert ulps(naive, want).max() > 1e6


def test_large_arrays_and_loop_tails(tmp_path, monkeypatch):
    """Vectorized, threaded loops over interleaved parts: every length near a vector's."""
    monkeypatch.setenv("EMBER_DUMP_TO", str(tmp_path))
    rng = np.random.default_rng(1)
    for n in (1, 3, 15, 17, 33, 1 << 18):
        a = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
        b = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
        got = run(lambda x, y: x * y + jnp.conj(x), a, b)
        re, im = _multiply(a, b)
        same_bits(got, make(re + a.real, im - a.imag))
    optimized_ir = "".join(open(p).read() for p in glob.glob(str(tmp_path / "*.opt.ll")))
    assert "<16 x float>" in optimized_ir or "<8 x float>" in optimized_ir


def test_complex_index_ops_in_kernels():
    a = inputs(np.complex64)[:360].reshape(12, 30)
    idx = np.array([3, 0, 11, 5], np.int32)

    def shapes(x):
        return jnp.concatenate([x.T[::-1], jnp.pad(x[:2].T, ((0, 0), (1, 1)))],
                               axis=1) * 2

    assert native_steps(shapes, a) == ["KernelPlan"]
    with np.errstate(all="ignore"):
        want = np.concatenate([a.T[::-1], np.pad(a[:2].T, ((0, 0), (1, 1)))], axis=1)
        want = (want * np.complex64(2)).astype(np.complex64)
    same_bits(run(shapes, a), want)

    def rows(x, i):
        return x[i] * 1j

    assert "LibraryPlan" not in native_steps(rows, a, idx)
    with np.errstate(all="ignore"):
        want = (a[idx] * np.complex64(1j)).astype(np.complex64)
    same_bits(run(rows, a, idx), want)


# name: (terms, reduction): the program is reduction(terms(x, y))
SUMS = {
    "sum": (lambda x, y: x, jnp.sum),
    "rows": (lambda x, y: x, lambda t: jnp.sum(t, axis=1)),
    "columns": (lambda x, y: x, lambda t: jnp.sum(t, axis=0)),
    "mean of a product": (lambda x, y: x * jnp.conj(y), jnp.mean),
    "row dot products": (lambda x, y: x * y, lambda t: jnp.sum(t, axis=1)),
    "cumsum": (lambda x, y: x, lambda t: jnp.cumsum(t, axis=1)),
    "reverse cumsum of a sum": (lambda x, y: x + y,
                                lambda t: lax.cumsum(t, axis=0, reverse=True)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(SUMS))
def test_complex_sums_are_float_sums_of_the_parts(name, dtype):
    # (``complex_sum_as_parts``: two float reductions or scans, fused, so native)
    terms, reduction = SUMS[name]
    f = lambda x, y: reduction(terms(x, y))  # noqa: E731
    rng = np.random.default_rng(len(name))
    x, y = (make(*rng.standard_normal((2, 300, 70)) * 10).astype(dtype) for _ in range(2))
    assert "LibraryPlan" not in native_steps(f, x, y)
    got = run(f, x, y)
    with x64():
        t = np.asarray(terms(x.astype(np.complex128), y.astype(np.complex128)))
        want = np.asarray(reduction(t))
        scales = [np.asarray(reduction(np.abs(p))) for p in (t.real, t.imag)]
    assert got.dtype == dtype and got.shape == want.shape
    # each part a float sum of that part's terms: float32 sums accumulate in float64, rounded
    # once; within an ulp or so of the sum of the terms' magnitudes
    eps = 1e-6 if dtype == np.complex64 else 1e-13
    assert np.all(np.abs(got.real - want.real) <= eps * scales[0])
    assert np.all(np.abs(got.imag - want.imag) <= eps * scales[1])


def test_complex_sums_with_special_parts():
    x = inputs(np.complex64)[:441].reshape(21, 21)  # every pair of special parts
    with np.errstate(all="ignore"):
        wide = x.astype(np.complex128)
        want_sum = make(wide.real.sum(1), wide.imag.sum(1)).astype(np.complex64)
        want_cumsum = make(np.cumsum(wide.real, 0), np.cumsum(wide.imag, 0)).astype(np.complex64)
    for f, want in ((lambda v: jnp.sum(v, axis=1), want_sum),
                    (lambda v: jnp.cumsum(v, axis=0), want_cumsum)):
        got = run(f, x)
        finite = np.isfinite(want) & (np.abs(want) < 1e30)
        assert (~finite).sum() > 10
        same_bits(got[~finite], want[~finite])  # (inf, -inf, NaN parts as the part sums')
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5)


def test_complex_products_and_other_ops_still_run_in_the_evaluator():
    a = inputs(np.complex64)
    a = a[np.isfinite(a) & (np.abs(a) < 1e10)]
    steps = native_steps(lambda x: (jnp.prod(x[:8]), jnp.arcsinh(x)), a)
    assert "LibraryPlan" in steps
    got_prod, got_asinh = (np.asarray(v) for v in ember.jit(lambda x: (jnp.prod(x[:8]),
                                                                      jnp.arcsinh(x)))(a))
    np.testing.assert_allclose(got_prod, a[:8].astype(np.complex128).prod(), rtol=1e-5)
    with np.errstate(all="ignore"):
        same_bits(got_asinh, np.arcsinh(a))
    # a real reduction of complex producers is native
    assert native_steps(lambda x: jnp.sum(jnp.abs(x)), a) == ["KernelPlan"]
    np.testing.assert_allclose(run(lambda x: jnp.sum(jnp.abs(x)), a),
                               np.abs(a).astype(np.float64).sum(), rtol=1e-6)
