"""The JVP and transpose rules of the lax primitives, called directly (no tracing).

Every JVP rule is checked against central finite differences in float64; every transpose rule
against the dot-product identity <ct, L(t)> == <L^T(ct), t> for its linear map L. The
primitives without derivatives (comparisons, rounding, bitwise ops, argmax, ...) must give
symbolic zero tangents.
"""

import numpy as np
import pytest

import ember
import ember.lax.ad_util  # noqa: F401 - sets the ad hooks (zeros, add_any)
from ember import lax
from ember.interpreters import ad
from ember.lax import GatherDimensionNumbers as GDN
from ember.lax import GatherScatterMode as Mode
from ember.lax import ScatterDimensionNumbers as SDN
from ember.lax.dot import dot_general_p
from ember.lax.elementwise import RoundingMethod


@pytest.fixture(autouse=True)
def _x64():
    previous = ember.config.jax_enable_x64
    ember.config.update("jax_enable_x64", True)
    yield
    ember.config.update("jax_enable_x64", previous)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _arr(x):
    return np.asarray(x)


def _is_float(x) -> bool:
    return np.asarray(x).dtype.kind in "fc"


def _tangent(x, rng):
    x = np.asarray(x)
    t = rng.normal(size=x.shape)
    if x.dtype.kind == "c":
        t = t + 1j * rng.normal(size=x.shape)
    return t.astype(x.dtype)


def _listify(out, multiple):
    return [np.asarray(o) for o in out] if multiple else [np.asarray(out)]


def check_jvp(prim, args, params=None, diff=None, eps=1e-6, tol=1e-6, seed=0):
    """prim.jvp against central differences along random tangents of the ``diff`` args."""
    params = params or {}
    rng = _rng(seed)
    diff = [i for i, a in enumerate(args) if _is_float(a)] if diff is None else diff
    tangents = [_tangent(a, rng) if i in diff else ad.Zero.from_primal_value(a)
                for i, a in enumerate(args)]
    out, t_out = prim.jvp(list(args), tangents, **params)
    multiple = prim.multiple_results
    expected = _listify(prim.bind(*args, **params), multiple)
    outs, t_outs = _listify(out, multiple), (t_out if multiple else [t_out])
    for o, e in zip(outs, expected):
        np.testing.assert_array_equal(o, e)

    def shifted(sign):
        moved = [a + sign * eps * t if i in diff else a
                 for i, (a, t) in enumerate(zip(args, tangents))]
        return _listify(prim.bind(*moved, **params), multiple)

    plus, minus = shifted(1.0), shifted(-1.0)
    for o, t, p, m in zip(outs, t_outs, plus, minus):
        numeric = (p.astype(np.complex128 if p.dtype.kind == "c" else np.float64) - m) / (2 * eps)
        if type(t) is ad.Zero:
            assert not _is_float(o) or np.allclose(numeric, 0), numeric
            continue
        t = np.asarray(t)
        assert t.shape == o.shape and t.dtype == o.dtype, (t.shape, t.dtype, o.shape, o.dtype)
        scale = max(1.0, float(np.max(np.abs(numeric), initial=0.0)))
        np.testing.assert_allclose(t, numeric, rtol=tol, atol=tol * scale)


def check_transpose(prim, args, linear, params=None, seed=1, tol=1e-10):
    """<ct, L(t)> == sum_i <L^T(ct)_i, t_i> for the map L of the ``linear`` args.

    JAX's convention for complex values: <a, b> = re(sum(a * b)) (no conjugation), so
    real-linear maps such as ``real`` or ``conj`` transpose too.
    """
    params = params or {}
    rng = _rng(seed)
    ts = {i: _tangent(args[i], rng) for i in linear}
    if prim.name not in BILINEAR:  # linear in all float operands: the others are zero here
        args = [np.zeros_like(a) if _is_float(a) and i not in linear else a
                for i, a in enumerate(args)]
    applied = prim.bind(*[ts.get(i, a) for i, a in enumerate(args)], **params)
    outs = _listify(applied, prim.multiple_results)
    cts = [_tangent(o, rng) for o in outs]
    undefined = [ad.UndefinedPrimal(ember.core.get_aval(ts[i])) if i in linear else a
                 for i, a in enumerate(args)]
    result = prim.transpose(cts if prim.multiple_results else cts[0], *undefined, **params)
    assert len(result) == len(args)
    lhs = sum(np.sum(c * o) for c, o in zip(cts, outs))
    rhs = 0.0
    for i, r in enumerate(result):
        if i not in linear:
            assert r is None, (i, r)
            continue
        r = np.asarray(r)
        assert r.shape == np.shape(args[i]) and r.dtype == np.asarray(args[i]).dtype, (
            i, r.shape, r.dtype)
        rhs += np.sum(r * ts[i])
    np.testing.assert_allclose(np.real(rhs), np.real(lhs), rtol=tol, atol=tol)


BILINEAR = {"mul", "div", "dot_general", "scatter-mul"}


def check_zero_jvp(prim, args, params=None):
    tangents = [ad.Zero.from_primal_value(a) for a in args]
    if any(_is_float(a) for a in args):
        tangents = [_tangent(a, _rng()) if _is_float(a) else t for a, t in zip(args, tangents)]
    out, t_out = prim.jvp(list(args), tangents, **(params or {}))
    for o, t in zip(*((out, t_out) if prim.multiple_results else ([out], [t_out]))):
        assert type(t) is ad.Zero and t.aval.shape == np.shape(o)


R = _rng(42)


def normal(*shape):
    return R.normal(size=shape) * 1.5


def uniform(lo, hi, *shape):
    return R.uniform(lo, hi, size=shape)


def away_from_zero(*shape):
    return uniform(0.5, 2.0, *shape) * R.choice([-1.0, 1.0], size=shape)


# ---------------------------------------------------------------- elementwise JVPs

UNARY = [
    ("sin", normal), ("cos", normal), ("tan", lambda *s: uniform(-1.2, 1.2, *s)),
    ("asin", lambda *s: uniform(-0.9, 0.9, *s)), ("acos", lambda *s: uniform(-0.9, 0.9, *s)),
    ("atan", normal), ("sinh", normal), ("cosh", normal), ("tanh", normal),
    ("asinh", normal), ("acosh", lambda *s: uniform(1.1, 4.0, *s)),
    ("atanh", lambda *s: uniform(-0.9, 0.9, *s)), ("exp", normal), ("exp2", normal),
    ("expm1", normal), ("log", lambda *s: uniform(0.1, 4.0, *s)),
    ("log1p", lambda *s: uniform(-0.5, 4.0, *s)), ("sqrt", lambda *s: uniform(0.1, 4.0, *s)),
    ("rsqrt", lambda *s: uniform(0.1, 4.0, *s)), ("cbrt", away_from_zero),
    ("logistic", normal), ("erf", normal), ("erfc", normal),
    ("erf_inv", lambda *s: uniform(-0.9, 0.9, *s)),
    ("lgamma", lambda *s: uniform(0.1, 6.0, *s)), ("abs", away_from_zero), ("square", normal),
    ("neg", normal), ("copy", normal),
]


@pytest.mark.parametrize("shape", [(), (2, 3)])
@pytest.mark.parametrize("name,draw", UNARY, ids=[u[0] for u in UNARY])
def test_unary_jvp(name, draw, shape):
    prim = getattr(lax, f"{name}_p") if hasattr(lax, f"{name}_p") else getattr(
        lax.elementwise, f"{name}_p")
    check_jvp(prim, [draw(*shape)])


def test_digamma_jvp_uses_trigamma():
    # Both branches of the trigamma helper: reflection below 0.5, recurrence + series above.
    x = np.array([-2.7, -0.4, 0.05, 0.3, 0.9, 2.5, 7.9, 12.0, 150.0])
    check_jvp(lax.digamma_p, [x], tol=1e-6)
    _, t = lax.digamma_p.jvp([x], [np.ones_like(x)])
    # Independent values of polygamma(1, x) (series sum_k 1/(x+k)^2, Euler-Maclaurin tail).
    def trigamma(v):
        n = 20000
        head = sum(1.0 / (v + k) ** 2 for k in range(n))
        w = v + n
        return head + 1 / w + 1 / (2 * w * w) + 1 / (6 * w ** 3)
    np.testing.assert_allclose(np.asarray(t), [trigamma(v) for v in x], rtol=1e-10)
    # Poles (0, negative integers, -inf): inf, as polygamma(1, x) and JAX give (sin(pi x)
    # rounds to a tiny nonzero value there); +inf: 0.
    poles = np.array([0.0, -1.0, -7.0, -1e30, -np.inf, np.inf], np.float32)
    _, t = lax.digamma_p.jvp([poles], [np.ones_like(poles)])
    np.testing.assert_array_equal(np.asarray(t), [np.inf] * 5 + [0.0])


@pytest.mark.parametrize("y", [-3, -1, 0, 1, 2, 5])
def test_integer_pow_jvp(y):
    check_jvp(lax.integer_pow_p, [away_from_zero(2, 3)], {"y": y})


BINARY_SHAPES = [((3,), (3,)), ((), (2, 3)), ((2, 3), ())]
BINARY = [
    ("add", normal, normal), ("sub", normal, normal), ("mul", normal, normal),
    ("div", normal, away_from_zero), ("rem", lambda *s: uniform(0.2, 0.8, *s) * 3.0,
                                      lambda *s: uniform(0.9, 1.1, *s)),
    ("atan2", away_from_zero, away_from_zero),
    ("pow", lambda *s: uniform(0.2, 3.0, *s), normal),
    ("max", normal, normal), ("min", normal, normal),
]


@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("name,dx,dy", BINARY, ids=[b[0] for b in BINARY])
def test_binary_jvp(name, dx, dy, shapes):
    prim = getattr(lax, f"{name}_p")
    x, y = dx(*shapes[0]), dy(*shapes[1])
    check_jvp(prim, [x, y])
    check_jvp(prim, [x, y], diff=[0])
    check_jvp(prim, [x, y], diff=[1])


def test_max_min_split_ties_evenly():
    x = np.array([1.0, 2.0, 3.0])
    y = np.array([1.0, 0.0, 5.0])
    _, t = lax.max_p.jvp([x, y], [np.ones(3), np.zeros(3)])
    np.testing.assert_array_equal(np.asarray(t), [0.5, 1.0, 0.0])
    _, t = lax.min_p.jvp([x, y], [np.zeros(3), np.ones(3)])
    np.testing.assert_array_equal(np.asarray(t), [0.5, 1.0, 0.0])


def test_abs_slope_at_zero_is_one_as_in_jax():
    _, t = lax.abs_p.jvp([np.array([0.0, -1.0])], [np.array([1.0, 1.0])])
    np.testing.assert_array_equal(np.asarray(t), [1.0, -1.0])


def test_pow_integer_exponent_jvp():
    x = uniform(0.5, 2.0, 2, 3)
    for y in (np.array([[0, 1, 2], [3, -1, -2]], np.int32), np.array(3, np.int32)):
        check_jvp(lax.pow_p, [x, y])
    _, t = lax.pow_p.jvp([np.array([0.0, 2.0]), np.array([0, 0], np.int32)],
                         [np.ones(2), ad.Zero.from_primal_value(np.zeros(2, np.int32))])
    np.testing.assert_array_equal(np.asarray(t), [0.0, 0.0])


@pytest.mark.parametrize("shapes", [((), (2, 3), ()), ((4,), (4,), (4,))], ids=str)
def test_clamp_jvp(shapes):
    lo = np.full(shapes[0], -0.5)
    hi = np.full(shapes[2], 0.7)
    x = np.linspace(-1.3, 1.4, int(np.prod(shapes[1]))).reshape(shapes[1])
    check_jvp(lax.clamp_p, [lo, x, hi])
    # JAX's conventions: the bound that is active gets the tangent; ties give zero.
    _, t = lax.clamp_p.jvp([np.float64(0.0), np.array([0.0, 0.5, 1.0, -1.0, 2.0]),
                            np.float64(1.0)], [np.float64(1.0), np.zeros(5), np.float64(10.0)])
    np.testing.assert_array_equal(np.asarray(t), [0.0, 0.0, 0.0, 1.0, 10.0])


def test_select_n_jvp():
    which = np.array([True, False, True])
    check_jvp(lax.select_n_p, [which, normal(3), normal(3)])
    check_jvp(lax.select_n_p, [np.array(True), normal(2, 2), normal(2, 2)])
    check_jvp(lax.select_n_p, [np.array([0, 2, 1], np.int32), normal(3), normal(3), normal(3)],
              diff=[2])


def test_complex_parts_jvp():
    z = normal(3) + 1j * normal(3)
    check_jvp(lax.real_p, [z])
    check_jvp(lax.imag_p, [z])
    check_jvp(lax.complex_p, [normal(3), normal(3)])
    check_jvp(lax.complex_p, [normal(), normal(3)])
    check_jvp(lax.conj_p, [z], {"input_dtype": z.dtype})
    check_jvp(lax.conj_p, [normal(3)], {"input_dtype": np.dtype("float64")})
    for name in ("sin", "exp", "log", "sqrt", "tanh"):
        check_jvp(getattr(lax, f"{name}_p"), [uniform(0.5, 2, 3) + 1j * uniform(0.5, 2, 3)])
    check_jvp(lax.abs_p, [z])


def test_convert_element_type_jvp():
    x = normal(2, 3).astype(np.float32)
    # (linear, so any step is exact but for rounding x + eps*t to float32, ~|x| 6e-8 / eps:
    # a large step keeps that far below tol whatever values the shared generator gives)
    check_jvp(lax.convert_element_type_p, [x],
              {"new_dtype": np.dtype("float64"), "weak_type": False}, eps=0.25, tol=1e-5)
    check_zero_jvp(lax.convert_element_type_p, [normal(3)],
                   {"new_dtype": np.dtype("int32"), "weak_type": False})
    out, t = lax.convert_element_type_p.jvp(
        [np.arange(3, dtype=np.int32)], [ad.Zero.from_primal_value(np.arange(3, dtype=np.int32))],
        new_dtype=np.dtype("float64"), weak_type=False)
    assert type(t) is ad.Zero


ZERO_UNARY = [("sign", {}), ("floor", {}), ("ceil", {}), ("is_finite", {}),
              ("round", {"rounding_method": RoundingMethod.TO_NEAREST_EVEN})]
ZERO_BINARY = ["eq", "ne", "lt", "le", "gt", "ge"]


def test_zero_jvps():
    for name, params in ZERO_UNARY:
        check_zero_jvp(getattr(lax, f"{name}_p"), [normal(3)], params)
    for name in ZERO_BINARY:
        check_zero_jvp(getattr(lax, f"{name}_p"), [normal(3), normal(3)])
    ints = np.array([1, 5, 7], np.int32)
    for name in ("not", "population_count", "clz"):
        check_zero_jvp(getattr(lax, f"{name}_p"), [ints])
    for name in ("and", "or", "xor", "shift_left", "shift_right_logical",
                 "shift_right_arithmetic"):
        check_zero_jvp(getattr(lax, f"{name}_p"), [ints, np.array([1, 2, 0], np.int32)])
    for name in ("reduce_and", "reduce_or", "reduce_xor"):
        check_zero_jvp(getattr(lax, f"{name}_p"), [ints], {"axes": (0,)})
    for name in ("argmax", "argmin"):
        check_zero_jvp(getattr(lax, f"{name}_p"), [normal(2, 3)],
                       {"axes": (1,), "index_dtype": np.dtype("int32")})
    assert lax.nextafter_p.jvp is None  # JAX defines no rule either


# ---------------------------------------------------------------- elementwise transposes


@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
def test_binary_transposes(shapes):
    x, y = normal(*shapes[0]), normal(*shapes[1])
    for name in ("add", "sub", "complex"):
        check_transpose(getattr(lax, f"{name}_p"), [x, y], [0, 1])
    for name in ("add", "sub", "mul", "div", "complex"):
        check_transpose(getattr(lax, f"{name}_p"), [x, y], [0])
    for name in ("add", "sub", "mul"):
        check_transpose(getattr(lax, f"{name}_p"), [x, y], [1])


def test_unary_transposes():
    x = normal(2, 3)
    z = x + 1j * normal(2, 3)
    for prim in (lax.neg_p, lax.copy_p):
        check_transpose(prim, [x], [0])
    check_transpose(lax.real_p, [z], [0])
    check_transpose(lax.imag_p, [z], [0])
    check_transpose(lax.conj_p, [z], [0], {"input_dtype": z.dtype})
    check_transpose(lax.conj_p, [x], [0], {"input_dtype": x.dtype})
    check_transpose(lax.reduce_precision_p, [x], [0], {"exponent_bits": 8,
                                                       "mantissa_bits": 23}, tol=1e-6)
    check_transpose(lax.convert_element_type_p, [x.astype(np.float32)], [0],
                    {"new_dtype": np.dtype("float64"), "weak_type": False}, tol=1e-5)


def test_select_n_transpose():
    check_transpose(lax.select_n_p, [np.array([True, False, True]), normal(3), normal(3)],
                    [1, 2])
    check_transpose(lax.select_n_p, [np.array([0, 2, 1, 1], np.int32), normal(4), normal(4),
                                     normal(4)], [2])


def test_transpose_rejects_nonlinear_operands():
    u = ad.UndefinedPrimal(ember.core.ShapedArray((3,), np.float64))
    with pytest.raises(ValueError, match="mul"):
        lax.mul_p.transpose(np.ones(3), u, u)
    with pytest.raises(ValueError, match="div"):
        lax.div_p.transpose(np.ones(3), np.ones(3), u)


def test_zero_cotangent_gives_zeros():
    u = ad.UndefinedPrimal(ember.core.ShapedArray((3,), np.float64))
    cts = lax.mul_p.transpose(ad.Zero(u.aval), u, np.ones(3))
    assert type(cts[0]) is ad.Zero and cts[1] is None


# ---------------------------------------------------------------- reductions


def _reduce_params(axes):
    return {"axes": axes}


@pytest.mark.parametrize("axes", [(0,), (1,), (0, 2), ()], ids=str)
def test_reduction_jvps(axes):
    x = normal(3, 4, 2)
    for prim in (lax.reduce_sum_p, lax.reduce_max_p, lax.reduce_min_p, lax.reduce_prod_p):
        check_jvp(prim, [x], _reduce_params(axes))
    check_transpose(lax.reduce_sum_p, [x], [0], _reduce_params(axes))


def test_reduce_prod_jvp_with_zeros():
    x = np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 4.0]])
    check_jvp(lax.reduce_prod_p, [x], {"axes": (1,)})
    _, t = lax.reduce_prod_p.jvp([x], [np.ones_like(x)], axes=(1,))
    np.testing.assert_allclose(np.asarray(t), [6.0, 0.0])
    check_jvp(lax.reduce_prod_p, [np.zeros((0, 3))], {"axes": (0,)})


def test_reduce_max_averages_ties():
    x = np.array([1.0, 3.0, 3.0])
    _, t = lax.reduce_max_p.jvp([x], [np.array([1.0, 2.0, 4.0])], axes=(0,))
    np.testing.assert_allclose(np.asarray(t), 3.0)


CUMULATIVE = ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("name", CUMULATIVE)
def test_cumulative_jvps(name, axis, reverse):
    x = normal(5, 7)
    check_jvp(getattr(lax, f"{name}_p"), [x], {"axis": axis, "reverse": reverse})


def test_cumulative_special_values():
    x = np.array([2.0, 0.0, 3.0, 0.0, 5.0])
    check_jvp(lax.cumprod_p, [x], {"axis": 0, "reverse": False})
    check_jvp(lax.cumprod_p, [x], {"axis": 0, "reverse": True})
    big = np.array([800.0, 1.0, 799.0, -900.0])  # exp would overflow: the rule must not
    check_jvp(lax.cumlogsumexp_p, [big], {"axis": 0, "reverse": False})
    # JAX's tie convention for cummax: half of each.
    _, t = lax.cummax_p.jvp([np.array([1.0, 3.0, 3.0, 2.0])], [np.array([1.0, 2.0, 4.0, 8.0])],
                            axis=0, reverse=False)
    np.testing.assert_allclose(np.asarray(t), [1.0, 2.0, 3.0, 3.0])


@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_transpose(reverse):
    check_transpose(lax.cumsum_p, [normal(4, 5)], [0], {"axis": 1, "reverse": reverse})


# ---------------------------------------------------------------- dot_general


DOT_CASES = [
    ((2, 3), (3, 4), (((1,), (0,)), ((), ()))),
    ((3,), (3,), (((0,), (0,)), ((), ()))),
    ((2, 3), (4,), (((), ()), ((), ()))),
    ((5, 2, 3), (5, 3, 4), (((2,), (1,)), ((0,), (0,)))),
    ((3, 5, 2, 4), (4, 6, 5, 3), (((3, 0), (0, 3)), ((1,), (2,)))),
    ((2, 3, 4), (4, 3, 2), (((1, 2), (1, 0)), ((), ()))),
]


@pytest.mark.parametrize("lshape,rshape,dn", DOT_CASES, ids=str)
def test_dot_general_rules(lshape, rshape, dn):
    params = {"dimension_numbers": dn, "precision": None, "preferred_element_type": None}
    x, y = normal(*lshape), normal(*rshape)
    check_jvp(dot_general_p, [x, y], params)
    check_transpose(dot_general_p, [x, y], [0], params)
    check_transpose(dot_general_p, [x, y], [1], params)


def test_dot_general_transpose_with_preferred_element_type():
    params = {"dimension_numbers": (((1,), (0,)), ((), ())), "precision": None,
              "preferred_element_type": np.dtype("float64")}
    x, y = normal(2, 3).astype(np.float32), normal(3, 4).astype(np.float32)
    check_transpose(dot_general_p, [x, y], [0], params, tol=1e-5)
    check_transpose(dot_general_p, [x, y], [1], params, tol=1e-5)


# ---------------------------------------------------------------- shape primitives


SHAPE_CASES = [
    (lax.broadcast_in_dim_p, [(3,)], {"shape": (2, 3), "broadcast_dimensions": (1,)}),
    (lax.broadcast_in_dim_p, [(1, 3)], {"shape": (4, 2, 3), "broadcast_dimensions": (1, 2)}),
    (lax.broadcast_in_dim_p, [(1, 1)], {"shape": (1, 5), "broadcast_dimensions": (0, 1)}),
    (lax.broadcast_in_dim_p, [()], {"shape": (2, 2), "broadcast_dimensions": ()}),
    (lax.reshape_p, [(2, 6)], {"new_sizes": (3, 4), "dimensions": None}),
    (lax.reshape_p, [(2, 3, 4)], {"new_sizes": (4, 6), "dimensions": (2, 0, 1)}),
    (lax.squeeze_p, [(1, 3, 1)], {"dimensions": (0, 2)}),
    (lax.transpose_p, [(2, 3, 4)], {"permutation": (2, 0, 1)}),
    (lax.rev_p, [(3, 4)], {"dimensions": (1,)}),
    (lax.rev_p, [(3, 4)], {"dimensions": (0, 1)}),
    (lax.pad_p, [(3, 4), ()], {"padding_config": ((1, 2, 0), (0, 1, 2))}),
    (lax.pad_p, [(5, 4), ()], {"padding_config": ((-1, 2, 1), (2, -3, 0))}),
    (lax.pad_p, [(0, 2), ()], {"padding_config": ((1, 1, 3), (0, 0, 0))}),
    (lax.concatenate_p, [(2, 3), (4, 3), (1, 3)], {"dimension": 0}),
    (lax.concatenate_p, [(2, 1), (2, 3)], {"dimension": 1}),
    (lax.slice_p, [(5, 6)], {"start_indices": (1, 0), "limit_indices": (4, 6),
                             "strides": None}),
    (lax.slice_p, [(7, 6)], {"start_indices": (1, 2), "limit_indices": (6, 5),
                             "strides": (2, 3)}),
    (lax.slice_p, [(7, 3)], {"start_indices": (2, 1), "limit_indices": (2, 3),
                             "strides": (3, 1)}),
]


@pytest.mark.parametrize("prim,shapes,params", SHAPE_CASES,
                         ids=[f"{c[0].name}-{i}" for i, c in enumerate(SHAPE_CASES)])
def test_shape_rules(prim, shapes, params):
    args = [normal(*s) for s in shapes]
    check_jvp(prim, args, params)
    n = len(args)
    check_transpose(prim, args, list(range(n)), params)
    for i in range(n):
        if n > 1:
            check_transpose(prim, args, [i], params)


# ---------------------------------------------------------------- dynamic slicing


@pytest.mark.parametrize("start", [(1, 2), (-1, 0), (3, 9)], ids=str)
def test_dynamic_slice_rules(start):
    x = normal(4, 5)
    idx = [np.int32(s) for s in start]
    params = {"slice_sizes": (2, 3)}
    check_jvp(lax.dynamic_slice_p, [x, *idx], params)
    check_transpose(lax.dynamic_slice_p, [x, *idx], [0], params)
    u = normal(2, 3)
    check_jvp(lax.dynamic_update_slice_p, [x, u, *idx])
    check_jvp(lax.dynamic_update_slice_p, [x, u, *idx], diff=[1])
    for linear in ([0], [1], [0, 1]):
        check_transpose(lax.dynamic_update_slice_p, [x, u, *idx], linear)


# ---------------------------------------------------------------- gather / scatter


def _gather_params(dn, sizes, mode, fill=None):
    return {"dimension_numbers": dn, "slice_sizes": sizes, "indices_are_sorted": False,
            "unique_indices": False, "mode": mode, "fill_value": fill}


def _scatter_params(dn, mode, unique=False):
    return {"dimension_numbers": dn, "indices_are_sorted": False, "unique_indices": unique,
            "mode": mode, "update_jaxpr": None, "update_consts": ()}


GATHERS = [
    # rows of a matrix (x[idx]), with an out-of-bounds index
    ((5, 3), np.array([[4], [0], [2], [7]], np.int32), GDN((1,), (0,), (0,)), (1, 3)),
    # windows of 2x2
    ((4, 5), np.array([[0, 1], [2, 3], [1, 1]], np.int32), GDN((1, 2), (), (0, 1)), (2, 2)),
    # single elements, repeated
    ((3, 4), np.array([[1, 2], [1, 2], [0, 0]], np.int32), GDN((), (0, 1), (0, 1)), (1, 1)),
    # batched (take_along_axis style)
    ((3, 4), np.array([[[1]], [[3]], [[0]]], np.int32),
     GDN((2,), (), (1,), operand_batching_dims=(0,), start_indices_batching_dims=(0,)),
     (1, 1)),
]


@pytest.mark.parametrize("mode", [Mode.CLIP, Mode.FILL_OR_DROP, Mode.PROMISE_IN_BOUNDS],
                         ids=str)
@pytest.mark.parametrize("shape,idx,dn,sizes", GATHERS, ids=[str(i) for i in range(len(GATHERS))])
def test_gather_rules(shape, idx, dn, sizes, mode):
    params = _gather_params(dn, sizes, mode, None)
    x = normal(*shape)
    linear_params = _gather_params(dn, sizes, mode, 0 if mode == Mode.FILL_OR_DROP else None)
    out, t = lax.gather_p.jvp([x, idx], [np.ones_like(x), ad.Zero.from_primal_value(idx)],
                              **params)
    assert np.isfinite(np.asarray(t)).all()  # out-of-bounds windows get tangent 0, not NaN
    clipped = lax.gather_p.bind(x, idx, **_gather_params(dn, sizes, Mode.CLIP, None))
    filled = lax.gather_p.bind(x, idx, **_gather_params(dn, sizes, Mode.FILL_OR_DROP, None))
    in_bounds = np.array_equal(np.asarray(clipped), np.asarray(filled))
    # (PROMISE_IN_BOUNDS clamps a gather but its transpose, a scatter, drops, as in JAX: the
    # exact adjoint only while every index is in bounds.)
    if mode != Mode.PROMISE_IN_BOUNDS or in_bounds:
        check_transpose(lax.gather_p, [x, idx], [0], linear_params)  # as in JVPs: fill 0
    if mode != Mode.FILL_OR_DROP:
        check_jvp(lax.gather_p, [x, idx], params)


SCATTERS = [
    # rows, with a repeated and an out-of-bounds index
    ((5, 3), np.array([[4], [1], [1], [9]], np.int32), SDN((1,), (0,), (0,)), (4, 3)),
    # elements
    ((3, 4), np.array([[1, 2], [0, 3], [2, 0]], np.int32), SDN((), (0, 1), (0, 1)), (3,)),
    # windows
    ((4, 5), np.array([[0, 1], [2, 2]], np.int32), SDN((1, 2), (), (0, 1)), (2, 2, 3)),
]


@pytest.mark.parametrize("mode", [Mode.CLIP, Mode.FILL_OR_DROP], ids=str)
@pytest.mark.parametrize("shape,idx,dn,ushape", SCATTERS,
                         ids=[str(i) for i in range(len(SCATTERS))])
def test_scatter_add_rules(shape, idx, dn, ushape, mode):
    params = _scatter_params(dn, mode)
    x, u = normal(*shape), normal(*ushape)
    check_jvp(lax.scatter_add_p, [x, idx, u], params)
    for linear in ([0], [2], [0, 2]):
        check_transpose(lax.scatter_add_p, [x, idx, u], linear, params)


@pytest.mark.parametrize("mode", [Mode.CLIP, Mode.FILL_OR_DROP], ids=str)
@pytest.mark.parametrize("shape,idx,dn,ushape", SCATTERS,
                         ids=[str(i) for i in range(len(SCATTERS))])
def test_scatter_rules(shape, idx, dn, ushape, mode):
    # Repeated indices: the tangent follows whichever update landed.
    x, u = normal(*shape), normal(*ushape)
    check_jvp(lax.scatter_p, [x, idx, u], _scatter_params(dn, mode))
    check_jvp(lax.scatter_p, [x, idx, u], _scatter_params(dn, mode), diff=[2])


def test_scatter_unique_rules():
    dn = SDN((), (0,), (0,))
    idx = np.array([[3], [0], [1]], np.int32)
    params = _scatter_params(dn, Mode.FILL_OR_DROP, unique=True)
    x, u = normal(5), normal(3)
    check_jvp(lax.scatter_p, [x, idx, u], params)
    for linear in ([0], [2], [0, 2]):
        check_transpose(lax.scatter_p, [x, idx, u], linear, params)
    check_jvp(lax.scatter_mul_p, [x, idx, u], params)
    check_transpose(lax.scatter_mul_p, [x, idx, u], [0], params)
    with pytest.raises(ValueError, match="updates"):
        check_transpose(lax.scatter_mul_p, [x, idx, u], [2], params)
    with pytest.raises(NotImplementedError, match="unique_indices"):
        lax.scatter_p.transpose(np.ones(5), ad.UndefinedPrimal(ember.core.get_aval(x)), idx, u,
                                **_scatter_params(dn, Mode.FILL_OR_DROP))


def test_scatter_mul_operand_rules_with_repeats():
    dn = SDN((), (0,), (0,))
    idx = np.array([[3], [3], [1]], np.int32)
    params = _scatter_params(dn, Mode.FILL_OR_DROP)
    x, u = normal(5), normal(3)
    check_jvp(lax.scatter_mul_p, [x, idx, u], params, diff=[0])
    check_transpose(lax.scatter_mul_p, [x, idx, u], [0], params)
    with pytest.raises(NotImplementedError, match="unique_indices"):
        check_jvp(lax.scatter_mul_p, [x, idx, u], params, diff=[2])


@pytest.mark.parametrize("name", ["scatter-min", "scatter-max"])
@pytest.mark.parametrize("shape,idx,dn,ushape", SCATTERS,
                         ids=[str(i) for i in range(len(SCATTERS))])
def test_scatter_extremum_jvp(name, shape, idx, dn, ushape):
    prim = {"scatter-min": lax.scatter_min_p, "scatter-max": lax.scatter_max_p}[name]
    x, u = normal(*shape), normal(*ushape)
    check_jvp(prim, [x, idx, u], _scatter_params(dn, Mode.FILL_OR_DROP))


def test_scatter_max_ties_average():
    dn = SDN((), (0,), (0,))
    idx = np.array([[0], [0], [1]], np.int32)
    x, u = np.array([1.0, 5.0, 2.0]), np.array([1.0, 1.0, 3.0])
    _, t = lax.scatter_max_p.jvp([x, idx, u], [np.array([3.0, 1.0, 1.0]),
                                               ad.Zero.from_primal_value(idx),
                                               np.array([6.0, 9.0, 4.0])],
                                 **_scatter_params(dn, Mode.FILL_OR_DROP))
    np.testing.assert_allclose(np.asarray(t), [6.0, 1.0, 1.0])


# ---------------------------------------------------------------- sorting


@pytest.mark.parametrize("dimension", [0, 1])
def test_sort_jvp(dimension):
    x = normal(4, 5)
    params = {"dimension": dimension, "is_stable": True, "num_keys": 1}
    check_jvp(lax.sort_p, [x], params)
    check_jvp(lax.sort_p, [x, normal(4, 5)], params)
    check_jvp(lax.sort_p, [x, normal(4, 5), np.arange(20, dtype=np.int32).reshape(4, 5)],
              params)
    check_jvp(lax.sort_p, [np.round(x), normal(4, 5)], dict(params, num_keys=2), diff=[1])


def test_top_k_jvp():
    check_jvp(lax.top_k_p, [normal(3, 6)], {"k": 3})
    check_jvp(lax.top_k_p, [normal(6)], {"k": 6})


def test_top_k_and_sort_integer_outputs_have_zero_tangents():
    out, t = lax.top_k_p.jvp([normal(5)], [normal(5)], k=2)
    assert type(t[1]) is ad.Zero
    x = np.array([3, 1, 2], np.int32)
    out, t = lax.sort_p.jvp([x], [ad.Zero.from_primal_value(x)], dimension=0, is_stable=True,
                            num_keys=1)
    assert type(t[0]) is ad.Zero


def test_rules_are_registered_for_every_differentiable_primitive():
    no_rule = {"nextafter"}  # JAX has none either
    missing = []
    for module in (lax.elementwise, lax.reduction, lax.shape, lax.slicing, lax.sorting):
        for value in vars(module).values():
            if isinstance(value, ember.core.Primitive) and value.jvp is None and \
                    value.name not in no_rule:
                missing.append(value.name)
    if dot_general_p.jvp is None:
        missing.append("dot_general")
    assert not missing, missing
