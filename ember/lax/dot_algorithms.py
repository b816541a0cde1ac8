"""Dot algorithms and the typing names of jax.lax's dot/conv/accuracy API.

A ``DotAlgorithm`` (explicit operand and accumulation types) or a ``DotAlgorithmPreset``
(named combinations) may be given as ``precision=`` to ``dot_general`` and everything built on
it. As on XLA's CPU backend, the operands are converted to the algorithm's storage types, the
product is accumulated in its accumulation type and the result converted to the output type
(the usual result type, or ``preferred_element_type``). The CPU supports only some presets;
the others raise ``ValueError`` as JAX does on CPU.

``Tolerance`` and ``AccuracyMode`` describe the requested accuracy of transcendental functions.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Union

import numpy as np

from ember import dtypes

if TYPE_CHECKING:  # (these modules import this one)
    from ember.lax.convolution import ConvDimensionNumbers  # noqa: F401
    from ember.lax.dot import Precision  # noqa: F401


class DotAlgorithm(NamedTuple):
    """An explicit dot algorithm: operand storage types and the accumulation type.

    Example:
        >>> alg = lax.DotAlgorithm(np.float16, np.float16, np.float32)
        >>> lax.dot(jnp.ones(4), jnp.ones(4), precision=alg)
        Array(4., dtype=float32)
    """

    lhs_precision_type: Any
    rhs_precision_type: Any
    accumulation_type: Any
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False


_F8 = ("float8_e4m3fn", "float8_e5m2", "float8_e5m2fnuz", "float8_e4m3fnuz",
       "float8_e4m3b11fnuz")


class DotAlgorithmPreset(enum.Enum):
    """Named dot algorithms (``LHS_RHS_ACCUMULATION`` types; ``_Xn`` is n-pass emulation).

    Example:
        >>> x = jnp.arange(4.0)
        >>> lax.dot(x, x, precision=lax.DotAlgorithmPreset.F32_F32_F32)
        Array(14., dtype=float32)
    """

    DEFAULT = enum.auto()
    ANY_F8_ANY_F8_F32 = enum.auto()
    ANY_F8_ANY_F8_F32_FAST_ACCUM = enum.auto()
    ANY_F8_ANY_F8_ANY = enum.auto()
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = enum.auto()
    F16_F16_F16 = enum.auto()
    F16_F16_F32 = enum.auto()
    BF16_BF16_BF16 = enum.auto()
    BF16_BF16_F32 = enum.auto()
    BF16_BF16_F32_X3 = enum.auto()
    BF16_BF16_F32_X6 = enum.auto()
    BF16_BF16_F32_X9 = enum.auto()
    TF32_TF32_F32 = enum.auto()
    TF32_TF32_F32_X3 = enum.auto()
    F32_F32_F32 = enum.auto()
    F64_F64_F64 = enum.auto()

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __str__(self) -> str:
        return self.name

    @property
    def supported_lhs_types(self) -> tuple[np.dtype, ...] | None:
        """Operand types used as they are; other operand types convert to the first one."""
        name = self.name
        if name == "DEFAULT" or name.startswith("ANY_F8"):
            return None
        if name.startswith("F16_"):
            return (np.dtype(np.float16),)
        if name in ("BF16_BF16_BF16", "BF16_BF16_F32"):
            return (np.dtype(dtypes.bfloat16), np.dtype(np.float32))
        if name == "F64_F64_F64":
            return (np.dtype(np.float64),)
        return (np.dtype(np.float32),)

    @property
    def supported_rhs_types(self) -> tuple[np.dtype, ...] | None:
        return self.supported_lhs_types

    @property
    def accumulation_type(self) -> np.dtype | None:
        """The type the products are summed in (None: the operands' own)."""
        name = self.name
        if name in ("DEFAULT", "ANY_F8_ANY_F8_ANY", "ANY_F8_ANY_F8_ANY_FAST_ACCUM"):
            return None
        return np.dtype({"F16_F16_F16": np.float16, "BF16_BF16_BF16": dtypes.bfloat16,
                         "F64_F64_F64": np.float64}.get(name, np.float32))

    def supported_output_types(self, lhs_dtype: Any, rhs_dtype: Any
                               ) -> tuple[np.dtype, ...] | None:
        """Output types the algorithm can produce directly (others are converted to)."""
        name = self.name
        if name.startswith("ANY_F8_ANY_F8_F32"):
            extra = tuple(np.dtype(getattr(dtypes, n)) for n in _F8 if hasattr(dtypes, n))
            return (np.dtype(np.float32), np.dtype(np.float16),
                    np.dtype(dtypes.bfloat16)) + extra
        narrow = {"F16_F16_F32": np.float16, "BF16_BF16_F32": dtypes.bfloat16}.get(name)
        if narrow is not None:
            both = dtypes.promote_types(lhs_dtype, rhs_dtype)
            return ((np.dtype(np.float32), np.dtype(narrow)) if both == np.dtype(narrow)
                    else (np.dtype(np.float32),))
        acc = self.accumulation_type
        return None if acc is None else (acc,)


# Presets XLA's CPU backend implements (the others are rejected, as by JAX on CPU).
_CPU_PRESETS = frozenset({
    DotAlgorithmPreset.DEFAULT, DotAlgorithmPreset.F16_F16_F16, DotAlgorithmPreset.F32_F32_F32,
    DotAlgorithmPreset.F64_F64_F64, DotAlgorithmPreset.BF16_BF16_F32,
    DotAlgorithmPreset.BF16_BF16_F32_X3, DotAlgorithmPreset.BF16_BF16_F32_X6})


def is_algorithm(precision: Any) -> bool:
    return isinstance(precision, (DotAlgorithm, DotAlgorithmPreset))


def check_cpu_algorithm(algorithm: Any) -> None:
    if isinstance(algorithm, DotAlgorithmPreset) and algorithm not in _CPU_PRESETS:
        raise ValueError(f"The precision '{algorithm}' is not supported by dot_general on CPU")


def algorithm_compute_types(algorithm: Any, lhs_dtype: np.dtype, rhs_dtype: np.dtype,
                            out_dtype: np.dtype) -> tuple[np.dtype, np.dtype, np.dtype | None]:
    """(lhs type, rhs type, accumulation type or None) an algorithm computes a product in."""
    if isinstance(algorithm, DotAlgorithm):
        return (np.dtype(algorithm.lhs_precision_type), np.dtype(algorithm.rhs_precision_type),
                np.dtype(algorithm.accumulation_type))

    def pick(dt: np.dtype, allowed: Sequence[np.dtype] | None) -> np.dtype:
        return dt if allowed is None or dt in allowed else allowed[0]

    lhs = pick(np.dtype(lhs_dtype), algorithm.supported_lhs_types)
    rhs = pick(np.dtype(rhs_dtype), algorithm.supported_rhs_types)
    acc = algorithm.accumulation_type
    if algorithm.supported_output_types(lhs, rhs) is not None:
        acc = pick(np.dtype(out_dtype), algorithm.supported_output_types(lhs, rhs))
    return lhs, rhs, acc


class AccuracyMode(enum.Enum):
    """Requested accuracy of a transcendental function's implementation.

    Example:
        >>> lax.AccuracyMode.HIGHEST.name
        'HIGHEST'
    """

    HIGHEST = 1
    DEFAULT = 2


class Tolerance:
    """Tolerances requested of a transcendental function: (atol and rtol) or (atol and ulps).

    Example:
        >>> lax.Tolerance(atol=1e-6, ulps=2).ulps
        2
    """

    def __init__(self, atol: float = 0.0, rtol: float = 0.0, ulps: int = 0):
        if atol < 0.0 or rtol < 0.0 or ulps < 0:
            raise ValueError("Tolerance: tolerances must be non-negative")
        if atol == 0.0 and rtol == 0.0 and ulps == 0:
            raise ValueError("Tolerance: at least one of atol, rtol, or ulps must be set")
        self.atol, self.rtol, self.ulps = atol, rtol, ulps

    def __repr__(self) -> str:
        return f"Tolerance(atol={self.atol}, rtol={self.rtol}, ulps={self.ulps})"


# Typing names (aliases, as in jax.lax).
DotDimensionNumbers = tuple[tuple[Sequence[int], Sequence[int]],
                            tuple[Sequence[int], Sequence[int]]]
ConvGeneralDilatedDimensionNumbers = Union[tuple[str, str, str], "ConvDimensionNumbers", None]
PrecisionLike = Union[None, str, "Precision", tuple[str, str], tuple["Precision", "Precision"],
                      DotAlgorithm, DotAlgorithmPreset]

__all__ = ["AccuracyMode", "ConvGeneralDilatedDimensionNumbers", "DotAlgorithm",
           "DotAlgorithmPreset", "DotDimensionNumbers", "PrecisionLike", "Tolerance"]
