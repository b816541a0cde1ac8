"""Control flow against JAX: differences found by running the same programs under ember and
JAX 0.10.2 (values, dtypes, errors, jaxpr text), each fixed and pinned here."""

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax

BACKENDS = ("cpu", "interpreter")
XS = np.array([0.5, -1.2, 2.0], np.float32)


def _eqns(f, *args):
    return ember.make_jaxpr(f)(*args).jaxpr.eqns


# --------------------------------------------------------------------------- scan forwarding


def _passthrough(xs, w):
    # carry 0 returned unchanged; ys: an x, a closed-over value, the unchanged carry
    return lax.scan(lambda c, x: ((c[0], c[1] + x), (x, w, c[0])), (w, 0.0), xs)


def test_scan_passthrough_carry_becomes_const_and_x_ys_are_forwarded():
    text = str(ember.make_jaxpr(_passthrough)(XS, 2.0))
    assert text == """\
{ lambda ; a:f32[3] b:f32[]. let
    c:f32[] d:f32[3] e:f32[3] = scan[
      jaxpr={ lambda ; f:f32[] g:f32[] h:f32[] i:f32[]. let
          j:f32[] = convert_element_type[new_dtype=float32 weak_type=False] h
          k:f32[] = add j i
        in (k, g, f) }
      length=3
      num_carry=1
      num_consts=2
      reverse=False
      unroll=1
    ] b b 0.0:f32[] a
  in (b, c, a, d, e) }"""  # (JAX's text)


@pytest.mark.parametrize("mode", ("eager",) + BACKENDS)
def test_scan_forwarded_outputs_values(mode):
    f = _passthrough if mode == "eager" else ember.jit(_passthrough, backend=mode)
    (w, s), (ys_x, ys_w, ys_c) = f(XS, 2.0)
    np.testing.assert_allclose(w, 2.0)
    np.testing.assert_allclose(s, XS.sum(), rtol=1e-6)
    np.testing.assert_array_equal(ys_x, XS)
    np.testing.assert_array_equal(ys_w, [2.0] * 3)
    np.testing.assert_array_equal(ys_c, [2.0] * 3)
    assert w.weak_type and not ys_x.weak_type  # (a Python scalar's carry stays weak)


def test_scan_forwarded_outputs_grad_and_vmap():
    def loss(xs, w):
        (w2, s), (a, b, c) = _passthrough(xs, w)
        return (w2 * s + (a * a).sum() + (b * c).sum())

    gx, gw = ember.grad(loss, (0, 1))(XS, 2.0)
    np.testing.assert_allclose(gx, 2.0 + 2 * XS, rtol=1e-6)
    np.testing.assert_allclose(gw, XS.sum() + 3 * 2 * 2.0, rtol=1e-6)
    ws = np.array([1.0, 3.0], np.float32)
    (w, s), (a, b, c) = ember.vmap(_passthrough, (None, 0))(XS, ws)
    np.testing.assert_array_equal(w, ws)
    np.testing.assert_array_equal(a, np.broadcast_to(XS, (2, 3)))
    np.testing.assert_array_equal(c, np.repeat(ws[:, None], 3, 1))


def test_grad_scan_does_not_stack_a_copy_of_xs_as_residual(jax):
    # The residual x of c * x is the scanned array itself: the forward scan returns only its
    # carry and ys (JAX's forwarding), the backward scan reads xs directly.
    f = ember.grad(lambda c0, xs: lax.scan(lambda c, x: (c * x, x * c), c0, xs)[0])
    closed = ember.make_jaxpr(f)(1.0, XS)
    fwd, bwd = closed.jaxpr.eqns
    assert [str(v.aval) for v in fwd.outvars] == ["float32[]", "float32[3]"]
    assert bwd.invars[-1] is closed.jaxpr.invars[1]
    np.testing.assert_allclose(f(1.0, XS), np.prod(XS), rtol=1e-6)
    np.testing.assert_allclose(ember.jit(f, backend="interpreter")(1.0, XS), np.prod(XS),
                               rtol=1e-6)

    # reversed, with an x residual next to a stacked one, under vmap
    def g(np_, lax_):
        return lambda w, xs: lax_.scan(lambda c, x: (np_.sin(c * w + x) * x, c), 0.3, xs,
                                       reverse=True)[0]
    ws = np.array([0.7, -0.2], np.float32)
    got = ember.vmap(ember.grad(g(jnp, lax), (0, 1)), (0, None))(ws, XS)
    want = jax.jit(jax.vmap(jax.grad(g(jax.numpy, jax.lax), (0, 1)), (0, None)))(ws, XS)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- scan API


def test_scan_length_is_converted_with_int_as_jax():
    carry, ys = lax.scan(lambda c, _: (c + 1.0, c), 0.0, None, length=2.0)
    np.testing.assert_array_equal(ys, [0.0, 1.0])
    np.testing.assert_array_equal(carry, 2.0)
    _, ys = lax.scan(lambda c, _: (c, c), 0.0, None, length=np.int64(3))
    assert ys.shape == (3,)


def test_scan_no_leading_axis_lists_every_such_value():
    with pytest.raises(ValueError, match=r"^scan got value with no leading axis to scan over: "
                                         r"1\.0, 2\.0\.$"):
        lax.scan(lambda c, x: (c + x, x), 0.0, [1.0, 2.0])


def test_scan_carry_structure_errors_as_jax(jax):
    cases = [
        lambda lax_: lax_.scan(lambda c, x: ((c, c), c), 0.0, XS),
        lambda lax_: lax_.scan(lambda c, x: ((c[0], c[1]), c[0]), [0.0, 1.0], XS),
        lambda lax_: lax_.scan(lambda carry, x: ({"a": carry["a"], "c": 1.0}, x),
                               {"a": 0.0, "b": 1.0}, XS),
        lambda lax_: lax_.scan(lambda c, x: ((c[0], (c[1], c[1])), x), (0.0, 1.0), XS),
    ]
    for case in cases:
        with pytest.raises(TypeError) as want:
            case(jax.lax)
        with pytest.raises(TypeError) as got:
            case(lax)
        expected = str(want.value).replace("jax._src.core.ShapedArray", "ember.core.ShapedArray")
        assert str(got.value) == expected


def test_scan_body_output_not_a_pair_message():
    with pytest.raises(TypeError, match=r"^scan body output must be a pair, got ~float32\[\]\.$"):
        lax.scan(lambda c, x: c, 0.0, XS)
    with pytest.raises(TypeError, match=r"got \(ShapedArray\(float32\[\], weak_type=True\), "
                                        r"ShapedArray\(float32\[\]\), ShapedArray"):
        lax.scan(lambda c, x: (c, x, x), 0.0, XS)


def test_map_with_batch_size_dividing_the_length_slices_nothing():
    prims = [e.primitive.name for e in _eqns(lambda xs: lax.map(jnp.sin, xs, batch_size=2),
                                             np.arange(4.0, dtype=np.float32))]
    assert prims == ["reshape", "scan", "reshape"]
    np.testing.assert_allclose(lax.map(jnp.sin, np.arange(5.0, dtype=np.float32),
                                       batch_size=2), np.sin(np.arange(5.0)), rtol=1e-6)


# --------------------------------------------------------------------------- cond


def test_cond_closed_over_values_in_true_fun_first_order():
    text = str(ember.make_jaxpr(
        lambda x, y: lax.cond(x > 0, lambda: x * y, lambda: y))(1.0, 2.0))
    assert text == """\
{ lambda ; a:f32[] b:f32[]. let
    c:bool[] = gt a 0.0:f32[]
    d:i32[] = convert_element_type[new_dtype=int32 weak_type=False] c
    e:f32[] = cond[
      branches=(
        { lambda ; f:f32[] g:f32[]. let  in (g,) }
        { lambda ; h:f32[] i:f32[]. let j:f32[] = mul h i in (j,) }
      )
    ] d a b
  in (e,) }"""  # (JAX's text)
    f = ember.jit(lambda x, y: lax.cond(x > 0, lambda: x * y, lambda: y), backend="interpreter")
    assert float(f(3.0, 2.0)) == 6.0 and float(f(-3.0, 2.0)) == 2.0


# --------------------------------------------------------------------------- jaxpr text


def test_unused_results_of_top_level_equations_print_as_underscore():
    text = str(ember.make_jaxpr(lambda x: lax.fori_loop(0, 3, lambda i, c: c * i, x))(1.0))
    assert text == """\
{ lambda ; a:f32[]. let
    _:i32[] b:f32[] = scan[
      jaxpr={ lambda ; c:i32[] d:f32[]. let
          e:i32[] = add c 1:i32[]
          f:f32[] = convert_element_type[new_dtype=float32 weak_type=True] c
          g:f32[] = mul d f
        in (e, g) }
      length=3
      num_carry=2
      num_consts=0
      reverse=False
      unroll=1
    ] 0:i32[] a
  in (b,) }"""  # (JAX's text: only the top level's unused binders are "_")


def test_linearize_drops_what_no_output_needs():
    # The scan's tangent ys are not an output: the linear jaxpr neither stacks them nor
    # keeps residuals for them (as JAX's).
    _, f_jvp = ember.linearize(
        lambda w: lax.scan(lambda c, x: (jnp.sin(c * w + x), c), 0.0, XS)[0], 1.0)
    assert str(ember.make_jaxpr(f_jvp)(1.0)) == """\
{ lambda a:f32[3] b:f32[3]; c:f32[]. let
    d:f32[] = scan[
      jaxpr={ lambda ; e:f32[] f:f32[] g:f32[] h:f32[] i:f32[]. let
          j:f32[] = mul g e
          k:f32[] = mul h f
          l:f32[] = add_any j k
          m:f32[] = convert_element_type[new_dtype=float32 weak_type=False] l
          n:f32[] = mul m i
        in (n,) }
      length=3
      num_carry=1
      num_consts=2
      reverse=False
      unroll=1
    ] 1.0:f32[] c 0.0:f32[] a b
  in (d,) }"""  # (JAX's text)
    c, w = 0.0, 1.0
    dc = 0.0
    for x in XS:  # forward-mode by hand
        dc = np.cos(c * w + x) * (dc * w + c)
        c = np.sin(c * w + x)
    np.testing.assert_allclose(f_jvp(1.0), dc, rtol=1e-5)
