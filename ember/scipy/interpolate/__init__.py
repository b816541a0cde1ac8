"""ember.scipy.interpolate: ``RegularGridInterpolator`` with JAX's interface."""

from ember.scipy.interpolate._regular_grid import (
    RegularGridInterpolator as RegularGridInterpolator,
)

__all__ = ["RegularGridInterpolator"]
