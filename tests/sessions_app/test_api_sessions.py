"""Session records through the REST API."""

from __future__ import annotations

import uuid

from secrets_app.models import ApiKey
from sessions_app import services


def _record(tenant) -> str:
    key = ApiKey.objects.get(workspace=tenant.workspace, kind="publishable")
    session_id = uuid.uuid4().hex
    session = services.session_record_start(
        session_id=session_id, workspace=tenant.workspace, api_key=key,
        origin="http://localhost:3000", mode="text", agent=None,
    )  # fmt: skip
    services.session_record_append(
        session=session, entries=[("user", "hi"), ("assistant", "hello")]
    )
    services.session_record_count(session=session, turns=1, tool_calls=2)
    services.session_record_turn(
        session=session,
        metrics={"turnId": 1, "source": "speech", "firstAudioMs": 812.5, "ttsFirstByteMs": None},
    )
    services.session_record_end(session=session, close_code=1000)
    return str(uuid.UUID(hex=session_id))


def test_list_and_detail(owner, owner_api):
    session_id = _record(owner)
    listing = owner_api.get("/api/v1/sessions").json()
    assert [s["id"] for s in listing["results"]] == [session_id]
    assert listing["results"][0]["turn_count"] == 1
    detail = owner_api.get(f"/api/v1/sessions/{session_id}").json()
    assert [(t["role"], t["text"]) for t in detail["transcript"]] == [
        ("user", "hi"),
        ("assistant", "hello"),
    ]
    assert (detail["tool_call_count"], detail["close_code"]) == (2, 1000)
    assert detail["turns"] == [
        {"turn_id": 1, "source": "speech", "first_audio_ms": 812.5, "tts_first_byte_ms": None}
    ]


def test_outsider_sees_no_session(owner, outsider_api):
    session_id = _record(owner)
    assert outsider_api.get(f"/api/v1/sessions/{session_id}").status_code == 404
    assert outsider_api.get("/api/v1/sessions").json()["results"] == []


def test_unknown_session_is_404(owner_api):
    assert owner_api.get(f"/api/v1/sessions/{uuid.uuid4()}").status_code == 404
    assert owner_api.get("/api/v1/sessions/not-a-uuid").status_code == 404
