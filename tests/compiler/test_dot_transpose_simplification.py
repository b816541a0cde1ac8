"""The ``transpose_dot`` rewrite: ``transpose(dot_general(a, b))`` becomes ``dot_general(b, a)``
(plus a cheaper transpose when one is left), so that BLAS writes the result in its final layout.

Checked on HLO built by hand (text, verifier, values before and after through the HLO
evaluator) and end to end through ``jit`` on both backends against ``np.einsum``, for 2-D and
batched dots under every output permutation.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ember
from ember import lax
from ember.compiler import pipeline
from ember.compiler.evaluator import evaluate_computation
from ember.compiler.hlo import Builder, Module, Shape
from ember.compiler.verifier import verify_module

F32 = np.float32
BACKENDS = ("interpreter", "cpu")

# (lhs dims, rhs dims, dimension numbers, einsum spec of the dot): a 2-D matmul, a matmul
# contracting lhs's first dim (a weight gradient x^T g), a batched matmul, and dots with two
# free dims on each side, without and with a batch dim (not in front in the operands).
DOTS = {
    "matmul": ((3, 4), (4, 5), (((1,), (0,)), ((), ())), "mk,kn->mn"),
    "xt_g": ((6, 3), (6, 5), (((0,), (0,)), ((), ())), "km,kn->mn"),
    "batched": ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,))), "bmk,bkn->bmn"),
    "two_free": ((3, 4, 5), (6, 5, 7), (((2,), (1,)), ((), ())), "pqk,rks->pqrs"),
    "batch_last": ((3, 5, 2), (5, 4, 2), (((1,), (0,)), ((2,), (2,))), "pkb,knb->bpn"),
}


def _layout_cost(perm) -> int:
    """Independent restatement: 0 identity, 1 last dim kept, 2 last dim moved."""
    if tuple(perm) == tuple(range(len(perm))):
        return 0
    return 1 if perm[-1] == len(perm) - 1 else 2


def _swaps_groups(perm, nb: int, nl: int, nr: int) -> bool:
    """Whether ``perm`` keeps the batch dims in front and puts every rhs-free dim (in order)
    before every lhs-free dim (in order): exactly what the swapped dot produces."""
    batch = list(range(nb))
    lfree = list(range(nb, nb + nl))
    rfree = list(range(nb + nl, nb + nl + nr))
    return list(perm) == batch + rfree + lfree


def _free_counts(lhs, rhs, dn):
    (lc, rc), (lb, _) = dn
    return len(lb), len(lhs) - len(lb) - len(lc), len(rhs) - len(lb) - len(rc)


def _module(lhs, rhs, dn, perm, extra_use=False):
    m = Module("m")
    b = Builder(m, "main")
    x, y = b.parameter(0, Shape(F32, lhs)), b.parameter(1, Shape(F32, rhs))
    (lc, rc), (lb, rb) = dn
    dot = b.op("dot_general", x, y, lhs_batching_dimensions=lb, rhs_batching_dimensions=rb,
               lhs_contracting_dimensions=lc, rhs_contracting_dimensions=rc)
    root = b.op("transpose", dot, permutation=perm)
    if extra_use:
        root = b.op("tuple", root, dot)
    b.build(root, entry=True)
    return m


def _evaluate(m, args):
    out = evaluate_computation(m.entry, args)
    return list(out) if isinstance(out, tuple) else [out]


def _opcodes(m) -> list[str]:
    return [i.opcode for i in m.entry.instructions]


def _cases():
    for name, (lhs, rhs, dn, _) in DOTS.items():
        rank = len(lhs) + len(rhs) - 2 * len(dn[0][0]) - len(dn[1][0])
        for perm in itertools.permutations(range(rank)):
            yield name, perm


CASES = list(_cases())


@pytest.mark.parametrize("name,perm", CASES, ids=[f"{n}-{''.join(map(str, p))}"
                                                  for n, p in CASES])
def test_rewrite_on_hlo(name, perm):
    lhs, rhs, dn, _ = DOTS[name]
    m = _module(lhs, rhs, dn, perm)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(lhs).astype(F32), rng.standard_normal(rhs).astype(F32)]
    before = _evaluate(m, args)
    old_transposes = [i for i in m.entry.instructions if i.opcode == "transpose"]
    pipeline.run_pass(m, "algebraic_simplifier")
    pipeline.run_pass(m, "dce")
    verify_module(m)
    after = _evaluate(m, args)
    np.testing.assert_allclose(after[0], before[0], rtol=1e-5, atol=1e-5)
    assert after[0].shape == before[0].shape
    nb, nl, nr = _free_counts(lhs, rhs, dn)
    ops = _opcodes(m)
    assert ops.count("dot_general") == 1
    transposes = [i for i in m.entry.instructions if i.opcode == "transpose"]
    if _swaps_groups(perm, nb, nl, nr):
        assert transposes == []  # the swapped dot is the whole answer
        (dot,) = [i for i in m.entry.instructions if i.opcode == "dot_general"]
        assert dot.operands[0].attrs["index"] == 1 and dot.operands[1].attrs["index"] == 0
    # Never worse than before: either untouched, or the remaining transpose is cheaper.
    if len(transposes) == 1 and transposes[0] is not old_transposes[0]:
        old_cost = _layout_cost(old_transposes[0].attrs["permutation"])
        assert _layout_cost(transposes[0].attrs["permutation"]) < old_cost
    assert not pipeline.run_pass(m, "algebraic_simplifier")  # a fixed point


def test_rewrite_fires_for_matrix_transpose_text():
    lhs, rhs, dn, _ = DOTS["xt_g"]
    m = _module(lhs, rhs, dn, (1, 0))
    assert pipeline.run_pass(m, "algebraic_simplifier")
    pipeline.run_pass(m, "dce")
    text = m.to_text()
    assert "transpose" not in text
    assert ("f32[5,3] dot_general(%Arg_1.2, %Arg_0.1), lhs_batching_dimensions={}, "
            "lhs_contracting_dimensions={0}, rhs_batching_dimensions={}, "
            "rhs_contracting_dimensions={0}") in text


def test_dot_with_another_user_is_not_duplicated():
    lhs, rhs, dn, _ = DOTS["matmul"]
    m = _module(lhs, rhs, dn, (1, 0), extra_use=True)
    pipeline.run_pass(m, "algebraic_simplifier")
    ops = _opcodes(m)
    assert ops.count("dot_general") == 1 and ops.count("transpose") == 1


def test_rewrite_sees_through_earlier_rewrites():
    # transpose(copy(dot)): the copy is removed first, then the transpose folds into the dot.
    m = Module("m")
    b = Builder(m, "main")
    x, y = b.parameter(0, Shape(F32, (3, 4))), b.parameter(1, Shape(F32, (4, 5)))
    dot = b.op("dot_general", x, y, lhs_batching_dimensions=(), rhs_batching_dimensions=(),
               lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(0,))
    b.build(b.op("transpose", b.op("copy", dot), permutation=(1, 0)), entry=True)
    pipeline.optimize(m, verify=True, fuse=False)
    assert _opcodes(m).count("transpose") == 0
    assert m.entry.root.opcode == "dot_general" and m.entry.root.dims == (5, 3)


def test_pipeline_mlp_weight_gradients_have_no_transpose():
    """The gradient of ``x @ w`` with respect to ``w`` is computed directly as [in, out]."""
    def loss(w, x):
        return (ember.numpy.tanh(x @ w) ** 2).sum()

    w = np.ones((6, 4), F32)
    x = np.ones((3, 6), F32)
    text = ember.jit(ember.grad(loss)).lower(w, x).compile().as_text()
    assert "transpose" not in text


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(DOTS))
def test_jit_matches_numpy_for_every_permutation(backend, name):
    lhs, rhs, dn, spec = DOTS[name]
    rng = np.random.default_rng(1)
    a = rng.standard_normal(lhs).astype(F32)
    b = rng.standard_normal(rhs).astype(F32)
    ref = np.einsum(spec, a.astype(np.float64), b.astype(np.float64))
    for perm in itertools.permutations(range(ref.ndim)):
        f = ember.jit(lambda a, b, perm=perm: lax.transpose(lax.dot_general(a, b, dn), perm),
                      backend=backend)
        got = np.asarray(f(a, b))
        np.testing.assert_allclose(got, ref.transpose(perm), rtol=1e-5, atol=1e-5,
                                   err_msg=f"{name} perm={perm}")
