"""Eager ember vs NumPy for every record of the op-record table."""

import warnings
from collections import OrderedDict

import numpy as np
import pytest

from tests.op_records import ALL_RECORDS, make_args, tolerance


def _cases():
    for rec in ALL_RECORDS:
        for dtype in rec.dtypes:
            for shapes in rec.shapes:
                yield pytest.param(rec, dtype, shapes,
                                   id=f"{rec.name}-{np.dtype(dtype).name}-{shapes}")


def _ref_inputs(args):
    # Low-precision floats are computed in float32 by the reference, then compared loosely.
    out = []
    for a in args:
        if a.dtype.kind == "V" or a.dtype == np.float16 or str(a.dtype) == "bfloat16":
            out.append(a.astype(np.float32))
        else:
            out.append(a)
    return out


def assert_matches(actual, expected, dtype, tol=None):
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    t = tolerance(dtype, tol)
    # (Complex results compare as complex: a cast to float64 would drop imaginary parts.)
    wide = np.complex128 if np.iscomplexobj(actual) or np.iscomplexobj(expected) else np.float64
    if actual.dtype == np.bool_ or expected.dtype == np.bool_:
        np.testing.assert_array_equal(actual, expected)
    elif t == 0.0:
        np.testing.assert_array_equal(actual.astype(wide), expected.astype(wide))
    else:
        np.testing.assert_allclose(actual.astype(wide), expected.astype(wide),
                                   rtol=t, atol=t, equal_nan=True)


@pytest.mark.parametrize("rec,dtype,shapes", list(_cases()))
def test_eager_matches_numpy(rec, dtype, shapes):
    args = make_args(rec, dtype, shapes)
    import ember.numpy as jnp

    out = rec.fn(*[jnp.asarray(a) for a in args])
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's own nan-function warnings
        expected = rec.ref(*_ref_inputs(args))
    if isinstance(out, (tuple, list)):
        for o, e in zip(out, expected):
            assert_matches(o, e, dtype, rec.tol)
    else:
        assert_matches(out, expected, dtype, rec.tol)
        if rec.out_dtype is not None:
            assert np.dtype(out.dtype) == np.dtype(rec.out_dtype(np.dtype(dtype)))


@pytest.mark.parametrize("rec,dtype,shapes", list(_cases()))
def test_traced_matches_eager(rec, dtype, shapes, monkeypatch):
    """Staging the op into a jaxpr typechecks, and evaluating the jaxpr gives the eager result."""
    import ember
    import ember.numpy as jnp
    from ember import tree_util
    from ember.jaxpr import eval_jaxpr, typecheck_jaxpr
    from ember.lax.control_flow import eager_loops

    # Both evaluations run their loops op by op: an eager loop compiles itself once its
    # fingerprint has spent 30 ms that way in the process, so with earlier tests' time the
    # second evaluation could run compiled code, whose float32 bits may differ by an ulp
    # (gammaincc's continued fraction did). Loops that earlier tests compiled are forgotten
    # for the test too (bicgstab's and gmres's, when a solver test ran first in the process).
    monkeypatch.setattr(eager_loops, "COMPILE_AFTER_S", float("inf"))
    monkeypatch.setattr(eager_loops, "_compiled", OrderedDict())
    monkeypatch.setattr(eager_loops, "_spent", OrderedDict())

    args = [jnp.asarray(a) for a in make_args(rec, dtype, shapes)]
    eager = tree_util.tree_leaves(rec.fn(*args))
    closed = ember.make_jaxpr(rec.fn)(*args)
    typecheck_jaxpr(closed.jaxpr)
    staged = eval_jaxpr(closed.jaxpr, closed.consts, *args)
    assert len(staged) == len(eager)
    for s, e in zip(staged, eager):
        assert s.shape == e.shape and s.dtype == e.dtype
        np.testing.assert_array_equal(_comparable(s), _comparable(e))


def _comparable(x):
    # NumPy's NaN-aware comparison does not know bfloat16: compare its values as float32.
    x = np.asarray(x)
    return x.astype(np.float32) if str(x.dtype) == "bfloat16" else x
