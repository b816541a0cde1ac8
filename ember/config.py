"""Global settings, read and written with JAX's option names (``jax_enable_x64``, ...)."""

from __future__ import annotations

import os
from typing import Any


def _env_flag(*names: str, default: bool = False) -> bool:
    for name in names:
        value = os.environ.get(name)
        if value is not None:
            return value.strip().lower() in ("1", "true", "yes", "on")
    return default


class Config:
    """Holds ember's settings; ``ember.config.update("jax_enable_x64", True)`` changes one.

    Example:
        >>> import ember
        >>> ember.config.update("jax_enable_x64", False)
        >>> ember.config.jax_enable_x64
        False
    """

    def __init__(self) -> None:
        self._values: dict[str, Any] = {
            "jax_enable_x64": _env_flag("JAX_ENABLE_X64", "EMBER_ENABLE_X64"),
            "jax_log_compiles": _env_flag("JAX_LOG_COMPILES"),
            "jax_disable_jit": _env_flag("JAX_DISABLE_JIT"),
            "jax_platform_name": "",
            "jax_default_backend": os.environ.get("EMBER_BACKEND", ""),
            "jax_numpy_rank_promotion": "allow",
            # The on-disk cache of compiled object code (ember.backends.cpu.object_cache);
            # a None directory means default_cache_dir() ($EMBER_CACHE_DIR or the user's).
            "jax_enable_compilation_cache": _env_flag("EMBER_ENABLE_COMPILATION_CACHE",
                                                      "JAX_ENABLE_COMPILATION_CACHE",
                                                      default=True),
            "jax_compilation_cache_dir": None,
        }
        self._listeners: list = []
        # A plain attribute (not a property): read on every dtype decision of the eager path.
        self.x64_enabled: bool = bool(self._values["jax_enable_x64"])
        # Likewise read on every jitted call.
        self.jit_disabled: bool = bool(self._values["jax_disable_jit"])

    def update(self, name: str, value: Any) -> None:
        """Sets the option ``name`` to ``value``; unknown names raise AttributeError."""
        if name not in self._values:
            raise AttributeError(f"config.update: unrecognized config option {name!r}")
        self._values[name] = value
        if name == "jax_enable_x64":
            self.x64_enabled = bool(value)
        elif name == "jax_disable_jit":
            self.jit_disabled = bool(value)
        for listener in self._listeners:
            listener(name, value)

    def read(self, name: str) -> Any:
        if name not in self._values:
            raise AttributeError(f"config.read: unrecognized config option {name!r}")
        return self._values[name]

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values", {})
        if name in values:
            return values[name]
        raise AttributeError(name)


config = Config()
