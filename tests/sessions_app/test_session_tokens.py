"""Session tokens minted by the customer's server, and live sessions over the REST API:
listing them, ending one. The outsider can neither mint for, list, nor end ours."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from rest_framework.test import APIClient

from secrets_app import services as key_services
from secrets_app.models import ApiKey
from sessions_app import services as agent_services
from sessions_app.models import Session
from tests.conftest import api_client
from tests.factories import Tenant, make_tenant
from tests.sessions_app.wsclient import Client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_leases")]


@pytest.fixture
async def tenant(db: None) -> Tenant:
    tenant = await sync_to_async(make_tenant)("tokens@example.com")
    await sync_to_async(agent_services.agent_create)(
        workspace=tenant.workspace, name="Support", slug="support", mode="text",
        instructions="Help {{customer}} with plan {{plan}}.",
    )  # fmt: skip
    return tenant


async def mint(api: APIClient, **body: Any) -> Any:
    return await sync_to_async(api.post)(
        "/api/v1/session-tokens", {"agent": "support", **body}, format="json"
    )


async def test_a_token_opens_one_session_with_fixed_variables(tenant, echo):
    server = api_client(tenant.secret_key)
    minted = await mint(server, variables={"customer": "Ann", "plan": "gold"}, end_user="u-42")
    assert minted.status_code == 201 and minted["Cache-Control"] == "no-store"
    token = minted.json()["token"]
    assert token.startswith("st_") and minted.json()["agent"] == "support"
    async with Client(f"/v1/session?token={token}", origin="https://anywhere.example") as page:
        await page.send({"type": "configure", "variables": {"plan": "free"}})
        await page.until("ready")
        await page.send({"type": "context", "variables": {"plan": "platinum"}})
        error = await page.next()
        assert error["code"] == "invalid" and "fixed by the session token" in error["message"]
        await page.send({"type": "text", "text": "hi"})
        await page.until("chat")
    system = echo.requests[-1].json["messages"][0]["content"]
    assert system == "Help Ann with plan gold."
    record = await sync_to_async(Session.objects.get)(workspace=tenant.workspace)
    assert record.end_user == "u-42" and record.agent_id is not None
    async with Client(f"/v1/session?token={token}") as again:  # single use
        error = await again.next()
        assert (error["code"], await again.closed()) == ("invalid_token", 4001)


async def test_a_token_refuses_inline_config_and_other_agents(tenant, echo):
    server = api_client(tenant.secret_key)
    token = (await mint(server)).json()["token"]
    async with Client(f"/v1/session?token={token}&agent=other") as page:
        assert (await page.next())["code"] == "agent_not_allowed"
    token = (await mint(server)).json()["token"]
    async with Client(f"/v1/session?token={token}") as page:
        await page.send({"type": "configure", "instructions": "Obey me."})
        error = await page.next()
        assert (error["code"], await page.closed()) == ("inline_config_refused", 4008)


async def test_an_expired_token_is_refused(tenant, echo):
    token = (await mint(api_client(tenant.secret_key), ttl_s=5)).json()["token"]
    from datetime import timedelta

    from django.utils import timezone

    from sessions_app.models import SessionToken

    past = timezone.now() - timedelta(seconds=1)
    await sync_to_async(SessionToken.objects.update)(expires_at=past)
    async with Client(f"/v1/session?token={token}") as page:
        assert (await page.next())["code"] == "invalid_token"


async def test_a_tokens_only_key_refuses_direct_sessions(tenant, echo):
    await sync_to_async(ApiKey.objects.filter(kind="publishable").update)(tokens_only=True)
    async with Client(f"/v1/session?key={tenant.publishable_key}") as page:
        error = await page.next()
        assert (error["code"], await page.closed()) == ("token_required", 4001)
    token = (await mint(api_client(tenant.secret_key))).json()["token"]
    async with Client(f"/v1/session?token={token}") as page:
        await page.send({"type": "configure"})
        await page.until("ready")


async def test_revoking_the_minting_key_ends_token_sessions(tenant, echo):
    token = (await mint(api_client(tenant.secret_key))).json()["token"]
    async with Client(f"/v1/session?token={token}") as page:
        await page.send({"type": "configure"})
        await page.until("ready")
        key = await sync_to_async(ApiKey.objects.get)(workspace=tenant.workspace, kind="secret")
        await sync_to_async(key_services.api_key_revoke)(key=key)
        assert (await page.until("error"))["code"] == "key_revoked"
        assert await page.closed() == 4001


async def test_the_outsider_cannot_mint_for_our_agent(tenant):
    outsider = await sync_to_async(make_tenant)("outsider@example.com")
    refused = await mint(api_client(outsider.secret_key))
    assert refused.status_code == 400 and "no agent with this slug" in refused.text


# ---------------------------------------------------------------- live sessions


async def test_live_sessions_are_listed_and_one_can_be_ended(tenant, echo):
    server = api_client(tenant.secret_key)
    async with (
        Client(f"/v1/session?key={tenant.publishable_key}") as first,
        Client(f"/v1/session?key={tenant.publishable_key}", address="198.51.100.2") as second,
    ):
        for page in (first, second):
            await page.send({"type": "configure", "mode": "text", "instructions": "Hi."})
            await page.until("ready")
        listed = (await sync_to_async(server.get)("/api/v1/sessions?live=true")).json()
        assert len(listed["results"]) == 2 and all(s["live"] for s in listed["results"])
        target = listed["results"][0]["id"]
        outsider = await sync_to_async(make_tenant)("outsider@example.com")
        stranger = api_client(outsider.secret_key)
        assert (
            await sync_to_async(stranger.post)(f"/api/v1/sessions/{target}/end")
        ).status_code == 404
        assert (await sync_to_async(stranger.get)("/api/v1/sessions?live=true")).json()[
            "results"
        ] == []
        ended = await sync_to_async(server.post)(f"/api/v1/sessions/{target}/end")
        assert ended.status_code == 200 and ended.json()["close_code"] == 4009
        codes = []
        for page in (first, second):
            try:
                error = await asyncio.wait_for(page.until("error"), 2)
                codes.append((error["code"], await page.closed()))
            except (AssertionError, TimeoutError):
                pass
        assert codes == [("session_ended", 4009)]
        left = (await sync_to_async(server.get)("/api/v1/sessions?live=true")).json()["results"]
        assert [s["id"] for s in left] != [target] and len(left) == 1


async def test_reading_sessions_needs_a_scope(tenant):
    server = api_client(tenant.secret_key)
    made = await sync_to_async(server.post)(
        "/api/v1/keys", {"kind": "secret", "scopes": ["agents"]}, format="json"
    )
    agents_only = api_client(made.json()["key"])
    refused = await sync_to_async(agents_only.get)("/api/v1/sessions")
    assert refused.status_code == 403 and "sessions:read" in refused.json()["error"]["message"]
