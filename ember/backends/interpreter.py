"""The interpreter backend: runs an optimized HLO module with the NumPy evaluator.

It is the reference backend: every opcode's semantics is the evaluator's
(``ember.compiler.evaluator``), fusions are evaluated by running their fused computation.
Compilation only records the module, so it costs nothing.

Example:
    >>> exe = InterpreterBackend().compile(module)
    >>> outs = exe.execute([np.arange(3, dtype=np.float32)])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ember.compiler.evaluator import Plan
from ember.compiler.hlo import Module


class InterpreterExecutable:
    """An HLO module ready to run; ``execute`` returns the entry's outputs as a list."""

    __slots__ = ("module", "entry", "out_shapes", "_tuple_root", "_plan")

    def __init__(self, module: Module):
        self.module = module
        self.entry = module.entry
        self._plan = Plan(self.entry)
        root_shape = self.entry.root.shape
        self._tuple_root = root_shape.is_tuple
        self.out_shapes = list(root_shape.tuple_shapes) if root_shape.is_tuple else [root_shape]

    def execute(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Runs the entry computation on ``args`` (one array per parameter)."""
        out = self._plan.run(args)
        outs = list(out) if self._tuple_root else [out]
        # The evaluator's rules give exactly the instruction's shape; NumPy scalars (0-d
        # results of some ufuncs) are turned back into arrays of the exact dtype.
        for i, (value, shape) in enumerate(zip(outs, self.out_shapes)):
            if type(value) is not np.ndarray or value.dtype != shape.dtype:
                outs[i] = np.asarray(value, dtype=shape.dtype)
        return outs


class InterpreterBackend:
    """Compiles modules for the NumPy evaluator (platform ``cpu``)."""

    name = "interpreter"
    platform = "cpu"

    def compile(self, module: Module,
                dump: Callable[[str, str], None] | None = None) -> InterpreterExecutable:
        """An executable for ``module`` (an already optimized module: nothing is rewritten)."""
        return InterpreterExecutable(module)
