"""Settings as the engine reads them: typed readers for the environment, and the host's
own settings ahead of it.

Each reader raises ``SettingInvalid`` naming the variable, so a bad value stops the process
at start instead of surfacing later as a confusing error. The engine imports no Django: a
Django process installs its settings as the host's (``use_host_settings``, in
``core.apps``), so a Django setting of the same name wins over the environment (tests set
``settings.ORPHEUS_URL``); without a host the environment and the defaults are all there is.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, overload

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}

MISSING: Any = object()  # what a host answers for a setting it does not have
_host_lookup: Callable[[str], Any] | None = None


class SettingInvalid(ValueError):
    """A setting's value cannot be read; the message names the variable."""


def use_host_settings(lookup: Callable[[str], Any] | None) -> None:
    """``lookup(name)``: the host's value of ``name``, or ``MISSING``; read at every use,
    so a test that overrides a setting is seen at once."""
    global _host_lookup
    _host_lookup = lookup


def host_setting(name: str) -> Any:
    """The host's value of ``name``, or ``MISSING`` (no host, or the host lacks it)."""
    return MISSING if _host_lookup is None else _host_lookup(name)


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
    raise SettingInvalid(f"{name} must be true or false, got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    try:
        value = default if raw is None else int(raw)
    except ValueError:
        raise SettingInvalid(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise SettingInvalid(f"{name} must be at least {minimum}, got {value}")
    return value


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    try:
        return default if raw is None else float(raw)
    except ValueError:
        raise SettingInvalid(f"{name} must be a number, got {raw!r}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_int_list(name: str, default: list[int]) -> list[int]:
    try:
        return [int(item) for item in env_list(name, [str(value) for value in default])]
    except ValueError:
        raise SettingInvalid(
            f"{name} must be comma-separated integers, got {os.environ.get(name)!r}"
        ) from None


def env_secret(name: str) -> str | None:
    """Read NAME, or the contents of the file named by NAME_FILE (docker/k8s secrets)."""
    value = os.environ.get(name)
    file_name = os.environ.get(f"{name}_FILE")
    if value is not None and file_name is not None:
        raise SettingInvalid(f"set either {name} or {name}_FILE, not both")
    if file_name is None:
        return value
    try:
        return Path(file_name).read_text().strip()
    except OSError as exc:
        raise SettingInvalid(f"{name}_FILE: cannot read {file_name}: {exc}") from None


def env_renamed(name: str, old_name: str) -> str:
    """The variable to read for a setting that was renamed: ``name``, or ``old_name``
    when only the old one is set. Both set to different values is a mistake."""
    new, old = os.environ.get(name), os.environ.get(old_name)
    if new is not None and old is not None and new.strip() != old.strip():
        raise SettingInvalid(f"{old_name} is the old name of {name}: set only {name}")
    return old_name if new is None and old is not None else name
