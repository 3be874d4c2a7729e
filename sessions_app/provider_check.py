"""'Test connection': one tiny real request through the provider's own adapter, and the
outcome in words. It dials as a live session does (a customer-given URL through the egress
guard: a refused address says the guard's one sentence, whatever the cause), and what it
says passes the session's scrubber: no key, the platform's or the workspace's, is shown."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from asgiref.sync import async_to_sync

from engine.providers import registry
from engine.providers.base import ProviderError
from secrets_app.audit import SYSTEM, Actor
from secrets_app.models import ProviderCredential
from secrets_app.provider_credentials import (
    LLMConnection,
    SpeechAccount,
    WorkspaceProviders,
    credential_open,
    provider_credential_checked,
)
from sessions_app.scrubbing import Credential
from sessions_app.workspace_providers import openai_llm, platform_scrubber, speech_options

CHECK_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    message: str


def provider_check(*, credential: ProviderCredential, actor: Actor = SYSTEM) -> CheckResult:
    """Test ``credential`` now, remember the outcome on it (and who asked, in the audit
    log), and say what happened."""
    key = credential_open(credential=credential)
    result = async_to_sync(_check)(credential, key)
    provider_credential_checked(
        credential=credential, ok=result.ok, message=result.message, actor=actor
    )
    return result


async def _check(credential: ProviderCredential, key: str | None) -> CheckResult:
    label = credential.get_kind_display()
    scrub = platform_scrubber().with_credentials([Credential(key or "")])
    started = time.monotonic()
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S):
            detail = await _check_for(credential.kind)(credential, key)
    except TimeoutError:
        return CheckResult(False, f"{label}: no answer within {CHECK_TIMEOUT_S:g} s.")
    except ProviderError as exc:
        return CheckResult(False, scrub(f"{label} failed: {exc}"))
    elapsed_ms = (time.monotonic() - started) * 1000
    return CheckResult(True, scrub(f"Connected: {detail} in {elapsed_ms:.0f} ms."))


async def _check_llm(credential: ProviderCredential, key: str | None) -> str:
    llm = openai_llm(LLMConnection(credential.name, credential.base_url, credential.model, key))
    return await registry.provider("llm", "openai").connection_check(llm)


async def _check_speech(credential: ProviderCredential, key: str | None) -> str:
    """Through the provider's own adapter, with the workspace's account, as a session
    builds it; the check is the one its folder names (or its kind's)."""
    spec = registry.credential_spec(credential.kind)
    account = SpeechAccount(credential.kind, key, credential.base_url)
    options = speech_options(spec.kind, spec.name, WorkspaceProviders(speech={spec.name: account}))
    return await spec.connection_check(registry.create(spec.kind, spec.name, **options))


def _check_for(kind: str) -> Callable[[ProviderCredential, str | None], Awaitable[str]]:
    return _check_llm if kind == ProviderCredential.Kind.LLM else _check_speech
