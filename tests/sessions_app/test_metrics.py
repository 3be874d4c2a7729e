"""/metrics: what sessions did, in Prometheus format, shown only to the operator."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, Client
from prometheus_client.parser import text_string_to_metric_families

from core import leases as live
from engine import metrics, protocol
from tests.engine.providers.llm.openai.fake_server import (
    Done,
    FakeOpenAIServer,
    Finish,
    HttpError,
    text_reply,
    tool_call,
)
from tests.factories import Tenant, make_tenant, order_tool
from tests.sessions_app.wsclient import Client as WsClient

pytestmark = pytest.mark.django_db(transaction=True)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(autouse=True)
def _no_token_and_no_leases(settings):
    settings.METRICS_TOKEN = None
    live._memory.clear()


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def scrape() -> tuple[str, Samples]:
    response = await AsyncClient().get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    return text, parse(text)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def grew(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


async def _tool_turn_then_a_bad_frame(tenant: Tenant, llm: FakeOpenAIServer) -> Samples:
    """A text turn that calls a server tool in the sandbox, then a malformed frame.

    Returns a scrape taken while the session was open."""
    llm.script(*tool_call(0, "call_1", "track_order", '{"order_number": "ZX-4711"}'),
               Finish("tool_calls"), Done())  # fmt: skip
    llm.script(text_reply("Order ZX-4711 has shipped to Mrs Quibble."))
    async with WsClient(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "mode": "text",
                           "instructions": "You track parcels for Quibble Ltd.",
                           "tools": [order_tool()]})  # fmt: skip
        await client.until("ready")
        await client.send({"type": "text", "text": "Where is parcel ZX-4711, Quibble here?"})
        assert (await client.until("chat", timeout=15))["text"].startswith("Order ZX-4711")
        await client.until("metrics")
        await client.send_raw(text="{not json")
        assert (await client.until("error"))["code"] == "bad_json"
        _, during = await scrape()
    return during


async def test_a_session_with_a_tool_turn_shows_up_in_metrics(owner, llm, settings):
    settings.TOOL_RUNNER = "sandbox"
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the sandbox in a thread of this process
    _, before = await scrape()

    during = await _tool_turn_then_a_bad_frame(owner, llm)
    _, after = await scrape()

    assert value(during, "voice_sessions_live") == value(before, "voice_sessions_live") + 1
    # Back to where it was (0 when this test runs alone; other tests' sessions may linger).
    assert value(after, "voice_sessions_live") == value(before, "voice_sessions_live")
    assert grew(before, after, "voice_sessions_started_total") == 1
    assert grew(before, after, "voice_sessions_ended_total", close_code="1000") == 1
    assert grew(before, after, "voice_turns_total", outcome="completed") == 1
    assert grew(before, after, "voice_turns_total", outcome="failed") == 0
    assert grew(before, after, "voice_tool_calls_total", outcome="completed") == 1
    assert grew(before, after, "voice_errors_total", code="bad_json") == 1
    assert grew(before, after, "voice_turn_stage_seconds_count", stage="turn") == 1
    assert grew(before, after, "voice_turn_stage_seconds_count", stage="llm_first_token") == 1
    # A typed turn has no speech stages: nothing is made up for them.
    assert grew(before, after, "voice_turn_stage_seconds_count", stage="stt_final") == 0
    # The turn took well under 10 s, so it sits in the 10 s bucket.
    assert grew(before, after, "voice_turn_stage_seconds_bucket", stage="turn", le="10.0") == 1


async def test_failed_turns_timed_out_tools_and_refusals_are_counted(owner, llm, settings):
    settings.TOOL_RUNNER = "sandbox"
    settings.CELERY_TASK_ALWAYS_EAGER = True
    llm.script(*tool_call(0, "c1", "spin", "{}"), Finish("tool_calls"), Done())
    llm.script(HttpError(500, "upstream exploded"))
    tool = {"name": "spin", "handler": "async () => { while (true) {} }", "timeoutMs": 300}
    _, before = await scrape()
    async with WsClient("/v1/session?key=pk_unknown") as refused:
        assert await refused.closed() == 4001
    async with WsClient(f"/v1/session?key={owner.publishable_key}") as client:
        await client.send({"type": "configure", "mode": "text", "tools": [tool]})
        await client.until("ready")
        await client.send({"type": "text", "text": "spin please"})
        assert (await client.until("error", timeout=15))["code"] == "llm_failed"
        await client.until("metrics")
    _, after = await scrape()
    assert grew(before, after, "voice_tool_calls_total", outcome="timed_out") == 1
    assert grew(before, after, "voice_turns_total", outcome="failed") == 1
    assert grew(before, after, "voice_errors_total", code="llm_failed") == 1
    assert grew(before, after, "voice_errors_total", code="invalid_key") == 1
    # The refused connection never became a session.
    assert grew(before, after, "voice_sessions_started_total") == 1


async def test_unknown_codes_and_outcomes_are_counted_as_other() -> None:
    _, before = await scrape()
    # Metrics read typed events: a code or a status outside the protocol's lists cannot
    # even be made into an event, so it never reaches a label.
    with pytest.raises(ValueError):
        protocol.ErrorEvent(code="Mrs Quibble's <b>order</b>", message="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        protocol.ToolStatusEvent(call_id="c", name="x", status="odd")  # type: ignore[arg-type]
    odd_turn: Any = {"outcome": "Mrs Quibble's <b>order</b>", "turn_ms": "slow"}
    metrics.observe_event(
        protocol.MetricsEvent(
            turn_id=1, source="text", end_of_utterance_ms=None, stt_final_ms=None,
            llm_first_token_ms=None, tts_first_byte_ms=None, first_audio_ms=-3,
            llm_rounds=1, tools=[], timeline=[], llm=None, tts=None, usage={}, **odd_turn,
        )
    )  # fmt: skip
    metrics.session_opened()
    metrics.session_closed(123456)
    text, after = await scrape()
    assert grew(before, after, "voice_turns_total", outcome="other") == 1
    assert grew(before, after, "voice_turn_stage_seconds_count", stage="turn") == 0
    assert grew(before, after, "voice_turn_stage_seconds_count", stage="first_audio") == 0
    assert grew(before, after, "voice_sessions_ended_total", close_code="other") == 1
    assert "Quibble" not in text


# ---------------------------------------------------------------- who may scrape


def test_loopback_may_scrape_when_no_token_is_set(db) -> None:
    assert Client().get("/metrics").status_code == 200


@pytest.mark.parametrize(
    "extra",
    [
        {"REMOTE_ADDR": "203.0.113.9"},
        {"REMOTE_ADDR": "10.1.2.3"},
        {"HTTP_X_FORWARDED_FOR": "203.0.113.9"},  # through a proxy on this host
        {"HTTP_FORWARDED": "for=203.0.113.9"},
    ],
)
def test_others_are_refused_when_no_token_is_set(db, extra) -> None:
    response = Client().get("/metrics", **extra)
    assert response.status_code == 403
    assert b"voice_" not in response.content


def test_with_a_token_only_the_bearer_may_scrape(db, settings) -> None:
    settings.METRICS_TOKEN = "scrape-me-9f2c4e1d"
    client = Client()
    assert client.get("/metrics").status_code == 403  # loopback is not enough any more
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="scrape-me-9f2c4e1d").status_code == 403
    allowed = client.get(
        "/metrics", HTTP_AUTHORIZATION="Bearer scrape-me-9f2c4e1d", REMOTE_ADDR="198.51.100.7"
    )
    assert allowed.status_code == 200
    assert b"voice_sessions_live" in allowed.content
    assert (
        client.post("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me-9f2c4e1d").status_code == 405
    )


def test_a_workspace_key_does_not_open_metrics(outsider, settings) -> None:
    settings.METRICS_TOKEN = "scrape-me-9f2c4e1d"
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {outsider.secret_key}")
    assert response.status_code == 403


async def test_the_outsider_sees_nothing_of_a_tenant_in_metrics(llm, settings) -> None:
    """Whoever reads /metrics learns counts, never whose or what."""
    settings.TOOL_RUNNER = "sandbox"
    settings.CELERY_TASK_ALWAYS_EAGER = True
    tenant = await sync_to_async(make_tenant)(
        "quibble@example.com", workspace_name="Quibble Parcels Ltd"
    )
    await _tool_turn_then_a_bad_frame(tenant, llm)
    text, samples = await scrape()
    for secret in ("Quibble", "ZX-4711", "track_order", "parcel", "shipped", "workspace",
                   tenant.publishable_key):  # fmt: skip
        assert secret not in text, secret
    allowed = {
        "code": metrics.ERROR_CODES | {"other"},
        "outcome": metrics.TURN_OUTCOMES | metrics.TOOL_OUTCOMES | {"other"},
        "stage": set(metrics.STAGES.values()),
        "kind": set(metrics.PROVIDER_KINDS),
        "reason": metrics.FAILURE_REASONS | {"other"},
        "change": set(metrics.CIRCUIT_CHANGES),
    }
    for name, labels in samples:
        for label, label_value in labels:
            if name.startswith("voice_") and label in allowed:
                assert label_value in allowed[label], (name, label, label_value)
            elif name.startswith("voice_"):
                assert label in {"le", "close_code"}, (name, label)
                assert label_value.replace(".", "").isdigit() or label_value in {
                    "+Inf", "other", "none"}, (name, label, label_value)  # fmt: skip
