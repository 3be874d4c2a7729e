"""The Usage page: a server-rendered chart, the figures, the quotas, and CSV."""

from __future__ import annotations

import csv
import io
import uuid
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from secrets_app.models import ApiKey
from sessions_app import services as session_services
from sessions_app.models import Session
from tests.factories import Tenant
from tests.frontend.dashboard.conftest import page
from usage_app.models import UsageDaily, WorkspaceQuota
from usage_app.services import usage_record


def _session_with_usage(tenant: Tenant, agent_name: str | None, **usage: int) -> None:
    agent = None
    if agent_name is not None:
        agent = session_services.agent_create(
            workspace=tenant.workspace, name=agent_name, slug=f"a-{uuid.uuid4().hex[:6]}"
        )
    session = session_services.session_record_start(
        session_id=uuid.uuid4().hex, workspace=tenant.workspace,
        api_key=ApiKey.objects.filter(workspace=tenant.workspace).first(),
        origin="http://localhost:3000", mode="voice", agent=agent,
    )  # fmt: skip
    usage_record(session=session, usage=usage, ended=True)


@pytest.fixture
def used(owner: Tenant) -> Tenant:
    _session_with_usage(owner, "Order desk", prompt_tokens=1200, completion_tokens=300,
                        llm_requests=4, stt_audio_ms=90_000, server_tool_calls=2)  # fmt: skip
    _session_with_usage(owner, None, prompt_tokens=50, completion_tokens=10, llm_requests=1,
                        client_tool_calls=1)  # fmt: skip
    _session_with_usage(owner, "=HYPERLINK(1)", prompt_tokens=1, completion_tokens=1)
    return owner


def test_the_chart_and_figures_per_day(used: Tenant, owner_client: Client) -> None:
    html = owner_client.get(page(used, "usage")).content.decode()
    today = timezone.now().date().isoformat()
    assert html.count('class="usage-bar"') == 30  # every day of the range, zeros too
    assert f'data-label="{today}" data-value="1562"' in html  # LLM tokens of today
    assert "LLM tokens per day" in html and "<svg" in html
    assert '<option value="30" selected>Last 30 days</option>' in html  # what is shown
    assert "1562" in html and "90 s" in html  # tokens and STT audio in the table


def test_per_agent_and_another_metric(used: Tenant, owner_client: Client) -> None:
    url = page(used, "usage") + "?group=agent&metric=voice_minutes&days=7"
    html = owner_client.get(url).content.decode()
    assert "Voice minutes per agent" in html
    assert 'data-label="Order desk" data-value="1.5"' in html
    assert "inline config" in html


def test_csv_export(used: Tenant, owner_client: Client) -> None:
    response = owner_client.get(page(used, "usage-csv") + "?group=agent")
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0][:4] == ["agent", "agent_name", "sessions", "llm_requests"]
    names = {row[1]: row for row in rows[1:]}
    assert names["Order desk"][rows[0].index("prompt_tokens")] == "1200"
    assert "'=HYPERLINK(1)" in names  # never a formula in a spreadsheet
    per_day = list(
        csv.reader(io.StringIO(owner_client.get(page(used, "usage-csv")).content.decode()))
    )
    assert len(per_day) == 31 and per_day[0][0] == "day"


def test_quotas_are_shown(used: Tenant, owner_client: Client) -> None:
    WorkspaceQuota.objects.create(workspace=used.workspace, llm_tokens_per_day=1900)
    html = owner_client.get(page(used, "usage")).content.decode()
    assert "LLM tokens today (UTC)" in html and "1562 of 1900 tokens (82 %)" in html
    assert "<progress" in html


def test_old_days_fall_out_of_the_range(owner: Tenant, owner_client: Client) -> None:
    UsageDaily.objects.create(
        workspace=owner.workspace, day=timezone.now().date() - timedelta(days=40),
        prompt_tokens=777,
    )  # fmt: skip
    assert "777" not in owner_client.get(page(owner, "usage")).content.decode()
    html = owner_client.get(page(owner, "usage") + "?days=90").content.decode()
    assert "777" in html


def test_the_outsider_sees_nothing(used: Tenant, outsider_client: Client) -> None:
    assert outsider_client.get(page(used, "usage")).status_code == 404
    assert outsider_client.get(page(used, "usage-csv")).status_code == 404


# ---------------------------------------------------------------- the REST API


def test_api_groups_and_refuses_bad_ranges(used: Tenant, owner_api) -> None:
    by_agent = owner_api.get("/api/v1/usage?group_by=agent").json()
    assert {row["agent_name"] for row in by_agent["rows"]} == {
        "Order desk", "inline config", "=HYPERLINK(1)"
    }  # fmt: skip
    assert by_agent["total"]["sessions"] == 3
    today = timezone.now().date()
    one_day = owner_api.get(f"/api/v1/usage?from={today}&to={today}").json()
    assert [row["day"] for row in one_day["rows"]] == [today.isoformat()]
    for query, field in (
        (f"from={today}&to={today - timedelta(days=1)}", "from"),
        ("from=2020-01-01&to=2022-01-01", "from"),
        ("from=yesterday", "from"),
        ("group_by=week", "group_by"),
    ):
        answer = owner_api.get(f"/api/v1/usage?{query}")
        assert answer.status_code == 400, query
        assert answer.json()["error"]["message"].startswith(field), answer.json()


def test_api_needs_a_secret_key(used: Tenant, client: Client) -> None:
    assert client.get("/api/v1/usage").status_code == 401
    answer = client.get("/api/v1/usage", HTTP_AUTHORIZATION=f"Bearer {used.publishable_key}")
    assert answer.status_code == 401


def test_a_sessions_page_shows_its_usage(owner: Tenant, owner_client: Client) -> None:
    _session_with_usage(owner, None, prompt_tokens=321, completion_tokens=45, llm_requests=2,
                        estimated_llm_requests=1, stt_audio_ms=12_500, tts_characters=77,
                        server_tool_calls=1, tool_cpu_ms=9)  # fmt: skip
    session = Session.objects.get(workspace=owner.workspace)
    html = owner_client.get(page(owner, "session", str(session.public_id))).content.decode()
    assert "321 prompt + 45 completion" in html and "partly estimated" in html
    assert "(12500 ms)" in html and "77 characters" in html and "9 ms sandbox CPU" in html
