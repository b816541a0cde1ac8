"""The optimization pipeline: named passes run in order, with optional verification and dumps.

``optimize(module, dump=callback)`` runs the default pipeline in place: the simplification
passes repeat until none changes the module (bounded), then fusion runs. After each pass the
verifier runs when ``verify`` is true, and ``dump(stage_name, module_text)`` is called when a
dump callback is given (``EMBER_DUMP_TO`` uses it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

from ember.compiler.hlo import Module
from ember.compiler.passes import PASSES

# Modules that define passes (imported on first use so each registers itself).
_PASS_MODULES = (
    "ember.compiler.passes.dce",
    "ember.compiler.passes.while_loop_simplifier",
    "ember.compiler.passes.cse",
    "ember.compiler.passes.constant_folding",
    "ember.compiler.passes.algebraic_simplifier",
    "ember.compiler.passes.fusion",
)

SIMPLIFICATION_PASSES = ("algebraic_simplifier", "constant_folding", "cse",
                         "while_loop_simplifier", "dce")
FINAL_PASSES = ("fusion", "dce")
MAX_ITERATIONS = 8


def load_passes() -> dict[str, Callable]:
    for name in _PASS_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:  # a pass family not written yet
            if e.name != name:
                raise
    return PASSES


def run_pass(module: Module, name: str, verify: bool = False,
             dump: Callable[[str, str], None] | None = None, step: int = 0) -> bool:
    """Runs the pass ``name`` once; returns whether it changed the module."""
    passes = load_passes()
    if name not in passes:
        raise KeyError(f"unknown HLO pass {name!r}; known: {sorted(passes)}")
    changed = bool(passes[name](module))
    if verify:
        from ember.compiler.verifier import verify_module
        verify_module(module)
    if dump is not None:
        dump(f"{step:02d}.after_{name}", module.to_text())
    return changed


def optimize(module: Module, verify: bool = False,
             dump: Callable[[str, str], None] | None = None,
             passes: Sequence[str] | None = None, fuse: bool = True) -> Module:
    """Optimizes ``module`` in place with the default pipeline (or ``passes``, once each)."""
    available = load_passes()
    if dump is not None:
        dump("00.before_optimizations", module.to_text())
    step = 1
    if passes is not None:
        for name in passes:
            run_pass(module, name, verify, dump, step)
            step += 1
        return module
    for _ in range(MAX_ITERATIONS):
        changed = False
        for name in SIMPLIFICATION_PASSES:
            if name in available:
                changed |= run_pass(module, name, verify, dump, step)
                step += 1
        if not changed:
            break
    if fuse:
        for name in FINAL_PASSES:
            if name in available:
                run_pass(module, name, verify, dump, step)
                step += 1
    return module
