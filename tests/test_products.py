"""Targeted tests of dot_general / matmul / dot / einsum / tensordot against NumPy."""

import itertools

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax

RNG = np.random.default_rng(0)


def _rand(*shape, dtype=np.float32):
    return RNG.normal(size=shape).astype(dtype)


MATMUL_CASES = [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
    ((2, 3), (5, 3, 4)), ((1, 2, 3), (5, 3, 4)), ((5, 1, 2, 3), (4, 3, 2)),
    ((6, 1, 2, 3), (1, 5, 3, 4)), ((2, 0), (0, 3)), ((0, 2, 3), (3, 4)), ((3,), (2, 3, 4)),
    ((2, 1, 4, 3), (3,)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_CASES)
def test_matmul_vs_numpy(sa, sb):
    a, b = _rand(*sa), _rand(*sb)
    out = jnp.matmul(a, b)
    np.testing.assert_allclose(np.asarray(out), np.matmul(a, b), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(jnp.asarray(a) @ jnp.asarray(b)), a @ b, rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("sa,sb", [((), (3,)), ((3,), ()), ((3,), (3,)), ((2, 3), (3,)),
                                   ((2, 3), (4, 3, 5)), ((2, 3, 4), (4,))])
def test_dot_vs_numpy(sa, sb):
    a, b = _rand(*sa), _rand(*sb)
    np.testing.assert_allclose(np.asarray(jnp.dot(a, b)), np.dot(a, b), rtol=1e-5, atol=1e-5)


EINSUM_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
    ("ij,ij->", [(2, 3), (2, 3)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (1, 4, 5)]), ("i,j->ij", [(3,), (4,)]),
    ("ij->", [(3, 4)]), ("ij->ji", [(3, 4)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("iij->j", [(3, 3, 2)]), ("ij,jk", [(2, 3), (3, 4)]), ("...i,...i", [(2, 3), (3,)]),
    ("i,i,i->i", [(3,), (3,), (3,)]), ("abc,cd,b->ad", [(2, 3, 4), (4, 5), (3,)]),
    ("iji->j", [(3, 2, 3)]), ("ij...->...", [(2, 3, 4, 5)]), ("...,...", [(), (3,)]),
    ("i...,j...->ij...", [(2, 3), (4, 1)]), ("ijk,ikl->", [(2, 3, 4), (2, 4, 5)]),
    ("ab,cd->", [(2, 3), (4, 5)]), ("ii->", [(4, 4)]), ("a b , b c -> a c", [(2, 3), (3, 4)]),
]


@pytest.mark.parametrize("subs,shapes", EINSUM_CASES)
def test_einsum_vs_numpy(subs, shapes):
    args = [_rand(*s) for s in shapes]
    out = jnp.einsum(subs, *args)
    np.testing.assert_allclose(np.asarray(out), np.einsum(subs, *args), rtol=1e-4, atol=1e-4)
    jaxpr = ember.make_jaxpr(lambda *a: jnp.einsum(subs, *a))(*args)
    assert "dot_general" in str(jaxpr) or "transpose" in str(jaxpr) or len(shapes) == 1


def test_einsum_interleaved_and_optimize():
    a, b = _rand(2, 3), _rand(3, 4)
    np.testing.assert_allclose(np.asarray(jnp.einsum(a, [0, 1], b, [1, 2], [0, 2])), a @ b,
                               rtol=1e-5, atol=1e-5)
    for opt in (False, True, "greedy", "optimal"):
        np.testing.assert_allclose(np.asarray(jnp.einsum("ij,jk->ik", a, b, optimize=opt)),
                                   a @ b, rtol=1e-5, atol=1e-5)


def test_einsum_int_and_bool():
    a = RNG.integers(-3, 4, (3, 4)).astype(np.int8)
    b = RNG.integers(-3, 4, (4, 2)).astype(np.int8)
    out = jnp.einsum("ij,jk->ik", a, b)
    assert out.dtype == np.int8
    np.testing.assert_array_equal(np.asarray(out), np.einsum("ij,jk->ik", a, b))
    p, q = RNG.random((3, 4)) < 0.5, RNG.random((4, 2)) < 0.5
    np.testing.assert_array_equal(np.asarray(jnp.einsum("ij,jk->ik", p, q)),
                                  np.einsum("ij,jk->ik", p, q))


def test_einsum_preferred_element_type():
    a = RNG.integers(-100, 100, (3, 40)).astype(np.int8)
    b = RNG.integers(-100, 100, (40,)).astype(np.int8)
    out = jnp.einsum("ij,j->i", a, b, preferred_element_type=jnp.int32)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), a.astype(np.int32) @ b.astype(np.int32))


@pytest.mark.parametrize("sa,sb,axes", [((2, 3, 4), (3, 4, 5), 2), ((2, 3), (4, 5), 0),
                                        ((3, 4, 5), (4, 3, 2), ([1, 0], [0, 1])),
                                        ((3, 4), (4, 3), (1, 0)), ((2, 3), (3, 2), ((-1,), (0,)))])
def test_tensordot_vs_numpy(sa, sb, axes):
    a, b = _rand(*sa), _rand(*sb)
    np.testing.assert_allclose(np.asarray(jnp.tensordot(a, b, axes)), np.tensordot(a, b, axes),
                               rtol=1e-5, atol=1e-5)


def _slow_dot_general(x, y, dn):
    (lc, rc), (lb, rb) = dn
    lf = [i for i in range(x.ndim) if i not in lc + lb]
    rf = [i for i in range(y.ndim) if i not in rc + rb]
    bshape = [x.shape[i] for i in lb]
    out = np.zeros(bshape + [x.shape[i] for i in lf] + [y.shape[i] for i in rf], np.float64)
    cshape = [x.shape[i] for i in lc]
    for idx in itertools.product(*[range(s) for s in out.shape]):
        bi, li, ri = idx[:len(lb)], idx[len(lb):len(lb) + len(lf)], idx[len(lb) + len(lf):]
        total = 0.0
        for ci in itertools.product(*[range(s) for s in cshape]):
            xi, yi = [0] * x.ndim, [0] * y.ndim
            for d, v in zip(lb, bi):
                xi[d] = v
            for d, v in zip(rb, bi):
                yi[d] = v
            for d, v in zip(lf, li):
                xi[d] = v
            for d, v in zip(rf, ri):
                yi[d] = v
            for d, v in zip(lc, ci):
                xi[d] = v
            for d, v in zip(rc, ci):
                yi[d] = v
            total += float(x[tuple(xi)]) * float(y[tuple(yi)])
        out[idx] = total
    return out


@pytest.mark.parametrize("sx,sy,dn", [
    ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),
    ((3, 2, 4), (4, 5, 2), (((2,), (0,)), ((1,), (2,)))),
    ((2, 3, 4, 5), (5, 3, 2), (((3, 1), (0, 1)), ((0,), (2,)))),
    ((2, 3), (4,), (((), ()), ((), ()))),
    ((2, 0, 3), (2, 0), (((1,), (1,)), ((0,), (0,)))),
])
def test_dot_general_batch_vs_slow_loop(sx, sy, dn):
    x, y = _rand(*sx), _rand(*sy)
    out = lax.dot_general(x, y, dn)
    np.testing.assert_allclose(np.asarray(out), _slow_dot_general(x, y, dn), rtol=1e-5,
                               atol=1e-5)


def test_dot_general_preferred_element_type():
    x = np.full((2, 300), 100, np.int8)
    y = np.full((300,), 100, np.int8)
    out = lax.dot_general(x, y, (((1,), (0,)), ((), ())), preferred_element_type=np.int32)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), np.full((2,), 3_000_000, np.int32))
    h = _rand(2, 3, dtype=np.float16)
    out = lax.dot(h, _rand(3, dtype=np.float16), preferred_element_type=jnp.float32)
    assert out.dtype == np.float32
    mixed = lax.dot_general(np.ones((2, 3), np.int8), np.ones((3,), np.float32),
                            (((1,), (0,)), ((), ())), preferred_element_type=np.float32)
    np.testing.assert_array_equal(np.asarray(mixed), [3.0, 3.0])
    jaxpr = str(ember.make_jaxpr(lambda a, b: lax.dot(a, b, preferred_element_type=np.float32,
                                                      precision="highest"))(h, h.T))
    assert "preferred_element_type=float32" in jaxpr and "dot_general" in jaxpr


@pytest.mark.parametrize("k", [1024, 1025, 40000])  # (float32 exact, float64, float64)
@pytest.mark.parametrize("dtypes", [(np.int8, np.int8), (np.uint8, np.int8), (np.uint8, bool)])
def test_8bit_integer_dots_are_exact_at_their_extremes(k, dtypes):
    # The simplifier runs these as float dots (small_int_dot_as_float): the largest sums
    # (every product at its extreme, a random sign pattern otherwise) must come out exact.
    rng = np.random.default_rng(k)
    a = np.full((3, k), np.iinfo(dtypes[0]).min or np.iinfo(dtypes[0]).max, dtypes[0])
    b = (np.full((k, 4), -128, dtypes[1]) if dtypes[1] is np.int8
         else np.ones((k, 4), dtypes[1]))
    a[1] = rng.integers(np.iinfo(dtypes[0]).min, np.iinfo(dtypes[0]).max, k, endpoint=True)
    b[:, 2] = b[::-1, 2] if dtypes[1] is bool else rng.integers(-128, 127, k, endpoint=True)
    f = ember.jit(lambda a, b: lax.dot(a, b, preferred_element_type=np.int32))
    got = np.asarray(f(a, b))
    want = a.astype(np.int64) @ b.astype(np.int64)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def test_low_precision_accumulates_in_float32():
    x = np.full((1, 4096), 1.0, np.float16)
    out = lax.dot(x, np.full((4096,), 1.0, np.float16))
    assert out.dtype == np.float16 and float(out[0]) == 4096.0


def test_matmul_dtypes_and_weak():
    assert jnp.matmul(np.ones((2, 2), np.int8), np.ones((2, 2), np.float32)).dtype == np.float32
    assert jnp.dot(np.ones(2, np.float16), 2.0).dtype == np.float16
    out = jnp.matmul(np.ones((2, 2), np.int32), np.ones((2, 2), np.int32),
                     preferred_element_type=np.float32)
    assert out.dtype == np.float32


def test_kron_trace_outer_inner_vdot():
    a, b = _rand(2, 3), _rand(3, 2)
    np.testing.assert_allclose(np.asarray(jnp.kron(a, b)), np.kron(a, b), rtol=1e-5)
    x = _rand(3, 4, 5)
    for off, ax1, ax2 in [(0, 0, 1), (1, 0, 2), (-2, 2, 1), (10, 0, 1)]:
        np.testing.assert_allclose(np.asarray(jnp.trace(x, off, ax1, ax2)),
                                   np.trace(x, off, ax1, ax2), rtol=1e-5, atol=1e-5)
    i8 = np.full((4, 4), 100, np.int8)
    assert jnp.trace(i8).dtype == np.int32 and int(jnp.trace(i8)) == 400
    np.testing.assert_allclose(np.asarray(jnp.vdot(a, b.T)), np.vdot(a, b.T), rtol=1e-5)


BAD_CALLS = [
    (lambda: jnp.matmul(jnp.ones((2, 3)), jnp.ones((4, 5))), TypeError,
     r"matmul.*\(2, 3\).*\(4, 5\)"),
    (lambda: jnp.matmul(jnp.ones(()), jnp.ones((3,))), ValueError,
     r"matmul: input operand 0 must have at least 1 dimension"),
    (lambda: jnp.matmul(jnp.ones((2, 2, 3)), jnp.ones((3, 3, 4))), ValueError,
     r"matmul: batch dimensions.*cannot be broadcast"),
    (lambda: lax.dot_general(jnp.ones((2, 3)), jnp.ones((3, 4)), (((2,), (0,)), ((), ()))),
     TypeError, r"dot_general: contracting dimension 2 of lhs is out of range"),
    (lambda: lax.dot_general(jnp.ones((2, 3)), jnp.ones((3, 4)), (((0,), (0,)), ((), ()))),
     TypeError, r"dot_general: contracting dimension sizes must match"),
    (lambda: lax.dot_general(jnp.ones((2, 3)), jnp.ones((3, 4)), (((1, 1), (0, 1)), ((), ()))),
     TypeError, r"dot_general: lhs contracting dimensions \(1, 1\).*distinct"),
    (lambda: lax.dot_general(jnp.ones((2, 3)), jnp.ones((3, 4)), (((1,), (0, 1)), ((), ()))),
     TypeError, r"dot_general: lhs contracting dimensions \(1,\) and rhs contracting "),
    (lambda: lax.dot_general(jnp.ones(3), jnp.ones(3), "ij"), TypeError,
     r"dot_general: dimension_numbers must be"),
    (lambda: lax.dot_general(np.ones(3, np.int32), np.ones(3, np.int32),
                             (((0,), (0,)), ((), ())), preferred_element_type=np.int8),
     TypeError, r"dot_general: preferred_element_type must not be narrower"),
    (lambda: lax.dot(jnp.ones((2, 3, 4)), jnp.ones(4)), ValueError, r"dot: incompatible shapes"),
    (lambda: lax.dot(jnp.ones(3), jnp.ones(3), precision="bogus"), ValueError,
     r"dot_general: precision must be"),
    (lambda: jnp.dot(jnp.ones((2, 3)), jnp.ones((2, 3))), TypeError,
     r"dot: shapes \(2, 3\) and \(2, 3\) are not aligned"),
    (lambda: jnp.einsum("ij,jk->ik", jnp.ones((2, 3))), ValueError,
     r"einsum: subscripts 'ij,jk->ik' name 2 operand\(s\) but 1 were given"),
    (lambda: jnp.einsum("ij->ik", jnp.ones((2, 3))), ValueError,
     r"einsum: output subscript 'k' does not appear"),
    (lambda: jnp.einsum("i1", jnp.ones((2, 3))), ValueError, r"einsum: invalid subscript '1'"),
    (lambda: jnp.einsum("ijk", jnp.ones((2, 3))), ValueError,
     r"einsum: operand 0 has 2 dimensions but its subscripts 'ijk' name 3"),
    (lambda: jnp.einsum("ij,jk", jnp.ones((2, 3)), jnp.ones((4, 5))), ValueError,
     r"einsum: size of subscript 'j' is 3"),
    (lambda: jnp.einsum("ii", jnp.ones((2, 3))), ValueError,
     r"einsum: size of subscript 'i' is 2 in one operand but 3"),
    (lambda: jnp.einsum("i->ii", jnp.ones(2)), ValueError, r"einsum: output subscripts 'ii'"),
    (lambda: jnp.einsum("ij", [[1.0]]), TypeError, r"einsum requires ndarray"),
    (lambda: jnp.tensordot(jnp.ones((2, 3)), jnp.ones((4, 5)), 1), TypeError,
     r"tensordot: shape mismatch: axis 1 of a \(shape \(2, 3\)\) has size 3"),
    (lambda: jnp.tensordot(jnp.ones((2, 3)), jnp.ones((3, 5)), ([1], [0, 1])), TypeError,
     r"tensordot: axes lists"),
    (lambda: jnp.tensordot(jnp.ones((2, 3)), jnp.ones((3, 5)), 3), TypeError,
     r"tensordot: axes=3"),
    (lambda: jnp.trace(jnp.ones(3)), ValueError, r"trace: array must be at least 2-d"),
    (lambda: jnp.vdot(jnp.ones(3), jnp.ones(4)), TypeError, r"vdot: arrays of shapes"),
    (lambda: jnp.matmul([1.0], [1.0]), TypeError, r"matmul requires ndarray"),
]


@pytest.mark.parametrize("call,exc,match", BAD_CALLS)
def test_bad_calls(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_bad_calls_under_tracing():
    with pytest.raises(TypeError, match=r"matmul.*\(2, 3\).*\(4, 5\)"):
        ember.make_jaxpr(jnp.matmul)(jnp.ones((2, 3)), jnp.ones((4, 5)))
    with pytest.raises(TypeError, match="dot_general: contracting dimension sizes must match"):
        ember.make_jaxpr(lambda a, b: lax.dot_general(a, b, (((0,), (0,)), ((), ()))))(
            jnp.ones((2, 3)), jnp.ones((3, 4)))


def test_cross_products():
    a, b = jnp.array([1.0, 2, 3]), jnp.array([4.0, 5, 6])
    np.testing.assert_allclose(np.asarray(jnp.cross(a, b)), np.cross([1, 2, 3], [4, 5, 6]))
    # two 2-vectors give the z component; a 2-vector has a zero z against a 3-vector
    assert float(jnp.cross(jnp.array([1.0, 2]), jnp.array([3.0, 4]))) == -2.0
    np.testing.assert_array_equal(np.asarray(jnp.cross(jnp.array([1, 2]), jnp.array([4, 5, 6]))),
                                  [12, -6, -3])
    x = jnp.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(np.asarray(jnp.cross(x, jnp.ones((3, 2)), axis=0)),
                               np.cross(np.arange(6.0).reshape(3, 2), np.ones((3, 2)), axis=0))
    assert jnp.cross(jnp.array([1, 2, 3], jnp.int8), jnp.ones(3, jnp.int8)).dtype == np.int8
    f = ember.jit(lambda p, q: jnp.cross(p, q, axisc=0))
    np.testing.assert_allclose(np.asarray(f(a, b)), np.asarray(jnp.cross(a, b, axisc=0)))
    with pytest.raises(ValueError, match="cross: dimension must be either 2 or 3"):
        jnp.cross(jnp.ones(4), jnp.ones(4))
    with pytest.raises(TypeError, match="cross requires ndarray or scalar arguments"):
        jnp.cross([1, 2, 3], [4, 5, 6])


@pytest.mark.parametrize("dtype,low,high", [(np.int32, -5, 5), (np.int32, -60000, 60000),
                                            (np.uint8, 0, 255), (np.int32, -2**31, 2**31 - 1),
                                            (np.int8, -128, 127), (np.uint32, 0, 2**32 - 1)])
def test_integer_matmul_is_exact_and_wraps_like_integers(dtype, low, high):
    # Small products go through float32 or float64 BLAS (exact below 2**24, 2**53); big ones
    # through NumPy's integer matmul. Either way: the integer result, wrapped to the dtype.
    rng = np.random.default_rng(int(high) % 1000)
    a = rng.integers(low, high, (3, 17, 9), endpoint=True).astype(dtype)
    b = rng.integers(low, high, (3, 9, 5), endpoint=True).astype(dtype)
    exact = np.einsum("bik,bkj->bij", a.astype(object), b.astype(object))
    bits = np.dtype(dtype).itemsize * 8
    wrapped = np.vectorize(lambda v: ((int(v) + 2**(bits - 1)) % 2**bits) - 2**(bits - 1)
                           if np.dtype(dtype).kind == "i" else int(v) % 2**bits)(exact)
    for backend in ("cpu", "interpreter"):
        got = ember.jit(lambda x, y: jnp.matmul(x, y), backend=backend)(a, b)
        assert got.dtype == dtype
        np.testing.assert_array_equal(np.asarray(got).astype(object), wrapped)


@pytest.mark.parametrize("value", [1365, 1367])
def test_integer_matmul_near_float32s_exact_range(value):
    # Products whose partial sums stay below 2**24 go through float32 BLAS; 9 * 1367**2 =
    # 16818201 is odd and above 2**24, where float32 holds only even integers.
    a = np.full((4, 9), value, np.int32)
    a[1] *= -1
    b = np.full((9, 3), value, np.int32)
    b[:, 2] = np.arange(9) - 4
    want = a.astype(np.int64) @ b.astype(np.int64)
    for backend in ("cpu", "interpreter"):
        got = ember.jit(jnp.matmul, backend=backend)(a, b)
        np.testing.assert_array_equal(np.asarray(got), want.astype(np.int32))
