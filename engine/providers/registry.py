"""Providers by kind and name, found by their folders: ``engine/providers/<kind>/<name>/``
holds a provider whose ``adapter.py`` ends with its ``ProviderSpec`` (``PROVIDER``). Adding
a provider is adding its folder; its label, settings, defaults, capabilities, credential
kind and connection check live there. Modules are imported only when a provider is used.

The scripted fakes are not in this package: they live with the tests
(``tests/engine/providers/fake.py``) and register themselves under the name ``fake``. The
registry loads them only where ``ALLOW_FAKE_PROVIDERS`` is on (the test suite, and the
processes it starts), and refuses to let settings or agents choose them elsewhere.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from typing import Literal, overload

from engine.providers.base import LLM, STT, TTS
from engine.providers.spec import ALLOW_FAKE_PROVIDERS, Kind, ProviderSpec, adapter_spec
from engine.tools.runner import ToolRunner

__all__ = [
    "SPEECH_FIELDS",
    "Kind",
    "UnknownProvider",
    "choosable",
    "create",
    "credential_spec",
    "credential_specs",
    "names",
    "platform_names",
    "provider",
    "specs",
]

# An agent's speech provider fields and the kind each names.
SPEECH_FIELDS: tuple[tuple[str, Kind], ...] = (("stt_provider", "stt"), ("tts_provider", "tts"))
KINDS: tuple[Kind, ...] = ("stt", "llm", "tts", "tools")
SPEECH_KINDS: tuple[Kind, ...] = ("stt", "tts")
# Where the scripted fakes are, loaded only when ALLOW_FAKE_PROVIDERS is on.
SCRIPTED_FAKES = "tests.engine.providers.fake"
FAKE = "fake"

Adapter = STT | LLM | TTS | ToolRunner
_INTERFACES: dict[Kind, type[Adapter]] = {
    "stt": STT,
    "llm": LLM,
    "tts": TTS,
    "tools": ToolRunner,
}
# Providers added at run time (the fakes, tests' own adapters): name -> a spec, or the
# dotted path of a spec or of a bare adapter class.
_ADDED: dict[Kind, dict[str, str | ProviderSpec]] = {kind: {} for kind in KINDS}


class UnknownProvider(LookupError):
    pass


@cache
def _folders(kind: Kind) -> dict[str, str]:
    """The providers of ``kind`` in this package: name -> the dotted path of its spec."""
    package = importlib.import_module(f"engine.providers.{kind}")
    return {
        found.name: f"engine.providers.{kind}.{found.name}.adapter.PROVIDER"
        for found in pkgutil.iter_modules(package.__path__)
        if found.ispkg
    }


def _known(kind: Kind) -> dict[str, str | ProviderSpec]:
    if ALLOW_FAKE_PROVIDERS.value():
        importlib.import_module(SCRIPTED_FAKES)  # registers them (once: modules are cached)
    # Until the fakes are loaded their name stays known, as test-only, so that a setting
    # naming it is refused for what it is (sessions.E002), not as an unknown name.
    unloaded = ProviderSpec(
        kind=kind, name=FAKE, label="Scripted (tests)", adapter=_INTERFACES[kind], test_only=True
    )
    return {FAKE: unloaded, **_folders(kind), **_ADDED[kind]}


def register(kind: Kind, name: str, found: str | ProviderSpec) -> None:
    """``found``: a ``ProviderSpec``, or the dotted path of one or of a bare adapter class
    (tests)."""
    _ADDED[kind][name] = found


def names(kind: Kind, *, choosable: bool = False) -> list[str]:
    """Every name of ``kind``; ``choosable``: only those this platform lets settings and
    agents choose (the scripted fakes only where ``ALLOW_FAKE_PROVIDERS`` is on)."""
    if not choosable or ALLOW_FAKE_PROVIDERS.value():
        return sorted(_known(kind))
    return platform_names(kind)


def platform_names(kind: Kind) -> list[str]:
    """Every name of ``kind`` but the scripted test-only ones, whatever the settings say
    (what an agent's fallbacks may name, tests included)."""
    return [name for name in sorted(_known(kind)) if not provider(kind, name).test_only]


def specs(kind: Kind, *, choosable: bool = False) -> list[ProviderSpec]:
    return [provider(kind, name) for name in names(kind, choosable=choosable)]


def credential_specs() -> list[ProviderSpec]:
    """The speech providers a workspace may store its own account for (``spec.credential``),
    speech-to-text first, then by label. A provider's name is its credential kind, so two
    of them may not share one."""
    found = [spec for kind in SPEECH_KINDS for spec in specs(kind) if spec.credential]
    names = [spec.name for spec in found]
    if len(set(names)) != len(names):
        raise ValueError(f"two speech providers share a credential kind: {sorted(names)}")
    return sorted(found, key=lambda spec: (spec.kind != "stt", spec.label.lower()))


def credential_spec(name: str) -> ProviderSpec:
    """The speech provider of credential kind ``name`` (UnknownProvider: none has it)."""
    for spec in credential_specs():
        if spec.name == name:
            return spec
    raise UnknownProvider(f"no speech provider takes a workspace's account named {name!r}")


def provider(kind: Kind, name: str) -> ProviderSpec:
    try:
        dotted = _known(kind)[name]
    except KeyError:
        raise UnknownProvider(f"no {kind} provider named {name!r}") from None
    if isinstance(dotted, ProviderSpec):
        return dotted
    module_name, _, attr = dotted.rpartition(".")
    found = getattr(importlib.import_module(module_name), attr)
    return found if isinstance(found, ProviderSpec) else adapter_spec(kind, name, found)


def choosable(kind: Kind, name: str) -> ProviderSpec:
    """``provider``, refusing a scripted fake unless ``ALLOW_FAKE_PROVIDERS`` is on."""
    spec = provider(kind, name)
    if spec.test_only and not ALLOW_FAKE_PROVIDERS.value():
        raise UnknownProvider(
            f"{kind} provider {name!r} is for tests only (ALLOW_FAKE_PROVIDERS is off)"
        )
    return spec


@overload
def provider_class(kind: Literal["stt"], name: str) -> type[STT]: ...
@overload
def provider_class(kind: Literal["llm"], name: str) -> type[LLM]: ...
@overload
def provider_class(kind: Literal["tts"], name: str) -> type[TTS]: ...
@overload
def provider_class(kind: Literal["tools"], name: str) -> type[ToolRunner]: ...
@overload
def provider_class(kind: Kind, name: str) -> type[Adapter]: ...
def provider_class(kind: Kind, name: str) -> type[Adapter]:
    """The adapter class of a provider, of the interface its kind names (checked)."""
    adapter = provider(kind, name).adapter
    if not issubclass(adapter, _INTERFACES[kind]):
        raise TypeError(f"{kind} provider {name!r}: {adapter.__name__} is not a {kind} adapter")
    return adapter


@overload
def create(kind: Literal["stt"], name: str, **options: object) -> STT: ...
@overload
def create(kind: Literal["llm"], name: str, **options: object) -> LLM: ...
@overload
def create(kind: Literal["tts"], name: str, **options: object) -> TTS: ...
@overload
def create(kind: Literal["tools"], name: str, **options: object) -> ToolRunner: ...
@overload
def create(kind: Kind, name: str, **options: object) -> Adapter: ...
def create(kind: Kind, name: str, **options: object) -> Adapter:
    """A new adapter of ``kind``, of the interface the kind names (checked)."""
    return provider_class(kind, name)(**options)
