"""Deliveries go to the ``webhooks`` queue, and every place that starts workers agrees: the
webhook worker consumes it, the sandbox worker does not."""

from __future__ import annotations

from pathlib import Path

import yaml
from django.conf import settings

from platform_site.celery import app
from tests.webhooks_app.workers import SANDBOX_QUEUES, WEBHOOK_QUEUES

ROOT = Path(__file__).resolve().parents[2]


def _queue_of(task_name: str) -> str:
    route = app.amqp.router.route({}, task_name)
    return str(route["queue"].name)


def _queues(command: list[str]) -> set[str]:
    return set(command[command.index("-Q") + 1].split(","))


def test_deliveries_have_a_queue_of_their_own():
    assert _queue_of("webhooks.deliver") == "webhooks"
    assert _queue_of("tools.execute") == "sandbox"
    assert _queue_of("mail.send") == "celery"
    assert set(WEBHOOK_QUEUES.split(",")) == {"webhooks"}
    assert "webhooks" not in SANDBOX_QUEUES.split(",")


def test_the_compose_file_runs_a_webhook_worker_beside_the_sandbox_worker():
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    consumers = {
        name: _queues(service["command"])
        for name, service in services.items()
        if "worker" in service.get("command", [])
    }
    # Each queue has its own worker: tool calls, webhooks, knowledge indexing, agent tests,
    # post-call analysis.
    assert consumers == {
        "worker": {"sandbox", "celery"},
        "webhooks": {"webhooks"},
        "knowledge-worker": {"knowledge"},
        "evals-worker": {"evals"},
        "postcall-worker": {"postcall"},
    }
    command = services["webhooks"]["command"]
    concurrency = int(command[command.index("--concurrency") + 1])
    assert concurrency >= settings.WEBHOOK_WORKSPACE_IN_FLIGHT + 2  # docs/webhooks.md's rule


def test_the_docs_start_the_workers_the_same_way():
    webhooks = (ROOT / "docs" / "webhooks.md").read_text()
    sandbox = (ROOT / "docs" / "sandbox.md").read_text()
    assert "celery -A platform_site worker -Q webhooks" in webhooks
    assert "celery -A platform_site worker -Q sandbox,celery" in sandbox
    assert "-Q webhooks" in (ROOT / "README.md").read_text()
