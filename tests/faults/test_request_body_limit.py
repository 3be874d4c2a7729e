"""Oversized request bodies against a real daphne: refused with 413 while they arrive, and
the web process does not grow by their size (it grew by ten times a 100 MB body before,
whether or not the request carried any credentials)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.faults.processes import Daphne, Platform, prepare_platform

pytestmark = pytest.mark.slow

BODY_MB = 100
MAX_GROWTH_MB = 30


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daphne, Platform]]:
    var = tmp_path_factory.mktemp("body") / "var"
    var.mkdir()
    platform = prepare_platform(var, redis_url="", llm_base_url="http://127.0.0.1:9/v1")
    daphne = Daphne(platform)
    yield daphne, platform
    daphne.stop()


def _resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _megabytes(count: int) -> Iterator[bytes]:
    chunk = b"a" * (1024 * 1024)
    for _ in range(count):
        yield chunk


def _post(url: str, *, declared: bool, headers: dict[str, str] | None = None) -> httpx.Response:
    sent = {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})}
    if declared:
        sent["Content-Length"] = str(BODY_MB * 1024 * 1024)  # else: sent chunked
    return httpx.post(url, content=_megabytes(BODY_MB), headers=sent, timeout=120)


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_an_unauthenticated_large_body_is_refused_without_growing_daphne(
    web: tuple[Daphne, Platform], declared: bool
) -> None:
    daphne, _ = web
    before = _resident_mb(daphne.pid)
    answer = _post(f"{daphne.url}/phone/twilio/unknown/voice", declared=declared)
    grown = _resident_mb(daphne.pid) - before
    assert answer.status_code == 413
    assert "larger than 1 MB" in answer.json()["detail"]
    assert grown < MAX_GROWTH_MB, f"daphne grew {grown:.0f} MB for a {BODY_MB} MB body"
    assert daphne.healthz() == 200


def test_an_upload_past_the_document_limit_is_refused_before_it_is_held(
    web: tuple[Daphne, Platform],
) -> None:
    daphne, platform = web
    before = _resident_mb(daphne.pid)
    answer = _post(
        f"{daphne.url}/api/v1/knowledge-bases/any/documents",
        declared=True,
        headers={"Authorization": f"Bearer {platform.secret_key}"},
    )
    grown = _resident_mb(daphne.pid) - before
    assert answer.status_code == 413
    assert "larger than 11 MB" in answer.json()["detail"]  # a 10 MB document and its wrapping
    assert grown < MAX_GROWTH_MB, f"daphne grew {grown:.0f} MB for a {BODY_MB} MB upload"


def test_bodies_within_the_limit_are_served_as_before(web: tuple[Daphne, Platform]) -> None:
    daphne, platform = web
    made = httpx.post(
        f"{daphne.url}/api/v1/knowledge-bases",
        json={"name": "Manuals", "description": "d" * 400},
        headers={"Authorization": f"Bearer {platform.secret_key}"},
        timeout=30,
    )
    assert made.status_code == 201, made.text
    base = made.json()["id"]
    document = b"Returns are accepted within thirty days. " * 50_000  # 2 MB: an upload route
    uploaded = httpx.post(
        f"{daphne.url}/api/v1/knowledge-bases/{base}/documents",
        files={"file": ("returns.txt", document, "text/plain")},
        headers={"Authorization": f"Bearer {platform.secret_key}"},
        timeout=60,
    )
    assert uploaded.status_code == 201, uploaded.text
