"""The steps of the random programs (``random_programs``): each takes ``(rng, pool)``, a seeded
``random.Random`` and the values made so far, and returns a new ``Value`` or None when
nothing in the pool fits. ``random_steps_more`` has further steps.

Each value carries an "exact" flag: inputs are exact, and so is what moves or selects values
without rounding (transposes, slices, max, integer sums...). Steps whose output jumps with a
one-ulp change of their input (floor, comparisons, argmax, sorts) take exact operands only.
Steps call the module names ``jnp`` and ``lax``, which the JAX oracle test points at JAX's.
"""
from __future__ import annotations

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
    """To another dtype: float to integer saturates (NaN to 0), narrow floats round. Float to
    integer (through ``floor``) and to bool jump with a one-ulp change of their input, so
    they take exact operands only (4 * (b @ b.T) one ulp below an integer in one
    implementation of the matmul and on it in another gave integers one apart: the JAX
    oracle, seed 802)."""
    x = _pick(rng, pool)
    x64 = ember.config.read("jax_enable_x64")
    to = rng.choice(FLOATS + INTS + (BOOL,) + (WIDE if x64 else ()))
    if _is(x.dtype, FLOAT) and (_is(to, INT) or to == BOOL) and not x.exact:
        return None
    if _is(x.dtype, FLOAT) and _is(to, INT):
        return Value(jnp.floor(x.v * 4.0).astype(to), True)
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
