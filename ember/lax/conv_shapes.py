"""Shape helpers of convolutions: conv_shape_tuple, conv_general_shape_tuple, ..."""

__all__: list[str] = []
