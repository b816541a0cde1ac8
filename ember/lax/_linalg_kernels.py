"""NumPy kernels for the LAPACK routines NumPy lacks: Householder reflectors (``larfg``),
QR (``geqrf``), Hessenberg (``gehrd``) and tridiagonal (``sytrd``/``hetrd``) reductions,
the product of reflectors (``orgqr``/``ormqr``) and the Schur decomposition (``gees``:
Hessenberg reduction, then shifted QR iterations with deflation).

Each kernel takes one matrix (the callers loop over batches) and follows LAPACK's storage
conventions, so the outputs agree with LAPACK's (and JAX's) up to rounding.
"""

from __future__ import annotations

import numpy as np


def larfg(alpha, x):
    """LAPACK's elementary reflector: ``(beta, v, tau)`` with ``H = I - tau [1; v] [1; v]^H``
    and ``H^H [alpha; x] = [beta; 0]``, ``beta`` real."""
    xnorm = np.linalg.norm(x) if x.size else 0.0
    if xnorm == 0 and np.imag(alpha) == 0:
        return alpha, np.zeros_like(x), np.zeros((), x.dtype)[()]
    beta = -np.copysign(np.sqrt(np.abs(alpha) ** 2 + xnorm ** 2), np.real(alpha))
    tau = (beta - np.real(alpha)) / beta - 1j * np.imag(alpha) / beta \
        if np.iscomplexobj(x) else (beta - alpha) / beta
    v = x / (alpha - beta)
    return beta, v, tau


def _apply_left(c, v, tau):
    """``c := (I - tau v v^H) c`` in place (``v`` with its leading one)."""
    c -= tau * np.outer(v, np.conj(v) @ c)


def _apply_right(c, v, tau):
    """``c := c (I - tau v v^H)`` in place."""
    c -= tau * np.outer(c @ v, np.conj(v))


def _unit(v, dtype):
    return np.concatenate([np.ones(1, dtype), v])


def geqrf(a):
    """QR in LAPACK's compact form: R on and above the diagonal, reflectors below; taus."""
    a = a.copy()
    m, n = a.shape
    k = min(m, n)
    taus = np.zeros(k, a.dtype)
    for j in range(k):
        beta, v, tau = larfg(a[j, j], a[j + 1:, j])
        a[j, j], a[j + 1:, j], taus[j] = beta, v, tau
        _apply_left(a[j:, j + 1:], _unit(v, a.dtype), np.conj(tau))
    return a, taus


def gehrd(a):
    """Hessenberg reduction ``Q^H A Q = H``: H on and above the subdiagonal, reflectors
    below it; ``n - 1`` taus."""
    a = a.copy()
    n = a.shape[0]
    taus = np.zeros(max(n - 1, 0), a.dtype)
    for j in range(n - 1):
        beta, v, tau = larfg(a[j + 1, j], a[j + 2:, j])
        u = _unit(v, a.dtype)
        a[j + 1, j], a[j + 2:, j], taus[j] = 1, 0, tau
        _apply_right(a[:, j + 1:], u, tau)
        _apply_left(a[j + 1:, j:], u, np.conj(tau))
        a[j + 1, j], a[j + 2:, j] = beta, v
    return a, taus


def sytrd(a, lower):
    """Tridiagonal reduction of a Hermitian matrix (only the ``lower`` or upper triangle is
    read): ``(a, d, e, taus)`` in LAPACK's layout; the other triangle of ``a`` is kept."""
    n = a.shape[0]
    tri = np.tril(a, -1) if lower else np.triu(a, 1)
    h = tri + np.conj(tri.T) + np.diag(np.real(np.diag(a))).astype(a.dtype)
    out = a.copy()
    rdt = np.real(a).dtype
    d, e = np.zeros(n, rdt), np.zeros(max(n - 1, 0), rdt)
    taus = np.zeros(max(n - 1, 0), a.dtype)
    steps = range(n - 1) if lower else range(n - 2, -1, -1)
    for i in steps:
        if lower:  # annihilate h[i+2:, i] with a reflector on rows i+1:
            beta, v, tau = larfg(h[i + 1, i], h[i + 2:, i])
            u, sl = _unit(v, a.dtype), slice(i + 1, n)
            out[i + 2:, i] = v
        else:  # annihilate h[:i, i+1] with a reflector on rows :i+1 (its one last)
            beta, v, tau = larfg(h[i, i + 1], h[:i, i + 1])
            u, sl = np.concatenate([v, np.ones(1, a.dtype)]), slice(0, i + 1)
            out[:i, i + 1] = v
        blk = h[sl, sl].copy()
        _apply_left(blk, u, np.conj(tau))
        _apply_right(blk, u, tau)
        h[sl, sl] = blk
        e[i], taus[i] = np.real(beta), tau
    d[:] = np.real(np.diag(h))
    idx = np.arange(n)
    out[idx, idx] = d
    if n > 1:
        if lower:
            out[idx[1:], idx[:-1]] = e
        else:
            out[idx[:-1], idx[1:]] = e
    return out, d, e, taus


def householder_product(a, taus):
    """``orgqr``: the first ``n`` columns of ``H_0 H_1 ... H_{k-1}`` (reflectors below the
    diagonal of ``a``, shape ``(m, n)``)."""
    m, n = a.shape
    q = np.eye(m, n, dtype=a.dtype)
    for i in range(len(taus) - 1, -1, -1):
        _apply_left(q[i:, :], _unit(a[i + 1:, i], a.dtype), taus[i])
    return q


def ormqr(a, taus, c, left, transpose):
    """``Q c``, ``Q^H c``, ``c Q`` or ``c Q^H`` for ``Q = H_0 ... H_{k-1}`` (m x m)."""
    c = c.copy()
    k = len(taus)
    forward = left == transpose  # Q^H c and c Q apply H_0 first
    for i in (range(k) if forward else range(k - 1, -1, -1)):
        u = _unit(a[i + 1:, i], a.dtype)
        tau = np.conj(taus[i]) if transpose else taus[i]
        if left:
            _apply_left(c[i:, :], u, tau)
        else:
            _apply_right(c[:, i:], u, tau)
    return c


# ---------------------------------------------------------------- Schur


def _rotate(h, z, k, g):
    """``h := g h g^H`` on rows/columns ``k, k+1`` and ``z := z g^H`` (g 2 x 2 unitary)."""
    h[k:k + 2, :] = g @ h[k:k + 2, :]
    gh = np.conj(g.T)
    h[:, k:k + 2] = h[:, k:k + 2] @ gh
    if z is not None:
        z[:, k:k + 2] = z[:, k:k + 2] @ gh


def _givens(x, y):
    r = np.hypot(np.abs(x), np.abs(y))
    if r == 0:
        return np.eye(2, dtype=np.result_type(x, y))
    return np.array([[np.conj(x), np.conj(y)], [-y, x]]) / r


def _standardize_2x2(h, z, k):
    """LAPACK's standard form of the real 2 x 2 block at ``k``: triangular when its
    eigenvalues are real, else equal diagonal entries (``b c < 0``)."""
    a, b, c, d = h[k, k], h[k, k + 1], h[k + 1, k], h[k + 1, k + 1]
    if c == 0:
        return
    p = 0.5 * (a - d)
    disc = p * p + b * c
    if disc >= 0:  # real eigenvalues: rotate the first basis vector onto an eigenvector
        zz = p + np.copysign(np.sqrt(disc), p)
        r = np.hypot(zz, c)
        cs, sn = (zz / r, c / r) if r != 0 else (1.0, 0.0)
        _rotate(h, z, k, np.array([[cs, sn], [-sn, cs]], h.dtype))
        h[k + 1, k] = 0
    else:  # complex pair: equalize the diagonal (tan 2t = (d - a) / (b + c))
        t = 0.5 * np.arctan2(d - a, b + c)
        cs, sn = np.cos(t), np.sin(t)
        _rotate(h, z, k, np.array([[cs, sn], [-sn, cs]], h.dtype))
        h[k, k] = h[k + 1, k + 1] = 0.5 * (h[k, k] + h[k + 1, k + 1])


def _small_subdiag(h, lo, hi, eps, norm):
    """The largest ``l`` in ``(lo, hi]`` whose ``h[l, l-1]`` is negligible (zeroed), else lo."""
    for l in range(hi, lo, -1):
        s = np.abs(h[l - 1, l - 1]) + np.abs(h[l, l])
        if np.abs(h[l, l - 1]) <= eps * (s if s != 0 else norm):
            h[l, l - 1] = 0
            return l
    return lo


def _francis_step(h, z, l, hi, s, t):
    """One implicit double-shift QR step on the active window ``[l, hi]`` (real)."""
    n = h.shape[0]
    x = h[l, l] * h[l, l] + h[l, l + 1] * h[l + 1, l] - s * h[l, l] + t
    y = h[l + 1, l] * (h[l, l] + h[l + 1, l + 1] - s)
    w = h[l + 1, l] * h[l + 2, l + 1]
    for k in range(l, hi - 1):
        v = np.array([x, y, w])
        nv = np.linalg.norm(v)
        if nv != 0:
            v[0] += np.copysign(nv, v[0])
            p = np.eye(3) - 2 * np.outer(v, v) / (v @ v)
            q = max(l, k - 1)
            h[k:k + 3, q:n] = p @ h[k:k + 3, q:n]
            r = min(k + 3, hi)
            h[:r + 1, k:k + 3] = h[:r + 1, k:k + 3] @ p
            if z is not None:
                z[:, k:k + 3] = z[:, k:k + 3] @ p
        x, y = h[k + 1, k], h[k + 2, k]
        if k < hi - 2:
            w = h[k + 3, k]
    _rotate(h, z, hi - 1, _givens(x, y))
    h[np.tril_indices(n, -2)] = 0  # the chased bulge's rounding residue


def _single_shift_step(h, z, l, hi, mu):
    """One implicit single-shift QR step (complex) on the window ``[l, hi]``."""
    x, y = h[l, l] - mu, h[l + 1, l]
    for k in range(l, hi):
        _rotate(h, z, k, _givens(x, y))
        if k > l:
            h[k + 1, k - 1] = 0  # the bulge, chased down
        if k < hi - 1:
            x, y = h[k + 1, k], h[k + 2, k]


def _wilkinson(h, hi):
    a, b, c, d = h[hi - 1, hi - 1], h[hi - 1, hi], h[hi, hi - 1], h[hi, hi]
    p = 0.5 * (a - d)
    r = np.sqrt(p * p + b * c + 0j)
    if np.real(np.conj(p) * r) < 0:
        r = -r
    den = p + r
    return d - (b * c / den if den != 0 else 0)


def gees(a, compute_vectors=True):
    """Schur decomposition ``a = Z T Z^H``: ``T`` upper triangular (complex ``a``) or quasi
    upper triangular with standardized 2 x 2 blocks (real ``a``); NaNs if QR iterations do
    not converge (LAPACK's failure)."""
    n = a.shape[0]
    hq, taus = gehrd(a)
    # Z starts as the Hessenberg Q: reflector j sits below the subdiagonal, acting on rows
    # j+1:, i.e. orgqr's layout in the trailing (n-1) x (n-1) block.
    q = np.eye(n, dtype=a.dtype)
    if n > 1:
        q[1:, 1:] = householder_product(hq[1:, :-1], taus)
    z = q if compute_vectors else None
    h = np.triu(hq, -1)
    real = not np.iscomplexobj(a)
    eps = np.finfo(a.dtype).eps
    norm = np.abs(h).max() if n else 0.0
    hi, its = n - 1, 0
    while hi >= 0:
        if its > 30 * max(n, 10):
            nan = np.full_like(a, np.nan)
            return nan, nan
        l = _small_subdiag(h, 0, hi, eps, norm)
        if l == hi:
            hi, its = hi - 1, 0
        elif real and l == hi - 1:
            _standardize_2x2(h, z, hi - 1)
            hi, its = hi - 2, 0
        else:
            its += 1
            exceptional = its % 10 == 0
            if real:
                if exceptional:
                    s_ = abs(h[hi, hi - 1]) + abs(h[hi - 1, hi - 2])
                    h11 = 0.75 * s_ + h[hi, hi]
                    s, t = 2 * h11, h11 * h11 + 0.4375 * s_ * s_
                else:
                    s = h[hi - 1, hi - 1] + h[hi, hi]
                    t = h[hi - 1, hi - 1] * h[hi, hi] - h[hi - 1, hi] * h[hi, hi - 1]
                _francis_step(h, z, l, hi, s, t)
            else:
                mu = h[hi, hi] + 0.75 * abs(h[hi, hi - 1]) if exceptional else \
                    _wilkinson(h, hi)
                _single_shift_step(h, z, l, hi, mu)
    t_ = np.triu(h, -1)
    if not real or n < 2:
        t_ = np.triu(h)
    else:  # keep only the subdiagonal entries of 2 x 2 blocks
        sub = np.diagonal(h, -1).copy()
        t_ = np.triu(h)
        idx = np.arange(n - 1)
        t_[idx + 1, idx] = sub
    return t_, (z if compute_vectors else np.zeros_like(a))
