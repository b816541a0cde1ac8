"""ember.scipy.optimize: ``minimize`` (BFGS) with JAX's interface."""

from ember.scipy.optimize._minimize import OptimizeResults as OptimizeResults
from ember.scipy.optimize._minimize import minimize as minimize

__all__ = ["OptimizeResults", "minimize"]
