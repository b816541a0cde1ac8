"""Special-function primitives of lax (bessel_i0e, igamma, polygamma, betainc, ...)."""

__all__: list[str] = []
