"""OpRecord and the argument generators shared by the topic modules."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

bfloat16 = np.dtype(ml_dtypes.bfloat16)

FLOATS = (np.dtype("float32"), np.dtype("float16"), bfloat16)
INTS = (np.dtype("int32"), np.dtype("int8"), np.dtype("uint8"), np.dtype("uint32"))
BOOLS = (np.dtype("bool"),)
NUMERIC = FLOATS + INTS
ALL = NUMERIC + BOOLS

UNARY_SHAPES: tuple = (((),), ((0,),), ((5,),), ((2, 3),), ((1, 4, 3),))
BINARY_SHAPES: tuple = (
    ((), ()), ((4,), (4,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3)), ((0,), (0,)),
    ((0, 3), (1, 3)),
)


def on_floats(ref: Callable) -> Callable:
    """A NumPy reference with its integer and boolean arguments converted to float64 first,
    as JAX promotes them to floats before computing (NumPy would wrap uint8 arithmetic and
    add booleans with logical or)."""
    def wrapped(*args):
        return ref(*[a if a.dtype.kind == "f" else a.astype(np.float64) for a in args])
    return wrapped


@dataclass(frozen=True)
class OpRecord:
    """One row of the op-record table.

    fn: the ember callable, called with positional array arguments (use a lambda to bind
        static parameters). ref: the NumPy reference, called with NumPy arrays.
    dtypes: argument dtypes to try (each test uses one dtype for all array arguments unless
        ``arg_dtypes`` fixes some positions). shapes: a tuple of argument-shape tuples.
    rng: how arguments are drawn (see ``make_args``). tol: absolute=relative tolerance
        (None = by dtype). out_dtype: expected output dtype as a function of the input dtype
        (None = don't check). differentiable: used by the autodiff tests.
    """

    name: str
    fn: Callable
    ref: Callable
    dtypes: Sequence[Any]
    shapes: Sequence[tuple]
    rng: str = "default"
    tol: float | None = None
    out_dtype: Callable | None = None
    differentiable: bool = False
    kind: str = "numpy"
    arg_dtypes: dict = field(default_factory=dict)
    arg_rngs: dict = field(default_factory=dict)

    @property
    def nargs(self) -> int:
        return len(self.shapes[0])


def _draw(rng: np.random.Generator, kind: str, shape: tuple, dtype: np.dtype) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        lo, hi = {
            "default": (-5, 6), "positive": (1, 6), "nonzero": (1, 6), "small": (0, 4),
            "unit": (-1, 2), "nonneg": (0, 6), "index": (0, 3),
        }.get(kind, (-5, 6))
        if dt.kind == "u":
            lo = max(lo, 0)
            if kind == "nonzero":
                lo = 1
        x = rng.integers(lo, hi, size=shape).astype(dt)
        if kind == "nonzero" and dt.kind == "i":
            x = np.where(x == 0, 1, x).astype(dt)
        return x
    if kind == "positive":
        x = rng.uniform(0.1, 3.0, size=shape)
    elif kind == "nonzero":
        x = rng.uniform(0.5, 3.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    elif kind == "unit":
        x = rng.uniform(-0.9, 0.9, size=shape)
    elif kind == "small":
        x = rng.uniform(-1.0, 1.0, size=shape)
    elif kind == "nonneg":
        x = rng.uniform(0.0, 3.0, size=shape)
    elif kind == "ge1":
        x = rng.uniform(1.1, 4.0, size=shape)
    else:
        x = rng.normal(size=shape) * 2.0
    return np.asarray(x).astype(dt)


def make_args(record: OpRecord, dtype: Any, shapes: tuple, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    args = []
    for i, shape in enumerate(shapes):
        dt = record.arg_dtypes.get(i, dtype)
        kind = record.arg_rngs.get(i, record.rng)
        args.append(_draw(rng, kind, shape, dt))
    return args


def tolerance(dtype: Any, tol: float | None = None) -> float:
    if tol is not None:
        return tol
    dt = np.dtype(dtype)
    if dt == bfloat16:
        return 3e-2
    return {np.dtype("float16"): 5e-3, np.dtype("float32"): 2e-5,
            np.dtype("float64"): 1e-12}.get(dt, 0.0)
