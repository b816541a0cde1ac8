"""The dtype lattice: JAX's full binary promotion table, weak types, x64 canonicalization."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import dtypes

# JAX's documented binary promotion table (docs: "Type promotion semantics"), x64 enabled.
# i*, f*, c* are weak Python int/float/complex; a weak result means the default type of that
# kind with weak_type=True.
_TABLE = """
     b1  u1  u2  u4  u8  i1  i2  i4  i8  bf  f2  f4  f8  c8  c16 i*  f*  c*
b1   b1  u1  u2  u4  u8  i1  i2  i4  i8  bf  f2  f4  f8  c8  c16 i*  f*  c*
u1   u1  u1  u2  u4  u8  i2  i2  i4  i8  bf  f2  f4  f8  c8  c16 u1  f*  c*
u2   u2  u2  u2  u4  u8  i4  i4  i4  i8  bf  f2  f4  f8  c8  c16 u2  f*  c*
u4   u4  u4  u4  u4  u8  i8  i8  i8  i8  bf  f2  f4  f8  c8  c16 u4  f*  c*
u8   u8  u8  u8  u8  u8  f*  f*  f*  f*  bf  f2  f4  f8  c8  c16 u8  f*  c*
i1   i1  i2  i4  i8  f*  i1  i2  i4  i8  bf  f2  f4  f8  c8  c16 i1  f*  c*
i2   i2  i2  i4  i8  f*  i2  i2  i4  i8  bf  f2  f4  f8  c8  c16 i2  f*  c*
i4   i4  i4  i4  i8  f*  i4  i4  i4  i8  bf  f2  f4  f8  c8  c16 i4  f*  c*
i8   i8  i8  i8  i8  f*  i8  i8  i8  i8  bf  f2  f4  f8  c8  c16 i8  f*  c*
bf   bf  bf  bf  bf  bf  bf  bf  bf  bf  bf  f4  f4  f8  c8  c16 bf  bf  c8
f2   f2  f2  f2  f2  f2  f2  f2  f2  f2  f4  f2  f4  f8  c8  c16 f2  f2  c8
f4   f4  f4  f4  f4  f4  f4  f4  f4  f4  f4  f4  f4  f8  c8  c16 f4  f4  c8
f8   f8  f8  f8  f8  f8  f8  f8  f8  f8  f8  f8  f8  f8  c16 c16 f8  f8  c16
c8   c8  c8  c8  c8  c8  c8  c8  c8  c8  c8  c8  c8  c16 c8  c16 c8  c8  c8
c16  c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16
i*   i*  u1  u2  u4  u8  i1  i2  i4  i8  bf  f2  f4  f8  c8  c16 i*  f*  c*
f*   f*  f*  f*  f*  f*  f*  f*  f*  f*  bf  f2  f4  f8  c8  c16 f*  f*  c*
c*   c*  c*  c*  c*  c*  c*  c*  c*  c*  c8  c8  c8  c16 c8  c16 c*  c*  c*
"""

_CODES = {
    "b1": np.dtype(bool), "u1": np.dtype("uint8"), "u2": np.dtype("uint16"),
    "u4": np.dtype("uint32"), "u8": np.dtype("uint64"), "i1": np.dtype("int8"),
    "i2": np.dtype("int16"), "i4": np.dtype("int32"), "i8": np.dtype("int64"),
    "bf": dtypes.bfloat16, "f2": np.dtype("float16"), "f4": np.dtype("float32"),
    "f8": np.dtype("float64"), "c8": np.dtype("complex64"), "c16": np.dtype("complex128"),
    "i*": int, "f*": float, "c*": complex,
}
_WEAK_DEFAULT_X64 = {int: np.dtype("int64"), float: np.dtype("float64"),
                     complex: np.dtype("complex128")}
_TO_32 = {np.dtype("int64"): np.dtype("int32"), np.dtype("uint64"): np.dtype("uint32"),
          np.dtype("float64"): np.dtype("float32"),
          np.dtype("complex128"): np.dtype("complex64")}


_CANON32 = {"u8": "u4", "i8": "i4", "f8": "f4", "c16": "c8"}


def _parse_table():
    lines = [ln.split() for ln in _TABLE.strip().splitlines()]
    cols = lines[0]
    table = {}
    for row in lines[1:]:
        for col, res in zip(cols, row[1:]):
            table[(row[0], col)] = res
    return cols, table


_COLS, _PAIRS = _parse_table()


def _expected(code: str, x64: bool):
    t = _CODES[code]
    weak = any(t is w for w in (int, float, complex))  # np.dtype("int64") == int is True
    dt = _WEAK_DEFAULT_X64[t] if weak else t
    if not x64:
        dt = _TO_32.get(dt, dt)
    return dt, weak


@pytest.fixture
def x64():
    """Yields a setter for jax_enable_x64 and restores the previous value afterwards."""
    previous = ember.config.jax_enable_x64

    def set_x64(value):
        ember.config.update("jax_enable_x64", value)

    yield set_x64
    ember.config.update("jax_enable_x64", previous)


def test_table_is_symmetric_and_complete():
    assert len(_COLS) == 18
    assert len(_PAIRS) == 18 * 18
    for (a, b), r in _PAIRS.items():
        assert _PAIRS[(b, a)] == r, (a, b)


@pytest.mark.parametrize("enable", [True, False], ids=["x64", "x32"])
def test_promotion_table_result_type(x64, enable):
    x64(enable)
    errors = []
    for (a, b), r in _PAIRS.items():
        got = dtypes.result_type(_CODES[a], _CODES[b], return_weak_type_flag=True)
        if not enable:  # JAX canonicalizes the inputs first, then promotes in the x32 lattice
            r = _PAIRS[(_CANON32.get(a, a), _CANON32.get(b, b))]
        want = _expected(r, enable)
        if (np.dtype(got[0]), got[1]) != want:
            errors.append(f"{a}+{b}: got {got}, want {want}")
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("enable", [True, False], ids=["x64", "x32"])
def test_promote_types_table(x64, enable):
    # Like jnp.promote_types, the lattice result is not canonicalized: with x64 off too,
    # promote_types(float64, float32) is float64 and weak results are their 64-bit types.
    # The x32 lattice only differs in forming no 64-bit type from narrower inputs.
    x64(enable)
    for (a, b), r in _PAIRS.items():
        if not enable and {a, b} in ({"u4", "i1"}, {"u4", "i2"}, {"u4", "i4"}):
            r = "i4"
        got = dtypes.promote_types(_CODES[a], _CODES[b])
        assert got == _expected(r, True)[0], (a, b)


def test_x32_lattice_forms_no_64_bit_type(x64):
    x64(False)
    assert jnp.promote_types(jnp.uint32, jnp.int32) == np.int32
    assert jnp.promote_types(jnp.uint32, jnp.int64) == np.int64
    assert jnp.promote_types(jnp.uint64, jnp.int32) == np.float64  # weak float's dtype
    assert jnp.promote_types(int, int) == np.int64
    assert jnp.result_type(np.uint64, np.int32) == np.int32  # canonicalized inputs first
    assert jnp.result_type(np.float64, np.float16) == np.float32
    x64(True)
    assert jnp.promote_types(jnp.uint32, jnp.int32) == np.int64
    assert jnp.result_type(np.uint64, np.int32) == np.float64


def _operand(code: str):
    """A 0-d ember array of the code's dtype, or a Python scalar for weak codes."""
    t = _CODES[code]
    if t is int:
        return 1
    if t is float:
        return 1.0
    if t is complex:
        return 1j
    return jnp.zeros((), t)


@pytest.mark.parametrize("enable", [True, False], ids=["x64", "x32"])
def test_promotion_table_arithmetic(x64, enable):
    """jnp.add of arrays/scalars gives the table's dtype and weak type."""
    x64(enable)
    errors = []
    for (a, b), r in _PAIRS.items():
        if (a, b) == ("b1", "b1"):
            continue  # jnp.add of two bools is a logical or; see test_add_bools
        out = jnp.add(_operand(a), _operand(b))
        if not enable:  # 64-bit arrays cannot exist: operands are canonicalized first
            r = _PAIRS[(_CANON32.get(a, a), _CANON32.get(b, b))]
        want = _expected(r, enable)
        if (out.dtype, out.weak_type) != want:
            errors.append(f"{a}+{b}: got {(out.dtype, out.weak_type)}, want {want}")
    assert not errors, "\n".join(errors)


def test_add_bools():
    out = jnp.add(jnp.array([True, False]), jnp.array([True, True]))
    assert out.dtype == np.bool_ and not out.weak_type
    np.testing.assert_array_equal(np.asarray(out), [True, True])


@pytest.mark.parametrize("enable", [True, False], ids=["x64", "x32"])
def test_weakly_typed_arrays_promote_like_scalars(x64, enable):
    x64(enable)
    weak_f = jnp.asarray(2.0)
    assert weak_f.weak_type and weak_f.dtype == _expected("f*", enable)[0]
    for code in ("u1", "i1", "bf", "f2", "f4"):
        out = jnp.add(jnp.zeros((3,), _CODES[code]), weak_f)
        want = _expected(_PAIRS[(code, "f*")], enable)
        assert (out.dtype, out.weak_type) == want, code
    # result_type on values (not just dtypes) respects weakness
    assert dtypes.result_type(weak_f, np.int8(1), return_weak_type_flag=True) == \
        _expected("f*", enable)
    assert dtypes.result_type(np.float16(1), 3, return_weak_type_flag=True) == (
        np.dtype("float16"), False)


def test_python_scalars_are_weak_defaults(x64):
    x64(False)
    assert dtypes.result_type(1, return_weak_type_flag=True) == (np.dtype("int32"), True)
    assert dtypes.result_type(1.0, return_weak_type_flag=True) == (np.dtype("float32"), True)
    assert dtypes.result_type(True, return_weak_type_flag=True) == (np.dtype(bool), False)
    assert dtypes.result_type(1, 2.0, return_weak_type_flag=True) == (np.dtype("float32"), True)
    x64(True)
    assert dtypes.result_type(1, return_weak_type_flag=True) == (np.dtype("int64"), True)
    assert dtypes.result_type(1.0, return_weak_type_flag=True) == (np.dtype("float64"), True)
    assert dtypes.result_type(1j, return_weak_type_flag=True) == (np.dtype("complex128"), True)
    a = jnp.add(1, 2)
    assert a.dtype == np.int64 and a.weak_type
    b = jnp.add(1.5, 2)
    assert b.dtype == np.float64 and b.weak_type


def test_result_type_needs_an_argument():
    with pytest.raises(ValueError, match="at least one"):
        dtypes.result_type()


def test_result_type_rejects_unsupported_dtypes():
    with pytest.raises(TypeError, match="not a valid ember array type"):
        dtypes.result_type(np.dtype("U3"), np.int32)


def test_canonicalize_dtype(x64):
    x64(False)
    for d64, d32 in _TO_32.items():
        assert dtypes.canonicalize_dtype(d64) == d32
    for d in (np.int8, np.uint16, np.float16, dtypes.bfloat16, np.complex64, np.bool_):
        assert dtypes.canonicalize_dtype(d) == np.dtype(d)
    assert dtypes.canonicalize_dtype(dtypes.float0) == dtypes.float0
    x64(True)
    for d64 in _TO_32:
        assert dtypes.canonicalize_dtype(d64) == d64
    with pytest.raises(TypeError, match="not a valid ember array type"):
        dtypes.canonicalize_dtype(np.dtype(object))


def test_dtype_function(x64):
    x64(False)
    assert dtypes.dtype(1.0) == np.float32
    assert dtypes.dtype(1) == np.int32
    assert dtypes.dtype(True) == np.bool_
    assert dtypes.dtype(1j) == np.complex64
    assert dtypes.dtype(float) == np.float32
    assert dtypes.dtype("bfloat16") == dtypes.bfloat16
    assert dtypes.dtype(np.float64) == np.float64  # not canonicalized unless asked
    assert dtypes.dtype(np.float64, canonicalize=True) == np.float32
    assert dtypes.dtype(np.zeros(2, np.int16)) == np.int16
    assert dtypes.dtype(jnp.zeros(2, np.uint8)) == np.uint8
    with pytest.raises(ValueError, match="None"):
        dtypes.dtype(None)
    x64(True)
    assert dtypes.dtype(1.0) == np.float64
    assert dtypes.dtype(int) == np.int64


def test_issubdtype_bfloat16():
    bf = dtypes.bfloat16
    assert dtypes.issubdtype(bf, np.floating)
    assert dtypes.issubdtype(bf, np.inexact)
    assert dtypes.issubdtype(bf, np.number)
    assert not dtypes.issubdtype(bf, np.integer)
    assert not dtypes.issubdtype(bf, np.complexfloating)
    assert dtypes.issubdtype(bf, bf)
    assert not dtypes.issubdtype(bf, np.float16)
    assert dtypes.issubdtype(np.float16, np.floating)
    assert not dtypes.issubdtype(np.int8, np.floating)
    assert dtypes.issubdtype(np.uint8, np.unsignedinteger)
    assert dtypes.is_float(bf) and dtypes.is_inexact(bf) and not dtypes.is_integer(bf)


def test_can_cast():
    assert dtypes.can_cast(np.int8, np.int16)
    assert dtypes.can_cast(np.uint8, np.int16)
    assert not dtypes.can_cast(np.int16, np.int8)
    assert not dtypes.can_cast(np.float32, np.int32)
    assert dtypes.can_cast(np.float16, np.float32)
    assert dtypes.can_cast(dtypes.bfloat16, np.float32)
    assert not dtypes.can_cast(np.float32, dtypes.bfloat16)
    assert dtypes.can_cast(np.float32, np.float32)
    assert dtypes.can_cast(np.float32, np.int8, casting="unsafe")
    assert dtypes.can_cast(np.float64, np.float32, casting="same_kind")


def test_finfo_iinfo():
    fi = dtypes.finfo(dtypes.bfloat16)
    assert float(fi.eps) == 2.0 ** -7
    assert fi.bits == 16
    assert float(dtypes.finfo(np.float16).eps) == float(np.finfo(np.float16).eps)
    assert float(dtypes.finfo(np.float32).max) == float(np.finfo(np.float32).max)
    assert dtypes.iinfo(np.int8).min == -128
    assert dtypes.iinfo(np.uint16).max == 65535


def test_float0():
    assert dtypes.float0.itemsize == 0
    assert dtypes.float0.kind == "V"
    assert dtypes.canonicalize_dtype(dtypes.float0) == dtypes.float0
    assert dtypes.short_name(dtypes.float0) == "float0"
    z = np.zeros((2, 3), dtypes.float0)
    assert z.shape == (2, 3) and z.nbytes == 0


def test_short_names():
    expected = {"b1": "bool", "u1": "u8", "u8": "u64", "i1": "i8", "i4": "i32", "bf": "bf16",
                "f2": "f16", "f4": "f32", "f8": "f64", "c8": "c64", "c16": "c128"}
    for code, name in expected.items():
        assert dtypes.short_name(_CODES[code]) == name


def test_array_creation_keeps_64_bits_under_x64(x64):
    x64(True)
    assert jnp.array(np.zeros(2, np.float64)).dtype == np.float64
    assert jnp.array([1.5, 2.5]).dtype == np.float64
    assert jnp.array([1, 2]).dtype == np.int64
    assert jnp.zeros(2).dtype == np.float64
    assert jnp.asarray(1.0).dtype == np.float64
    assert jnp.zeros(2, np.uint64).dtype == np.uint64
    assert ember.device_put(np.ones(2)).dtype == np.float64
    x64(False)
    assert jnp.array(np.zeros(2, np.float64)).dtype == np.float32
    assert jnp.array([1, 2]).dtype == np.int32
    assert jnp.zeros(2, np.uint64).dtype == np.uint32
    assert ember.device_put(np.ones(2)).dtype == np.float32
    assert ember.Array(np.ones(2, np.int64)).dtype == np.int32


def test_float0_prints_and_promotes_as_in_jax(jax):
    from ember.core import ShapedArray
    aval = ShapedArray((3,), dtypes.float0)
    want = jax.core.ShapedArray((3,), jax.dtypes.float0)
    assert repr(aval) == repr(want) and str(aval) == str(want) == "float0[3]"
    assert jnp.result_type(dtypes.float0) == dtypes.float0
    assert jnp.result_type(dtypes.float0, dtypes.float0) == dtypes.float0
    with pytest.raises(ValueError, match="not a valid dtype for JAX type promotion"):
        jnp.result_type(dtypes.float0, np.float32)
    with pytest.raises(ValueError):
        jax.numpy.result_type(jax.dtypes.float0, np.float32)
