"""Settings from the environment, read strictly: a value that cannot be meant refuses to start
(as healthchecks' envbool does) rather than falling back to a default."""

import os

from django.core.exceptions import ImproperlyConfigured


def envbool(name: str, default: str) -> bool:
    """Read a boolean; refuse anything but True/False so a typo cannot silently flip a switch."""
    value = os.environ.get(name, default)
    if value not in ("True", "False"):
        raise ImproperlyConfigured(f"{name} must be True or False, not {value!r}")
    return value == "True"


def envfloat(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError as e:
        raise ImproperlyConfigured(f"{name} must be a number") from e


def envint(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError as e:
        raise ImproperlyConfigured(f"{name} must be an integer") from e
