"""jnp.ufunc: the methods of the built-in ufuncs (reduce, accumulate, at, outer, reduceat) and
frompyfunc, against NumPy's ufunc methods (values) and JAX's rules (dtypes, errors)."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp

_RNG = np.random.default_rng(0)
_ARRAYS = {
    "f": _RNG.standard_normal((3, 5)).astype(np.float32),
    "i": _RNG.integers(-6, 7, (3, 5)).astype(np.int32),
    "b": _RNG.random((3, 5)) > 0.5,
}
# (name, kinds of input it is tested on)
_BINARY = [
    ("add", "fib"), ("subtract", "fi"), ("multiply", "fib"), ("maximum", "fib"),
    ("minimum", "fib"), ("logaddexp", "f"), ("logaddexp2", "f"), ("logical_and", "b"),
    ("logical_or", "b"), ("logical_xor", "b"), ("bitwise_and", "ib"), ("bitwise_or", "ib"),
    ("bitwise_xor", "ib"),
]
_CASES = [(name, kind) for name, kinds in _BINARY for kind in kinds]


def _close(got, want, kind):
    got = np.asarray(got)
    if kind == "f":
        np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, np.float64),
                                   rtol=2e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(got.astype(np.int64), np.asarray(want).astype(np.int64))


@pytest.mark.parametrize("name,kind", _CASES)
def test_reduce_and_accumulate_match_numpys_methods(name, kind):
    x = _ARRAYS[kind]
    uf, ref = getattr(jnp, name), getattr(np, name)
    for axis in (0, 1):
        _close(uf.reduce(jnp.asarray(x), axis=axis), ref.reduce(x, axis=axis), kind)
        _close(uf.accumulate(jnp.asarray(x), axis=axis), ref.accumulate(x, axis=axis), kind)
    if name != "subtract":  # (NumPy's subtract.reduce refuses axis=None)
        got = uf.reduce(jnp.asarray(x), axis=None, keepdims=True)
        assert got.shape == (1, 1)
        _close(got, ref.reduce(x, axis=None, keepdims=True), kind)


@pytest.mark.parametrize("name,kind", _CASES)
def test_outer_reduceat_and_at_match_numpys_methods(name, kind):
    x = _ARRAYS[kind]
    uf, ref = getattr(jnp, name), getattr(np, name)
    _close(uf.outer(jnp.asarray(x[0]), jnp.asarray(x[1, :3])), ref.outer(x[0], x[1, :3]), kind)
    _close(uf.outer(jnp.asarray(x[:2]), jnp.asarray(x[2, :2])), ref.outer(x[:2], x[2, :2]),
           kind)
    indices = np.array([0, 3, 1, 4])
    # (NumPy's bool add/multiply reduceat count in integers; JAX's stay bool: or/and)
    ref_at = {"add": np.logical_or, "multiply": np.logical_and}.get(name) if kind == "b" else ref
    _close(uf.reduceat(jnp.asarray(x), jnp.asarray(indices), axis=1),
           (ref_at or ref).reduceat(x, indices, axis=1), kind)
    rows, value = np.array([0, 2, 0, 0]), x[1]
    want = x.copy()
    ref.at(want, rows, value)  # NumPy updates in place, repeated rows repeatedly
    _close(uf.at(jnp.asarray(x), rows, jnp.asarray(value), inplace=False), want, kind)


def test_reduce_where_initial_and_axis_tuples():
    x = _ARRAYS["i"]
    mask = _RNG.random(x.shape) > 0.4
    for name in ("add", "multiply", "maximum", "minimum", "bitwise_or", "bitwise_and"):
        got = getattr(jnp, name).reduce(jnp.asarray(x), axis=0, where=jnp.asarray(mask),
                                        initial=3)
        want = getattr(np, name).reduce(x, axis=0, where=mask, initial=3)
        np.testing.assert_array_equal(np.asarray(got), want)
    got = jnp.add.reduce(jnp.asarray(x), axis=(0, 1))
    assert int(got) == int(x.sum())
    f = _ARRAYS["f"]
    got = jnp.logaddexp.reduce(jnp.asarray(f), axis=1, where=jnp.asarray(mask))
    want = [np.logaddexp.reduce(row[m]) if m.any() else -np.inf for row, m in zip(f, mask)]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
    # stable for large values, -inf for an all -inf row
    big = np.array([[1000.0, 1000.0], [-np.inf, -np.inf]], np.float32)
    np.testing.assert_allclose(np.asarray(jnp.logaddexp.reduce(jnp.asarray(big), axis=1)),
                               [1000.0 + np.log(2.0), -np.inf], rtol=1e-6)


def test_dtypes_follow_jax():
    i = jnp.asarray(_ARRAYS["i"])
    b = jnp.asarray(_ARRAYS["b"])
    assert jnp.add.reduce(b).dtype == np.int32  # (as jnp.sum)
    assert jnp.maximum.accumulate(b).dtype == np.bool_
    assert jnp.logaddexp.reduce(i).dtype == np.float32
    assert jnp.add.reduce(i, dtype=np.float32).dtype == np.float32
    assert jnp.subtract.reduce(i).dtype == np.int32
    assert jnp.add.at(b, np.array([0]), True, inplace=False).dtype == np.bool_
    np.testing.assert_array_equal(
        np.asarray(jnp.add.at(jnp.zeros(3, bool), np.array([0, 0, 2]), True, inplace=False)),
        [True, False, True])
    # at: add/multiply scatter into the array's dtype; maximum/minimum apply the ufunc, whose
    # result takes both dtypes (as in JAX)
    ints = jnp.arange(4, dtype=np.int32)
    got = jnp.maximum.at(ints, np.array([0, 0]), 2.5, inplace=False)
    assert got.dtype == np.float32 and np.asarray(got).tolist() == [2.5, 1.0, 2.0, 3.0]
    assert jnp.minimum.at(ints, np.array([3]), 2.5, inplace=False).dtype == np.float32
    assert jnp.add.at(ints, np.array([0]), 2, inplace=False).dtype == np.int32
    assert (jnp.add.identity, jnp.multiply.identity, jnp.maximum.identity) == (0, 1, None)
    assert jnp.bitwise_and.identity == -1 and jnp.logaddexp.identity == -np.inf
    assert (jnp.add.nin, jnp.add.nout, jnp.negative.nin) == (2, 1, 1)
    assert isinstance(jnp.add, jnp.ufunc) and isinstance(jnp.negative, jnp.ufunc)
    assert not isinstance(jnp.sin, jnp.ufunc)


def test_negative_at_applies_repeatedly():
    x = np.arange(4, dtype=np.int32)
    got = jnp.negative.at(jnp.asarray(x), np.array([1, 1, 2]), inplace=False)
    want = x.copy()
    np.negative.at(want, np.array([1, 1, 2]))
    np.testing.assert_array_equal(np.asarray(got), want)


def test_frompyfunc_methods_apply_the_function_in_order():
    f = jnp.frompyfunc(lambda x, y: x * y + 1, nin=2, nout=1)
    x = _ARRAYS["i"]
    ref = np.frompyfunc(lambda x, y: x * y + 1, 2, 1)
    np.testing.assert_array_equal(np.asarray(f(jnp.asarray(x), 2)), x * 2 + 1)
    np.testing.assert_array_equal(np.asarray(f.reduce(jnp.asarray(x), axis=1)),
                                  ref.reduce(x, axis=1).astype(np.int64))
    np.testing.assert_array_equal(np.asarray(f.accumulate(jnp.asarray(x), axis=0)),
                                  ref.accumulate(x, axis=0).astype(np.int64))
    np.testing.assert_array_equal(np.asarray(f.outer(jnp.asarray(x[0]), jnp.asarray(x[1]))),
                                  np.multiply.outer(x[0], x[1]) + 1)
    np.testing.assert_array_equal(
        np.asarray(f.reduceat(jnp.asarray(x), np.array([0, 2]), axis=1)),
        ref.reduceat(x, np.array([0, 2]), axis=1).astype(np.int64))
    want = x.copy().astype(object)
    ref.at(want, (np.array([1, 1]), np.array([0, 0])), 3)
    got = f.at(jnp.asarray(x), (np.array([1, 1]), np.array([0, 0])), 3, inplace=False)
    np.testing.assert_array_equal(np.asarray(got), want.astype(np.int64))
    g = jnp.frompyfunc(lambda x, y: x - y, 2, 1, identity=0)
    np.testing.assert_array_equal(np.asarray(g.reduce(jnp.asarray(x), axis=1)),
                                  0 - x.sum(axis=1))  # starts from the identity


def test_methods_under_transformations():
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    jitted = ember.jit(lambda x: jnp.multiply.reduce(x, axis=1))(x)
    np.testing.assert_allclose(np.asarray(jitted), [6.0, 120.0])
    # d/dx of sum(subtract.reduce(x, axis=1)) = +1 on the first column, -1 elsewhere
    g = ember.grad(lambda x: jnp.subtract.reduce(x, axis=1).sum())(x)
    np.testing.assert_array_equal(np.asarray(g), [[1, -1, -1], [1, -1, -1]])
    g = ember.grad(lambda x: jnp.logaddexp.reduce(x, axis=None))(x)
    np.testing.assert_allclose(np.asarray(g), np.exp(x) / np.exp(x).sum(), rtol=1e-5)
    batched = ember.vmap(lambda v: jnp.add.outer(v, v))(x)
    np.testing.assert_array_equal(np.asarray(batched), x[:, :, None] + x[:, None, :])
    at = ember.jit(lambda x: jnp.add.at(x, (np.array([0, 0]), np.array([1, 1])), 1.0,
                                        inplace=False))(x)
    np.testing.assert_array_equal(np.asarray(at), x + np.array([[0, 2, 0], [0, 0, 0]]))


def test_bad_calls_raise_jaxs_errors():
    x = jnp.asarray(_ARRAYS["f"])
    with pytest.raises(NotImplementedError, match="inplace=False"):
        jnp.add.at(x, 0, 1.0)
    with pytest.raises(ValueError, match="binary"):
        jnp.negative.reduce(x)
    with pytest.raises(ValueError, match="initial"):
        jnp.maximum.reduce(x, where=x > 0)
    with pytest.raises(ValueError, match="bool"):
        jnp.add.reduce(x, where=jnp.ones(x.shape, np.int32))
    with pytest.raises(ValueError, match="zero-size"):
        jnp.subtract.reduce(jnp.zeros((0, 2)))
    with pytest.raises(ValueError, match="integer"):
        jnp.bitwise_and.reduce(x)
    with pytest.raises(ValueError, match="single integer axis"):
        jnp.add.accumulate(x, axis=None)
    with pytest.raises(TypeError, match="value argument"):
        jnp.add.at(x, 0, inplace=False)
    with pytest.raises(ValueError, match="positive integer"):
        jnp.ufunc(lambda x: x, 0, 1)
