"""Attacks on recordings (docs/privacy.md, "Recordings"): the unauthenticated signed URL
(forged, replayed after a deletion or a purge, signed for another purpose, another
workspace's; path tricks; Range headers a player would never send), what it answers with
(caching, sniffing), where a URL could leak (webhooks, audit, logs, the session page), and
the capture behind it (long pauses, floods, a full disk, a session deleted while its
recording is stored)."""

from __future__ import annotations

import json
import logging
import os
import re
import tracemalloc
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest
from django.core import signing
from django.core.exceptions import ValidationError
from django.db import IntegrityError
from django.test import Client as HttpClient
from django.utils import timezone

from engine.doors.capture import RATE, AudioCapture
from postcall_app import retention
from secrets_app import accounts
from secrets_app import services as secret_services
from secrets_app.models import ApiKey, AuditEvent
from sessions_app import recordings
from sessions_app.models import Recording, Session
from tests.conftest import api_client
from tests.factories import Tenant
from tests.frontend.dashboard.conftest import logged_in, page
from tests.sessions_app.recording import recordings_on_disk
from webhooks_app import payloads

SECONDS = 3  # three sealed chunks of WAV: ranges cross chunk boundaries


@pytest.fixture
def on_disk(settings: Any, tmp_path: Path) -> Path:
    settings.RECORDING_SPOOL_DIR = str(tmp_path / "spool")
    return Path(recordings_on_disk(settings, tmp_path / "recordings"))


def _stored(on_disk: Path) -> list[Path]:
    return [path for path in on_disk.rglob("*") if path.is_file()] if on_disk.exists() else []


def _recorded(tenant: Tenant, text: str = "Hello.") -> tuple[Recording, str]:
    session = Session.objects.create(workspace=tenant.workspace, ended_at=timezone.now())
    capture = recordings.capture_new()
    capture.caller(np.arange(RATE * SECONDS, dtype="<i2").tobytes())
    capture.started_at = (timezone.now() - timedelta(seconds=5)).timestamp()
    session.transcript.create(role="user", text=text, created_at=timezone.now())
    recording = recordings.recording_store(session=session, capture=capture)
    assert recording is not None
    path, _ = recordings.recording_url(recording=recording)
    return recording, path


def _get(path: str, **headers: str) -> Any:
    return HttpClient(raise_request_exception=False).get(path, headers=headers)


def _body(response: Any) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


# ---------------------------------------------------------------- the signed URL


def test_range_headers_a_player_never_sends_get_a_range_the_whole_or_416_never_an_error(
    owner: Tenant, on_disk: Path
) -> None:
    recording, path = _recorded(owner)
    whole = _body(_get(path))
    size = len(whole)
    assert size == recording.size_bytes
    many = ",".join(f"{n}-{n}" for n in range(2000))
    for header in (
        "bytes=0-" + "9" * 5000, "bytes=" + "9" * 5000 + "-", "bytes=-" + "9" * 5000,
        "bytes=" + "0" * 4000 + "1-2", f"bytes={many}", "bytes=0-0,0-0,0-0", "bytes=5-3",
        "bytes=-0", "bytes=--1", "bytes=0--1", "bytes=-1-2", "bytes=\u0661-\u0662", "items=0-1",
        "bytes=99999999999999999-", "bytes=0-99999999999999999", f"bytes={size}-{size}",
        "bytes= 1-2", "bytes=1 -2", "bytes=\t0-1", "",
    ):  # fmt: skip
        response = _get(path, Range=header)
        body = _body(response)
        assert response.status_code in (200, 206, 416), (header[:40], response.status_code)
        if response.status_code == 200:
            assert body == whole
        elif response.status_code == 206:
            first, last = map(int, re.findall(r"bytes (\d+)-(\d+)/", response["Content-Range"])[0])
            assert 0 <= first <= last < size and body == whole[first : last + 1], header[:40]
        else:
            assert response["Content-Range"] == f"bytes */{size}" and body == b""


def test_the_answer_is_never_cached_sniffed_or_named_by_the_caller(
    owner: Tenant, on_disk: Path
) -> None:
    _, path = _recorded(owner)
    for response in (
        _get(path), _get(path, Range="bytes=0-99"), _get(f"{path}?download=%22%3Cx%3E%0d%0aX: y"),
    ):  # fmt: skip
        assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"]
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Content-Type"] == "audio/wav"
        assert response["Referrer-Policy"] == "no-referrer"
        assert re.fullmatch(
            r'(inline|attachment); filename="session-[0-9a-f-]{36}\.wav"',
            response["Content-Disposition"],
        )


def test_path_tricks_and_other_methods_reach_nothing(owner: Tenant, on_disk: Path) -> None:
    _, path = _recorded(owner)
    token = path.rsplit("/", 1)[1]
    assert _get(f"/recordings/{quote(token, safe='')}").status_code == 200  # the same token
    for tricked in (
        f"{path}/", f"{path}%00", f"{path}%2F..", f"/recordings/..%2F{token}",
        f"/recordings/%2e%2e/{token}", f"/recordings/{token[:-1]}", f"/recordings/{token}x",
        f"/recordings/{token.upper()}", f"/recordings/{token}:{token}", "/recordings/",
        "/recordings/" + "A" * 20_000, "/recordings/%ff%fe", f"/recordings/.{token}",
    ):  # fmt: skip
        response = _get(tricked)
        assert response.status_code in (400, 404), (tricked[:60], response.status_code)
        assert b"RIFF" not in _body(response)
    client = HttpClient(raise_request_exception=False)
    for method in (client.post, client.put, client.delete, client.options):
        assert method(path).status_code == 405


def test_no_other_signed_value_of_the_platform_opens_a_recording_nor_the_reverse(
    owner: Tenant, on_disk: Path
) -> None:
    recording, path = _recorded(owner)
    token = path.rsplit("/", 1)[1]
    claim = {"r": recording.uid.hex, "w": recording.workspace_id}
    others = [
        accounts.email_verification_token(user=owner.user),  # the e-mail link
        signing.dumps(claim),  # the same claim, Django's default salt
        signing.TimestampSigner().sign_object(claim),  # no salt
        signing.TimestampSigner(salt="django.contrib.messages").sign_object(claim),
        signing.Signer(salt=recordings._URL_SALT).sign_object(claim),  # no timestamp
    ]
    for other in others:
        assert _get(f"/recordings/{other}").status_code == 404
        assert recordings.recording_from_url(other) is None
    with pytest.raises(ValidationError):
        accounts.email_verify(token=token)


@pytest.mark.django_db(transaction=True)  # the objects go once the deletion commits
@pytest.mark.parametrize("gone", ["session", "workspace", "purge"])
def test_a_url_handed_out_plays_nothing_once_its_recording_is_gone(
    owner: Tenant, on_disk: Path, gone: str
) -> None:
    recording, path = _recorded(owner)
    assert _get(path).status_code == 200
    if gone == "session":
        Session.objects.filter(pk=recording.session_id).delete()
    elif gone == "workspace":  # as the admin deletes it
        owner.workspace.delete()
    else:
        retention.retention_policy_update(workspace=owner.workspace, recordings_days=1)
        retention.retention_purge(now=timezone.now() + timedelta(days=2))
    response = _get(path)
    assert response.status_code == 404 and b"RIFF" not in _body(response)
    assert _stored(on_disk) == []  # the object went with its row


def test_another_workspaces_recording_is_out_of_reach_of_its_keys_and_pages(
    owner: Tenant, outsider: Tenant, on_disk: Path
) -> None:
    recording, _ = _recorded(owner)
    session_id = recording.session.public_id
    for key in (outsider.secret_key, outsider.publishable_key, owner.publishable_key):
        response = api_client(key).get(f"/api/v1/sessions/{session_id}")
        assert response.status_code in (401, 403, 404) and b"recordings/" not in response.content
    _, unscoped = secret_services.api_key_create(
        workspace=owner.workspace, kind=ApiKey.Kind.SECRET, label="agents only",
        scopes=["usage:read"],
    )  # fmt: skip
    response = api_client(unscoped).get(f"/api/v1/sessions/{session_id}")
    assert response.status_code == 403 and b"recordings/" not in response.content
    url = page(owner, "session", session_id)
    assert logged_in(outsider).get(url).status_code == 404


def test_no_url_reaches_a_webhook_the_audit_or_the_log(
    owner: Tenant, on_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    recording, path = _recorded(owner)
    token = path.rsplit("/", 1)[1]
    assert "/recordings/" not in json.dumps(payloads.session_ended(recording.session), default=str)
    api_client(owner.secret_key).get(f"/api/v1/sessions/{recording.session.public_id}")
    _get(path, Range=f"bytes={recording.size_bytes + 10}-")  # a 416: logged as a warning
    _get(path + "x")  # a 404
    for event in AuditEvent.objects.all():
        assert "/recordings/" not in json.dumps(event.details, default=str)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert token[:20] not in logged and token[-20:] not in logged


def test_transcript_text_on_the_player_page_is_text(owner: Tenant, on_disk: Path) -> None:
    attack = '"><img src=x onerror=alert(1)> </li><script>alert(2)</script> data-at="9"'
    recording, _ = _recorded(owner, text=attack)
    html = logged_in(owner).get(page(owner, "session", recording.session.public_id))
    content = html.content.decode()
    assert "<script>alert(2)" not in content and "<img src=x" not in content
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in content
    assert re.findall(r'data-at="([^"]*)"', content) == ["5.00"] or all(
        re.fullmatch(r"\d+\.\d\d", at) for at in re.findall(r'data-at="([^"]*)"', content)
    )
    assert "no-store" in html["Cache-Control"] or "private" in html["Cache-Control"]


# ---------------------------------------------------------------- the capture


def test_an_hour_of_silence_costs_no_memory_and_no_disk(tmp_path: Path) -> None:
    now = [0.0]
    capture = AudioCapture(spool_dir=str(tmp_path), max_seconds=3600, clock=lambda: now[0])
    capture.caller(b"\x01\x00" * 320)
    capture.agent(b"\x01\x00" * 320, rate=RATE)
    now[0] = 3000.0  # a muted microphone, an agent waiting for a tool
    tracemalloc.start()
    capture.caller(b"\x01\x00" * 320)
    capture.agent(b"\x01\x00" * 320, rate=RATE)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 2 * 1024 * 1024, f"{peak / 1e6:.0f} MB to pad a pause"
    for spool in capture._spools:
        spool.flush()
        stat = os.fstat(spool.fileno())
        assert stat.st_size >= 3000 * RATE * 2
        assert stat.st_blocks * 512 < 4 * 1024 * 1024  # a hole, not 96 MB of zeros
    caller, agent = (np.frombuffer(s, dtype="<i2") for s in _first_and_last(capture))
    assert caller[0] == 1 and agent[0] == 1
    capture.close()


def _first_and_last(capture: AudioCapture) -> list[bytes]:
    chunks = list(capture.wav_chunks())
    block = np.frombuffer(b"".join(chunks[1:]), dtype="<i2").reshape(-1, 2)
    assert int(np.count_nonzero(block)) == 4 * 320  # both frames, both ends, nothing else
    return [block[:, 0].tobytes(), block[:, 1].tobytes()]


def test_a_flood_of_audio_stops_at_the_cap(tmp_path: Path) -> None:
    capture = AudioCapture(spool_dir=str(tmp_path), max_seconds=10, clock=lambda: 0.0)
    frame = b"\x05\x00" * 320
    for _ in range(5_000):  # 100 s sent at once
        capture.caller(frame)
        capture.agent(frame, rate=RATE)
    capture.cut()
    assert capture.truncated and capture.frames == 10 * RATE
    for spool in capture._spools:
        spool.flush()
        assert os.fstat(spool.fileno()).st_size <= 10 * RATE * 2
    capture.close()


def test_a_full_disk_ends_the_recording_not_the_caller(on_disk: Path, owner: Tenant) -> None:
    capture = recordings.capture_new()
    for spool in capture._spools:
        spool.close()
    capture._spools = (open("/dev/full", "w+b"), open("/dev/full", "w+b"))  # writes: ENOSPC
    now = [0.0]
    capture._clock, capture._started = (lambda: now[0]), 0.0
    for step in range(200):  # four seconds of both sides, a pause, a barge-in
        now[0] = step * 0.02 + (10 if step > 100 else 0)
        capture.caller(b"\x07\x00" * 320)
        capture.agent(b"\x07\x00" * 480, rate=24_000)
        if step == 150:
            capture.cut()
    assert capture.failed
    session = Session.objects.create(workspace=owner.workspace, ended_at=timezone.now())
    assert recordings.recording_store(session=session, capture=capture) is None
    assert _stored(on_disk) == [] and not Recording.objects.exists()


@pytest.mark.django_db(transaction=True)  # the foreign key is checked at the commit
def test_a_session_deleted_while_its_recording_is_stored_leaves_no_object(
    owner: Tenant, on_disk: Path
) -> None:
    session = Session.objects.create(workspace=owner.workspace, ended_at=timezone.now())
    capture = recordings.capture_new()
    capture.caller(b"\x09\x00" * RATE)
    Session.objects.filter(pk=session.pk).delete()  # meanwhile, on another thread
    with pytest.raises(IntegrityError):
        recordings.recording_store(session=session, capture=capture)
    assert _stored(on_disk) == []
    assert list(Path(recordings.settings.RECORDING_SPOOL_DIR).iterdir()) == []
