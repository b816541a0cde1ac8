"""Special matrices of ``jax.scipy.linalg`` (re-exported by ``ember.scipy.linalg``):
circulant, companion, convolution_matrix, dft, fiedler, fiedler_companion, hadamard, hankel,
helmert, hilbert, invhilbert, invpascal, leslie, pascal.

Builders from vectors accept leading batch dimensions; builders from a size ``n`` need it
concrete (it fixes the output shape).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import ember.numpy as jnp
from ember import core, dtypes
from ember.numpy._util import check_arraylike, ensure_array


def _vec(fn: str, *args: Any) -> list[Any]:
    check_arraylike(fn, *args)
    return [jnp.atleast_1d(ensure_array(a)) for a in args]


def _at_least_vector(fn: str, x: Any, name: str) -> Any:
    check_arraylike(fn, x)
    x = ensure_array(x)
    if x.ndim == 0:
        raise ValueError(f"{fn}: {name} must be at least 1-dimensional, got a scalar.")
    return x


def _size(fn: str, n: Any, name: str = "n") -> int:
    n = core.concrete_or_error(n, f"{fn}: {name} must be a concrete integer")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"{fn}: {name} must be a non-negative integer, got {n!r}")
    return int(n)


def _float_dtype() -> np.dtype:
    return dtypes.canonicalize_dtype(np.float64)


def circulant(c: Any) -> Any:
    """The circulant matrix whose first column is ``c`` (leading dims are batch dims).

    Example:
        >>> jsp.linalg.circulant(jnp.array([1, 2, 3]))
        Array([[1, 3, 2],
               [2, 1, 3],
               [3, 2, 1]], dtype=int32)
    """
    c, = _vec("circulant", c)
    n = c.shape[-1]
    idx = (np.arange(n)[:, None] - np.arange(n)[None, :]) % max(n, 1)
    return c[..., idx]


def companion(a: Any) -> Any:
    """The companion matrix of the polynomial with coefficients ``a`` (highest degree
    first): first row ``-a[1:] / a[0]``, ones on the subdiagonal.

    Example:
        >>> jsp.linalg.companion(jnp.array([1., 2., 3.]))
        Array([[-2., -3.],
               [ 1.,  0.]], dtype=float32)
    """
    a, = _vec("companion", a)
    if a.shape[-1] < 2:
        raise ValueError(f"The length of `a` along the last axis must be at least 2; got "
                         f"shape {a.shape}.")
    a = a.astype(dtypes.result_type(a, _float_dtype()) if not
                 jnp.issubdtype(a.dtype, jnp.inexact) else a.dtype)
    n = a.shape[-1] - 1
    first = -a[..., 1:] / a[..., :1]
    below = jnp.broadcast_to(jnp.eye(n - 1, n, dtype=a.dtype), a.shape[:-1] + (n - 1, n))
    return jnp.concatenate([first[..., None, :], below], axis=-2)


def convolution_matrix(a: Any, n: int, mode: str = "full") -> Any:
    """The Toeplitz matrix ``A`` with ``A @ v == jnp.convolve(a, v, mode)`` for ``v`` of
    length ``n``; ``mode`` is ``"full"``, ``"same"`` or ``"valid"``. Leading dimensions of
    ``a`` (``(..., m)``) are batch dimensions.

    Example:
        >>> jsp.linalg.convolution_matrix(jnp.array([1, 2]), 2)
        Array([[1, 0],
               [2, 1],
               [0, 2]], dtype=int32)
    """
    n = _size("convolution_matrix", n)
    if n < 1:
        raise ValueError(f"n must be a positive integer; got {n}.")
    a = _at_least_vector("convolution_matrix", a, "a")
    m = a.shape[-1]
    if m < 1:
        raise ValueError(f"len(a) must be at least 1; got shape {a.shape}.")
    if mode == "full":
        lo, rows = 0, m + n - 1
    elif mode == "same":
        lo, rows = (min(n, m) - 1) // 2, max(n, m)
    elif mode == "valid":
        lo, rows = min(n, m) - 1, max(n, m) - min(n, m) + 1
    else:
        raise ValueError(f"mode must be one of 'full', 'valid', 'same'; got {mode!r}.")
    # Row i of the full matrix holds a[i - j] in column j.
    k = np.arange(lo, lo + rows)[:, None] - np.arange(n)[None, :]
    ok = (k >= 0) & (k < m)
    return jnp.where(ok, a[..., np.clip(k, 0, m - 1)], jnp.zeros((), a.dtype))


def dft(n: int, scale: str | None = None, *, dtype: Any = None) -> Any:
    """The ``n x n`` discrete Fourier transform matrix ``exp(-2 pi i j k / n)``, divided by
    ``n`` (``scale="n"``) or ``sqrt(n)`` (``"sqrtn"``).

    Example:
        >>> jsp.linalg.dft(2)
        Array([[ 1.+0.j,  1.+0.j],
               [ 1.+0.j, -1.-0.j]], dtype=complex64)
    """
    n = _size("dft", n)
    if scale not in (None, "sqrtn", "n"):
        raise ValueError(f"scale must be None, 'sqrtn', or 'n'; got {scale!r}.")
    cdt = dtypes.canonicalize_dtype(np.complex128) if dtype is None else np.dtype(dtype)
    if not jnp.issubdtype(cdt, jnp.complexfloating):
        raise ValueError(f"dft: dtype must be complex, got {cdt}")
    k = np.arange(n)
    # Reduce j k mod n exactly in integers before the angle (accurate for large n).
    m = np.exp(-2j * np.pi * ((k[:, None] * k[None, :]) % max(n, 1)) / max(n, 1))
    if scale == "n":
        m = m / n
    elif scale == "sqrtn":
        m = m / np.sqrt(n)
    return jnp.asarray(m.astype(cdt))


def fiedler(a: Any) -> Any:
    """The symmetric Fiedler matrix ``|a[i] - a[j]|`` (leading dims are batch dims).

    Example:
        >>> jsp.linalg.fiedler(jnp.array([1, 4, 6]))
        Array([[0, 3, 5],
               [3, 0, 2],
               [5, 2, 0]], dtype=int32)
    """
    a, = _vec("fiedler", a)
    return jnp.abs(a[..., :, None] - a[..., None, :])


def fiedler_companion(a: Any) -> Any:
    """The Fiedler companion matrix of the polynomial with coefficients ``a`` (highest
    first; leading dims are batch dims): pentadiagonal, with the same eigenvalues as
    ``companion(a)``. A length-1 ``a`` gives a ``0 x 0`` matrix.

    Example:
        >>> jsp.linalg.fiedler_companion(jnp.array([1., 2., 3.]))
        Array([[-2., -3.],
               [ 1.,  0.]], dtype=float32)
    """
    a, = _vec("fiedler_companion", a)
    if a.shape[-1] == 0:
        raise ValueError(f"fiedler_companion requires the last axis of 'a' to have nonzero "
                         f"length, but got an array of shape {a.shape}.")
    if not jnp.issubdtype(a.dtype, jnp.inexact):
        a = a.astype(_float_dtype())
    c = -a[..., 1:] / a[..., :1]
    n = c.shape[-1]
    # One gather from [c_1 .. c_n, 1, 0] through Fiedler's pentadiagonal index pattern.
    ext = jnp.concatenate([c, jnp.ones(c.shape[:-1] + (1,), c.dtype),
                           jnp.zeros(c.shape[:-1] + (1,), c.dtype)], axis=-1)
    return ext[..., _fiedler_companion_index(n)]


def _fiedler_companion_index(n: int) -> np.ndarray:
    # Entry (r, k) of the map indexes ext: k < n picks c_(k+1), n a one, n + 1 a zero.
    # Row 0 holds (c_1, c_2, 1); an even row r > 0 holds c_(r+1) at column r - 1, c_(r+2) at
    # r + 1 and a one at r + 2; an odd row r a one at column r - 2 (column 0 for r = 1).
    idx = np.full((n, n), n + 1)
    for r in range(0, n, 2):
        for col, val in ((r - 1, r), (r + 1, r + 1), (r + 2, n)):
            if 0 <= col < n:
                idx[r, col] = val
        if r == 0:
            idx[0, 0] = 0
    for r in range(1, n, 2):
        idx[r, max(r - 2, 0)] = n
    return idx


def hadamard(n: int, dtype: Any = int) -> Any:
    """The ``n x n`` Sylvester Hadamard matrix (``n`` a power of two) of ``+-1`` entries.

    Example:
        >>> jsp.linalg.hadamard(2)
        Array([[ 1,  1],
               [ 1, -1]], dtype=int32)
    """
    n = _size("hadamard", n)
    if n < 1 or n & (n - 1):
        raise ValueError(f"n must be a positive power of 2; got {n}.")
    h = np.ones((1, 1), np.int64)
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return jnp.asarray(h, dtype=dtypes.canonicalize_dtype(dtype))


def hankel(c: Any, r: Any = None) -> Any:
    """The Hankel matrix ``H[i, j] = v[i + j]`` with ``v = concatenate([c, r[1:]])``: first
    column ``c`` (``(..., N)``), last row ``r`` (``(..., M)``, zeros by default; ``r[0]`` is
    ignored); leading dimensions broadcast as batch dimensions.

    Example:
        >>> jsp.linalg.hankel(jnp.array([1, 2, 3]))
        Array([[1, 2, 3],
               [2, 3, 0],
               [3, 0, 0]], dtype=int32)
    """
    c = _at_least_vector("hankel", c, "c")
    r = jnp.zeros_like(c) if r is None else _at_least_vector("hankel", r, "r")
    batch = np.broadcast_shapes(c.shape[:-1], r.shape[:-1])
    dt = dtypes.result_type(c, r)
    vals = jnp.concatenate([jnp.broadcast_to(c.astype(dt), batch + c.shape[-1:]),
                            jnp.broadcast_to(r.astype(dt), batch + r.shape[-1:])[..., 1:]],
                           axis=-1)
    return vals[..., np.arange(c.shape[-1])[:, None] + np.arange(r.shape[-1])[None, :]]


def helmert(n: int, full: bool = False) -> Any:
    """The Helmert matrix of order ``n``: orthonormal rows, the first (kept when ``full``)
    constant ``1/sqrt(n)``.

    Example:
        >>> jsp.linalg.helmert(2)
        Array([[ 0.70710677, -0.70710677]], dtype=float32)
    """
    n = _size("helmert", n)
    h = np.tril(np.ones((n, n)), -1) - np.diag(np.arange(n))
    d = np.arange(n) * np.arange(1, n + 1)
    h[0] = 1
    d[0] = n
    h = h / np.sqrt(d)[:, None]
    return jnp.asarray((h if full else h[1:]).astype(_float_dtype()))


def hilbert(n: int) -> Any:
    """The Hilbert matrix ``1 / (i + j + 1)``.

    Example:
        >>> jsp.linalg.hilbert(2)
        Array([[1.        , 0.5       ],
               [0.5       , 0.33333334]], dtype=float32)
    """
    n = _size("hilbert", n)
    k = np.arange(n)
    return jnp.asarray((1.0 / (k[:, None] + k[None, :] + 1)).astype(_float_dtype()))


def invhilbert(n: int) -> Any:
    """The exact inverse of ``hilbert(n)`` (integer entries, computed exactly in Python).

    Example:
        >>> jsp.linalg.invhilbert(2)
        Array([[ 4., -6.],
               [-6., 12.]], dtype=float32)
    """
    n = _size("invhilbert", n)
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1):
            s = i + j
            v = (-1) ** s * (s + 1) * math.comb(n + i, n - j - 1) * \
                math.comb(n + j, n - i - 1) * math.comb(s, i) ** 2
            out[i, j] = out[j, i] = float(v)
    return jnp.asarray(out.astype(_float_dtype()))


def _pascal_lower(n: int) -> np.ndarray:
    return np.array([[float(math.comb(i, j)) for j in range(n)] for i in range(n)])


def _check_kind(kind: str | None) -> str:
    kind = "symmetric" if kind is None else kind
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"Expected kind to be one of: ['symmetric', 'lower', 'upper']; got "
                         f"{kind}")
    return kind


def pascal(n: int, kind: str | None = None) -> Any:
    """The Pascal matrix of binomial coefficients: ``"symmetric"`` (default, ``C(i+j, i)``),
    ``"lower"`` (``C(i, j)``) or ``"upper"``.

    Example:
        >>> jsp.linalg.pascal(3)
        Array([[1., 1., 1.],
               [1., 2., 3.],
               [1., 3., 6.]], dtype=float32)
    """
    n, kind = _size("pascal", n), _check_kind(kind)
    low = _pascal_lower(n)
    out = {"lower": low, "upper": low.T, "symmetric": low @ low.T}[kind]
    return jnp.asarray(out.astype(_float_dtype()))


def invpascal(n: int, kind: str | None = None) -> Any:
    """The exact inverse of ``pascal(n, kind)``.

    Example:
        >>> jsp.linalg.invpascal(3)
        Array([[ 3., -3.,  1.],
               [-3.,  5., -2.],
               [ 1., -2.,  1.]], dtype=float32)
    """
    n, kind = _size("invpascal", n), _check_kind(kind)
    sign = (-1.0) ** (np.arange(n)[:, None] + np.arange(n)[None, :])
    inv_low = _pascal_lower(n) * sign  # inverse of C(i, j) is (-1)^(i+j) C(i, j)
    out = {"lower": inv_low, "upper": inv_low.T, "symmetric": inv_low.T @ inv_low}[kind]
    return jnp.asarray(out.astype(_float_dtype()))


def leslie(f: Any, s: Any) -> Any:
    """The Leslie matrix: fecundities ``f`` in the first row, survival rates ``s`` on the
    subdiagonal (leading dims are batch dims).

    Example:
        >>> jsp.linalg.leslie(jnp.array([1., 2.]), jnp.array([0.5]))
        Array([[1. , 2. ],
               [0.5, 0. ]], dtype=float32)
    """
    f, s = _vec("leslie", f, s)
    if f.shape[-1] < 2:
        raise ValueError(f"The length of f along the last axis must be at least 2; got shape "
                         f"{f.shape}.")
    if s.shape[-1] != f.shape[-1] - 1:
        raise ValueError(f"Incorrect lengths for f and s. The length of s along the last "
                         f"axis must be one less than the length of f; got f shape "
                         f"{f.shape} and s shape {s.shape}.")
    n = f.shape[-1]
    dt = dtypes.result_type(f, s)
    batch = np.broadcast_shapes(f.shape[:-1], s.shape[:-1])
    f = jnp.broadcast_to(f.astype(dt), batch + (n,))
    s = jnp.broadcast_to(s.astype(dt), batch + (n - 1,))
    below = s[..., :, None] * jnp.eye(n - 1, n, dtype=dt)
    return jnp.concatenate([f[..., None, :], below], axis=-2)
