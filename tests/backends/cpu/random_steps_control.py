"""Control-flow steps of the random programs (see ``random_steps``): ``lax.fori_loop`` with
concrete and traced bounds, ``lax.scan`` (carries of one to three values of any shapes and
dtypes, xs sliced from a value, ys stacked, ``reverse``, ``unroll``), ``lax.while_loop``
with data-dependent conditions, ``lax.cond``/``lax.switch`` on data-dependent predicates,
``lax.map``, carries that swap or rotate, recurrent scans whose body holds a small matmul,
row updates of a carried buffer at the loop index, and nested loops.

A body (or branch) runs a random sub-program of a few steps (any step of the fuzzer, a
control-flow step again up to a nesting depth of two) over the carries, the loop index, the
scanned slice and some values closed over from outside; each carry's new value is made from
what it computed. A body may be traced more than once, so its choices come from a fresh
``random.Random`` of a seed drawn before the loop: every trace builds the same body.

Exactness: a carry is exact only if it starts exact and its update is exact whatever the
sub-program makes (a move, max/min or sign flip by exact values, integer arithmetic); the
other float carries are squashed by ``tanh`` each iteration (bounded, so rounding noise
does not grow). Loop counts and predicates come from exact values only.

Gradients: ``while_loop`` (and ``fori_loop`` with traced bounds, which is one) has no
reverse-mode derivative, in JAX neither; such loops take their float operands (carries and
closed-over values) through ``stop_gradient``, so ``check_gradient`` differentiates around
them.

As in the other step modules, ``jnp`` and ``lax`` are module names the JAX oracle test
points at JAX's.
"""

from __future__ import annotations

import contextlib
import random

import numpy as np

import ember.numpy as jnp
from ember import lax
from tests.backends.cpu import random_steps, random_steps_more
from tests.backends.cpu.random_steps import (
    BOOL,
    FLOAT,
    INT,
    Value,
    _broadcasts,
    _is,
    _pick,
    _size,
)

_MAX_DEPTH = 2  # loops in loops in loops, no deeper
_depth = 0  # how many bodies are being traced around the current step
_BODY_MAX_SIZE = 60_000  # (sub-program values larger than this are dropped)


@contextlib.contextmanager
def _inside_body():
    global _depth
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1


def _frozen(pool, differentiable: bool):
    """``pool``'s values, through ``stop_gradient`` when the loop is not differentiable."""
    if differentiable:
        return list(pool)
    return [Value(lax.stop_gradient(p.v), p.exact) for p in pool]


def _sub_program(seed: int, pool: list, n_steps: int) -> list:
    """Runs ``n_steps`` random steps over ``pool`` (a copy); returns the values made."""
    rng = random.Random(seed)
    pool = list(pool)
    steps = random_steps.STEPS + random_steps_more.STEPS
    if _depth < _MAX_DEPTH:
        steps = steps + STEPS
    made = []
    with _inside_body():
        for _ in range(n_steps):
            out = rng.choice(steps)(rng, pool)
            if out is None or _size(out.shape) > _BODY_MAX_SIZE:
                continue
            pool.append(out)
            made.append(out)
    return made


def _outer(rng, pool, k: int) -> list:
    """Up to ``k`` values of the enclosing program for a body to close over."""
    return rng.sample(pool, min(len(pool), k))


def _reduce_exact(v: Value):
    """An exact scalar summarizing exact ``v``: its max (floats), its sum (ints), its
    count of Trues."""
    if v.dtype == BOOL:
        return jnp.sum(v.v).astype(np.int32)
    if not _size(v.shape):
        return jnp.zeros((), v.dtype)
    return jnp.max(v.v) if _is(v.dtype, FLOAT) else jnp.sum(v.v)


def _fit_exact(v: Value, like: Value):
    """Exact ``v`` as an array of ``like``'s shape and dtype (broadcast when it broadcasts,
    else its exact summary), or None where no exact conversion exists."""
    a = v.v if _broadcasts(v.shape, like.shape) else _reduce_exact(v)
    a = jnp.broadcast_to(a, like.shape)
    src = np.dtype(a.dtype)
    if _is(like.dtype, FLOAT):
        return a.astype(like.dtype)
    if _is(src, FLOAT):  # (floor of exact floats: integers one ulp can not move)
        return (jnp.floor(a * 4.0).astype(like.dtype) if _is(like.dtype, INT)
                else a > 0)
    return a.astype(like.dtype) if like.dtype != BOOL else a != 0


def _fit_smooth(v: Value, like: Value):
    """Any ``v`` as a float array of ``like``'s shape and dtype: broadcast, else its mean."""
    a = v.v
    if not _is(v.dtype, FLOAT):
        a = a.astype(np.float32)
    if not _broadcasts(v.shape, like.shape):
        n = _size(v.shape)
        a = jnp.sum(a) / n if n else jnp.zeros((), a.dtype)
    return jnp.broadcast_to(a, like.shape).astype(like.dtype)


def _update(rng, carry: Value, made: list) -> Value:
    """The carry's next value from what the body made (the carry's exactness kept)."""
    exact = [m for m in made if m.exact] or [carry]
    src = rng.choice(exact)
    if carry.dtype == BOOL:
        return Value(jnp.logical_xor(carry.v, _fit_exact(src, carry)), carry.exact)
    if _is(carry.dtype, INT):  # (wraps alike everywhere)
        return Value(carry.v + _fit_exact(src, carry) + carry.v.dtype.type(1), carry.exact)
    if carry.exact:
        f = _fit_exact(src, carry)
        k = rng.randrange(3)
        if k == 0:
            return Value(jnp.maximum(carry.v, f), True)
        if k == 1:
            return Value(jnp.minimum(carry.v, f), True)
        return Value(jnp.where(f > 0, -carry.v, carry.v), True)
    f = _fit_smooth(rng.choice(made or [carry]), carry)
    return Value(jnp.tanh(carry.v * 0.75 + f * 0.5), False)


def _carries(rng, pool, smooth_ok: bool = True) -> list | None:
    """One to three carries: pool values (the first float) and maybe an integer counter.
    Each is (value, exact-in-the-body): inexact float carries are squashed each iteration."""
    first = _pick(rng, pool, FLOAT)
    if first is None:
        return None
    chosen = [first] + [_pick(rng, pool) for _ in range(rng.randrange(3))]
    if rng.random() < 0.4:
        shape = rng.choice([(), (3,), (2, 5), first.shape])
        chosen.append(Value(jnp.zeros(shape, np.int32) + 7, True))
    out = []
    for c in chosen[:3]:
        exact = c.exact and (not smooth_ok or rng.random() < 0.5 or not _is(c.dtype, FLOAT))
        out.append(Value(c.v, exact))
    return out


def _body_result(rng, made: list, like: Value) -> Value:
    """A value of ``like``'s shape and dtype from what a branch made (exact if it can be)."""
    src = rng.choice(made or [like])
    if src.exact and (like.exact or rng.random() < 0.5):
        f = _fit_exact(src, like)
        if f is not None:
            return Value(f, True)
    if not _is(like.dtype, FLOAT):
        return Value(like.v, like.exact)
    return Value(jnp.tanh(_fit_smooth(src, like)), False)


def _loop_body(seed: int, outer: list, carry_flags: list, extra: list):
    """The update of the carries by a sub-program: ``update(carry_values, extra_values)``
    returns the new carry values and the made values."""
    def update(values, extras):
        rng = random.Random(seed)
        carries = [Value(v, e) for v, e in zip(values, carry_flags)]
        made = _sub_program(rng.randrange(1 << 30),
                            carries + [Value(x, e) for x, e in zip(extras, extra)] + outer,
                            rng.randint(1, 4))
        new = [_update(rng, c, made) for c in carries]
        return [n.v for n in new], made, rng
    return update


def _traced_count(rng, pool, bound: int):
    """An int32 scalar in [0, bound) computed from exact data (or a constant)."""
    src = _pick(rng, pool, exact=True, nonempty=True)
    if src is None:
        return jnp.asarray(np.int32(rng.randrange(bound)))
    hits = (src.v if src.dtype == BOOL else
            src.v > src.v.dtype.type(0) if _is(src.dtype, FLOAT) else src.v % 2 == 0)
    return jnp.sum(hits).astype(np.int32) % np.int32(bound)


# --------------------------------------------------------------------------- steps


def fori_loop(rng, pool):
    """A fori_loop over 1-3 carries, concrete bounds (a scan) or traced ones (a while)."""
    carries = _carries(rng, pool)
    if carries is None:
        return None
    traced = rng.random() < 0.35
    lower = rng.randrange(-2, 3)
    outer = _frozen(_outer(rng, pool, 2), not traced)
    flags = [c.exact for c in carries]
    update = _loop_body(rng.randrange(1 << 30), outer, flags, [True])
    if traced:
        upper = _traced_count(rng, pool, 6) + np.int32(lower)
        init = [lax.stop_gradient(c.v) for c in carries]
        unroll = None
    else:
        upper = lower + rng.choice([-1, 0, 1, 2, 3, 4, 6, 9])
        init = [c.v for c in carries]
        unroll = rng.choice([None, None, 2, True])
    # (The index is int64 under x64 with concrete bounds, int32 with traced ones, in JAX
    # too: eager calls see concrete bounds where jit traces them. One dtype, one body.)
    out = lax.fori_loop(lower, upper, lambda i, vs: update(vs, [i.astype(np.int32)])[0],
                        init, unroll=unroll)
    k = rng.randrange(len(carries))  # (the others are dead: the loop loses them)
    return Value(out[k], flags[k])


def scan(rng, pool):
    """A scan over the leading axis of a value, 1-3 carries, ys stacked."""
    x = _pick(rng, pool, ndim_min=1, nonempty=True)
    carries = _carries(rng, pool)
    if x is None or carries is None:
        return None
    length = min(x.shape[0], rng.choice([1, 2, 3, 5, 8, 12]))
    xs = x.v[:length] if rng.random() < 0.8 else None
    outer = _outer(rng, pool, 2)
    flags = [c.exact for c in carries]
    update = _loop_body(rng.randrange(1 << 30), outer, flags, [x.exact])
    y_exact = []

    def body(vs, xt):
        new, made, brng = update(vs, [xt if xt is not None else x.v[0]])
        fits = [m for m in made if _size(m.shape) * length <= 100_000] or \
               [Value(n, f) for n, f in zip(new, flags)]
        y = brng.choice(fits)
        y_exact[:] = [y.exact]
        return new, y.v

    reverse = rng.random() < 0.3
    unroll = rng.choice([1, 1, 2, 3])
    final, ys = lax.scan(body, [c.v for c in carries], xs, length=length, reverse=reverse,
                         unroll=unroll)
    if rng.random() < 0.5:
        return Value(ys, y_exact[0])
    k = rng.randrange(len(carries))
    return Value(final[k], flags[k])


def while_loop(rng, pool):
    """A while_loop: a counter below a bound and an exact accumulator below a limit from
    the data; the carries through ``stop_gradient``."""
    carries = _carries(rng, pool)
    if carries is None:
        return None
    outer = _frozen(_outer(rng, pool, 2), False)
    flags = [c.exact for c in carries]
    update = _loop_body(rng.randrange(1 << 30), outer, flags, [True])
    bound = rng.randrange(0, 7)
    limit = _traced_count(rng, pool, 9) + np.int32(rng.randrange(4))
    acc_src = rng.randrange(1 << 30)

    def cond(state):
        i, acc, _ = state
        return (i < bound) & (acc < limit)

    def body(state):
        i, acc, vs = state
        new, made, _ = update(vs, [i])
        src = random.Random(acc_src).choice([m for m in made if m.exact] or [Value(i, True)])
        step = jnp.abs(_reduce_exact(src)).astype(np.int32) % np.int32(3)
        return i + np.int32(1), acc + step + np.int32(1), new

    init = (jnp.asarray(np.int32(0)), jnp.asarray(np.int32(0)),
            [lax.stop_gradient(c.v) for c in carries])
    i, acc, vs = lax.while_loop(cond, body, init)
    k = rng.randrange(len(carries) + 1)
    if k == len(carries):
        return Value(i * np.int32(10) + acc, True)
    return Value(vs[k], flags[k])


def cond_switch(rng, pool):
    """lax.cond on a data-dependent predicate, or lax.switch over 2-4 branches (index from
    the data, out of range at times: clamped); each branch a sub-program."""
    like = _pick(rng, pool)
    if like is None or _size(like.shape) > 40_000:
        return None
    count = _traced_count(rng, pool, 5)
    operands = [like] + _outer(rng, pool, 1)
    flags = [o.exact for o in operands]
    n = 2 if rng.random() < 0.5 else rng.randint(2, 4)
    seeds = [rng.randrange(1 << 30) for _ in range(n)]
    out_exact = {}

    def branch(j):
        def run(*vals):
            brng = random.Random(seeds[j])
            made = _sub_program(brng.randrange(1 << 30),
                                [Value(v, e) for v, e in zip(vals, flags)], brng.randint(0, 2))
            out = _body_result(brng, made, Value(vals[0], flags[0]))
            out_exact[j] = out.exact
            return out.v
        return run

    vals = [o.v for o in operands]
    if n == 2 and rng.random() < 0.7:
        out = lax.cond(count % 2 == 0, branch(0), branch(1), *vals)
    else:
        out = lax.switch(count - np.int32(1), [branch(j) for j in range(n)], *vals)
    return Value(out, all(out_exact.values()))


def map_(rng, pool):
    """lax.map of a sub-program over the leading axis (maybe in batches)."""
    x = _pick(rng, pool, ndim_min=1, nonempty=True)
    if x is None:
        return None
    xs = x.v[:rng.choice([1, 2, 4, 7, 16])]
    outer = _outer(rng, pool, 1)
    seed = rng.randrange(1 << 30)
    out_exact = []

    def f(row):
        frng = random.Random(seed)
        made = _sub_program(frng.randrange(1 << 30), [Value(row, x.exact)] + outer,
                            frng.randint(1, 2))
        fits = [m for m in made if _size(m.shape) * xs.shape[0] <= 100_000]
        out = frng.choice(fits) if fits else Value(row, x.exact)
        out_exact[:] = [out.exact]
        return out.v

    batch_size = rng.choice([None, None, 2, 3])
    return Value(lax.map(f, xs, batch_size=batch_size), out_exact[0])


def swap(rng, pool):
    """Carries that trade places each iteration: (a, b) -> (b, a) or a rotation of three,
    maybe with one moved value changed on the way."""
    a = _pick(rng, pool)
    if a is None:
        return None
    same = [p for p in pool if p.shape == a.shape and p.dtype == a.dtype]
    n = rng.choice([2, 2, 3])
    vals = [rng.choice(same) for _ in range(n)]
    change = rng.random() < 0.4 and _is(a.dtype, FLOAT)
    exact = all(v.exact for v in vals) and not change
    traced = rng.random() < 0.3

    def body(i, vs):
        vs = [vs[-1]] + list(vs[:-1])
        if change:
            vs[0] = jnp.tanh(vs[0] + i.astype(vs[0].dtype))
        return vs

    init = [v.v for v in vals]
    if traced:
        upper = _traced_count(rng, pool, 7)
        init = [lax.stop_gradient(v) for v in init]
    else:
        upper = rng.randrange(0, 7)
    out = lax.fori_loop(0, upper, body, init)
    return Value(out[rng.randrange(n)], exact)


def rnn_scan(rng, pool):
    """A recurrent scan whose body holds small matmuls (one contracting dim of at most 128:
    the backend's loop-body dot kernels): h' = tanh(h @ W + x_t @ U)."""
    x = _pick(rng, pool, FLOAT, nonempty=True)
    if x is None:
        return None
    steps, batch = rng.choice([1, 3, 6, 10]), rng.choice([1, 2, 4, 8])
    k, n = rng.choice([1, 3, 16, 33, 64, 128]), rng.choice([1, 5, 16, 32, 64])
    if _size(x.shape) < steps * batch:
        steps, batch = 1, 1
    k = min(k, _size(x.shape) // (steps * batch))
    xs = jnp.reshape(jnp.ravel(x.v)[:steps * batch * k], (steps, batch, k))
    gen = np.random.default_rng(rng.randrange(1 << 30))
    w = (gen.standard_normal((n, n)) / np.sqrt(n)).astype(x.dtype)
    u = (gen.standard_normal((k, n)) / np.sqrt(k)).astype(x.dtype)
    same = [p for p in pool if p.dtype == x.dtype and p.shape == (k, n)]
    if same and rng.random() < 0.5:  # a traced weight, closed over
        u = jnp.tanh(rng.choice(same).v)
    h0 = jnp.zeros((batch, n), x.dtype)

    def body(h, xt):
        h = jnp.tanh(h @ w + xt @ u)
        return h, h

    h, hs = lax.scan(body, h0, xs, reverse=rng.random() < 0.3)
    return Value(hs if rng.random() < 0.5 else h, False)


def row_updates(rng, pool):
    """A carried buffer written one row per iteration at the loop index (dynamic update
    slices in place; ``.at[i].set`` drops rows past the end), maybe reading its own
    previous row (then not in place)."""
    x = _pick(rng, pool, ndim_min=1, nonempty=True)
    if x is None:
        return None
    rows = min(x.shape[0], rng.choice([2, 4, 8, 16]))
    traced = rng.random() < 0.25
    src = x.v[:rows] if not traced else lax.stop_gradient(x.v[:rows])
    buf0 = jnp.zeros_like(src) if rng.random() < 0.5 else src[::-1]
    smooth = _is(x.dtype, FLOAT) and rng.random() < 0.4
    reads_self = rng.random() < 0.3
    k = rng.randrange(3)
    past_end = rng.randrange(0, 3)

    def body(i, state):
        buf, acc = state
        row = lax.dynamic_index_in_dim(src, i % rows, 0, keepdims=False)
        if reads_self:
            row = jnp.maximum(row, lax.dynamic_index_in_dim(buf, (i + rows - 1) % rows, 0,
                                                            keepdims=False))
        if smooth:
            row = jnp.tanh(row * 0.5 + acc.astype(row.dtype))
        if k == 0:
            buf = buf.at[i].set(row)
        elif k == 1:
            buf = lax.dynamic_update_slice(buf, row[None], (i,) + (0,) * (len(src.shape) - 1))
        else:
            flipped = jnp.flip(row) if len(row.shape) else row
            buf = lax.dynamic_update_index_in_dim(buf, flipped, i, 0)
        return buf, acc + np.int32(1)

    init = (buf0, jnp.asarray(np.int32(0)))
    upper = rows + past_end
    if traced:
        upper = _traced_count(rng, pool, rows + 3)
    buf, _ = lax.fori_loop(0, upper, body, init)
    return Value(buf, x.exact and not smooth)


KINDS = [fori_loop, scan, while_loop, cond_switch, map_, swap, rnn_scan, row_updates]


def control_flow(rng, pool):
    """One of the control-flow steps (one entry in the step pool: loops cost compile time)."""
    return rng.choice(KINDS)(rng, pool)


STEPS = [control_flow]
