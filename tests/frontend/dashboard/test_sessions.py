"""The Sessions room: the list with its filters and pages, and one session in detail."""

from __future__ import annotations

import re
import time
import uuid
from datetime import timedelta
from typing import Any

import redis
from django.conf import settings
from django.test import Client
from django.utils import timezone

from core import leases as sessions_live
from secrets_app import services as secret_services
from secrets_app.models import ApiKey
from sessions_app import services
from sessions_app.models import Agent, Session
from tests.factories import Tenant
from tests.frontend.dashboard.conftest import page
from usage_app import services as usage_services

SECRET_VALUE = "whsec_9f8e7d6c5b4a39281706"
_DETAIL_LINK = re.compile(r"/sessions/([0-9a-f-]{36})/")


def record(
    tenant: Tenant,
    *,
    agent: Agent | None = None,
    origin: str = "https://shop.example.com",
    close_code: int | None = 1000,
    live: bool = False,
    started_ago: timedelta = timedelta(minutes=5),
    lasted: timedelta = timedelta(seconds=65),
) -> Session:
    """A finished (or live) session of ``tenant``'s workspace, recorded by the services."""
    key = ApiKey.objects.get(workspace=tenant.workspace, kind="publishable")
    session = services.session_record_start(
        session_id=uuid.uuid4().hex, workspace=tenant.workspace, api_key=key, origin=origin,
        mode="voice", agent=agent,
    )  # fmt: skip
    started = timezone.now() - started_ago
    ended = None if live else started + lasted
    Session.objects.filter(pk=session.pk).update(
        started_at=started, ended_at=ended, close_code=None if live else close_code
    )
    session.refresh_from_db()
    if live:  # its process holds it, as a running session's host does
        hold(tenant, session, held=True)
    return session


def hold(tenant: Tenant, session: Session, *, held: bool) -> None:
    """Give a live record the lease its process would hold (or take it away)."""
    pool, session_id = sessions_live.workspace_pool(tenant.workspace.pk), session.public_id.hex
    if settings.REDIS_URL:
        client = redis.Redis.from_url(settings.REDIS_URL)
        if held:
            client.zadd(pool, {session_id: time.time() + sessions_live.LEASE_S})
        else:
            client.zrem(pool, session_id)
        client.close()
    elif held:
        sessions_live._memory.setdefault(pool, {})[session_id] = time.time() + 90
    else:
        sessions_live._memory.get(pool, {}).pop(session_id, None)


def listed(response: Any) -> set[str]:
    return set(_DETAIL_LINK.findall(response.content.decode()))


def ids(*sessions: Session) -> set[str]:
    return {str(session.public_id) for session in sessions}


# ---------------------------------------------------------------- the list


def test_the_list_shows_this_workspaces_sessions_in_plain_words(
    owner: Tenant, outsider: Tenant, owner_client: Client
) -> None:
    orders = services.agent_create(workspace=owner.workspace, name="Order desk", slug="orders")
    ended = record(owner, agent=orders, lasted=timedelta(seconds=65))
    lost = record(owner, close_code=1006, origin="https://docs.example.org")
    live = record(owner, live=True)
    theirs = record(outsider, origin="https://theirs.example.net")

    response = owner_client.get(page(owner, "sessions"))
    html = response.content.decode()
    assert response.status_code == 200
    assert listed(response) == ids(ended, lost, live)
    assert "theirs.example.net" not in html and str(theirs.public_id) not in html
    assert "Order desk" in html and "inline config" in html
    assert "1 min 05 s" in html  # the duration of the ended session
    assert "Connection lost" in html and "Ended" in html and "Live" in html


def test_close_codes_read_as_reasons(owner: Tenant, owner_client: Client) -> None:
    for code in (1001, 4003, 4242):
        record(owner, close_code=code)
    html = owner_client.get(page(owner, "sessions")).content.decode()
    assert "Page closed" in html
    assert "Origin not allowed" in html
    assert "Closed with code 4242" in html


def test_filters_narrow_the_list(owner: Tenant, owner_client: Client) -> None:
    orders = services.agent_create(workspace=owner.workspace, name="Order desk", slug="orders")
    recent = record(owner, agent=orders, started_ago=timedelta(hours=2))
    live = record(
        owner, live=True, origin="https://docs.example.org", started_ago=timedelta(days=3)
    )
    old_failed = record(owner, close_code=4029, started_ago=timedelta(days=40))
    url = page(owner, "sessions")

    def shown(**query: str) -> set[str]:
        return listed(owner_client.get(url, query))

    assert shown() == ids(recent, live, old_failed)
    assert shown(agent=str(orders.pk)) == ids(recent)
    assert shown(agent="inline") == ids(live, old_failed)
    assert shown(status="live") == ids(live)
    assert shown(status="ended") == ids(recent)
    assert shown(status="failed") == ids(old_failed)
    assert shown(started="24h") == ids(recent)
    assert shown(started="7d") == ids(recent, live)
    assert shown(origin="DOCS.example") == ids(live)
    assert shown(agent="inline", started="30d") == ids(live)


def test_another_workspaces_agent_is_no_filter_choice(
    owner: Tenant, outsider: Tenant, owner_client: Client
) -> None:
    theirs = services.agent_create(workspace=outsider.workspace, name="Theirs", slug="theirs")
    mine = record(owner)
    response = owner_client.get(page(owner, "sessions"), {"agent": str(theirs.pk)})
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert listed(response) == ids(mine)  # the invalid filter narrows nothing


def test_pages_of_fifty_keep_the_filters(owner: Tenant, owner_client: Client) -> None:
    key = ApiKey.objects.get(workspace=owner.workspace, kind="publishable")
    Session.objects.bulk_create(
        Session(workspace=owner.workspace, api_key=key, origin="https://shop.example.com",
                ended_at=timezone.now(), close_code=1000)
        for _ in range(51)
    )  # fmt: skip
    record(owner, origin="https://elsewhere.example")
    url = page(owner, "sessions")
    first = owner_client.get(url, {"origin": "shop"})
    html = first.content.decode()
    assert len(listed(first)) == 50
    assert "Page 1 of 2" in html and "51 sessions" in html
    (next_link,) = re.findall(r'rel="next" href="([^"]*)"', html)
    next_link = next_link.replace("&amp;", "&")
    assert "origin=shop" in next_link and "page=2" in next_link
    second = owner_client.get(url + next_link)
    assert len(listed(second)) == 1 and listed(second).isdisjoint(listed(first))


def test_empty_states(owner: Tenant, owner_client: Client) -> None:
    html = owner_client.get(page(owner, "sessions")).content.decode()
    assert "No sessions yet" in html
    record(owner)
    html = owner_client.get(page(owner, "sessions"), {"status": "live"}).content.decode()
    assert "No sessions match these filters" in html


# ---------------------------------------------------------------- one session


def _full_session(tenant: Tenant) -> Session:
    secret_services.secret_set(
        workspace=tenant.workspace, name="WEBHOOK_SECRET", value=SECRET_VALUE, allowed_hosts=[]
    )
    session = record(tenant, close_code=1001)
    services.session_record_append(
        session=session,
        entries=[
            ("user", "Where is <b>order</b> A1?"),
            ("assistant", "It shipped & arrives Monday."),
        ],
    )
    services.session_record_tool_log(
        workspace_id=tenant.workspace.pk, session_id=session.public_id.hex, tool_name="track_order",
        console="looked up A1",
    )  # fmt: skip
    services.session_record_tool_call(
        session=session, call_id="call_1", name="track_order",
        arguments={"order_number": "A1", "signature": SECRET_VALUE}, status="completed",
        result='{"status": "shipped", "note": "</pre><script>alert(1)</script>"}', error=None,
        duration_ms=41.7,
    )  # fmt: skip
    services.session_record_tool_call(
        session=session, call_id="call_2", name="refund", arguments={}, status="timed_out",
        result=None, error="timed out after 10 s", duration_ms=10_000.0,
    )  # fmt: skip
    services.session_record_turn(
        session=session,
        metrics={
            "turnId": 1, "source": "speech", "outcome": "completed", "llmRounds": 2,
            "timeline": [
                {"stage": "end_of_utterance", "startMs": 0.0, "endMs": 210.0},
                {"stage": "stt_final", "startMs": 210.0, "endMs": 300.0},
                {"stage": "tool:track_order", "startMs": 340.0, "endMs": 382.0},
                {"stage": "llm_first_token", "startMs": 390.0, "endMs": 560.0},
                {"stage": "tts_first_byte", "startMs": 580.0, "endMs": 640.0},
                {"stage": "first_audio", "startMs": 650.0, "endMs": 650.0},
                {"stage": "turn", "startMs": 0.0, "endMs": 1900.0},
            ],
        },
    )  # fmt: skip
    services.session_record_turn(  # recorded before timelines existed
        session=session,
        metrics={"turnId": 2, "source": "text", "llmFirstTokenMs": 120.0, "turnMs": 400.0},
    )
    return session


def _turn_svg(html: str, turn_id: int) -> str:
    article = html.split(f'id="turn-{turn_id}"', 1)[1].split("</article>", 1)[0]
    return article.split("<svg", 1)[1].split("</svg>", 1)[0]


def test_the_detail_shows_transcript_tool_calls_and_a_waterfall_per_turn(
    owner: Tenant, owner_client: Client
) -> None:
    session = _full_session(owner)
    response = owner_client.get(page(owner, "session", session.public_id))
    html = response.content.decode()
    assert response.status_code == 200
    # facts
    assert "inline config" in html and "https://shop.example.com" in html
    assert "Page closed" in html and "1 min 05 s" in html and "browser" in html  # key label
    # transcript, escaped
    assert "Where is &lt;b&gt;order&lt;/b&gt; A1?" in html and "<b>order</b>" not in html
    assert "It shipped &amp; arrives Monday." in html
    assert "track_order console:\nlooked up A1" in html
    # tool calls: pretty arguments without the secret, status, duration, result or error
    assert "&quot;order_number&quot;: &quot;A1&quot;" in html
    assert "[secret WEBHOOK_SECRET]" in html and SECRET_VALUE not in html
    assert "<script>alert(1)</script>" not in html
    assert "&lt;/pre&gt;&lt;script&gt;" in html
    assert "timed out after 10 s" in html and "42 ms" in html
    # the first turn's waterfall: an image with one bar per stage
    svg = _turn_svg(html, 1)
    assert 'role="img"' in svg and 'aria-label="Latency waterfall of turn 1:' in svg
    assert 'viewBox="0 0 360' in svg and 'width="100%"' in svg
    stages = re.findall(r'data-stage="([^"]+)"', svg)
    assert stages == [
        "end_of_utterance", "stt_final", "tool:track_order", "llm_first_token",
        "tts_first_byte", "first_audio", "turn",
    ]  # fmt: skip
    assert svg.count('class="wf-bar"') == len(stages)
    assert "170 ms" in svg and "at 650 ms" in svg  # the LLM's time and the first audio
    # the old turn falls back to its durations, and says so
    assert re.findall(r'data-stage="([^"]+)"', _turn_svg(html, 2)) == ["llm_first_token", "turn"]
    assert "placed one after another from their durations" in html


def test_a_live_session_says_so(owner: Tenant, owner_client: Client) -> None:
    session = record(owner, live=True)
    html = owner_client.get(page(owner, "session", session.public_id)).content.decode()
    assert "still live" in html and "No turns were completed" in html


def test_a_member_can_view_sessions(owner: Tenant, member: Tenant, member_client: Client) -> None:
    session = _full_session(owner)
    assert listed(member_client.get(page(owner, "sessions"))) == ids(session)
    detail = member_client.get(page(owner, "session", session.public_id))
    assert detail.status_code == 200 and "track_order" in detail.content.decode()


def test_the_outsider_sees_nothing(
    owner: Tenant, outsider: Tenant, outsider_client: Client
) -> None:
    session = _full_session(owner)
    assert outsider_client.get(page(owner, "sessions")).status_code == 404
    assert outsider_client.get(page(owner, "session", session.public_id)).status_code == 404
    # this workspace's session id under the outsider's own workspace
    assert outsider_client.get(page(outsider, "session", session.public_id)).status_code == 404
    own_list = outsider_client.get(page(outsider, "sessions"))
    assert own_list.status_code == 200 and listed(own_list) == set()


def test_an_unknown_session_is_404(owner: Tenant, owner_client: Client) -> None:
    assert owner_client.get(page(owner, "session", uuid.uuid4())).status_code == 404


def test_logged_out_visitors_are_sent_to_log_in(owner: Tenant) -> None:
    response = Client().get(page(owner, "sessions"))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_the_wire_spelling_of_a_session_id_opens_it_too(owner, owner_client) -> None:
    from sessions_app.models import Session

    session = Session.objects.create(workspace=owner.workspace, origin="https://shop.example")
    hex_url = page(owner, "session", session.public_id.hex)
    assert owner_client.get(hex_url).status_code == 200
    not_an_id = hex_url.replace(session.public_id.hex, "0" * 31 + "-")
    assert owner_client.get(not_an_id).status_code == 404


def test_a_live_record_no_process_holds_is_closed_as_ended_by_a_restart(
    owner: Tenant, owner_client: Client
) -> None:
    orphan = record(owner, live=True)
    hold(owner, orphan, held=False)  # the platform restarted: no process holds it
    html = owner_client.get(page(owner, "sessions")).content.decode()
    orphan.refresh_from_db()
    assert orphan.ended_at is not None and orphan.close_code == 1012
    assert "Ended by a platform restart" in html


def test_the_usage_says_microphone_audio_sent_not_speech_recognised(
    owner: Tenant, owner_client: Client
) -> None:
    """13 s of open microphone for a 3.7 s question: the figure is audio sent, not speech."""
    session = record(owner)
    usage_services.usage_record(session=session, usage={"stt_audio_ms": 13_000})
    html = owner_client.get(page(owner, "session", session.public_id)).content.decode()
    assert "<dt>Microphone audio sent</dt><dd>13 s" in html
    assert "Speech recognised" not in html


def test_a_tool_result_nested_past_the_parser_shows_as_text(
    owner: Tenant, owner_client: Client
) -> None:
    """A handler or an MCP server may answer JSON nested thousands deep: the session's page
    shows it as the text it is (it was a 500: RecursionError is no ValueError)."""
    session = record(owner)
    deep = "[" * 5000 + "]" * 5000
    services.session_record_tool_call(
        session=session, call_id="call_1", name="track_order", arguments={},
        status="completed", result=deep, error=None, duration_ms=5.0,
    )  # fmt: skip
    response = owner_client.get(page(owner, "session", session.public_id))
    assert response.status_code == 200
    assert deep[:4000] in response.content.decode()
