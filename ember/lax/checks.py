"""The ``check`` primitive: a run-time assertion on an error value, functionalized by
``ember.experimental.checkify``.

Its operands are the flat leaves of a checkify ``Error``; the ``err_tree`` param (an
``ErrorTree`` of ``ember.experimental.checkify``) rebuilds the error from them, so the rules
here stay generic. Eagerly a failed check raises ``JaxRuntimeError``; under ``vmap`` the
batched error is reduced to one element (the last failing one, as JAX); under ``jvp``
the primals are checked and there are no tangents; staged under ``jit`` without
``checkify`` it cannot be lowered (JAX's error) unless ``debug`` is set (then a no-op).
"""

from __future__ import annotations

from typing import Any

from ember import core
from ember.interpreters import batching

__all__: list[str] = []

check_p = core.MultipleResultsPrimitive("check")
check_p.has_side_effect = True  # (DCE keeps it: it has no outputs)
check_p.pp_params = lambda params: {k: v for k, v in params.items() if k != "err_tree"}

_FUNCTIONALIZATION_ERROR = (
    "Cannot abstractly evaluate a checkify.check which was not functionalized. This "
    "probably means you tried to stage (jit/scan/pmap/...) a `check` without "
    "functionalizing it through `checkify.checkify`.")


@check_p.def_impl
def _check_impl(*args: Any, err_tree: Any, debug: bool) -> list:
    if not debug:  # (a debug check only runs when checkify discharges it)
        err_tree.throw(args)
    return []


@check_p.def_abstract_eval
def _check_abstract_eval(*avals: Any, err_tree: Any, debug: bool) -> list:
    return []


@check_p.def_lowering
def _check_lowering(ctx: Any, *args: Any, err_tree: Any, debug: bool) -> list:
    if debug:
        return []
    raise ValueError(_FUNCTIONALIZATION_ERROR)


def _check_jvp(primals, tangents, *, err_tree, debug):
    check_p.bind(*primals, err_tree=err_tree, debug=debug)
    return [], []


check_p.def_jvp(_check_jvp)


def _check_batch(vals, dims, *, err_tree, debug):
    size = batching.axis_size_of(vals, dims)
    vals = [batching.match_dim(v, d, 0, size) for v, d in zip(vals, dims)]
    reduced, tree = err_tree.reduce_batched(vals)
    check_p.bind(*reduced, err_tree=tree, debug=debug)
    return [], []


check_p.def_batching(_check_batch)
