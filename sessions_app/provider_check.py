"""'Test connection': one tiny real request through the provider's own adapter, and the
outcome in words. The key is masked wherever a provider quoted it back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from asgiref.sync import async_to_sync

from platform_site.outbound import AddressRefused, vetted_address
from secrets_app.models import ProviderCredential
from secrets_app.provider_credentials import (
    LLMConnection,
    SpeechAccount,
    WorkspaceProviders,
    credential_open,
    provider_credential_checked,
)
from sessions_app.protocol import ErrorCode
from sessions_app.providers import registry
from sessions_app.providers.base import ProviderError, TextDelta
from sessions_app.workspace_providers import openai_llm, speech_options

CHECK_TIMEOUT_S = 15.0
PROMPT = [{"role": "user", "content": "Reply with the single word OK."}]
ANSWER_SHOWN_MAX = 40
KEY_MASK = "[key]"


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    message: str


def provider_check(*, credential: ProviderCredential) -> CheckResult:
    """Test ``credential`` now, remember the outcome on it, and say what happened."""
    key = credential_open(credential=credential)
    result = async_to_sync(_check)(credential, key)
    provider_credential_checked(credential=credential, ok=result.ok, message=result.message)
    return result


async def _check(credential: ProviderCredential, key: str | None) -> CheckResult:
    label = credential.get_kind_display()
    started = time.monotonic()
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S):
            detail = await _CHECKS[credential.kind](credential, key)
    except TimeoutError:
        return CheckResult(False, f"{label}: no answer within {CHECK_TIMEOUT_S:g} s.")
    except (ProviderError, AddressRefused) as exc:
        return CheckResult(False, _masked(f"{label} failed: {exc}", key))
    elapsed_ms = (time.monotonic() - started) * 1000
    return CheckResult(True, _masked(f"Connected: {detail} in {elapsed_ms:.0f} ms.", key))


def _masked(text: str, key: str | None) -> str:
    return text.replace(key, KEY_MASK) if key else text


async def _check_llm(credential: ProviderCredential, key: str | None) -> str:
    parts = urlsplit(credential.base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    await vetted_address(parts.hostname or "", port, CHECK_TIMEOUT_S)  # says why, in words
    llm = openai_llm(LLMConnection(credential.name, credential.base_url, credential.model, key))
    answer = ""
    async for event in llm.stream(messages=PROMPT, tools=[]):
        if isinstance(event, TextDelta):
            answer += event.text
    shown = " ".join(answer.split())[:ANSWER_SHOWN_MAX] or "(an empty reply)"
    return f"model {credential.model} at {parts.hostname} answered “{shown}”"


def _account(credential: ProviderCredential, key: str | None) -> WorkspaceProviders:
    account = SpeechAccount(credential.kind, key, credential.base_url)
    return WorkspaceProviders(speech={credential.kind: account})


async def _check_stt(credential: ProviderCredential, key: str | None) -> str:
    options = speech_options("stt", credential.kind, _account(credential, key))
    stt = registry.create("stt", credential.kind, **options)
    stream = await stt.open(sample_rate=16_000)
    await stream.aclose()
    return "a streaming recognition session opened"


async def _check_tts(credential: ProviderCredential, key: str | None) -> str:
    options = speech_options("tts", credential.kind, _account(credential, key))
    tts = registry.create("tts", credential.kind, **options)
    audio = tts.synthesize("OK")
    try:
        async for chunk in audio:
            if chunk:
                return "the voice spoke a test word"
    finally:
        await audio.aclose()
    raise ProviderError("the provider answered without audio", code=ErrorCode.TTS_FAILED)


_CHECKS: dict[str, Callable[[ProviderCredential, str | None], Awaitable[str]]] = {
    ProviderCredential.Kind.LLM: _check_llm,
    ProviderCredential.Kind.ASSEMBLYAI: _check_stt,
    ProviderCredential.Kind.ELEVENLABS: _check_tts,
    ProviderCredential.Kind.OPENAI: _check_tts,
    ProviderCredential.Kind.ORPHEUS: _check_tts,
}
