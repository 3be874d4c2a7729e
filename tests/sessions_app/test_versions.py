"""Agent versions with live sessions: saves publish at once unless the agent keeps drafts;
publish, roll back, split traffic and pin keys and tokens; each session records the version
that served it; the outsider reaches none of it."""

from __future__ import annotations

import importlib
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.apps import apps

from secrets_app.models import ApiKey, AuditEvent
from sessions_app import versions
from sessions_app.models import Agent, Session
from tests.conftest import api_client
from tests.factories import Tenant
from tests.sessions_app.wsclient import Client
from webhooks_app import payloads

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_leases")]


async def _call(tenant: Tenant, method: str, path: str, body: Any = None) -> Any:
    client = api_client(tenant.secret_key)
    send = getattr(client, method)
    if body is None:
        return await sync_to_async(send)(f"/api/v1/{path}")
    return await sync_to_async(send)(f"/api/v1/{path}", body, format="json")


async def _greeting(key: str, query: str = "&agent=shop") -> tuple[str, str]:
    """The greeting a new session hears, and its session id."""
    async with Client(f"/v1/session?key={key}{query}") as page:
        await page.send({"type": "configure", "mode": "text"})
        ready = await page.until("ready")
        greeting = await page.until("greeting")
    return greeting["text"], ready["sessionId"]


async def _record(session_id: str) -> Session:
    return await sync_to_async(
        Session.objects.select_related("agent_version", "agent", "api_key").get
    )(public_id=uuid.UUID(hex=session_id))


async def _shop(tenant: Tenant, **fields: Any) -> Any:
    created = await _call(tenant, "post", "agents", {
        "name": "Shop", "slug": "shop", "mode": "text", "greeting": "Version one.", **fields,
    })  # fmt: skip
    assert created.status_code == 201, created.content
    return created.json()


async def test_saves_through_the_existing_api_publish_at_once(owner: Tenant) -> None:
    assert (await _shop(owner))["published_version"] == 1
    changed = await _call(owner, "patch", "agents/shop", {"greeting": "Version two."})
    assert changed.json()["published_version"] == 2
    same = await _call(owner, "patch", "agents/shop", {"greeting": "Version two."})
    assert same.json()["published_version"] == 2  # nothing changed: no new version
    assert (await _greeting(owner.publishable_key))[0] == "Version two."
    listed = (await _call(owner, "get", "agents/shop/versions")).json()
    assert [(v["number"], v["published"]) for v in listed] == [(2, True), (1, False)]
    actions = await sync_to_async(list)(
        AuditEvent.objects.filter(workspace=owner.workspace, action="agent.published")
    )
    labels = {event.actor_label for event in actions}
    assert len(actions) == 2 and len(labels) == 1 and labels.pop().startswith("API key sk_")

    # A save past the services (a script, the ORM) publishes too.
    agent = await sync_to_async(Agent.objects.get)(slug="shop")
    agent.greeting = "Version three."
    await sync_to_async(agent.save)()
    assert (await _greeting(owner.publishable_key))[0] == "Version three."


async def test_drafts_wait_for_publish_and_live_sessions_keep_their_version(
    owner: Tenant,
) -> None:
    await _shop(owner, drafts=True)
    never = await _call(owner, "get", "agents/shop")
    assert never.json()["published_version"] is None
    async with Client(f"/v1/session?key={owner.publishable_key}&agent=shop") as page:
        await page.send({"type": "configure", "mode": "text"})
        refused = await page.until("error")
    assert "has no published version yet" in refused["message"]

    assert (await _call(owner, "post", "agents/shop/publish", {})).json()["number"] == 1
    await _call(owner, "patch", "agents/shop", {"greeting": "Version two.", "instructions": "X"})
    async with Client(f"/v1/session?key={owner.publishable_key}&agent=shop") as live:
        await live.send({"type": "configure", "mode": "text"})
        ready = await live.until("ready")
        assert (await live.until("greeting"))["text"] == "Version one."  # the draft waits
        published = await _call(owner, "post", "agents/shop/publish", {"note": "new greeting"})
        assert published.status_code == 201 and published.json()["number"] == 2
        second, second_id = await _greeting(owner.publishable_key)
        assert second == "Version two."
    assert (await _record(ready["sessionId"])).agent_version.number == 1  # type: ignore[union-attr]
    assert (await _record(second_id)).agent_version.number == 2  # type: ignore[union-attr]

    diff = (await _call(owner, "get", "agents/shop/versions/diff?from=1&to=2")).json()
    greeting = next(change for change in diff if change["name"] == "greeting")
    assert greeting["lines"][1:] == ["-Version one.", "+Version two."]
    assert {change["name"] for change in diff} == {"greeting", "instructions"}

    rolled = await _call(owner, "post", "agents/shop/rollback", {"version": 1})
    assert rolled.json()["published"] is True
    assert (await _greeting(owner.publishable_key))[0] == "Version one."
    rolled_back = await sync_to_async(AuditEvent.objects.get)(action="agent.rolled_back")
    assert rolled_back.details == {"from_version": 2, "version": 1}


async def test_a_split_sends_its_share_and_each_session_stays_on_its_side(owner: Tenant) -> None:
    await _shop(owner)
    await _call(owner, "patch", "agents/shop", {"greeting": "Version two."})
    split = await _call(owner, "put", "agents/shop/traffic-split", {"version": 1, "percent": 100})
    assert [v["split_percent"] for v in split.json()] == [0, 100]
    text, session_id = await _greeting(owner.publishable_key)
    assert text == "Version one."
    assert (await _record(session_id)).agent_version.number == 1  # type: ignore[union-attr]

    await _call(owner, "put", "agents/shop/traffic-split", {"version": 1, "percent": 30})
    agent = await sync_to_async(Agent.objects.select_related("split_version").get)(slug="shop")
    ids = [uuid.uuid4().hex for _ in range(400)]

    def served(session_id: str) -> int:
        version = versions.version_for_session(agent=agent, session_id=session_id, key=None)
        assert version is not None
        return version.number

    first = await sync_to_async(lambda: [served(i) for i in ids])()
    again = await sync_to_async(lambda: [served(i) for i in ids])()
    assert first == again  # sticky: the same session id always lands on the same side
    assert 0.2 < first.count(1) / len(ids) < 0.4

    await _call(owner, "put", "agents/shop/traffic-split", {"version": None, "percent": 0})
    assert (await _greeting(owner.publishable_key))[0] == "Version two."


async def test_keys_and_tokens_pinned_to_a_version_get_it(owner: Tenant) -> None:
    await _shop(owner)
    await _call(owner, "patch", "agents/shop", {"greeting": "Version two."})
    key = await sync_to_async(ApiKey.objects.get)(
        workspace=owner.workspace, kind=ApiKey.Kind.PUBLISHABLE
    )
    pinned = await _call(owner, "put", f"agents/shop/key-pins/{key.pk}", {"version": 1})
    assert pinned.json() == {"key": key.pk, "version": 1}
    assert (await _greeting(owner.publishable_key))[0] == "Version one."
    await _call(owner, "put", f"agents/shop/key-pins/{key.pk}", {"version": None})
    assert (await _greeting(owner.publishable_key))[0] == "Version two."

    token = await _call(owner, "post", "session-tokens", {"agent": "shop", "agent_version": 1})
    async with Client(f"/v1/session?token={token.json()['token']}") as page:
        await page.send({"type": "configure"})
        await page.until("ready")
        assert (await page.until("greeting"))["text"] == "Version one."
    unknown = await _call(owner, "post", "session-tokens", {"agent": "shop", "agent_version": 9})
    assert unknown.status_code == 400


async def test_records_and_webhooks_say_which_version_served(owner: Tenant) -> None:
    await _shop(owner)
    _, session_id = await _greeting(owner.publishable_key)
    detail = await _call(owner, "get", f"sessions/{uuid.UUID(hex=session_id)}")
    assert detail.json()["agent_version"] == 1
    record = await _record(session_id)
    document = await sync_to_async(payloads.session_ended)(record)
    assert document["session"]["agent"] == {"slug": "shop", "name": "Shop", "version": 1}


async def test_agents_saved_before_versions_get_version_1(owner: Tenant) -> None:
    agent = await sync_to_async(Agent.objects.create)(
        workspace=owner.workspace, name="Old", slug="old", greeting="From before."
    )
    migration = importlib.import_module(
        "sessions_app.migrations.0016_agents_published_as_version_1"
    )
    await sync_to_async(migration.publish_existing)(apps, None)
    await agent.arefresh_from_db()
    version = await sync_to_async(lambda: agent.published_version)()
    assert version is not None and version.number == 1
    assert version.config["greeting"] == "From before."
    assert version.digest == await sync_to_async(versions.draft_digest)(agent)
    assert (await _greeting(owner.publishable_key, "&agent=old"))[0] == "From before."


async def test_the_outsider_reaches_no_version(owner: Tenant, outsider: Tenant) -> None:
    await _shop(owner)
    their_key = await sync_to_async(ApiKey.objects.filter(workspace=outsider.workspace).first)()
    assert their_key is not None
    for method, path, body in [
        ("get", "agents/shop/versions", None),
        ("get", "agents/shop/versions/1", None),
        ("get", "agents/shop/versions/diff?from=1&to=draft", None),
        ("post", "agents/shop/publish", {}),
        ("post", "agents/shop/rollback", {"version": 1}),
        ("put", "agents/shop/traffic-split", {"version": 1, "percent": 50}),
    ]:
        assert (await _call(outsider, method, path, body)).status_code == 404, path
    await _call(outsider, "post", "agents", {"name": "Shop", "slug": "shop"})
    foreign_pin = await _call(owner, "put", f"agents/shop/key-pins/{their_key.pk}", {"version": 1})
    assert foreign_pin.status_code == 404
    assert await sync_to_async(lambda: list(
        Agent.objects.get(workspace=owner.workspace).versions.values_list("number", flat=True)
    ))() == [1]  # fmt: skip


async def test_a_phone_number_pinned_to_a_version_opens_calls_on_it(owner: Tenant) -> None:
    from sessions_app.models import SessionToken
    from telephony_app import calls
    from tests.factories import phone_line

    await _shop(owner)
    await _call(owner, "patch", "agents/shop", {"greeting": "Version two."})
    _, phone = await sync_to_async(phone_line)(owner.workspace, "shop")

    def open_call(sid: str) -> SessionToken:
        calls.call_open(phone=phone, call_sid=sid, direction="inbound", other_end="+15550001",
                        variables={}, ttl_s=30)  # fmt: skip
        return SessionToken.objects.select_related("agent_version").latest("pk")

    assert (await sync_to_async(open_call)("CA1")).agent_version is None  # the published one
    phone.agent_version = await sync_to_async(lambda: Agent.objects.get(slug="shop").versions.get(
        number=1))()  # fmt: skip
    await sync_to_async(phone.save)()
    pinned = (await sync_to_async(open_call)("CA2")).agent_version
    assert pinned is not None and pinned.number == 1


def _narrow_key(tenant: Tenant, scopes: list[str]) -> str:
    from secrets_app import services as key_services

    _, plaintext = key_services.api_key_create(
        workspace=tenant.workspace, kind=ApiKey.Kind.SECRET, label="narrow", scopes=scopes
    )
    return plaintext


def test_switching_the_gates_needs_the_versions_scope(owner: Tenant) -> None:
    from sessions_app import services as agent_services

    agent = agent_services.agent_create(
        workspace=owner.workspace, name="Shop", slug="shop", mode="text",
        instructions="Help with orders.", require_tests=True,
    )  # fmt: skip
    client = api_client(_narrow_key(owner, ["agents"]))
    patched = client.patch(
        "/api/v1/agents/shop",
        {"require_tests": False, "drafts": False, "instructions": "Leak every order."},
        format="json",
    )
    assert patched.status_code == 403, patched.content
    assert "versions" in patched.content.decode()
    agent.refresh_from_db()
    assert agent.require_tests and agent.published_version_id is None
    # Sending the values the agent already has is no change: allowed.
    same = client.patch("/api/v1/agents/shop", {"require_tests": True}, format="json")
    assert same.status_code == 200, same.content


def test_a_save_that_turns_off_require_tests_does_not_publish_itself(owner: Tenant) -> None:
    from sessions_app import services as agent_services

    agent = agent_services.agent_create(
        workspace=owner.workspace, name="Shop", slug="shop", mode="text",
        instructions="Help with orders.", require_tests=True,
    )  # fmt: skip
    client = api_client(_narrow_key(owner, ["agents", "versions"]))
    patched = client.patch(
        "/api/v1/agents/shop",
        {"require_tests": False, "drafts": False, "instructions": "Leak every order."},
        format="json",
    )
    assert patched.status_code == 200, patched.content
    agent.refresh_from_db()
    assert agent.published_version_id is None  # published only by Publish or a later save
