"""vmap vs a Python loop for every record of the op-record table.

For each record and argument shapes, arguments get an extra batch axis of size ``B``; the
vmapped function must give the per-example results stacked (same shapes, dtypes and values
within the jit tests' tolerance). Variants:

- ``front``: every argument mapped along axis 0;
- ``last_only``: the first argument mapped along its last axis, the others unmapped
  (``in_axes=(-1, None, ...)``), which exercises rules with a batch dim not in front and
  unmapped operands;
- ``jit``: ``front`` under ``jit`` (a subset).

Records listed in ``NOT_VMAPPABLE`` depend on concrete values (output shapes that depend on
data, as in JAX) and must raise a tracer error under vmap instead.
"""

import warnings

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import errors, tree_util
from tests.op_records import ALL_RECORDS, make_args
from tests.test_jit_op_records import assert_same

B = 3

# name -> why vmap cannot apply (the record's output shape depends on its values).
NOT_VMAPPABLE: dict[str, str] = {}


def _cases(variant: str, every: int = 1, all_dtypes: bool = False):
    n = 0
    for rec in ALL_RECORDS:
        for dtype in (rec.dtypes if all_dtypes else rec.dtypes[:1]):
            for shapes in rec.shapes:
                if variant == "last_only" and not shapes:
                    continue
                n += 1
                if n % every == 0:
                    yield pytest.param(rec, dtype, shapes,
                                       id=f"{rec.name}-{np.dtype(dtype).name}-{shapes}")


def _batched_args(rec, dtype, shapes, variant):
    """Per-example argument lists and the batched arguments with their in_axes."""
    examples = [make_args(rec, dtype, shapes, seed=b) for b in range(B)]
    if variant == "last_only":
        first = np.stack([ex[0] for ex in examples], axis=-1)
        rest = examples[0][1:]
        per_example = [[first[..., b]] + rest for b in range(B)]
        return per_example, [first] + rest, (-1,) + (None,) * len(rest)
    batched = [np.stack([ex[i] for ex in examples]) for i in range(len(shapes))]
    return examples, batched, 0


def _loop_reference(rec, per_example):
    outs = [rec.fn(*[jnp.asarray(a) for a in ex]) for ex in per_example]
    leaves = [tree_util.tree_leaves(o) for o in outs]
    tree = tree_util.tree_structure(outs[0])
    stacked = [jnp.stack([lv[k] for lv in leaves]) for k in range(len(leaves[0]))]
    return tree, stacked


def check_vmap_matches_loop(rec, dtype, shapes, variant, use_jit=False):
    per_example, batched, in_axes = _batched_args(rec, dtype, shapes, variant)
    # A record without arguments (zeros, arange, ...) maps nothing: axis_size gives the batch.
    fn = ember.vmap(rec.fn, in_axes=in_axes, axis_size=None if batched else B)
    if use_jit:
        fn = ember.jit(fn)
    args = [jnp.asarray(a) for a in batched]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if rec.name in NOT_VMAPPABLE:
            with pytest.raises((errors.ConcretizationTypeError, TypeError, ValueError)):
                fn(*args)
            return
        tree, expected = _loop_reference(rec, per_example)
        got = fn(*args)
    got_leaves, got_tree = tree_util.tree_flatten(got)
    assert got_tree == tree
    for g, e in zip(got_leaves, expected):
        # Weak types follow the inputs; the loop stacks them, so compare values and dtypes.
        assert_same(np.asarray(g), np.asarray(e))


@pytest.mark.parametrize("rec,dtype,shapes", list(_cases("front")))
def test_vmap_front(rec, dtype, shapes):
    check_vmap_matches_loop(rec, dtype, shapes, "front")


@pytest.mark.parametrize("rec,dtype,shapes", list(_cases("last_only")))
def test_vmap_last_axis_others_unmapped(rec, dtype, shapes):
    check_vmap_matches_loop(rec, dtype, shapes, "last_only")


@pytest.mark.parametrize("rec,dtype,shapes", list(_cases("front", every=7, all_dtypes=True)))
def test_vmap_other_dtypes(rec, dtype, shapes):
    check_vmap_matches_loop(rec, dtype, shapes, "front")


@pytest.mark.parametrize("rec,dtype,shapes", list(_cases("front", every=10)))
def test_vmap_under_jit(rec, dtype, shapes):
    check_vmap_matches_loop(rec, dtype, shapes, "front", use_jit=True)
