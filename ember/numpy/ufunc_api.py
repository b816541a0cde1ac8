"""``jnp.ufunc``: NumPy's ufunc methods (``reduce``, ``accumulate``, ``at``, ``outer``,
``reduceat``) for ember's elementwise functions, and ``frompyfunc`` for user functions.

The fourteen functions JAX makes ufuncs (``add``, ``multiply``, ``maximum``, ...) stay plain
functions, so an eager call costs nothing more; ``install`` gives each the methods and
attributes of its ``ufunc`` (``jnp.add.outer``, ``jnp.add.identity``), and ``isinstance(
jnp.add, jnp.ufunc)`` holds. Methods without a library counterpart (``subtract.reduce``, any
method of a ``frompyfunc`` ufunc) apply the function step by step, in NumPy's order, as
loops unrolled at trace time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ember import dtypes, lax
from ember.numpy import reductions, ufuncs
from ember.numpy._util import (
    canonicalize_axes,
    canonicalize_axis,
    check_arraylike,
    ensure_array,
    promote_args_inexact,
)

_METHODS = ("reduce", "accumulate", "at", "outer", "reduceat")


class _UfuncType(type):
    # The built-in ufuncs are functions carrying their ufunc (see ``install``).
    def __instancecheck__(cls, obj: Any) -> bool:
        return type.__instancecheck__(cls, obj) or type.__instancecheck__(
            cls, getattr(obj, "_ufunc", None))


class ufunc(metaclass=_UfuncType):  # noqa: N801 - NumPy's and JAX's name
    """A universal function: elementwise ``func`` plus NumPy's ufunc methods.

    ``nin``/``nout``: the numbers of inputs and outputs; ``identity``: the value that
    reductions start from (None if the operation has none). ``call``, ``reduce``,
    ``accumulate``, ``at`` and ``reduceat`` replace the generic implementations, which apply
    ``func`` step by step.

    Example:
        >>> add = jnp.ufunc(lambda x, y: x + y, 2, 1, identity=0)
        >>> add.reduce(jnp.array([1, 2, 3]))
        Array(6, dtype=int32)
    """

    def __init__(self, func: Callable[..., Any], /, nin: int, nout: int, *,
                 name: str | None = None, nargs: int | None = None, identity: Any = None,
                 call: Callable | None = None, reduce: Callable | None = None,
                 accumulate: Callable | None = None, at: Callable | None = None,
                 reduceat: Callable | None = None):
        if not callable(func):
            raise TypeError(f"ufunc: func must be callable, got {func!r}")
        for arg, value in (("nin", nin), ("nout", nout)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ufunc: {arg} must be a positive integer, got {value!r}")
        self._func = func
        self.nin, self.nout = int(nin), int(nout)
        self.nargs = int(nin) if nargs is None else int(nargs)
        self.identity = identity
        self.__name__ = name or getattr(func, "__name__", "ufunc")
        self._call = call
        self._reduce, self._accumulate = reduce, accumulate
        self._at, self._reduceat = at, reduceat

    def __repr__(self) -> str:
        return f"<jnp.ufunc '{self.__name__}'>"

    def __call__(self, *args: Any, out: None = None, where: None = None) -> Any:
        check_arraylike(self.__name__, *args)
        if out is not None:
            raise NotImplementedError(f"{self.__name__}: the out argument is not supported")
        if where is not None:
            raise NotImplementedError(f"{self.__name__}: the where argument is not supported")
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__}: expected {self.nin} arguments, got {len(args)}")
        if self._call is not None:
            return self._call(*args)
        from ember.numpy.index_tricks import vectorize
        return vectorize(self._func)(*args)

    def _check_binary(self, method: str) -> None:
        if self.nin != 2:
            raise ValueError(f"{self.__name__}.{method}: only supported for binary ufuncs")
        if self.nout != 1:
            raise ValueError(f"{self.__name__}.{method}: only supported for ufuncs with one "
                             "output")

    def _result_dtype(self, *args: Any) -> np.dtype:
        from ember import api
        ones = [lax.full_like(ensure_array(a), 1, shape=()) for a in args]  # (weak kept)
        return api.eval_shape(self, *ones).dtype

    # ------------------------------------------------------------------ reduce

    def reduce(self, a: Any, axis: Any = 0, dtype: Any = None, out: None = None,
               keepdims: bool = False, initial: Any = None, where: Any = None) -> Any:
        """Reduces ``a`` along ``axis`` by applying the ufunc repeatedly.

        Example:
            >>> jnp.add.reduce(jnp.array([[1, 2, 3], [4, 5, 6]]))
            Array([5, 7, 9], dtype=int32)
        """
        fn = f"{self.__name__}.reduce"
        check_arraylike(fn, a)
        self._check_binary("reduce")
        if out is not None:
            raise NotImplementedError(f"{fn}: the out argument is not supported")
        if initial is not None:
            check_arraylike(fn, initial)
        if where is not None:
            check_arraylike(fn, where)
            if self.identity is None and initial is None:
                raise ValueError(f"{fn}: the operation has no identity, so a where mask needs "
                                 "an initial value")
            if ensure_array(where).dtype != dtypes.bool_:
                raise ValueError(f"{fn}: where must have dtype bool, got "
                                 f"{ensure_array(where).dtype}")
        if self._reduce is not None:
            return self._reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial,
                                where=where)
        return self._reduce_stepwise(a, axis, dtype, keepdims, initial, where)

    def _reduce_stepwise(self, a, axis, dtype, keepdims, initial, where):
        fn = f"{self.__name__}.reduce"
        a = ensure_array(a)
        if initial is None:
            initial = self.identity
        dt = self._result_dtype(a, a) if dtype is None else dtypes.canonicalize_dtype(dtype)
        if where is not None:
            where = lax.broadcast_to_shape(ensure_array(where), a.shape)
        if isinstance(axis, (tuple, list)):
            raise NotImplementedError(f"{fn}: a tuple of axes is not supported")
        if axis is None:
            out_shape = (1,) * a.ndim if keepdims else ()
            a = lax.reshape(a, (a.size,))
            where = None if where is None else lax.reshape(where, (a.size,))
            axis = 0
        else:
            axis = canonicalize_axis(fn, axis, a.ndim)
            out_shape = (a.shape[:axis] + ((1,) if keepdims else ()) + a.shape[axis + 1:])
        if a.shape[axis] == 0:
            if initial is None:
                raise ValueError(f"{fn}: zero-size array to a reduction with no identity")
            return lax.full(out_shape, initial, dt)
        steps = _unstack(lax.convert_element_type(a, dt), axis)
        masks = None if where is None else _unstack(where, axis)
        if initial is None:
            acc, start = steps[0], 1
        else:
            acc = lax.full(steps[0].shape, initial, dt)
            start = 0
        for i in range(start, len(steps)):
            new = lax.convert_element_type(self(acc, steps[i]), dt)
            acc = new if masks is None else lax.select(masks[i], new, acc)
        return lax.reshape(acc, out_shape)

    # ------------------------------------------------------------------ accumulate

    def accumulate(self, a: Any, axis: int = 0, dtype: Any = None, out: None = None) -> Any:
        """The running reduction along ``axis`` (``add.accumulate`` is ``cumsum``).

        Example:
            >>> jnp.multiply.accumulate(jnp.array([1, 2, 3, 4]))
            Array([ 1,  2,  6, 24], dtype=int32)
        """
        fn = f"{self.__name__}.accumulate"
        check_arraylike(fn, a)
        self._check_binary("accumulate")
        if out is not None:
            raise NotImplementedError(f"{fn}: the out argument is not supported")
        if axis is None or isinstance(axis, (tuple, list)):
            raise ValueError(f"{fn}: accumulate needs a single integer axis, got {axis!r}")
        if self._accumulate is not None:
            return self._accumulate(a, axis=axis, dtype=dtype)
        a = ensure_array(a)
        dt = self._result_dtype(a, a) if dtype is None else dtypes.canonicalize_dtype(dtype)
        axis = canonicalize_axis(fn, axis, a.ndim)
        if a.size == 0:
            return lax.full(a.shape, 0, dt)
        steps = _unstack(lax.convert_element_type(a, dt), axis)
        outs = [steps[0]]
        for step in steps[1:]:
            outs.append(lax.convert_element_type(self(outs[-1], step), dt))
        return _stack(outs, axis)

    # ------------------------------------------------------------------ at

    def at(self, a: Any, indices: Any, b: Any = None, /, *, inplace: bool = True) -> Any:
        """``a`` with the ufunc applied at ``indices`` (with ``b`` for binary ufuncs);
        repeated indices apply it repeatedly. Arrays are immutable: pass ``inplace=False``.

        Example:
            >>> jnp.add.at(jnp.zeros(3), jnp.array([0, 0, 2]), 1.0, inplace=False)
            Array([2., 0., 1.], dtype=float32)
        """
        fn = f"{self.__name__}.at"
        if inplace:
            raise NotImplementedError(f"{fn}: ember arrays are immutable, so in-place updates "
                                      "are not possible; pass inplace=False to get the result")
        if (b is None) != (self.nin == 1):
            raise TypeError(f"{fn}: a ufunc with {self.nin} inputs takes "
                            f"{'no' if self.nin == 1 else 'one'} value argument b")
        check_arraylike(fn, a, *(() if b is None else (b,)))
        if self._at is not None:
            return self._at(a, indices) if b is None else self._at(a, indices, b)
        return self._at_stepwise(a, indices, *(() if b is None else (b,)))

    def _at_stepwise(self, a: Any, indices: Any, *args: Any) -> Any:
        a = ensure_array(a)
        dt = self._result_dtype(a, *args)
        a = lax.convert_element_type(a, dt)
        args = tuple(lax.convert_element_type(ensure_array(x), dt) for x in args)
        index = indices if isinstance(indices, tuple) else (indices,)
        arrays = [np.shape(i) for i in index if not isinstance(i, (slice, type(None),
                                                                     type(Ellipsis)))]
        shape = np.broadcast_shapes(*arrays) if arrays else ()
        if not shape:
            return a.at[indices].set(self(a.at[indices].get(), *args))
        n = math.prod(shape)
        flat = [i if isinstance(i, (slice, type(None), type(Ellipsis))) else
                lax.reshape(lax.broadcast_to_shape(ensure_array(i), shape), (n,)) for i in index]
        if args:
            # The value broadcasts against what the indices select (its leading dimensions
            # are the indices' shape when the index arrays come first, as NumPy places them).
            value, picked = args[0], a.at[indices].get().shape
            target = picked if picked[:len(shape)] == shape else (
                shape + value.shape[len(shape):])
            value = lax.broadcast_to_shape(value, target)
            args = (lax.reshape(value, (n,) + target[len(shape):]),)
        for k in range(n):
            idx = tuple(i if isinstance(i, (slice, type(None), type(Ellipsis))) else i[k]
                        for i in flat)
            a = a.at[idx].set(self(a.at[idx].get(), *(x[k] for x in args)))
        return a

    # ------------------------------------------------------------------ outer

    def outer(self, A: Any, B: Any, /) -> Any:
        """The ufunc on all pairs: ``result[i..., j...] = f(A[i...], B[j...])``.

        Example:
            >>> jnp.multiply.outer(jnp.array([1, 2]), jnp.array([1, 10, 100]))
            Array([[  1,  10, 100],
                   [  2,  20, 200]], dtype=int32)
        """
        fn = f"{self.__name__}.outer"
        self._check_binary("outer")
        check_arraylike(fn, A, B)
        A, B = ensure_array(A), ensure_array(B)
        left = lax.reshape(A, (A.size, 1))
        right = lax.reshape(B, (1, B.size))
        return lax.reshape(self(left, right), A.shape + B.shape)

    # ------------------------------------------------------------------ reduceat

    def reduceat(self, a: Any, indices: Any, axis: int = 0, dtype: Any = None,
                 out: None = None) -> Any:
        """Reductions over the slices ``a[indices[i]:indices[i+1]]`` along ``axis`` (the last
        one runs to the end); where ``indices[i] >= indices[i+1]`` the result is
        ``a[indices[i]]``.

        Example:
            >>> jnp.add.reduceat(jnp.arange(8), jnp.array([0, 4, 1, 5]))
            Array([ 6,  4, 10, 18], dtype=int32)
        """
        fn = f"{self.__name__}.reduceat"
        self._check_binary("reduceat")
        if out is not None:
            raise NotImplementedError(f"{fn}: the out argument is not supported")
        check_arraylike(fn, a, indices)
        if self._reduceat is not None:
            return self._reduceat(a, indices, axis=axis, dtype=dtype)
        a, indices = ensure_array(a), ensure_array(indices)
        if a.ndim == 0:
            raise ValueError(f"{fn}: a must have at least one dimension, got a scalar")
        if indices.ndim != 1:
            raise ValueError(f"{fn}: indices must be one-dimensional, got shape "
                             f"{indices.shape}")
        if not dtypes.is_integer(indices.dtype):
            raise TypeError(f"{fn}: indices must be integers, got {indices.dtype}")
        if axis is None or isinstance(axis, (tuple, list)):
            raise ValueError(f"{fn}: reduceat needs a single integer axis, got {axis!r}")
        axis = canonicalize_axis(fn, axis, a.ndim)
        dt = a.dtype if dtype is None else dtypes.canonicalize_dtype(dtype)
        from ember.numpy.index_functions import take
        result = lax.convert_element_type(take(a, indices, axis=axis), dt)
        n = a.shape[axis]
        idx = lax.convert_element_type(indices, dtypes.int32 if n < 2**31 else dtypes.int64)
        starts = _along(idx, axis, result.ndim)
        ends = _along(lax.concatenate([idx[1:], lax.full((1,), n, idx.dtype)], 0), axis,
                      result.ndim)
        steps = _unstack(lax.convert_element_type(a, dt), axis)
        for i in range(n):
            inside = lax.bitwise_and(lax.lt(starts, lax.full((), i, idx.dtype)),
                                     lax.gt(ends, lax.full((), i, idx.dtype)))
            step = lax.expand_dims(steps[i], (axis,))
            new = lax.convert_element_type(self(result, step), dt)
            result = lax.select(lax.broadcast_to_shape(inside, result.shape), new, result)
        return result


def _unstack(x: Any, axis: int) -> list:
    return [lax.index_in_dim(x, i, axis, keepdims=False) for i in range(x.shape[axis])]


def _stack(parts: list, axis: int) -> Any:
    return lax.concatenate([lax.expand_dims(p, (axis,)) for p in parts], axis)


def _along(v: Any, axis: int, ndim: int) -> Any:
    """A 1-D ``v`` shaped to run along ``axis`` of an ``ndim``-dimensional array."""
    shape = [1] * ndim
    shape[axis] = v.shape[0]
    return lax.reshape(v, tuple(shape))


def frompyfunc(func: Callable[..., Any], /, nin: int, nout: int, *,
               identity: Any = None) -> ufunc:
    """A ufunc from a function of ``nin`` scalars (applied elementwise with ``vectorize``).

    Example:
        >>> f = jnp.frompyfunc(lambda x, y: x * y + 1, nin=2, nout=1)
        >>> f.accumulate(jnp.array([1, 2, 3]))
        Array([ 1,  3, 10], dtype=int32)
    """
    return ufunc(func, nin, nout, identity=identity)


# ---------------------------------------------------------------- the built-in ufuncs


def _monoid_reduce(fn: str, lax_reduce, combine, identity, cast=None):
    """A reduce method from an associative lax reduction (axis tuples allowed)."""
    def reduce(a, axis=0, dtype=None, keepdims=False, initial=None, where=None):
        a = ensure_array(a)
        if cast is not None:
            a = lax.convert_element_type(a, cast(a.dtype))
        elif not (dtypes.is_integer(a.dtype) or a.dtype == dtypes.bool_):
            raise ValueError(f"{fn}: integer or boolean argument required, got {a.dtype}")
        if dtype is not None:
            a = lax.convert_element_type(a, dtypes.canonicalize_dtype(dtype))
        axes = canonicalize_axes(fn, axis, a.ndim)
        if where is not None:
            mask = lax.broadcast_to_shape(ensure_array(where), a.shape)
            a = lax.select(mask, a, lax.full(a.shape, identity(a.dtype), a.dtype))
        out = lax_reduce(a, axes)
        if initial is not None:
            out = combine(out, lax.full(out.shape, initial, out.dtype))
        if keepdims:
            out = lax.reshape(out, tuple(1 if i in axes else d for i, d in enumerate(a.shape)))
        return out
    return reduce


def _logsumexp_reduce(base2: bool):
    log, exp = (lax.log, lax.exp) if not base2 else (_log2, _exp2)

    def reduce(a, axis=0, dtype=None, keepdims=False, initial=None, where=None):
        fn = "logaddexp2.reduce" if base2 else "logaddexp.reduce"
        (a,) = promote_args_inexact(fn, a)
        if dtype is not None:
            a = lax.convert_element_type(a, dtypes.canonicalize_dtype(dtype))
        axes = canonicalize_axes(fn, axis, a.ndim)
        if where is not None:
            mask = lax.broadcast_to_shape(ensure_array(where), a.shape)
            a = lax.select(mask, a, lax.full(a.shape, -np.inf, a.dtype))
        peak = lax.reduce_max(a, axes)
        finite = lax.is_finite(peak)
        shift = lax.select(finite, peak, lax.full(peak.shape, 0, peak.dtype))
        keep = tuple(i for i in range(a.ndim) if i not in axes)
        centered = lax.sub(a, lax.broadcast_in_dim(shift, a.shape, keep))
        out = lax.add(log(lax.reduce_sum(exp(centered), axes)), shift)
        out = lax.select(finite, out, peak)  # all -inf, or an inf/NaN peak, as it is
        if initial is not None:
            combine = ufuncs.logaddexp2 if base2 else ufuncs.logaddexp
            out = combine(out, lax.full(out.shape, initial, out.dtype))
        if keepdims:
            out = lax.reshape(out, tuple(1 if i in axes else d for i, d in enumerate(a.shape)))
        return out
    return reduce


def _log2(x: Any) -> Any:
    return lax.div(lax.log(x), lax.full(x.shape, np.log(2), x.dtype))


def _exp2(x: Any) -> Any:
    return lax.exp2(x)


def _bool(dt: np.dtype) -> np.dtype:
    return dtypes.bool_


def _all_ones(dt: np.dtype) -> Any:
    return True if dt == dtypes.bool_ else -1


def _at_method(name: str):
    """An at method through ``x.at[...].<name>(b)`` (one scatter, duplicates accumulate)."""
    def at(a, indices, b):
        a = ensure_array(a)
        if a.dtype == dtypes.bool_ and name in ("add", "multiply"):
            # bool add is or, bool multiply is and: as a scatter max/min of 0s and 1s
            b = lax.convert_element_type(ensure_array(b), dtypes.bool_)
            return getattr(a.at[indices], "max" if name == "add" else "min")(b)
        if name in ("max", "min"):  # (JAX applies the ufunc: the result takes both dtypes)
            a = lax.convert_element_type(a, dtypes.result_type(a, b))
        return getattr(a.at[indices], name)(b)
    return at


def _reduce_with(fn: Callable, takes_dtype: bool = True) -> Callable:
    """A reduce method through the reduction ``fn`` (``jnp.sum``, ``jnp.max``...); a ``dtype``
    that ``fn`` does not take converts the result."""
    def reduce(a, axis=0, dtype=None, keepdims=False, initial=None, where=None):
        extra = {} if initial is None else {"initial": initial}
        if where is not None:
            extra["where"] = where
        if takes_dtype:
            return fn(a, axis=axis, dtype=dtype, keepdims=keepdims, **extra)
        out = fn(a, axis=axis, keepdims=keepdims, **extra)
        return out if dtype is None else lax.convert_element_type(
            out, dtypes.canonicalize_dtype(dtype))
    return reduce


def _accumulate_with(cumulative: Callable) -> Callable:
    def accumulate(a, axis=0, dtype=None):
        a = ensure_array(a)
        if dtype is not None:
            a = lax.convert_element_type(a, dtypes.canonicalize_dtype(dtype))
        return cumulative(a, axis=canonicalize_axis("accumulate", axis, a.ndim))
    return accumulate


def _lax_cumulative(lax_fn: Callable) -> Callable:
    def cumulative(a, axis):
        if not a.size:
            return a
        if a.dtype == dtypes.bool_:  # (the order of False < True, on bytes)
            out = lax_fn(lax.convert_element_type(a, dtypes.uint8), axis=axis)
            return lax.convert_element_type(out, dtypes.bool_)
        return lax_fn(a, axis=axis)
    return cumulative


def _builtins() -> dict[str, ufunc]:
    u = ufuncs
    return {
        "add": ufunc(u.add, 2, 1, name="add", identity=0, call=u.add,
                     reduce=_reduce_with(reductions.sum),
                     accumulate=lambda a, axis=0, dtype=None: reductions.cumsum(a, axis,
                                                                                 dtype),
                     at=_at_method("add")),
        "subtract": ufunc(u.subtract, 2, 1, name="subtract", call=u.subtract,
                          at=_at_method("subtract")),
        "multiply": ufunc(u.multiply, 2, 1, name="multiply", identity=1, call=u.multiply,
                          reduce=_reduce_with(reductions.prod),
                          accumulate=lambda a, axis=0, dtype=None: reductions.cumprod(
                              a, axis, dtype),
                          at=_at_method("multiply")),
        "maximum": ufunc(u.maximum, 2, 1, name="maximum", call=u.maximum,
                         reduce=_reduce_with(reductions.max, takes_dtype=False),
                         accumulate=_accumulate_with(_lax_cumulative(lax.cummax)),
                         at=_at_method("max")),
        "minimum": ufunc(u.minimum, 2, 1, name="minimum", call=u.minimum,
                         reduce=_reduce_with(reductions.min, takes_dtype=False),
                         accumulate=_accumulate_with(_lax_cumulative(lax.cummin)),
                         at=_at_method("min")),
        "logaddexp": ufunc(u.logaddexp, 2, 1, name="logaddexp", identity=-np.inf,
                           call=u.logaddexp, reduce=_logsumexp_reduce(False)),
        "logaddexp2": ufunc(u.logaddexp2, 2, 1, name="logaddexp2", identity=-np.inf,
                            call=u.logaddexp2, reduce=_logsumexp_reduce(True)),
        "logical_and": ufunc(u.logical_and, 2, 1, name="logical_and", identity=True,
                             call=u.logical_and, reduce=_monoid_reduce(
                                 "logical_and.reduce", lax.reduce_and, lax.bitwise_and,
                                 lambda dt: True, cast=_bool)),
        "logical_or": ufunc(u.logical_or, 2, 1, name="logical_or", identity=False,
                            call=u.logical_or, reduce=_monoid_reduce(
                                "logical_or.reduce", lax.reduce_or, lax.bitwise_or,
                                lambda dt: False, cast=_bool)),
        "logical_xor": ufunc(u.logical_xor, 2, 1, name="logical_xor", identity=False,
                             call=u.logical_xor, reduce=_monoid_reduce(
                                 "logical_xor.reduce", lax.reduce_xor, lax.bitwise_xor,
                                 lambda dt: False, cast=_bool)),
        "bitwise_and": ufunc(u.bitwise_and, 2, 1, name="bitwise_and", identity=-1,
                             call=u.bitwise_and, reduce=_monoid_reduce(
                                 "bitwise_and.reduce", lax.reduce_and, lax.bitwise_and,
                                 _all_ones)),
        "bitwise_or": ufunc(u.bitwise_or, 2, 1, name="bitwise_or", identity=0,
                            call=u.bitwise_or, reduce=_monoid_reduce(
                                "bitwise_or.reduce", lax.reduce_or, lax.bitwise_or,
                                lambda dt: False if dt == dtypes.bool_ else 0)),
        "bitwise_xor": ufunc(u.bitwise_xor, 2, 1, name="bitwise_xor", identity=0,
                             call=u.bitwise_xor, reduce=_monoid_reduce(
                                 "bitwise_xor.reduce", lax.reduce_xor, lax.bitwise_xor,
                                 lambda dt: False if dt == dtypes.bool_ else 0)),
        "negative": ufunc(u.negative, 1, 1, name="negative", call=u.negative),
    }


def install(namespace: Any) -> None:
    """Gives the built-in ufunc functions of ``namespace`` their ufunc's methods."""
    for name, uf in _builtins().items():
        fn = getattr(namespace, name)
        fn._ufunc = uf
        fn.nin, fn.nout, fn.nargs, fn.identity = uf.nin, uf.nout, uf.nargs, uf.identity
        for method in _METHODS:
            setattr(fn, method, getattr(uf, method))


__all__ = ["ufunc", "frompyfunc"]
