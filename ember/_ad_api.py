"""Autodiff transformations: jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev, hessian.

All work on pytrees and compose with each other and with jit to any order: forward mode runs
a JVP trace (``ember.interpreters.ad``); reverse mode linearizes (jvp + partial evaluation)
and transposes the linear jaxpr. Re-exported by ``ember.api`` and ``ember``.

Example:
    >>> f = lambda x: -2 * jnp.sin(x) + x
    >>> ember.grad(f)(3.0)
    Array(2.979985, dtype=float32, weak_type=True)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import _pytree, core, dtypes
from ember.interpreters import ad

# --------------------------------------------------------------------------- helpers


def _flatten_fun(fun: Callable, in_tree: Any, has_aux: bool = False):
    """``fun`` on flat leaves; the output tree (and aux) land in the returned store."""
    store: dict[str, Any] = {}

    def flat_fun(*leaves):
        out = fun(*_pytree.tree_unflatten(in_tree, list(leaves)))
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError("has_aux=True requires the function to return a pair "
                                f"(output, aux); got {_type_desc(out)}")
            out, aux = out
            store["aux"] = aux
        out_flat, store["out_tree"] = _pytree.tree_flatten(out)
        for x in out_flat:
            if not core.valid_jaxtype(x):
                raise TypeError(f"Argument {x!r} of type {type(x)} is not a valid JAX type")
        return out_flat

    return flat_fun, store


def _type_desc(x: Any) -> str:
    return f"{type(x).__name__} {x!r}"[:200]


def _aux_primal(aux: Any) -> Any:
    # aux outputs of a transformed function are not differentiated: keep their primal part.
    def strip(x):
        while type(x) is ad.JVPTracer and not x._trace.alive:
            x = x.primal
        return x
    return _pytree.tree_map(strip, aux)


def _argnums_tuple(argnums: int | Sequence[int], fn: str) -> tuple[int, ...]:
    if isinstance(argnums, (int, np.integer)) and not isinstance(argnums, bool):
        return (int(argnums),)
    try:
        nums = tuple(argnums)
    except TypeError:
        raise TypeError(f"{fn}: argnums must be an int or a sequence of ints, got "
                        f"{argnums!r}") from None
    if not nums or not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool)
                           for i in nums):
        raise TypeError(f"{fn}: argnums must be an int or a non-empty sequence of ints, got "
                        f"{argnums!r}")
    return tuple(int(i) for i in nums)


def _split_args(fun: Callable, args: tuple, kwargs: dict, argnums: int | Sequence[int],
                fn: str) -> tuple[Callable, tuple]:
    """``fun`` as a function of the arguments at ``argnums`` only, and those arguments."""
    nums = _argnums_tuple(argnums, fn)
    n = len(args)
    for i in nums:
        if i >= n or i < -n:
            raise TypeError(f"differentiating with respect to argnums={argnums} requires at "
                            f"least {max(nums) + 1} positional arguments to be passed by the "
                            f"caller, but got only {n} positional arguments.")
    nums = tuple(i % n for i in nums)

    def partial_fun(*dyn):
        full = list(args)
        for i, v in zip(nums, dyn):
            full[i] = v
        return fun(*full, **kwargs)

    return partial_fun, tuple(args[i] for i in nums)


def _dtype_of(x: Any) -> np.dtype:
    return core.get_aval(x).dtype


# --------------------------------------------------------------------------- jvp, linearize


def jvp(fun: Callable, primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: bool = False) -> tuple:
    """Forward-mode derivative: ``fun``'s outputs and their tangents along ``tangents``.

    ``primals`` and ``tangents`` are tuples (or lists) of pytrees of the same structure,
    shapes and dtypes; integer and boolean primals take ``float0`` tangents.

    Example:
        >>> ember.jvp(jnp.sin, (0.0,), (2.0,))
        (Array(0., dtype=float32, weak_type=True), Array(2., dtype=float32, weak_type=True))
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("primal and tangent arguments to jax.jvp must be tuples or lists; "
                        f"found {type(primals).__name__} and {type(tangents).__name__}.")
    p_flat, p_tree = _pytree.tree_flatten(tuple(primals))
    t_flat, t_tree = _pytree.tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise TypeError("primal and tangent arguments to jax.jvp must have the same tree "
                        f"structure; primals have tree structure {p_tree} whereas tangents "
                        f"have tree structure {t_tree}.")
    for p, t in zip(p_flat, t_flat):
        _check_tangent(core.get_aval(p), t)
    flat_fun, store = _flatten_fun(lambda *a: fun(*a), p_tree, has_aux)
    outs, touts = ad.jvp_flat(flat_fun, p_flat, t_flat)
    touts = [ad.instantiate_zeros(t) for t in touts]
    out_tree = store["out_tree"]
    result = (_pytree.tree_unflatten(out_tree, outs), _pytree.tree_unflatten(out_tree, touts))
    if has_aux:
        return (*result, _aux_primal(store["aux"]))
    return result


def _check_tangent(p_aval: core.ShapedArray, t: Any) -> None:
    t_aval = core.get_aval(t)
    if p_aval.shape != t_aval.shape:
        raise ValueError("jvp called with different primal and tangent shapes;Got primal "
                         f"shape {p_aval.shape} and tangent shape as {t_aval.shape}")
    expected = ad.tangent_aval(p_aval).dtype
    if t_aval.dtype != expected:
        expected_name = "float0" if expected == dtypes.float0 else expected.name
        got_name = "float0" if t_aval.dtype == dtypes.float0 else t_aval.dtype.name
        raise TypeError("primal and tangent arguments to jax.jvp do not match; dtypes must be "
                        "equal, or in case of int/bool primal dtype the tangent dtype must be "
                        f"float0.Got primal dtype {p_aval.dtype.name} and so expected tangent "
                        f"dtype {expected_name}, but got tangent dtype {got_name} instead.")


def linearize(fun: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """``fun``'s outputs at ``primals`` and its linear approximation there (a function).

    The primal computation runs once; calling the returned function evaluates only the
    saved linear jaxpr.

    Example:
        >>> y, f_jvp = ember.linearize(jnp.sin, 0.0)
        >>> f_jvp(2.0)
        Array(2., dtype=float32, weak_type=True)
    """
    return _linearize(fun, primals, has_aux, forward_only=False)


def _linearize(fun: Callable, primals: tuple, has_aux: bool, forward_only: bool) -> tuple:
    """``linearize``; ``forward_only``: for ``jacfwd``, which uses only the linear map, so
    a function whose linearization leaves its primal outputs unknown is fine."""
    p_flat, p_tree = _pytree.tree_flatten(primals)
    flat_fun, store = _flatten_fun(fun, p_tree, has_aux)
    outs, lin = ad.linearize_flat(flat_fun, p_flat)
    if not forward_only:
        lin.check_primals_known()
    out_tree = store["out_tree"]
    p_avals = [core.get_aval(p) for p in p_flat]
    f_jvp = _residual_partial(_linearized_jvp, lin, p_avals, p_tree, out_tree)
    out = _pytree.tree_unflatten(out_tree, outs)
    return (out, f_jvp, _aux_primal(store["aux"])) if has_aux else (out, f_jvp)


def _residual_partial(fn: Callable, lin: ad.Linearized, *static: Any) -> _pytree.Partial:
    """``fn(lin, *static, *args)`` as a ``_pytree.Partial`` whose leaves are ``lin``'s
    residuals, like the functions JAX's vjp and linearize return: being pytrees, they can
    be returned from ``jit`` or kept as a custom_vjp residual (the residuals then come back
    as that transformation's values; ``lin`` is rebuilt around them)."""
    residuals = list(lin.jaxpr.consts)
    bare = lin.with_residuals([None] * len(residuals))  # static: keeps no values alive
    return _pytree.Partial(functools.partial(_with_residuals, fn, bare, static), residuals)


def _with_residuals(fn: Callable, bare: ad.Linearized, static: tuple, residuals: list,
                    *args: Any) -> Any:
    return fn(bare.with_residuals(residuals), *static, *args)


def _linearized_jvp(lin: ad.Linearized, p_avals: list, p_tree: Any, out_tree: Any,
                    *tangents: Any) -> Any:
    t_flat, t_tree = _pytree.tree_flatten(tangents)
    if t_tree != p_tree:
        raise TypeError(f"linearized function: expected tangents of structure {p_tree}, "
                        f"got {t_tree}")
    for p, t in zip(p_avals, t_flat):
        _check_tangent(p, t)
    return _pytree.tree_unflatten(out_tree, lin.jvp(t_flat))


# --------------------------------------------------------------------------- vjp


def vjp(fun: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """Reverse-mode derivative: ``fun``'s outputs and a function pulling cotangents back.

    ``vjp_fun(ct)`` takes a cotangent shaped like the outputs and returns a tuple with one
    cotangent per primal (``float0`` zeros for integer primals).

    Example:
        >>> y, f_vjp = ember.vjp(jnp.sin, 0.0)
        >>> f_vjp(1.0)
        (Array(1., dtype=float32, weak_type=True),)
    """
    p_flat, p_tree = _pytree.tree_flatten(primals)
    p_flat = [_typed_primal(p) for p in p_flat]
    flat_fun, store = _flatten_fun(fun, p_tree, has_aux)
    outs, lin = ad.linearize_flat(flat_fun, p_flat)
    lin.check_primals_known()
    out_tree = store["out_tree"]
    out_avals = [core.get_aval(o) for o in outs]
    vjp_fun = _residual_partial(_vjp_pullback, lin, p_tree, out_tree, out_avals)
    out = _pytree.tree_unflatten(out_tree, outs)
    return (out, vjp_fun, _aux_primal(store["aux"])) if has_aux else (out, vjp_fun)


def linear_transpose(fun: Callable, *primals: Any, reduce_axes: tuple = ()) -> Callable:
    """The transpose of ``fun``, a function promised to be linear, as ``jax.linear_transpose``.

    ``primals`` (arrays, or anything with ``shape`` and ``dtype`` such as
    ``ShapeDtypeStruct``, in pytrees) give the argument types. The transposed function takes
    a cotangent shaped like ``fun``'s output and returns a tuple shaped like ``primals``,
    cast to their dtypes. For a linear function this is its ``vjp``; as in JAX, ``fun`` is
    traced and its jaxpr transposed (so a non-linear operation raises), and the types are
    all floating or complex, or all integers.

    Example:
        >>> f_t = ember.linear_transpose(lambda x: 3.0 * x, 1.0)
        >>> f_t(1.0)
        (Array(3., dtype=float32, weak_type=True),)
    """
    if reduce_axes:
        raise NotImplementedError("linear_transpose: reduce_axes is not supported")
    from ember.interpreters import partial_eval as pe
    p_flat, p_tree = _pytree.tree_flatten(primals)
    avals = [core.get_aval(p) if not hasattr(p, "dtype") or hasattr(p, "aval") else
             core.ShapedArray(tuple(np.shape(p)), dtypes.canonicalize_dtype(p.dtype))
             for p in p_flat]
    out_store = {}

    def flat_fun(*args):
        out_flat, out_store["tree"] = _pytree.tree_flatten(
            fun(*_pytree.tree_unflatten(p_tree, list(args))))
        return out_flat

    # As JAX: ``fun`` traced with every input unknown; its jaxpr transposed as it is (a
    # non-linear operation on an input has no transpose rule and raises).
    closed, _ = pe.trace_to_jaxpr(flat_fun, avals)
    out_tree = out_store["tree"]
    out_avals = closed.out_avals
    kinds = [a.dtype for a in avals + list(out_avals)]
    if not (all(dtypes.is_inexact(d) for d in kinds)
            or all(np.issubdtype(d, np.integer) for d in kinds)):
        raise TypeError(
            "linear_transpose only supports [float or complex] -> [float or complex], and "
            f"integer -> integer functions, but got {[a.dtype for a in avals]} -> "
            f"{[a.dtype for a in out_avals]}.")

    def transposed(out_cotangent: Any) -> tuple:
        ct_flat, ct_tree = _pytree.tree_flatten(out_cotangent)
        if ct_tree != out_tree:  # (TypeErrors here, as in JAX; vjp's pullback raises ValueError)
            raise TypeError(f"cotangent tree does not match function output, expected "
                            f"{out_tree} but got {ct_tree}")
        if any(core.get_aval(c).shape != a.shape or core.get_aval(c).dtype != a.dtype
               for c, a in zip(ct_flat, out_avals)):
            raise TypeError(f"cotangent type does not match function output, expected "
                            f"{list(out_avals)} but got {ct_flat}")
        cts = ad.backward_pass(closed.jaxpr, closed.consts,
                               [ad.UndefinedPrimal(a) for a in avals], ct_flat)
        cts = [_cast(ad.instantiate_zeros(c), a.dtype) for c, a in zip(cts, avals)]
        return tuple(_pytree.tree_unflatten(p_tree, cts))

    return transposed


def _cast(x: Any, dtype: np.dtype) -> Any:
    from ember import lax
    return lax.convert_element_type(x, dtype) if core.get_aval(x).dtype != dtype else x


def _vjp_pullback(lin: ad.Linearized, p_tree: Any, out_tree: Any, out_avals: list,
                  ct: Any) -> tuple:
    ct_flat, ct_tree = _pytree.tree_flatten(ct)
    if ct_tree != out_tree:  # (a ValueError, as in JAX)
        raise ValueError(f"Tree structure of cotangent input {ct_tree}, does not match "
                        f"structure of primal output {out_tree}.")
    for c, a in zip(ct_flat, out_avals):
        c_aval = core.get_aval(c)
        expected = ad.tangent_aval(a)
        if c_aval.shape != a.shape or (c_aval.dtype != expected.dtype
                                       and expected.dtype != dtypes.float0):
            raise ValueError(
                "unexpected JAX type (e.g. shape/dtype) for argument to VJP function: got "
                f"{_jax_type(c_aval)}, but expected {_jax_type(expected)} because the "
                "corresponding output of the differentiated function had JAX type "
                f"{_jax_type(a)}")
    cts = lin.transpose(ct_flat)
    out = _pytree.tree_unflatten(p_tree, cts)
    # (a key array's data takes float0 cotangents: only then can the tree hold key arrays)
    return _key_cotangents(out) if any(c.dtype == dtypes.float0 for c in cts) else out


def _key_cotangents(tree: Any) -> Any:
    """``tree`` with each typed key array (which holds the float0 cotangents of its key data)
    replaced by float0 zeros of the keys' shape: JAX's cotangent type of a key array."""
    from ember.random.key_array import is_typed_key

    def fix(x: Any) -> Any:
        return np.zeros(x.shape, dtypes.float0) if is_typed_key(x) else x
    return _pytree.tree_map(fix, tree, is_leaf=is_typed_key)


def _typed_primal(x: Any) -> Any:
    """A Python scalar or NumPy primal as an array of its canonical dtype (weak for Python
    scalars). JAX's vjp canonicalizes its primals the same way (to its TypedFloat and
    TypedNdArray), so ``custom_jvp``/``custom_vjp`` rules see values with a ``.dtype``."""
    if isinstance(x, (int, float, complex, np.ndarray, np.generic)) and \
            not isinstance(x, (bool, np.bool_)):
        aval = core.get_aval(x)
        # (A copy: the array made here is frozen, and must not be the caller's.)
        return core.concrete_array(np.array(x, aval.dtype), aval)
    return x


def _jax_type(aval: core.ShapedArray) -> str:
    name = "float0" if aval.dtype == dtypes.float0 else aval.dtype.name
    return f"{name}[{','.join(str(d) for d in aval.shape)}]"


# --------------------------------------------------------------------------- grad


def _check_grad_inputs(fn: str, dyn_args: tuple, holomorphic: bool, allow_int: bool) -> None:
    for x in _pytree.tree_leaves(dyn_args):
        dt = _dtype_of(x)
        if holomorphic:
            if not dtypes.is_complex(dt):
                raise TypeError(f"{fn} with holomorphic=True requires inputs with complex "
                                f"dtype, but got {dt.name}.")
        elif not dtypes.is_inexact(dt) and not allow_int:
            raise TypeError(f"{fn} requires real- or complex-valued inputs (input dtype that "
                            f"is a sub-dtype of np.inexact), but got {dt.name}. If you want "
                            "to use Boolean- or integer-valued inputs, use vjp or set "
                            "allow_int to True.")


def _check_scalar_output(ans: Any, holomorphic: bool) -> None:
    msg = "Gradient only defined for scalar-output functions. Output {}."
    try:
        aval = core.get_aval(ans)
    except TypeError:
        raise TypeError(msg.format(f"was {ans}")) from None
    if aval.shape != ():
        raise TypeError(msg.format(f"had shape: {aval.shape}"))
    _check_rev_output("grad", ans, holomorphic)


def _check_rev_output(fn: str, x: Any, holomorphic: bool) -> None:
    """Reverse mode (grad, jacrev) needs real outputs, or complex ones when holomorphic: a
    cotangent basis of a complex or integer output would not give the Jacobian."""
    dt = _dtype_of(x)
    if holomorphic:
        if not dtypes.is_complex(dt):
            raise TypeError(f"{fn} with holomorphic=True requires outputs with complex dtype, "
                            f"but got {dt.name}.")
    elif dtypes.is_complex(dt):
        raise TypeError(f"{fn} requires real-valued outputs (output dtype that is a sub-dtype "
                        f"of np.floating), but got {dt.name}. For holomorphic differentiation,"
                        " pass holomorphic=True. For differentiation of non-holomorphic "
                        "functions involving complex outputs, use jax.vjp directly.")
    elif not dtypes.is_float(dt):
        raise TypeError(f"{fn} requires real-valued outputs (output dtype that is a sub-dtype "
                        f"of np.floating), but got {dt.name}. For differentiation of "
                        "functions with integer outputs, use jax.vjp directly.")


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False, allow_int: bool = False) -> Callable:
    """A function returning ``fun``'s value and its gradient with respect to ``argnums``.

    ``fun`` must return a real scalar (or ``(scalar, aux)`` with ``has_aux=True``); the
    gradient has the structure of the differentiated arguments (a tuple of them when
    ``argnums`` is a tuple).

    Example:
        >>> ember.value_and_grad(lambda x: x ** 2)(3.0)
        (Array(9., dtype=float32, weak_type=True), Array(6., dtype=float32, weak_type=True))
    """
    if not callable(fun):
        raise TypeError(f"value_and_grad: expected a callable, got {_type_desc(fun)}")
    _argnums_tuple(argnums, "value_and_grad")

    @functools.wraps(fun, updated=())
    def value_and_grad_f(*args: Any, **kwargs: Any) -> tuple:
        f_partial, dyn_args = _split_args(fun, args, kwargs, argnums, "value_and_grad")
        _check_grad_inputs("grad", dyn_args, holomorphic, allow_int)
        if has_aux:
            ans, vjp_fun, aux = vjp(f_partial, *dyn_args, has_aux=True)
        else:
            ans, vjp_fun = vjp(f_partial, *dyn_args)
        _check_scalar_output(ans, holomorphic)
        from ember.lax import full_like
        grads = vjp_fun(full_like(ans, 1))
        g = grads[0] if isinstance(argnums, (int, np.integer)) else grads
        return ((ans, aux), g) if has_aux else (ans, g)

    return value_and_grad_f


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False, allow_int: bool = False) -> Callable:
    """The gradient of a scalar function ``fun`` with respect to the arguments ``argnums``.

    With ``has_aux=True`` ``fun`` returns ``(scalar, aux)`` and the gradient function returns
    ``(gradient, aux)``. ``allow_int=True`` lets integer arguments through (their gradient
    is ``float0`` zeros).

    Example:
        >>> ember.grad(lambda x: -2 * jnp.sin(x) + x)(3.0)
        Array(2.979985, dtype=float32, weak_type=True)
    """
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int)

    @functools.wraps(fun, updated=())
    def grad_f(*args: Any, **kwargs: Any) -> Any:
        return vg(*args, **kwargs)[1]

    @functools.wraps(fun, updated=())
    def grad_f_aux(*args: Any, **kwargs: Any) -> Any:
        (_, aux), g = vg(*args, **kwargs)
        return g, aux

    return grad_f_aux if has_aux else grad_f


# --------------------------------------------------------------------------- jacobians
# A Jacobian is one vmapped pushforward (jacfwd: the linearized function on a batch of
# input basis vectors) or one vmapped pullback (jacrev: the VJP of a batch of output basis
# vectors), as in JAX; the batch is then split into one block per (output, input) leaf pair.


def _std_basis(avals: list, dts: list) -> tuple[list[np.ndarray], list[int]]:
    """The standard basis of the flattened leaves: leaf ``i`` gets an array of shape
    ``(N,) + avals[i].shape`` (``N`` the total size), one-hot in its own block of rows.
    Returns those arrays and the leaves' offsets into the ``N`` rows."""
    sizes = [a.size for a in avals]
    offsets = list(np.cumsum([0] + sizes[:-1])) if sizes else []
    n = sum(sizes)
    basis = []
    for a, dt, off, size in zip(avals, dts, offsets, sizes):
        if dt == dtypes.float0:
            basis.append(np.zeros((n,) + a.shape, dtypes.float0))
            continue
        b = np.zeros((n, size), dt)
        b[np.arange(off, off + size), np.arange(size)] = 1
        basis.append(b.reshape((n,) + a.shape))
    return basis, [int(o) for o in offsets]


def _check_jacfwd_inputs(dyn_args: tuple, holomorphic: bool) -> None:
    # Forward mode pushes a real basis through: complex inputs only when holomorphic.
    # (jacrev checks its inputs as grad does: any inexact input, integers with allow_int.)
    for x in _pytree.tree_leaves(dyn_args):
        dt = _dtype_of(x)
        if holomorphic:
            if not dtypes.is_complex(dt):
                raise TypeError("jacfwd with holomorphic=True requires inputs with complex "
                                f"dtype, but got {dt.name}.")
        elif not dtypes.is_float(dt):
            raise TypeError("jacfwd requires real-valued inputs (input dtype that is a "
                            f"sub-dtype of np.floating), but got {dt.name}. For holomorphic "
                            "differentiation, pass holomorphic=True. For differentiation of "
                            "non-holomorphic functions involving complex inputs or integer "
                            "inputs, use jax.jvp directly.")


def _check_jacfwd_outputs(y: Any, holomorphic: bool) -> None:
    if holomorphic:
        for o in _pytree.tree_leaves(y):
            if not dtypes.is_complex(_dtype_of(o)):
                raise TypeError("jacfwd with holomorphic=True requires outputs with complex "
                                f"dtype, but got {_dtype_of(o).name}.")


def _vmap_rows(fun: Callable, basis: list[np.ndarray], n: int) -> list | None:
    """``fun`` (flat leaves in, flat leaves out) on each of the ``n`` rows of the basis, as
    one vmapped call; each result leaf has the rows along its first axis. None when there
    are no rows (every block of the Jacobian is then empty)."""
    from ember._vmap_api import vmap
    if n == 0:
        return None
    return vmap(lambda *xs: list(fun(*xs)))(*basis)


def _block(rows: Any, offset: int, size: int, out_shape: tuple, in_shape: tuple,
           rows_first: bool, zero_dtype: Any, weak_type: bool = False) -> Any:
    """The block ``out_shape + in_shape`` of rows ``offset:offset+size`` of ``rows``.

    ``rows`` has the basis rows first; for jacfwd (``rows_first=False``) they index the input
    and the rest of the shape is the output's, for jacrev the other way round. ``rows`` is
    None when there are no rows at all, and float0 for integer values (no derivative): the
    block is then zeros of ``zero_dtype``, as in JAX. ``weak_type``: the block is weakly
    typed (as JAX's blocks take the weak type of the value whose shape leads the block: the
    output leaf for jacfwd, the input leaf for jacrev)."""
    import ember.numpy as jnp
    if rows is None or core.get_aval(rows).dtype == dtypes.float0:
        return jnp.zeros(out_shape + in_shape, zero_dtype)
    if offset != 0 or size != core.get_aval(rows).shape[0]:
        rows = rows[offset:offset + size]
    if not rows_first:
        rows = jnp.moveaxis(rows, 0, -1)
    block = jnp.reshape(rows, out_shape + in_shape)
    if weak_type:
        from ember import lax
        block = lax.convert_element_type(block, core.get_aval(block).dtype, True)
    return block


def _jac_result(out_tree: Any, in_tree: Any, blocks: list, argnums: Any, dyn_args: tuple):
    per_out = [_pytree.tree_unflatten(in_tree, row) for row in blocks]
    if isinstance(argnums, (int, np.integer)):
        per_out = [p[0] for p in per_out]
    return _pytree.tree_unflatten(out_tree, per_out)


def jacfwd(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable:
    """The Jacobian of ``fun`` by forward mode: for each output leaf, a pytree (of the
    differentiated arguments' structure) of blocks of shape ``out.shape + in.shape``.

    Example:
        >>> ember.jacfwd(lambda x: x * x)(jnp.array([1.0, 2.0]))
        Array([[2., 0.],
               [0., 4.]], dtype=float32)
    """
    _argnums_tuple(argnums, "jacfwd")

    @functools.wraps(fun, updated=())
    def jacfun(*args: Any, **kwargs: Any) -> Any:
        f_partial, dyn_args = _split_args(fun, args, kwargs, argnums, "jacfwd")
        _check_jacfwd_inputs(dyn_args, holomorphic)
        res = _linearize(f_partial, dyn_args, has_aux, forward_only=True)
        y, f_jvp = res[0], res[1]
        _check_jacfwd_outputs(y, holomorphic)
        in_flat, in_tree = _pytree.tree_flatten(dyn_args)
        out_flat, out_tree = _pytree.tree_flatten(y)
        in_avals = [core.get_aval(x).strip_weak_type() for x in in_flat]
        out_avals = [core.get_aval(o).strip_weak_type() for o in out_flat]
        basis, offsets = _std_basis(in_avals, [a.dtype for a in in_avals])

        def pushforward(*tangents):
            return _pytree.tree_leaves(f_jvp(*_pytree.tree_unflatten(in_tree, tangents)))

        n = sum(a.size for a in in_avals)
        cols = _vmap_rows(pushforward, basis, n)
        out_weak = [core.get_aval(o).weak_type for o in out_flat]
        blocks = [[_block(None if cols is None else cols[k], off, ia.size, oa.shape,
                          ia.shape, rows_first=False, zero_dtype=oa.dtype,
                          weak_type=out_weak[k])
                   for ia, off in zip(in_avals, offsets)]
                  for k, oa in enumerate(out_avals)]
        jac = _jac_result(out_tree, in_tree, blocks, argnums, dyn_args)
        return (jac, res[2]) if has_aux else jac

    return jacfun


def jacrev(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, allow_int: bool = False) -> Callable:
    """The Jacobian of ``fun`` by reverse mode (same layout as ``jacfwd``).

    Example:
        >>> ember.jacrev(lambda x: x * x)(jnp.array([1.0, 2.0]))
        Array([[2., 0.],
               [0., 4.]], dtype=float32)
    """
    _argnums_tuple(argnums, "jacrev")

    @functools.wraps(fun, updated=())
    def jacfun(*args: Any, **kwargs: Any) -> Any:
        f_partial, dyn_args = _split_args(fun, args, kwargs, argnums, "jacrev")
        _check_grad_inputs("jacrev", dyn_args, holomorphic, allow_int)
        res = vjp(f_partial, *dyn_args, has_aux=has_aux)
        y, f_vjp = res[0], res[1]
        for o in _pytree.tree_leaves(y):
            _check_rev_output("jacrev", o, holomorphic)
        in_flat, in_tree = _pytree.tree_flatten(dyn_args)
        out_flat, out_tree = _pytree.tree_flatten(y)
        in_avals = [core.get_aval(x).strip_weak_type() for x in in_flat]
        out_avals = [core.get_aval(o).strip_weak_type() for o in out_flat]
        ct_dtypes = [ad.tangent_aval(a).dtype if dtypes.is_inexact(a.dtype) else a.dtype
                     for a in out_avals]
        basis, offsets = _std_basis(out_avals, ct_dtypes)

        def pullback(*cts):
            return _pytree.tree_leaves(f_vjp(_pytree.tree_unflatten(out_tree, cts)))

        m = sum(a.size for a in out_avals)
        rows = _vmap_rows(pullback, basis, m)
        in_weak = [core.get_aval(x).weak_type for x in in_flat]
        blocks = [[_block(None if rows is None else rows[i], off, oa.size, oa.shape,
                          ia.shape, rows_first=True, zero_dtype=ia.dtype, weak_type=in_weak[i])
                   for i, ia in enumerate(in_avals)]
                  for oa, off in zip(out_avals, offsets)]
        jac = _jac_result(out_tree, in_tree, blocks, argnums, dyn_args)
        return (jac, res[2]) if has_aux else jac

    return jacfun


def hessian(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False) -> Callable:
    """The Hessian of a scalar ``fun``: ``jacfwd(jacrev(fun))``.

    Example:
        >>> ember.hessian(lambda x: jnp.sum(x ** 3))(jnp.array([1.0, 2.0]))
        Array([[ 6.,  0.],
               [ 0., 12.]], dtype=float32)
    """
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic), argnums,
                  has_aux=has_aux, holomorphic=holomorphic)


def fwd_and_bwd(fun: Callable, argnums: int | Sequence[int], has_aux: bool = False,
                jitted: bool = True) -> tuple[Callable, Callable]:
    """``vjp`` split into a forward and a backward function that can be jitted once each.

    ``fwd(*args)`` returns ``(out, residuals)`` (``(out, residuals, aux)`` with ``has_aux``):
    ``fun``'s value and its VJP with respect to the arguments at ``argnums``, as a pytree
    that crosses ``jit``. ``bwd(residuals, cotangent)`` returns the cotangents of those
    arguments (one, for an int ``argnums``; a tuple for a sequence). ``jitted`` (default)
    returns both jitted, so a training loop compiles each once.

    Example:
        >>> fwd, bwd = ember.fwd_and_bwd(lambda x, w: x @ w, argnums=1)
        >>> y, res = fwd(jnp.ones((2, 2)), jnp.eye(2))
        >>> bwd(res, jnp.ones((2, 2)))
        Array([[2., 2.],
               [2., 2.]], dtype=float32)
    """
    if not callable(fun):
        raise TypeError(f"fwd_and_bwd: expected a callable, got {_type_desc(fun)}")
    _argnums_tuple(argnums, "fwd_and_bwd")
    single = isinstance(argnums, (int, np.integer))

    def fwd(*args: Any, **kwargs: Any) -> tuple:
        f_partial, dyn_args = _split_args(fun, args, kwargs, argnums, "fwd_and_bwd")
        return vjp(f_partial, *dyn_args, has_aux=has_aux)

    def bwd(residuals: Any, cotangent: Any) -> Any:
        cts = residuals(cotangent)
        return cts[0] if single else cts

    if jitted:
        from ember.api import jit
        return jit(fwd), jit(bwd)
    return fwd, bwd


__all__ = ["fwd_and_bwd", "grad", "hessian", "jacfwd", "jacrev", "jvp", "linearize",
           "value_and_grad", "vjp"]
