"""Numerical checking of derivatives: ``check_grads``, as ``jax.test_util.check_grads``.

JVPs are compared with central finite differences; VJPs are checked against the numerical
JVP through the inner-product identity ``<ct, J t> == <J^T ct, t>``. Higher orders check the
derivative functions themselves, recursively. Tolerances default per dtype (JAX's gradient
tolerances) and scale with the array size, as JAX's do.

Example:
    >>> from ember.test_util import check_grads
    >>> check_grads(jnp.sin, (1.5,), order=2)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import _pytree, dtypes

EPS = 1e-4

_default_tolerance = {
    np.dtype(np.bool_): 0, np.dtype(np.int8): 0, np.dtype(np.int16): 0,
    np.dtype(np.int32): 0, np.dtype(np.int64): 0, np.dtype(np.uint8): 0,
    np.dtype(np.uint16): 0, np.dtype(np.uint32): 0, np.dtype(np.uint64): 0,
    np.dtype(dtypes.bfloat16): 1e-2, np.dtype(np.float16): 1e-3, np.dtype(np.float32): 1e-6,
    np.dtype(np.float64): 1e-15, np.dtype(np.complex64): 1e-6,
    np.dtype(np.complex128): 1e-15, dtypes.float0: 0,
}

default_gradient_tolerance = {
    np.dtype(dtypes.bfloat16): 1e-1, np.dtype(np.float16): 1e-2, np.dtype(np.float32): 2e-3,
    np.dtype(np.float64): 1e-5, np.dtype(np.complex64): 1e-3, np.dtype(np.complex128): 1e-5,
}


def _dtype(x: Any) -> np.dtype:
    if hasattr(x, "dtype"):
        return np.dtype(x.dtype)
    return dtypes.dtype(x, canonicalize=True)


def _is_python_scalar(x: Any) -> bool:
    return isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic)


def _tolerance(dtype: np.dtype, tol: Any) -> float:
    if tol is None:
        tol = {}
    if not isinstance(tol, dict):
        return tol
    tol = {np.dtype(k): v for k, v in tol.items()}
    dtype = dtypes.canonicalize_dtype(np.dtype(dtype))
    return tol.get(dtype, _default_tolerance.get(dtype, 0))


def _merge_tolerance(tol: Any, default: dict) -> Any:
    if tol is None:
        return default
    if not isinstance(tol, dict):
        return tol
    out = dict(default)
    out.update({np.dtype(k): v for k, v in tol.items()})
    return out


def _assert_close(a: Any, b: Any, atol: Any, rtol: Any, err_msg: str) -> None:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise AssertionError(f"{err_msg}: shapes differ, {a.shape} vs {b.shape}")
    if a.dtype == dtypes.float0 or b.dtype == dtypes.float0:
        return
    at = max(_tolerance(a.dtype, atol), _tolerance(b.dtype, atol))
    rt = max(_tolerance(a.dtype, rtol), _tolerance(b.dtype, rtol))

    def up(x):
        return x.astype(np.float32) if x.dtype == dtypes.bfloat16 else x

    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(up(a), up(b), atol=at * a.size, rtol=rt * b.size,
                                   err_msg=err_msg)


def check_close(xs: Any, ys: Any, atol: Any = None, rtol: Any = None,
                err_msg: str = "") -> None:
    """Asserts that two pytrees of arrays are close (per-dtype tolerances)."""
    xl, xt = _pytree.tree_flatten(xs)
    yl, yt = _pytree.tree_flatten(ys)
    if xt != yt:
        raise AssertionError(f"{err_msg}: tree structures differ: {xt} vs {yt}")
    for x, y in zip(xl, yl):
        _assert_close(x, y, atol, rtol, err_msg)


def _check_dtypes_match(xs: Any, ys: Any, err_msg: str) -> None:
    for x, y in zip(_pytree.tree_leaves(xs), _pytree.tree_leaves(ys)):
        dx = dtypes.canonicalize_dtype(_dtype(x))
        dy = dtypes.canonicalize_dtype(_dtype(y))
        if dx != dy:
            raise AssertionError(f"{err_msg}: dtypes differ: {dx} vs {dy}")


def _leafwise(op: Callable) -> Callable:
    def apply(*trees):
        def leaf(*xs):
            dtype = _dtype(xs[0])
            out = np.asarray(op(*[np.asarray(x) for x in xs]), dtype=dtype)
            return out.item() if all(_is_python_scalar(x) for x in xs) else out
        return _pytree.tree_map(leaf, *trees)
    return apply


_add = _leafwise(np.add)
_sub = _leafwise(np.subtract)
_conj = _leafwise(np.conj)


def _safe_sub(xs: Any, ys: Any) -> Any:
    def sub(x, y):  # inf - inf counts as 0
        x, y = np.asarray(x), np.asarray(y)
        with np.errstate(invalid="ignore"):
            return np.where(np.equal(x, y), np.array(0, x.dtype), np.subtract(x, y,
                                                                            dtype=x.dtype))
    return _pytree.tree_map(sub, xs, ys)


def _scalar_mul(xs: Any, a: float) -> Any:
    def mul(x):
        dtype = _dtype(x)
        out = np.multiply(np.asarray(x), np.array(a, dtype=dtype), dtype=dtype)
        return out.item() if _is_python_scalar(x) else out
    return _pytree.tree_map(mul, xs)


def _rand_like(rng: np.random.RandomState, x: Any) -> Any:
    shape, dtype = np.shape(x), _dtype(x)
    out = np.asarray(rng.randn(*shape), dtype=dtype)
    if dtypes.is_complex(dtype):
        out = out + dtype.type(1j) * np.asarray(rng.randn(*shape), dtype=dtype)
    return out.item() if _is_python_scalar(x) else out


def inner_prod(xs: Any, ys: Any) -> Any:
    """The real part of the sum over leaves of ``<conj(x), y>``."""
    def contract(x, y):
        return np.real(np.dot(np.conj(np.asarray(x)).reshape(-1), np.asarray(y).reshape(-1)))
    parts = [contract(x, y) for x, y in zip(_pytree.tree_leaves(xs),
                                            _pytree.tree_leaves(ys))]
    return functools.reduce(np.add, parts, np.float64(0))


def numerical_jvp(f: Callable, primals: Sequence[Any], tangents: Sequence[Any],
                  eps: float = EPS) -> Any:
    """``(f(x + eps t) - f(x - eps t)) / (2 eps)``, computed in the primals' dtypes."""
    delta = _scalar_mul(tangents, eps)
    f_pos = f(*_add(primals, delta))
    f_neg = f(*_sub(primals, delta))
    return _scalar_mul(_safe_sub(f_pos, f_neg), 0.5 / eps)


def check_jvp(f: Callable, f_jvp: Callable, args: Sequence[Any], atol: Any = None,
              rtol: Any = None, eps: float = EPS, err_msg: str = "") -> None:
    """Checks ``f_jvp(args, tangents)`` against ``f`` and central differences."""
    atol = _merge_tolerance(atol, default_gradient_tolerance)
    rtol = _merge_tolerance(rtol, default_gradient_tolerance)
    rng = np.random.RandomState(0)
    tangent = _pytree.tree_map(functools.partial(_rand_like, rng), args)
    v_out, t_out = f_jvp(args, tangent)
    _check_dtypes_match(v_out, t_out, err_msg or "JVP")
    v_expected = f(*args)
    _check_dtypes_match(v_out, v_expected, err_msg or "JVP")
    t_expected = numerical_jvp(f, args, tangent, eps=eps)
    check_close(v_out, v_expected, atol=atol, rtol=rtol,
                err_msg=f"{err_msg} primal" if err_msg else "primal")
    check_close(t_out, t_expected, atol=atol, rtol=rtol,
                err_msg=f"{err_msg} tangent" if err_msg else "tangent")


def check_vjp(f: Callable, f_vjp: Callable, args: Sequence[Any], atol: Any = None,
              rtol: Any = None, eps: float = EPS, err_msg: str = "") -> None:
    """Checks ``f_vjp(*args) -> (out, vjp_fun)`` with the inner-product identity."""
    atol = _merge_tolerance(atol, default_gradient_tolerance)
    rtol = _merge_tolerance(rtol, default_gradient_tolerance)
    rand = functools.partial(_rand_like, np.random.RandomState(0))
    v_out, vjp_fun = f_vjp(*args)
    v_expected = f(*args)
    check_close(v_out, v_expected, atol=atol, rtol=rtol,
                err_msg=f"{err_msg} primal" if err_msg else "primal")
    tangent = _pytree.tree_map(rand, args)
    tangent_out = numerical_jvp(f, args, tangent, eps=eps)
    cotangent = _pytree.tree_map(rand, v_out)
    cotangent_out = _conj(vjp_fun(_conj(cotangent)))
    ip = inner_prod(tangent, cotangent_out)
    ip_expected = inner_prod(tangent_out, cotangent)
    check_close(ip, ip_expected, atol=atol, rtol=rtol,
                err_msg=f"{err_msg} cotangent projection" if err_msg
                else "cotangent projection")


def check_grads(f: Callable, args: Sequence[Any], order: int,
                modes: Sequence[str] = ("fwd", "rev"), atol: Any = None, rtol: Any = None,
                eps: float | None = None) -> None:
    """Checks ``f``'s forward and/or reverse derivatives numerically, up to ``order``.

    Args:
        f: the function to check; takes ``*args``, returns a pytree of arrays.
        args: the point to check at (a tuple of pytrees of inexact arrays).
        order: how many times to differentiate (1 checks first derivatives).
        modes: ``"fwd"`` (jvp), ``"rev"`` (vjp) or both.
        atol, rtol: tolerances, a number or a dict from dtype to number.
        eps: the finite-difference step (default 1e-4).

    Raises:
        AssertionError: a derivative differs from its numerical estimate.

    Example:
        >>> check_grads(lambda x: jnp.sin(x) * x, (np.float64(0.7),), order=2)
    """
    from ember import _ad_api as api
    if isinstance(modes, str):
        modes = (modes,)
    for m in modes:
        if m not in ("fwd", "rev"):
            raise ValueError(f"check_grads: unknown mode {m!r}; expected 'fwd' or 'rev'")
    if not isinstance(order, int) or order < 1:
        raise ValueError(f"check_grads: order must be a positive integer, got {order!r}")
    args = tuple(args)
    eps = eps or EPS

    def _check(f: Callable, args: tuple, order: int, err_msg: str = "") -> None:
        if "fwd" in modes:
            msg = f"JVP of {err_msg}" if err_msg else "JVP"
            check_jvp(f, functools.partial(api.jvp, f), args, atol, rtol, eps, msg)
            if order > 1:
                _check(functools.partial(api.jvp, f), (args, args), order - 1, msg)
        if "rev" in modes:
            msg = f"VJP of {err_msg}" if err_msg else "VJP"
            check_vjp(f, functools.partial(api.vjp, f), args, atol, rtol, eps, msg)
            if order > 1:
                def f_vjp(*a):
                    out, vjp_fun = api.vjp(f, *a)
                    return vjp_fun(out)
                _check(f_vjp, args, order - 1, msg)

    _check(f, args, order)


__all__ = ["check_close", "check_grads", "check_jvp", "check_vjp", "inner_prod",
           "numerical_jvp"]
