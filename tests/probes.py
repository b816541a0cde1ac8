"""Running a behaviour probe for a comparison with JAX: its outputs or its exception."""

import warnings

import numpy as np


def run_probe(fn):
    """``(outputs as a list, None)`` or ``(None, the exception fn raised)``, with NumPy's
    floating-point warnings silenced."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = fn()
        except Exception as ex:  # noqa: BLE001
            return None, ex
    return (list(out) if isinstance(out, (tuple, list)) else [out]), None
