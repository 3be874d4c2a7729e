"""Typed readers for settings from the environment.

Each raises ImproperlyConfigured naming the variable, so a bad value stops the
process at start instead of surfacing later as a confusing error.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import overload

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@overload
def env_str(name: str, default: str) -> str: ...
@overload
def env_str(name: str, default: None = None) -> str | None: ...
def env_str(name: str, default: str | None = None) -> str | None:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    try:
        value = default if raw is None else int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    try:
        return default if raw is None else float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_int_list(name: str, default: list[int]) -> list[int]:
    try:
        return [int(item) for item in env_list(name, [str(value) for value in default])]
    except ValueError:
        raise ImproperlyConfigured(
            f"{name} must be comma-separated integers, got {os.environ.get(name)!r}"
        ) from None


def env_secret(name: str) -> str | None:
    """Read NAME, or the contents of the file named by NAME_FILE (docker/k8s secrets)."""
    value = os.environ.get(name)
    file_name = os.environ.get(f"{name}_FILE")
    if value is not None and file_name is not None:
        raise ImproperlyConfigured(f"set either {name} or {name}_FILE, not both")
    if file_name is None:
        return value
    try:
        return Path(file_name).read_text().strip()
    except OSError as exc:
        raise ImproperlyConfigured(f"{name}_FILE: cannot read {file_name}: {exc}") from None
