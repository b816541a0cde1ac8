"""Jaxprs: the typed IR that tracing produces, its printer, typechecker and evaluator.

Printing follows JAX's format exactly::

    { lambda ; a:f32[]. let
        b:f32[] = log a
        c:f32[] = log 2.0:f32[]
        d:f32[] = div b c
      in (d,) }
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import pretty_printer as pp
from ember.core import Primitive, ShapedArray, concrete_array, get_aval

_var_ids = itertools.count()


class Var:
    """A variable of a jaxpr; named only when printed."""

    __slots__ = ("aval", "id")

    def __init__(self, aval: ShapedArray):
        self.aval = aval
        self.id = next(_var_ids)

    def __repr__(self) -> str:
        return f"Var(id={self.id}):{self.aval._long()}"


class Literal:
    """A scalar constant written inline in a jaxpr (``2.0:f32[]``)."""

    __slots__ = ("val", "aval")

    def __init__(self, val: Any, aval: ShapedArray):
        self.val = val
        self.aval = aval

    def __repr__(self) -> str:
        return f"Literal({_literal_text(self.val)})"


Atom = Var | Literal


class JaxprEqn:
    __slots__ = ("invars", "outvars", "primitive", "params")

    def __init__(self, invars: list, outvars: list, primitive: Primitive, params: dict):
        self.invars = invars
        self.outvars = outvars
        self.primitive = primitive
        self.params = params

    def replace(self, **kw) -> JaxprEqn:
        new = JaxprEqn(self.invars, self.outvars, self.primitive, self.params)
        for k, v in kw.items():
            setattr(new, k, v)
        return new

    def __repr__(self) -> str:
        return pp_eqn(self, _NameContext()).format()


class Jaxpr:
    """Constvars, invars, a list of equations and outvars (Vars or Literals)."""

    __slots__ = ("constvars", "invars", "outvars", "eqns")

    def __init__(self, constvars: Sequence[Var], invars: Sequence[Var],
                 outvars: Sequence[Atom], eqns: Sequence[JaxprEqn]):
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.eqns = list(eqns)

    @property
    def in_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.invars]

    @property
    def out_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.outvars]

    def pretty_print(self, *, width: int = 80, print_shapes: bool = True,
                     use_color: bool = False, source_info: bool = False) -> str:
        """The jaxpr's text, as JAX prints it. (``use_color`` and ``source_info`` are
        accepted for JAX's sake: ember's text has neither.)"""
        del use_color, source_info
        ctx = _NameContext(print_shapes)
        # As JAX, the results of the top-level jaxpr's equations that nothing reads print
        # as "_" (and take no letter).
        used = {v.id for v in self.outvars if isinstance(v, Var)}
        for eqn in reversed(self.eqns):
            for v in eqn.outvars:
                if v.id not in used:
                    ctx.names[v.id] = "_"
            used.update(a.id for a in eqn.invars if isinstance(a, Var))
        return pp_jaxpr(self, ctx).format(width)

    def __str__(self) -> str:
        return self.pretty_print()

    __repr__ = __str__


class ClosedJaxpr:
    """A jaxpr together with the values of its constvars."""

    __slots__ = ("jaxpr", "consts")

    def __init__(self, jaxpr: Jaxpr, consts: Sequence[Any]):
        if len(jaxpr.constvars) != len(consts):
            raise ValueError("ClosedJaxpr: number of consts does not match constvars")
        self.jaxpr = jaxpr
        self.consts = list(consts)

    @property
    def in_avals(self) -> list[ShapedArray]:
        return self.jaxpr.in_avals

    @property
    def out_avals(self) -> list[ShapedArray]:
        return self.jaxpr.out_avals

    @property
    def eqns(self) -> list[JaxprEqn]:
        return self.jaxpr.eqns

    def pretty_print(self, **options: Any) -> str:
        """The jaxpr's text (options: those of ``Jaxpr.pretty_print``)."""
        return self.jaxpr.pretty_print(**options)

    def __str__(self) -> str:
        return self.pretty_print()

    __repr__ = __str__


def has_side_effect(eqn: JaxprEqn) -> bool:
    """Whether ``eqn`` must run even when nothing reads its outputs: its primitive has a
    side effect (a host callback), or an equation of a jaxpr among its params has one."""
    if eqn.primitive.has_side_effect:
        return True
    for value in eqn.params.values():
        for sub in (value if type(value) is tuple else (value,)):
            if isinstance(sub, ClosedJaxpr):
                sub = sub.jaxpr
            if isinstance(sub, Jaxpr) and any(has_side_effect(e) for e in sub.eqns):
                return True
    return False


# --------------------------------------------------------------------------- printing


def _encode_name(n: int) -> str:
    # 0 -> a, 25 -> z, 26 -> ba, 27 -> bb, ... (base 26 with 'a' as zero, like JAX)
    letters = []
    while True:
        n, r = divmod(n, 26)
        letters.append(chr(ord("a") + r))
        if n == 0:
            break
    return "".join(reversed(letters))


class _NameContext:
    def __init__(self, print_shapes: bool = True):
        self.names: dict[int, str] = {}
        self.fresh = 0  # (names given by suggest_same_names take no fresh one, as in JAX)
        self.print_shapes = print_shapes

    def name(self, v: Var) -> str:
        name = self.names.get(v.id)
        if name is None:
            name = self.names[v.id] = _encode_name(self.fresh)
            self.fresh += 1
        return name

    def suggest_same_names(self, for_vars: Sequence[Atom], like_vars: Sequence[Atom]) -> None:
        """Names each unnamed Var of ``for_vars`` as the Var at its position in ``like_vars``
        (each used once): the binders of a sub-jaxpr aliasing an equation's operands and
        results read as the equation's (JAX's ``suggest_same_var_names``)."""
        if len(for_vars) != len(like_vars):
            return
        used = set()
        for v, like in zip(for_vars, like_vars):
            if (isinstance(like, Var) and like.id not in used and isinstance(v, Var)
                    and v.id not in self.names):
                used.add(like.id)
                self.names[v.id] = self.name(like)


def _literal_text(val: Any, exact: bool = False) -> str:
    # exact: the value as a Python scalar, as JAX prints a literal of a fixed dtype (f32 0.1 is
    # 0.10000000149011612). A weak-typed literal stands for the Python scalar it came from,
    # which JAX prints: the shortest text of the rounded value is the closest we have.
    arr = np.asarray(val)
    if arr.shape == ():
        if arr.dtype == np.bool_:
            return str(bool(arr))
        if arr.dtype.kind in "iu":
            return str(int(arr))
        text = str(arr.item()) if exact else str(arr[()])
        if arr.dtype.kind == "f" and text.lstrip("-").isdigit():
            text += ".0"
        return text
    return str(arr)


def pp_atom(a: Atom, ctx: _NameContext) -> str:
    if isinstance(a, Literal):
        return f"{_literal_text(a.val, not a.aval.weak_type)}:{a.aval.str_short()}"
    return ctx.name(a)


def pp_var_decl(v: Var, ctx: _NameContext) -> str:
    return f"{ctx.name(v)}:{v.aval.str_short()}" if ctx.print_shapes else ctx.name(v)


def _pp_param_value(v: Any, ctx: _NameContext) -> pp.Doc:
    if isinstance(v, ClosedJaxpr):
        return pp_jaxpr(v.jaxpr, ctx)
    if isinstance(v, Jaxpr):
        return pp_jaxpr(v, ctx)
    if isinstance(v, tuple) and v and all(isinstance(x, (Jaxpr, ClosedJaxpr)) for x in v):
        # (as JAX prints a tuple of jaxprs, cond's branches: one per line when broken)
        return pp.group(pp.nest(2, pp.concat([
            pp.text("("), pp.brk(""), pp.join(pp.brk(), [_pp_param_value(x, ctx) for x in v])
        ])) + pp.brk("") + pp.text(")"))
    if isinstance(v, np.dtype):
        return pp.text(str(v))
    if isinstance(v, type) and issubclass(v, np.generic):
        return pp.text(np.dtype(v).name)
    if callable(v) and hasattr(v, "__name__"):
        return pp.text(v.__name__)
    return pp.text(str(v))


def _param_order(params: dict, first: Sequence[str]) -> list[tuple[str, Any]]:
    head = [(k, params[k]) for k in first if k in params]
    return head + sorted((k, v) for k, v in params.items() if k not in first)


def pp_params(params: dict, ctx: _NameContext, first: Sequence[str] = ()) -> pp.Doc:
    if not params:
        return pp.nil
    pairs = [pp.concat([pp.text(f"{k}="), _pp_param_value(v, ctx)])
             for k, v in _param_order(params, first)]
    return pp.group(pp.nest(2, pp.concat([pp.text("["), pp.brk(""), pp.join(pp.brk(), pairs)]))
                    + pp.brk("") + pp.text("]"))


def pp_vars(atoms: Sequence[Atom], ctx: _NameContext, decl: bool = False,
            separator: str = "") -> pp.Doc:
    """A list of variables as JAX prints it: each separator is its own group (fill-style)."""
    docs = [pp.text(pp_var_decl(a, ctx) if decl else pp_atom(a, ctx)) for a in atoms]
    return pp.nest(2, pp.group(pp.join(pp.text(separator) + pp.group(pp.brk()), docs)))


def pp_eqn(eqn: JaxprEqn, ctx: _NameContext) -> pp.Doc:
    if eqn.primitive.pp_aliased_jaxpr is not None:
        sub = eqn.params[eqn.primitive.pp_aliased_jaxpr]
        sub = sub.jaxpr if isinstance(sub, ClosedJaxpr) else sub
        ctx.suggest_same_names(sub.invars, eqn.invars)
        ctx.suggest_same_names(sub.outvars, eqn.outvars)
    lhs = pp_vars(eqn.outvars, ctx, decl=True)
    # Like JAX, the space before the operands is printed even when there are none.
    rhs = [pp.text(eqn.primitive.name),
           pp_params(eqn.params if eqn.primitive.pp_params is None
                     else eqn.primitive.pp_params(eqn.params), ctx,
                     eqn.primitive.pp_param_order),
           pp.text(" ") + pp_vars(eqn.invars, ctx)]
    if not eqn.outvars:  # (an equation run for its effect: no "=", as JAX prints it)
        return pp.concat(rhs)
    return pp.concat([lhs, pp.text(" = "), *rhs])


def pp_jaxpr(jaxpr: Jaxpr, ctx: _NameContext) -> pp.Doc:
    constvars = pp_vars(jaxpr.constvars, ctx, decl=True)
    invars = pp_vars(jaxpr.invars, ctx, decl=True)
    eqns = pp.join(pp.brk("; "), [pp_eqn(e, ctx) for e in jaxpr.eqns])
    outs = pp.concat([pp.text("("), pp_vars(jaxpr.outvars, ctx, separator=","),
                      pp.text(",)" if len(jaxpr.outvars) == 1 else ")")])
    body = pp.concat([pp.text("{ lambda "), constvars, pp.text("; "), invars, pp.text(". let"),
                      pp.nest(2, pp.brk() + eqns), pp.brk(), pp.text("in "), outs])
    return pp.group(pp.nest(2, body) + pp.text(" }"))


# --------------------------------------------------------------------------- checking


class JaxprTypeError(TypeError):
    pass


def typecheck_jaxpr(jaxpr: Jaxpr) -> None:
    """Checks that every variable is defined once before use and every type is consistent."""
    defined: set[int] = set()

    def define(v: Var):
        if not isinstance(v, Var):
            raise JaxprTypeError(f"binder {v!r} is not a Var")
        if v.id in defined:
            raise JaxprTypeError(f"variable {v!r} defined twice")
        defined.add(v.id)

    def read(a: Atom) -> ShapedArray:
        if isinstance(a, Literal):
            return a.aval
        if a.id not in defined:
            raise JaxprTypeError(f"variable {a!r} used before it is defined")
        return a.aval

    for v in jaxpr.constvars + jaxpr.invars:
        define(v)
    for i, eqn in enumerate(jaxpr.eqns):
        in_avals = [read(a) for a in eqn.invars]
        rule = eqn.primitive.abstract_eval
        if rule is not None:
            out = rule(*in_avals, **eqn.params)
            outs = out if eqn.primitive.multiple_results else [out]
            if len(outs) != len(eqn.outvars):
                raise JaxprTypeError(f"eqn {i} ({eqn.primitive.name}): wrong number of outputs")
            for o, v in zip(outs, eqn.outvars):
                if (o.shape, o.dtype) != (v.aval.shape, v.aval.dtype):
                    raise JaxprTypeError(
                        f"eqn {i} ({eqn.primitive.name}): output type {v.aval.str_short()} "
                        f"does not match the inferred {o.str_short()}")
        for v in eqn.outvars:
            define(v)
    for a in jaxpr.outvars:
        read(a)


# --------------------------------------------------------------------------- evaluation


def literal_value(a: Literal) -> Any:
    """A literal's value as evaluation binds it: a weakly typed one (``x * 2``) stays weak."""
    return concrete_array(a.val, a.aval) if a.aval.weak_type else a.val


def eval_jaxpr(jaxpr: Jaxpr, consts: Sequence[Any], *args: Any) -> list[Any]:
    """Evaluates a jaxpr by binding each primitive on the current trace."""
    if len(args) != len(jaxpr.invars):
        raise TypeError(f"eval_jaxpr: expected {len(jaxpr.invars)} arguments, got {len(args)}")
    env: dict[int, Any] = {}

    def read(a: Atom):
        return literal_value(a) if isinstance(a, Literal) else env[a.id]

    for v, x in zip(jaxpr.constvars, consts):
        env[v.id] = x
    for v, x in zip(jaxpr.invars, args):
        env[v.id] = x
    for eqn in jaxpr.eqns:
        outs = eqn.primitive.bind(*[read(a) for a in eqn.invars], **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = [outs]
        for v, x in zip(eqn.outvars, outs):
            env[v.id] = x
    return [read(a) for a in jaxpr.outvars]


def eval_closed_jaxpr(closed: ClosedJaxpr, *args: Any) -> list[Any]:
    return eval_jaxpr(closed.jaxpr, closed.consts, *args)


def literal_for(value: Any) -> Literal:
    aval = get_aval(value)
    return Literal(np.asarray(value, aval.dtype), aval)
