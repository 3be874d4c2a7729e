"""The Usage page: a server-rendered chart, the figures, the quotas, and CSV."""

from __future__ import annotations

import csv
import io
import uuid
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from secrets_app.models import ApiKey, AuditEvent
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
    assert (
        "(12500 ms sent to speech recognition" in html
        and "77 characters" in html
        and "9 ms sandbox CPU" in html
    )


def test_api_usage_needs_its_scope(used: Tenant, owner_api) -> None:
    from secrets_app import scopes
    from secrets_app import services as key_services
    from tests.conftest import api_client

    _, without = key_services.api_key_create(
        workspace=used.workspace, kind="secret", scopes=[s for s in scopes.ALL if s != "usage:read"]
    )
    refused = api_client(without).get("/api/v1/usage")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "missing_scope"
    assert owner_api.get("/api/v1/usage").status_code == 200


def test_api_usage_dates_are_checked_never_a_crash(used: Tenant, owner_api, settings) -> None:
    """Any day Python can name, alone or in a pair, answers 200 or a 400 naming the field."""
    from datetime import date

    settings.API_REQUESTS_PER_MINUTE = 100_000
    from hypothesis import given, strategies
    from hypothesis import settings as fuzz_settings

    answer = owner_api.get("/api/v1/usage?to=0001-01-01")
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "to: must be 2000-01-01 or later"
    for query in ("to=9999-12-31&from=9999-12-31", "from=2000-01-01&to=2000-01-30"):
        assert owner_api.get(f"/api/v1/usage?{query}").status_code == 200, query
    days = strategies.dates(min_value=date.min, max_value=date.max)

    @given(start=strategies.none() | days, end=strategies.none() | days)
    @fuzz_settings(max_examples=150, deadline=None, derandomize=True, database=None)
    def check(start: date | None, end: date | None) -> None:
        query = "&".join(
            f"{name}={day.isoformat()}" for name, day in (("from", start), ("to", end)) if day
        )
        answer = owner_api.get(f"/api/v1/usage?{query}")
        assert answer.status_code in (200, 400), (query, answer.content)
        if answer.status_code == 400:
            assert answer.json()["error"]["message"].startswith(("from:", "to:"))

    check()


def test_csv_cells_that_a_spreadsheet_would_run_are_text(owner: Tenant) -> None:
    """OWASP CSV injection: names beginning with = + - @ tab CR, or holding a separator
    (`Acme;=1+1` is a formula where ";" separates: such a reader splits a "," file at every
    ";", quotes or not), come out quoted and prefixed with ', where a cell could start too."""
    names = ["Acme;=1+1", "-2+3", "+1", "@SUM(A1)", "\tcmd", "\rcmd", "a,=b", "x\n=1", "b;\t=1"]
    for name in [*names, "Plain desk"]:
        _session_with_usage(owner, name, prompt_tokens=1)
    client = Client(REMOTE_ADDR="203.0.113.5")
    client.force_login(owner.user)
    text = client.get(page(owner, "usage-csv") + "?group=agent").content.decode()
    assert "\"'Acme;'=1+1\"" in text and '"Plain desk"' in text
    for delimiter in (",", ";", "\t"):  # read as spreadsheets of different locales read it
        for row in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter):
            for cell in row:
                assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), (delimiter, cell)
    by_name = {row[1]: row for row in csv.reader(io.StringIO(text, newline=""))}
    assert set(by_name) >= {"'Acme;'=1+1", "'-2+3", "'@SUM(A1)", "'a,'=b", "Plain desk"}
    assert by_name["Plain desk"][2:4] == ["1", "0"]  # figures stay numbers
    # Taking the figures out of the platform is in the audit log.
    event = AuditEvent.objects.get(workspace=owner.workspace, action="usage.exported")
    assert (event.actor_user, event.address) == (owner.user, "203.0.113.5")
    assert event.details == {"format": "csv", "group_by": "agent"}
