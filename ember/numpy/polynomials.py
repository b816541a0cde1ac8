"""Polynomials and 1-D convolution: poly*, polyval, vander, trim_zeros, convolve, correlate."""

__all__: list[str] = []
