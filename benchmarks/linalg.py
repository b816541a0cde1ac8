"""Linear-algebra benchmark: ember vs JAX under jit, in one process.

Run from the repository root: ``python benchmarks/linalg.py [name ...]`` (names: the first
word of a workload, e.g. ``solve cholesky``). For each workload the table gives the median
and the minimum time of a jitted call for ember and JAX and their ratios (ember / JAX); the
minimum is the steadier figure on a shared machine. float32; 512 x 512 for the solves and
factorizations, 256 x 256 for the eigen/Schur family.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np


def _bench(f, args, block):
    block(f(*args))
    if "ember.backends" in sys.modules:  # (ember's optimized code, not the quick first tier)
        sys.modules["ember.backends"].get_backend("cpu").wait_for_background()
    t0 = time.perf_counter()
    block(f(*args))
    n = max(3, min(100, int(0.3 / max(time.perf_counter() - t0, 1e-6))))
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        block(f(*args))
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts)


def workloads(jax):
    rng = np.random.default_rng(0)

    def r(*s):
        return rng.standard_normal(s).astype(np.float32)

    n, n2 = 512, 256
    a = r(n, n) + 30 * np.eye(n, dtype=np.float32)
    g = r(n, n)
    spd = g @ g.T + n * np.eye(n, dtype=np.float32)
    b = r(n, 16)
    a2 = r(n2, n2)
    s2 = a2 + a2.T
    geqrf_out = tuple(np.asarray(v) for v in jax._src.lax.linalg.geqrf(a2))

    def scipy(root):
        return root.scipy.linalg

    def geqrf(lin, x):
        return lin.geqrf(x) if hasattr(lin, "geqrf") else jax._src.lax.linalg.geqrf(x)

    return {
        "solve 512 (16 rhs)": (lambda m, lin, root, x, y: m.linalg.solve(x, y), (a, b)),
        "cholesky 512": (lambda m, lin, root, x: m.linalg.cholesky(x), (spd,)),
        "inv 512": (lambda m, lin, root, x: m.linalg.inv(x), (a,)),
        "det 512": (lambda m, lin, root, x: m.linalg.det(x), (a,)),
        "slogdet 512": (lambda m, lin, root, x: m.linalg.slogdet(x), (a,)),
        "lu 512": (lambda m, lin, root, x: lin.lu(x), (a,)),
        "triangular_solve 512 (16 rhs)": (
            lambda m, lin, root, x, y: lin.triangular_solve(x, y, left_side=True, lower=True),
            (np.tril(a), b)),
        "cho_solve 512 (16 rhs)": (
            lambda m, lin, root, x, y: scipy(root).cho_solve((x, True), y),
            (np.linalg.cholesky(spd).astype(np.float32), b)),
        "batched solve 64x(32,32)": (
            lambda m, lin, root, x, y: m.linalg.solve(x, y),
            (r(64, 32, 32) + 10 * np.eye(32, dtype=np.float32), r(64, 32, 4))),
        "qr 256": (lambda m, lin, root, x: m.linalg.qr(x), (a2,)),
        "geqrf 256": (lambda m, lin, root, x: geqrf(lin, x), (a2,)),
        "householder_product 256": (lambda m, lin, root, h, t: lin.householder_product(h, t),
                                    geqrf_out),
        "eigh 256": (lambda m, lin, root, x: m.linalg.eigh(x), (s2,)),
        "svd 256": (lambda m, lin, root, x: m.linalg.svd(x), (a2,)),
        "eig 256": (lambda m, lin, root, x: m.linalg.eig(x), (a2,)),
        "schur 256": (lambda m, lin, root, x: lin.schur(x), (a2,)),
        "hessenberg 256": (lambda m, lin, root, x: lin.hessenberg(x), (a2,)),
        "tridiagonal 256": (lambda m, lin, root, x: lin.tridiagonal(x), (s2,)),
        "tridiagonal_solve 512 (16 rhs)": (
            lambda m, lin, root, dl, d, du, y: lin.tridiagonal_solve(dl, d, du, y),
            (r(n), r(n) + 5, r(n), r(n, 16))),
    }


def main(only: list[str]) -> None:
    import jax
    import jax.numpy as jnp

    import ember
    import ember.numpy as enp
    jax.config.update("jax_enable_x64", False)
    print(f"{'workload':32s} {'median: ember':>14s} {'jax':>8s} {'ratio':>6s} | "
          f"{'min: ember':>10s} {'jax':>8s} {'ratio':>6s}   (ms)")
    for name, (fn, args) in workloads(jax).items():
        if only and name.split()[0] not in only:
            continue
        res = {}
        for root, m, lin in ((ember, enp, ember.lax.linalg), (jax, jnp, jax.lax.linalg)):
            xs = tuple(root.numpy.asarray(x) for x in args)
            f = root.jit(lambda *xs, m=m, lin=lin, root=root, fn=fn: fn(m, lin, root, *xs))
            res[root.__name__] = _bench(f, xs, root.block_until_ready)
        (em, emin), (jm, jmin) = res["ember"], res["jax"]
        print(f"{name:32s} {1e3 * em:14.3f} {1e3 * jm:8.3f} {em / jm:6.2f} | "
              f"{1e3 * emin:10.3f} {1e3 * jmin:8.3f} {emin / jmin:6.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
