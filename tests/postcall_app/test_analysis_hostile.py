"""What a prompt-injected analysis LLM writes (NUL characters, NaN, Infinity), a save
the database refuses, a lost task, and rerun floods: every analysis ends (completed or
failed), none is left pending for good, and reruns are bounded."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.utils import timezone
from rest_framework.test import APIClient

from postcall_app import analysis, tasks
from sessions_app.models import SessionAnalysis
from tests.engine.providers.llm.openai import fake_server as fake_openai
from tests.factories import Tenant
from tests.postcall_app.test_analysis import _analysed, _talk, analysed_workspace

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("echo_tools")]

SETTINGS = {
    "summary": True,
    "criteria": [{"name": "resolved", "description": "The user learnt where the order is."}],
    "fields": [
        {"name": "order_number", "type": "string", "description": "The order asked about."},
        {"name": "amount", "type": "number", "description": "The order's amount."},
    ],
}


@pytest.fixture
def analysed(owner: Tenant, settings: Any) -> Tenant:
    return analysed_workspace(owner, settings, SETTINGS)


def _script_raw(llm: fake_openai.FakeOpenAIServer, arguments: str) -> None:
    llm.script(
        *fake_openai.tool_call(0, "call_a", "record_analysis", arguments),
        fake_openai.Finish("tool_calls"), fake_openai.Usage(10, 5), fake_openai.Done(),
    )  # fmt: skip


FILLED = '{"summary": "ok", "criteria": {"resolved": {"result": "success", "reason": "yes"}}}'


@pytest.mark.parametrize(
    ("arguments", "kept"),
    [
        ('{"summary": "a\\u0000b", "data": {"order_number": "1042"}}', ("ab", "1042", None)),
        ('{"summary": "ok", "data": {"order_number": "10\\u000042"}}', ("ok", "1042", None)),
        ('{"summary": "ok", "data": {"amount": NaN, "order_number": "7"}}', ("ok", "7", None)),
        ('{"summary": "ok", "data": {"amount": 1e999}}', ("ok", None, None)),
        ('{"summary": "ok", "data": {"amount": -Infinity}}', ("ok", None, None)),
        ('{"summary": "ok\\ud800", "data": {"amount": 12.5}}', ("ok", None, 12.5)),
    ],
    ids=["nul-summary", "nul-field", "nan", "infinity", "minus-infinity", "lone-surrogate"],
)
@pytest.mark.postgres  # PostgreSQL's behaviour (NUL refused, row locks across threads)
async def test_injected_values_are_left_out_and_the_analysis_completes(
    analysed: Tenant,
    llm: fake_openai.FakeOpenAIServer,
    owner_api: APIClient,
    arguments: str,
    kept: tuple[Any, ...],
) -> None:
    llm.script(fake_openai.text_reply("Order 1042 has shipped."))
    _script_raw(llm, arguments)
    session = await _talk(analysed)
    done = await _analysed(session)
    assert done.status == "completed", (done.status, done.error)
    assert (done.summary, done.data["order_number"], done.data["amount"]) == kept
    _script_raw(llm, FILLED)
    rerun = await sync_to_async(owner_api.post)(f"/api/v1/sessions/{session.public_id}/analysis")
    assert rerun.status_code == 202, rerun.content


async def test_a_nul_in_a_reason_is_dropped(
    analysed: Tenant, llm: fake_openai.FakeOpenAIServer
) -> None:
    llm.script(fake_openai.text_reply("Order 1042 has shipped."))
    _script_raw(llm, FILLED.replace('"yes"', '"y\\u0000es"'))
    done = await _analysed(await _talk(analysed))
    assert done.status == "completed" and done.criteria[0]["reason"] == "yes"


@pytest.mark.postgres  # PostgreSQL's behaviour (NUL refused, row locks across threads)
async def test_a_save_the_database_refuses_ends_the_analysis_as_failed(
    analysed: Tenant,
    llm: fake_openai.FakeOpenAIServer,
    owner_api: APIClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever else the database refuses (here: the NUL let through on purpose) ends the
    analysis with a fixed sentence, none of the LLM's text kept, and it can run again."""
    monkeypatch.setattr(analysis, "storable", lambda text: text)
    llm.script(fake_openai.text_reply("Order 1042 has shipped."))
    _script_raw(llm, '{"summary": "a\\u0000b"}')
    session = await _talk(analysed)
    done = await _analysed(session)
    assert (done.status, done.error, done.summary) == ("failed", analysis.UNSAVED, "")
    monkeypatch.undo()
    _script_raw(llm, FILLED)
    rerun = await sync_to_async(owner_api.post)(f"/api/v1/sessions/{session.public_id}/analysis")
    assert rerun.status_code == 202, rerun.content
    assert (await _analysed(session)).status == "completed"


async def test_any_other_error_ends_the_analysis_as_failed(
    analysed: Tenant, llm: fake_openai.FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(session: Any) -> str:
        raise RuntimeError("what the transcript said")

    monkeypatch.setattr(analysis, "_transcript", broken)
    llm.script(fake_openai.text_reply("Order 1042 has shipped."))
    done = await _analysed(await _talk(analysed))
    assert (done.status, done.error) == ("failed", analysis.UNEXPECTED)


async def test_reruns_are_capped_per_session_and_rated_per_workspace(
    analysed: Tenant, llm: fake_openai.FakeOpenAIServer, owner_api: APIClient, settings: Any
) -> None:
    settings.ANALYSIS_MAX_RERUNS, settings.ANALYSIS_RERUNS_PER_HOUR = 2, 2
    llm.script(fake_openai.text_reply("Order 1042 has shipped."))
    _script_raw(llm, FILLED)
    session = await _talk(analysed)
    await _analysed(session)
    path = f"/api/v1/sessions/{session.public_id}/analysis"
    for _ in range(2):
        _script_raw(llm, FILLED)
        assert (await sync_to_async(owner_api.post)(path)).status_code == 202
        await _analysed(session)
    refused = await sync_to_async(owner_api.post)(path)
    assert refused.status_code == 409 and "2 times" in refused.json()["error"]["message"]

    settings.ANALYSIS_MAX_RERUNS = 10  # the workspace's 2 an hour are used
    await sync_to_async(SessionAnalysis.objects.filter(session=session).update)(reruns=0)
    throttled = await sync_to_async(owner_api.post)(path)
    assert throttled.status_code == 429 and int(throttled["Retry-After"]) > 0, throttled.content


def test_a_pending_analysis_whose_task_was_lost_is_ended_by_the_sweep(
    analysed: Tenant,
) -> None:
    from sessions_app.models import Session

    old, recent = (
        SessionAnalysis.objects.create(
            workspace=analysed.workspace,
            session=Session.objects.create(workspace=analysed.workspace, ended_at=timezone.now()),
            requested_at=timezone.now() - timedelta(seconds=age),
        )
        for age in (analysis.LOST_AFTER_S + 5, 10)
    )
    tasks.analysis_sweep()  # what Celery beat runs
    old.refresh_from_db()
    recent.refresh_from_db()
    assert (old.status, old.error) == ("failed", analysis.LOST)
    assert recent.status == "pending"
    beat = {entry["task"] for entry in django_settings.CELERY_BEAT_SCHEDULE.values()}
    assert tasks.SWEEP_TASK in beat
