"""Attacks on a workspace's own embedding connection (knowledge bases): a narrow API key
moving a saved key to a host of its own, a provider's error that spells the key only once
decoded, a vector of numbers past a float's range, providers of other workspaces that hang
while this one's question waits, and a provider that answers each batch just in time for
longer than a workspace's indexing slot lasts."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django import db
from django.core.exceptions import ValidationError

from knowledge_app import search, services
from knowledge_app.models import KnowledgeBase
from secrets_app import provider_credentials
from secrets_app import services as secret_services
from secrets_app.models import ApiKey, ProviderCredential
from tests.conftest import api_client
from tests.engine.providers.llm.openai import fake_server as fake_openai
from tests.factories import Tenant, make_tenant
from tests.fakes.openai_embeddings import FakeEmbeddingsServer
from tests.knowledge_app import test_embedding_connections as embedding_tests
from tests.knowledge_app.test_embedding_connections import KEY, _upload
from tests.knowledge_app.test_embedding_connections import _base_with as _base
from tests.knowledge_app.test_embedding_connections import _connection as embedding_connection

pytestmark = pytest.mark.django_db(transaction=True)

provider = embedding_tests.provider  # the fake /embeddings server, on loopback


def _connection(tenant: Tenant, url: str, name: str = "small") -> ProviderCredential:
    return embedding_connection(tenant, url, name=name)


def _knowledge_only_client(tenant: Tenant) -> Any:
    _, key = secret_services.api_key_create(
        workspace=tenant.workspace, kind=ApiKey.Kind.SECRET, label="ci", scopes=["knowledge"]
    )
    return api_client(key)


# ---------------------------------------------------------------- the key's host


def test_a_saved_key_is_not_sent_to_a_host_the_url_is_moved_to(
    owner: Tenant, settings: Any
) -> None:
    """A key with the knowledge scope alone cannot read the saved key; were it able to
    point the connection at its own host and keep the key, the next indexing would send
    the key there."""
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    _connection(owner, "https://api.embeddings.example/v1")
    client = _knowledge_only_client(owner)
    body = {"name": "small", "model": "embed-1"}

    for elsewhere in (
        "https://attacker.example/v1",  # another host
        "http://api.embeddings.example/v1",  # the same host in clear text
        "https://api.embeddings.example:8443/v1",  # another port
        "https://api.embeddings.example.attacker.example/v1",
    ):
        moved = client.post(
            "/api/v1/knowledge-embedding-connections", {**body, "base_url": elsewhere},
            format="json",
        )  # fmt: skip
        assert moved.status_code == 400, (elsewhere, moved.content)
        assert "Enter the key again" in str(moved.json()["error"]["fields"]["api_key"])
    saved = ProviderCredential.objects.get(workspace=owner.workspace, name="small")
    assert saved.base_url == "https://api.embeddings.example/v1"

    # Another path on the same origin keeps the key; so does a move with the key typed again.
    same = client.post(
        "/api/v1/knowledge-embedding-connections",
        {**body, "base_url": "https://api.embeddings.example/v2"}, format="json",
    )  # fmt: skip
    assert same.status_code == 200 and same.json()["has_key"] is True, same.content
    retyped = client.post(
        "/api/v1/knowledge-embedding-connections",
        {**body, "base_url": "https://other.example/v1", "api_key": "sk-other-1234567"},
        format="json",
    )  # fmt: skip
    assert retyped.status_code == 200, retyped.content
    assert (
        provider_credentials.credential_open(
            credential=ProviderCredential.objects.get(workspace=owner.workspace, name="small")
        )
        == "sk-other-1234567"
    )


def test_an_llm_connection_keeps_its_key_on_its_own_host_too(owner: Tenant) -> None:
    provider_credentials.provider_llm_set(
        workspace=owner.workspace, name="main", base_url="https://llm.example/v1",
        model="m", api_key=KEY,
    )  # fmt: skip
    with pytest.raises(ValidationError, match="Enter the key again"):
        provider_credentials.provider_llm_set(
            workspace=owner.workspace, name="main", base_url="https://evil.example/v1", model="m"
        )


# ---------------------------------------------------------------- what a provider answers


async def test_a_key_spelled_in_json_escapes_past_the_cut_never_reaches_the_error(
    owner: Tenant,
    provider: FakeEmbeddingsServer,
) -> None:
    """The provider's message is cut to 200 characters: masked after the cut, a key that
    straddles it kept its first half. Escaped as ``\\u0073…`` the raw bytes do not spell it;
    only the decoded message does."""
    escaped = "".join(f"\\u{ord(c):04x}" for c in KEY)
    message = "x" * 180 + " key " + escaped
    body = b'{"error": {"message": "' + message.encode() + b'"}}'
    provider.script(fake_openai.PlainBody(body, 401, "application/json"))
    await sync_to_async(_connection)(owner, provider.base_url)
    base = await sync_to_async(_base)(owner, "small")
    failed = await sync_to_async(_upload)(base)
    assert failed.status == "failed" and "HTTP 401" in failed.error, failed.error
    assert not any(KEY[i : i + 8] in failed.error for i in range(len(KEY) - 8)), failed.error


async def test_a_number_past_a_floats_range_fails_the_document_with_our_sentence(
    owner: Tenant,
    provider: FakeEmbeddingsServer,
    settings: Any,
) -> None:
    settings.KNOWLEDGE_EMBEDDING_BATCH = 8  # the six passages in one request
    huge = b"1" + b"0" * 400  # an integer literal: Python reads it, no float holds it
    row = b'{"index": %d, "embedding": [' + huge + b", 0.5]}"
    body = b'{"data": [' + b", ".join(row % i for i in range(6)) + b"]}"
    provider.script(fake_openai.PlainBody(body, 200, "application/json"))
    await sync_to_async(_connection)(owner, provider.base_url)
    base = await sync_to_async(_base)(owner, "small")
    failed = await sync_to_async(_upload)(base)
    assert failed.status == "failed"
    assert "not a number" in failed.error, failed.error  # not "the platform's side"


@pytest.mark.parametrize("status", [200, 500], ids=["answer", "error"])
async def test_an_answer_nested_past_pythons_stack_fails_the_document_with_our_sentence(
    owner: Tenant, provider: FakeEmbeddingsServer, status: int
) -> None:
    """A hundred thousand nested arrays fit in the answer's cap; decoding them ran out of
    Python's stack, and the document failed as if the platform had (RecursionError)."""
    body = b'{"data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    if status != 200:
        body = b'{"error": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    provider.script(fake_openai.PlainBody(body, status, "application/json"))
    await sync_to_async(_connection)(owner, provider.base_url)
    base = await sync_to_async(_base)(owner, "small")
    failed = await sync_to_async(_upload)(base)
    assert failed.status == "failed"
    assert failed.error.startswith("The embedding provider"), failed.error


# ---------------------------------------------------------------- fairness


def _search_timed(tenant: Tenant, base: KnowledgeBase) -> tuple[float, search.Found]:
    """A search on a thread of its own (as a web process's), its connection closed after."""
    started = time.monotonic()
    try:
        found = search.search_noted(
            workspace_id=tenant.workspace.pk, knowledge_base_ids=[base.pk],
            query=f"warranty part {time.monotonic_ns()}", k=3,
        )  # fmt: skip
    finally:
        db.connection.close()
    return time.monotonic() - started, found


def _slow_workspace(n: int, url: str) -> tuple[Tenant, KnowledgeBase]:
    tenant = make_tenant(f"slow{n}@example.com", workspace_name=f"Slow {n}")
    services.embedding_connection_set(
        workspace=tenant.workspace, name="slow", base_url=url, model="m", api_key=KEY
    )
    return tenant, _base(tenant, "slow")


async def test_hanging_providers_of_other_workspaces_do_not_hold_up_a_question(
    owner: Tenant,
    provider: FakeEmbeddingsServer,
    settings: Any,
) -> None:
    """Three workspaces whose providers never answer, each with its share of questions in
    flight (more than a small pool of threads): another workspace's question is still sent
    at once and answered, not queued until theirs time out."""
    settings.KNOWLEDGE_EMBEDDING_QUESTION_TIMEOUT_S = 4.0
    await sync_to_async(_connection)(owner, provider.base_url)
    ours = await sync_to_async(_base)(owner, "small")
    indexed = await sync_to_async(_upload)(ours)
    assert indexed.status == "ready", indexed.error
    floor, alone = await asyncio.to_thread(_search_timed, owner, ours)
    assert alone.note == "", alone.note

    hanging = _Silent()
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(max_workers=10) as threads:  # as many as a web process serves
        try:
            slow = [await sync_to_async(_slow_workspace)(n, hanging.url) for n in range(3)]
            stalled = [
                loop.run_in_executor(threads, _search_timed, tenant, base)
                for tenant, base in slow
                for _ in range(settings.KNOWLEDGE_WORKSPACE_SEARCH_CONCURRENCY)
            ]
            assert await loop.run_in_executor(threads, hanging.connected, 4, 4.0)
            took, found = await loop.run_in_executor(threads, _search_timed, owner, ours)
            await asyncio.gather(*stalled)
        finally:
            hanging.stop()
    assert found.note == "", found.note  # answered by its provider, not full text alone
    assert took < floor + 1.5, (took, floor)  # not behind the others' 4 s timeouts


class _Silent:
    """A TCP server that accepts and never answers, on a thread of its own."""

    def __init__(self) -> None:
        import socket

        self._socket = socket.create_server(("127.0.0.1", 0))
        self._socket.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}/v1"
        self._held: list[Any] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._socket.accept()
            except TimeoutError:
                continue
            self._held.append(connection)

    def connected(self, count: int, within_s: float) -> bool:
        deadline = time.monotonic() + within_s
        while len(self._held) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return len(self._held) >= count

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        for connection in self._held:
            connection.close()
        self._socket.close()


async def test_a_provider_answering_each_batch_just_in_time_cannot_outlast_the_slot(
    owner: Tenant,
    provider: FakeEmbeddingsServer,
    settings: Any,
) -> None:
    """Each batch answered just before its own timeout: without a budget for the whole
    document, the job would outlive its workspace's indexing slot, which then lapses and
    lets the workspace take one more worker."""
    settings.KNOWLEDGE_EMBEDDING_BATCH = 1
    settings.KNOWLEDGE_EMBEDDING_DOCUMENT_TIMEOUT_S = 3.0
    for _ in range(6):
        provider.script(fake_openai.Delay(1.2), fake_openai.JsonBody(_one_vector()))
    await sync_to_async(_connection)(owner, provider.base_url)
    base = await sync_to_async(_base)(owner, "small")
    started = time.monotonic()
    failed = await sync_to_async(_upload)(base)
    assert failed.status == "failed", failed.error
    assert "took longer than 3 s" in failed.error and "DOCUMENT_TIMEOUT" in failed.error
    assert time.monotonic() - started < 3.0 + 2.0  # stopped at its budget, not at 6 x 1.2 s


def _one_vector() -> dict[str, Any]:
    return {"data": [{"index": 0, "embedding": [0.5] * 32}]}


# ---------------------------------------------------------------- races and scopes


def _in_thread(call: Any) -> Any:
    try:
        return call()
    finally:
        db.connection.close()


def test_deleting_a_connection_while_a_base_chooses_it_is_never_a_server_error(
    owner: Tenant, owner_api: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The delete has checked that no base uses the connection and is about to delete it;
    a base chooses it at that moment. Unlocked, the base's choice committed and the delete
    then failed on the foreign key (500), or the other way round."""
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    _connection(owner, "http://127.0.0.1:9/v1")
    base = _base(owner, None)
    checked, go_on = threading.Event(), threading.Event()
    delete = provider_credentials.provider_credential_delete

    def paused_delete(**kwargs: Any) -> None:
        checked.set()
        go_on.wait(10)
        delete(**kwargs)

    monkeypatch.setattr(provider_credentials, "provider_credential_delete", paused_delete)
    base_path = f"/api/v1/knowledge-bases/{base.uid}/embedding"
    with ThreadPoolExecutor(max_workers=2) as threads:
        deleting = threads.submit(
            _in_thread, lambda: owner_api.delete("/api/v1/knowledge-embedding-connections/small")
        )
        assert checked.wait(10)
        choosing = threads.submit(
            _in_thread, lambda: api_client(owner.secret_key).put(
                base_path, {"connection": "small"}, format="json"
            ),
        )  # fmt: skip
        time.sleep(0.5)
        go_on.set()
        deleted, chose = deleting.result(15), choosing.result(15)
    assert (deleted.status_code, chose.status_code) in ((204, 400), (400, 200)), (
        deleted.content, chose.content,
    )  # fmt: skip
    base.refresh_from_db()
    exists = ProviderCredential.objects.filter(workspace=owner.workspace, name="small").exists()
    assert exists == (base.embedding_connection_id is not None)


def test_a_key_without_the_knowledge_scope_reaches_no_embedding_endpoint(
    owner: Tenant, settings: Any
) -> None:
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    _connection(owner, "http://127.0.0.1:9/v1")
    base = _base(owner, None)
    _, key = secret_services.api_key_create(
        workspace=owner.workspace, kind=ApiKey.Kind.SECRET, label="agents only",
        scopes=["agents"],
    )  # fmt: skip
    client = api_client(key)
    body = {"name": "x", "base_url": "https://a.example/v1", "model": "m", "api_key": "k-123456"}
    answers = [
        client.get("/api/v1/knowledge-embedding-connections"),
        client.post("/api/v1/knowledge-embedding-connections", body, format="json"),
        client.get("/api/v1/knowledge-embedding-connections/small"),
        client.delete("/api/v1/knowledge-embedding-connections/small"),
        client.put(
            f"/api/v1/knowledge-bases/{base.uid}/embedding", {"connection": "small"},
            format="json",
        ),
    ]  # fmt: skip
    assert [answer.status_code for answer in answers] == [403] * 5
    assert ProviderCredential.objects.filter(workspace=owner.workspace).count() == 1
