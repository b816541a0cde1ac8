"""ember.scipy.sparse: ``linalg``, the iterative solvers of ``jax.scipy.sparse.linalg``."""

from ember.scipy.sparse import linalg as linalg

__all__ = ["linalg"]
