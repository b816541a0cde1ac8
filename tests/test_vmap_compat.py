"""vmap's API against JAX's: axis specifications, errors, compositions, and the functions
whose differences a differential hunt of vmapped programs turned up.

Expected values are NumPy references or literals computed with JAX 0.10; the last group runs
the same small programs through JAX (the ``jax`` fixture skips it where JAX is absent).
"""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax

X = np.arange(12.0, dtype=np.float32).reshape(3, 4)


def _eq(got, want):
    got = np.asarray(got)
    assert got.shape == np.shape(want) and got.dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


# ---------------------------------------------------------------- axis specifications


def test_in_axes_forms():
    # a list at the top is a tuple; dict and nested prefixes broadcast over their subtrees
    _eq(ember.vmap(lambda a, b: a + b, in_axes=[1, None])(X, np.float32(1)), X.T + 1)
    d = {"a": X, "b": X[0]}
    _eq(ember.vmap(lambda d: d["a"] * d["b"], in_axes=({"a": 0, "b": None},))(d), X * X[0])
    _eq(ember.vmap(lambda t: t[0] - t[1][0], in_axes=((-1, (-2,)),))((X, (X.T,))),
        np.zeros((4, 3), np.float32))


def test_kwargs_are_mapped_over_axis_0_whatever_in_axes_says():
    f = ember.vmap(lambda x, y: x * y, in_axes=(None,))
    _eq(f(np.float32(2), y=X), 2 * X)
    with pytest.raises(ValueError, match="rank should be at least 1"):
        ember.vmap(lambda x, y: x * y)(X, y=1.0)


def test_out_axes_and_unbatched_outputs():
    out = ember.vmap(lambda x: (x, x.sum(), 1.0, None), out_axes=(-1, 0, None, 0))(X)
    _eq(out[0], X.T)
    _eq(out[1], X.sum(1))
    assert out[2] == 1.0 and out[3] is None
    with pytest.raises(ValueError, match=r"at vmap out_axes\[1\], got axis spec None but "
                                         "output was batched on axis 0"):
        ember.vmap(lambda x: (x, x), out_axes=(0, None))(X)


def test_axis_size_and_sizes_errors():
    _eq(ember.vmap(lambda: jnp.ones(2), axis_size=3)(), np.ones((3, 2), np.float32))
    with pytest.raises(ValueError, match="axis_size must be specified"):
        ember.vmap(lambda x: x, in_axes=None)(X)
    with pytest.raises(ValueError, match=r"inconsistent sizes for array axes to be mapped:\n"
                                         r"  \* the `axis_size` argument was 4;\n"
                                         r"  \* one axis had size 3: axis 0 of argument x"):
        ember.vmap(lambda x: x, axis_size=4)(X)
    with pytest.raises(TypeError, match="in_axes must be an int, None, or a tuple"):
        ember.vmap(lambda x: x, in_axes=np.int32(0))(X)


def test_axis_name_and_spmd_axis_name_are_accepted():
    f = ember.vmap(lambda x: x * 2, axis_name="i", spmd_axis_name="d")
    _eq(f(X), 2 * X)


def test_zero_size_batch():
    _eq(ember.vmap(lambda x: jnp.sort(x) @ x)(np.ones((0, 3), np.float32)),
        np.zeros((0,), np.float32))
    _eq(ember.vmap(ember.grad(lambda x: jnp.sin(x).sum()))(np.ones((0, 3), np.float32)),
        np.zeros((0, 3), np.float32))


# ---------------------------------------------------------------- compositions


def _custom_vjp_fn():
    @ember.custom_vjp
    def g(x, y):
        return jnp.sin(x) * y

    def fwd(x, y):
        return g(x, y), (jnp.cos(x), y, x)

    def bwd(res, ct):
        c, y, x = res
        return ct * c * y * 10, ct * jnp.sin(x)

    g.defvjp(fwd, bwd)
    return g


def test_vmap_grad_of_custom_vjp_with_unmapped_argument():
    g = _custom_vjp_fn()
    y = np.float32([1.0, 2.0, 3.0, 4.0])
    dx, dy = ember.vmap(ember.grad(lambda x, y: g(x, y).sum(), argnums=(0, 1)),
                        in_axes=(0, None))(X, y)
    _eq(dx, np.cos(X) * y * 10)
    _eq(dy, np.sin(X))
    _eq(ember.jacrev(g)(X[1], y), np.diag(np.cos(X[1]) * y * 10))


def test_jit_vmap_nested_and_grad_of_vmap():
    f = ember.jit(ember.vmap(ember.vmap(lambda a, b: a * b, in_axes=(0, None)),
                             in_axes=(None, 0)))
    _eq(f(np.arange(3.0, dtype=np.float32), np.arange(4.0, dtype=np.float32)),
        np.outer(np.arange(4.0), np.arange(3.0)).astype(np.float32))
    w = np.float32([1.0, -1.0, 2.0, 0.5])
    gw = ember.grad(lambda w: ember.vmap(lambda r: jnp.dot(r, w) ** 2)(X).sum())(w)
    _eq(gw, (2 * (X @ w)[:, None] * X).sum(0))


# ---------------------------------------------------------------- differences found


def test_select_takes_any_sequence_and_nonboolean_conditions():
    x = jnp.arange(4)
    # conditions are cast to bool (nonzero is true), as in JAX
    _eq(jnp.select([x, x - 2], [x * 10, x * 100], -1), np.int32([0, 10, 20, 30]))
    _eq(jnp.select([x * 0.5], [x * 10]), np.int32([0, 10, 20, 30]))
    # an array's rows are its entries
    _eq(jnp.select(jnp.stack([x > 1, x > 2]), jnp.stack([x, -x])), np.int32([0, 0, 2, 3]))
    _eq(ember.vmap(jnp.select)(X.reshape(3, 2, 2) % 3, np.arange(12).reshape(3, 2, 2)),
        np.int32([[2, 1], [4, 5], [8, 11]]))
    with pytest.raises(TypeError, match="select: condlist and choicelist must be sequences"):
        jnp.select(3, [x])


def test_take_along_axis_defaults_to_the_last_axis():
    a = np.arange(12).reshape(3, 4)
    i = np.array([[0, 3], [1, 1], [2, 0]])
    _eq(jnp.take_along_axis(a, i), np.take_along_axis(a, i, axis=-1).astype(np.int32))


def test_tensordot_and_vdot_errors_and_negative_axes():
    a, b = np.ones((3, 4), np.float32), np.ones((4, 2), np.float32)
    _eq(jnp.tensordot(a, b, -1), np.tensordot(a, b, 0))  # NumPy and JAX: nothing contracted
    with pytest.raises(TypeError, match="tensordot: shape mismatch"):
        jnp.tensordot(a, a, 1)
    with pytest.raises(TypeError, match="tensordot: axes=3 must be at most the ranks"):
        jnp.tensordot(a, b, 3)
    with pytest.raises(TypeError, match="tensordot: repeated axis"):
        jnp.tensordot(np.ones((3, 3)), np.ones((3, 3)), ([0, 0], [0, 1]))
    with pytest.raises(TypeError, match="vdot: arrays of shapes"):
        jnp.vdot(np.ones(4), np.ones(5))
    # under vmap too (a batched operand against an unbatched one of the wrong size)
    with pytest.raises(TypeError, match="tensordot: shape mismatch"):
        ember.vmap(lambda x, y: jnp.tensordot(x, y, 1), in_axes=(1, None))(a, b)


def test_broadcasting_error_class_follows_jax():
    # Different ranks: JAX broadcasts the ranks first and raises ValueError; equal ranks reach
    # the lax function and raise TypeError.
    with pytest.raises(ValueError, match=r"Incompatible shapes for broadcasting: "
                                         r"shapes=\[\(4,\), \(4, 5\)\]"):
        jnp.maximum(jnp.ones(4), jnp.ones((4, 5)))
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        ember.vmap(jnp.add)(np.ones((3, 4)), np.ones((3, 4, 5)))
    with pytest.raises(TypeError, match="add got incompatible shapes for broadcasting"):
        jnp.add(jnp.ones(3), jnp.ones(4))


# ---------------------------------------------------------------- against JAX


def _programs(api, np_, lax_):
    """name -> (function, arguments); the same code for ember and JAX."""
    x = np_.asarray(X)
    i = np_.asarray(np.array([[0, 3], [1, -1], [2, 5]], np.int32))
    return {
        "ds_batched_start": (api.vmap(lambda r, s: lax_.dynamic_slice(r, (s[0],), (2,))),
                             (x, i)),
        "dus_batched_start": (api.vmap(lambda r, s: lax_.dynamic_update_slice(
            r, np_.ones(2), (s[1],)), in_axes=(1, 0)), (x.T, i)),
        "gather_batched_idx": (api.vmap(lambda r, s: r[s], in_axes=(None, 0)), (x, i)),
        "scatter_add": (api.vmap(lambda r, s: r.at[s].add(1.0), in_axes=(1, 0)), (x.T, i)),
        "topk_axis1": (api.vmap(lambda r: lax_.top_k(r, 2), in_axes=1), (x,)),
        "cumsum_keepdims": (api.vmap(lambda r: (np_.cumsum(r), r.max(keepdims=True)),
                                     in_axes=-1, out_axes=-1), (x,)),
        "matmul_unbatched": (api.vmap(lambda r, m: r @ m, in_axes=(0, None)), (x, x.T)),
        "einsum": (api.vmap(lambda r, m: np_.einsum("i,ij->j", r, m), in_axes=(0, None)),
                   (x, x.T)),
        "jacfwd_jacrev": (lambda r: (api.jacfwd(np_.sin)(r), api.jacrev(np_.cos)(r)), (x[0],)),
        "vmap_jit_grad": (api.vmap(api.jit(api.grad(lambda r: (np_.sin(r) * r).sum()))),
                          (x,)),
        "const_outputs": (api.vmap(lambda r: (1.0, 2, np_.float32(3.0))), (x,)),
    }


def test_vmap_programs_against_jax(jax):
    import jax.numpy as jjnp

    ours = _programs(ember, jnp, lax)
    theirs = _programs(jax, jjnp, jax.lax)
    for name, (f, args) in ours.items():
        got = ember.tree_util.tree_leaves(f(*args))
        jf, jargs = theirs[name]
        want = jax.tree_util.tree_leaves(jax.jit(jf)(*jargs))  # one compile per program
        assert len(got) == len(want), name
        for g, w in zip(got, want):
            assert np.asarray(g).dtype == np.asarray(w).dtype, name
            assert getattr(getattr(g, "aval", None), "weak_type", None) == \
                getattr(getattr(w, "aval", None), "weak_type", None), name
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, err_msg=name)
