"""More steps of the random programs (see ``random_steps``): special functions, float bit
operations, integer bit operations, dynamic slices, selects and clamps, more reductions,
top_k, triangles and diagonals, shape operations, contractions, advanced indexing, sorts
by several keys and searching. As there, ``jnp`` and ``lax`` are module names the JAX
oracle test points at JAX's.
"""

from __future__ import annotations

import numpy as np

import ember.numpy as jnp
from ember import lax
from tests.backends.cpu.random_steps import (
    BOOL,
    FLOAT,
    INT,
    Value,
    _broadcasts,
    _is,
    _partner,
    _pick,
    _size,
)

# Functions with a bounded condition number on the arguments they are given here.
_SPECIAL_UNARY = [
    lambda x: lax.cbrt(x), lambda x: jnp.exp2(jnp.tanh(x) * 4), lambda x: jnp.sinh(jnp.tanh(x) * 2),
    lambda x: jnp.cosh(jnp.tanh(x) * 2), lambda x: jnp.arcsinh(x),
    lambda x: jnp.arccosh(jnp.abs(x) + 1.5), lambda x: jnp.arctanh(jnp.tanh(x) * 0.9),
    lambda x: jnp.arcsin(jnp.tanh(x) * 0.9), lambda x: jnp.arccos(jnp.tanh(x) * 0.9),
    lambda x: lax.erfc(jnp.tanh(x)), lambda x: lax.erf_inv(jnp.tanh(x) * 0.9),
    lambda x: lax.lgamma(jnp.abs(x) + 0.5), lambda x: lax.digamma(jnp.abs(x) + 0.5),
    lambda x: jnp.log2(jnp.abs(x) + 0.5), lambda x: jnp.log10(jnp.abs(x) + 0.5),
    lambda x: jnp.square(x), lambda x: jnp.reciprocal(jnp.abs(x) + 1.0),
    lambda x: lax.integer_pow(x, 3), lambda x: lax.integer_pow(jnp.tanh(x) + 2.0, -2),
    lambda x: lax.rsqrt(jnp.abs(x) + 1.0), lambda x: jnp.sinc(jnp.tanh(x) * 3),
]


def special_math(rng, pool):
    x = _pick(rng, pool, FLOAT)
    if x is None:
        return None
    return Value(rng.choice(_SPECIAL_UNARY)(x.v), False)


def binary_math(rng, pool):
    x = _pick(rng, pool, FLOAT)
    if x is None:
        return None
    partner = _partner(rng, pool, x)  # (lax functions take operands of one shape)
    y = Value(jnp.broadcast_to(partner.v, x.shape), partner.exact)
    a, b = (x, y) if rng.random() < 0.5 else (y, x)
    both = a.exact and b.exact
    k = rng.randrange(9)
    if k == 0:
        return Value(jnp.logaddexp(a.v, b.v), False)
    if k == 1:
        return Value(jnp.hypot(a.v, b.v), False)
    if k == 2:
        return Value(lax.pow(jnp.abs(a.v) + 0.5, jnp.tanh(b.v) * 2), False)
    if k == 3:  # (the sign of a NaN made by arithmetic is not specified: none here)
        return Value(jnp.copysign(a.v, jnp.where(jnp.isnan(b.v), 1.0, b.v)), both)
    if k == 4:  # (nextafter has no derivative, in JAX neither)
        return Value(lax.nextafter(lax.stop_gradient(a.v), lax.stop_gradient(b.v)), both)
    if k == 5:
        return Value(jnp.heaviside(a.v, b.v), both)
    if k == 6:
        return Value(jnp.fmax(a.v, b.v) if rng.random() < 0.5 else jnp.fmin(a.v, b.v), both)
    if k == 7:
        return Value(lax.rem(a.v, jnp.abs(b.v) + 0.5), both)
    return Value(jnp.floor_divide(a.v, rng.choice([0.5, -2.0, 0.25])), a.exact)


def float_bits(rng, pool):
    """Operations on a float's exponent, mantissa and sign: exact in IEEE arithmetic."""
    x = _pick(rng, pool, FLOAT, exact=True)
    if x is None:
        return None
    k = rng.randrange(7)
    if k == 0:
        return Value(jnp.ldexp(x.v, rng.choice([-60, -20, -1, 0, 3, 100])), True)
    if k == 1:
        mantissa, exponent = jnp.frexp(x.v)
        return Value(mantissa if rng.random() < 0.5 else exponent, True)
    if k == 2:
        fraction, whole = jnp.modf(x.v)
        return Value(fraction if rng.random() < 0.5 else whole, True)
    if k == 3:
        return Value(jnp.rint(x.v), True)
    if k == 4:
        return Value(jnp.signbit(x.v), True)
    if k == 5:
        bits = rng.choice([(5, 10), (8, 7), (4, 3), (11, 52)])
        return Value(lax.reduce_precision(x.v, exponent_bits=bits[0], mantissa_bits=bits[1]),
                     True)
    return Value(jnp.isfinite(x.v) & ~jnp.isneginf(x.v), True)


def _bits(dtype) -> int:
    return np.dtype(dtype).itemsize * 8


def int_bits(rng, pool):
    """Bit counts, shifts by amounts in and out of range, wrapping and truncating
    arithmetic (XLA's rules: a shift by the width or more gives 0, or the sign for an
    arithmetic right shift)."""
    x = _pick(rng, pool, INT)
    if x is None:
        return None
    signed = np.issubdtype(x.dtype, np.signedinteger)
    bits = _bits(x.dtype)
    k = rng.randrange(8)
    if k == 0:
        return Value(lax.population_count(x.v), True)
    if k == 1:
        return Value(lax.clz(x.v), True)
    if k <= 4:
        amounts = [0, 1, 3, bits - 1, bits, bits + 2] + ([-1] if signed else [])
        s = jnp.asarray(np.array([rng.choice(amounts) for _ in range(x.shape[-1])]
                                 if x.shape else rng.choice(amounts), x.dtype))
        fn = [lax.shift_left, lax.shift_right_logical, lax.shift_right_arithmetic][k - 2]
        return Value(fn(x.v, jnp.broadcast_to(s, x.shape)), True)
    if k == 5:
        return Value(jnp.invert(x.v) ^ lax.integer_pow(x.v, rng.choice([2, 3])), True)
    if k == 6:
        d = rng.choice([3, -2, 7, -1] if signed else [3, 2, 7, 1])
        fn = lax.div if rng.random() < 0.5 else lax.rem
        return Value(fn(x.v, jnp.full(x.shape, d, x.dtype)), True)
    return Value(jnp.abs(x.v) if signed else -x.v, True)


def _index_scalar(rng, pool):
    """An int32 scalar computed by the program (it may lie outside any dim), or a constant."""
    src = _pick(rng, pool, exact=True, nonempty=True)
    if src is None or rng.random() < 0.3:
        return rng.randrange(-3, 40)
    if _is(src.dtype, INT):
        return (jnp.sum(src.v) % 37).astype(np.int32) - 3
    if src.dtype == BOOL:
        return jnp.sum(src.v).astype(np.int32)
    return jnp.argmax(src.v).astype(np.int32)


def dynamic(rng, pool):
    """dynamic_slice / dynamic_update_slice / dynamic_index_in_dim: start indices are clamped
    so that the window fits."""
    x = _pick(rng, pool, ndim_min=1, nonempty=True)
    if x is None:
        return None
    starts = [_index_scalar(rng, pool) for _ in x.shape]
    sizes = [rng.randint(1, d) for d in x.shape]
    k = rng.randrange(3)
    if k == 0:
        return Value(lax.dynamic_slice(x.v, starts, sizes), x.exact)
    if k == 1:
        update = lax.slice(x.v, [0] * len(sizes), sizes)
        update = update[tuple(slice(None, None, -1) for _ in sizes)]
        return Value(lax.dynamic_update_slice(x.v, update, starts), x.exact)
    axis = rng.randrange(len(x.shape))
    return Value(lax.dynamic_index_in_dim(x.v, starts[0], axis, rng.random() < 0.5), x.exact)


def select_clamp(rng, pool):
    x = _pick(rng, pool, FLOAT)
    if x is None:
        return None
    partner = _partner(rng, pool, x)
    y = Value(jnp.broadcast_to(partner.v, x.shape), partner.exact)
    cond = _pick(rng, [p for p in pool if _broadcasts(p.shape, x.shape)], exact=True)
    k = rng.randrange(3)
    if k == 0 and cond is not None and cond.dtype != BOOL:
        which = ((cond.v > 0).astype(np.int32) + (cond.v > 1).astype(np.int32))
        which = jnp.broadcast_to(which, x.shape)
        z = jnp.full(x.shape, -3.0, x.dtype)
        return Value(lax.select_n(which, x.v, y.v, z), x.exact and y.exact)
    if k == 1:
        lo, hi = sorted(rng.choice([-1.5, -0.25, 0.0, 0.5, 2.0]) for _ in range(2))
        lo_v = jnp.full(x.shape, lo, x.dtype) if rng.random() < 0.5 else np.array(lo, x.dtype)
        return Value(lax.clamp(lo_v, x.v, np.array(hi, x.dtype)), x.exact)
    if cond is None:
        return None
    c = cond.v if cond.dtype == BOOL else cond.v > 0
    return Value(jnp.select([c, ~c & (x.v > 1)], [x.v, y.v], -1.0), x.exact and y.exact)


def reduction_more(rng, pool):
    x = _pick(rng, pool, ndim_min=1)
    if x is None:
        return None
    axis = rng.choice([None, -1, 0])
    keep = rng.random() < 0.5
    if x.dtype == BOOL:
        fn = rng.choice([jnp.all, jnp.count_nonzero])
        return Value(fn(x.v, axis=axis, keepdims=keep), True)
    if _is(x.dtype, INT):
        k = rng.randrange(4)
        if k == 0:
            return Value(jnp.prod(x.v, axis=axis, keepdims=keep), True)
        if k == 1:
            return Value(jnp.cumprod(x.v, axis=axis if axis is not None else 0), True)
        ax = tuple(range(len(x.shape))) if axis is None else (axis % len(x.shape),)
        fn = [lax.reduce_xor, lax.reduce_and, lax.reduce_or][rng.randrange(3)]
        return Value(fn(x.v, ax), True)
    k = rng.randrange(8)
    if k == 0:
        return Value(jnp.prod(1.0 + jnp.tanh(x.v) * 0.1, axis=axis, keepdims=keep), False)
    if k == 1:
        return Value(lax.cumprod(1.0 + jnp.tanh(x.v) * 0.1, axis=0, reverse=rng.random() < .5),
                     False)
    if k == 2:
        return Value(lax.cumlogsumexp(x.v, axis=len(x.shape) - 1), False)
    if k == 3:
        return Value(jnp.nansum(x.v, axis=axis, keepdims=keep), False)
    if k == 4:
        return Value(jnp.nanmean(x.v, axis=axis, keepdims=keep), False)
    if not _size(x.shape) or not x.exact:
        return None
    if k == 5:
        fn = jnp.nanmax if rng.random() < 0.5 else jnp.nanmin
        return Value(fn(x.v, axis=axis, keepdims=keep), True)
    if k == 6:
        return Value(jnp.ptp(x.v, axis=axis, keepdims=keep), False)
    return Value(jnp.median(x.v, axis=axis, keepdims=keep), False)


def top_k(rng, pool):
    x = _pick(rng, pool, exact=True, ndim_min=1, nonempty=True)
    if x is None or x.dtype == BOOL:
        return None
    k = rng.randint(1, min(x.shape[-1], 9))
    values, indices = lax.top_k(x.v, k)
    return Value(values if rng.random() < 0.5 else indices, True)


def structure(rng, pool):
    """Triangles, diagonals, rotations, traces, outer products."""
    x = _pick(rng, pool, ndim_min=2)
    k = rng.randrange(6)
    if x is None:
        v = _pick(rng, pool, FLOAT, ndim_min=1)
        if v is None or _size(v.shape) > 600:
            return None
        return Value(jnp.outer(v.v, v.v[..., ::-1]), False)
    offset = rng.randrange(-3, 4)
    if k == 0:
        return Value(jnp.triu(x.v, offset), x.exact)
    if k == 1:
        return Value(jnp.tril(x.v, offset), x.exact)
    if k == 2:
        a, b = rng.sample(range(len(x.shape)), 2)
        return Value(jnp.diagonal(x.v, offset, a, b), x.exact)
    if k == 3:
        axes = tuple(rng.sample(range(len(x.shape)), 2))
        return Value(jnp.rot90(x.v, rng.randrange(-1, 4), axes=axes), x.exact)
    if k == 4 and _is(x.dtype, FLOAT):
        return Value(jnp.trace(x.v, offset), False)
    v = _pick(rng, pool, FLOAT, ndim_min=1)
    if v is None or _size(v.shape) > 600:
        return None
    return Value(jnp.outer(v.v, v.v[..., ::-1]), False)


def shape_more(rng, pool):
    x = _pick(rng, pool, ndim_min=1)
    if x is None:
        return None
    nd = len(x.shape)
    axis = rng.randrange(nd)
    k = rng.randrange(9)
    if k == 0:
        out = jnp.expand_dims(x.v, rng.randrange(-nd - 1, nd + 1))
        ones = [i for i, d in enumerate(out.shape) if d == 1]
        return Value(jnp.squeeze(out, rng.choice(ones)), x.exact)
    if k == 1 and x.shape[axis] <= 200:
        if rng.random() < 0.5:
            return Value(jnp.repeat(x.v, rng.randint(1, 3), axis=axis), x.exact)
        counts = np.array([rng.randrange(3) for _ in range(x.shape[axis])], np.int32)
        return Value(jnp.repeat(x.v, counts, axis=axis, total_repeat_length=int(counts.sum())),
                     x.exact)
    if k == 2 and _size(x.shape) <= 20_000:
        return Value(jnp.tile(x.v, [rng.randint(1, 3) for _ in range(rng.randint(1, nd + 1))]),
                     x.exact)
    if k == 3:
        y = _pick(rng, [p for p in pool if p.shape == x.shape and p.dtype == x.dtype])
        return Value(jnp.stack([x.v, y.v], axis=rng.randrange(-nd - 1, nd + 1)),
                     x.exact and y.exact)
    if k == 4:
        return Value(jnp.moveaxis(x.v, axis, rng.randrange(nd)), x.exact)
    if k == 5 and x.dtype != BOOL:
        return Value(jnp.diff(x.v, rng.randint(1, 2), axis=axis), _is(x.dtype, INT) and x.exact)
    if k == 6 and x.shape[axis] >= 2:
        parts = jnp.array_split(x.v, rng.randint(2, 4), axis=axis)
        return Value(parts[rng.randrange(len(parts))], x.exact)
    if k == 7:  # negative and interior padding (a negative width removes at most d - 1)
        widths = [(rng.randrange(-min(d - 1, 2), 3) if d else 0,
                   rng.randrange(-1 if d > 2 else 0, 3), rng.randrange(3)) for d in x.shape]
        pad_value = np.array(rng.choice([0, 1]), x.dtype)
        return Value(lax.pad(x.v, pad_value, widths), x.exact)
    strides = [rng.choice([1, 2, 3]) for _ in x.shape]
    out = lax.slice(x.v, [0] * nd, list(x.shape), strides)
    return Value(lax.rev(out, tuple(d for d in range(nd) if rng.random() < 0.5)), x.exact)


def contraction(rng, pool):
    """einsum, tensordot and inner products between a value and a permuted partner."""
    x = _pick(rng, pool, FLOAT, ndim_min=1)
    if x is None:
        return None
    same = [p for p in pool if p.dtype == x.dtype and p.shape == x.shape]
    y = rng.choice(same)
    nd = len(x.shape)
    letters = "abcdefgh"[:nd]
    k = rng.randrange(5)
    if k == 0:  # contract one dim, keep the rest of both sides' dims in a random order
        c = rng.randrange(nd)
        kept = [ch for i, ch in enumerate(letters) if i != c]
        out_x = kept
        out_y = [ch.upper() for ch in kept]
        if _size([d for i, d in enumerate(x.shape) if i != c]) ** 2 > 300_000:
            return None
        y_letters = "".join(ch.upper() if i != c else ch for i, ch in enumerate(letters))
        out = out_x + out_y
        rng.shuffle(out)
        return Value(jnp.einsum(f"{letters},{y_letters}->{''.join(out)}", x.v, y.v), False)
    if k == 1:  # an elementwise product summed over some dims
        out = [ch for ch in letters if rng.random() < 0.5]
        rng.shuffle(out)
        return Value(jnp.einsum(f"{letters},{letters}->{''.join(out)}", x.v, y.v), False)
    if k == 2 and nd >= 2 and x.shape[0] == x.shape[1]:
        return Value(jnp.einsum(f"aa{letters[2:]}->a{letters[2:]}", x.v), x.exact)
    if k == 3:
        n = rng.randint(1, nd)
        if _size(x.shape[:nd - n]) ** 2 > 300_000:
            return None
        perm = list(range(nd - n, nd)) + list(range(nd - n))  # y's leading dims contract
        return Value(jnp.tensordot(x.v, jnp.transpose(y.v, perm), axes=n), False)
    if _size(x.shape[:-1]) ** 2 > 300_000:
        return None
    return Value(jnp.inner(x.v, y.v), False)


def indexing(rng, pool):
    """Advanced indexing on two dims, indices on inner dims, index updates off the leading
    dim, and out-of-bounds gets with a fill value."""
    x = _pick(rng, pool, ndim_min=2, nonempty=True)
    if x is None:
        return None
    d0, d1 = x.shape[0], x.shape[1]
    n = rng.randint(1, 12)
    i0 = np.array([rng.randrange(-d0, d0) for _ in range(n)], np.int32)
    i1 = np.array([rng.randrange(-d1, d1) for _ in range(n)], np.int32)
    k = rng.randrange(7)
    if k == 0:
        return Value(x.v[i0, i1], x.exact)
    if k == 1:
        return Value(x.v[:, i1], x.exact)
    if k == 2:
        return Value(x.v[i0[:, None], i1[None, :]], x.exact)
    if k == 3:
        return Value(x.v[..., None, ::-1][i0, 1:], x.exact)
    if k == 4:
        far = np.array([rng.randrange(-2 * d1 - 2, 2 * d1 + 2) for _ in range(n)], np.int32)
        return Value(x.v.at[:, far].get(mode="fill", fill_value=1), x.exact)
    if not _is(x.dtype, FLOAT):
        return None
    if k == 5:
        upd = jnp.ones((d0, n, *x.shape[2:]), x.dtype) * 0.5
        return Value(x.v.at[:, i1].add(upd), False)
    distinct = np.array(rng.sample(range(d0 * d1), min(n, d0 * d1)))
    a, b = (distinct // d1).astype(np.int32), (distinct % d1).astype(np.int32)
    if rng.random() < 0.5:
        return Value(x.v.at[a, b].set(-0.75), x.exact)
    return Value(x.v.at[a, b].multiply(1.5), False)


def sort_search(rng, pool):
    """Sorts by several keys, lexsort, searchsorted, bincount and digitize."""
    x = _pick(rng, pool, exact=True, ndim_min=1)
    if x is None or x.dtype == BOOL:
        return None
    k = rng.randrange(4)
    if k == 0:
        y = _pick(rng, [p for p in pool if p.shape == x.shape and p.exact], exact=True)
        keys = rng.choice([1, 2])
        out = lax.sort((jnp.floor(x.v) if _is(x.dtype, FLOAT) else x.v, y.v),
                       dimension=len(x.shape) - 1, num_keys=keys)
        return Value(out[rng.randrange(2)], True)
    if k == 1:
        y = _pick(rng, [p for p in pool if p.shape == x.shape and p.exact], exact=True)
        return Value(jnp.lexsort((x.v, y.v), axis=-1), True)
    flat = jnp.ravel(x.v)
    if k == 2:
        table = jnp.sort(flat)
        v = _pick(rng, pool, x.dtype, exact=True)
        side = rng.choice(["left", "right"])
        return Value(jnp.searchsorted(table, v.v, side=side), True)
    if _is(x.dtype, INT):
        counts = jnp.bincount(jnp.clip(flat, 0, 50), length=rng.choice([10, 51, 60]))
        return Value(counts, True)
    bins = np.array(sorted(rng.uniform(-2, 2) for _ in range(rng.randint(1, 6))), x.dtype)
    return Value(jnp.digitize(x.v, bins, right=rng.random() < 0.5), True)


STEPS = [special_math, binary_math, float_bits, int_bits, dynamic, select_clamp,
         reduction_more, top_k, structure, shape_more, contraction, indexing, sort_search]
