"""ember.scipy.stats against JAX as the oracle: every function of every distribution on a
grid of points and parameters (including values outside the support and invalid
parameters), dtypes and weak types, x64, gradients, and the array statistics / KDE."""

import inspect
import itertools
import os

import numpy as np
import pytest

import ember
import ember.numpy as jnp
import ember.scipy.stats as st
from ember.test_util import check_grads

NAN, INF = np.nan, np.inf
X = [-INF, -3.0, -1.0, -0.5, 0.0, 0.3, 0.5, 1.0, 1.5, 2.0, 4.0, INF, NAN]
Q = [-0.1, 0.0, 0.01, 0.25, 0.5, 0.75, 0.99, 1.0, 1.1, NAN]
K = [-1.0, 0.0, 1.0, 2.0, 3.0, 5.0, 2.5, NAN]
LOC = [0.0, -0.5]
SCALE = [1.0, 2.5, -1.0]

# module -> (points of the first argument for density/CDF functions, values of each other
# required parameter, loc values or None, scale values or None)
SPECS = {
    "bernoulli": (K, [[0.3, 0.0, 1.0, -0.2]], LOC, None),
    "beta": (X, [[0.5, 2.0, -1.0], [0.7, 3.0, -2.0]], LOC, SCALE),
    "betabinom": (K, [[0.0, 4.0, -1.0], [0.5, 2.0, -1.0], [0.7, 3.0]], LOC, None),
    "binom": (K, [[0.0, 4.0, 6.0], [0.3, 0.0, 1.0]], LOC, None),
    "cauchy": (X, [], LOC, SCALE),
    "chi2": (X, [[1.0, 2.5, 5.0]], LOC, SCALE[:2]),
    "expon": (X, [], LOC, SCALE),
    "gamma": (X, [[0.5, 1.0, 3.0]], LOC, SCALE[:2]),
    "gennorm": (X, [[0.5, 1.0, 2.0, 3.5]], None, None),
    "geom": (K, [[0.3, 1.0, 0.01]], LOC, None),
    "gumbel_l": (X, [], LOC, SCALE),
    "gumbel_r": (X, [], LOC, SCALE),
    "laplace": (X, [], LOC, SCALE),
    "logistic": (X, [], LOC, SCALE),
    "nbinom": (K, [[1.0, 2.5, 5.0], [0.3, 0.8]], LOC, None),
    "norm": (X, [], LOC, SCALE),
    "pareto": (X, [[0.5, 2.0, 3.0]], LOC, SCALE[:2]),
    "poisson": (K, [[0.5, 3.0, 0.0]], LOC, None),
    "t": (X, [[1.0, 2.5, 30.0]], LOC, SCALE),
    "truncnorm": (X, [[-1.0, 0.5, -INF, 2.0], [1.0, 2.0, INF, -3.0]], LOC, SCALE[:2]),
    "uniform": (X, [], LOC, SCALE),
    "vonmises": ([-4.0, -1.0, 0.0, 0.5, 2.0, 3.0, 7.0], [[0.5, 2.0, 30.0, -1.0]], None, None),
    "wrapcauchy": ([-1.0, 0.0, 0.5, 2.0, 6.0, 7.0], [[0.1, 0.5, 0.9, 1.0, -0.5]], None, None),
}
# Looser tolerances where the special functions are series / continued fractions (both
# implementations accurate to a few float32 ulps, but not bit-identical).
TOL = {"beta": 2e-4, "betabinom": 2e-4, "chi2": 2e-4, "gamma": 2e-4, "gennorm": 2e-4,
       "truncnorm": 1e-4, "poisson": 2e-4, "t": 2e-5}
QUANTILES = ("ppf", "isf")
GRID = 840
SCALAR_FUNCS = [(m, f) for m in SPECS for f in getattr(st, m).__all__ if f != "entropy"]


def _grid(mod, fn):
    first, params, locs, scales = SPECS[mod]
    sig = inspect.signature(getattr(getattr(st, mod), fn))
    names = list(sig.parameters)
    n_req = sum(p.default is inspect.Parameter.empty for p in sig.parameters.values())
    lists = [Q if fn in QUANTILES else first] + params[:n_req - 1]
    if "loc" in names and locs is not None:
        lists.append(locs)
    if "scale" in names and scales is not None:
        lists.append(scales)
    cols = zip(*itertools.product(*lists))
    # One length for every grid (repeating points) lets JAX reuse its compiled operations.
    return [np.resize(np.array(c, np.float32), GRID) for c in cols]


def _check(got, want, tol):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape,
                                                                 got.dtype, want.dtype)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                               atol=tol)


@pytest.fixture(scope="module")
def jst(jax):
    """``jax.scipy.stats``, with JAX's persistent compilation cache on: compiling JAX's
    operations dominates this file's time, and the cache makes repeated runs fast (the
    directory is the one tests/test_jax_oracle.py uses)."""
    cache = os.environ.get("EMBER_JAX_ORACLE_CACHE",
                           os.path.join(os.path.expanduser("~"), ".cache", "ember-jax-oracle"))
    if cache:
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    import jax.scipy.stats

    return jax.scipy.stats


@pytest.mark.parametrize("mod,fn", SCALAR_FUNCS, ids=[f"{m}.{f}" for m, f in SCALAR_FUNCS])
def test_against_jax(jst, mod, fn):
    args = _grid(mod, fn)
    got = getattr(getattr(st, mod), fn)(*args)
    want = getattr(getattr(jst, mod), fn)(*args)
    _check(got, want, TOL.get(mod, 1e-5))
    # Python scalars: weak types must match too.
    scalars = [float(a[len(a) // 3]) for a in args]
    g = getattr(getattr(st, mod), fn)(*scalars)
    w = getattr(getattr(jst, mod), fn)(*scalars)
    assert g.dtype == w.dtype and g.aval.weak_type == w.aval.weak_type, (g, w)
    np.testing.assert_allclose(float(g), float(w), rtol=TOL.get(mod, 1e-5), atol=1e-6)


def _same(got, want, tol=1e-5):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape,
                                                                 got.dtype, want.dtype)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                               atol=tol)


def test_multivariate_against_jax(jst):
    rng = np.random.default_rng(0)
    x = rng.dirichlet([1, 2, 3], size=4).T.astype(np.float32)
    x[:, 0] = [0.5, 0.6, -0.1]  # off the simplex: -inf
    alpha = np.array([0.5, 2.0, 3.0], np.float32)
    _same(st.dirichlet.logpdf(x, alpha), jst.dirichlet.logpdf(x, alpha))
    _same(st.dirichlet.pdf(x[:2], alpha), jst.dirichlet.pdf(x[:2], alpha))  # K-1 entries
    counts = np.array([[1, 2, 0], [0, 3, 0], [1, 1, 2]], np.int32)
    p = np.array([0.2, 0.5, 0.3], np.float32)
    _same(st.multinomial.logpmf(counts, 3, p), jst.multinomial.logpmf(counts, 3, p))
    _same(st.multinomial.pmf(counts[0], 3, p), jst.multinomial.pmf(counts[0], 3, p))
    m = rng.normal(size=3).astype(np.float32)
    a = rng.normal(size=(3, 3))
    cov = (a @ a.T + np.eye(3)).astype(np.float32)
    pts = rng.normal(size=(5, 3)).astype(np.float32)
    mvn, jmvn = st.multivariate_normal, jst.multivariate_normal
    _same(mvn.logpdf(pts, m, cov), jmvn.logpdf(pts, m, cov))
    _same(mvn.logpdf(pts, m, 2.0), jmvn.logpdf(pts, m, 2.0))  # isotropic
    _same(mvn.pdf(pts[:, 0], 0.5, 2.0), jmvn.pdf(pts[:, 0], 0.5, 2.0))  # one-dimensional
    covs = np.stack([cov, 2 * cov])
    _same(mvn.logpdf(pts[:2], m, covs), jmvn.logpdf(pts[:2], m, covs))  # batched covariances
    mu = np.array([0.0, 0.5, 3.0, 15.0, 50.0, 150.0], np.float32)
    _same(st.poisson.entropy(mu), jst.poisson.entropy(mu))
    _same(st.poisson.entropy(mu[:, None], np.zeros((1, 2), np.float32)),
          jst.poisson.entropy(mu[:, None], np.zeros((1, 2), np.float32)))


def test_bad_arguments():
    with pytest.raises(ValueError, match="one-dimensional"):
        st.dirichlet.logpdf(np.ones((2, 2)) / 2, np.ones((2, 2)))
    with pytest.raises(ValueError, match="one entry fewer"):
        st.dirichlet.logpdf(np.ones(5) / 5, np.ones(3))
    with pytest.raises(ValueError, match="integer type"):
        st.multinomial.logpmf(np.array([1.0, 2.0]), 3, np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="incompatible shapes"):
        st.multivariate_normal.logpdf(np.zeros(3), np.zeros(3), np.eye(2))
    with pytest.raises(NotImplementedError):
        st.multivariate_normal.logpdf(np.zeros(2), np.zeros(2), np.eye(2), allow_singular=True)
    with pytest.raises(TypeError, match="norm.logpdf"):
        st.norm.logpdf([0.0, 1.0])  # lists are not arrays, as in JAX
    with pytest.raises(ValueError, match="unknown method"):
        st.rankdata(np.arange(3.0), "middle")
    with pytest.raises(ValueError, match="nan_policy"):
        st.mode(np.arange(3.0), nan_policy="skip")
    with pytest.raises(NotImplementedError):
        st.rankdata(np.arange(3.0), nan_policy="omit")
    with pytest.raises(ValueError, match="dimension"):
        st.gaussian_kde(np.arange(6.0).reshape(2, 3)).evaluate(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="multiple elements"):
        st.gaussian_kde(np.ones(1))


def _mode_ref(a, axis, keepdims):
    """NumPy: np.unique's counts per slice (NaNs grouped, sorted last), first maximum."""
    a = np.atleast_1d(a)
    ax = None if axis is None else axis % a.ndim
    b = a.ravel()[:, None] if ax is None else np.moveaxis(a, ax, 0).reshape(a.shape[ax], -1)
    vals, counts = [], []
    for col in b.T:
        u, c = np.unique(col, return_counts=True)
        vals.append(u[np.argmax(c)])
        counts.append(c.max())
    if ax is None:
        shape = (1,) * a.ndim if keepdims else ()
    else:
        shape = tuple(1 if i == ax else d for i, d in enumerate(a.shape) if keepdims or i != ax)
    return np.array(vals, a.dtype).reshape(shape), np.array(counts, np.int32).reshape(shape)


def _rank_ref(v, method):
    """NumPy: ranks from counting smaller / not larger elements."""
    if np.isnan(v).any():
        return np.full(v.shape, np.nan, np.float32)
    lo = np.array([(v < x).sum() + 1 for x in v], np.float32)
    hi = np.array([(v <= x).sum() for x in v], np.float32)
    return {"min": lo, "max": hi, "average": (lo + hi) / 2,
            "dense": np.array([len(np.unique(v[v < x])) + 1 for x in v], np.float32),
            "ordinal": np.argsort(np.argsort(v, kind="stable"), kind="stable").astype(
                np.float32) + 1}[method]


def test_mode_rankdata_sem():
    rng = np.random.default_rng(1)
    arrays = [np.array([[1, 2, 2], [3, 3, 1]], np.int32),
              np.array([1.0, NAN, NAN, 2.0], np.float32),
              rng.integers(0, 4, (3, 4, 5)).astype(np.int32)]
    for a in arrays:
        for axis, keepdims in [(0, False), (-1, True), (None, False), (None, True)]:
            got = st.mode(a, axis=axis, keepdims=keepdims)
            want_mode, want_count = _mode_ref(a, axis, keepdims)
            _same(got.mode, want_mode)
            _same(got.count, want_count)
    empty = st.mode(np.zeros((0, 3), np.float32))  # JAX: NaN with a float count of 0
    assert np.isnan(empty.mode).all() and empty.count.dtype == np.float32
    r = rng.integers(0, 4, (3, 7)).astype(np.float32)
    r[2, 3] = NAN  # that row ranks as NaN
    for method in ["average", "min", "max", "dense", "ordinal"]:
        _same(st.rankdata(r[:2], method), _rank_ref(r[:2].ravel(), method))
        _same(st.rankdata(r, method, axis=1), np.stack([_rank_ref(row, method) for row in r]))
        _same(st.rankdata(r[:2], method, axis=0),
              np.stack([_rank_ref(col, method) for col in r[:2].T], axis=1))
    f = ember.jit(lambda x: st.rankdata(x, "min"))
    np.testing.assert_array_equal(f(np.array([4, 1, 4, 2, 2, 4, 7])), [4, 1, 4, 2, 2, 4, 7])
    for axis in [0, 1, None]:
        n = r[:2].size if axis is None else r[:2].shape[axis]
        want = np.std(r[:2], axis=axis, ddof=1) / np.sqrt(n)
        _same(st.sem(r[:2], axis=axis), np.asarray(want, np.float32))
    omit = st.sem(r, axis=1, ddof=0, nan_policy="omit", keepdims=True)
    want = [[np.nanstd(row) / np.sqrt((~np.isnan(row)).sum())] for row in r]
    _same(omit, np.array(want, np.float32))


def test_mode_rankdata_dtypes_against_jax(jst):
    a = np.array([[1, 2, 2], [3, 3, 1]])
    got, want = st.mode(a, axis=1), jst.mode(a, axis=1)
    _same(got.mode, want.mode)
    _same(got.count, want.count)
    _same(st.rankdata(a, "average", axis=0), jst.rankdata(a, "average", axis=0))


def test_gaussian_kde_against_jax(jax, jst):
    rng = np.random.default_rng(2)
    data = rng.normal(size=(2, 30)).astype(np.float32)
    w = rng.uniform(0.5, 1, 30).astype(np.float32)
    pts = rng.normal(size=(2, 7)).astype(np.float32)
    mean, cov = np.array([0.1, 0.2], np.float32), np.eye(2, dtype=np.float32)
    for bw in [None, "silverman", 0.3, lambda k: 0.5 * k.neff ** -0.2]:
        for weights in [None, w]:
            k, kj = st.gaussian_kde(data, bw, weights), jst.gaussian_kde(data, bw, weights)
            _same(k.evaluate(pts), kj.evaluate(pts))
            _same(k(pts), kj(pts))
            _same(k.logpdf(pts), kj.logpdf(pts))
            _same(k.covariance, kj.covariance)
            _same(k.integrate_gaussian(mean, cov), kj.integrate_gaussian(mean, cov))
            _same(k.integrate_kde(st.gaussian_kde(2 * data[:, :10])),
                  kj.integrate_kde(jst.gaussian_kde(2 * data[:, :10])))
    k1, kj1 = st.gaussian_kde(data[0]), jst.gaussian_kde(data[0])
    _same(k1.integrate_box_1d(-0.5, 1.0), kj1.integrate_box_1d(-0.5, 1.0))
    _same(k1.pdf(np.float32(0.3)), kj1.pdf(np.float32(0.3)))
    # The same random bits as JAX: the same samples.
    _same(k.resample(ember.random.key(1), (4,)), kj.resample(jax.random.key(1), (4,)))
    assert (k.d, k.n) == (2, 30)
    with pytest.raises(NotImplementedError):
        k.integrate_box(np.zeros(2), np.ones(2))
    with pytest.raises(AttributeError):
        k.dataset = data


def test_gaussian_kde_pytree_and_reference():
    rng = np.random.default_rng(3)
    data = rng.normal(size=40).astype(np.float32)
    kde = st.gaussian_kde(data)
    pts = np.linspace(-2, 2, 5, dtype=np.float32)
    # Reference: the mixture of normals with Scott's bandwidth, written out in NumPy.
    h = np.std(data.astype(np.float64), ddof=1) * 40 ** (-1 / 5)
    ref = np.mean(np.exp(-0.5 * ((pts[:, None] - data) / h) ** 2), axis=1) / (h * np.sqrt(2
                                                                              * np.pi))
    np.testing.assert_allclose(kde.evaluate(pts), ref, rtol=1e-4)
    np.testing.assert_allclose(ember.jit(lambda k, p: k.logpdf(p))(kde, pts), np.log(ref),
                               rtol=1e-4)
    leaves, tdef = ember.tree_util.tree_flatten(kde)
    assert len(leaves) == 5
    np.testing.assert_allclose(ember.tree_util.tree_unflatten(tdef, leaves).evaluate(pts), ref,
                               rtol=1e-4)


X64_CASES = [("norm", "logcdf", (np.array([-30.0, -3.0, 0.5, 4.0]),)),
             ("beta", "cdf", (np.array([0.1, 0.5, 0.9]), 2.5, 0.7)),
             ("t", "logpdf", (np.array([-3.0, 0.0, 2.0]), 4.5, 0.5, 2.0)),
             ("truncnorm", "logcdf", (np.array([-0.5, 0.2, 1.5]), -1.0, 2.0))]


def test_x64_against_jax(jax, jst, x64):
    jax.config.update("jax_enable_x64", True)
    try:
        for mod, fn, args in X64_CASES:
            got = getattr(getattr(st, mod), fn)(*args)
            want = getattr(getattr(jst, mod), fn)(*args)
            assert got.dtype == np.float64
            _same(got, want, 1e-10)
            # Python scalars stay weak float64... or strong, as JAX has them.
            scalars = [float(np.ravel(a)[0]) for a in args]
            g, w = getattr(getattr(st, mod), fn)(*scalars), getattr(getattr(jst, mod), fn)(
                *scalars)
            assert g.dtype == w.dtype and g.aval.weak_type == w.aval.weak_type
    finally:
        jax.config.update("jax_enable_x64", False)


GRAD_CASES = [  # (function of the differentiated arguments, arguments inside the support)
    (st.norm.logpdf, (0.3, -0.2, 1.4)),
    (st.t.logpdf, (0.3, 3.5, 0.1, 1.2)),
    (st.beta.logpdf, (0.4, 2.5, 1.7)),
    (st.gamma.logpdf, (1.3, 2.5, 0.0, 1.5)),
    (st.chi2.logpdf, (1.3, 3.5)),
    (st.cauchy.logpdf, (0.4, 0.1, 2.0)),
    (st.laplace.logpdf, (0.4, 0.1, 2.0)),
    (st.logistic.logpdf, (0.4, 0.1, 2.0)),
    (st.expon.logpdf, (1.4, 0.1, 2.0)),
    (st.pareto.logpdf, (2.4, 1.5)),
    (st.gumbel_r.logpdf, (0.4, 0.1, 2.0)),
    (st.gumbel_l.logpdf, (0.4, 0.1, 2.0)),
    (st.gennorm.logpdf, (0.4, 1.5)),
    (st.vonmises.logpdf, (0.4, 1.5)),
    (st.wrapcauchy.logpdf, (0.4, 0.5)),
    (st.truncnorm.logpdf, (0.3, -1.0, 1.5, 0.1, 1.2)),
    (st.norm.logcdf, (-2.3,)),
    (st.norm.ppf, (0.3,)),
]


def _poisson_logpmf_of_mu(mu):
    return st.poisson.logpmf(3.0, mu)


GRAD_CASES.append((_poisson_logpmf_of_mu, (2.5,)))


@pytest.mark.parametrize("fn,args", GRAD_CASES, ids=[f"{f.__module__.split('.')[-1]}."
                                                     f"{f.__name__}" for f, _ in GRAD_CASES])
def test_grads(fn, args, x64):
    # float64 so that second finite differences are accurate.
    check_grads(fn, tuple(np.float64(a) for a in args), order=2, modes=("fwd", "rev"))


def test_jit_and_vmap_match_eager():
    x = np.linspace(-2, 3, 12, dtype=np.float32)
    df = np.array([1.5, 4.0, 30.0], np.float32)
    eager = st.t.logpdf(x[:, None], df)
    np.testing.assert_allclose(ember.jit(st.t.logpdf)(x[:, None], df), eager, rtol=1e-6)
    np.testing.assert_allclose(ember.vmap(st.t.logpdf, in_axes=(None, 0), out_axes=1)(
        x[:, None][:, 0], df), eager, rtol=1e-6)
    mvn = ember.vmap(lambda p: st.multivariate_normal.logpdf(p, jnp.zeros(2), jnp.eye(2)))
    pts = np.array([[0.0, 0.0], [1.0, 2.0]], np.float32)
    np.testing.assert_allclose(mvn(pts), -np.log(2 * np.pi) - 0.5 * (pts ** 2).sum(1),
                               rtol=1e-6)
