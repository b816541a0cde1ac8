"""ember.Array: metadata, repr, conversions, immutability, devices, operators and methods."""

import copy
import pickle

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax


def _a(value, dtype=None):
    return jnp.asarray(np.asarray(value, dtype=dtype))


# ---------------------------------------------------------------- metadata


def test_metadata():
    x = _a(np.arange(6).reshape(2, 3), np.float32)
    assert isinstance(x, ember.Array)
    assert x.shape == (2, 3) and x.ndim == 2 and x.size == 6
    assert x.dtype == np.float32 and x.nbytes == 24 and x.itemsize == 4
    assert x.weak_type is False
    s = jnp.asarray(2.0)
    assert s.shape == () and s.ndim == 0 and s.size == 1 and s.weak_type
    z = jnp.zeros((0, 4))
    assert z.size == 0 and z.nbytes == 0 and z.shape == (0, 4)


def test_transpose_property():
    x = _a(np.arange(6).reshape(2, 3), np.float32)
    np.testing.assert_array_equal(np.asarray(x.T), np.arange(6).reshape(2, 3).T)
    assert x.T.shape == (3, 2)


# ---------------------------------------------------------------- repr / str


def test_repr_like_jax():
    assert repr(jnp.array([1.0, 2.0])) == "Array([1., 2.], dtype=float32)"
    assert repr(jnp.array(3.0)) == "Array(3., dtype=float32, weak_type=True)"
    assert repr(jnp.array(3)) == "Array(3, dtype=int32, weak_type=True)"
    assert repr(jnp.array([1, 2])) == "Array([1, 2], dtype=int32)"
    assert repr(jnp.array(True)) == "Array(True, dtype=bool)"
    assert repr(jnp.array([True, False])) == "Array([ True, False], dtype=bool)"
    assert repr(_a([[1, 2], [3, 4]], np.int32)) == (
        "Array([[1, 2],\n       [3, 4]], dtype=int32)")
    assert repr(_a([1.5], np.float16)) == "Array([1.5], dtype=float16)"
    assert repr(jnp.zeros((0, 3))) == "Array([], shape=(0, 3), dtype=float32)"
    assert repr(jnp.zeros(2, ember.dtypes.bfloat16)) == "Array([0, 0], dtype=bfloat16)"


def test_repr_long_arrays_wrap_like_numpy():
    x = _a(np.arange(30), np.int32)
    assert repr(x) == (
        "Array([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16,\n"
        "       17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29], dtype=int32)")
    # when the dtype does not fit in the line width, JAX separates it by six spaces (the
    # width of "Array("), on the same line
    y = _a(np.full(8, 1000.5), np.float32)
    assert repr(y) == (
        "Array([1000.5, 1000.5, 1000.5, 1000.5, 1000.5, 1000.5, 1000.5, 1000.5],"
        "      dtype=float32)")


def test_str():
    assert str(jnp.array([1.0, 2.0])) == "[1. 2.]"
    assert str(jnp.array(3)) == "3"
    assert f"{jnp.array(2.5):.2f}" == "2.50"


# ---------------------------------------------------------------- numpy interop


def test_asarray_shares_memory_and_is_read_only():
    x = jnp.array([1.0, 2.0, 3.0])
    a = np.asarray(x)
    b = np.asarray(x)
    assert np.shares_memory(a, b)
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 5.0
    c = np.array(x)  # an explicit copy is writeable and independent
    c[0] = 5.0
    assert float(x[0]) == 1.0 if hasattr(jnp, "_getitem") and jnp._getitem else True
    assert np.asarray(x, dtype=np.float64).dtype == np.float64


def test_immutable_setitem():
    x = jnp.array([1.0, 2.0])
    with pytest.raises(TypeError) as info:
        x[0] = 1.0
    msg = str(info.value)
    assert msg.startswith("'Array' object does not support item assignment. JAX arrays are "
                          "immutable. Instead of ``x[idx] = y``, use ``x = x.at[idx].set(y)``")
    np.testing.assert_array_equal(np.asarray(x), [1.0, 2.0])


def test_numpy_on_the_left_gives_ember_arrays():
    x = jnp.array([1.0, 2.0])
    for out in (np.ones(2, np.float32) + x, np.ones(2, np.float32) * x,
                np.ones(2, np.float32) - x, np.ones(2, np.float32) / x):
        assert isinstance(out, ember.Array)
    np.testing.assert_array_equal(np.asarray(np.ones(2, np.float32) + x), [2.0, 3.0])
    # JAX semantics: a float64 NumPy array is canonicalized to float32
    assert (np.ones(2) + x).dtype == np.float32
    # NumPy functions (not operators) produce NumPy arrays, like JAX
    assert isinstance(np.sin(x), np.ndarray)


def test_operators_with_scalars_and_numpy():
    x = jnp.array([1.0, 2.0, 4.0])
    xn = np.array([1.0, 2.0, 4.0], np.float32)
    cases = [
        (x + 1, xn + 1), (1 + x, 1 + xn), (x - 1, xn - 1), (1 - x, 1 - xn),
        (x * 2, xn * 2), (2 * x, 2 * xn), (x / 2, xn / 2), (2 / x, 2 / xn),
        (-x, -xn), (x + np.float32(1), xn + 1), (x * xn, xn * xn),
    ]
    for got, want in cases:
        assert isinstance(got, ember.Array)
        assert got.dtype == np.float32
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    assert (jnp.array([1, 2]) * 2.5).dtype == np.float32
    assert (jnp.array([1, 2], ) + 1).dtype == np.int32


def test_more_operators():
    x = _a([5, -3, 4], np.int32)
    xn = np.array([5, -3, 4], np.int32)
    np.testing.assert_array_equal(np.asarray(x // 2), xn // 2)
    np.testing.assert_array_equal(np.asarray(x % 3), xn % 3)
    np.testing.assert_array_equal(np.asarray(x ** 2), xn ** 2)
    np.testing.assert_array_equal(np.asarray(abs(x)), np.abs(xn))
    np.testing.assert_array_equal(np.asarray(x & 1), xn & 1)
    np.testing.assert_array_equal(np.asarray(x | 1), xn | 1)
    np.testing.assert_array_equal(np.asarray(x ^ 1), xn ^ 1)
    np.testing.assert_array_equal(np.asarray(~x), ~xn)
    np.testing.assert_array_equal(np.asarray(x << 1), xn << 1)
    np.testing.assert_array_equal(np.asarray(x >> 1), xn >> 1)
    m = _a(np.eye(2), np.float32)
    np.testing.assert_array_equal(np.asarray(m @ m), np.eye(2))


def test_comparisons():
    x = jnp.array([1.0, 2.0, 3.0])
    xn = np.array([1.0, 2.0, 3.0], np.float32)
    for got, want in [(x < 2, xn < 2), (x <= 2, xn <= 2), (x > 2, xn > 2),
                      (x >= 2, xn >= 2), (x == 2, xn == 2), (x != 2, xn != 2),
                      (2 < x, 2 < xn), (x == x, xn == xn)]:
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(np.asarray(got), want)


def test_unsupported_operand_types():
    x = jnp.array([1.0, 2.0])
    with pytest.raises(TypeError):
        x + "a"
    with pytest.raises(TypeError):
        x + [1.0, 2.0]
    with pytest.raises(TypeError):
        None * x


# ---------------------------------------------------------------- Python conversions


def test_scalar_conversions():
    assert float(jnp.array(2.5)) == 2.5 and type(float(jnp.array(2.5))) is float
    assert int(jnp.array(7)) == 7
    assert int(jnp.array(7.9)) == 7
    assert bool(jnp.array(True)) is True and bool(jnp.array(0.0)) is False
    assert complex(jnp.array(1.5)) == 1.5 + 0j
    assert [10, 20, 30][jnp.array(1)] == 20
    assert jnp.array(2).__index__() == 2
    with pytest.raises(TypeError, match="integer"):
        [1, 2][jnp.array(1.0)]


def test_bool_of_multi_element_array():
    with pytest.raises(ValueError, match="ambiguous"):
        bool(jnp.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="ambiguous"):
        if jnp.array([True, True]):
            pass


def test_len_and_iter():
    x = _a(np.arange(6).reshape(3, 2), np.int32)
    assert len(x) == 3
    rows = list(x)
    assert len(rows) == 3 and all(isinstance(r, ember.Array) for r in rows)
    np.testing.assert_array_equal(np.asarray(rows[1]), [2, 3])
    assert rows[0].dtype == np.int32
    with pytest.raises(TypeError, match="unsized"):
        len(jnp.array(1.0))
    with pytest.raises(TypeError, match="0-d"):
        iter(jnp.array(1.0))
    assert list(jnp.zeros((0, 2))) == []


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.bool_, np.complex64])
def test_iterating_a_vector_gives_0d_arrays(dtype):
    values = np.array([1, 0, 3], dtype)
    x = _a(values, dtype)
    items = list(x)
    assert all(isinstance(v, ember.Array) and v.shape == () and v.dtype == dtype
               for v in items)
    assert [v.item() for v in items] == values.tolist()
    first, _, last = x
    assert first.item() == values[0] and last.item() == values[2]
    assert (values[2] in x) and not (np.array(7, dtype) in x if dtype != np.bool_ else False)
    assert [bool(v == w) for v, w in zip(x, values)] == [True] * 3


def test_item_and_tolist():
    assert jnp.array(3.5).item() == 3.5 and type(jnp.array(3.5).item()) is float
    assert jnp.array(3).item() == 3 and type(jnp.array(3).item()) is int
    x = _a([[1, 2], [3, 4]], np.int32)
    assert x.tolist() == [[1, 2], [3, 4]]
    assert x.item(3) == 4
    with pytest.raises(ValueError):
        x.item()


def test_hash_raises():
    with pytest.raises(TypeError, match="unhashable"):
        hash(jnp.array(1.0))
    with pytest.raises(TypeError):
        {jnp.array([1.0]): 1}  # noqa: B018


# ---------------------------------------------------------------- copies, pickling


def test_copy_and_pickle():
    x = jnp.array([1.0, 2.0])
    for y in (x.copy(), copy.copy(x), copy.deepcopy(x), pickle.loads(pickle.dumps(x))):
        assert isinstance(y, ember.Array)
        assert y.dtype == x.dtype and y.weak_type == x.weak_type
        np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
    w = pickle.loads(pickle.dumps(jnp.array(2.0)))
    assert w.weak_type and w.dtype == np.float32
    b = pickle.loads(pickle.dumps(jnp.zeros(3, ember.dtypes.bfloat16)))
    assert b.dtype == ember.dtypes.bfloat16
    assert not np.shares_memory(np.asarray(x.copy()), np.asarray(x))


# ---------------------------------------------------------------- devices


def test_devices_and_device_put_get():
    (dev,) = ember.devices()
    assert dev.platform == "cpu"
    assert ember.devices("cpu") == [dev]
    x = jnp.array([1.0, 2.0])
    assert x.device == dev and x.devices() == {dev}
    assert x.block_until_ready() is x and x.is_ready()
    tree = {"a": np.ones(2), "b": (1.0, np.arange(3, dtype=np.int8))}
    put = ember.device_put(tree)
    assert isinstance(put["a"], ember.Array) and put["a"].dtype == np.float32
    assert put["b"][0].weak_type and put["b"][1].dtype == np.int8
    assert ember.device_put(x) is x
    on_dev = ember.device_put(x, dev)  # (as JAX: a new array, committed to the device)
    assert on_dev is not x and on_dev.committed and not x.committed
    np.testing.assert_array_equal(np.asarray(on_dev), np.asarray(x))
    got = ember.device_get(put)
    assert isinstance(got["a"], np.ndarray)
    np.testing.assert_array_equal(got["b"][1], np.arange(3))
    assert ember.device_get(3) == 3
    assert ember.block_until_ready(put) is put
    with pytest.raises(ValueError, match="device"):
        ember.device_put(x, "gpu:0")
    with pytest.raises(RuntimeError, match="backend"):
        ember.devices("tpu")


@pytest.mark.parametrize("make", [ember.device_put, jnp.array, jnp.asarray],
                         ids=["device_put", "array", "asarray"])
@pytest.mark.parametrize("dtype, want", [(np.float64, np.float32), (np.float32, np.float32),
                                         (np.int64, np.int32), (np.uint8, np.uint8),
                                         (ember.dtypes.bfloat16, ember.dtypes.bfloat16),
                                         (np.complex128, np.complex64), (np.bool_, np.bool_)])
def test_large_host_arrays_are_copied_into_aligned_device_memory(make, dtype, want):
    rng = np.random.default_rng(0)
    src = (rng.standard_normal((1 << 18) + 3) * 100).astype(dtype)  # >= 1 MiB in NumPy
    host = np.empty(src.nbytes + 16, np.uint8)[16:].view(src.dtype)  # 16 bytes off 64
    host[...] = src
    x = make(host)
    value = np.asarray(x)
    assert x.dtype == want and value.ctypes.data % 64 == 0
    np.testing.assert_array_equal(value, src.astype(want))
    assert not np.shares_memory(value, host) and not value.flags.writeable
    host[0] = 1  # the device copy is independent of the host array
    assert value[0] == src.astype(want)[0]


def test_small_and_unconvertible_host_arrays_keep_their_behaviour():
    x = ember.device_put(np.arange(5, dtype=np.int16))
    assert x.dtype == np.int16 and list(np.asarray(x)) == [0, 1, 2, 3, 4]
    assert jnp.array(np.ones((3, 2))).dtype == np.float32
    with pytest.raises(TypeError, match="array: cannot convert"):
        jnp.array(np.array([object()] * (1 << 16)))
    with pytest.raises(TypeError, match="not a valid ember array type"):
        jnp.array(np.array(["a"] * (1 << 16)))


def test_array_constructor_validates():
    a = ember.Array(np.arange(3, dtype=np.int64))
    assert a.dtype == np.int32
    with pytest.raises(TypeError, match="not a valid ember array type"):
        ember.Array(np.array(["a"]))


# ---------------------------------------------------------------- methods (jnp-backed)


_X = np.array([[1.5, -2.0, 3.0], [0.5, 4.0, -1.0]], np.float32)


@pytest.mark.parametrize("name,call,ref", [
    ("sum", lambda x: x.sum(), lambda n: n.sum()),
    ("sum_axis", lambda x: x.sum(axis=0), lambda n: n.sum(axis=0)),
    ("mean", lambda x: x.mean(axis=1), lambda n: n.mean(axis=1)),
    ("max", lambda x: x.max(), lambda n: n.max()),
    ("min", lambda x: x.min(axis=0), lambda n: n.min(axis=0)),
    ("prod", lambda x: x.prod(axis=1), lambda n: n.prod(axis=1)),
    ("argmax", lambda x: x.argmax(), lambda n: n.argmax()),
    ("argmin", lambda x: x.argmin(axis=1), lambda n: n.argmin(axis=1)),
    ("reshape", lambda x: x.reshape(3, 2), lambda n: n.reshape(3, 2)),
    ("reshape_tuple", lambda x: x.reshape((6,)), lambda n: n.reshape((6,))),
    ("astype", lambda x: x.astype(np.int32), lambda n: n.astype(np.int32)),
    ("transpose", lambda x: x.transpose(), lambda n: n.transpose()),
    ("transpose_axes", lambda x: x.transpose(1, 0), lambda n: n.transpose(1, 0)),
    ("squeeze", lambda x: x.reshape(1, 6).squeeze(), lambda n: n.reshape(1, 6).squeeze()),
    ("ravel", lambda x: x.ravel(), lambda n: n.ravel()),
    ("flatten", lambda x: x.flatten(), lambda n: n.flatten()),
    ("clip", lambda x: x.clip(-1.0, 2.0), lambda n: n.clip(-1.0, 2.0)),
    ("round", lambda x: x.round(), lambda n: n.round()),
    ("cumsum", lambda x: x.cumsum(axis=1), lambda n: n.cumsum(axis=1)),
    ("dot", lambda x: x.dot(x.T), lambda n: n.dot(n.T)),
    ("all", lambda x: (x > 0).all(axis=0), lambda n: (n > 0).all(axis=0)),
    ("any", lambda x: (x > 0).any(), lambda n: (n > 0).any()),
    ("std", lambda x: x.std(), lambda n: n.std()),
    ("var", lambda x: x.var(axis=0), lambda n: n.var(axis=0)),
])
def test_methods(name, call, ref):
    out = call(jnp.asarray(_X))
    want = ref(_X)
    assert isinstance(out, ember.Array)
    assert out.shape == np.shape(want)
    np.testing.assert_allclose(np.asarray(out, dtype=np.float64),
                               np.asarray(want, dtype=np.float64), rtol=1e-5, atol=1e-6)


def test_method_dtypes():
    x = jnp.asarray(_X)
    assert x.astype(np.int32).dtype == np.int32
    assert x.argmax().dtype == np.int32
    assert (x > 0).all().dtype == np.bool_
    assert x.sum().dtype == np.float32
    assert jnp.asarray(np.arange(3, dtype=np.int8)).sum().dtype == np.int32


def _tracer_classes():
    from ember.core import Tracer
    from ember.interpreters import ad, batching, partial_eval  # noqa: F401 - defines them
    found, todo = [], [Tracer]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_tracer_fields_do_not_hide_array_methods():
    # A tracer's own attribute named like an Array method (a jaxpr tracer's "var" did) makes
    # x.var() fail inside jit.
    public = {n for n in dir(ember.Array) if not n.startswith("_")}
    for cls in _tracer_classes():
        fields = [n for c in cls.__mro__ for n in getattr(c, "__slots__", ())]
        assert not public & set(fields), (cls.__name__, public & set(fields))


@pytest.mark.parametrize("transform", ["jit", "vmap", "grad"])
def test_statistics_methods_under_transformations(transform):
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4) / 7

    def f(a):
        return a.var(0).sum() + a.std() + a.mean(1).sum() + a.max() + a.sum(0).min()

    def ref(a):
        return a.var(0).sum() + a.std() + a.mean(1).sum() + a.max() + a.sum(0).min()
    if transform == "jit":
        np.testing.assert_allclose(float(ember.jit(f)(jnp.asarray(x))), ref(x), rtol=1e-6)
    elif transform == "vmap":
        got = ember.vmap(f)(jnp.asarray(np.stack([x, 2 * x])))
        np.testing.assert_allclose(np.asarray(got), [ref(x), ref(2 * x)], rtol=1e-6)
    else:
        g = np.asarray(ember.grad(lambda a: a.var())(jnp.asarray(x)))
        np.testing.assert_allclose(g, 2 * (x - x.mean()) / x.size, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("fn", [jnp.sort, jnp.sum, jnp.cumsum, jnp.mean, jnp.ravel,
                                lambda a: jnp.reshape(a, (2, 2)), lambda a: jnp.clip(a, 0, 1),
                                lambda a: jnp.take(a, jnp.array([0])), ember.Array,
                                jnp.asarray, ember.device_put],
                         ids=["sort", "sum", "cumsum", "mean", "ravel", "reshape", "clip",
                              "take", "Array", "asarray", "device_put"])
def test_host_arrays_passed_in_stay_writable_and_unshared(fn):
    host = np.arange(4, dtype=np.float32)
    out = fn(host)
    before = np.asarray(out).copy()
    assert host.flags.writeable
    host[...] = -7  # (raised "assignment destination is read-only" before)
    np.testing.assert_array_equal(np.asarray(out), before)


@pytest.mark.parametrize("make", [
    lambda: jnp.ones((512, 1024)), lambda: jnp.full((512, 1024), 3, jnp.int32),
    lambda: jnp.zeros((512, 1024)).astype(jnp.int16) + jnp.int16(1),
    lambda: jnp.arange(1 << 19, dtype=jnp.float32),
    lambda: jnp.concatenate([jnp.ones((256, 1024)), jnp.zeros((256, 1024))]),
    lambda: jnp.sort(jnp.ones((512, 1024)), axis=0),
    lambda: jnp.where(jnp.ones((512, 1024)) > 0, 1.0, 2.0),
    lambda: jnp.ones((512, 1024)).astype(jnp.int32)],
    ids=["ones", "full", "add", "arange", "concatenate", "sort", "where", "astype"])
def test_large_eager_results_are_64_byte_aligned_once_a_program_reads_them(make):
    out = make()
    before = np.array(out)
    assert before.nbytes >= 1 << 19
    ember.jit(lambda v: v[:1] + v[-1:])(out).block_until_ready()
    value = np.asarray(out)
    assert value.ctypes.data % 64 == 0 and not value.flags.writeable
    np.testing.assert_array_equal(value, before)
    assert value.dtype == before.dtype and out.shape == before.shape


def test_a_misaligned_value_moves_once_to_aligned_memory_when_a_program_reads_it():
    from ember.runtime.array import Array
    raw = np.arange((1 << 18) + 16, dtype=np.float32)
    off = raw[(-raw.ctypes.data % 64) // 4 + 4:][:1 << 18]  # 16 bytes past a 64-byte line
    off.flags.writeable = False
    a = Array._wrap(off, ember.core.ShapedArray(off.shape, off.dtype))
    assert a._value is off  # (eager wrapping copies nothing)
    f = ember.jit(lambda v: v * 2.0)
    np.testing.assert_array_equal(np.asarray(f(a)), off * 2)
    moved = a._value
    assert moved is not off and moved.ctypes.data % 64 == 0 and not moved.flags.writeable
    np.testing.assert_array_equal(moved, off)
    f(a).block_until_ready()
    assert a._value is moved  # once


def test_eager_results_are_not_copied_to_be_aligned(monkeypatch):
    from ember.runtime import array as array_module

    def copied(value):
        raise AssertionError("an eager result was copied")

    monkeypatch.setattr(array_module, "aligned_result", copied)
    x = jnp.ones((512, 1024))
    for out in (lax.add(x, x), lax.exp(x), jnp.sort(x, axis=0), x.astype(jnp.int32),
                jnp.concatenate([x, x])):
        assert np.asarray(out).nbytes >= 1 << 19


def test_aligned_result_copies_only_large_contiguous_misaligned_values():
    from ember.runtime.array import aligned_result
    raw = np.arange((1 << 18) + 16, dtype=np.float32)
    off = raw[(-raw.ctypes.data % 64) // 4 + 4:][:1 << 18]  # 16 bytes past a 64-byte line
    assert off.ctypes.data % 64 == 16
    moved = aligned_result(off)
    assert moved.ctypes.data % 64 == 0 and not np.shares_memory(moved, raw)
    np.testing.assert_array_equal(moved, off)
    small = off[:100]
    assert aligned_result(small) is small
    strided = off[::2]
    assert aligned_result(strided) is strided


def test_pooled_min_bytes_is_the_buffer_pools():
    from ember.backends.cpu import buffer_pool
    from ember.runtime.array import POOLED_MIN_BYTES
    assert POOLED_MIN_BYTES == buffer_pool.MIN_BYTES


def test_builtin_round_rounds_half_to_even_into_integers():
    x = jnp.array([0.5, 1.5, 2.6, -2.5])
    out = round(x)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), [0, 2, 3, -2])
    two = round(jnp.array([2.567, -1.005]), 2)
    assert two.dtype == np.float32
    np.testing.assert_allclose(np.asarray(two), [2.57, -1.0], rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda v: round(v))(x)), [0, 2, 3, -2])


@pytest.mark.parametrize("src, dst", [(np.int16, np.int8), (np.int8, np.int16),
                                      (np.float32, np.int32), (np.float32, np.uint8),
                                      (np.uint8, np.float32), (np.bool_, np.int8),
                                      (np.int8, np.bool_), (np.complex64, np.float32),
                                      (np.float32, np.complex64), (np.complex64, np.int16)])
def test_view_reads_the_bits_as_numpy_does(src, dst):
    r = np.random.default_rng(0)
    if np.dtype(src).kind == "c":
        x = (r.normal(size=(3, 8)) + 1j * r.normal(size=(3, 8))).astype(src)
    elif np.dtype(src).kind in "biu" and (src == np.bool_ or dst == np.bool_):
        x = r.integers(0, 2, (3, 8)).astype(src)
    else:
        x = (r.normal(size=(3, 8)) * 100).astype(src)
    want = x.view(dst)
    for got in (jnp.asarray(x).view(dst), ember.jit(lambda a: a.view(dst))(x)):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got).view(np.uint8), want.view(np.uint8))


def test_view_errors_tobytes_and_compress():
    with pytest.raises(ValueError, match="multiple"):
        jnp.zeros(3, jnp.int8).view(jnp.int16)
    with pytest.raises(ValueError, match="0-d"):
        jnp.zeros((), jnp.int8).view(jnp.int16)
    assert int(jnp.asarray(np.float32(1.5)).view(jnp.int32)) == 0x3FC00000
    assert jnp.arange(3).tobytes() == np.arange(3, dtype=np.int32).tobytes()
    mask = jnp.array([True, False, True, False, True])
    np.testing.assert_array_equal(np.asarray(jnp.arange(5).compress(mask)), [0, 2, 4])


def test_numpy_views_of_an_array_cannot_be_made_writeable():
    x = jnp.arange(4.0)
    view = np.asarray(x)
    with pytest.raises(ValueError, match="WRITEABLE"):
        view.flags.writeable = True
    np.testing.assert_array_equal(np.asarray(x), [0.0, 1.0, 2.0, 3.0])


def test_traced_values_are_instances_of_array():
    # As ``isinstance(x, jax.Array)`` in JAX: filters over pytrees behave the same in jit.
    def halve_arrays(tree):
        return ember.tree_util.tree_map(
            lambda v: v * 0.5 if isinstance(v, ember.Array) else v, tree)

    eager = halve_arrays({"w": jnp.ones(2), "n": 3})
    jitted = ember.jit(halve_arrays)({"w": jnp.ones(2), "n": 3})
    np.testing.assert_array_equal(np.asarray(eager["w"]), [0.5, 0.5])
    np.testing.assert_array_equal(np.asarray(jitted["w"]), [0.5, 0.5])
    assert ember.grad(lambda x: x.sum() if isinstance(x, jnp.ndarray) else 0.0)(
        jnp.ones(2)).tolist() == [1.0, 1.0]
    assert not isinstance(np.ones(2), ember.Array) and not isinstance(1.0, ember.Array)
