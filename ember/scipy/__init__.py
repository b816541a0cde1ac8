"""ember.scipy: SciPy's API with JAX's semantics (``import ember.scipy as jsp``)."""
