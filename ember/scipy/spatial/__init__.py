"""ember.scipy.spatial: ``transform`` (Rotation, Slerp)."""

from ember.scipy.spatial import transform as transform

__all__ = ["transform"]
