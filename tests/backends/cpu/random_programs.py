"""Random jnp programs for differential tests of the CPU backend (``test_random_programs``)
and against JAX (``tests/test_jax_oracle_programs.py``).

Each seed makes a program of 3-14 random steps (``random_steps``, ``random_steps_more``) over
two or three inputs: elementwise math, broadcasts against reductions, softmax-like row
patterns, transposes, reshapes, strided slices, flips, rolls, pads, concatenates, cumulative
sums, matrix products, gathers, scatters, sorts, integer and boolean arithmetic, dynamic
slices, bit operations, special functions, contractions. Shapes range from one element to ~10^5,
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

import numpy as np

import ember
import ember.numpy as jnp
from tests.backends.cpu import random_steps, random_steps_control, random_steps_more
from tests.backends.cpu.random_steps import BF16, F16, F32, F64, FLOAT, Value, _is, _size

STEPS = random_steps.STEPS + random_steps_more.STEPS + random_steps_control.STEPS

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


