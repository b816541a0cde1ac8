"""custom_linear_solve and custom_root: user-supplied solvers with implicit derivatives."""

__all__: list[str] = []
