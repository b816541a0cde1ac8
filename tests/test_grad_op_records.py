"""check_grads over the op-record table: every differentiable record, both modes, order 2.

Each record marked ``differentiable`` is checked at its argument shapes in float64 under
``jax_enable_x64`` (check_grads' tight defaults) and in float32 (finite differences with a
larger step and loose tolerances: float32 differences are noisy), eagerly; float32 at a
record's first shapes only by default, at every shape with ``-m slow``. A subset runs under
``jit`` too. Only the floating arguments are differentiated (integer arguments such as indices
are held fixed) and integer outputs (``top_k``'s indices) are left out.
"""

import warnings

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import tree_util
from ember.test_util import check_grads
from tests.op_records import ALL_RECORDS, make_args

F32, F64 = np.dtype("float32"), np.dtype("float64")
LOOSE = {"eps": 1e-3, "atol": 1e-2, "rtol": 1e-2}  # float32 differences carry ~1e-4 noise

# Points where the function has no derivative (as in JAX): not checked.
SKIP = {
    ("std", ((),)): "std of one element is sqrt(0)",
    ("std_axis0", ((1, 4, 3),)): "std of one element is sqrt(0)",
}


def _uniform(lo, hi):
    def draw(args, rng):
        return [rng.uniform(lo, hi, np.shape(args[0])).astype(args[0].dtype)] + args[1:]
    return draw


# Records whose default arguments are badly conditioned for finite differences in float64
# (large higher derivatives near 0): drawn from a better range instead.
WELL_CONDITIONED = {
    "lax_digamma": _uniform(0.5, 3.0),
    "lax_pow_int_exponent": _uniform(0.5, 2.0),
}


def _cases(jit_subset=False):
    for rec in ALL_RECORDS:
        if not rec.differentiable or F32 not in [np.dtype(d) for d in rec.dtypes]:
            continue
        shapes_list = rec.shapes[:1] if jit_subset else rec.shapes
        if jit_subset and (rec.kind != "lax" or not any(np.prod(s) for s in rec.shapes[0])):
            continue
        for k, shapes in enumerate(shapes_list):
            marks = []
            if (rec.name, shapes) in SKIP:
                marks = [pytest.mark.skip(reason=SKIP[(rec.name, shapes)])]
            for dtype in ((F32,) if jit_subset else (F32, F64)):
                slow = dtype == F32 and k > 0 and not jit_subset
                yield pytest.param(rec, dtype, shapes,
                                   marks=[*marks, pytest.mark.slow] if slow else marks,
                                   id=f"{rec.name}-{dtype.name}-{shapes}")


@pytest.fixture
def x64_for(request):
    previous = ember.config.jax_enable_x64

    def use(dtype):
        ember.config.update("jax_enable_x64", dtype == F64)
    yield use
    ember.config.update("jax_enable_x64", previous)


def _prepare(rec, dtype, shapes):
    """The function of the floating arguments only, the point, and check_grads' options."""
    args = make_args(rec, F64, shapes)
    args = [a.astype(dtype) if a.dtype == F64 else a for a in args]
    if rec.name in WELL_CONDITIONED:
        args = WELL_CONDITIONED[rec.name](args, np.random.default_rng(1))
    diff = [i for i, a in enumerate(args) if a.dtype.kind == "f"]

    def f(*dargs):
        full = list(args)
        for i, a in zip(diff, dargs):
            full[i] = a
        full = [a if isinstance(a, ember.core.Tracer) else jnp.asarray(a) for a in full]
        leaves = tree_util.tree_leaves(rec.fn(*full))
        return [x for x in leaves if np.dtype(x.dtype).kind in "fc"]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = f(*[args[i] for i in diff])
    assert outs, f"{rec.name}: no floating output to differentiate"
    exact = dtype == F64 and all(np.dtype(o.dtype) in (F64, np.dtype("complex128"))
                                 for o in outs)
    return f, [args[i] for i in diff], {} if exact else LOOSE


def _check(f, args, options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_grads(f, args, order=2, modes=("fwd", "rev"), **options)


@pytest.mark.parametrize("rec,dtype,shapes", list(_cases()))
def test_check_grads(rec, dtype, shapes, x64_for):
    x64_for(dtype)
    _check(*_prepare(rec, dtype, shapes))


# Second-order derivatives of cumlogsumexp under jit build modules of deeply nested pads and
# concatenates that take LLVM over a minute per case on the 2-core CI machine: run with -m slow.
SLOW_JIT = ("lax.cumlogsumexp", "lax.cumlogsumexp_rev")


def _jit_cases():
    for case in _cases(jit_subset=True):
        rec = case.values[0]
        if rec.name in SLOW_JIT:
            case = pytest.param(*case.values, id=case.id, marks=(*case.marks, pytest.mark.slow))
        yield case


@pytest.mark.parametrize("rec,dtype,shapes", list(_jit_cases()))
def test_check_grads_jit(rec, dtype, shapes, x64_for, monkeypatch):
    # check_grads compiles many small derivative programs; skip LLVM's O3 pipeline for them
    # (the op-record jit tests cover optimized code) so the suite stays fast.
    import ember.backends.cpu as cpu
    monkeypatch.setattr(cpu, "FAST_COMPILE_MAX_WORK", 1 << 40)
    x64_for(dtype)
    f, args, options = _prepare(rec, dtype, shapes)
    _check(ember.jit(f), args, options)


def test_every_differentiable_primitive_is_covered():
    """Each differentiable lax primitive appears in some differentiable record's jaxpr."""
    seen = set()
    for rec in ALL_RECORDS:
        if not rec.differentiable or F32 not in [np.dtype(d) for d in rec.dtypes]:
            continue
        for shapes in rec.shapes:
            args = [jnp.asarray(a) for a in make_args(rec, F32, shapes)]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                jaxpr = ember.make_jaxpr(rec.fn)(*args)
            seen.update(e.primitive.name for e in jaxpr.eqns)
    expected = {
        "add", "sub", "mul", "div", "rem", "max", "min", "neg", "exp", "exp2", "expm1", "log",
        "log1p", "sqrt", "rsqrt", "cbrt", "logistic", "sin", "cos", "tan", "asin", "acos",
        "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "atan2", "abs", "square",
        "pow", "integer_pow", "erf", "erfc", "erf_inv", "lgamma", "digamma", "select_n",
        "clamp", "real", "imag", "conj", "complex", "copy", "convert_element_type",
        "reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "cumsum", "cumprod",
        "cummax", "cummin", "cumlogsumexp", "dot_general", "broadcast_in_dim", "reshape",
        "squeeze", "transpose", "rev", "pad", "concatenate", "slice", "dynamic_slice",
        "dynamic_update_slice", "gather", "scatter", "scatter-add", "scatter-min",
        "scatter-max", "sort", "top_k", "cond", "scan", "conv_general_dilated", "fft",
        "reduce_window_sum", "reduce_window_max", "reduce_window_min", "cholesky", "lu",
        "qr", "svd", "eigh", "triangular_solve",
    }
    assert expected <= seen, sorted(expected - seen)
