"""custom_linear_solve and custom_root: user-supplied solvers with implicit derivatives.

``custom_linear_solve`` is the primitive ``custom_linear_solve`` holding four jaxprs
(matvec, its transpose vecmat, solve, transpose_solve), each with its constants as leading
operands. Its derivative is implicit: from ``A x = b``, ``A dx = db - dA x``, so the tangent
is one more linear solve with the same operator; the primitive is linear in ``b``, and its
transpose is a solve with the transposed operator (``transpose_solve`` on ``vecmat``).

``custom_root`` is a ``custom_jvp`` function whose rule applies the implicit function
theorem: ``du = -(df/du)^-1 (df/dparams) dparams``, the inverse given by ``tangent_solve``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ember import _pytree, core
from ember.custom_derivatives import custom_jvp
from ember.interpreters import ad, batching
from ember.interpreters import partial_eval as pe
from ember.interpreters.batching import not_mapped
from ember.jaxpr import ClosedJaxpr, Jaxpr, eval_jaxpr
from ember.lax import elementwise as E

__all__ = ["custom_linear_solve", "custom_root"]


def _trace(fun: Callable, avals: list) -> tuple[ClosedJaxpr, list, Any]:
    """``fun`` (flat list in, pytree out) traced; its constants (tracers of an enclosing
    trace included) become leading inputs. Returns the jaxpr, the constants, the out tree."""
    tree_box = []

    def flat_fun(*xs):
        leaves, tree = _pytree.tree_flatten(fun(*xs))
        tree_box.append(tree)
        return leaves

    closed, _ = pe.trace_to_jaxpr(flat_fun, avals)
    j = closed.jaxpr
    jaxpr = ClosedJaxpr(Jaxpr([], j.constvars + j.invars, j.outvars, j.eqns), [])
    return jaxpr, list(closed.consts), tree_box[0]


def _as_fun(closed: ClosedJaxpr) -> Callable:
    return lambda *args: eval_jaxpr(closed.jaxpr, closed.consts, *args)


def _check_tree(fn: str, arg: str, got: Any, want: Any, has_aux: bool) -> None:
    if has_aux:
        if len(got.children()) != 2:
            raise TypeError(f"{fn}() with has_aux=True must return a pair (output, aux), got "
                            f"{got}")
        got = got.children()[0]
    if got != want:
        raise TypeError(f"{fn}() output pytree structure must match {arg}, got {got} and "
                        f"{want}.")


def _check_shapes(fn: str, out_avals: list, b_avals: list) -> None:
    got = [tuple(a.shape) for a in out_avals]
    want = [tuple(a.shape) for a in b_avals]
    if got != want:
        raise ValueError(f"{fn}() output shapes must match b, got {got} and {want}")


# ---------------------------------------------------------------- custom_linear_solve


class _Solve(NamedTuple):
    matvec: Any
    vecmat: Any
    solve: Any
    transpose_solve: Any

    def transpose(self) -> _Solve:
        return _Solve(self.vecmat, self.matvec, self.transpose_solve, self.solve)


def _split(args: Any, lengths: _Solve) -> tuple[_Solve, list]:
    parts, i = [], 0
    for n in lengths:
        parts.append(list(args[i:i + n]))
        i += n
    return _Solve(*parts), list(args[i:])


linear_solve_p = core.MultipleResultsPrimitive("custom_linear_solve")
linear_solve_p.pp_param_order = ("const_lengths", "jaxprs")


def _ls_impl(*args, const_lengths, jaxprs):
    consts, b = _split(args, const_lengths)
    return [np.asarray(o) for o in _as_fun(jaxprs.solve)(*consts.solve, *b)]


def _ls_abstract_eval(*avals, const_lengths, jaxprs):
    _, b = _split(avals, const_lengths)
    return [core.ShapedArray(a.shape, a.dtype, a.weak_type) for a in b] + list(
        jaxprs.solve.out_avals[len(b):])


def _ls_lowering(ctx, *args, const_lengths, jaxprs):
    consts, b = _split(args, const_lengths)
    return ctx.lower_jaxpr(jaxprs.solve.jaxpr, [], [*consts.solve, *b])


def _ls_jvp(primals, tangents, *, const_lengths, jaxprs):
    # A x = b  =>  A dx = db - dA x: one more solve with the same operator.
    params = dict(const_lengths=const_lengths, jaxprs=jaxprs)
    out = linear_solve_p.bind(*primals, **params)
    consts, b = _split(primals, const_lengths)
    consts_dot, b_dot = _split(tangents, const_lengths)
    x = out[:len(b)]
    rhs = [ad.instantiate_zeros(t) for t in b_dot]
    if any(type(t) is not ad.Zero for t in consts_dot.matvec):
        _, dax = ad.jvp_flat(_as_fun(jaxprs.matvec), [*consts.matvec, *x],
                             [*consts_dot.matvec, *[None] * len(x)])
        rhs = [r if type(d) is ad.Zero else E.sub(r, d) for r, d in zip(rhs, dax)]
    dx = linear_solve_p.bind(*[c for cs in consts for c in cs], *rhs, **params)
    aux_dot = [ad.Zero(ad.tangent_aval(core.get_aval(a))) for a in out[len(b):]]
    return out, dx[:len(b)] + aux_dot


def _ls_transpose(cts, *args, const_lengths, jaxprs):
    if jaxprs.transpose_solve is None:
        raise TypeError("transpose_solve required for backwards mode automatic "
                        "differentiation of custom_linear_solve")
    consts, b = _split(args, const_lengths)
    if any(ad.is_undefined_primal(c) for cs in consts for c in cs):
        raise NotImplementedError("custom_linear_solve: cannot transpose with respect to the "
                                  "operator's parameters")
    x_cts = [ad.instantiate_zeros(c) for c in cts[:len(b)]]
    tc = consts.transpose()
    ct_b = linear_solve_p.bind(*[c for cs in tc for c in cs], *x_cts,
                               const_lengths=const_lengths.transpose(),
                               jaxprs=jaxprs.transpose())
    return [None] * sum(const_lengths) + list(ct_b[:len(b)])


def _ls_batch(vals, dims, *, const_lengths, jaxprs):
    # Every b, x and aux is made batched at 0 (simpler than finding the least batched set).
    size = batching.axis_size_of(vals, dims)
    vals = [v if d is not_mapped else batching.match_dim(v, d, 0, size)
            for v, d in zip(vals, dims)]
    dims = [not_mapped if d is not_mapped else 0 for d in dims]
    cdims, bdims = _split(dims, const_lengths)
    consts, b = _split(vals, const_lengths)
    b = [batching.match_dim(v, d, 0, size) for v, d in zip(b, bdims)]
    batched = _Solve(*[None if j is None else batching.batch_jaxpr(
        j, size, list(cd) + [0] * len(b), out_dims=0)[0] for j, cd in zip(jaxprs, cdims)])
    outs = linear_solve_p.bind(*[c for cs in consts for c in cs], *b,
                               const_lengths=const_lengths, jaxprs=batched)
    return outs, [0] * len(outs)


linear_solve_p.def_impl(_ls_impl)
linear_solve_p.def_abstract_eval(_ls_abstract_eval)
linear_solve_p.def_lowering(_ls_lowering)
linear_solve_p.def_jvp(_ls_jvp)
linear_solve_p.def_transpose(_ls_transpose)
linear_solve_p.def_batching(_ls_batch)


def custom_linear_solve(matvec: Callable, b: Any, solve: Callable[[Callable, Any], Any],
                        transpose_solve: Callable[[Callable, Any], Any] | None = None,
                        symmetric: bool = False, has_aux: bool = False) -> Any:
    """Solves ``matvec(x) == b`` with ``solve``, differentiating implicitly.

    Derivatives are not taken through ``solve`` (which may use loops or be
    non-differentiable) but through the equation at the solution: forward mode solves again
    with ``solve``, reverse mode with ``transpose_solve`` on the transpose of ``matvec``.

    Args:
        matvec: the linear map ``x -> A x`` (a pytree of arrays like ``b`` in and out).
        b: the right-hand side, any pytree of arrays.
        solve: ``solve(matvec, b)`` returns ``x`` with ``matvec(x) == b`` (not checked).
        transpose_solve: ``transpose_solve(vecmat, b)`` for the transposed map (``vecmat``
            is derived from ``matvec``); needed for reverse mode unless ``symmetric``.
        symmetric: the map is symmetric (``vecmat == matvec``): ``solve`` serves as
            ``transpose_solve`` when that is not given.
        has_aux: ``solve`` and ``transpose_solve`` return ``(x, aux)``; aux is returned too.

    Returns:
        ``solve(matvec, b)`` (with aux: ``(x, aux)``).

    Example:
        >>> a = jnp.array([[2., 1.], [1., 3.]])
        >>> lax.custom_linear_solve(lambda x: a @ x, jnp.array([1., 2.]),
        ...                         lambda mv, b: jnp.linalg.solve(a, b), symmetric=True)
        Array([0.2, 0.6], dtype=float32)
    """
    if transpose_solve is None and symmetric:
        transpose_solve = solve
    b_flat, tree = _pytree.tree_flatten(b)
    b_avals = [core.get_aval(x) for x in b_flat]
    nb = len(b_flat)

    def unflat(xs):
        return _pytree.tree_unflatten(tree, list(xs))

    def checked(fn: str, fun: Callable, aux: bool) -> Callable:
        def f(*xs):
            out = fun(unflat(xs))
            y = out[0] if aux and isinstance(out, (tuple, list)) and len(out) == 2 else out
            _check_shapes(fn, [core.get_aval(v) for v in _pytree.tree_leaves(y)], b_avals)
            return out
        return f

    matvec_j, matvec_c, t = _trace(checked("matvec", matvec, False), b_avals)
    _check_tree("matvec", "b", t, tree, False)
    solve_j, solve_c, solve_tree = _trace(
        checked("solve", lambda x: solve(matvec, x), has_aux), b_avals)
    _check_tree("solve", "b", solve_tree, tree, has_aux)
    if transpose_solve is None:
        vecmat_j = tr_j = None
        vecmat_c, tr_c = [], []
    else:
        if symmetric:
            vecmat_j, vecmat_c = matvec_j, matvec_c
        else:
            # The transpose of matvec's jaxpr: (matvec consts, cotangents) -> cotangents of x.
            nc = len(matvec_c)
            vecmat_j = ad.transpose_jaxpr(matvec_j, [False] * nc + [True] * nb, [True] * nb)
            vecmat_c = matvec_c
        vj, vc = vecmat_j, vecmat_c

        def vecmat(y):
            leaves, t = _pytree.tree_flatten(y)
            return unflat(_as_fun(vj)(*vc, *leaves))

        tr_j, tr_c, t = _trace(checked("transpose_solve",
                                       lambda x: transpose_solve(vecmat, x), has_aux), b_avals)
        _check_tree("transpose_solve", "b", t, tree, has_aux)
    lengths = _Solve(len(matvec_c), len(vecmat_c), len(solve_c), len(tr_c))
    jaxprs = _Solve(matvec_j, vecmat_j, solve_j, tr_j)
    outs = linear_solve_p.bind(*matvec_c, *vecmat_c, *solve_c, *tr_c, *b_flat,
                               const_lengths=lengths, jaxprs=jaxprs)
    x = unflat(outs[:nb])
    if not has_aux:
        return x
    return x, _pytree.tree_unflatten(solve_tree.children()[1], list(outs[nb:]))


# ---------------------------------------------------------------- custom_root


def custom_root(f: Callable, initial_guess: Any, solve: Callable[[Callable, Any], Any],
                tangent_solve: Callable[[Callable, Any], Any], has_aux: bool = False) -> Any:
    """Finds a root of ``f`` with ``solve``, differentiating implicitly.

    Gradients with respect to values ``f`` closes over follow the implicit function
    theorem at the solution (``f(solution) == 0`` is assumed, not checked); ``solve`` itself
    is never differentiated.

    Args:
        f: the function whose root is sought (a pytree like ``initial_guess`` in and out).
        initial_guess: the starting point.
        solve: ``solve(f, initial_guess)`` returns the root.
        tangent_solve: ``tangent_solve(g, y)`` returns ``x`` with ``g(x) == y`` for the
            linear map ``g`` (``f`` linearized at the root), e.g. ``lambda g, y: y / g(1.0)``.
        has_aux: ``solve`` returns ``(root, aux)``.

    Returns:
        The root (with aux: ``(root, aux)``).

    Example:
        >>> def sqrt(a):
        ...     f = lambda x: x ** 2 - a
        ...     newton = lambda f, x: lax.fori_loop(0, 20, lambda i, x: x - f(x) / (2 * x), x)
        ...     return lax.custom_root(f, 1.0, newton, lambda g, y: y / g(1.0))
        >>> ember.grad(sqrt)(4.0)
        Array(0.25, dtype=float32, weak_type=True)
    """
    guess_flat, tree = _pytree.tree_flatten(initial_guess)
    avals = [core.get_aval(x) for x in guess_flat]
    n = len(guess_flat)

    def unflat(xs):
        return _pytree.tree_unflatten(tree, list(xs))

    f_j, f_c, t = _trace(lambda *xs: f(unflat(xs)), avals)
    _check_tree("f", "initial_guess", t, tree, False)
    solve_j, solve_c, sol_tree = _trace(lambda *xs: solve(f, unflat(xs)), avals)
    _check_tree("solve", "initial_guess", sol_tree, tree, has_aux)

    def linearize_and_solve(*xy):
        x, y = list(xy[:n]), xy[n:]

        def g(t):
            leaves, _ = _pytree.tree_flatten(t)
            _, out = ad.jvp_flat(lambda *v: _pytree.tree_leaves(f(unflat(v))), x, leaves)
            return unflat([ad.instantiate_zeros(o) for o in out])
        return tangent_solve(g, unflat(y))

    ls_j, ls_c, t = _trace(linearize_and_solve, avals + avals)
    _check_tree("tangent_solve", "x", t, tree, False)
    nf, ns = len(f_c), len(solve_c)

    @custom_jvp
    def root(*args):
        return _as_fun(solve_j)(*args[nf:nf + ns], *args[-n:])

    @root.defjvp
    def root_jvp(primals, tangents):
        fc, lc = primals[:nf], primals[nf + ns:-n]
        out = root(*primals)
        sol = list(out[:n])
        # f(p, u(p)) = 0  =>  du = -(d_u f)^-1 (d_p f) dp.
        _, rhs = ad.jvp_flat(lambda *p: _as_fun(f_j)(*p, *sol), list(fc),
                             list(tangents[:nf]))
        rhs = [ad.instantiate_zeros(r) for r in rhs]
        du = [E.neg(d) for d in _as_fun(ls_j)(*lc, *sol, *rhs)]
        aux_dot = [ad.instantiate_zeros(ad.Zero(ad.tangent_aval(core.get_aval(a))))
                   for a in out[n:]]
        return list(out), du + aux_dot

    outs = root(*f_c, *solve_c, *ls_c, *guess_flat)
    return _pytree.tree_unflatten(sol_tree, list(outs))
