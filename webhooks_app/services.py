"""Writes for webhooks: endpoints, events, and delivering them.

An event becomes one delivery per endpoint that chose its type. A delivery is attempted
(``delivery_attempt``) through the tool sandbox's egress guard (``tools_app.egress``:
public addresses only, the name resolved once and the connection pinned to it), signed
anew each time, and retried with exponential backoff until it succeeds or 24 hours pass.
``dispatch`` decides where attempts run: Celery tasks in production, a thread of the
platform's own process on the embedded default.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

import httpx
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from platform_site.outbound import clean_outbound_url
from secrets_app.models import Workspace
from secrets_app.services import sealed_open, sealed_store
from sessions_app.models import Session, ToolCallRecord
from tools_app import egress
from webhooks_app import dispatch, payloads, signing
from webhooks_app.models import EventType, WebhookAttempt, WebhookDelivery, WebhookEndpoint

logger = logging.getLogger(__name__)

USER_AGENT = "voice-agent-platform-webhooks/1"
RESPONSE_MAX_BYTES = 1024 * 1024  # what is read of a receiver's answer (then ignored)
ENDPOINTS_MAX = 20  # per workspace

Status = WebhookDelivery.Status


# ---------------------------------------------------------------- endpoints


def _clean_events(events: list[str]) -> list[str]:
    known = set(EventType.values)
    unknown = sorted(set(events) - known)
    if unknown:
        raise ValidationError({"events": [f"Unknown event type: {', '.join(unknown)}."]})
    if not events:
        raise ValidationError({"events": ["Choose at least one event."]})
    return [event for event in EventType.values if event in events]


def webhook_url_clean(url: str) -> str:
    """An endpoint URL: http(s), a port the egress guard allows, no private literal."""
    try:
        cleaned = clean_outbound_url(url, schemes=("https", "http"), what="endpoint URL")
    except ValidationError as error:
        raise ValidationError({"url": error.messages}) from None
    port = httpx.URL(cleaned).port or (443 if cleaned.startswith("https:") else 80)
    if port not in settings.SANDBOX_EGRESS_PORTS:
        allowed = ", ".join(str(p) for p in settings.SANDBOX_EGRESS_PORTS)
        raise ValidationError({"url": [f"Port {port} is not allowed (allowed: {allowed})."]})
    return cleaned


@transaction.atomic
def endpoint_create(
    *, workspace: Workspace, url: str, events: list[str], description: str = ""
) -> tuple[WebhookEndpoint, str]:
    """A new endpoint and its signing secret (the plaintext is never available again)."""
    if WebhookEndpoint.objects.filter(workspace=workspace).count() >= ENDPOINTS_MAX:
        raise ValidationError(f"A workspace has at most {ENDPOINTS_MAX} webhook endpoints.")
    secret = signing.new_signing_secret()
    endpoint = WebhookEndpoint(
        workspace=workspace,
        url=webhook_url_clean(url),
        events=_clean_events(events),
        description=description.strip()[:200],
        secret_hint=secret[: len(signing.SECRET_PREFIX) + 4],
    )
    sealed_store(endpoint, secret)
    endpoint.save()
    logger.info("webhook endpoint created: id=%s workspace=%s", endpoint.pk, workspace.pk)
    return endpoint, secret


def endpoint_update(
    *, endpoint: WebhookEndpoint, events: list[str], enabled: bool, description: str = ""
) -> WebhookEndpoint:
    endpoint.events = _clean_events(events)
    endpoint.enabled = enabled
    endpoint.description = description.strip()[:200]
    endpoint.save(update_fields=["events", "enabled", "description"])
    return endpoint


def endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    endpoint.delete()
    logger.info("webhook endpoint deleted: workspace=%s", endpoint.workspace_id)


# ---------------------------------------------------------------- events


def event_emit(
    *, workspace_id: int, event_type: str, data: dict[str, Any] | Callable[[], dict[str, Any]]
) -> list[WebhookDelivery]:
    """Queue ``event_type`` for every enabled endpoint that chose it. ``data`` may be a
    function, called only when some endpoint wants the event."""
    endpoints = [
        endpoint
        for endpoint in WebhookEndpoint.objects.filter(workspace_id=workspace_id, enabled=True)
        if event_type in endpoint.events
    ]
    if not endpoints:
        return []
    event_id, now = uuid.uuid4(), timezone.now()
    body = {
        "id": str(event_id),
        "type": event_type,
        "created_at": now.isoformat(),
        "workspace_id": workspace_id,
        "data": data() if callable(data) else data,
    }
    payload = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    with transaction.atomic():
        deliveries = [
            WebhookDelivery.objects.create(
                workspace_id=workspace_id,
                endpoint=endpoint,
                event_id=event_id,
                event_type=event_type,
                payload=payload,
                created_at=now,
                round_started_at=now,
            )
            for endpoint in endpoints
        ]
        for delivery in deliveries:
            transaction.on_commit(partial(dispatch.schedule, delivery.pk, 1, 0.0))
    return deliveries


def session_ended_emit(*, session_id: int, workspace_id: int) -> list[WebhookDelivery]:
    """``session.ended`` for a session whose record was just closed."""

    def data() -> dict[str, Any]:
        session = (
            Session.objects.select_related("agent", "api_key")
            .prefetch_related("transcript", "turns", "tool_calls")
            .get(pk=session_id, workspace_id=workspace_id)
        )
        return payloads.session_ended(session)

    return event_emit(workspace_id=workspace_id, event_type=EventType.SESSION_ENDED, data=data)


def tool_call_failed_emit(*, session: Session, call: ToolCallRecord) -> list[WebhookDelivery]:
    return event_emit(
        workspace_id=session.workspace_id,
        event_type=EventType.TOOL_CALL_FAILED,
        data=lambda: payloads.tool_call_failed(session, call),
    )


def delivery_redeliver(*, delivery: WebhookDelivery) -> WebhookDelivery:
    """Send the same event again (same id and body, a fresh signature), with a new 24 h of
    retries. A delivery whose attempts are still running is left to them."""
    with transaction.atomic():
        current = WebhookDelivery.objects.select_for_update().get(
            pk=delivery.pk, workspace_id=delivery.workspace_id
        )
        if current.status in (Status.PENDING, Status.RETRYING):
            return current
        current.status, current.round_started_at = Status.PENDING, timezone.now()
        current.next_attempt_at = current.round_started_at
        current.save(update_fields=["status", "round_started_at", "next_attempt_at"])
        attempt = current.attempts + 1
        transaction.on_commit(lambda: dispatch.schedule(current.pk, attempt, 0.0))
    return current


# ---------------------------------------------------------------- delivering


@dataclass(frozen=True)
class _Request:
    url: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class _Outcome:
    status_code: int | None
    latency_ms: float
    error: str = ""

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def retry_delay_s(attempt: int) -> float:
    """Seconds before the attempt after ``attempt`` (1, 2, …): doubling, capped."""
    delay = settings.WEBHOOK_RETRY_BASE_S * 2 ** (attempt - 1)
    return float(min(delay, settings.WEBHOOK_RETRY_MAX_S))


def _claim(delivery_id: int, attempt: int) -> _Request | None:
    """Take attempt number ``attempt`` (None: done already, or another copy of this task
    took it: brokers may hand a delayed task out twice)."""
    with transaction.atomic():
        delivery = (
            WebhookDelivery.objects.select_for_update()
            .select_related("endpoint")
            .filter(pk=delivery_id)
            .first()
        )
        if delivery is None or delivery.status in (Status.SUCCEEDED, Status.FAILED):
            return None
        if delivery.attempts != attempt - 1:
            return None
        delivery.attempts = attempt
        delivery.save(update_fields=["attempts"])
    endpoint = delivery.endpoint
    body = delivery.payload.encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Webhook-Id": str(delivery.event_id),
        "Webhook-Event": delivery.event_type,
        signing.HEADER: signing.signature_header(sealed_open(endpoint), int(time.time()), body),
    }
    return _Request(endpoint.url, headers, body)


def _policy() -> egress.EgressPolicy:
    return egress.EgressPolicy(
        allow_private=settings.SANDBOX_EGRESS_ALLOW_PRIVATE,
        allowed_ports=frozenset(settings.SANDBOX_EGRESS_PORTS),
        max_response_bytes=RESPONSE_MAX_BYTES,
        timeout_s=settings.WEBHOOK_TIMEOUT_S,
        max_redirects=0,  # a 3xx is an answer, not an invitation to POST elsewhere
    )


async def _send(request: _Request) -> _Outcome:
    started = time.monotonic()
    try:
        response = await egress.fetch(
            egress.FetchRequest(request.url, "POST", request.headers, request.body),
            policy=_policy(),
        )
    except egress.EgressError as exc:
        return _Outcome(None, (time.monotonic() - started) * 1000, str(exc)[:300])
    latency = (time.monotonic() - started) * 1000
    error = "" if 200 <= response.status < 300 else f"the endpoint answered HTTP {response.status}"
    return _Outcome(response.status, latency, error)


def _settle(delivery_id: int, attempt: int, outcome: _Outcome) -> float | None:
    """Record the attempt; the delay before the next one, or None when it is over."""
    now = timezone.now()
    with transaction.atomic():
        delivery = WebhookDelivery.objects.select_for_update().get(pk=delivery_id)
        WebhookAttempt.objects.create(
            delivery=delivery, number=attempt, at=now, status_code=outcome.status_code,
            latency_ms=round(outcome.latency_ms, 1), error=outcome.error,
            succeeded=outcome.succeeded,
        )  # fmt: skip
        delivery.last_status_code, delivery.last_error = outcome.status_code, outcome.error
        delivery.last_latency_ms = round(outcome.latency_ms, 1)
        delay: float | None = None
        if outcome.succeeded:
            delivery.status, delivery.delivered_at, delivery.next_attempt_at = (
                Status.SUCCEEDED, now, None,
            )  # fmt: skip
        else:
            delay = retry_delay_s(attempt)
            window = timedelta(seconds=settings.WEBHOOK_RETRY_WINDOW_S)
            if now + timedelta(seconds=delay) > delivery.round_started_at + window:
                delivery.status, delivery.next_attempt_at, delay = Status.FAILED, None, None
            else:
                delivery.status = Status.RETRYING
                delivery.next_attempt_at = now + timedelta(seconds=delay)
        delivery.save()
    return delay


def delivery_attempt(*, delivery_id: int, attempt: int) -> float | None:
    """Make attempt ``attempt`` of a delivery. Returns the delay before the next attempt,
    or None when there is none (delivered, given up, or not this attempt's turn)."""
    request = _claim(delivery_id, attempt)
    if request is None:
        return None
    outcome = async_to_sync(_send)(request)
    logger.info(
        "webhook delivery %s attempt %s: %s", delivery_id, attempt,
        outcome.status_code or "no answer",
    )  # fmt: skip
    return _settle(delivery_id, attempt, outcome)
