"""Recordings end to end: a browser session of an agent that records, stored sealed in a real
S3-compatible server (moto's, on loopback), played through its signed URL as two channels,
refused when the URL is forged, expired or another workspace's, deleted by retention and
with its session, and never made under zero retention."""

from __future__ import annotations

import asyncio
import io
import re
import time
import uuid
import wave
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest
from asgiref.sync import sync_to_async
from django.core import signing
from django.test import Client as HttpClient
from django.utils import timezone
from moto.server import ThreadedMotoServer

from engine.doors.capture import AudioCapture
from platform_site import settings as platform_settings
from postcall_app import retention
from realtime import records
from secrets_app.models import AuditEvent
from sessions_app import recordings, services
from sessions_app.models import Recording, Session
from tests.conftest import api_client
from tests.engine.providers.llm.openai import fake_server as fake_openai
from tests.factories import Tenant, make_tenant
from tests.frontend.dashboard.conftest import logged_in, page
from tests.sessions_app.recording import eventually, recordings_on_disk
from tests.sessions_app.wsclient import Client

pytestmark = pytest.mark.django_db(transaction=True)

FRAME_MS = 20
LOUD = b"\xff\x7f\x01\x80" * (16 * FRAME_MS // 2)  # 20 ms at 16 kHz: +32767, -32767, …
QUIET = b"\x00\x00" * (16 * FRAME_MS)
SPOKEN_FRAMES = 15
GREETING = "Hello, this is the order desk."
REPLY = "Your order has shipped."
TTS_MS_PER_CHAR = 10  # the fake voice: a 220 Hz tone of amplitude 2000


@dataclass
class Bucket:
    client: Any
    name: str

    def objects(self) -> list[bytes]:
        listed = self.client.list_objects_v2(Bucket=self.name).get("Contents", [])
        return [
            self.client.get_object(Bucket=self.name, Key=item["Key"])["Body"].read()
            for item in listed
        ]


@pytest.fixture
def bucket(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bucket]:
    """A real S3-compatible server on loopback, and the recordings storage pointed at it
    through the documented environment variables."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    credentials = {"aws_access_key_id": "test-key", "aws_secret_access_key": "test-secret"}
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **credentials)
    name = f"recordings-{uuid.uuid4().hex[:12]}"  # the server's state outlives a test
    client.create_bucket(Bucket=name)
    for variable, value in {
        "RECORDINGS_S3_BUCKET": name,
        "RECORDINGS_S3_ENDPOINT_URL": endpoint,
        "RECORDINGS_S3_REGION": "us-east-1",
        "RECORDINGS_S3_ACCESS_KEY_ID": "test-key",
        "RECORDINGS_S3_SECRET_ACCESS_KEY": "test-secret",
    }.items():
        monkeypatch.setenv(variable, value)
    settings.STORAGES = {**settings.STORAGES, "recordings": platform_settings._recordings_storage()}
    yield Bucket(client, name)
    server.stop()


@pytest.fixture
def tenant(transactional_db: None) -> Tenant:
    return make_tenant("recorded@example.com")


def _agent(tenant: Tenant, **fields: Any) -> None:
    services.agent_create(
        workspace=tenant.workspace, name="Orders", slug="orders", greeting=GREETING,
        record_audio=True, **fields,
    )  # fmt: skip


async def _call(tenant: Tenant, llm: fake_openai.FakeOpenAIServer, *, stored: bool = True) -> str:
    """A voice session of the agent: the greeting, a spoken turn, the reply; a clean close
    (``stored``: and its recording stored)."""
    llm.script(fake_openai.text_reply(REPLY))
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "agent": "orders", "mode": "voice"})
        ready = await client.until("ready")
        await client.until("tts_done")  # the greeting, sent
        await asyncio.sleep(len(GREETING) * TTS_MS_PER_CHAR / 1000 + 0.1)  # and played
        for frame in [LOUD] * SPOKEN_FRAMES + [QUIET] * 40:  # as a microphone sends
            await client.send_raw(data=frame)
            await asyncio.sleep(FRAME_MS / 1000)
        await client.until("metrics")  # after the reply's tts_done
    if stored:
        await records.recordings_stored()
    return str(uuid.UUID(ready["sessionId"]))  # as the REST API spells it


async def _recorded(session_id: str) -> Recording:
    return await eventually(
        lambda: (
            Recording.objects.filter(session__public_id=session_id)
            .select_related("session")
            .first()
        )
    )


def _channels(wav_bytes: bytes) -> tuple[np.ndarray, np.ndarray]:
    with wave.open(io.BytesIO(wav_bytes)) as wav:
        assert (wav.getnchannels(), wav.getframerate(), wav.getsampwidth()) == (2, 16_000, 2)
        frames = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").reshape(-1, 2)
    return frames[:, 0], frames[:, 1]


def _played(url: str) -> tuple[int, bytes]:
    response = HttpClient().get(url)
    body = b"".join(response.streaming_content) if response.status_code == 200 else b""
    return response.status_code, body


async def test_a_recorded_session_is_sealed_in_s3_and_plays_as_two_channels(
    tenant: Tenant, bucket: Bucket, llm: fake_openai.FakeOpenAIServer
) -> None:
    await sync_to_async(_agent)(tenant)
    session_id = await _call(tenant, llm)
    recording = await _recorded(session_id)

    # In the bucket: one object, ciphertext only (no WAV header, none of the caller's audio).
    (stored,) = await sync_to_async(bucket.objects)()
    assert stored.startswith(b"VPSTREAM")
    assert b"RIFF" not in stored and b"WAVE" not in stored and LOUD[:64] not in stored

    # A secret key reading sessions gets a signed URL; it streams the decrypted WAV.
    detail = await sync_to_async(api_client(tenant.secret_key).get)(
        f"/api/v1/sessions/{session_id}"
    )
    assert detail.status_code == 200, detail.content
    shown = detail.json()["recording"]
    assert shown["duration_ms"] == recording.duration_ms and not shown["truncated"]
    status, body = await sync_to_async(_played)(shown["url"])
    assert status == 200 and len(body) == recording.size_bytes
    seek = {"Range": "bytes=70000-70999"}  # in the second sealed chunk, read from the bucket
    part = await sync_to_async(HttpClient().get)(shown["url"], headers=seek)
    assert b"".join(part.streaming_content) == body[70_000:71_000]
    caller, agent = _channels(body)

    # Left: exactly what the caller sent (the loud frames, silence around them).
    assert int(np.count_nonzero(np.abs(caller) == 32767)) == SPOKEN_FRAMES * 16 * FRAME_MS
    assert set(np.unique(caller).tolist()) <= {0, 32767, -32767}
    # Right: the agent's voice (the greeting and the reply), resampled from 24 kHz.
    assert 1800 < int(np.abs(agent).max()) < 2300
    # One timeline: the greeting, then the caller, then the reply, each as long as it was.
    spoken = np.flatnonzero(np.abs(caller) == 32767)
    voiced = np.flatnonzero(np.abs(agent) > 50)
    greeting, reply = voiced[voiced < spoken[0]], voiced[voiced > spoken[-1]]
    assert len(greeting) + len(reply) == len(voiced)
    for said, text in ((greeting, GREETING), (reply, REPLY)):
        expected = len(text) * TTS_MS_PER_CHAR * 16  # samples at 16 kHz
        assert abs(len(said) - expected) < expected * 0.1
    assert len(caller) * 1000 // 16_000 == recording.duration_ms


async def test_forged_expired_or_another_workspaces_urls_are_refused_and_pk_keys_get_none(
    tenant: Tenant,
    bucket: Bucket,
    llm: fake_openai.FakeOpenAIServer,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await sync_to_async(_agent)(tenant)
    session_id = await _call(tenant, llm)
    recording = await _recorded(session_id)
    path, _ = await sync_to_async(recordings.recording_url)(recording=recording)
    assert (await sync_to_async(_played)(path))[0] == 200

    forged = path[:-3] + ("AAA" if not path.endswith("AAA") else "BBB")
    other = await sync_to_async(make_tenant)("other@example.com")
    claim = {"r": recording.uid.hex, "w": other.workspace.pk}  # signed, but not this workspace's
    elsewhere = "/recordings/" + signing.TimestampSigner(salt=recordings._URL_SALT).sign_object(
        claim
    )
    for refused in (forged, elsewhere, "/recordings/not-a-token"):
        status, body = await sync_to_async(_played)(refused)
        assert status == 404 and b"RIFF" not in body

    later = signing.time.time() + settings.RECORDING_URL_TTL_S + 1
    monkeypatch.setattr(signing.time, "time", lambda: later)
    status, _ = await sync_to_async(_played)(path)
    assert status == 404

    # A publishable key reads no session, so it never sees a URL; the outsider neither.
    for key in (tenant.publishable_key, other.secret_key):
        response = await sync_to_async(api_client(key).get)(f"/api/v1/sessions/{session_id}")
        assert response.status_code in (401, 403, 404) and b"recordings/" not in response.content


async def test_retention_deletes_recordings_from_the_bucket_and_audits_it(
    tenant: Tenant, bucket: Bucket, llm: fake_openai.FakeOpenAIServer
) -> None:
    await sync_to_async(_agent)(tenant)
    await _recorded(await _call(tenant, llm))
    await sync_to_async(retention.retention_policy_update)(
        workspace=tenant.workspace, recordings_days=1
    )
    kept = await sync_to_async(retention.retention_purge)()
    assert kept == {} and len(await sync_to_async(bucket.objects)()) == 1  # not old yet

    purged = await sync_to_async(retention.retention_purge)(now=timezone.now() + timedelta(days=2))
    assert purged == {tenant.workspace.pk: {"recordings": 1}}
    assert await sync_to_async(bucket.objects)() == []
    assert not await sync_to_async(Recording.objects.exists)()
    audit = await sync_to_async(AuditEvent.objects.get)(action="retention.purged")
    assert audit.details == {"recordings": 1}


async def test_deleting_a_session_deletes_its_recording(
    tenant: Tenant, bucket: Bucket, llm: fake_openai.FakeOpenAIServer
) -> None:
    await sync_to_async(_agent)(tenant)
    session_id = await _call(tenant, llm)
    await _recorded(session_id)
    await sync_to_async(Session.objects.filter(public_id=session_id).delete)()
    assert await sync_to_async(bucket.objects)() == []


@pytest.mark.parametrize("where", ["agent", "workspace"])
async def test_zero_retention_never_records_whatever_the_agent_says(
    tenant: Tenant, bucket: Bucket, llm: fake_openai.FakeOpenAIServer, settings: Any, where: str
) -> None:
    if where == "agent":
        await sync_to_async(_agent)(tenant, zero_retention=True)
    else:
        await sync_to_async(_agent)(tenant)
        await sync_to_async(retention.retention_policy_update)(
            workspace=tenant.workspace, zero_retention=True
        )
    session_id = await _call(tenant, llm)
    await eventually(
        lambda: Session.objects.filter(public_id=session_id, ended_at__isnull=False).exists()
    )
    assert not await sync_to_async(Recording.objects.exists)()
    assert await sync_to_async(bucket.objects)() == []
    detail = await sync_to_async(api_client(tenant.secret_key).get)(
        f"/api/v1/sessions/{session_id}"
    )
    assert detail.json()["recording"] is None


@pytest.fixture
def on_disk(settings: Any, tmp_path: Any) -> Any:
    """The embedded default: the filesystem (here under the test's own directory)."""
    return recordings_on_disk(settings, tmp_path / "recordings")


async def test_on_the_filesystem_a_recording_is_sealed_too(
    tenant: Tenant, llm: fake_openai.FakeOpenAIServer, on_disk: Any
) -> None:
    await sync_to_async(_agent)(tenant)
    recording = await _recorded(await _call(tenant, llm))
    (stored,) = [path for path in on_disk.rglob("*") if path.is_file()]
    assert b"RIFF" not in stored.read_bytes() and LOUD[:64] not in stored.read_bytes()
    path, _ = await sync_to_async(recordings.recording_url)(recording=recording)
    status, body = await sync_to_async(_played)(path)
    assert status == 200 and body.startswith(b"RIFF") and len(body) == recording.size_bytes


async def test_an_agent_that_does_not_record_leaves_nothing(
    tenant: Tenant, llm: fake_openai.FakeOpenAIServer, on_disk: Any
) -> None:
    """Recording is off unless the agent turns it on."""
    await sync_to_async(services.agent_create)(
        workspace=tenant.workspace, name="Orders", slug="orders", greeting=GREETING
    )
    session_id = await _call(tenant, llm)
    await eventually(
        lambda: Session.objects.filter(public_id=session_id, ended_at__isnull=False).exists()
    )
    assert not await sync_to_async(Recording.objects.exists)()
    assert not on_disk.exists()


class StepClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_members_play_it_on_the_session_page_with_the_transcript_following(
    owner: Tenant, member: Tenant, outsider: Tenant, on_disk: Any, settings: Any
) -> None:
    settings.RECORDING_SPOOL_DIR = str(on_disk.parent / "spool")
    session = Session.objects.create(workspace=owner.workspace, ended_at=timezone.now())
    clock = StepClock()
    capture = recordings.capture_new()
    capture._clock, capture._started = clock, 0.0
    capture.agent(b"\x10\x00" * 16_000, rate=16_000)  # one second of the agent
    clock.now = 2.0
    capture.caller(b"\x20\x00" * 8_000)  # half a second of the caller, at 2 s
    started = timezone.now() - timedelta(seconds=10)
    capture.started_at = started.timestamp()
    for role, text, at in (("assistant", "Hello there.", 0.2), ("user", "Hi.", 2.6)):
        session.transcript.create(role=role, text=text, created_at=started + timedelta(seconds=at))
    recording = recordings.recording_store(session=session, capture=capture)
    assert recording is not None and recording.duration_ms == 2500

    url = page(owner, "session", session.public_id)
    html = logged_in(member).get(url).content.decode()
    (src,) = re.findall(r'<audio[^>]* src="(/recordings/[^"]+)"', html)
    assert f'href="{src}?download=1"' in html
    assert re.findall(r'data-at="([\d.]+)"', html) == ["0.20", "2.60"]
    assert logged_in(outsider).get(url).status_code == 404

    played = HttpClient().get(src)
    assert played["Accept-Ranges"] == "bytes"
    whole = b"".join(played.streaming_content)
    caller, agent = _channels(whole)
    assert len(caller) == 40_000 and (agent[:16_000] == 16).all() and (caller[32_000:] == 32).all()
    # A player seeking asks for ranges (this WAV spans three sealed chunks).
    for asked, first, last in (
        ("bytes=70000-140000", 70_000, 140_000), ("bytes=-100", len(whole) - 100, len(whole) - 1),
        ("bytes=65536-", 65_536, len(whole) - 1), ("bytes=0-0", 0, 0),
    ):  # fmt: skip
        part = HttpClient().get(src, headers={"Range": asked})
        assert (
            part.status_code == 206
            and part["Content-Range"] == f"bytes {first}-{last}/{len(whole)}"
        )
        assert b"".join(part.streaming_content) == whole[first : last + 1]
    beyond = HttpClient().get(src, headers={"Range": f"bytes={len(whole)}-"})
    assert beyond.status_code == 416 and beyond["Content-Range"] == f"bytes */{len(whole)}"
    saved = HttpClient().get(src, {"download": "1"})
    assert saved["Content-Disposition"].startswith("attachment;")


def test_rotating_the_keyring_reseals_the_data_key_and_the_recording_still_plays(
    owner: Tenant, on_disk: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from secrets_app import crypto
    from secrets_app import services as secret_services

    settings.RECORDING_SPOOL_DIR = str(on_disk.parent / "spool")
    first = crypto.parse_keyring(crypto.new_keyring_entry("old"))
    monkeypatch.setattr(crypto, "keyring", lambda: first)
    session = Session.objects.create(workspace=owner.workspace, ended_at=timezone.now())
    capture = recordings.capture_new()
    capture.caller(b"\x20\x00" * 8_000)
    recording = recordings.recording_store(session=session, capture=capture)
    assert recording is not None and recording.key_id == "old"

    second = crypto.Keyring(
        (*first.keys, *crypto.parse_keyring(crypto.new_keyring_entry("new")).keys)
    )
    monkeypatch.setattr(crypto, "keyring", lambda: second)
    report = secret_services.secrets_rotate()
    assert report.rotated == 1 and not report.failed
    recording.refresh_from_db()
    assert recording.key_id == "new"
    only_new = crypto.Keyring(second.keys[1:])
    monkeypatch.setattr(crypto, "keyring", lambda: only_new)  # the old key dropped
    caller, _ = _channels(b"".join(recordings.recording_open(recording=recording)))
    assert (caller == 32).all() and len(caller) == 8_000


async def test_a_full_spool_disk_ends_the_recording_and_the_session_goes_on(
    tenant: Tenant,
    llm: fake_openai.FakeOpenAIServer,
    on_disk: Any,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings.RECORDING_SPOOL_DIR = str(on_disk.parent / "spool")
    made = recordings.capture_new

    def on_a_full_disk() -> AudioCapture:
        capture = made()
        for spool in capture._spools:
            spool.close()
        capture._spools = (open("/dev/full", "w+b"), open("/dev/full", "w+b"))  # ENOSPC
        return capture

    monkeypatch.setattr(recordings, "capture_new", on_a_full_disk)
    await sync_to_async(_agent)(tenant)
    session_id = await _call(tenant, llm)  # the greeting, the caller's turn, the reply
    session = await eventually(
        lambda: Session.objects.filter(public_id=session_id, ended_at__isnull=False).first()
    )
    assert session.close_code == 1000
    assert not await sync_to_async(Recording.objects.exists)()
    assert not on_disk.exists()
    assert "session recording dropped" in caplog.text


def test_on_the_filesystem_folders_and_files_are_the_platforms_alone(
    owner: Tenant, settings: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RECORDINGS_S3_BUCKET", raising=False)
    monkeypatch.setenv("RECORDINGS_DIR", str(tmp_path / "recordings"))
    settings.STORAGES = {**settings.STORAGES, "recordings": platform_settings._recordings_storage()}
    settings.RECORDING_SPOOL_DIR = str(tmp_path / "spool")
    session = Session.objects.create(workspace=owner.workspace, ended_at=timezone.now())
    capture = recordings.capture_new()
    capture.caller(b"\x20\x00" * 8_000)
    assert recordings.recording_store(session=session, capture=capture) is not None
    stored = list((tmp_path / "recordings").rglob("*"))
    assert stored and {path.stat().st_mode & 0o777 for path in stored} <= {0o600, 0o700}
    assert (tmp_path / "spool").stat().st_mode & 0o777 == 0o700


class Blackhole:
    """An S3 endpoint that accepts connections and never answers (a bucket that hangs)."""

    def __init__(self) -> None:
        self.connections: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        async def held(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections.append(writer)

        self.server = await asyncio.start_server(held, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.connections:
            writer.transport.abort()
        await self.server.wait_closed()


async def test_a_hung_bucket_delays_neither_the_sessions_end_nor_the_next_session(
    tenant: Tenant,
    llm: fake_openai.FakeOpenAIServer,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hole = Blackhole()
    endpoint = await hole.start()
    for variable, value in {
        "RECORDINGS_S3_BUCKET": "hung", "RECORDINGS_S3_ENDPOINT_URL": endpoint,
        "RECORDINGS_S3_REGION": "us-east-1", "RECORDINGS_S3_ACCESS_KEY_ID": "test-key",
        "RECORDINGS_S3_SECRET_ACCESS_KEY": "test-secret",
    }.items():  # fmt: skip
        monkeypatch.setenv(variable, value)
    settings.STORAGES = {**settings.STORAGES, "recordings": platform_settings._recordings_storage()}
    await sync_to_async(_agent)(tenant)
    try:
        for _ in range(3):  # more than the threads that store recordings
            session_id = await _call(tenant, llm, stored=False)
            await eventually(  # the record closes while its recording hangs
                lambda sid=session_id: Session.objects.filter(
                    public_id=sid, ended_at__isnull=False
                ).exists(),
                within=5,
            )
        assert records._storing and hole.connections  # the stores are still waiting
    finally:
        await hole.stop()
        await asyncio.wait_for(records.recordings_stored(), 120)
    assert not await sync_to_async(Recording.objects.exists)()


async def test_a_hung_bucket_is_given_up_in_seconds_and_its_spool_removed(
    tenant: Tenant,
    llm: fake_openai.FakeOpenAIServer,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """``RECORDINGS_S3_TIMEOUT_S`` bounds each request (three attempts): the recording is
    lost, said in the log, and nothing of it stays on the disk."""
    hole = Blackhole()
    endpoint = await hole.start()
    for variable, value in {
        "RECORDINGS_S3_BUCKET": "hung", "RECORDINGS_S3_ENDPOINT_URL": endpoint,
        "RECORDINGS_S3_REGION": "us-east-1", "RECORDINGS_S3_ACCESS_KEY_ID": "test-key",
        "RECORDINGS_S3_SECRET_ACCESS_KEY": "test-secret", "RECORDINGS_S3_TIMEOUT_S": "1",
    }.items():  # fmt: skip
        monkeypatch.setenv(variable, value)
    settings.STORAGES = {**settings.STORAGES, "recordings": platform_settings._recordings_storage()}
    settings.RECORDING_SPOOL_DIR = str(tmp_path / "spool")
    await sync_to_async(_agent)(tenant)
    try:
        await _call(tenant, llm, stored=False)
        started = time.monotonic()
        await asyncio.wait_for(records.recordings_stored(), 60)
        assert time.monotonic() - started < 30  # botocore's defaults: minutes
        assert hole.connections  # it was tried
    finally:
        await hole.stop()
    assert not await sync_to_async(Recording.objects.exists)()
    assert not [path for path in (tmp_path / "spool").rglob("*") if path.is_file()]
