"""Sorts whose comparator is a plain lexicographic order run on NumPy's stable sorts
(``ember.compiler.sort_order``): the recognizer, and agreement with the general path, which
evaluates the comparator itself inside a merge sort."""

import functools

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.compiler import eval_structural, sort_order
from ember.compiler.evaluator import evaluate_computation
from ember.compiler.hlo import Builder, Module, Shape
from ember.compiler.lower import lower_closed_jaxpr
from ember.compiler.sort_order import lexicographic_keys, stable_order, top_k
from tests.bits import assert_same_bits, top_k_order

BF16 = np.dtype(ml_dtypes.bfloat16)


def sort_instruction(f, *args):
    lowered = lower_closed_jaxpr(ember.make_jaxpr(f)(*args))
    return next(i for i in lowered.module.entry.instructions if i.opcode == "sort")


def keys_with_ties_and_specials(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 4, shape).astype(dtype)
    pool = np.array([np.nan, -np.nan, -0.0, 0.0, 1.0, -1.0, np.inf, -np.inf, 2.5],
                    np.float32)
    return rng.choice(pool, shape).astype(dtype)


def general_sort(inst, operands):
    """The sort through the comparator-evaluating merge sort (the path before NumPy)."""
    dim = inst.attrs["dimension"]
    moved = [np.moveaxis(o, dim, -1) for o in operands]
    n = moved[0].shape[-1]
    rows = [m.reshape(-1, n) for m in moved]
    less = eval_structural._pairwise_less(inst.calls[0], rows)
    perm = eval_structural._merge_sort_perm(less, rows[0].shape[0], n)
    return [np.moveaxis(np.take_along_axis(r, perm, axis=1).reshape(m.shape), -1, dim)
            for r, m in zip(rows, moved)]


CASES = [  # (function, operand dtypes, expected keys, descending)
    (lambda x: lax.sort(x), [np.float32], [0], False),
    (lambda x: lax.sort(x, dimension=0), [np.int32], [0], False),
    (lambda x: lax.sort(x), [np.bool_], [0], False),
    (lambda x: lax.sort(x), [np.uint8], [0], False),
    (lambda x: lax.sort(x), [BF16], [0], False),
    (lambda x: lax.sort(x), [np.float16], [0], False),
    (lambda x: jnp.argsort(x), [np.float64], [0], False),
    (lambda a, b: lax.sort((a, b), num_keys=2), [np.float32, np.int32], [0, 1], False),
    (lambda a, b, c: lax.sort((a, b, c), num_keys=2), [np.int32, np.float32, np.float32],
     [0, 1], False),
    (lambda a, b, c: lax.sort((a, b, c), num_keys=3), [np.uint8, BF16, np.float32],
     [0, 1, 2], False),
    (lambda a, b: lax.sort_key_val(a, b), [np.float32, np.complex64], [0], False),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_lax_comparators_are_recognized_and_sort_like_the_general_path(case):
    f, dts, keys, descending = CASES[case]
    shape = (3, 37)
    rng = np.random.default_rng(case)
    args = [keys_with_ties_and_specials(shape, dt, seed=i) if np.dtype(dt).kind != "c" else
            (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dt)
            for i, dt in enumerate(dts)]
    inst = sort_instruction(f, *args)
    assert lexicographic_keys(inst.calls[0]) == (keys, descending)
    operands = [np.asarray(a) for a in args]
    if inst.operands[-1].opcode == "iota":  # (argsort: the lowering adds positions)
        operands.append(np.broadcast_to(np.arange(shape[-1], dtype=np.int32), shape).copy())
    got = eval_structural._sort(inst, *operands)
    want = general_sort(inst, operands)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_same_bits(np.asarray(g), w)


def comparator(build, dtypes):
    """A hand-built comparator: ``build(builder, params)`` returns its root."""
    m = Module("m")
    b = Builder(m, "cmp")
    params = [b.parameter(i, Shape(np.dtype(dt), ())) for i, dt in
              enumerate(dt for dt in dtypes for _ in (0, 1))]
    return b.build(build(b, params))


def cmp(b, x, y, direction):
    return b.op("compare", x, y, comparison_direction=direction)


def float_less(b, x, y):  # the lax form, with its operands swapped around
    nan_case = b.op("and", cmp(b, y, y, "NE"), cmp(b, x, x, "EQ"))
    return b.op("or", nan_case, cmp(b, x, y, "LT"))


NOT_PLAIN = {
    "bare float LT (NaNs unordered)": (lambda b, p: cmp(b, p[0], p[1], "LT"), [np.float32]),
    "GT": (lambda b, p: cmp(b, p[0], p[1], "GT"), [np.int32]),
    "LE (not strict)": (lambda b, p: cmp(b, p[0], p[1], "LE"), [np.int32]),
    "across operands": (lambda b, p: cmp(b, p[0], p[3], "LT"), [np.int32, np.int32]),
    "one parameter with itself": (lambda b, p: cmp(b, p[0], p[0], "LT"), [np.int32]),
    "mixed directions": (lambda b, p: b.op("or", cmp(b, p[0], p[1], "LT"), b.op(
        "and", cmp(b, p[0], p[1], "EQ"), cmp(b, p[3], p[2], "LT"))), [np.int32, np.int32]),
    "a key twice": (lambda b, p: b.op("or", cmp(b, p[0], p[1], "LT"), b.op(
        "and", cmp(b, p[0], p[1], "EQ"), cmp(b, p[0], p[1], "LT"))), [np.int32]),
    "wrong tie test": (lambda b, p: b.op("or", cmp(b, p[0], p[1], "LT"), b.op(
        "and", cmp(b, p[0], p[1], "NE"), cmp(b, p[2], p[3], "LT"))), [np.int32, np.int32]),
    "float tie without NaNs": (lambda b, p: b.op("or", float_less(b, p[0], p[1]), b.op(
        "and", cmp(b, p[0], p[1], "EQ"), cmp(b, p[2], p[3], "LT"))), [np.float32, np.int32]),
    "negated values": (lambda b, p: cmp(b, b.op("negate", p[0]), b.op("negate", p[1]), "LT"),
                       [np.int32]),
}


@pytest.mark.parametrize("name", sorted(NOT_PLAIN))
def test_other_comparators_take_the_general_path(name):
    build, dtypes = NOT_PLAIN[name]
    comp = comparator(build, dtypes)
    assert lexicographic_keys(comp) is None
    # ...and still sort by what they say: a stable sort calling the comparator in Python.
    operands = [keys_with_ties_and_specials((9,), dt, seed=i) for i, dt in enumerate(dtypes)]
    m = Module("m")
    b = Builder(m, "main")
    ps = [b.parameter(i, Shape(o.dtype, o.shape)) for i, o in enumerate(operands)]
    inst = b.op("sort", *ps, calls=[comp], dimension=0, is_stable=True)
    got = eval_structural._sort(inst, *operands)

    def less(i, j):
        args = [np.asarray(v) for o in operands for v in (o[i], o[j])]
        return bool(evaluate_computation(comp, args))
    if name in ("LE (not strict)", "float tie without NaNs", "bare float LT (NaNs unordered)",
                "across operands", "wrong tie test"):
        return  # (not strict weak orders: no one answer to compare with)
    order = sorted(range(9), key=functools.cmp_to_key(
        lambda i, j: -1 if less(i, j) else (1 if less(j, i) else 0)))
    for g, o in zip(got, operands):
        assert_same_bits(np.asarray(g), o[order])


def test_the_lax_float_form_with_operands_swapped_is_recognized():
    comp = comparator(lambda b, p: float_less(b, p[0], p[1]), [np.float32])
    assert lexicographic_keys(comp) == ([0], False)
    comp = comparator(lambda b, p: float_less(b, p[1], p[0]), [np.float32])
    assert lexicographic_keys(comp) == ([0], True)


def test_stable_order_matches_a_python_stable_sort():
    x = keys_with_ties_and_specials((50,), np.float32)
    k = np.random.default_rng(1).integers(0, 3, 50)

    def rank(v):  # NaNs last and equal, -0.0 == 0.0
        return (1, 0.0) if np.isnan(v) else (0, float(v))
    want = sorted(range(50), key=lambda i: (rank(x[i]), int(k[i])))
    np.testing.assert_array_equal(stable_order([x, k], 0), want)
    want_desc = sorted(range(50), key=lambda i: (rank(x[i]), int(k[i])), reverse=True)
    # (descending and stable: ties keep their order, which reverse=True also does)
    np.testing.assert_array_equal(stable_order([x, k], 0, descending=True), want_desc)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.int8, np.int16, np.int32,
                                   np.uint8, np.uint32, np.bool_, np.float64, np.int64])
@pytest.mark.parametrize("shape,axis", [((9000,), 0), ((5, 2000), 1), ((2000, 5), 0),
                                        ((4, 8, 300), 2), ((1, 8192), 1), ((300, 40), 0)])
def test_packed_sort_of_large_arrays_equals_numpys_stable_argsort(dtype, shape, axis):
    # Arrays of 4096 elements or more with keys of 32 bits or fewer sort as unique 64-bit
    # (row, key, position) integers; the order must be the stable one, ties and specials
    # included (NaNs of either sign last and equal, -0.0 equal to 0.0).
    x = keys_with_ties_and_specials(shape, dtype, seed=sum(shape) + axis)
    if np.dtype(dtype).kind in "iu":  # (the extremes of the range too)
        info = np.iinfo(dtype)
        x.flat[::7], x.flat[::11] = info.min, info.max
    reference = x.astype(np.float32) if dtype == BF16 else x
    want = np.argsort(reference, axis=axis, kind="stable")
    got = stable_order([x], axis)
    assert got.dtype == want.dtype and got.flags.c_contiguous  # (as NumPy's argsort)
    packs = sort_order.packed_order(reference, axis) is not None
    assert packs == (np.dtype(dtype).itemsize <= 4)  # (wider values: NumPy's stable sort)
    np.testing.assert_array_equal(got, want)
    if x.ndim == 1:  # descending and stable, against Python's sort (NaNs first, then)
        def rank(v):
            return (1, 0.0) if np.isnan(v) else (0, float(v))
        values = reference.astype(np.float64)
        want_desc = sorted(range(x.size), key=lambda i: rank(values[i]), reverse=True)
        np.testing.assert_array_equal(stable_order([x], 0, descending=True), want_desc)


def test_jitted_sorts_agree_with_numpy_on_both_backends():
    x = keys_with_ties_and_specials((4, 300), np.float32)
    for backend in ("cpu", "interpreter"):
        f = ember.jit(lambda x: (jnp.sort(x, axis=1), jnp.argsort(x, axis=0)), backend=backend)
        s, a = f(x)
        assert_same_bits(np.asarray(s), np.sort(x, axis=1, kind="stable"))
        np.testing.assert_array_equal(np.asarray(a), np.argsort(x, axis=0, kind="stable"))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, BF16])
def test_descending_sorts_match_the_general_path(dtype):
    values = keys_with_ties_and_specials((3, 41), dtype)
    positions = np.broadcast_to(np.arange(41, dtype=np.int32), (3, 41)).copy()

    def build(b, p):  # (values descending, then positions descending)
        first = float_less(b, p[1], p[0]) if np.dtype(dtype).kind != "i" else \
            cmp(b, p[1], p[0], "LT")
        return b.op("or", first, b.op("and", equal(b, p[0], p[1], np.dtype(dtype)),
                                      cmp(b, p[3], p[2], "LT")))
    comp = comparator(build, [dtype, np.int32])
    assert lexicographic_keys(comp) == ([0, 1], True)
    m = Module("m")
    b = Builder(m, "main")
    ps = [b.parameter(0, Shape(values.dtype, values.shape)),
          b.parameter(1, Shape(positions.dtype, positions.shape))]
    inst = b.op("sort", *ps, calls=[comp], dimension=1, is_stable=True)
    got = eval_structural._sort(inst, values, positions)
    want = general_sort(inst, [values, positions])
    for g, w in zip(got, want):
        assert_same_bits(np.asarray(g), w)


def equal(b, x, y, dtype):
    eq = cmp(b, x, y, "EQ")
    if dtype.kind == "i":
        return eq
    return b.op("or", eq, b.op("and", cmp(b, x, x, "NE"), cmp(b, y, y, "NE")))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.int32, np.uint8,
                                   np.bool_, np.int8, np.float64, np.int64])
@pytest.mark.parametrize("k", [0, 1, 5, 37])
def test_top_k_is_the_head_of_xla_top_k_order(dtype, k):
    x = keys_with_ties_and_specials((4, 37), dtype)
    values, positions = top_k(x, k)
    order = top_k_order(x)[:, :k]
    assert positions.dtype == np.int32
    np.testing.assert_array_equal(positions, order)
    assert_same_bits(values, np.take_along_axis(x, order, axis=1))


def test_jitted_top_k_matches_a_python_reference():
    x = keys_with_ties_and_specials((6, 50), np.float32)
    values, positions = ember.jit(lambda a: lax.top_k(a, 7))(x)

    def rank(v):  # larger first, +0 before -0, +NaN first, -NaN last, earlier position first
        if np.isnan(v):
            return (2 if np.signbit(v) else 0, 0.0, False)
        return (1, -float(v), bool(np.signbit(v)))
    for r in range(6):
        want = sorted(range(50), key=lambda i: rank(x[r, i]))[:7]
        np.testing.assert_array_equal(np.asarray(positions)[r], want)
        assert_same_bits(np.asarray(values)[r], x[r, want])


def _long_rows(dtype):
    """Long single rows for the prefiltered top_k: random, ascending, tie-heavy, specials."""
    rng = np.random.default_rng(5)
    n = 1 << 17
    rows = {"random": rng.standard_normal(n), "ascending": np.linspace(-3e4, 3e4, n),
            "ties": rng.integers(0, 40, n).astype(np.float64),
            "few values on top": np.where(rng.random(n) < 0.001, 7.0, rng.random(n))}
    if np.dtype(dtype).kind == "f":
        special = rng.standard_normal(n)
        special[::97] = np.nan
        special[::89] = np.inf
        special[1::89] = -0.0
        rows["specials"] = special
    return {name: row.astype(dtype) for name, row in rows.items()}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.float16])
@pytest.mark.parametrize("k", [1, 100, 2048])
def test_prefiltered_top_k_of_a_long_row_equals_the_full_path(dtype, k, monkeypatch):
    from ember.compiler import sort_order
    for name, row in _long_rows(dtype).items():
        values, positions = top_k(row, k)
        monkeypatch.setattr(sort_order, "PREFILTER_MIN_N", 1 << 62)  # the full path
        full_values, full_positions = top_k(row, k)
        monkeypatch.undo()
        np.testing.assert_array_equal(positions, full_positions, err_msg=name)
        assert_same_bits(values, full_values)
        order = top_k_order(row[None])[0, :k]
        np.testing.assert_array_equal(positions, order, err_msg=name)
