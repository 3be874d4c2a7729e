"""What a provider module says about itself: its name, label, adapter class, settings.

Each adapter module ends with a ``ProviderSpec`` (``PROVIDER``); ``registry.py`` only maps
names to those. A provider's settings are read from the environment by the provider
itself (``Setting``), so ``platform_site/settings.py`` never lists them; the host's setting
of the same name wins (``engine.settings.host_setting``: tests set ``settings.ORPHEUS_URL``).
Bad values are reported by the system checks (``sessions_app.checks``) when the platform
starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from engine.providers import checks
from engine.providers.base import Capabilities
from engine.providers.checks import Check
from engine.settings import (
    MISSING,
    SettingInvalid,
    env_bool,
    env_float,
    env_secret,
    env_str,
    host_setting,
)

Kind = Literal["stt", "llm", "tts", "tools"]


@dataclass(frozen=True)
class Setting:
    """One environment variable of a provider (``ORPHEUS_URL``), read when it is used."""

    name: str
    default: Any = None
    # How the text is read (``engine.settings``'s readers); raises SettingInvalid.
    read: Callable[[str, Any], Any] = env_str
    secret: bool = False  # a key: masked in every text the platform shows (``scrubbing``)

    def value(self) -> Any:
        found = host_setting(self.name)
        return self.read(self.name, self.default) if found is MISSING else found


# Settings every adapter of a kind shares (``platform_site/settings.py`` sets them too).
STT_TIMEOUT_S = Setting("STT_TIMEOUT_S", 10.0, env_float)
TTS_TIMEOUT_S = Setting("TTS_TIMEOUT_S", 10.0, env_float)
# The scripted fakes may be chosen (the tests turn it on).
ALLOW_FAKE_PROVIDERS = Setting("ALLOW_FAKE_PROVIDERS", False, env_bool)


def secret_setting(name: str) -> Setting:
    """A key: ``NAME``, or the file ``NAME_FILE`` names (docker/k8s secrets)."""
    return Setting(name, read=lambda name, _default: env_secret(name), secret=True)


@dataclass(frozen=True)
class AccountURL:
    """An address a workspace gives with its key (Orpheus's WebSocket): how the dashboard
    asks for it and which schemes it may have. It is dialled under the egress guard."""

    label: str  # the form field's label
    what: str  # how an error names it ("Orpheus URL")
    schemes: tuple[str, ...]
    placeholder: str = ""


@dataclass(frozen=True)
class CredentialKind:
    """A workspace may bring its own account to this provider (its key, maybe an address):
    ``secrets_app.ProviderCredential`` rows of kind ``spec.name``, on the Providers page."""

    label: str  # as the dashboard and the audit log name it ("AssemblyAI speech-to-text")
    url: AccountURL | None = None


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
    # TTS whose ``capabilities.voices`` is open (any name): what its ``voice`` takes, in words
    # (the agent form's help lists every provider's voices).
    voice_help: str = ""
    # Whether (and how) a workspace may store that account: its credential kind.
    credential: CredentialKind | None = None
    # The scripted fakes: chosen only where ALLOW_FAKE_PROVIDERS is on (the tests).
    test_only: bool = False
    # "Test connection" on an adapter made with a workspace's account (None: its kind's
    # check in ``checks.py``); returns what happened in words, raises ProviderError.
    check: Check | None = None

    @property
    def connection_check(self) -> Check:
        return self.check or checks.BY_KIND[self.kind]

    @property
    def credential_label(self) -> str:
        return self.credential.label if self.credential else self.label

    @property
    def credential_url(self) -> AccountURL | None:
        return self.credential.url if self.credential else None

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
            except SettingInvalid as exc:
                found.append(str(exc))
        return found

    def platform_keys(self) -> list[str]:
        """The values of its key settings that are set (to mask them wherever shown)."""
        found = []
        for setting in self.settings:
            try:
                value = setting.value() if setting.secret else None
            except SettingInvalid:
                value = None
            if isinstance(value, str) and value:
                found.append(value)
        return found

    def platform_account(self) -> bool:
        """Whether the platform's environment gives this provider a key of its own."""
        return bool(self.options().get("api_key"))


def adapter_spec(kind: Kind, name: str, adapter: type) -> ProviderSpec:
    """A spec for a bare adapter class (tests register their own scripted ones)."""
    return ProviderSpec(kind=kind, name=name, label=name, adapter=adapter)
