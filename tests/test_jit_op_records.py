"""jit vs eager for every record of the op-record table, on every backend.

``ember.jit(rec.fn, backend=...)(*args)`` goes through tracing, lowering, the optimization
pipeline and the backend (the LLVM ``cpu`` backend and the NumPy ``interpreter``); it must give
the eager result: same shapes, dtypes and weak types, exact values for integers and booleans,
floats within a few ulps (fusion and the order of reductions may differ), NaNs in the same
places.

The op records use small arrays, which the cpu backend compiles without IR optimization
(``FAST_COMPILE_MAX_WORK``); every 25th case also runs with the full O3 pipeline forced.
By default every case runs on one backend, a third of a record's cases on the interpreter and
the others on the cpu backend (a record of one case on both); ``-m slow`` runs every case on
both.
"""

import itertools
import warnings

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import tree_util
from tests.op_records import ALL_RECORDS, make_args

BACKENDS = ["cpu", "interpreter"]


def _cases(every: int = 1):
    n = 0
    for rec in ALL_RECORDS:
        for dtype in rec.dtypes:
            for shapes in rec.shapes:
                n += 1
                if n % every == 0:
                    yield pytest.param(rec, dtype, shapes,
                                       id=f"{rec.name}-{np.dtype(dtype).name}-{shapes}")


def _float64(x: np.ndarray) -> np.ndarray:
    # bfloat16 is not understood by NumPy's comparison helpers: compare every float in f64.
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def _rtol(dtype: np.dtype) -> float:
    if dtype.kind in "fc" or dtype.kind == "V" or str(dtype) == "bfloat16":
        return max(1e-6, 2.0 * float(ember.numpy.finfo(dtype).eps))
    return 0.0


def assert_same(jitted, eager):
    if isinstance(eager, ember.Array):
        assert isinstance(jitted, ember.Array), type(jitted)
        assert jitted.weak_type == eager.weak_type, (jitted.aval, eager.aval)
    j = np.asarray(jitted)
    e = np.asarray(eager)
    assert (j.shape, j.dtype) == (e.shape, e.dtype), (j.shape, j.dtype, e.shape, e.dtype)
    rtol = _rtol(e.dtype)
    if rtol == 0.0:
        np.testing.assert_array_equal(j, e)
        return
    j64, e64 = _float64(j), _float64(e)
    finite = np.isfinite(e64)
    scale = float(np.max(np.abs(e64[finite]))) if finite.any() else 1.0
    np.testing.assert_allclose(j64, e64, rtol=rtol, atol=rtol * max(scale, 1.0),
                               equal_nan=True)


def check_jit_matches_eager(rec, dtype, shapes, backend):
    args = [jnp.asarray(a) for a in make_args(rec, dtype, shapes)]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        eager = rec.fn(*args)
        jitted = ember.jit(rec.fn, backend=backend)(*args)
    eager_leaves, eager_tree = tree_util.tree_flatten(eager)
    jitted_leaves, jitted_tree = tree_util.tree_flatten(jitted)
    assert jitted_tree == eager_tree
    for j, e in zip(jitted_leaves, eager_leaves):
        assert_same(j, e)


# In the default run each of a record's cases runs on one backend: the interpreter (the
# NumPy reference backend) takes the second of every INTERPRETER_EVERY, the cpu backend, the
# default one, the others; a record of one case runs on both. ``-m slow`` runs the rest (the
# default run must stay under 15 minutes on two cores: it took 14 on a Zen 5 VM with every
# case on the cpu backend).
INTERPRETER_EVERY = 3


def _backend_cases():
    for _, group in itertools.groupby(_cases(), key=lambda case: case.values[0]):
        cases = list(group)
        for k, case in enumerate(cases):
            on_interpreter = k % INTERPRETER_EVERY == 1
            for backend in BACKENDS:
                slow = len(cases) > 1 and (backend == "interpreter") != on_interpreter
                yield pytest.param(*case.values, backend, id=f"{case.id}-{backend}",
                                   marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("rec,dtype,shapes,backend", list(_backend_cases()))
def test_jit_matches_eager(rec, dtype, shapes, backend):
    check_jit_matches_eager(rec, dtype, shapes, backend)


@pytest.mark.parametrize("rec,dtype,shapes", list(_cases(every=25)))
def test_jit_matches_eager_fully_optimized(rec, dtype, shapes, monkeypatch):
    import ember.backends.cpu as cpu
    monkeypatch.setattr(cpu, "FAST_COMPILE_MAX_WORK", -1)
    check_jit_matches_eager(rec, dtype, shapes, "cpu")
