"""A long recording played through its signed URL from a real daphne, on the filesystem and
from a real S3-compatible server (moto's, on loopback): the web process does not grow by
the recording's size, whether the players ask for all of it or seek, and read on or pause
(it grew by the whole decrypted WAV for every request before, on S3 by the whole object
too, and by whatever a paused player had not taken yet)."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import httpx
import pytest
from moto.server import ThreadedMotoServer

from tests.faults.processes import Daphne, Platform, _manage, prepare_platform

pytestmark = pytest.mark.slow

RECORDED_S = 900  # 15 minutes: a 58 MB WAV
MAX_GROWTH_MB = 30
PLAYERS = 3

_MAKE_RECORDING = f"""
import json, os
from django.utils import timezone
from secrets_app.models import Workspace
from sessions_app import recordings
from sessions_app.models import Session
workspace = Workspace.objects.order_by("pk").first()
session = Session.objects.create(workspace=workspace, ended_at=timezone.now())
capture = recordings.capture_new()
second = os.urandom(32_000)
for _ in range({RECORDED_S}):
    capture.caller(second)
recording = recordings.recording_store(session=session, capture=capture)
path, _ = recordings.recording_url(recording=recording)
print(json.dumps({{"path": path, "size": recording.size_bytes}}))
"""


def _resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module", params=["filesystem", "s3"])
def web(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Daphne, dict[str, int | str]]]:
    var = tmp_path_factory.mktemp("recording-streams") / "var"
    var.mkdir()
    platform: Platform = prepare_platform(var, redis_url="", llm_base_url="http://127.0.0.1:9/v1")
    server = None
    if request.param == "s3":
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        endpoint, bucket = f"http://{host}:{port}", f"streams-{uuid.uuid4().hex[:12]}"
        boto3.client(
            "s3", endpoint_url=endpoint, region_name="us-east-1",
            aws_access_key_id="test-key", aws_secret_access_key="test-secret",
        ).create_bucket(Bucket=bucket)  # fmt: skip
        platform.env.update(
            RECORDINGS_S3_BUCKET=bucket, RECORDINGS_S3_ENDPOINT_URL=endpoint,
            RECORDINGS_S3_REGION="us-east-1", RECORDINGS_S3_ACCESS_KEY_ID="test-key",
            RECORDINGS_S3_SECRET_ACCESS_KEY="test-secret",
        )  # fmt: skip
    made = json.loads(_manage(platform.env, "shell", "-v", "0", "-c", _MAKE_RECORDING))
    daphne = Daphne(platform)
    yield daphne, made
    daphne.stop()
    if server is not None:
        server.stop()


def _growth_while_players_stall(
    daphne: Daphne, url: str, headers: dict[str, str]
) -> tuple[float, list[int]]:
    """How much daphne grew while ``PLAYERS`` players each read the first bytes and then
    nothing more (paused, as a tab in the background); their statuses."""
    before = peak = _resident_mb(daphne.pid)
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(httpx.Client(timeout=60))
        players = [
            stack.enter_context(client.stream("GET", url, headers=headers)) for _ in range(PLAYERS)
        ]
        for player in players:
            next(player.iter_raw(64 * 1024))
        deadline = time.monotonic() + 4  # time enough to have sent all of it
        while time.monotonic() < deadline:
            peak = max(peak, _resident_mb(daphne.pid))
            time.sleep(0.1)
        statuses = [player.status_code for player in players]
    return peak - before, statuses


@pytest.mark.parametrize(
    "headers", [{}, {"Range": "bytes=0-"}, {"Range": "bytes=30000000-30000999"}],
    ids=["whole", "open-range", "seek"],
)  # fmt: skip
def test_playing_a_long_recording_does_not_hold_it_in_the_web_process(
    web: tuple[Daphne, dict[str, int | str]], headers: dict[str, str]
) -> None:
    daphne, made = web
    size_mb = int(made["size"]) / 1024 / 1024
    assert size_mb > 50
    url = f"{daphne.url}{made['path']}"
    httpx.get(url, headers={"Range": "bytes=0-9"}, timeout=30)  # what any request imports
    grown, statuses = _growth_while_players_stall(daphne, url, headers)
    assert set(statuses) <= {200, 206}
    assert grown < MAX_GROWTH_MB, (
        f"daphne grew {grown:.0f} MB for {PLAYERS} paused players of a {size_mb:.0f} MB WAV"
    )
    assert daphne.healthz() == 200
    whole = httpx.get(url, headers=headers, timeout=60)  # a player that reads goes on
    assert len(whole.content) == int(whole.headers["Content-Length"])


def test_daphnes_access_log_names_no_recording_url(
    web: tuple[Daphne, dict[str, int | str]],
) -> None:
    """The URL is a bearer link for a few minutes: the log says a recording was played."""
    daphne, made = web
    path = str(made["path"])
    assert httpx.get(f"{daphne.url}{path}?download=1", headers={"Range": "bytes=0-9"}).is_success
    assert httpx.get(f"{daphne.url}{path}x").status_code == 404
    token = path.rsplit("/", 1)[1]
    deadline = time.monotonic() + 5
    while '"GET /recordings/…" 404' not in daphne.log_text():  # written after the 206
        assert time.monotonic() < deadline, daphne.log_text()[-2000:]
        time.sleep(0.1)
    assert token[:16] not in daphne.log_text() and token[-16:] not in daphne.log_text()
