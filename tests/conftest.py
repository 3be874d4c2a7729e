"""Shared fixtures: three users (owner, member, outsider) and their API clients.

Tests marked ``postgres`` or ``redis`` need those servers (DATABASE_URL on
PostgreSQL, REDIS_URL). Without them such tests are skipped locally, but under
CI (CI=true) a skip would hide a gap, so it fails instead.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection, connections
from rest_framework.test import APIClient

from tests import parallel
from tests.engine.providers.llm.openai.fake_server import FakeOpenAIServer
from tests.factories import Tenant, make_tenant

_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _missing_service(item: pytest.Item) -> str | None:
    if item.get_closest_marker("redis") and not settings.REDIS_URL:
        return "needs REDIS_URL (a Redis server)"
    if item.get_closest_marker("postgres") and connection.vendor != "postgresql":
        return "needs DATABASE_URL on PostgreSQL"
    return None


# Under pytest-xdist (--dist loadgroup) these run on one worker, one after the other:
# the browser tests share one platform and model load per worker, and the fault tests
# (real redis-server, daphnes and Celery workers, killed on purpose) time what they see.
_RUN_TOGETHER = {"tests/browser/": "browser", "tests/faults/": "faults"}
# Modules whose module-scoped fixtures are costly (offline speech models) stay together.
_MODULES_TOGETHER = ("tests/sessions_app/test_speech_local.py",)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_newgateway(gateway: Any) -> None:
    """A new pytest-xdist worker process gets its own Redis database and VAR_DIR before
    it runs anything (tests/parallel.py)."""
    environment = parallel.worker_environment(
        gateway.id, redis_url=os.environ.get("REDIS_URL"), var_dir=Path(settings.VAR_DIR)
    )
    gateway.remote_exec(f"import os; os.environ.update({environment!r})").waitclose()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = item.nodeid.split("::")[0]
        group = next((g for prefix, g in _RUN_TOGETHER.items() if path.startswith(prefix)), None)
        if group is None and path in _MODULES_TOGETHER:
            group = path
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_runtest_setup(item: pytest.Item) -> None:
    reason = _missing_service(item)
    if reason is None:
        return
    if _CI:
        pytest.fail(f"{reason}; under CI this must not be skipped", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _fresh_rate_limits() -> None:
    """Every test starts with no requests counted (limits are counted across tests' keys)."""
    from core import rates
    from usage_app import quota_counters

    rates.reset()
    quota_counters.forget_all()


@pytest.fixture(autouse=True)
def _mail_on_a_thread(settings: Any) -> Iterator[None]:
    """Mail goes out from the web process's mail thread, as on the embedded default (no
    Celery worker runs in these tests); ``wait_for_queued_mail()`` before reading it.
    A test's mail is all sent before the next test starts."""
    from secrets_app.mail import wait_for_queued_mail

    settings.MAIL_QUEUE = "thread"
    yield
    wait_for_queued_mail()


@pytest.fixture(autouse=True)
def _background_settled(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that reaches the database ends once the background work it started is done
    (indexing, post-call analysis, the webhook attempts running) and this process's
    long-lived threads have let go of their connections: no thread of one test writes
    beside the next test, and PostgreSQL can drop the test database at the end (it refuses
    while another session is connected). Set up after the database, so torn down before
    its flush or rollback."""
    names = set(request.fixturenames)
    if not (request.node.get_closest_marker("django_db") or {"db", "transactional_db"} & names):
        yield
        return
    request.getfixturevalue("_django_db_helper")
    yield
    _settle_background()


def _settle_background() -> None:
    from asgiref.sync import SyncToAsync

    from knowledge_app import dispatch as knowledge
    from postcall_app import dispatch as postcall
    from realtime import records
    from secrets_app import mail
    from webhooks_app import dispatch as webhooks

    for queue in (knowledge, postcall, webhooks):
        queue.wait_idle()
    # The threads that keep a connection between uses (CONN_MAX_AGE): the session records'
    # writer, database_sync_to_async's thread and the mail thread.
    for thread in (records._WRITER, SyncToAsync.single_thread_executor, mail._thread):
        thread.submit(connections.close_all).result()


@pytest.fixture(autouse=True)
def _breakers_closed() -> Iterator[None]:
    """Circuit breakers are per process: a provider one test made fail is not skipped in
    the next test (which may reuse the workspace's id)."""
    from engine.providers import breaker

    yield
    breaker.forget_all()


@pytest.fixture(autouse=True)
def _scripted_speech(settings: Any) -> None:
    """Sessions use the scripted fake STT/TTS unless a test picks a real engine; only the
    tests allow the fakes (a test of the refusal turns ALLOW_FAKE_PROVIDERS off again)."""
    settings.ALLOW_FAKE_PROVIDERS = True
    settings.STT_PROVIDER = "fake"
    settings.TTS_PROVIDER = "fake"


@pytest.fixture
async def llm(settings: Any) -> AsyncIterator[FakeOpenAIServer]:
    """A fake OpenAI-compatible LLM server the sessions of the test talk to."""
    server = FakeOpenAIServer()
    await server.start()
    settings.LLM_BASE_URL = server.base_url
    settings.LLM_API_KEY = "test-llm-key"
    yield server
    await server.stop()


@pytest.fixture
async def http_pools_closed() -> Any:
    """The LLM and speech adapters keep a pool per event loop; the test's loop closes its
    own (an unclosed aiohttp pool collected later would log an error into another test).
    For async tests only: a test that runs its own loop (Playwright's) closes nothing here."""
    yield
    from engine.providers.http_pool import close_shared_sessions

    await close_shared_sessions()


@pytest.fixture
def owner(db: None) -> Tenant:
    return make_tenant("owner@example.com", workspace_name="Acme")


@pytest.fixture
def member(owner: Tenant) -> Tenant:
    """A member of the owner's workspace (same tenant, lesser role)."""
    from secrets_app import services

    user, _ = services.user_get_or_create(email="member@example.com", password="pw-member-1")
    services.membership_add(workspace=owner.workspace, user=user, role="member")
    return Tenant(user=user, workspace=owner.workspace, publishable_key="", secret_key="")


@pytest.fixture
def outsider(db: None) -> Tenant:
    return make_tenant("outsider@example.com", workspace_name="Other Corp")


def worker_database_url() -> str:
    """The test database, as a worker process started by a test reaches it."""
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


def api_client(secret_key: str | None) -> APIClient:
    client = APIClient()
    if secret_key:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret_key}")
    return client


@pytest.fixture
def owner_api(owner: Tenant) -> APIClient:
    return api_client(owner.secret_key)


@pytest.fixture
def outsider_api(outsider: Tenant) -> APIClient:
    return api_client(outsider.secret_key)
