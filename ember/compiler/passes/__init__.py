"""Optimization passes over HLO modules, one file per pass family.

A pass is a function ``fn(module) -> bool`` (True when it changed the module) registered
under its name with ``@hlo_pass("name")``; ``ember.compiler.pipeline`` runs them in order.
"""

from __future__ import annotations

from collections.abc import Callable

PASSES: dict[str, Callable] = {}


def hlo_pass(name: str):
    """Registers ``fn`` as the pass called ``name``."""
    def register(fn: Callable) -> Callable:
        fn.pass_name = name
        PASSES[name] = fn
        return fn
    return register
