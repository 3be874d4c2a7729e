"""Shared fixtures: three users (owner, member, outsider) and their API clients.

Tests marked ``postgres`` or ``redis`` need those servers (DATABASE_URL on
PostgreSQL, REDIS_URL). Without them such tests are skipped locally, but under
CI (CI=true) a skip would hide a gap, so it fails instead.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from rest_framework.test import APIClient

from tests.factories import Tenant, make_tenant

_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _missing_service(item: pytest.Item) -> str | None:
    if item.get_closest_marker("redis") and not settings.REDIS_URL:
        return "needs REDIS_URL (a Redis server)"
    if item.get_closest_marker("postgres") and connection.vendor != "postgresql":
        return "needs DATABASE_URL on PostgreSQL"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    reason = _missing_service(item)
    if reason is None:
        return
    if _CI:
        pytest.fail(f"{reason}; under CI this must not be skipped", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _scripted_speech(settings: Any) -> None:
    """Sessions use the scripted fake STT/TTS unless a test picks a real engine."""
    settings.STT_PROVIDER = "fake"
    settings.TTS_PROVIDER = "fake"


@pytest.fixture
async def http_pools_closed() -> Any:
    """The LLM and speech adapters keep a pool per event loop; the test's loop closes its
    own (an unclosed aiohttp pool collected later would log an error into another test).
    For async tests only: a test that runs its own loop (Playwright's) closes nothing here."""
    yield
    from sessions_app.providers.http_pool import close_shared_sessions

    await close_shared_sessions()


@pytest.fixture
def owner(db: None) -> Tenant:
    return make_tenant("owner@example.com", workspace_name="Acme")


@pytest.fixture
def member(owner: Tenant) -> Tenant:
    """A member of the owner's workspace (same tenant, lesser role)."""
    from secrets_app import services

    user, _ = services.user_get_or_create(email="member@example.com", password="pw-member-1")
    services.membership_add(workspace=owner.workspace, user=user, role="member")
    return Tenant(user=user, workspace=owner.workspace, publishable_key="", secret_key="")


@pytest.fixture
def outsider(db: None) -> Tenant:
    return make_tenant("outsider@example.com", workspace_name="Other Corp")


def api_client(secret_key: str | None) -> APIClient:
    client = APIClient()
    if secret_key:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret_key}")
    return client


@pytest.fixture
def owner_api(owner: Tenant) -> APIClient:
    return api_client(owner.secret_key)


@pytest.fixture
def outsider_api(outsider: Tenant) -> APIClient:
    return api_client(outsider.secret_key)
