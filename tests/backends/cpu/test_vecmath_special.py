"""lgamma, digamma and erf_inv of ``vecmath_special`` against mpmath, region by region.

Positive arguments (and all of erf_inv): within 4 ulp. Negative arguments of lgamma and
digamma go through the reflection formulas, whose two terms cancel near the functions' zeros:
there the bound is 4 ulp of the larger term (what any reflecting implementation can give).
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from ember.backends.cpu import vecmath_special as vs

from .test_vecmath import kernel, ulp_dist

mp = pytest.importorskip("mpmath")

DTYPES = [np.float32, np.float64]


def _lgamma_ref(v: float) -> float:
    if math.isinf(v) or (v <= 0 and v == math.floor(v)):
        return math.inf
    return float(mp.re(mp.loggamma(mp.mpf(v))))


def _digamma_ref(v: float) -> float:
    if v == -math.inf or (v <= 0 and v == math.floor(v)):
        return math.nan
    return math.inf if v == math.inf else float(mp.digamma(mp.mpf(v)))


def _erf_inv_ref(v: float) -> float:
    if abs(v) >= 1:
        return math.copysign(math.inf, v) if abs(v) == 1 else math.nan
    return float(mp.erfinv(mp.mpf(v)))


REF = {"lgamma": _lgamma_ref, "digamma": _digamma_ref, "erf_inv": _erf_inv_ref}


def reference(opcode: str, x: np.ndarray) -> np.ndarray:
    """Float64 values from mpmath, rounded to x's dtype (overflowing to inf)."""
    with mp.workdps(30):
        out = np.array([REF[opcode](v) for v in x.astype(np.float64).tolist()])
    with np.errstate(over="ignore"):
        return out.astype(x.dtype)


def _log_uniform(rng, lo, hi, n):
    return np.exp(rng.uniform(math.log(lo), math.log(hi), n))


def _points(opcode: str, dtype, region: str) -> np.ndarray:
    # (a fixed seed per case: str hashes change from process to process)
    rng = np.random.default_rng(zlib.crc32(f"{opcode} {region}".encode()))
    n = 1500
    if opcode == "erf_inv":
        x = {"central": rng.uniform(-1, 1, n),
             "near one": 1 - _log_uniform(rng, 1.2e-16 if dtype == np.float64 else 6e-8, 0.5, n),
             "tiny": _log_uniform(rng, 1e-300 if dtype == np.float64 else 1e-40, 1e-3, n // 4)
             }[region]
    else:
        x = {"tiny": _log_uniform(rng, 1e-300 if dtype == np.float64 else 1e-40, 1e-3, n // 4),
             "(0, 3)": np.concatenate([rng.uniform(0, 3, n), 1 + rng.uniform(-1e-6, 1e-6, 100),
                                       2 + rng.uniform(-1e-6, 1e-6, 100),
                                       2 + rng.uniform(0, 1e-3, 1500)]),
             "(3, 12)": rng.uniform(3, 12, n // 2),
             "large": _log_uniform(rng, 12, 1e300 if dtype == np.float64 else 1e36, n // 2),
             "root": 1.4616321449683622 + rng.uniform(-1e-3, 1e-3, n // 4),
             }[region]
    x = x.astype(dtype)
    return x[np.isfinite(x)]


POSITIVE_REGIONS = ["tiny", "(0, 3)", "(3, 12)", "large", "root"]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("region", POSITIVE_REGIONS)
@pytest.mark.parametrize("opcode", ["lgamma", "digamma"])
def test_positive_arguments(opcode, region, dtype):
    x = _points(opcode, dtype, region)
    got = kernel(opcode, dtype)(x)
    d = ulp_dist(got, reference(opcode, x))
    j = int(np.argmax(d))
    bound = 3 if dtype == np.float64 else 4
    assert d[j] <= bound, f"{opcode} {dtype.__name__} {region}: {d[j]} ulp at {x[j]!r}"


def _reflection_terms(opcode: str, x: np.ndarray) -> np.ndarray:
    """The size of the larger term of the reflection formula at each (negative) x."""
    with mp.workdps(30):
        out = []
        for v in x.astype(np.float64).tolist():
            a = mp.mpf(v)
            if opcode == "lgamma":
                terms = (mp.log(mp.pi / abs(mp.sin(mp.pi * a))), mp.loggamma(1 - a))
            else:
                terms = (mp.digamma(1 - a), mp.pi / mp.tan(mp.pi * a))
            out.append(float(max(abs(mp.re(t)) for t in terms)))
    return np.array(out)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("opcode", ["lgamma", "digamma"])
def test_negative_arguments(opcode, dtype):
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-12, 0, 1500), -_log_uniform(rng, 12, 1e14, 300),
                        -_log_uniform(rng, 1e-30, 1e-3, 200),
                        [-0.5, -1.5, -2.5, -1e-300, -2.4570247, -0.5040830]]).astype(dtype)
    x = x[np.isfinite(x) & (x != np.floor(x))]
    got = kernel(opcode, dtype)(x).astype(np.float64)
    with mp.workdps(30):
        want = np.array([REF[opcode](v) for v in x.astype(np.float64).tolist()])
    scale = np.maximum(_reflection_terms(opcode, x), np.abs(want))
    err = np.abs(got - want) / np.spacing(scale.astype(dtype)).astype(np.float64)
    j = int(np.argmax(err))
    assert err[j] <= 4, f"{opcode} {dtype.__name__}: {err[j]} ulp of the terms at {x[j]!r}"


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("region", ["central", "near one", "tiny"])
def test_erf_inv(region, dtype):
    x = _points("erf_inv", dtype, region)
    x = np.concatenate([x, -x])
    got = kernel("erf_inv", dtype)(x)
    d = ulp_dist(got, reference("erf_inv", x))
    j = int(np.argmax(d))
    bound = 2 if dtype == np.float64 else 4
    assert d[j] <= bound, f"erf_inv {dtype.__name__} {region}: {d[j]} ulp at {x[j]!r}"


def test_float32_erf_inv_on_a_grid_of_every_float32_below_one():
    """float32 erf_inv (Giles' polynomial in float32) on every 997th float32 in [0, 1), against
    the float64 kernel (within 2 ulp of float64, so exact for this)."""
    bits = np.arange(0, np.float32(1).view(np.uint32), 997, dtype=np.uint32)
    x = bits.view(np.float32)
    got = kernel("erf_inv", np.float32)(x)
    want = kernel("erf_inv", np.float64)(x.astype(np.float64)).astype(np.float32)
    d = ulp_dist(got, want)
    assert d.max() <= 4, f"{d.max()} ulp at {x[int(np.argmax(d))]!r}"
    assert np.array_equal(kernel("erf_inv", np.float32)(-x), -got)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_special_values(dtype):
    info = np.finfo(dtype)
    inf, nan = math.inf, math.nan
    cases = {
        "lgamma": [(0.0, inf), (-0.0, inf), (-1.0, inf), (-2.0, inf), (-1e20, inf), (inf, inf),
                   (-inf, inf), (nan, nan), (1.0, 0.0), (2.0, 0.0), (0.5, 0.5723649429247001),
                   (info.max, inf), (info.smallest_subnormal,
                                     -math.log(float(info.smallest_subnormal)))],
        "digamma": [(0.0, nan), (-0.0, nan), (-1.0, nan), (-3.0, nan), (-inf, nan), (inf, inf),
                    (nan, nan), (1.0, -0.5772156649015329), (-0.5, 0.03648997397857652)],
        "erf_inv": [(0.0, 0.0), (1.0, inf), (-1.0, -inf), (1.5, nan), (-2.0, nan), (inf, nan),
                    (nan, nan), (0.5, 0.4769362762044699)],
    }
    for opcode, pairs in cases.items():
        x = np.array([p[0] for p in pairs], dtype)
        want = np.array([p[1] for p in pairs], dtype)
        got = kernel(opcode, dtype)(x)
        d = ulp_dist(got, want)
        exact = np.isnan(want) | ~np.isfinite(want) | (want == 0)
        ok = np.where(exact, d == 0, d <= 2)
        assert ok.all(), f"{opcode}: x={x[~ok]} got={got[~ok]} want={want[~ok]}"
    got = kernel("erf_inv", dtype)(np.array([-0.0], dtype))
    assert got[0] == 0 and np.signbit(got[0])


def test_taylor_coefficients_are_mpmaths():
    with mp.workdps(40):
        c = mp.mpf(1.5)
        n = len(vs._LGAMMA_R)
        series = [mp.loggamma(c)] + [mp.polygamma(k - 1, c) / mp.factorial(k)
                                     for k in range(1, n + 1)]
        # R(d) = lgamma(1.5 + d) / (d^2 - 1/4) = -4 lgamma(1.5 + d) * sum_j (4 d^2)^j
        r = [float(-4 * sum(series[k - 2 * j] * 4 ** j for j in range(k // 2 + 1)))
             for k in range(n)]
        x0 = mp.findroot(mp.digamma, 1.46)
        root = [float(mp.polygamma(k, x0) / mp.factorial(k))
                for k in range(1, len(vs._DIGAMMA_ROOT) + 1)]
        x0_hi = float(x0)
        x0_lo = float(x0 - x0_hi)
    np.testing.assert_allclose(vs._LGAMMA_R, r, rtol=1e-15, atol=0)
    with mp.workdps(40):  # lgamma(2 + t) / t: the derivatives of log Gamma at 2
        near_two = [float(mp.polygamma(k, 2) / mp.factorial(k + 1))
                    for k in range(len(vs._LGAMMA_NEAR_TWO))]
    np.testing.assert_allclose(vs._LGAMMA_NEAR_TWO, near_two, rtol=1e-15, atol=0)
    np.testing.assert_allclose(vs._DIGAMMA_ROOT, root, rtol=1e-15, atol=0)
    assert (vs._DIGAMMA_X0_HI, vs._DIGAMMA_X0_LO) == (x0_hi, x0_lo)


def test_erf_inv_far_tail_fit():
    """The fitted guess beyond w = 16 is within 1e-8 of erf_inv (one Halley step then gives
    float64 accuracy)."""
    s = np.linspace(4.0, 6.05, 41)
    guess = np.polynomial.polynomial.polyval(s - 5.0, vs._ERF_INV_FAR_TAIL)
    with mp.workdps(40):
        want = [float(mp.erfinv(mp.sqrt(1 - mp.exp(-mp.mpf(v) ** 2)))) for v in s.tolist()]
    np.testing.assert_allclose(guess, want, rtol=1e-8)
