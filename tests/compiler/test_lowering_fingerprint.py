"""The lowering fingerprint: equal fingerprints mean equal lowered modules, a retrace gives
the same fingerprint, and whatever lowering reads (literals, params, embedded constants, the
name, sub-jaxprs) changes it; it is None for what it cannot vouch for."""

import numpy as np

import ember
import ember.numpy as jnp
from ember import core, lax
from ember.compiler.lower import INLINE_CONST_LIMIT, lower_closed_jaxpr
from ember.compiler.lowering_fingerprint import lowering_fingerprint
from ember.lax.callback import debug_callback_p, io_callback_p, pure_callback_p
from tests.op_records import ALL_RECORDS, make_args

CALLBACKS = (pure_callback_p, io_callback_p, debug_callback_p)


def fingerprint(fn, *args, name="jit_f"):
    return lowering_fingerprint(ember.make_jaxpr(fn)(*args), name)


def test_every_op_record_has_a_stable_fingerprint_naming_one_module():
    modules = {}
    for rec in ALL_RECORDS:
        for dtype in rec.dtypes[:2]:
            args = [jnp.asarray(a) for a in make_args(rec, dtype, rec.shapes[-1])]
            closed = ember.make_jaxpr(rec.fn)(*args)
            fp = lowering_fingerprint(closed, "jit_f")
            if any(e.primitive in CALLBACKS for e in closed.eqns):
                assert fp is None, rec.name  # (a Python function: nothing to vouch for)
                continue
            assert fp is not None, rec.name
            assert lowering_fingerprint(ember.make_jaxpr(rec.fn)(*args), "jit_f") == fp
            text = lower_closed_jaxpr(closed, name="jit_f").module.to_text()
            assert modules.setdefault(fp, text) == text, rec.name
    assert len(modules) > len(ALL_RECORDS)  # (many records share a module)


def test_what_lowering_reads_changes_the_fingerprint():
    x = np.ones((3, 4), np.float32)
    base = fingerprint(lambda a: a * 2.0 + 1.0, x)
    assert fingerprint(lambda a: a * 2.0 + 1.0, x) == base
    assert fingerprint(lambda a: a * 3.0 + 1.0, x) != base  # a literal
    assert fingerprint(lambda a: a * 2.0 - 1.0, x) != base  # a primitive
    assert fingerprint(lambda a: a * 2.0 + 1.0, x, name="jit_g") != base  # the module name
    assert fingerprint(lambda a: a * 2.0 + 1.0, x[:, :3]) != base  # a shape
    assert fingerprint(lambda a: a * 2.0 + 1.0, x.astype(np.float16)) != base  # a dtype
    assert fingerprint(lambda a: a * 2.0 + 1.0, x.astype(jnp.bfloat16)) != base
    assert fingerprint(lambda a: a.sum(0), x) != fingerprint(lambda a: a.sum(1), x)  # params
    assert fingerprint(lambda a: a.T @ a, x) != fingerprint(lambda a: a @ a.T, x)
    # Operands by position: the same equations reading their inputs the other way round.
    assert fingerprint(lambda a, b: a - b, x, x) != fingerprint(lambda a, b: b - a, x, x)


def test_literal_bits_count_not_just_their_text():
    x = np.ones(4, np.float32)
    assert fingerprint(lambda a: a * 0.0, x) != fingerprint(lambda a: a * -0.0, x)


def test_embedded_constants_count_by_value_hoisted_ones_by_type():
    x = np.ones(4, np.float32)
    small_a, small_b = np.arange(4, dtype=np.float32), np.arange(4, dtype=np.float32) + 1
    assert fingerprint(lambda a: a + small_a, x) != fingerprint(lambda a: a + small_b, x)
    assert fingerprint(lambda a: a + small_a, x) == fingerprint(lambda a: a + small_a.copy(), x)
    n = INLINE_CONST_LIMIT + 1
    y = np.ones(n, np.float32)
    big_a, big_b = np.arange(n, dtype=np.float32), np.arange(n, dtype=np.float32) * 2
    assert fingerprint(lambda a: a + big_a, y) == fingerprint(lambda a: a + big_b, y)
    assert fingerprint(lambda a: a + big_a, y) != fingerprint(
        lambda a: a + big_a.reshape(1, n), y)


def test_constants_of_nested_jaxprs_count_by_value_whatever_their_size():
    n = INLINE_CONST_LIMIT + 1
    y = np.ones(n, np.float32)

    def outer(c):
        inner = ember.jit(lambda a: a + c)
        return lambda a: inner(a) * 2.0

    # (The inner jit closes over a concrete array: a constant of the nested pjit's jaxpr,
    # which its lowering embeds.)
    a, b = np.arange(n, dtype=np.float32), np.arange(n, dtype=np.float32) + 1
    fa, fb = fingerprint(outer(a), y), fingerprint(outer(b), y)
    assert fa is not None and fa != fb
    assert fingerprint(outer(a.copy()), y) == fa


def with_custom_jvp(scale):
    @ember.custom_jvp
    def f(a):
        return jnp.sin(a)

    f.defjvp(lambda p, t: (f(p[0]), t[0] * scale))
    return f


def test_transformed_and_custom_rule_functions_have_fingerprints():
    x = np.linspace(-1, 1, 8).astype(np.float32)
    f = with_custom_jvp(2.0)

    @ember.custom_vjp
    def g(a):
        return jnp.cos(a)

    g.defvjp(lambda a: (g(a), a), lambda r, ct: (ct * r,))

    for fn in (f, g, ember.checkpoint(lambda a: jnp.exp(a) * a),
               ember.grad(lambda a: (f(a) * g(a)).sum()), ember.vmap(lambda a: a * a.sum())):
        closed = ember.make_jaxpr(fn)(x)
        fp = lowering_fingerprint(closed, "jit_f")
        assert fp is not None
        assert lowering_fingerprint(ember.make_jaxpr(fn)(x), "jit_f") == fp
    # The custom rule is not part of the lowering: same primal, same fingerprint.
    assert fingerprint(f, x) == fingerprint(with_custom_jvp(3.0), x)
    assert fingerprint(ember.grad(lambda a: f(a).sum()), x) != fingerprint(
        ember.grad(lambda a: with_custom_jvp(3.0)(a).sum()), x)


def test_a_users_primitive_or_a_replaced_rule_has_none():
    x = np.ones(3, np.float32)
    mine = core.Primitive("sin")  # (a user's primitive, even under an existing name)
    mine.def_abstract_eval(lambda a: a)
    mine.def_impl(np.sin)
    mine.def_lowering(lambda ctx, a: ctx.b.op("sine", a))
    assert fingerprint(lambda a: mine.bind(a), x) is None
    assert fingerprint(lambda a: jnp.sin(a), x) is not None
    rule = lax.sin_p.lowering
    try:
        lax.sin_p.def_lowering(lambda ctx, a: rule(ctx, a))
        assert fingerprint(lambda a: jnp.sin(a), x) is None
    finally:
        lax.sin_p.def_lowering(rule)
    assert fingerprint(lambda a: jnp.sin(a), x) is not None


def test_an_unknown_param_type_gives_none():
    x = np.ones(3, np.float32)
    closed = ember.make_jaxpr(lambda a: jnp.sum(a, axis=0))(x)
    eqn = closed.jaxpr.eqns[-1]
    closed.jaxpr.eqns[-1] = eqn.replace(params={**eqn.params, "axes": object()})
    assert lowering_fingerprint(closed, "jit_f") is None


def test_params_of_equal_text_but_other_types_differ():
    x = np.ones(3, np.float32)
    closed = ember.make_jaxpr(lambda a: jnp.sum(a, axis=0))(x)
    eqn = closed.jaxpr.eqns[-1]
    prints = set()
    for v in (1, 1.0, True, "1", None, (1,), [1], np.int32(1), np.dtype(np.int32)):
        closed.jaxpr.eqns[-1] = eqn.replace(params={**eqn.params, "extra": v})
        prints.add(lowering_fingerprint(closed, "jit_f"))
    assert None not in prints and len(prints) == 9
