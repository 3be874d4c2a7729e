"""Post-call webhooks against a local receiver that checks the signature with the docs'
snippet: retries until one success, the session's document, the egress guard."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.db import connection
from django.utils import timezone

from core import leases as live
from sessions_app.models import Session
from tests.engine.providers.llm.openai.fake_server import Done, Finish, Usage, text_reply, tool_call
from tests.factories import make_tenant
from tests.fakes.egress_server import EgressTestServer
from tests.sessions_app.recording import eventually
from tests.sessions_app.wsclient import Client
from tests.webhooks_app.receiver import Receiver, docs_snippet, docs_verifier
from webhooks_app import payloads, services
from webhooks_app.models import WebhookDelivery

pytestmark = pytest.mark.django_db(transaction=True)

ORDER_KEY = "orders-key-9f3e71"


@pytest.fixture
def embedded(settings):
    """The embedded default's delivery, quick retries, and the receiver's loopback port."""
    live._memory.clear()
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.WEBHOOK_RETRY_BASE_S = 0.05
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    settings.TOOL_RUNNER = "fake"
    return settings


async def _receiver(server: EgressTestServer, statuses: list[int], settings) -> Receiver:
    settings.EGRESS_PORTS = [server.port]
    receiver = Receiver(server, statuses)
    receiver.install()
    return receiver


async def _endpoint(tenant, receiver: Receiver, events: list[str]) -> None:
    _endpoint_row, receiver.secret = await sync_to_async(services.endpoint_create)(
        workspace=tenant.workspace, url=receiver.url, events=events
    )


async def _delivered(status: str, within: float = 15.0) -> WebhookDelivery:
    return await eventually(
        lambda: WebhookDelivery.objects.filter(status=status).first(), within=within
    )


async def _session_with_a_tool_call(tenant, llm) -> str:
    from secrets_app import services as secret_services

    await sync_to_async(secret_services.secret_set)(
        workspace=tenant.workspace, name="ORDERS_KEY", value=ORDER_KEY
    )
    # The model quotes the secret's value in its arguments: the document must not.
    llm.script(*tool_call(0, "call_1", "track", json.dumps({"key": ORDER_KEY})),
               Finish("tool_calls"), Usage(40, 8), Done())  # fmt: skip
    llm.script(text_reply("It shipped.", usage=Usage(60, 4)))
    tools = [{"name": "track", "parameters": {"key": "string"}, "handler": "async () => 1"}]
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "mode": "text", "tools": tools})
        ready = await client.until("ready")
        await client.send({"type": "text", "text": "Where is my order?"})
        await client.until("metrics")
    return str(ready["sessionId"])


async def test_a_receiver_failing_twice_gets_exactly_one_successful_delivery(embedded, llm):
    tenant = await sync_to_async(make_tenant)("hooks@example.com")
    async with EgressTestServer() as server:
        receiver = await _receiver(server, [500, 503, 200], embedded)
        await _endpoint(tenant, receiver, ["session.ended"])
        session_id = await _session_with_a_tool_call(tenant, llm)
        delivery = await _delivered(WebhookDelivery.Status.SUCCEEDED)
        await asyncio.sleep(0.5)  # time for any duplicate to show up

    assert receiver.answered == [500, 503, 200]  # one success, then nothing more
    assert receiver.verified == [True, True, True]  # signed, each time
    ids = {request.headers["webhook-id"] for request in receiver.requests}
    assert ids == {str(delivery.event_id)} and delivery.attempts == 3
    attempts = await sync_to_async(list)(delivery.attempt_log.all())
    assert [(a.number, a.status_code, a.succeeded) for a in attempts] == [
        (1, 500, False), (2, 503, False), (3, 200, True)
    ]  # fmt: skip
    assert all(a.latency_ms is not None and a.latency_ms >= 0 for a in attempts)

    document = json.loads(receiver.requests[-1].body)
    assert (document["type"], document["id"]) == ("session.ended", str(delivery.event_id))
    session = document["data"]["session"]
    assert session["id"].replace("-", "") == session_id
    assert (session["key_label"], session["end_user_label"]) == ("browser", None)
    assert (session["end_user"], session["live"]) == ("", False)  # a pk_ session: no token label
    assert (session["close_code"], session["close_reason"]) == (1000, "Ended")
    assert session["duration_seconds"] >= 0
    assert [e["role"] for e in session["transcript"]] == ["user", "assistant"]
    assert session["usage"]["prompt_tokens"] == 100 and session["usage"]["llm_requests"] == 2
    assert session["turns"][0]["usage"]["completion_tokens"] == 12
    [call] = session["tool_calls"]
    assert call["name"] == "track" and call["arguments"] == {"key": "[secret ORDERS_KEY]"}
    assert ORDER_KEY not in receiver.requests[-1].body.decode()


def test_the_session_document_names_the_end_user_a_session_token_carried():
    """docs/webhooks.md: `end_user` is the token's label; `end_user_label` is always null."""
    tenant = make_tenant("labels@example.com")
    session = Session.objects.create(
        workspace=tenant.workspace, end_user="u-42", ended_at=timezone.now(), close_code=1000
    )
    document = payloads.session_ended(session)["session"]
    assert (document["end_user"], document["end_user_label"]) == ("u-42", None)


async def test_a_private_address_is_refused_on_the_production_settings(embedded, llm):
    tenant = await sync_to_async(make_tenant)("private@example.com")
    async with EgressTestServer() as server:
        receiver = await _receiver(server, [200], embedded)
        await _endpoint(tenant, receiver, ["session.ended"])  # saved on a developer's machine
        embedded.DEV_ALLOW_PRIVATE_EGRESS = False  # and delivered in production
        embedded.WEBHOOK_RETRY_WINDOW_S = 0  # no retries: one attempt tells
        llm.script(text_reply("Hi."))
        async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
            await client.send({"type": "configure", "mode": "text"})
            await client.until("ready")
        delivery = await _delivered(WebhookDelivery.Status.FAILED)
    assert receiver.requests == []
    assert delivery.last_status_code is None
    assert delivery.last_error.startswith(
        f"127.0.0.1:{server.port} is not a public address the platform can reach. "
    )

    with pytest.raises(ValidationError, match=r"10\.0\.0\.8:80 is not a public address"):
        await sync_to_async(services.endpoint_create)(
            workspace=tenant.workspace, url="http://10.0.0.8/hook", events=["session.ended"]
        )


async def test_a_failed_tool_call_is_its_own_event(embedded, llm):
    tenant = await sync_to_async(make_tenant)("toolfail@example.com")
    async with EgressTestServer() as server:
        receiver = await _receiver(server, [204], embedded)
        await _endpoint(tenant, receiver, ["tool_call.failed"])
        llm.script(*tool_call(0, "call_x", "no_such_tool", "{}"), Finish("tool_calls"), Done())
        llm.script(text_reply("Sorry."))
        async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
            await client.send({"type": "configure", "mode": "text"})
            await client.until("ready")
            await client.send({"type": "text", "text": "go"})
            await client.until("metrics")
        await _delivered(WebhookDelivery.Status.SUCCEEDED)
    [request] = receiver.requests  # session.ended was not chosen
    document = json.loads(request.body)
    assert document["type"] == "tool_call.failed"
    assert document["data"]["tool_call"]["name"] == "no_such_tool"
    assert document["data"]["tool_call"]["status"] == "failed"


async def test_redeliver_sends_the_same_event_with_a_fresh_round(embedded, llm):
    tenant = await sync_to_async(make_tenant)("again@example.com")
    embedded.WEBHOOK_RETRY_WINDOW_S = 0
    async with EgressTestServer() as server:
        receiver = await _receiver(server, [500, 200], embedded)
        await _endpoint(tenant, receiver, ["session.ended"])
        llm.script(text_reply("Hi."))
        async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
            await client.send({"type": "configure", "mode": "text"})
            await client.until("ready")
        failed = await _delivered(WebhookDelivery.Status.FAILED)
        await sync_to_async(services.delivery_redeliver)(delivery=failed)
        done = await _delivered(WebhookDelivery.Status.SUCCEEDED)
    assert done.pk == failed.pk and done.attempts == 2 and receiver.answered == [500, 200]
    assert receiver.requests[0].body == receiver.requests[1].body


# ---------------------------------------------------------------- the docs' snippets


def _signed(secret: str, body: bytes, age_s: int = 0) -> str:
    from webhooks_app import signing

    return signing.signature_header(secret, int(time.time()) - age_s, body)


def test_the_python_snippet_accepts_only_a_fresh_signature_of_the_exact_body():
    verify = docs_verifier()
    secret, body = "whsec_test123", b'{"id":"e1","type":"session.ended"}'
    assert verify(body, _signed(secret, body), secret)
    assert not verify(body + b" ", _signed(secret, body), secret)  # a changed body
    assert not verify(body, _signed("whsec_other", body), secret)  # another secret
    assert not verify(body, _signed(secret, body, age_s=600), secret)  # a replay
    assert not verify(body, "t=abc,v1=00", secret)


def test_the_node_snippet_agrees(tmp_path):
    node = "/usr/bin/node" if os.path.exists("/usr/bin/node") else "node"
    script = tmp_path / "verify.js"
    script.write_text(
        docs_snippet("js", "function verifySignature")
        + "\nconst [body, header, secret] = process.argv.slice(2);"
        + "\nconsole.log(verifySignature(Buffer.from(body), header, secret));\n"
    )
    secret, body = "whsec_node456", '{"id":"e2","text":"héllo"}'
    cases = [
        (body, _signed(secret, body.encode()), "true"),
        (body + " ", _signed(secret, body.encode()), "false"),
        (body, _signed(secret, body.encode(), age_s=600), "false"),
        (body, "t=1,v1=zz", "false"),
    ]
    for sent, header, expected in cases:
        out = subprocess.run(
            [node, str(script), sent, header, secret], capture_output=True, text=True, timeout=30
        )
        assert out.stdout.strip() == expected, out.stderr


def _attempt_in_its_thread(**kwargs: int) -> float | None:
    try:
        return services.delivery_attempt(**kwargs)
    finally:
        connection.close()


@pytest.mark.postgres
async def test_two_copies_of_one_attempt_send_once(embedded, monkeypatch):
    """A broker may hand a delayed task out twice: the attempt is claimed by its number."""
    monkeypatch.setattr("webhooks_app.dispatch.schedule", lambda *_a, **_k: None)  # we run them
    tenant = await sync_to_async(make_tenant)("twice@example.com")
    async with EgressTestServer() as server:
        receiver = await _receiver(server, [200], embedded)
        await _endpoint(tenant, receiver, ["quota.warning"])
        [delivery] = await sync_to_async(services.event_emit)(
            workspace_id=tenant.workspace.pk, event_type="quota.warning", data={}
        )
        attempt = sync_to_async(_attempt_in_its_thread, thread_sensitive=False)
        results = await asyncio.gather(
            *(attempt(delivery_id=delivery.pk, attempt=1) for _ in range(4))
        )
    assert results == [None] * 4 and len(receiver.requests) == 1
    delivery = await sync_to_async(WebhookDelivery.objects.get)(pk=delivery.pk)
    assert (delivery.status, delivery.attempts) == ("succeeded", 1)
