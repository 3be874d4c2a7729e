"""What a provider module says about itself: its name, label, adapter class, settings.

Each adapter module ends with a ``ProviderSpec`` (``PROVIDER``); ``registry.py`` only maps
names to those. A provider's settings are read from the environment by the provider
itself (``Setting``), so ``platform_site/settings.py`` never lists them; a Django setting
of the same name wins (tests set ``settings.ORPHEUS_URL``). Bad values are reported by
the system checks (``sessions_app.checks``) when the platform starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured

from platform_site.env import env_secret, env_str
from sessions_app.providers.base import Capabilities

Kind = Literal["stt", "llm", "tts", "tools"]


@dataclass(frozen=True)
class Setting:
    """One environment variable of a provider (``ORPHEUS_URL``), read when it is used."""

    name: str
    default: Any = None
    # How the text is read (``platform_site.env``'s readers); raises ImproperlyConfigured.
    read: Callable[[str, Any], Any] = env_str

    def value(self) -> Any:
        if hasattr(django_settings, self.name):
            return getattr(django_settings, self.name)
        return self.read(self.name, self.default)


def secret_setting(name: str) -> Setting:
    """A key: ``NAME``, or the file ``NAME_FILE`` names (docker/k8s secrets)."""
    return Setting(name, read=lambda name, _default: env_secret(name))


def no_options() -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class ProviderSpec:
    kind: Kind
    name: str  # as settings, agents and the API name it (``STT_PROVIDER=assemblyai``)
    label: str  # as the dashboard shows it
    adapter: type
    settings: tuple[Setting, ...] = ()
    # The adapter's constructor options from the platform's settings.
    options: Callable[[], dict[str, Any]] = no_options
    # A workspace's own account (its key, Orpheus's URL) in place of the platform's.
    own_account: Callable[[Any], dict[str, Any]] | None = None
    # The scripted fakes: chosen only where ALLOW_FAKE_PROVIDERS is on (the tests).
    test_only: bool = False

    @property
    def capabilities(self) -> Capabilities:
        capabilities: Capabilities = getattr(self.adapter, "capabilities", Capabilities())
        return capabilities

    def problems(self) -> list[str]:
        """Its settings' bad values, in words naming the variable (empty: all good)."""
        found = []
        for setting in self.settings:
            try:
                setting.value()
            except ImproperlyConfigured as exc:
                found.append(str(exc))
        return found

    def platform_account(self) -> bool:
        """Whether the platform's environment gives this provider a key of its own."""
        return bool(self.options().get("api_key"))


def adapter_spec(kind: Kind, name: str, adapter: type) -> ProviderSpec:
    """A spec for a bare adapter class (tests register their own scripted ones)."""
    return ProviderSpec(kind=kind, name=name, label=name, adapter=adapter)
