"""Webhook deliveries as production runs them: Celery tasks through Redis, a real worker,
retries delayed with their backoff (shortened here)."""

from __future__ import annotations

import asyncio
from itertools import pairwise

import pytest
from asgiref.sync import sync_to_async

from tests.factories import make_tenant
from tests.fakes.egress_server import EgressTestServer
from tests.faults.processes import Process
from tests.sessions_app.recording import eventually
from tests.webhooks_app.receiver import Receiver
from tests.webhooks_app.workers import start_webhook_worker
from webhooks_app import services
from webhooks_app.models import WebhookDelivery

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]


def _worker(tmp_path, port: int) -> Process:
    return start_webhook_worker(tmp_path / "webhooks.log", port=port, WEBHOOK_RETRY_BASE_S="0.3")


async def test_a_celery_worker_retries_until_one_success(tmp_path, settings):
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    assert not settings.CELERY_TASK_ALWAYS_EAGER  # REDIS_URL is set: tasks go to Redis
    tenant = await sync_to_async(make_tenant)("celery-hooks@example.com")
    async with EgressTestServer() as server:
        settings.EGRESS_PORTS = [server.port]
        receiver = Receiver(server, [500, 502, 200])
        receiver.install()
        _row, receiver.secret = await sync_to_async(services.endpoint_create)(
            workspace=tenant.workspace, url=receiver.url, events=["quota.warning"]
        )
        worker = await asyncio.to_thread(_worker, tmp_path, server.port)
        try:
            await sync_to_async(services.event_emit)(
                workspace_id=tenant.workspace.pk, event_type="quota.warning",
                data={"quota": {"metric": "llm_tokens", "percent": 81}},
            )  # fmt: skip
            delivery = await eventually(
                lambda: WebhookDelivery.objects.filter(status="succeeded").first(), within=60
            )
            await asyncio.sleep(1.0)  # a duplicate would show up by now
        finally:
            await asyncio.to_thread(worker.stop)
    assert receiver.answered == [500, 502, 200] and receiver.verified == [True] * 3
    assert delivery.attempts == 3
    attempts = await sync_to_async(list)(delivery.attempt_log.all())
    gaps = [(later.at - earlier.at).total_seconds() for earlier, later in pairwise(attempts)]
    assert gaps[0] >= 0.3 and gaps[1] >= 0.6  # the backoff doubles
