"""ember.version: ember's version, with the names of ``jax.version``.

Example:
    >>> ember.version.__version__
    '0.1.0'
    >>> ember.version.__version_info__
    (0, 1, 0)
"""

from __future__ import annotations

_version = "0.1.0"
__version__ = _version
# ember has no separate compiled library (``jaxlib``): its minimum is itself.
_minimum_jaxlib_version = _version


def _version_as_tuple(version_str: str) -> tuple[int, ...]:
    """The numeric parts of a version string: ``"0.4.16.dev2023"`` -> ``(0, 4, 16)``.

    Example:
        >>> _version_as_tuple("0.1.0")
        (0, 1, 0)
    """
    return tuple(int(part) for part in version_str.split(".") if part.isdigit())


__version_info__ = _version_as_tuple(__version__)
_minimum_jaxlib_version_info = _version_as_tuple(_minimum_jaxlib_version)
