"""Targeted tests of the array-creation functions (NumPy is the reference)."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.errors import ConcretizationTypeError
from ember.jaxpr import eval_jaxpr


def _eq(actual, expected, dtype=None):
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected), (actual.shape, np.shape(expected))
    np.testing.assert_array_equal(actual, expected)
    if dtype is not None:
        assert actual.dtype == np.dtype(dtype), (actual.dtype, dtype)


def _close(actual, expected, dtype, rtol=1e-6):
    actual = np.asarray(actual)
    assert actual.dtype == np.dtype(dtype) and actual.shape == np.shape(expected)
    np.testing.assert_allclose(actual.astype(np.float64), expected, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("args,expected_dtype", [
    ((5,), "int32"), ((2, 9), "int32"), ((10, 0, -3), "int32"), ((2.0,), "float32"),
    ((0, 1, 0.1), "float32"), ((-1.5, 2.5, 0.5), "float32"), ((np.int8(4),), "int8"),
    ((0, 0), "int32"), ((5, 1), "int32"),
])
def test_arange_values_and_dtypes(args, expected_dtype):
    out = jnp.arange(*args)
    _close(out, np.arange(*args, dtype=expected_dtype), expected_dtype)


def test_arange_dtype_argument():
    _eq(jnp.arange(4, dtype=jnp.float16), np.arange(4, dtype=np.float16), np.float16)
    _eq(jnp.arange(1, 7, 2, dtype=np.uint8), np.arange(1, 7, 2, dtype=np.uint8), np.uint8)
    _eq(jnp.arange(jnp.asarray(3)), np.arange(3), np.int32)


def test_arange_traced_is_iota():
    text = str(ember.make_jaxpr(lambda x: jnp.arange(4) + x)(1))
    assert "iota[dimension=0 dtype=int32 shape=(4,)]" in text


@pytest.mark.parametrize("start,stop,num,endpoint", [
    (0, 1, 5, True), (0, 1, 5, False), (-3, 7, 1, True), (2, 2, 4, True), (0, 10, 0, True),
    (1e-3, 1e3, 11, False), (5, -5, 7, True),
])
def test_linspace_vs_numpy(start, stop, num, endpoint):
    out, step = jnp.linspace(start, stop, num, endpoint=endpoint, retstep=True)
    ref, ref_step = np.linspace(start, stop, num, endpoint=endpoint, retstep=True)
    _close(out, ref.astype(np.float32), np.float32)
    if num > 1:
        np.testing.assert_allclose(float(step), ref_step, rtol=1e-6)


def test_linspace_dtypes_and_axis():
    _eq(jnp.linspace(0, 10, 4, dtype=jnp.int32), np.linspace(0, 10, 4, dtype=np.int32),
        np.int32)
    _eq(jnp.linspace(-5, 5, 4, dtype=jnp.int32), np.linspace(-5, 5, 4, dtype=np.int32))
    assert jnp.linspace(0, 1, 3, dtype=jnp.float16).dtype == np.float16
    s, e = np.array([0.0, 1.0]), np.array([[1.0, 2.0], [3.0, 5.0]])
    for axis in (0, 1, -1):
        _close(jnp.linspace(s, e, 4, axis=axis), np.linspace(s, e, 4, axis=axis), np.float32)


def test_linspace_traced_bounds():
    closed = ember.make_jaxpr(lambda a, b: jnp.linspace(a, b, 5))(0.0, 1.0)
    assert "iota" in str(closed)
    (out,) = eval_jaxpr(closed.jaxpr, closed.consts, jnp.asarray(np.float32(-2)),
                        jnp.asarray(np.float32(6)))
    _close(out, np.linspace(-2, 6, 5), np.float32)


def test_logspace_geomspace():
    _close(jnp.logspace(-2, 2, 9), np.logspace(-2, 2, 9), np.float32, 1e-6)
    _close(jnp.logspace(0, 8, 9, base=2), np.logspace(0, 8, 9, base=2), np.float32, 1e-6)
    _close(jnp.geomspace(1, 256, 9), np.geomspace(1, 256, 9), np.float32, 1e-6)
    _close(jnp.geomspace(-1, -1e4, 5, endpoint=False),
           np.geomspace(-1, -1e4, 5, endpoint=False), np.float32, 1e-6)
    out = jnp.logspace(jnp.asarray(np.float32(0)), 2.0, 3)
    _close(out, np.logspace(0, 2, 3), np.float32, 1e-5)


@pytest.mark.parametrize("n,m,k", [(3, None, 0), (3, 5, 1), (4, 2, -1), (3, 3, 5), (0, 2, 0),
                                   (2, 3, -3)])
def test_eye_tri(n, m, k):
    _eq(jnp.eye(n, m, k), np.eye(n, m, k), np.float32)
    _eq(jnp.eye(n, m, k, dtype=jnp.int8), np.eye(n, m, k, dtype=np.int8), np.int8)
    _eq(jnp.tri(n, m, k), np.tri(n, m, k), np.float32)
    _eq(jnp.identity(n, jnp.bool_), np.identity(n, bool), np.bool_)


@pytest.mark.parametrize("k", [-4, -1, 0, 1, 2, 6])
def test_tril_triu_diag(k):
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4) - 5
    _eq(jnp.tril(jnp.asarray(x), k), np.tril(x, k))
    _eq(jnp.triu(jnp.asarray(x), k), np.triu(x, k))
    _eq(jnp.diag(jnp.asarray(x[0]), k), np.diag(x[0], k))
    _eq(jnp.diag(jnp.asarray(x[0, 0]), k), np.diag(x[0, 0], k))
    _eq(jnp.diagonal(jnp.asarray(x), k, 1, 2), np.diagonal(x, k, 1, 2))
    _eq(jnp.diagonal(jnp.asarray(x), k, -1, 0), np.diagonal(x, k, -1, 0))


def test_tril_keeps_nan_and_inf():
    x = np.array([[np.nan, np.inf], [1.0, -np.inf]], np.float32)
    _eq(jnp.tril(jnp.asarray(x)), np.tril(x))
    _eq(jnp.triu(jnp.asarray(x)), np.triu(x))


def test_traced_creation_stages_primitives():
    x = jnp.ones((2, 3))
    text = str(ember.make_jaxpr(lambda x: (jnp.zeros_like(x), jnp.full((2,), x[0, 0]),
                                           jnp.tril(x)))(x))
    assert "broadcast_in_dim" in text and "select_n" in text
    closed = ember.make_jaxpr(lambda v: jnp.full((2, 2), v))(3.0)
    (out,) = eval_jaxpr(closed.jaxpr, closed.consts, jnp.asarray(np.float32(4)))
    _eq(out, np.full((2, 2), 4, np.float32))


def test_array_of_tracers_stacks():
    closed = ember.make_jaxpr(lambda a, b: jnp.array([[a, b], [b, 1.0]]))(1.0, 2.0)
    assert "concatenate" in str(closed)
    (out,) = eval_jaxpr(closed.jaxpr, closed.consts, jnp.asarray(np.float32(5)),
                        jnp.asarray(np.float32(6)))
    _eq(out, np.array([[5, 6], [6, 1]], np.float32), np.float32)
    closed = ember.make_jaxpr(lambda a: jnp.array([a, a], dtype=jnp.int32))(1.5)
    (out,) = eval_jaxpr(closed.jaxpr, closed.consts, jnp.asarray(np.float32(2.5)))
    _eq(out, np.array([2, 2], np.int32), np.int32)


@pytest.mark.parametrize("indexing", ["xy", "ij"])
@pytest.mark.parametrize("sparse", [False, True])
def test_meshgrid(indexing, sparse):
    xs = [np.arange(2), np.arange(3) * 10, np.arange(4) * 100]
    for n in (1, 2, 3):
        got = jnp.meshgrid(*[jnp.asarray(x) for x in xs[:n]], indexing=indexing, sparse=sparse)
        ref = np.meshgrid(*xs[:n], indexing=indexing, sparse=sparse)
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            _eq(g, r)


def test_like_functions_dtypes_and_shapes():
    x = jnp.ones((2, 3), jnp.int8)
    for fn, val in ((jnp.zeros_like, 0), (jnp.ones_like, 1), (jnp.empty_like, 0)):
        _eq(fn(x), np.full((2, 3), val, np.int8), np.int8)
        _eq(fn(x, dtype=jnp.float16, shape=(4,)), np.full((4,), val, np.float16), np.float16)
    _eq(jnp.full_like(x, 7, shape=()), np.int8(7), np.int8)
    _eq(jnp.full_like(x, np.array([1, 2, 3])), np.array([[1, 2, 3]] * 2, np.int8), np.int8)
    assert jnp.zeros_like(2.0).weak_type and not jnp.zeros_like(2.0, dtype=float).weak_type
    _eq(jnp.zeros_like(ember.ShapeDtypeStruct((2,), np.float32)), np.zeros(2, np.float32))


def test_full_zeros_ones():
    _eq(jnp.full((2, 0), 5), np.full((2, 0), 5), np.int32)
    _eq(jnp.full(3, np.array([1.0, 2.0, 3.0])), np.full(3, [1.0, 2.0, 3.0]), np.float32)
    _eq(jnp.full((2, 3), np.arange(3)), np.full((2, 3), np.arange(3)), np.int32)
    assert jnp.full((2,), 1.0).weak_type and not jnp.full((2,), 1.0, jnp.float32).weak_type
    _eq(jnp.zeros((2, 3), jnp.bool_), np.zeros((2, 3), bool), np.bool_)
    _eq(jnp.ones(()), np.ones((), np.float32), np.float32)
    _eq(jnp.empty((0, 4)), np.empty((0, 4), np.float32), np.float32)
    _eq(jnp.copy(jnp.arange(3)), np.arange(3), np.int32)


def test_diagflat_and_trace():
    x = np.arange(4).reshape(2, 2)
    _eq(jnp.diagflat(jnp.asarray(x), -1), np.diagflat(x, -1))
    assert int(jnp.trace(jnp.asarray(np.arange(9).reshape(3, 3)))) == 12


# ---------------------------------------------------------------- bad calls


def test_negative_shape():
    with pytest.raises(TypeError, match=r"zeros: negative dimensions are not allowed, got "
                                        r"shape \(2, -1\)"):
        jnp.zeros((2, -1))
    with pytest.raises(ValueError, match="eye: negative dimensions are not allowed"):
        jnp.eye(-1)
    with pytest.raises(TypeError, match="ones: shape must contain integers"):
        jnp.ones((2.5,))


@pytest.mark.parametrize("args,dtype", [
    ((0, 1, 0.1), None), ((-1.5, 2.5, 0.3), np.float32), ((0, 1, 0.1), np.float16),
    ((0, 1, 0.1), jnp.bfloat16), ((1, 7.5), None), ((2.5,), np.float16),
    ((10, 0, -3), np.uint8), ((0, 10, 1.5), np.int32), ((3, 100, 7), np.int8),
])
def test_arange_is_start_plus_step_times_iota(args, dtype):
    # JAX's values: start + step * i in the dtype (float32 for narrower floats, then
    # rounded), one rounding per operation; e.g. arange(0, 1, 0.1)[9] is 0.90000004 where
    # NumPy has 0.9. Integer steps wrap as the dtype does (uint8: 10 + 253 * i).
    start, stop, step = {1: (0, *args, None), 2: (*args, None), 3: args}[len(args)]
    out = jnp.arange(*args, dtype=dtype)
    dt = out.dtype
    narrow_float = dt in (np.float16, jnp.bfloat16)
    work = np.dtype(np.float32) if narrow_float else dt
    size = max(0, int(np.ceil((stop - start) / (1 if step is None else step))))
    i = np.arange(size).astype(work)
    with np.errstate(over="ignore"):
        want = i if step is None else np.asarray(step).astype(work) * i
        want = (np.asarray(start).astype(work) + want).astype(dt)
    np.testing.assert_array_equal(np.asarray(out), want)
    jaxpr = ember.make_jaxpr(lambda: jnp.arange(*args, dtype=dtype))()
    assert "iota" in str(jaxpr) and not jaxpr.consts  # index arithmetic, not a constant
    for backend in ("cpu", "interpreter"):  # (eager arange computes the same in NumPy)
        jitted = ember.jit(lambda: jnp.arange(*args, dtype=dtype), backend=backend)()
        np.testing.assert_array_equal(np.asarray(jitted), want)


def test_arange_traced_bound():
    with pytest.raises(ConcretizationTypeError, match="arange: start must be concrete"):
        ember.make_jaxpr(lambda n: jnp.arange(n))(3)
    with pytest.raises(ConcretizationTypeError, match="arange: stop must be concrete"):
        ember.make_jaxpr(lambda n: jnp.arange(0, n))(3)
    with pytest.raises(ZeroDivisionError, match="arange: step must not be zero"):
        jnp.arange(0, 5, 0)


def test_bad_creation_calls():
    with pytest.raises(ValueError, match="linspace: number of samples, -1, must be "
                                         "non-negative"):
        jnp.linspace(0, 1, -1)
    with pytest.raises(ConcretizationTypeError, match="linspace: num must be a concrete"):
        ember.make_jaxpr(lambda n: jnp.linspace(0, 1, n))(3)
    with pytest.raises(ValueError, match="tril: argument must be at least 2-d"):
        jnp.tril(jnp.ones(3))
    with pytest.raises(ValueError, match="diag: input must be 1-d or 2-d"):
        jnp.diag(jnp.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="meshgrid: indexing must be 'xy' or 'ij'"):
        jnp.meshgrid(jnp.ones(2), indexing="xx")
    with pytest.raises(ValueError, match="meshgrid: arguments must be 1-d"):
        jnp.meshgrid(jnp.ones((2, 2)))
    with pytest.raises(ValueError, match="diagonal: axis1 and axis2 cannot be the same"):
        jnp.diagonal(jnp.ones((2, 2)), 0, 1, 1)
    with pytest.raises(TypeError, match="eye: N must be an integer"):
        jnp.eye(2.0)
    # (a zero bound gives NaNs, as in JAX: sign(0) divides it; tests/test_shape_compat.py)
    assert np.isnan(np.asarray(jnp.geomspace(0, 1, 3))).all()
    with pytest.raises(TypeError, match="zeros_like requires ndarray or scalar arguments"):
        jnp.zeros_like([1, 2])


def test_array_of_nested_sequences_promotes_like_jax():
    # The leaves promote in the weak lattice: Python scalars adopt the arrays' dtype.
    out = jnp.array([jnp.ones(2, jnp.int8), [1, 2]])
    assert out.dtype == np.int8 and not out.weak_type
    assert jnp.array([jnp.ones(2, jnp.float16), [2.5, 1]]).dtype == np.float16
    assert jnp.array([True, 2]).dtype == np.int32
    assert jnp.array([np.float64(1.5), 2]).dtype == np.float32
    assert jnp.array([]).dtype == np.float32
    with pytest.raises(OverflowError):
        jnp.array([-2 ** 31 - 1])
    with pytest.raises(OverflowError):
        jnp.array([jnp.ones(1, jnp.int8), [300]])
    with pytest.raises(ValueError, match="None is not a valid value"):
        jnp.array([1, None])
    with pytest.raises(ValueError, match="None is not a valid value"):
        jnp.array(None)


def test_explicit_dtype_drops_weak_type():
    assert not jnp.asarray(jnp.asarray(2.0), dtype=jnp.float32).weak_type
    assert not jnp.array(jnp.asarray(2), dtype=jnp.int32).weak_type
    assert jnp.asarray(jnp.asarray(2.0)).weak_type


def test_arange_rejects_bool_and_zero_step():
    with pytest.raises(TypeError, match="arange: does not accept dtype bool"):
        jnp.arange(True)
    with pytest.raises(TypeError, match="arange: does not accept dtype bool"):
        jnp.arange(3, dtype=bool)
    with pytest.raises(ZeroDivisionError):
        jnp.arange(0.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="arange: complex"):  # (JAX's class since 0.10)
        jnp.arange(0, 3 + 1j)


def test_shapes_may_hold_concrete_integer_arrays():
    # (A custom_vjp residual or a computed size: JAX accepts 0-d integer arrays in shapes.)
    assert jnp.zeros((jnp.array(3),)).shape == (3,)
    assert jnp.ones(jnp.array(2)).shape == (2,)
    assert jnp.full((jnp.array(2), 4), 1.0).shape == (2, 4)
    for bad in [(jnp.array(2.0),), (jnp.array([2]),), (jnp.array(True),)]:
        with pytest.raises(TypeError, match="shape"):
            jnp.zeros(bad)


def test_masked_arrays_are_refused():
    # (Their masks would be dropped without a word; JAX refuses them too.)
    m = np.ma.masked_array([1.0, 2.0], mask=[0, 1])
    for f in (jnp.asarray, jnp.sum, ember.jit(lambda x: x), lambda x: jnp.add(x, 1)):
        with pytest.raises(ValueError, match="masked"):
            f(m)


@pytest.mark.parametrize("make", [
    lambda d: jnp.zeros(3, device=d), lambda d: jnp.ones((2, 2), device=d),
    lambda d: jnp.full(2, 7, device=d), lambda d: jnp.empty(2, device=d),
    lambda d: jnp.arange(4, device=d), lambda d: jnp.linspace(0, 1, 5, device=d),
    lambda d: jnp.eye(3, device=d), lambda d: jnp.array([1, 2], device=d),
    lambda d: jnp.asarray(np.ones(3), device=d),
    lambda d: jnp.zeros_like(np.ones(2), device=d), lambda d: jnp.ones_like(np.ones(2), device=d),
    lambda d: jnp.full_like(np.ones(2), 3, device=d),
    lambda d: jnp.empty_like(np.ones(2), device=d),
])
def test_creation_device_keyword(make):
    # JAX's ``device=``: a device or a sharding the result is placed on (its ``.sharding``).
    mesh = ember.make_mesh((1,), ("x",))
    sharding = ember.sharding.NamedSharding(mesh, ember.sharding.PartitionSpec())
    plain = make(None)
    for target, want in ((ember.devices()[0], ember.sharding.SingleDeviceSharding(
            ember.devices()[0])), (sharding, sharding)):
        out = make(target)
        assert out.sharding == want and out.committed
        np.testing.assert_array_equal(np.asarray(out), np.asarray(plain))
        assert out.dtype == plain.dtype
    with pytest.raises((TypeError, ValueError)):
        make("cpu:0")


@pytest.mark.parametrize("k", [-10**12, -4, -1, 0, 2, 6, 10**12])
def test_staged_eye_and_tri_are_iota_masks(k):
    # Under a trace they are computed from iotas, as JAX stages them (no constant the size
    # of the matrix in the jaxpr), with NumPy's values for any k.
    for f, ref in ((jnp.eye, np.eye), (jnp.tri, np.tri)):
        staged = ember.jit(lambda x, f=f: x + f(4, 6, k=k))
        np.testing.assert_array_equal(np.asarray(staged(np.zeros((4, 6), np.float32))),
                                      ref(4, 6, k=k, dtype=np.float32))
        jaxpr = ember.make_jaxpr(lambda x, f=f: x + f(4, 6, k=k))(np.zeros((4, 6), np.float32))
        assert not jaxpr.jaxpr.constvars and "iota" in str(jaxpr)


@pytest.mark.parametrize("n,k", [(0, 0), (1, 0), (5, 0), (5, 2), (5, -3), (3, 7)])
def test_staged_diag_of_a_vector(n, k):
    # Staged, diag(v) is v broadcast along the rows and selected on the diagonal (as JAX);
    # eagerly a padded reshape: the same values (signed zeros and NaN on the diagonal),
    # gradients and vmap.
    v = np.arange(1, n + 1, dtype=np.float32)
    if n:
        v[0], v[-1] = -0.0, np.nan
    want = np.diag(v, k)
    for out in (jnp.diag(v, k), ember.jit(lambda v: jnp.diag(v, k))(v)):
        out = np.asarray(out)
        assert out.shape == want.shape
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(np.signbit(out), np.signbit(want))
    w = np.linspace(1, 2, n, dtype=np.float32)
    size = n + abs(k)
    weights = np.arange(size * size, dtype=np.float32).reshape(size, size)
    g = ember.grad(lambda w: jnp.sum(jnp.diag(w, k) * weights))(w)
    np.testing.assert_array_equal(np.asarray(g), np.diagonal(weights, k))
    batch = np.stack([w, 2 * w])
    np.testing.assert_array_equal(np.asarray(ember.vmap(lambda w: jnp.diag(w, k))(batch)),
                                  np.stack([np.diag(w, k), np.diag(2 * w, k)]))
