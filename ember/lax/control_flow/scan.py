"""``lax.scan``, ``lax.map`` and ``lax.fori_loop``, with the primitive ``scan`` and its rules.

``scan(f, init, xs)`` traces ``f`` once into a closed jaxpr taking ``(*consts, *carry, *x)``
(one slice of each ``xs`` leaf) and returning ``(*carry, *y)``, and binds
``scan[jaxpr length num_carry num_consts reverse unroll]`` on ``(*consts, *init, *xs)``; the
consts are the enclosing trace's values ``f`` closes over. The results are the final carry and
each ``y`` stacked along a new leading axis. Rules: a Python loop eagerly; an HLO ``while``
over a counter under jit (consts, carry, xs and the ys buffers ride in the loop state); forward
mode (a scan of the JVP'ed body, with a fixed point on which carries have tangents); partial
evaluation (a known scan run now that also stacks the residuals, an unknown scan staged;
loop-invariant residuals are computed once, outside the loop); transposition (a scan in the
other direction carrying the cotangents); batching (a fixed point on batched carries).
``fori_loop`` with concrete bounds is a scan (reverse-mode works), otherwise a ``while_loop``.

Example:
    >>> ember.lax.scan(lambda c, x: (c + x, c), 0.0, jnp.arange(3.0))
    (Array(3., dtype=float32), Array([0., 0., 1.], dtype=float32))
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from ember import core, dtypes
from ember._pytree import (
    keystr,
    tree_flatten,
    tree_flatten_with_path,
    tree_map,
    tree_unflatten,
)
from ember.compiler.hlo import Shape
from ember.config import config
from ember.errors import ConcretizationTypeError
from ember.interpreters import ad, batching
from ember.interpreters import partial_eval as pe
from ember.jaxpr import ClosedJaxpr, Jaxpr, eval_jaxpr
from ember.lax.control_flow.common import lower_to_computation, trace_function
from ember.lax.control_flow.eager_loops import EagerLoop
from ember.lax.control_flow.while_loop import _structure_diffs

__all__ = ["fori_loop", "map", "scan", "scan_p"]

Carry = TypeVar("Carry")
X = TypeVar("X")
Y = TypeVar("Y")
T = TypeVar("T")

scan_p = core.MultipleResultsPrimitive("scan")


def _split(xs: Sequence[Any], sizes: Sequence[int]) -> list[list[Any]]:
    out, start = [], 0
    for n in sizes:
        out.append(list(xs[start:start + n]))
        start += n
    out.append(list(xs[start:]))
    return out


def _typematch(a: core.ShapedArray, b: core.ShapedArray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype  # (weak types may differ, as in JAX)


def _slice_aval(aval: core.ShapedArray) -> core.ShapedArray:
    return core.ShapedArray(aval.shape[1:], aval.dtype, aval.weak_type)


def _stacked_aval(length: int, aval: core.ShapedArray) -> core.ShapedArray:
    return core.ShapedArray((length, *aval.shape), aval.dtype, aval.weak_type)


def _permute_inputs(closed: ClosedJaxpr, order: Sequence[int]) -> ClosedJaxpr:
    """``closed`` taking its inputs in another order: new input ``k`` is old ``order[k]``."""
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, [j.invars[i] for i in order], j.outvars, j.eqns),
                       closed.consts)


def _permute_outputs(closed: ClosedJaxpr, order: Sequence[int]) -> ClosedJaxpr:
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, [j.outvars[i] for i in order], j.eqns),
                       closed.consts)


# --------------------------------------------------------------------------- public API


def scan(f: Callable[[Carry, X], tuple[Carry, Y]], init: Carry, xs: X | None = None,
         length: int | None = None, reverse: bool = False, unroll: int | bool = 1,
         _split_transpose: bool = False) -> tuple[Carry, Y]:
    """Loops ``f`` over the leading axis of ``xs``, carrying a value along.

    The semantics, in Python (``xs`` and the ``ys`` may be pytrees of arrays)::

        def scan(f, init, xs, length=None):
            carry, ys = init, []
            for x in xs:
                carry, y = f(carry, x)
                ys.append(y)
            return carry, np.stack(ys)

    ``f`` is traced once; the carry output must have the carry input's structure and types.

    Args:
        f: ``(carry, x) -> (carry, y)``.
        init: the initial carry (a pytree of arrays).
        xs: the values to scan over along their leading axis (a pytree), or None with
            ``length``.
        length: the number of iterations; required when ``xs`` is None, else it must agree
            with the leading axis of ``xs``.
        reverse: scan from the end of ``xs`` to the start (``ys`` keep ``xs``'s order).
        unroll: iterations per loop trip (an int) or ``True`` to unroll fully; the results do
            not depend on it.
        _split_transpose: accepted for JAX's sake; ignored.

    Returns:
        ``(final_carry, ys)``, the ``y`` leaves stacked along a new leading axis.

    Example:
        >>> carry, ys = lax.scan(lambda c, x: (c + x, c * x), 0.0, jnp.arange(1.0, 4.0))
        >>> carry, ys
        (Array(6., dtype=float32), Array([0., 2., 9.], dtype=float32))
    """
    del _split_transpose
    if not callable(f):
        raise TypeError("lax.scan: f argument should be a callable.")
    init_flat, init_tree = tree_flatten(init)
    xs_flat, xs_tree = tree_flatten(xs)
    length = _infer_scan_length(xs_flat, length)
    unroll = _check_unroll(unroll, length)
    if config.jit_disabled:
        return _scan_python(f, init, xs_flat, xs_tree, length, reverse)

    init_avals = [core.get_aval(x) for x in init_flat]
    x_avals = [_slice_aval(core.get_aval(x)) for x in xs_flat]
    carry_name = _first_param_name(f)
    closed, consts, carry_tree, ys_tree = _trace_body(f, init_tree, xs_tree, init_avals,
                                                      x_avals, carry_name)
    num_carry = len(init_flat)
    carry_out_avals = closed.out_avals[:num_carry]
    # A weakly typed init (a Python scalar) takes the type of the carry output it is
    # compatible with, and the body is traced again at that type (as in JAX).
    changed = False
    if carry_tree == init_tree:
        for i, (a, o) in enumerate(zip(init_avals, carry_out_avals)):
            if a.weak_type and not _typematch(a, o):
                new = dtypes.result_type(init_flat[i], o.dtype)
                init_flat[i] = _convert(init_flat[i], new)
                changed = True
    if changed:
        init_avals = [core.get_aval(x) for x in init_flat]
        closed, consts, carry_tree, ys_tree = _trace_body(f, init_tree, xs_tree, init_avals,
                                                          x_avals, carry_name)
    _check_carry_type("scan body", carry_name, init, init_tree, init_avals, carry_tree,
                      closed.out_avals[:num_carry])
    # As JAX: a carry the body returns unchanged becomes a const (a smaller loop state), and
    # a y that is an x is not copied: it is the x.
    j = closed.jaxpr
    n_c = len(consts)
    move = [o is v for o, v in zip(j.outvars[:num_carry], j.invars[n_c:n_c + num_carry])]
    x_pos = {v.id: k for k, v in enumerate(j.invars[n_c + num_carry:])}
    y_fwd = [x_pos.get(getattr(o, "id", None)) for o in j.outvars[num_carry:]]
    if any(move) or any(f is not None for f in y_fwd):
        carry_in = j.invars[n_c:n_c + num_carry]
        invars = ([v for v, m in zip(carry_in, move) if m] + j.invars[:n_c]
                  + [v for v, m in zip(carry_in, move) if not m] + j.invars[n_c + num_carry:])
        outvars = ([o for o, m in zip(j.outvars[:num_carry], move) if not m]
                   + [o for o, f in zip(j.outvars[num_carry:], y_fwd) if f is None])
        closed = ClosedJaxpr(Jaxpr(j.constvars, invars, outvars, j.eqns), closed.consts)
        consts = [x for x, m in zip(init_flat, move) if m] + consts
    kept_init = [x for x, m in zip(init_flat, move) if not m]
    outs = scan_p.bind(*consts, *kept_init, *xs_flat, reverse=bool(reverse), length=length,
                       jaxpr=closed, num_consts=len(consts), num_carry=len(kept_init),
                       unroll=unroll)
    carry_outs, ys = iter(outs[:len(kept_init)]), iter(outs[len(kept_init):])
    carry = [_as_array(x) if m else next(carry_outs) for x, m in zip(init_flat, move)]
    ys = [next(ys) if f is None else _as_array(xs_flat[f]) for f in y_fwd]
    return tree_unflatten(carry_tree, carry), tree_unflatten(ys_tree, ys)


def _as_array(x: Any) -> Any:
    if hasattr(x, "aval"):  # a tracer or an ember array already
        return x
    aval = core.get_aval(x)
    return _convert(x, aval.dtype, aval.weak_type)


def _convert(x: Any, dtype: Any, weak_type: bool = False) -> Any:
    from ember.lax.elementwise import convert_element_type
    return convert_element_type(x, dtype, weak_type)


def _first_param_name(f: Callable) -> str | None:
    try:
        params = list(inspect.signature(f).parameters)
    except (ValueError, TypeError):
        return None
    return params[0] if params else None


def _infer_scan_length(xs_flat: Sequence[Any], length: Any) -> int:
    bad = [x for x in xs_flat if len(getattr(x, "shape", ())) == 0]
    if bad:
        raise ValueError("scan got value with no leading axis to scan over: "
                         f"{', '.join(str(x) for x in bad)}.")
    shapes = [x.shape[0] for x in xs_flat]
    if length is not None:
        try:
            length = int(core.concrete_or_error(length))  # (as JAX: int(), so 2.0 is 2)
        except ConcretizationTypeError:
            raise ConcretizationTypeError(
                length, "The `length` argument to `scan` expects a concrete `int` value. For "
                        "scan-like iteration with a dynamic length, use `while_loop` or "
                        "`fori_loop`.") from None
        except (TypeError, ValueError):
            raise TypeError(f"lax.scan: length must be an int, got {length!r}") from None
        if length < 0:
            raise ValueError(f"lax.scan: length must be non-negative, got {length}")
        if any(n != length for n in shapes):
            raise ValueError(f"scan got `length` argument of {length} which disagrees with "
                             f"leading axis sizes {shapes}.")
        return length
    if len(set(shapes)) > 1:
        raise ValueError("scan got values with different leading axis sizes: "
                         f"{', '.join(str(n) for n in shapes)}.")
    if not shapes:
        raise ValueError("scan got no values to scan over and `length` not provided.")
    return shapes[0]


def _check_unroll(unroll: Any, length: int) -> int:
    unroll = core.concrete_or_error(
        unroll, "The `unroll` argument to `scan` expects a concrete `int` or `bool` value.")
    if isinstance(unroll, (bool, np.bool_)):
        return max(length, 1) if unroll else 1
    try:
        unroll = operator.index(unroll)
    except TypeError:
        raise TypeError(f"lax.scan: `unroll` must be a `bool` or an `int`, got "
                        f"{unroll!r}") from None
    if unroll < 0:
        raise ValueError("`unroll` must be a `bool` or a non-negative `int`.")
    return unroll


def _trace_body(f, init_tree, xs_tree, init_avals, x_avals, carry_name):
    trees: list = []

    def body(carry, x):
        out = f(carry, x)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            shown = tree_map(core.get_aval, out)  # (a container shows its avals' reprs)
            raise TypeError(f"scan body output must be a pair, got {shown}.")
        trees.append((tree_flatten(out[0])[1], tree_flatten(out[1])[1]))
        return out

    in_tree = tree_flatten((tree_unflatten(init_tree, init_avals),
                            tree_unflatten(xs_tree, x_avals)))[1]
    closed, consts, _ = trace_function(body, in_tree, [*init_avals, *x_avals])
    carry_tree, ys_tree = trees[0]
    if carry_tree != init_tree:
        _raise_tree_mismatch("scan body", init_tree, carry_tree, carry_name)
    return closed, consts, carry_tree, ys_tree


def _raise_tree_mismatch(name: str, in_tree: Any, out_tree: Any,
                         carry_name: str | None = None) -> None:
    def component(path):
        if carry_name:
            return (f"the input carry component {carry_name}{keystr(path)}" if path
                    else f"the input carry {carry_name}")
        return f"the input carry at path {keystr(path)}" if path else "the input carry"

    leaf = core.ShapedArray((), np.float32)  # (leaves compare as avals, as in JAX's message)
    diffs = _structure_diffs(tree_unflatten(in_tree, [leaf] * in_tree.num_leaves),
                             tree_unflatten(out_tree, [leaf] * out_tree.num_leaves), (),
                             component)
    if not diffs:
        detail = (f"the input tree structure is:\n{in_tree}\n"
                  f"the output tree structure is:\n{out_tree}\n")
    elif len(diffs) == 1:
        detail = diffs[0][0].upper() + diffs[0][1:] + ".\n"
    else:
        detail = "".join(f"  * {d};\n" for d in diffs[:-1]) + f"  * {diffs[-1]}.\n"
    raise TypeError(
        f"{name} function carry input and carry output must have the same pytree structure, "
        f"but they differ:\n\n{detail}\nRevise the function so that the carry output has the "
        "same pytree structure as the carry input.")


def _check_carry_type(name: str, carry_name: str | None, init: Any, init_tree: Any,
                      in_avals: Sequence[core.ShapedArray], out_tree: Any,
                      out_avals: Sequence[core.ShapedArray]) -> None:
    """JAX's TypeError when the carry output's types differ from the carry input's."""
    if out_tree != init_tree:
        _raise_tree_mismatch(name, init_tree, out_tree, carry_name)
    paths = [p for p, _ in tree_flatten_with_path(init)[0]]

    def component(path):
        if carry_name:
            return (f"the input carry component {carry_name}{keystr(path)}" if path
                    else f"the input carry {carry_name}")
        return f"the input carry at path {keystr(path)}" if path else "the input carry"

    diffs = []
    for path, a, o in zip(paths, in_avals, out_avals):
        if _typematch(a, o):
            continue
        what = [w for w, bad in (("the dtypes do not match", a.dtype != o.dtype),
                                 ("the shapes do not match", a.shape != o.shape)) if bad]
        diffs.append(f"{component(path)} has type {a._long()} but the corresponding output "
                     f"carry component has type {o._long()}, so {', and '.join(what)}")
    if not diffs:
        return
    if len(diffs) == 1:
        text = diffs[0][0].upper() + diffs[0][1:] + ".\n"
    else:
        text = "".join(f"  * {d};\n" for d in diffs[:-1]) + f"  * {diffs[-1]}.\n"
    raise TypeError(f"{name} function carry input and carry output must have equal types, but "
                    f"they differ:\n\n{text}\nRevise the function so that all output types "
                    "match the corresponding input types.")


def _scan_python(f, init, xs_flat, xs_tree, length, reverse):
    """``scan`` under ``disable_jit``: a Python loop calling ``f`` (as JAX does)."""
    from ember.lax.shape import concatenate, expand_dims
    from ember.lax.slicing import index_in_dim
    if length == 0:
        raise ValueError("zero-length scan is not supported in disable_jit() mode because the "
                         "output type is unknown.")
    carry, ys = init, []
    order = range(length - 1, -1, -1) if reverse else range(length)
    for i in order:
        x = tree_unflatten(xs_tree, [index_in_dim(v, i, keepdims=False) for v in xs_flat])
        carry, y = f(carry, x)
        ys.append(y)
    if reverse:
        ys.reverse()
    stacked = tree_map(lambda *leaves: concatenate([expand_dims(v, (0,)) for v in leaves], 0),
                       *ys)
    return carry, stacked


def map(f: Callable[[X], Y], xs: X, *, batch_size: int | None = None) -> Y:  # noqa: A001
    """Applies ``f`` to each slice of ``xs`` along its leading axis, stacking the results.

    ``lax.map(f, xs)`` is ``np.stack([f(x) for x in xs])`` for pytrees of arrays, run as a
    ``scan`` (one traced call of ``f``). With ``batch_size``, ``batch_size`` slices at a time
    go through ``vmap(f)`` inside the scan, and the remainder through one more ``vmap(f)``
    (``batch_size=0``: one ``vmap`` of everything).

    Args:
        f: the function of one slice.
        xs: a pytree of arrays with a common leading axis.
        batch_size: how many slices each step computes at once (with ``vmap``).

    Returns:
        The stacked results of ``f``.

    Example:
        >>> lax.map(lambda x: x * 2, jnp.arange(3.0), batch_size=2)
        Array([0., 2., 4.], dtype=float32)
    """
    if batch_size is None:
        _, ys = scan(lambda _, x: ((), f(x)), (), xs)
        return ys
    from ember._vmap_api import vmap
    from ember.lax.shape import concatenate, reshape
    from ember.lax.slicing import slice_in_dim
    batch_size = operator.index(batch_size)
    if batch_size < 0:
        raise ValueError(f"lax.map: batch_size must be non-negative, got {batch_size}")
    leaves, tree = tree_flatten(xs)
    if not leaves:
        return vmap(f)(xs)
    n = core.get_aval(leaves[0]).shape[0]
    num_batches, rem = divmod(n, batch_size) if batch_size else (0, n)
    cut = num_batches * batch_size
    scan_ys = None
    if num_batches:
        chunks = [reshape(v if cut == n else slice_in_dim(v, 0, cut),
                          (num_batches, batch_size, *core.get_aval(v).shape[1:]))
                  for v in leaves]
        _, scan_ys = scan(lambda _, x: ((), vmap(f)(x)), (), tree_unflatten(tree, chunks))
        scan_ys = tree_map(lambda y: reshape(y, (cut, *core.get_aval(y).shape[2:])), scan_ys)
    if not rem:
        return scan_ys
    rem_ys = vmap(f)(tree_unflatten(tree, [slice_in_dim(v, cut, n) for v in leaves]))
    if scan_ys is None:
        return rem_ys
    return tree_map(lambda a, b: concatenate([a, b], 0), scan_ys, rem_ys)


def _is_concrete(x: Any) -> bool:
    return not isinstance(x, core.Tracer) or x.to_concrete_value() is not None


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, T], T], init_val: T, *,
              unroll: int | bool | None = None) -> T:
    """``for i in range(lower, upper): val = body_fun(i, val)``, traced once.

    With concrete bounds (Python ints or concrete arrays) the loop is a ``scan`` over
    ``upper - lower`` steps carrying the index, so reverse-mode differentiation works;
    otherwise it is a ``while_loop`` (forward mode only).

    Args:
        lower: the first index (an integer scalar).
        upper: the index bound (exclusive); no step runs when ``upper <= lower``.
        body_fun: ``(i, val) -> val``, keeping ``val``'s structure and types.
        init_val: the initial value (a pytree of arrays).
        unroll: like ``scan``'s, only with concrete bounds.

    Returns:
        The value after the last step.

    Example:
        >>> lax.fori_loop(0, 4, lambda i, x: x + i, 0.0)
        Array(6., dtype=float32, weak_type=True)
    """
    if not callable(body_fun):
        raise TypeError("lax.fori_loop: body_fun argument should be callable.")
    lower_dtype, upper_dtype = dtypes.dtype(lower), dtypes.dtype(upper)
    if lower_dtype == upper_dtype:
        dtype = lower_dtype
    else:
        # A weak integer bound (a Python int) takes the other, strong bound's integer type.
        dtype = None
        if lower_dtype.kind == "i" and upper_dtype.kind == "i":
            lower_weak, upper_weak = dtypes.is_weakly_typed(lower), dtypes.is_weakly_typed(upper)
            if lower_weak and not upper_weak:
                dtype = upper_dtype
            elif upper_weak and not lower_weak:
                dtype = lower_dtype
        if dtype is None:
            raise TypeError("lower and upper arguments to fori_loop must have equal types, "
                            f"got {lower_dtype.name} and {upper_dtype.name}")
    use_scan = False
    if _is_concrete(lower) and _is_concrete(upper):
        try:
            lower_, upper_ = int(core.concrete_or_error(lower)), int(
                core.concrete_or_error(upper))
            use_scan = True
        except TypeError:
            use_scan = False
    if use_scan:
        length = max(upper_ - lower_, 0)
        if config.jit_disabled and length == 0:
            return init_val

        def scanned(carry, _):
            i, x = carry
            return (i + 1, body_fun(i, x)), None

        (_, result), _ = scan(scanned, (lower_, init_val), None, length=length,
                              unroll=False if unroll is None else unroll)
        return result
    if unroll is not None and unroll is not False and unroll != 1:
        raise ValueError("Can only use `unroll` in `fori_loop` if the loop bounds are "
                         "statically known.")
    from ember.lax.control_flow.while_loop import while_loop
    if lower_dtype != dtype:
        lower = _convert(lower, dtype)
    if upper_dtype != dtype:
        upper = _convert(upper, dtype)

    def cond(carry):
        from ember.lax.elementwise import lt
        return lt(carry[0], carry[1])

    def body(carry):
        i, hi, x = carry
        return i + 1, hi, body_fun(i, x)

    return while_loop(cond, body, (lower, upper, init_val))[2]


# --------------------------------------------------------------------------- abstract eval


def _scan_abstract_eval(*avals, reverse, length, jaxpr, num_consts, num_carry, unroll):
    in_avals = jaxpr.in_avals
    if len(avals) != len(in_avals):
        raise TypeError(f"scan: {len(avals)} operands for a body of {len(in_avals)} inputs")
    n_head = num_consts + num_carry
    for i, (got, want) in enumerate(zip(avals, in_avals)):
        expect = want if i < n_head else _stacked_aval(length, want)
        if not _typematch(got, expect):
            raise TypeError(f"scan: operand {i} has type {got.str_short()}, the body expects "
                            f"{expect.str_short()}")
    outs = jaxpr.out_avals
    for a, o in zip(avals[num_consts:n_head], outs[:num_carry]):
        if not _typematch(a, o):
            raise TypeError(f"scan: carry input {a.str_short()} and output {o.str_short()} "
                            "differ")
    return [*outs[:num_carry], *[_stacked_aval(length, a) for a in outs[num_carry:]]]


scan_p.def_abstract_eval(_scan_abstract_eval)
scan_p.pp_param_order = ("jaxpr", "length", "num_carry", "num_consts", "reverse", "unroll")


# --------------------------------------------------------------------------- eager impl


def _scan_impl(*values, reverse, length, jaxpr, num_consts, num_carry, unroll):
    # Values arrive as NumPy arrays: each is rewrapped with the body's aval (weak types
    # included, so promotion inside the body is as traced) and the body runs op by op. A scan
    # that has run long enough op by op, over its calls, runs compiled (``eager_loops``).
    params = dict(reverse=reverse, length=length, jaxpr=jaxpr, num_consts=num_consts,
                  num_carry=num_carry, unroll=unroll)
    in_avals = jaxpr.in_avals
    n_head = num_consts + num_carry
    stacked = [a.update(shape=(length, *a.shape)) for a in in_avals[n_head:]]
    ys_avals = [a.update(shape=(length, *a.shape)) for a in jaxpr.out_avals[num_carry:]]
    loop = EagerLoop(scan_p, params, [*in_avals[:n_head], *stacked],
                     [*jaxpr.out_avals[:num_carry], *ys_avals])
    exe = loop.compiled()
    if exe is not None:
        return exe.execute_values([np.asarray(v) for v in values])
    head = [core.concrete_array(np.asarray(v), a) for v, a in zip(values[:n_head], in_avals)]
    consts, carry = head[:num_consts], head[num_consts:]
    xs = [np.asarray(v) for v in values[n_head:]]
    x_avals = in_avals[n_head:]
    ys = [np.empty((length, *a.shape), a.dtype) for a in jaxpr.out_avals[num_carry:]]
    for step in range(length):
        i = length - 1 - step if reverse else step
        x = [core.concrete_array(np.asarray(v[i]), a) for v, a in zip(xs, x_avals)]
        outs = eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *consts, *carry, *x)
        carry = outs[:num_carry]
        for buf, y in zip(ys, outs[num_carry:]):
            buf[i] = np.asarray(y)
    loop.finished_op_by_op()
    return [*[np.asarray(c) for c in carry], *ys]


scan_p.def_impl(_scan_impl)


# --------------------------------------------------------------------------- lowering


def _scan_lowering(ctx, *args, reverse, length, jaxpr, num_consts, num_carry, unroll):
    from ember.lax.elementwise import add, lt, sub
    from ember.lax.slicing import dynamic_index_in_dim, dynamic_update_index_in_dim
    consts, init, xs = _split(list(args), [num_consts, num_carry])
    y_avals = jaxpr.out_avals[num_carry:]
    if length == 0:  # (no trip: the body would slice empty arrays)
        bufs = [ctx.constant(np.zeros((0, *a.shape)), a.dtype) for a in y_avals]
        return [*init, *bufs]
    n_xs = len(xs)
    counter = core.ShapedArray((), np.int32)
    state_avals = [counter, *ctx.avals_in[:num_consts + num_carry + n_xs],
                   *[_stacked_aval(length, a) for a in y_avals]]

    def body(i, *state):
        c, carry, x, bufs = _split(state, [num_consts, num_carry, n_xs])
        idx = sub(np.int32(length - 1), i) if reverse else i
        sl = [dynamic_index_in_dim(v, idx, 0, keepdims=False) for v in x]
        outs = eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *c, *carry, *sl)
        bufs = [dynamic_update_index_in_dim(b, y, idx, 0)
                for b, y in zip(bufs, outs[num_carry:])]
        return [add(i, np.int32(1)), *c, *outs[:num_carry], *x, *bufs]

    body_closed, _ = pe.trace_to_jaxpr(body, state_avals)
    cond_closed, _ = pe.trace_to_jaxpr(lambda i, *_: [lt(i, np.int32(length))], state_avals)
    zero = ctx.constant(0, np.int32)
    bufs = [ctx.b.op("broadcast_in_dim", ctx.constant(0, a.dtype),
                     shape=Shape(a.dtype, (length, *a.shape)), broadcast_dimensions=())
            for a in y_avals]
    loop = ctx.b.op("while", zero, *consts, *init, *xs, *bufs,
                    calls=[lower_to_computation(ctx, cond_closed, "scan_cond",
                                                tuple_result=False),
                           lower_to_computation(ctx, body_closed, "scan_body")])
    first = 1 + num_consts
    picks = [*range(first, first + num_carry),
             *range(first + num_carry + n_xs, first + num_carry + n_xs + len(y_avals))]
    return [ctx.b.op("get_tuple_element", loop, index=k) for k in picks]


scan_p.def_lowering(_scan_lowering)


# --------------------------------------------------------------------------- forward mode


def _scan_jvp(primals, tangents, *, reverse, length, jaxpr, num_consts, num_carry, unroll):
    nonzeros = [type(t) is not ad.Zero for t in tangents]
    const_nz, init_nz, xs_nz = _split(nonzeros, [num_consts, num_carry])
    inexact = [dtypes.is_inexact(a.dtype) for a in jaxpr.in_avals[num_consts:][:num_carry]]
    carry_nz = [nz and ok for nz, ok in zip(init_nz, inexact)]
    num_ys = len(jaxpr.out_avals) - num_carry
    # Fixed point: a carry has a tangent if its init has one or the body gives it one.
    while True:
        jvp_closed, out_nz = ad.jvp_jaxpr(jaxpr, const_nz + carry_nz + xs_nz,
                                          instantiate=carry_nz + [False] * num_ys)
        new = [(c or o) and ok for c, o, ok in zip(carry_nz, out_nz[:num_carry], inexact)]
        if new == carry_nz:
            break
        carry_nz = new
    ys_nz = out_nz[num_carry:]
    # The JVP jaxpr takes (primals, nonzero tangents) and returns (primal outs, nonzero
    # tangent outs); the scan body needs consts, carries and xs each with their tangents.
    n_in = len(nonzeros)
    in_nz = const_nz + carry_nz + xs_nz
    t_pos, k = [], n_in
    for nz in in_nz:
        t_pos.append(k if nz else None)
        k += nz
    order = []
    for lo, hi in ((0, num_consts), (num_consts, num_consts + num_carry),
                   (num_consts + num_carry, n_in)):
        order += list(range(lo, hi)) + [t_pos[i] for i in range(lo, hi) if in_nz[i]]
    n_out = len(jaxpr.out_avals)
    out_t_pos, k = [], n_out
    for nz in carry_nz + ys_nz:
        out_t_pos.append(k if nz else None)
        k += nz
    out_order = (list(range(num_carry)) + [p for p in out_t_pos[:num_carry] if p is not None]
                 + list(range(num_carry, n_out))
                 + [p for p in out_t_pos[num_carry:] if p is not None])
    body = _permute_outputs(_permute_inputs(jvp_closed, order), out_order)

    consts, init, xs = _split(list(primals), [num_consts, num_carry])
    t_consts, t_init, t_xs = _split(list(tangents), [num_consts, num_carry])
    ops = [*consts, *[t for t, nz in zip(t_consts, const_nz) if nz],
           *init, *[ad.instantiate_zeros(t) for t, nz in zip(t_init, carry_nz) if nz],
           *xs, *[t for t, nz in zip(t_xs, xs_nz) if nz]]
    n_ct = sum(carry_nz)
    outs = scan_p.bind(*ops, reverse=reverse, length=length, jaxpr=body,
                       num_consts=num_consts + sum(const_nz), num_carry=num_carry + n_ct,
                       unroll=unroll)
    carry_out, carry_t, ys, ys_t = _split(outs, [num_carry, n_ct, num_ys])
    primals_out = carry_out + ys
    it = iter(carry_t + ys_t)
    out_avals = _scan_abstract_eval(*[core.get_aval(p) for p in primals], reverse=reverse,
                                    length=length, jaxpr=jaxpr, num_consts=num_consts,
                                    num_carry=num_carry, unroll=unroll)
    tangents_out = [next(it) if nz else ad.Zero(ad.tangent_aval(a))
                    for nz, a in zip(carry_nz + ys_nz, out_avals)]
    return primals_out, tangents_out


scan_p.def_jvp(_scan_jvp)


# --------------------------------------------------------------------------- partial eval


def _scan_partial_eval(trace: pe.PartialEvalTrace, args: Sequence[Any], params: dict) -> list:
    jaxpr, num_consts, num_carry = params["jaxpr"], params["num_consts"], params["num_carry"]
    length = params["length"]
    unknowns = [trace.is_unknown(x) for x in args]
    const_uk, init_uk, xs_uk = _split(unknowns, [num_consts, num_carry])
    num_ys = len(jaxpr.out_avals) - num_carry
    carry_uk = list(init_uk)
    while True:  # fixed point: a carry is unknown if its init or its body output is
        known, unknown, out_uk, num_res = pe.partial_eval_jaxpr(
            jaxpr, const_uk + carry_uk + xs_uk, instantiate=carry_uk + [False] * num_ys)
        new = [c or o for c, o in zip(carry_uk, out_uk[:num_carry])]
        if new == carry_uk:
            break
        carry_uk = new
    consts, init, xs = _split(list(args), [num_consts, num_carry])
    k_consts = [x for x, u in zip(consts, const_uk) if not u]
    k_init = [x for x, u in zip(init, carry_uk) if not u]
    k_xs = [x for x, u in zip(xs, xs_uk) if not u]
    n_kc, n_kcarry, n_kys = len(k_consts), len(k_init), out_uk[num_carry:].count(False)
    n_kout = n_kcarry + n_kys
    # Residuals that depend only on known consts are loop-invariant: split the known body
    # again (consts known, the rest unknown) and compute those once, before the loop.
    hoist, body_k, res_uk, _ = pe.partial_eval_jaxpr(
        known, [False] * n_kc + [True] * (len(known.in_avals) - n_kc),
        instantiate=[True] * n_kout + [False] * num_res)
    # A residual that is a known x is that x: the known scan need not stack a copy (as JAX).
    bk = body_k.jaxpr
    x_pos = {v.id: k for k, v in enumerate(bk.invars[len(bk.invars) - len(k_xs):])}
    res_fwd = [x_pos.get(getattr(o, "id", None)) for o in bk.outvars[n_kout:]]
    if any(f is not None for f in res_fwd):
        outvars = bk.outvars[:n_kout] + [o for o, f in zip(bk.outvars[n_kout:], res_fwd)
                                         if f is None]
        body_k = ClosedJaxpr(Jaxpr(bk.constvars, bk.invars, outvars, bk.eqns), body_k.consts)
    with core.set_current_trace(trace.parent):
        hoisted = eval_jaxpr(hoist.jaxpr, hoist.consts, *k_consts)
        n_inv = res_uk[n_kout:].count(False)
        inv_res, body_k_consts = hoisted[:n_inv], hoisted[n_inv:]
        known_outs = scan_p.bind(*body_k_consts, *k_init, *k_xs, reverse=params["reverse"],
                                 length=length, jaxpr=body_k, num_consts=len(body_k_consts),
                                 num_carry=n_kcarry, unroll=params["unroll"])
    stacked = iter(known_outs[n_kout:])
    var_res = [next(stacked) if f is None else k_xs[f] for f in res_fwd]
    # The unknown body takes (residuals, unknown consts, carries, xs): invariant residuals
    # join its consts, the stacked ones its xs.
    inv_pos = [i for i, u in enumerate(res_uk[n_kout:]) if not u]
    var_pos = [i for i, u in enumerate(res_uk[n_kout:]) if u]
    n_uc, n_ucarry = sum(const_uk), sum(carry_uk)
    ins = list(range(num_res, len(unknown.in_avals)))
    order = (inv_pos + ins[:n_uc + n_ucarry] + var_pos + ins[n_uc + n_ucarry:])
    body_u = _permute_inputs(unknown, order)
    u_ops = [*inv_res, *[x for x, u in zip(consts, const_uk) if u],
             *[x for x, u in zip(init, carry_uk) if u], *var_res,
             *[x for x, u in zip(xs, xs_uk) if u]]
    unknown_outs = trace.stage(scan_p, u_ops, dict(
        params, jaxpr=body_u, num_consts=len(inv_res) + n_uc, num_carry=n_ucarry))
    k, u = iter(known_outs[:n_kout]), iter(unknown_outs)
    return [next(u) if uk else next(k) for uk in carry_uk + out_uk[num_carry:]]


pe.partial_eval_rules[scan_p] = _scan_partial_eval


# --------------------------------------------------------------------------- transposition


def _scan_transpose(cts, *args, reverse, length, jaxpr, num_consts, num_carry, unroll):
    # Carries are linear (a carry fed a known zero is transposed all the same); consts and
    # xs that are not UndefinedPrimal are residuals. The transposed scan runs the other way:
    # consts' cotangents accumulate in its carry beside the carries' cotangents, and the xs'
    # cotangents are its ys.
    consts, init, xs = _split(list(args), [num_consts, num_carry])
    c_lin = [ad.is_undefined_primal(x) for x in consts]
    x_lin = [ad.is_undefined_primal(x) for x in xs]
    ct_carry, ct_ys = cts[:num_carry], cts[num_carry:]
    if all(type(c) is ad.Zero for c in cts):
        return [ad.Zero(x.aval) if ad.is_undefined_primal(x) else None for x in args]
    ys_nz = [type(c) is not ad.Zero for c in ct_ys]
    linear = c_lin + [True] * num_carry + x_lin
    t_body = ad.transpose_jaxpr(jaxpr, linear, [True] * num_carry + ys_nz)
    res_c = [x for x, lin in zip(consts, c_lin) if not lin]
    res_x = [x for x, lin in zip(xs, x_lin) if not lin]
    in_avals = jaxpr.in_avals
    lc_avals = [ad.tangent_aval(a) for a, lin in zip(in_avals[:num_consts], c_lin) if lin]
    carry_ct_avals = [ad.tangent_aval(a) for a in jaxpr.out_avals[:num_carry]]
    ys_ct_avals = [ad.tangent_aval(a) for a, nz in zip(jaxpr.out_avals[num_carry:], ys_nz)
                   if nz]
    rx_avals = [a for a, lin in zip(in_avals[num_consts + num_carry:], x_lin) if not lin]
    n_rc, n_lc, n_rx = len(res_c), len(lc_avals), len(rx_avals)

    def body(*a):
        rc, acc, ct_c, rx, ct_y = _split(a, [n_rc, n_lc, num_carry, n_rx])
        outs = eval_jaxpr(t_body.jaxpr, t_body.consts, *rc, *rx, *ct_c, *ct_y)
        ct_lc, ct_init, ct_lx = _split(outs, [n_lc, num_carry])
        return [*[ad.add_jaxvals(s, c) for s, c in zip(acc, ct_lc)], *ct_init, *ct_lx]

    body_avals = [*[core.get_aval(x) for x in res_c], *lc_avals, *carry_ct_avals,
                  *[_slice_aval(core.get_aval(x)) for x in res_x], *ys_ct_avals]
    t_closed, _ = pe.trace_to_jaxpr(body, body_avals)
    outs = scan_p.bind(*res_c, *[ad.instantiate_zeros(ad.Zero(a)) for a in lc_avals],
                       *[ad.instantiate_zeros(c) for c in ct_carry], *res_x,
                       *[c for c in ct_ys if type(c) is not ad.Zero],
                       reverse=not reverse, length=length, jaxpr=t_closed, num_consts=n_rc,
                       num_carry=n_lc + num_carry, unroll=unroll)
    ct_lc, ct_init, ct_lx = _split(outs, [n_lc, num_carry])
    it_c, it_x = iter(ct_lc), iter(ct_lx)
    return ([next(it_c) if lin else None for lin in c_lin]
            + [c if ad.is_undefined_primal(x) else None for x, c in zip(init, ct_init)]
            + [next(it_x) if lin else None for lin in x_lin])


scan_p.def_transpose(_scan_transpose)


# --------------------------------------------------------------------------- batching


def _scan_batch(vals, dims, *, reverse, length, jaxpr, num_consts, num_carry, unroll):
    # Batched consts and carries get their batch axis at 0, batched xs at 1 (so each slice
    # has it at 0); a carry is batched if its init or its body output is (a fixed point).
    size = batching.axis_size_of(vals, dims)
    const_b, init_b, xs_b = _split([d is not None for d in dims], [num_consts, num_carry])
    num_ys = len(jaxpr.out_avals) - num_carry
    carry_b = list(init_b)
    while True:
        in_dims = [0 if b else None for b in const_b + carry_b + xs_b]
        _, out_dims = batching.batch_jaxpr(jaxpr, size, in_dims)
        new = [c or d is not None for c, d in zip(carry_b, out_dims[:num_carry])]
        if new == carry_b:
            break
        carry_b = new
    ys_b = [d is not None for d in out_dims[num_carry:]]
    spec = [0 if b else None for b in carry_b + ys_b]
    batched, _ = batching.batch_jaxpr(jaxpr, size, in_dims, out_dims=spec)
    consts, init, xs = _split(list(zip(vals, dims)), [num_consts, num_carry])
    ops = ([batching.match_dim(v, d, 0, size) if d is not None else v for v, d in consts]
           + [batching.match_dim(v, d, 0, size) if b else v for (v, d), b in zip(init, carry_b)]
           + [batching.match_dim(v, d, 1, size) if d is not None else v for v, d in xs])
    outs = scan_p.bind(*ops, reverse=reverse, length=length, jaxpr=batched,
                       num_consts=num_consts, num_carry=num_carry, unroll=unroll)
    out_dims = [0 if b else None for b in carry_b] + [1 if b else None for b in ys_b]
    assert len(out_dims) == num_carry + num_ys
    return outs, out_dims


scan_p.def_batching(_scan_batch)


# --------------------------------------------------------------------------- DCE


def _scan_dce(used_outputs: Sequence[bool], eqn: Any) -> tuple[list[bool], Any]:
    # Fixed point: a carry stays if its output is used or the body needs it for something
    # kept. Unused ys, consts and xs go.
    p = eqn.params
    jaxpr, num_consts, num_carry = p["jaxpr"], p["num_consts"], p["num_carry"]
    used_carry, used_ys = list(used_outputs[:num_carry]), list(used_outputs[num_carry:])
    while True:
        body, used_in = pe.dce_jaxpr(jaxpr, used_carry + used_ys)
        new = [u or b for u, b in zip(used_carry, used_in[num_consts:num_consts + num_carry])]
        if new == used_carry:
            break
        used_carry = new
    keep = (used_in[:num_consts] + used_carry + used_in[num_consts + num_carry:])
    j = body.jaxpr
    body = ClosedJaxpr(Jaxpr(j.constvars, [v for v, k in zip(j.invars, keep) if k], j.outvars,
                             j.eqns), body.consts)
    outvars = [v for v, u in zip(eqn.outvars, used_carry + used_ys) if u]
    new_eqn = eqn.replace(
        invars=[a for a, k in zip(eqn.invars, keep) if k], outvars=outvars,
        params=dict(p, jaxpr=body, num_consts=sum(used_in[:num_consts]),
                    num_carry=sum(used_carry)))
    return [True] * len(new_eqn.invars), new_eqn


pe.dce_rules[scan_p] = _scan_dce
