"""Window functions and numeric helpers: bartlett, blackman, hamming, hanning, kaiser, i0, spacing, unwrap, gradient, bitwise_count, packbits, unpackbits, sort_complex."""

__all__: list[str] = []
