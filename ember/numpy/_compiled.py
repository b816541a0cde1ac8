"""Eager fast-path programs compiled by the default backend, for large arrays.

The eager fast path (``_fastpath``) replays a traced jaxpr with NumPy kernels (``_replay``):
one pass over memory per primitive, and several for primitives whose NumPy implementation
needs them (a saturating float-to-int cast, integer division, ``select_n``...). On arrays of
``MIN_BYTES`` or more, a jaxpr that makes NumPy take more than one pass is instead compiled as
``jit`` would compile it, into one fused multi-threaded kernel: ``i // 7`` on 4M int32 takes
~1.5 ms this way against ~100 ms replayed, ``x.astype(jnp.int32)`` ~0.8 ms against ~45 ms,
``jnp.where(x > 0, x, y)`` ~1.1 ms against ~19 ms. Such calls run on the backend's dispatch
queue like a jitted call (results may be pending until read).

Eager results must not change between a signature's first call (the ordinary path) and
later ones, so only jaxprs that compile to NumPy's bits on every input are compiled
(``_exact``: exact arithmetic, comparisons, selections, casts, data movement, integer
division and sums; not float division, powers, math functions or float sums), and a compiled
program is used only where its first result has the ordinary path's bits (``_fastpath``
checks, as it checks replayed programs); otherwise the NumPy replay serves the signature.
Programs whose primitives only make views (reshapes, transposes) stay replayed, and so do
programs whose work is one fast NumPy kernel (``x + y``) unless their arrays are very large
(``SINGLE_KERNEL_MIN_BYTES``), where two threads beat NumPy's one. A smaller program of
several passes is replayed at first and compiled once its signature has spent a compile's
worth of time replayed (``compiles_later``; ``_fastpath`` counts), as eager loops are: eager
``nn.hard_tanh`` on (64, 128) float32, 18 us replayed, ~4 us compiled.

Example:
    >>> prog = compile_program(closed, ("array", "scalar"), {1: aval}, None, "floor_divide",
    ...                        replay)   # None when not worth compiling
    >>> prog(x, 7)                       # one compiled kernel (``replay`` for a strided x)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ember import core, dtypes
from ember.backends import canonical_name, get_backend
from ember.config import config
from ember.lax import elementwise as ew
from ember.lax import reduction as red
from ember.lax import shape, slicing
from ember.numpy._replay import Fallback, _convert_scalar, _plan

# The least size in bytes of the largest input or output for which a program is compiled:
# below it the NumPy replay's passes cost little more than the compiled call's dispatch
# (measured on 2^14 int32: ``i // 7`` 307 us replayed against 15 us compiled, but a compile
# costs ~5 ms, so small one-off signatures are better replayed).
MIN_BYTES = 1 << 16
# The least size for a program whose work is one fast NumPy kernel (``x + y``): from there
# the compiled kernel's two threads and reused output memory save more per call than a
# compile costs over a few calls (4M float32 ``x + y``: ~2.0 ms in NumPy, ~1.1 compiled;
# 1M: 0.53 against 0.42).
SINGLE_KERNEL_MIN_BYTES = 8 << 20

# Primitives that make a pass over their operands: the elementwise ones and the cumulative
# reductions (whose eager impl accumulates float32 in float64: several NumPy passes).
_PASSES = frozenset(v for v in vars(ew).values() if isinstance(v, core.Primitive)) | {
    red.cumsum_p, red.cumprod_p, red.cummax_p, red.cummin_p}
# Elementwise primitives whose replay is one NumPy kernel that is nevertheless slow: NumPy's
# ``where`` branches on each element (4M float32 with a random mask: ~18 ms, compiled ~1 ms).
_SLOW_SINGLE_KERNELS = frozenset({ew.select_n_p})

# What compiles to the bits of the NumPy replay on every input: IEEE-exact arithmetic,
# comparisons, selections, casts and data movement. Not: float division by a constant or a
# broadcast value (the compiler multiplies by its reciprocal, as XLA does; a division by an
# argument of the result's shape stays one), float powers and the math
# functions (``vecmath``'s approximations are not NumPy's), float sums and products (another
# order of additions). ``_fastpath`` checks a compiled program's first result anyway; this
# list keeps programs whose later results could differ from ever being chosen.
_EXACT_ANY = frozenset({
    ew.add_p, ew.sub_p, ew.mul_p, ew.neg_p, ew.abs_p, ew.max_p, ew.min_p, ew.sign_p,
    ew.floor_p, ew.ceil_p, ew.round_p, ew.is_finite_p, ew.sqrt_p, ew.rem_p, ew.square_p,
    ew.not_p, ew.and_p, ew.or_p, ew.xor_p, ew.eq_p, ew.ne_p, ew.lt_p, ew.le_p, ew.gt_p,
    ew.ge_p, ew.select_n_p, ew.clamp_p, ew.convert_element_type_p, ew.copy_p,
    ew.shift_left_p, ew.shift_right_arithmetic_p, ew.shift_right_logical_p,
    ew.population_count_p, ew.clz_p,
    shape.broadcast_in_dim_p, shape.reshape_p, shape.squeeze_p, shape.transpose_p,
    shape.rev_p, shape.concatenate_p, shape.pad_p, shape.iota_p, slicing.slice_p,
    red.reduce_max_p, red.reduce_min_p, red.reduce_and_p, red.reduce_or_p,
    red.reduce_xor_p, red.argmax_p, red.argmin_p, red.cummax_p, red.cummin_p, red.cumsum_p})
# (integer_pow: both multiply in the same order; NumPy's complex products round otherwise)
_EXACT_REAL = frozenset({ew.integer_pow_p})
_EXACT_INTEGER = frozenset({ew.div_p, red.reduce_sum_p, red.reduce_prod_p, red.cumprod_p})


def _exact(eqn, arguments: set) -> bool:
    """Whether ``eqn`` compiles to the NumPy replay's bits on every input (``arguments``:
    the ids of the jaxpr's input variables)."""
    if eqn.primitive in _EXACT_ANY:
        # (float cumsums: both accumulate float32 in float64, in order)
        return True
    kinds = {np.dtype(v.aval.dtype).kind for v in (*eqn.invars, *eqn.outvars)}
    if eqn.primitive in _EXACT_REAL:
        return "c" not in kinds
    if eqn.primitive in _EXACT_INTEGER and not kinds & {"f", "c", "V"}:
        return True
    if eqn.primitive is ew.div_p and "c" not in kinds:  # (a float division)
        divisor = eqn.invars[1]
        return (id(divisor) in arguments
                and divisor.aval.shape == eqn.outvars[0].aval.shape)
    return False


def _worth_compiling(closed, any_size: bool = False) -> bool:
    """Whether every equation of ``closed`` compiles exactly (``_exact``) and its arrays are
    large enough: ``MIN_BYTES`` where NumPy makes more than one pass over memory for its
    elementwise and cumulative work (two or more such equations on arrays, scalars'
    conversions being no passes, or one whose replay is not a single fast NumPy kernel),
    ``SINGLE_KERNEL_MIN_BYTES`` where it makes one. With ``any_size``, the former at any
    size (a signature called often enough: ``compiles_later``)."""
    avals = [v.aval for v in (*closed.jaxpr.invars, *closed.jaxpr.outvars)]
    size = max((a.size * a.dtype.itemsize for a in avals if hasattr(a, "dtype")), default=0)
    if size < MIN_BYTES and not any_size:
        return False
    plan = _plan(closed.jaxpr)
    arguments = {id(v) for v in closed.jaxpr.invars}
    if not all(_exact(eqn, arguments) for eqn, _, _ in plan):
        return False
    steps = [(eqn, raw) for eqn, _, raw in plan
             if eqn.primitive in _PASSES and eqn.outvars[0].aval.shape != ()]
    if len(steps) >= 2 or (len(steps) == 1 and (
            steps[0][1] is None or steps[0][0].primitive in _SLOW_SINGLE_KERNELS)):
        return True
    return len(steps) == 1 and size >= SINGLE_KERNEL_MIN_BYTES


def _default_backend_compiles_kernels() -> bool:
    try:
        backend = get_backend(canonical_name(config.read("jax_default_backend")))
    except ValueError:
        return False
    return getattr(backend, "fuses_kernels", False)


def compiles_later(closed) -> bool:
    """Whether ``closed``, which ``compile_program`` declined, would compile exactly into one
    kernel where NumPy makes several passes, at any size: worth compiling once its signature
    has been replayed long enough (``_fastpath``'s tiering; a compiled call of a few small
    arrays costs ~4 us, each NumPy pass ~1-3)."""
    return (not config.jit_disabled and _worth_compiling(closed, any_size=True)
            and _default_backend_compiles_kernels())


def compile_program(closed, kinds: tuple, scalar_avals: dict, out_tree: type | None,
                    name: str, replay: Callable, any_size: bool = False) -> Callable | None:
    """``closed`` compiled by the default backend as a function of the call's arguments (see
    ``_replay.compile_jaxpr`` for ``kinds``, ``scalar_avals`` and ``out_tree``), or None where
    compiling is not worth it (see the module docstring).

    Compiled programs read dense row-major buffers, so a call with a strided array (a
    transposed or sliced view) is served by ``replay`` instead, whose NumPy kernels read
    views in place (the compiled call would copy them first). ``run.serves(args)`` says
    whether ``run`` computes a call itself. ``any_size``: compile a small program too
    (``compiles_later``)."""
    if not _worth_compiling(closed, any_size) or not _default_backend_compiles_kernels():
        return None
    from ember.runtime.dispatch import compile_closed_jaxpr

    execute = compile_closed_jaxpr(closed, f"eager_{name}").execute
    int_range = np.iinfo(dtypes.default_int_dtype())
    readers = []  # per non-static argument: (position, None) or (position, scalar info)
    for i, kind in enumerate(kinds):
        if kind == "array":
            readers.append((i, None))
        elif kind == "scalar":
            aval = scalar_avals[i]
            checked = aval.dtype != dtypes.bool_ and dtypes.is_integer(aval.dtype)
            readers.append((i, ({}, aval.dtype, aval.weak_type, checked)))

    arrays = [i for i, kind in enumerate(kinds) if kind == "array"]

    def serves(args: tuple) -> bool:
        return all(args[i]._value.flags.c_contiguous for i in arrays)

    def run(*args: Any) -> Any:
        if not serves(args):
            return replay(*args)
        values = []
        for i, scalar in readers:
            a = args[i]
            if scalar is None:
                values.append(a)
                continue
            memo, dtype, weak, checked = scalar
            if checked and not int_range.min <= a <= int_range.max:
                raise Fallback  # (the ordinary path raises)
            value = memo.get(a)
            values.append(value if value is not None
                          else _convert_scalar(memo, a, dtype, weak))
        outs = execute(values)
        return outs[0] if out_tree is None else out_tree(outs)

    run.serves = serves
    return run
