"""lax.reduce: a reduction over dimensions with a user computation (variadic operands).

Also ``lax.composite`` (a named call kept in the jaxpr) and ``lax.platform_dependent``.

A reduction whose computation and init value form a known monoid (``lax.add`` with 0,
``lax.mul`` with 1, ``lax.max`` with the dtype's lowest value, ...) becomes the matching
``reduce_sum``/``reduce_max``/... primitive, as in JAX. Any other becomes ``reduce``, which
holds the computation traced on scalars: it lowers to HLO ``reduce`` with that computation as
its body, runs eagerly (and differentiates) as a pairwise tree of the vmapped computation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import _pytree, core, dtypes
from ember.compiler.hlo import Shape
from ember.compiler.lower import lower_jaxpr_body
from ember.interpreters import ad, batching
from ember.interpreters import partial_eval as pe
from ember.interpreters.batching import not_mapped
from ember.jaxpr import ClosedJaxpr, Jaxpr, eval_jaxpr
from ember.lax import base
from ember.lax import elementwise as E
from ember.lax import reduction as R
from ember.lax.shape import full, pad, reshape, transpose
from ember.lax.slicing import slice as lax_slice

__all__ = ["reduce", "reduce_p", "composite", "composite_p", "platform_dependent"]


# ---------------------------------------------------------------- monoids


def _monoid_reducer(computation: Callable, inits: Sequence[Any]) -> Callable | None:
    """The ordinary reduction equal to ``computation`` with this init value, if any."""
    if len(inits) != 1 or isinstance(inits[0], core.Tracer):
        return None
    x = inits[0]
    aval = core.get_aval(x)
    if aval.shape != ():
        return None
    val, dt = np.asarray(x), aval.dtype
    intlike = dt == dtypes.bool_ or dtypes.is_integer(dt)
    table = [
        (E.add, R.reduce_sum, lambda: 0, True),
        (E.mul, R.reduce_prod, lambda: 1, True),
        (E.bitwise_or, R.reduce_or, lambda: np.array(0, dt), intlike),
        (E.bitwise_and, R.reduce_and, lambda: np.array(-1).astype(dt), intlike),
        (E.bitwise_xor, R.reduce_xor, lambda: np.array(0, dt), intlike),
        (E.max, R.reduce_max, lambda: R.max_identity(dt), True),
        (E.min, R.reduce_min, lambda: R.min_identity(dt), True),
    ]
    for op, reducer, identity, ok in table:
        if computation is op:
            return reducer if ok and np.equal(val, identity()) else None
    return None


# ---------------------------------------------------------------- the reduce primitive

reduce_p = core.MultipleResultsPrimitive("reduce")
reduce_p.pp_param_order = ("computation", "dimensions", "jaxpr")
reduce_p.lowering_ignores = ("computation",)


def _reduce_abstract_eval(*avals, computation, jaxpr, dimensions):
    n = len(avals) // 2
    ops, inits = avals[:n], avals[n:]
    if any(a.shape != ops[0].shape for a in ops):
        raise ValueError("reduce operands must all have the same shape, got "
                         f"{[a.str_short() for a in ops]}")
    if any(a.shape != () for a in inits):
        raise ValueError("reduce found non-scalar initial value: "
                         f"{[a.str_short() for a in inits]}")
    if [a.dtype for a in ops] != [a.dtype for a in inits]:
        raise TypeError("reduce operand dtypes should match corresponding initial value "
                        f"dtypes, got operands={[a.str_short() for a in ops]} and "
                        f"initial_values={[a.str_short() for a in inits]}")
    R._check_axes("reduce", dimensions, ops[0].ndim)
    shape = tuple(d for i, d in enumerate(ops[0].shape) if i not in dimensions)
    return [core.ShapedArray(shape, o.dtype, o.weak_type and i.weak_type)
            for o, i in zip(ops, inits)]


def _apply(jaxpr: ClosedJaxpr, xs: Sequence[Any], ys: Sequence[Any]) -> list:
    """The scalar computation applied elementwise to equal-shape 1-D arrays (a vmap)."""
    size = core.get_aval(xs[0]).shape[0]
    outs, dims = batching.batch_flat(
        lambda *a: eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *a), [*xs, *ys],
        [0] * (len(xs) + len(ys)), size)
    return [batching.match_dim(o, d, 0, size) for o, d in zip(outs, dims)]


def _tree_reduce(jaxpr: ClosedJaxpr, dimensions: tuple, xs: Sequence[Any],
                 inits: Sequence[Any]) -> list:
    """The reduction as a tree of pairwise combinations: log2(n) vmapped calls of the
    computation (a monoid may be combined in any order)."""
    shape = core.get_aval(xs[0]).shape
    kept = [i for i in range(len(shape)) if i not in dimensions]
    out_shape = tuple(shape[i] for i in kept)
    n = math.prod(shape[i] for i in dimensions)
    m = math.prod(out_shape)
    if n == 0:
        return [full(out_shape, i, core.get_aval(x).dtype) for x, i in zip(xs, inits)]
    vals = [reshape(transpose(x, tuple(dimensions) + tuple(kept)), (n, m)) for x in xs]
    while n > 1:
        half = (n + 1) // 2
        lo = [lax_slice(v, (0, 0), (half, m)) for v in vals]
        hi = [lax_slice(v, (half, 0), (n, m)) for v in vals]
        if n % 2:  # the odd row meets the init value
            hi = [pad(v, E.convert_element_type(i, core.get_aval(v).dtype),
                      ((0, 1, 0), (0, 0, 0))) for v, i in zip(hi, inits)]
        flat = _apply(jaxpr, [reshape(v, (half * m,)) for v in lo],
                      [reshape(v, (half * m,)) for v in hi])
        vals, n = [reshape(v, (half, m)) for v in flat], half
    return [reshape(v, out_shape) for v in vals]


def _reduce_impl(*args, computation, jaxpr, dimensions):
    n = len(args) // 2
    outs = _tree_reduce(jaxpr, dimensions, args[:n], args[n:])
    return [np.asarray(o) for o in outs]


def _reduce_jvp(primals, tangents, *, computation, jaxpr, dimensions):
    n = len(primals) // 2
    if any(type(t) is not ad.Zero for t in tangents[n:]):
        raise NotImplementedError("Gradient of general lax.reduce with non-zero tangents for "
                                  "initial values to reduction not implemented")
    inits = primals[n:]
    tans = [ad.instantiate_zeros(t) for t in tangents[:n]]
    return ad.jvp_flat(lambda *xs: _tree_reduce(jaxpr, dimensions, xs, inits),
                       list(primals[:n]), tans)


def _reduce_batch(vals, dims, *, computation, jaxpr, dimensions):
    n = len(vals) // 2
    if any(d is not not_mapped for d in dims[n:]):
        raise NotImplementedError("reduce: batching over the initial values is not supported")
    size = batching.axis_size_of(vals, dims)
    ops = [batching.match_dim(v, d, 0, size) for v, d in zip(vals[:n], dims[:n])]
    outs = reduce_p.bind(*ops, *vals[n:], computation=computation, jaxpr=jaxpr,
                         dimensions=tuple(d + 1 for d in dimensions))
    return outs, [0] * n


def _reduce_lowering(ctx, *args, computation, jaxpr, dimensions):
    n = len(args) // 2
    bb = ctx.new_builder("region_reduce")
    acc = [bb.parameter(i, Shape(a.dtype, ())) for i, a in enumerate(ctx.avals_in[n:])]
    elt = [bb.parameter(n + i, Shape(a.dtype, ())) for i, a in enumerate(ctx.avals_in[n:])]
    consts = [bb.constant(np.asarray(c, v.aval.dtype))
              for c, v in zip(jaxpr.consts, jaxpr.jaxpr.constvars)]
    outs = lower_jaxpr_body(bb, jaxpr.jaxpr, consts, acc + elt)
    body = bb.build(outs[0] if n == 1 else bb.op("tuple", *outs))
    shapes = [Shape(a.dtype, tuple(a.shape)) for a in ctx.avals_out]
    out = ctx.b.op("reduce", *args, shape=shapes[0] if n == 1 else Shape.tuple(shapes),
                   dimensions=tuple(dimensions), calls=[body])
    if n == 1:
        return [out]
    return [ctx.b.op("get_tuple_element", out, index=i) for i in range(n)]


reduce_p.def_impl(_reduce_impl)
reduce_p.def_abstract_eval(_reduce_abstract_eval)
reduce_p.def_jvp(_reduce_jvp)
reduce_p.def_batching(_reduce_batch)
reduce_p.def_lowering(_reduce_lowering)


def _reduction_jaxpr(computation: Callable, flat_inits: Sequence[Any], tree: Any):
    avals = [core.ShapedArray((), a.dtype, a.weak_type)
             for a in (core.get_aval(x) for x in flat_inits)]
    out_tree_box = []

    def flat_fun(*flat):
        xs = _pytree.tree_unflatten(tree, flat[:len(avals)])
        ys = _pytree.tree_unflatten(tree, flat[len(avals):])
        out_flat, out_tree = _pytree.tree_flatten(computation(xs, ys))
        out_tree_box.append(out_tree)
        return [base.as_operand(o, "reduce", "computation output") for o in out_flat]

    closed, _ = pe.trace_to_jaxpr(flat_fun, avals + avals)
    if any(isinstance(c, core.Tracer) for c in closed.consts):
        raise NotImplementedError("Reduction computations can't close over Tracers; pass the "
                                  "values as operands instead.")
    if out_tree_box[0] != tree:
        raise TypeError(f"reduce: the computation must return the structure of init_values "
                        f"{tree}, got {out_tree_box[0]}")
    for o, a in zip(closed.out_avals, avals):
        if o.shape != () or o.dtype != a.dtype:
            raise TypeError(f"reduce: the computation must return scalars of the init values' "
                            f"dtypes {[str(x.dtype) for x in avals]}, got "
                            f"{[o.str_short() for o in closed.out_avals]}")
    return closed


def reduce(operands: Any, init_values: Any, computation: Callable[[Any, Any], Any],
           dimensions: Sequence[int]) -> Any:
    """Reduces ``operands`` over ``dimensions`` with ``computation`` (XLA's Reduce).

    ``operands`` and ``init_values`` are pytrees of the same structure (arrays of one shape
    and scalars); ``computation(acc, x)`` combines two such pytrees. ``init_values`` must be
    an identity of ``computation`` and ``computation`` associative (a monoid), otherwise the
    result is undefined. Known monoids (``lax.add`` with 0, ``lax.max`` with -inf, ...)
    become the ordinary reductions.

    Example:
        >>> lax.reduce(jnp.arange(6.).reshape(2, 3), 0., lax.add, (1,))
        Array([ 3., 12.], dtype=float32)
        >>> lax.reduce((x, jnp.arange(3)), (-jnp.inf, 0),
        ...            lambda a, b: (lax.max(a[0], b[0]), lax.add(a[1], b[1])), (0,))
    """
    flat_ops, tree = _pytree.tree_flatten(operands)
    flat_inits, init_tree = _pytree.tree_flatten(init_values)
    if tree != init_tree:
        raise ValueError("Operands must have the same tree structure as init_values: "
                         f"{tree} vs. {init_tree}")
    if len(flat_ops) != len(flat_inits):
        raise ValueError("Must have same total number of operands as init_values: "
                         f" {len(flat_ops)} vs. {len(flat_inits)}")
    if not flat_ops:
        raise ValueError("reduce: needs at least one operand")
    flat_ops = [base.as_operand(x, "reduce", "operands") for x in flat_ops]
    flat_inits = [base.as_operand(x, "reduce", "init_values") for x in flat_inits]
    ndim = core.get_aval(flat_ops[0]).ndim
    dims = R._normalize_axes("reduce", dimensions, ndim)
    monoid = _monoid_reducer(computation, flat_inits)
    if monoid is not None:
        x, init = flat_ops[0], flat_inits[0]
        weak = core.get_aval(x).weak_type and core.get_aval(init).weak_type
        out = monoid(x, dims)
        return E.convert_element_type(out, core.get_aval(out).dtype, weak_type=weak)
    closed = _reduction_jaxpr(computation, flat_inits, tree)
    outs = reduce_p.bind(*flat_ops, *flat_inits, computation=computation, jaxpr=closed,
                         dimensions=dims)
    return _pytree.tree_unflatten(tree, outs)


# ---------------------------------------------------------------- composite

composite_p = core.MultipleResultsPrimitive("composite")
composite_p.pp_param_order = ("attributes", "jaxpr", "name", "version")


def _composite_impl(*args, name, attributes, version, jaxpr):
    return [np.asarray(o) for o in eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)]


def _composite_lowering(ctx, *args, name, attributes, version, jaxpr):
    # ember has no backend that recognizes composites: the decomposition is inlined.
    consts = [ctx.constant(c, v.aval.dtype) for c, v in zip(jaxpr.consts, jaxpr.jaxpr.constvars)]
    return ctx.lower_jaxpr(jaxpr.jaxpr, consts, list(args))


def _composite_no_ad(*args, **params):
    raise ValueError("JVP rule for composite not implemented. You can use `ember.custom_jvp` to "
                     "add support.")


def _composite_no_transpose(*args, **params):
    raise ValueError("Transpose rule for composite not implemented. You can use "
                     "`ember.custom_jvp` or `ember.custom_vjp` to add support.")


composite_p.def_impl(_composite_impl)
composite_p.def_abstract_eval(lambda *avals, jaxpr, **_: list(jaxpr.out_avals))
composite_p.def_jvp(_composite_no_ad)
composite_p.def_transpose(_composite_no_transpose)
composite_p.def_lowering(_composite_lowering)


def _hashable_leaf(v: Any) -> Any:
    if isinstance(v, core.Tracer):
        raise core.UnexpectedTracerError(
            "Found a tracer as an attribute of a composite: attributes must be static values "
            "(use NumPy arrays, not traced arrays).")
    return tuple(np.asarray(v).ravel().tolist()) if isinstance(v, np.ndarray) else v


def composite(decomposition: Callable, name: str, version: int = 0) -> Callable:
    """Wraps ``decomposition`` as a named operation: calling the result binds one
    ``composite[name=...]`` equation holding the decomposition's jaxpr (a backend could
    recognize it by name; ember runs the decomposition). Keyword arguments of the call are
    static attributes. It has no derivative rule, as in JAX (wrap it in ``custom_jvp``).

    Example:
        >>> tan = lax.composite(lambda x: jnp.sin(x) / jnp.cos(x), name="my.tan")
        >>> tan(0.5)
        Array(0.5463025, dtype=float32, weak_type=True)
    """
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        flat, in_tree = _pytree.tree_flatten(args)
        flat = [base.as_operand(x, "composite", "arguments") for x in flat]
        attributes = []
        for k, v in kwargs.items():
            leaves, treedef = _pytree.tree_flatten(v)
            attributes.append((k, tuple(_hashable_leaf(x) for x in leaves), treedef))
        out_box = []

        def flat_fun(*xs):
            out = decomposition(*_pytree.tree_unflatten(in_tree, xs), **kwargs)
            leaves, out_tree = _pytree.tree_flatten(out)
            out_box.append(out_tree)
            return leaves

        closed, _ = pe.trace_to_jaxpr(flat_fun, [core.get_aval(x) for x in flat])
        consts = list(closed.consts)
        if any(isinstance(c, core.Tracer) for c in consts):
            raise core.UnexpectedTracerError(
                f"Found a tracer as a constant in the decomposition for the composite op "
                f"'{name}': the decomposition closes over a value that is involved in a "
                "transformation. Pass such values explicitly as arguments to the composite.")
        # Constants become leading inputs, as in JAX (the equation's jaxpr is closed).
        j = closed.jaxpr
        jaxpr = ClosedJaxpr(Jaxpr([], j.constvars + j.invars, j.outvars, j.eqns), [])
        outs = composite_p.bind(*consts, *flat, name=name, attributes=tuple(attributes),
                                version=version, jaxpr=jaxpr)
        return _pytree.tree_unflatten(out_box[0], outs)

    wrapped.__name__ = getattr(decomposition, "__name__", "composite")
    wrapped.__doc__ = getattr(decomposition, "__doc__", None)
    wrapped.__wrapped__ = decomposition
    return wrapped


# ---------------------------------------------------------------- platform_dependent

_PLATFORMS = ("cpu", "cuda", "rocm", "gpu", "tpu")


def platform_dependent(*args: Any, default: Callable | None = None,
                       **per_platform: Callable) -> Any:
    """Calls the branch for the platform the computation runs on: ``cpu=f`` on ember (its
    backends all run on the host CPU), else ``default``.

    Unlike JAX, which stages every branch and picks one at lowering, ember picks the branch
    when tracing (only one platform exists), so the jaxpr holds just that branch.

    Example:
        >>> lax.platform_dependent(1.0, cpu=jnp.sin, default=jnp.cos)
        Array(0.84147096, dtype=float32, weak_type=True)
    """
    for p, f in per_platform.items():
        if p not in _PLATFORMS:
            raise ValueError(f"Unsupported platform {p!r} in platform_dependent; known "
                             f"platforms are {_PLATFORMS}")
        if not callable(f):
            raise TypeError(f"platform_dependent: the branch for {p!r} must be callable, got "
                            f"{type(f).__name__}")
    branch = per_platform.get("cpu", default)
    if branch is None:
        raise ValueError("platform_dependent: no branch for platform 'cpu' and no default; "
                         f"got branches for {sorted(per_platform)}")
    return branch(*args)
