"""Post-call analysis through the scripted LLM: a session of an agent with analysis settings
ends; the analysis runs off the hot path, fills the schema the settings make, is shown on the
session page and in the API, is sent as ``analysis.completed``, is counted in usage, and can
be run again. The outsider sees none of it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.test import Client as PageClient
from django.urls import reverse
from rest_framework.test import APIClient

from postcall_app import dispatch
from sessions_app import selectors, services
from sessions_app.models import Session, SessionAnalysis
from tests.engine.providers.llm.openai import fake_server as fake_openai
from tests.factories import Tenant, order_tool
from tests.frontend.dashboard.conftest import page
from tests.frontend.dashboard.test_agents import editor_post, field_errors, submitted
from tests.sessions_app.recording import eventually
from tests.sessions_app.wsclient import Client
from usage_app.models import WorkspaceQuota
from webhooks_app import services as webhooks
from webhooks_app.models import EventType, WebhookDelivery

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("echo_tools")]

SETTINGS = {
    "summary": True,
    "criteria": [
        {"name": "resolved", "description": "The user learnt where the order is."},
        {"name": "polite", "description": "The agent was polite."},
    ],
    "fields": [
        {"name": "order_number", "type": "string", "description": "The order asked about."},
        {"name": "items", "type": "integer", "description": "How many items."},
    ],
}
FILLED = {
    "summary": "The user asked about order 1042; it has shipped.",
    "criteria": {
        "resolved": {"result": "success", "reason": "The agent said it shipped."},
        "polite": {"result": "maybe", "reason": "not a verdict the schema allows"},
    },
    "data": {"order_number": "1042", "items": "three"},
}


@pytest.fixture
def analysed(owner: Tenant, settings: Any) -> Tenant:
    return analysed_workspace(owner, settings, SETTINGS)


def analysed_workspace(owner: Tenant, settings: Any, analysis: dict[str, Any]) -> Tenant:
    # The embedded default: analysis on the platform's post-call thread (test_celery_analysis
    # runs it on a real Celery worker).
    settings.CELERY_TASK_ALWAYS_EAGER = True
    services.agent_create(
        workspace=owner.workspace, name="Orders", slug="orders", analysis=analysis,
        tools=[order_tool()],
    )  # fmt: skip
    webhooks.endpoint_create(
        workspace=owner.workspace, url="https://hooks.example.com/x",
        events=[EventType.ANALYSIS_COMPLETED],
    )  # fmt: skip
    return owner


def _script_analysis(llm: fake_openai.FakeOpenAIServer, filled: dict[str, Any]) -> None:
    llm.script(
        *fake_openai.tool_call(0, "call_a", "record_analysis", json.dumps(filled)),
        fake_openai.Finish("tool_calls"),
        fake_openai.Usage(321, 45),
        fake_openai.Done(),
    )


async def _talk(tenant: Tenant) -> Session:
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "agent": "orders", "mode": "text"})
        ready = await client.until("ready")
        await client.send({"type": "text", "text": "Where is order 1042?"})
        await client.until("metrics")
    return await eventually(
        lambda: Session.objects.filter(public_id=ready["sessionId"], ended_at__isnull=False).first()
    )


async def _analysed(session: Session) -> SessionAnalysis:
    await sync_to_async(dispatch.wait_idle)()
    return await eventually(
        lambda: SessionAnalysis.objects.filter(session=session).exclude(status="pending").first()
    )


async def test_an_ended_session_is_analysed_shown_sent_and_counted(
    analysed: Tenant, llm: fake_openai.FakeOpenAIServer, owner_api: APIClient
) -> None:
    llm.script(fake_openai.text_reply("Order 1042 has shipped."))
    _script_analysis(llm, FILLED)
    session = await _talk(analysed)
    analysis = await _analysed(session)

    assert (analysis.status, analysis.error) == ("completed", "")
    assert analysis.summary == FILLED["summary"]
    assert analysis.criteria == [
        {"name": "resolved", "result": "success", "reason": "The agent said it shipped."},
        {"name": "polite", "result": "unknown", "reason": "the analysis gave no verdict"},
    ]
    assert analysis.data == {"order_number": "1042", "items": None}  # "three" is no integer

    # The LLM got the transcript and one function whose parameters the settings made.
    request = llm.requests[-1].json
    (tool,) = request["tools"]
    parameters = tool["function"]["parameters"]
    assert tool["function"]["name"] == "record_analysis"
    assert parameters["properties"]["criteria"]["required"] == ["resolved", "polite"]
    assert parameters["properties"]["data"]["properties"]["items"]["type"] == ["integer", "null"]
    assert "User: Where is order 1042?" in request["messages"][-1]["content"]

    detail = await sync_to_async(owner_api.get)(f"/api/v1/sessions/{session.public_id}")
    assert detail.json()["analysis"]["summary"] == FILLED["summary"]
    await sync_to_async(session.refresh_from_db)()
    assert session.usage["llm_requests"] == 2  # the turn's and the analysis's
    assert analysis.usage == {"llm_requests": 1, "prompt_tokens": 321, "completion_tokens": 45}
    delivery = await sync_to_async(WebhookDelivery.objects.get)(event_type="analysis.completed")
    sent = json.loads(delivery.payload)["data"]
    assert sent["session"]["id"] == str(session.public_id)
    assert sent["analysis"]["data"] == {"order_number": "1042", "items": None}

    def page() -> str:
        client = PageClient()
        client.force_login(analysed.user)
        path = reverse("dashboard:session", args=[analysed.workspace.pk, session.public_id])
        return client.get(path).content.decode()

    html = await sync_to_async(page)()
    assert FILLED["summary"] in html and "Analyse again" in html


async def test_analysis_runs_again_on_demand_and_the_outsider_cannot_ask(
    analysed: Tenant,
    llm: fake_openai.FakeOpenAIServer,
    owner_api: APIClient,
    outsider_api: APIClient,
) -> None:
    llm.script(fake_openai.text_reply("Order 1042 has shipped."))
    _script_analysis(llm, FILLED)
    session = await _talk(analysed)
    await _analysed(session)

    path = f"/api/v1/sessions/{session.public_id}/analysis"
    assert (await sync_to_async(outsider_api.post)(path)).status_code == 404
    _script_analysis(llm, {**FILLED, "summary": "Second opinion."})
    rerun = await sync_to_async(owner_api.post)(path)
    assert rerun.status_code == 202 and rerun.json()["status"] == "pending"
    again = await _analysed(session)
    assert again.summary == "Second opinion."
    await sync_to_async(session.refresh_from_db)()
    assert session.usage["llm_requests"] == 3
    deliveries = WebhookDelivery.objects.filter(event_type="analysis.completed")
    assert await sync_to_async(deliveries.count)() == 2


async def test_a_provider_failure_is_kept_as_a_fixed_sentence(
    analysed: Tenant, llm: fake_openai.FakeOpenAIServer
) -> None:
    llm.script(fake_openai.text_reply("Order 1042 has shipped."))
    for _ in range(4):  # the adapter's own retries too
        llm.script(fake_openai.HttpError(401, "Incorrect API key provided: sk-live-123"))
    session = await _talk(analysed)
    analysis = await _analysed(session)
    assert analysis.status == "failed"
    assert analysis.error.startswith("the language model failed")
    assert "sk-live" not in analysis.error


async def test_no_analysis_runs_once_a_quota_is_used_up(
    analysed: Tenant, llm: fake_openai.FakeOpenAIServer
) -> None:
    llm.script(fake_openai.text_reply("Order 1042 has shipped.", usage=fake_openai.Usage(40, 10)))
    await sync_to_async(WorkspaceQuota.objects.create)(
        workspace=analysed.workspace, llm_tokens_per_day=50
    )
    session = await _talk(analysed)
    analysis = await _analysed(session)
    assert (analysis.status, analysis.error) == ("skipped", "a quota of the workspace is used up")
    assert len(llm.requests) == 1  # the turn's only


def test_analysis_settings_are_checked_when_the_agent_is_saved(owner: Tenant) -> None:
    with pytest.raises(ValidationError, match=r"fields\[0\]\.type"):
        services.agent_create(
            workspace=owner.workspace, name="A", slug="a",
            analysis={"fields": [{"name": "x", "type": "date"}]},
        )  # fmt: skip
    agent = services.agent_create(
        workspace=owner.workspace, name="B", slug="b", analysis={"summary": False}
    )
    assert agent.analysis == {}  # nothing to analyse: no analysis


def test_the_agent_editor_saves_zero_retention_and_analysis_settings(owner: Tenant) -> None:
    owner_client = PageClient()
    owner_client.force_login(owner.user)
    refused = owner_client.post(
        page(owner, "agent-new"),
        editor_post(analysis='{"fields": [{"name": "x", "type": "date"}]}'),
    )
    assert "[0].type: one of string" in field_errors(refused.content.decode(), "id_analysis")
    owner_client.post(
        page(owner, "agent-new"),
        editor_post(zero_retention="on", analysis=json.dumps({"summary": True})),
    )
    agent = selectors.agent_get(workspace=owner.workspace, slug="orders")
    assert agent.zero_retention and agent.analysis == {
        "summary": True,
        "criteria": [],
        "fields": [],
    }
    shown = submitted(owner_client.get(page(owner, "agent-edit", "orders")).content.decode())
    assert json.loads(shown["analysis"])["summary"] is True
