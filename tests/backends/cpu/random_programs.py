"""Random jnp programs for differential tests of the CPU backend (``test_random_programs``)
and against JAX (``tests/test_jax_oracle_programs.py``).

Each seed makes a program of 3-14 random steps over two or three inputs: elementwise math,
broadcasts against reductions, softmax-like row patterns, transposes, reshapes, strided
slices, flips, rolls, pads, concatenates, cumulative sums, matrix products, gathers,
scatters, sorts, integer and boolean arithmetic. Shapes range from one element to ~10^5,
so the programs reach the compiler's fusion, index arithmetic, vectorized loops, row and
scan kernels and the threaded paths. The reference is eager execution (NumPy kernels, no
fusion, no generated index arithmetic).

The program is generated while it runs: each step's choices depend only on a seeded
``random.Random`` and the shapes and dtypes of the values so far, so the eager call and the
trace under ``jit`` build the same program. Each value carries an "exact" flag: inputs are
exact, and so is what moves or selects values without rounding (transposes, slices, max,
integer sums...). Steps whose output jumps with a one-ulp change of their input (floor,
comparisons, argmax, sorts) take exact operands only, and exact outputs must agree bit for
bit; the others agree within a tolerance.

The jitted program runs twice: the first call runs the quickly compiled code of tiered
compilation, the second the optimized code.
"""

from __future__ import annotations

import random

import ml_dtypes
import numpy as np

import ember
import ember.numpy as jnp
from ember import lax

F32, I32, BOOL = np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.bool_)
F16, BF16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
F64, I64, U64 = np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.uint64)
FLOATS = (F32, F32, F32, F16, BF16)  # (what ``cast`` picks from: mostly float32)
INTS = (I32, I32, np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.uint32))
WIDE = (F64, I64, U64)  # (``cast`` picks these too with jax_enable_x64 on)
FLOAT = "float"  # ``_pick``'s dtype for any float type
INT = "int"  # ... and for any integer type


class Value:
    """A value of the program under construction, and whether it is exact (see above)."""

    __slots__ = ("v", "exact")

    def __init__(self, v, exact: bool):
        self.v, self.exact = v, exact

    @property
    def shape(self) -> tuple:
        return tuple(self.v.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.v.dtype)


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _is(dtype: np.dtype, kind) -> bool:
    if kind is None:
        return True
    if kind == FLOAT:
        return dtype in FLOATS or dtype == F64
    if kind == INT:
        return dtype in INTS or dtype in (I64, U64)
    return dtype == kind


def _pick(rng, pool, dtype=None, exact=False, ndim_min=0, nonempty=False):
    """A random value of the pool of that dtype (or kind, ``FLOAT``/``INT``), exact if asked,
    of at least that rank, and with elements if asked."""
    fits = [p for p in pool if _is(p.dtype, dtype) and (p.exact or not exact)
            and len(p.shape) >= ndim_min and (not nonempty or _size(p.shape))]
    return rng.choice(fits) if fits else None


def _partner(rng, pool, x, exact=False):
    """A float value that broadcasts against ``x`` to ``x``'s shape (``x`` if none does)."""
    def fits(p):
        if p.dtype != x.dtype or (exact and not p.exact) or len(p.shape) > len(x.shape):
            return False
        tail = x.shape[len(x.shape) - len(p.shape):]
        return all(a in (1, b) for a, b in zip(p.shape, tail))
    return rng.choice([p for p in pool if fits(p)] or [x])


# --------------------------------------------------------------------------- steps
# Each step takes (rng, pool) and returns a new Value, or None when nothing in the pool fits.

# Functions whose error stays near their input's relative error, whatever its size ...
_SMOOTH_UNARY = [
    lambda x: jnp.tanh(x), lambda x: jnp.sin(jnp.tanh(x) * 3), lambda x: jnp.cos(jnp.tanh(x)),
    lambda x: jnp.exp(jnp.tanh(x)), lambda x: jnp.log1p(jnp.abs(x)),
    lambda x: jnp.sqrt(jnp.abs(x) + 0.5), lambda x: lax.logistic(x), lambda x: lax.erf(x),
    lambda x: x * 0.5 + 0.25, lambda x: jnp.tanh(x) ** 2, lambda x: jnp.arctan(x),
    lambda x: jnp.power(jnp.abs(x) + 0.25, 1.5),
]
# ... and functions of exact inputs only (sin(444 + 1e-4) is off by 1e-4: no tolerance of a
# sum's rounding holds after it).
_PERIODIC_UNARY = [lambda x: jnp.sin(x), lambda x: jnp.cos(x), lambda x: jnp.expm1(jnp.sin(x)),
                   lambda x: jnp.tan(x)]
# (Lambdas throughout: the JAX oracle test swaps this module's ``jnp`` and ``lax``.)
_EXACT_UNARY = [
    lambda x: jnp.abs(x), lambda x: jnp.negative(x), lambda x: jnp.clip(x, -0.5, 0.75),
    lambda x: jnp.where(x > 0, x, 0.0), lambda x: jnp.floor(x), lambda x: jnp.ceil(x),
    lambda x: jnp.round(x), lambda x: jnp.trunc(x), lambda x: jnp.sign(x),
    lambda x: jnp.nan_to_num(x, posinf=9.0),
    lambda x: jnp.where(jnp.isnan(x) | jnp.isinf(x), -1.0, x * 0.0),
]


def unary(rng, pool):
    x = _pick(rng, pool, FLOAT)
    if x is None:
        return None
    if x.exact and rng.random() < 0.5:
        return Value(rng.choice(_EXACT_UNARY)(x.v), True)
    if x.exact and rng.random() < 0.3:
        return Value(rng.choice(_PERIODIC_UNARY)(x.v), False)
    return Value(rng.choice(_SMOOTH_UNARY)(x.v), False)


def _broadcasts(small, big) -> bool:
    if len(small) > len(big):
        return False
    return all(a in (1, b) for a, b in zip(small, big[len(big) - len(small):]))


def binary(rng, pool):
    x = _pick(rng, pool, FLOAT)
    if x is None:
        return None
    y = _partner(rng, pool, x)
    a, b = (x, y) if rng.random() < 0.5 else (y, x)
    both = a.exact and b.exact
    k = rng.randrange(8)
    if k == 0:
        return Value(a.v + b.v, False)
    if k == 1:
        return Value(a.v - b.v, False)
    if k == 2:
        return Value(a.v * b.v, False)
    if k == 3:
        return Value(a.v / (1.0 + jnp.abs(b.v)), False)
    if k == 4:
        return Value(jnp.maximum(a.v, b.v), both)
    if k == 5:
        return Value(jnp.minimum(a.v, b.v), both)
    if k == 6 and both:
        return Value(jnp.arctan2(a.v, b.v), False)
    c = _pick(rng, [p for p in pool if _broadcasts(p.shape, x.shape)], exact=True)
    if c is not None:
        cond = c.v if c.dtype == BOOL else c.v > c.v.dtype.type(0)
    elif both:
        cond = a.v > b.v
    else:
        return None
    return Value(jnp.where(cond, a.v, b.v), both)


def reduction(rng, pool):
    x = _pick(rng, pool, FLOAT, ndim_min=1)
    if x is None:
        return None
    nd = len(x.shape)
    axis = rng.choice([None, -1, 0] + ([tuple(sorted(rng.sample(range(nd), 2)))]
                                       if nd >= 2 else []))
    keep = rng.random() < 0.5
    k = rng.randrange(6)
    if k == 0:
        return Value(jnp.sum(x.v, axis=axis, keepdims=keep), False)
    if k == 1:
        return Value(jnp.mean(x.v, axis=axis, keepdims=keep), False)
    if k == 4:
        return Value(jnp.var(x.v, axis=axis, keepdims=keep), False)
    if not _size(x.shape):  # (max, min and arg-reductions of nothing are errors)
        return None
    if k == 2:
        return Value(jnp.max(x.v, axis=axis, keepdims=keep), x.exact)
    if k == 3:
        return Value(jnp.min(x.v, axis=axis, keepdims=keep), x.exact)
    if not x.exact:
        return None
    single = axis if not isinstance(axis, tuple) else -1
    fn = jnp.argmax if rng.random() < 0.5 else jnp.argmin
    return Value(fn(x.v, axis=single, keepdims=keep), True)


def row_pattern(rng, pool):
    """softmax / layernorm / log-softmax over an axis: a reduction broadcast back."""
    x = _pick(rng, pool, FLOAT, ndim_min=1, nonempty=True)
    if x is None:
        return None
    axis = rng.choice([-1, 0])
    k = rng.randrange(3)
    if k == 0:
        e = jnp.exp(x.v - jnp.max(x.v, axis=axis, keepdims=True))
        return Value(e / jnp.sum(e, axis=axis, keepdims=True), False)
    if k == 1:
        m = jnp.mean(x.v, axis=axis, keepdims=True)
        v = jnp.mean((x.v - m) ** 2, axis=axis, keepdims=True)
        return Value((x.v - m) * lax.rsqrt(v + 1e-3), False)
    d = x.v - jnp.max(x.v, axis=axis, keepdims=True)
    return Value(d - jnp.log(jnp.sum(jnp.exp(d), axis=axis, keepdims=True)), False)


def transpose(rng, pool):
    x = _pick(rng, pool, ndim_min=2)
    if x is None:
        return None
    perm = list(range(len(x.shape)))
    while perm == sorted(perm):
        rng.shuffle(perm)
    return Value(jnp.transpose(x.v, perm), x.exact)


def _factor_shapes(n: int, rng) -> tuple:
    divisors = [d for d in range(2, min(n, 4096) + 1) if n % d == 0]
    if not divisors or rng.random() < 0.3:
        return (n,)
    d = rng.choice(divisors)
    return (d, n // d) if rng.random() < 0.7 else (n // d, d, 1)


def reshape(rng, pool):
    x = _pick(rng, pool)
    return Value(jnp.reshape(x.v, _factor_shapes(_size(x.shape), rng)), x.exact)


def slice_(rng, pool):
    x = _pick(rng, pool, ndim_min=1, nonempty=True)
    if x is None:
        return None
    index = []
    for d in x.shape:
        if d == 1 or rng.random() < 0.4:
            index.append(slice(None))
            continue
        start = rng.randrange(d)
        stop = rng.randrange(start + 1, d + 1)
        step = rng.choice([1, 1, 2, 3])
        index.append(slice(start, stop, step) if rng.random() < 0.8 else slice(None, None, -1))
    return Value(x.v[tuple(index)], x.exact)


def flip_or_roll(rng, pool):
    x = _pick(rng, pool, ndim_min=1)
    if x is None:
        return None
    axis = rng.randrange(len(x.shape))
    if rng.random() < 0.5:
        return Value(jnp.flip(x.v, axis=axis), x.exact)
    shift = rng.randrange(-x.shape[axis] - 2, x.shape[axis] + 3)
    return Value(jnp.roll(x.v, shift, axis=axis), x.exact)


def pad(rng, pool):
    x = _pick(rng, pool, ndim_min=1, nonempty=True)
    if x is None:
        return None
    widths = [(rng.randrange(3), rng.randrange(3)) for _ in x.shape]
    mode = rng.choice(["constant", "constant", "edge", "wrap", "reflect"])
    if mode == "constant":
        return Value(jnp.pad(x.v, widths, constant_values=rng.choice([0, 1])), x.exact)
    return Value(jnp.pad(x.v, widths, mode=mode), x.exact)


def concatenate(rng, pool):
    x = _pick(rng, pool, ndim_min=1)
    if x is None:
        return None
    axis = rng.randrange(len(x.shape))
    others = [p for p in pool if p.dtype == x.dtype and len(p.shape) == len(x.shape)
              and all(a == b for i, (a, b) in enumerate(zip(p.shape, x.shape)) if i != axis)]
    parts = [x] + rng.sample(others, min(len(others), rng.randint(1, 3)))
    rng.shuffle(parts)
    return Value(jnp.concatenate([p.v for p in parts], axis=axis), all(p.exact for p in parts))


def cumulative(rng, pool):
    x = _pick(rng, pool, ndim_min=1)
    if x is None or x.dtype == BOOL:
        return None
    axis = rng.randrange(len(x.shape))
    reverse = rng.random() < 0.3
    if rng.random() < 0.5 and x.exact:
        fn = lax.cummax if rng.random() < 0.5 else lax.cummin
        return Value(fn(x.v, axis=axis, reverse=reverse), True)
    exact = _is(x.dtype, INT) and x.exact
    return Value(lax.cumsum(x.v, axis=axis, reverse=reverse), exact)


def matmul(rng, pool):
    x = _pick(rng, pool, FLOAT, ndim_min=2)
    if x is None or _size(x.shape) * x.shape[-2] > 4_000_000:
        return None
    partners = [p for p in pool if p.dtype == x.dtype and len(p.shape) == 2
                and p.shape[0] == x.shape[-1]]
    if partners and rng.random() < 0.7:
        return Value(jnp.matmul(x.v, rng.choice(partners).v), False)
    return Value(jnp.matmul(x.v, jnp.swapaxes(x.v, -1, -2)), False)


def dot_general(rng, pool):
    """A contraction of ``x`` with a permutation of itself (or of a value of its shape): one
    contracting dim, a batch dim or none, in any positions."""
    x = _pick(rng, pool, FLOAT, ndim_min=2)
    if x is None:
        return None
    nd = len(x.shape)
    perm = list(range(nd))
    rng.shuffle(perm)
    same = [p for p in pool if p.dtype == x.dtype and p.shape == x.shape]
    y = jnp.transpose(rng.choice(same).v, perm)  # (y's dim i is x's dim perm[i])
    where_in_y = {d: i for i, d in enumerate(perm)}
    dims = rng.sample(range(nd), 2)
    contract, batch = dims[0], dims[1] if rng.random() < 0.5 else None
    free = _size([n for d, n in enumerate(x.shape) if d not in (contract, batch)])
    if free * free * (x.shape[batch] if batch is not None else 1) > 400_000:
        return None
    numbers = (((contract,), (where_in_y[contract],)),
               ((batch,), (where_in_y[batch],)) if batch is not None else ((), ()))
    return Value(lax.dot_general(x.v, y, numbers), False)


def remainder(rng, pool):
    """fmod is exact in IEEE arithmetic; Python's ``%`` adds the divisor to a remainder of
    the other sign (one rounding, the same in both)."""
    x = _pick(rng, pool, FLOAT, exact=True)
    if x is None:
        return None
    y = _partner(rng, pool, x, exact=True)
    divisor = jnp.abs(y.v) + 0.5 if rng.random() < 0.5 else rng.choice([0.75, -1.5, 3.0])
    fn = jnp.fmod if rng.random() < 0.5 else jnp.remainder
    return Value(fn(x.v, divisor), True)


def complex_math(rng, pool):
    """Complex numbers inside one step: made from two float32 values, a little complex
    arithmetic, a real result."""
    x = _pick(rng, pool, F32)
    if x is None:
        return None
    y = _partner(rng, pool, x)
    z = lax.complex(x.v, jnp.broadcast_to(y.v, x.shape))
    k = rng.randrange(4)
    if k == 0:
        w = z * z + jnp.conj(z)
    elif k == 1:
        w = jnp.exp(z * 0.25)
    elif k == 2:
        w = z / (jnp.abs(z) + 1.0)
    else:
        w = jnp.sum(z, axis=-1 if x.shape else None) * (0.5 - 0.25j)
    part = rng.choice([jnp.real, jnp.imag, jnp.abs])
    return Value(part(w), False)


def gather(rng, pool):
    x = _pick(rng, pool, ndim_min=1, nonempty=True)
    if x is None:
        return None
    axis = rng.randrange(len(x.shape))
    d = x.shape[axis]
    n = rng.randint(1, 2 * d + 3)
    idx = np.array([rng.randrange(-d, d) for _ in range(n)], np.int32)
    k = rng.randrange(3)
    if k == 0:
        return Value(jnp.take(x.v, idx, axis=axis), x.exact)
    if k == 1:  # out-of-bounds indices: "fill" gives NaN (floats) or the type's minimum...
        idx = np.array([rng.randrange(-2 * d - 2, 2 * d + 2) for _ in range(n)], np.int32)
        return Value(jnp.take(x.v, idx, axis=axis), x.exact)
    # ... and indices computed by the program itself, clipped.
    ints = _pick(rng, pool, INT, exact=True)
    if ints is not None and len(ints.shape) == 1:
        return Value(jnp.take(x.v, ints.v, axis=axis, mode="clip"), x.exact)
    return Value(jnp.take_along_axis(x.v, jnp.argsort(x.v, axis=axis), axis=axis), x.exact) \
        if x.exact else None


def scatter(rng, pool):
    x = _pick(rng, pool, FLOAT, ndim_min=1, nonempty=True)
    if x is None:
        return None
    d = x.shape[0]
    n = rng.randint(1, d)
    if rng.random() < 0.4:  # distinct indices: which duplicate wins a set is unspecified
        idx = np.array(rng.sample(range(d), n), np.int32)
        upd = jnp.full((n, *x.shape[1:]), 0.5, x.dtype)
        return Value(x.v.at[idx].set(upd), x.exact)
    idx = np.array([rng.randrange(-d, d + 3) for _ in range(n)], np.int32)
    src = _partner(rng, pool, Value(x.v[:1], False))
    upd = jnp.broadcast_to(src.v, (n, *x.shape[1:]))
    k = rng.randrange(3)
    if k == 0:
        return Value(x.v.at[idx].add(upd), False)
    if k == 1:
        return Value(x.v.at[idx].max(upd), x.exact and src.exact)
    return Value(x.v.at[idx].min(upd), x.exact and src.exact)


def sort(rng, pool):
    x = _pick(rng, pool, exact=True, ndim_min=1)
    if x is None:
        return None
    axis = rng.randrange(len(x.shape))
    if rng.random() < 0.5:
        return Value(jnp.sort(x.v, axis=axis), True)
    return Value(jnp.argsort(x.v, axis=axis), True)


def cast(rng, pool):
    """To another dtype: float to integer saturates (NaN to 0), narrow floats round."""
    x = _pick(rng, pool)
    x64 = ember.config.read("jax_enable_x64")
    to = rng.choice(FLOATS + INTS + (BOOL,) + (WIDE if x64 else ()))
    if _is(x.dtype, FLOAT) and _is(to, INT):
        return Value(jnp.floor(x.v * 4.0).astype(to), x.exact)
    return Value(x.v.astype(to), x.exact)


def int_math(rng, pool):
    x = _pick(rng, pool, INT)
    if x is None:
        return None
    signed = np.issubdtype(x.dtype, np.signedinteger)
    k = rng.randrange(7)
    if k == 0:
        y = _partner_int(rng, pool, x)
        return Value(x.v * 3 + y.v, True)
    if k == 1:
        return Value(x.v // rng.choice([2, 3, -5] if signed else [2, 3, 7]), True)
    if k == 2:
        return Value(x.v % rng.choice([3, 7, -4] if signed else [3, 7, 4]), True)
    if k == 3:
        return Value(jnp.sum(x.v, axis=-1 if x.shape else None), True)
    if k == 4:
        return Value((x.v & 6) ^ (x.v >> 1), True)
    if k == 5:
        y = _partner_int(rng, pool, x)
        return Value(jnp.maximum(x.v, y.v) - jnp.minimum(x.v, y.v), True)
    return Value(x.v.astype(np.float32) * 0.25, True)


def _partner_int(rng, pool, x):
    fits = [p for p in pool if p.dtype == x.dtype and _broadcasts(p.shape, x.shape)]
    return rng.choice(fits or [x])


def booleans(rng, pool):
    x = _pick(rng, pool, exact=True)
    if x is None or x.dtype == BOOL:
        b = _pick(rng, pool, BOOL)
        if b is None:
            return None
        k = rng.randrange(4)
        if k == 0:
            return Value(jnp.any(b.v, axis=-1 if b.shape else None), True)
        if k == 1:
            return Value(jnp.sum(b.v, axis=0 if b.shape else None), True)
        if k == 2:
            return Value(jnp.logical_xor(b.v, jnp.logical_not(b.v[..., ::-1])), True)
        return Value(jnp.where(b.v, 1.5, -0.5), True)
    return Value(x.v > x.v.dtype.type(0.25 if _is(x.dtype, FLOAT) else 0), True)


STEPS = [unary, unary, binary, binary, binary, reduction, row_pattern, transpose, reshape,
         slice_, flip_or_roll, pad, concatenate, cumulative, matmul, dot_general, gather,
         scatter, sort, cast, int_math, booleans, remainder, complex_math]

# Input shapes: tiny, odd, vector-width edges, and large enough for the threaded paths.
_DIMS = [1, 2, 3, 5, 8, 17, 31, 64, 100, 129, 256, 333, 1000]
# Special values mixed into some inputs.
_SPECIALS = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], np.float32)


def input_shapes(seed: int, max_size: int) -> list[tuple]:
    rng = random.Random(seed * 7919 + 1)
    while True:
        rank = rng.choice([1, 2, 2, 2, 3])
        shape = tuple(rng.choice(_DIMS) for _ in range(rank))
        if rng.random() < 0.04:  # an empty array
            shape = (*shape[:-1], 0)
        if _size(shape) <= max_size:
            break
    shapes = [shape, shape]
    if rank >= 2 and rng.random() < 0.7:  # a broadcastable third input: a row or a column
        shapes.append(rng.choice([shape[-1:], (*shape[:-1], 1)]))
    return shapes


def input_arrays(seed: int, shapes, specials: bool = True,
                 nans: bool = True) -> list[np.ndarray]:
    """Uniform in [-2, 2], with some specials (``specials``; NaN among them if ``nans``);
    float64 for some seeds when jax_enable_x64 is on."""
    gen = np.random.default_rng(seed)
    wide = ember.config.read("jax_enable_x64") and seed % 2
    arrays = []
    for shape in shapes:
        a = gen.uniform(-2, 2, shape).astype(np.float64 if wide else np.float32)
        if specials and gen.random() < 0.3:  # some NaNs, infinities, zeros of either sign
            hit = gen.random(shape) < 0.05
            pool = _SPECIALS if nans else _SPECIALS[1:]
            a[hit] = gen.choice(pool, size=int(hit.sum())).astype(a.dtype)
        arrays.append(a)
    return arrays


def make_program(seed: int):
    def program(*xs):
        rng = random.Random(seed)
        pool = [Value(x, True) for x in xs]
        made = []
        for _ in range(rng.randint(3, 14)):
            step = rng.choice(STEPS)
            out = step(rng, pool)
            if out is None:
                continue
            if _size(out.shape) > 400_000:  # (keeps matmuls and pads from growing on)
                continue
            pool.append(out)
            made.append(out)
        # The last value and up to three others (so that early steps are not all dead code).
        outs = made[-1:] + rng.sample(made[:-1], min(len(made) - 1, 3)) if made else pool[:1]
        return [o.v for o in outs], [o.exact for o in outs]
    return program


# Tolerances of inexact outputs, by dtype (relative; absolute: this times the largest finite
# magnitude of the expected output, at least 1: a sum of terms of size 1 that cancel keeps
# their rounding noise).
_RTOL = {F64: 1e-9, F32: 2e-4, F16: 2e-2, BF16: 6e-2}


def program_rtol(fn, *args) -> float:
    """The tolerance of the least precise float type among the values ``fn`` computes (a
    float32 output can hold bfloat16 roundings)."""
    jaxpr = ember.make_jaxpr(fn)(*args).jaxpr
    seen = {np.dtype(v.aval.dtype) for eqn in jaxpr.eqns for v in eqn.outvars}
    return max([_RTOL[d] for d in seen if d in _RTOL], default=_RTOL[F32])


def assert_agree(got, want, exact: bool, where: str, rtol: float = 0.0,
                 specials: bool = False) -> None:
    """``got`` equals ``want`` bit for bit when exact or not float, else within tolerance
    (that of ``want``'s type, or ``rtol`` if looser). ``specials``: the inputs held NaNs or
    infinities; then inexact outputs are compared where both are finite (inf times a value
    that should be 0 but rounds to +-1e-7 is +-inf, and the sign decides inf - inf = NaN)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, where
    if not _is(want.dtype, FLOAT):
        np.testing.assert_array_equal(got, want, err_msg=where)
        return
    g64, w64 = got.astype(np.float64), want.astype(np.float64)  # (NumPy: no bf16 NaNs)
    if exact:  # bit for bit, zeros' signs included
        np.testing.assert_array_equal(g64, w64, err_msg=where)
        numbers = ~np.isnan(w64)
        np.testing.assert_array_equal(np.signbit(g64[numbers]), np.signbit(w64[numbers]),
                                      err_msg=where)
        return
    finite = np.abs(w64[np.isfinite(w64)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    rtol = max(rtol, _RTOL[want.dtype])
    if specials:
        both = np.isfinite(g64) & np.isfinite(w64)
        g64, w64 = g64[both], w64[both]
    np.testing.assert_allclose(g64, w64, rtol=rtol, atol=rtol * scale, err_msg=where)


def check_program(seed: int, max_size: int) -> None:
    shapes = input_shapes(seed, max_size)
    raw = input_arrays(seed, shapes)
    specials = not all(np.isfinite(a).all() for a in raw)
    args = [jnp.asarray(a) for a in raw]
    program = make_program(seed)
    with np.errstate(all="ignore"):
        want, exact = program(*args)
    outputs = lambda *xs: program(*xs)[0]  # noqa: E731
    rtol = program_rtol(outputs, *args)
    jitted = ember.jit(outputs, backend="cpu")
    for call in ("first (quick code)", "second (optimized code)"):
        got = jitted(*args)
        for i, (g, w, e) in enumerate(zip(got, want, exact, strict=True)):
            where = f"seed {seed}, {call} call, output {i} {w.dtype}{list(w.shape)}"
            assert_agree(g, w, e, where, rtol, specials)


def check_gradient(seed: int, max_size: int) -> None:
    """The gradient of a loss over the program's float outputs: ``jit(grad)`` on the CPU
    backend against eager ``grad`` (the backward pass: transposed broadcasts, pads and
    gathers become reductions, slices and scatter-adds)."""
    shapes = input_shapes(seed, max_size)
    args = [jnp.asarray(a) for a in input_arrays(seed, shapes, specials=False)]
    program = make_program(seed)

    def loss(*xs):
        total = jnp.float32(0)
        for out in program(*xs)[0]:
            if _is(np.dtype(out.dtype), FLOAT):  # (a different weight for each element)
                total = total + jnp.sum(jnp.tanh(out.astype(np.float32)))
        return total

    grad = ember.grad(loss, argnums=tuple(range(len(args))))
    with np.errstate(all="ignore"):
        want = grad(*args)
    got = ember.jit(grad, backend="cpu")(*args)
    # (Ten times the forward tolerance: a backward pass divides by norms and variances of a
    # few elements, and |z| of a complex z near 0 has a gradient direction set by rounding.)
    rtol = 10 * program_rtol(grad, *args)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_agree(g, w, False, f"seed {seed}, gradient {i} {w.dtype}{list(w.shape)}", rtol)


def check_vmapped(seed: int, max_size: int) -> None:
    """``jit(vmap(program))`` over a batch of inputs against eager calls one by one."""
    shapes = input_shapes(seed, max_size)
    batch = 1 + seed % 3
    raw = input_arrays(seed, [(batch, *s) for s in shapes])
    specials = not all(np.isfinite(a).all() for a in raw)
    program = make_program(seed)
    with np.errstate(all="ignore"):
        singles = [program(*[jnp.asarray(a[i]) for a in raw]) for i in range(batch)]
    exact = singles[0][1]
    want = [np.stack([np.asarray(s[0][k]) for s in singles]) for k in range(len(exact))]
    batched = ember.vmap(lambda *xs: program(*xs)[0])
    args = [jnp.asarray(a) for a in raw]
    got = ember.jit(batched, backend="cpu")(*args)
    rtol = program_rtol(batched, *args)
    for i, (g, w, e) in enumerate(zip(got, want, exact, strict=True)):
        assert_agree(g, w, e, f"seed {seed}, vmapped over {batch}, output {i} {w.dtype}", rtol,
                     specials)


