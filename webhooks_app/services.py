"""Writes for webhooks: endpoints, events, and delivering them.

An event becomes one delivery per endpoint that chose its type. A delivery is attempted
(``delivery_attempt``) through the platform's egress guard (``egress.client.fetch``
under ``core.outbound.policy``: public addresses only, the name resolved once and
the connection pinned to it), signed
anew each time, and retried with exponential backoff until it succeeds or 24 hours pass.
``dispatch`` decides where attempts run: Celery tasks on their own queue in production, a
thread of the platform's own process on the embedded default.

A workspace has at most ``WEBHOOK_WORKSPACE_IN_FLIGHT`` attempts in flight (``in_flight``);
one over the cap is parked (not queued) until one of them gives its slot back. A failed
attempt counts against its endpoint: no attempt goes to it until its backoff lapses, and after
``WEBHOOK_DISABLE_AFTER_FAILURES`` failures in a row it is disabled and its owner mailed.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from core import outbound
from egress import client as egress
from secrets_app.audit import SYSTEM, Actor, audit_record, url_shown
from secrets_app.models import Workspace
from secrets_app.services import sealed_open, sealed_store, workspace_lock
from sessions_app.models import Session, SessionAnalysis, ToolCallRecord
from webhooks_app import dispatch, in_flight, notices, payloads, signing
from webhooks_app.models import EventType, WebhookAttempt, WebhookDelivery, WebhookEndpoint

logger = logging.getLogger(__name__)

USER_AGENT = "voice-agent-platform-webhooks/1"
RESPONSE_MAX_BYTES = 1024 * 1024  # what is read of a receiver's answer (then ignored)
ENDPOINTS_MAX = 20  # per workspace
ENVELOPE_BYTES = 512  # what an event adds around its data (id, type, created_at…)

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
    """An endpoint URL the egress guard allows (http(s), its ports, no private literal)."""
    try:
        return outbound.clean_outbound_url(url, schemes=("https", "http"), what="endpoint URL")
    except ValidationError as error:
        raise ValidationError({"url": error.messages}) from None


@transaction.atomic
def endpoint_create(
    *,
    workspace: Workspace,
    url: str,
    events: list[str],
    description: str = "",
    actor: Actor = SYSTEM,
) -> tuple[WebhookEndpoint, str]:
    """A new endpoint and its signing secret (the plaintext is never available again)."""
    workspace_lock(workspace_id=workspace.pk)  # counted and written as one step
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
    audit_record(
        workspace=workspace, actor=actor, action="webhook.created", target=url_shown(endpoint.url),
        details={"events": endpoint.events, "enabled": endpoint.enabled},
    )  # fmt: skip
    return endpoint, secret


def endpoint_update(
    *,
    endpoint: WebhookEndpoint,
    events: list[str],
    enabled: bool,
    description: str = "",
    actor: Actor = SYSTEM,
) -> WebhookEndpoint:
    before = {"events": endpoint.events, "enabled": endpoint.enabled}
    endpoint.events = _clean_events(events)
    endpoint.description = description.strip()[:200]
    if enabled != endpoint.enabled:  # either way, a fresh start: no failures counted
        endpoint.enabled, endpoint.consecutive_failures, endpoint.backoff_until = enabled, 0, None
        endpoint.disabled_reason, endpoint.disabled_at = "", None
    endpoint.save(
        update_fields=["events", "enabled", "description", "consecutive_failures",
                       "backoff_until", "disabled_reason", "disabled_at"]
    )  # fmt: skip
    after = {"events": endpoint.events, "enabled": endpoint.enabled}
    changed = {name: value for name, value in after.items() if before[name] != value}
    if changed:
        audit_record(
            workspace=endpoint.workspace, actor=actor, action="webhook.updated",
            target=url_shown(endpoint.url), details=changed,
        )  # fmt: skip
    return endpoint


def endpoint_delete(*, endpoint: WebhookEndpoint, actor: Actor = SYSTEM) -> None:
    workspace, shown = endpoint.workspace, url_shown(endpoint.url)
    endpoint.delete()
    logger.info("webhook endpoint deleted: workspace=%s", endpoint.workspace_id)
    audit_record(workspace=workspace, actor=actor, action="webhook.deleted", target=shown)


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
            transaction.on_commit(partial(_queue, workspace_id, delivery.pk, 1))
    return deliveries


def session_ended_emit(*, session_id: int, workspace_id: int) -> list[WebhookDelivery]:
    """``session.ended`` for a session whose record was just closed."""

    def data() -> dict[str, Any]:
        session = (
            Session.objects.select_related("agent", "agent_version", "api_key")
            .prefetch_related("transcript", "turns", "tool_calls")
            .get(pk=session_id, workspace_id=workspace_id)
        )
        return payloads.session_ended_capped(
            session, settings.WEBHOOK_PAYLOAD_MAX_BYTES - ENVELOPE_BYTES
        )

    return event_emit(workspace_id=workspace_id, event_type=EventType.SESSION_ENDED, data=data)


def tool_call_failed_emit(*, session: Session, call: ToolCallRecord) -> list[WebhookDelivery]:
    return event_emit(
        workspace_id=session.workspace_id,
        event_type=EventType.TOOL_CALL_FAILED,
        data=lambda: payloads.tool_call_failed(session, call),
    )


def analysis_completed_emit(*, analysis: SessionAnalysis) -> list[WebhookDelivery]:
    return event_emit(
        workspace_id=analysis.workspace_id,
        event_type=EventType.ANALYSIS_COMPLETED,
        data=lambda: payloads.analysis_completed(analysis),
    )


def delivery_redeliver(*, delivery: WebhookDelivery, actor: Actor = SYSTEM) -> WebhookDelivery:
    """Send the same event again (same id and body, a fresh signature), with a new 24 h of
    retries. A delivery whose attempts are still running is left to them."""
    with transaction.atomic():
        current = WebhookDelivery.objects.select_for_update().get(
            pk=delivery.pk, workspace_id=delivery.workspace_id
        )
        if current.status in (Status.PENDING, Status.RETRYING):
            return current
        audit_record(
            workspace=current.workspace, actor=actor, action="webhook.redelivered",
            target=url_shown(current.endpoint.url),
            details={"event_id": str(current.event_id), "event_type": current.event_type},
        )  # fmt: skip
        current.status, current.round_started_at = Status.PENDING, timezone.now()
        current.next_attempt_at = current.round_started_at
        current.save(update_fields=["status", "round_started_at", "next_attempt_at"])
        attempt = current.attempts + 1
        transaction.on_commit(partial(_queue, current.workspace_id, current.pk, attempt))
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


@dataclass(frozen=True)
class NextAttempt:
    """Run attempt ``attempt`` of the delivery in ``delay_s`` seconds."""

    attempt: int
    delay_s: float


def _claim(delivery_id: int, attempt: int) -> _Request | NextAttempt | None:
    """Take attempt number ``attempt`` (None: done already, or another copy of this task
    took it: brokers may hand a delayed task out twice). While the endpoint backs off, the
    attempt waits for it (a NextAttempt of the same number)."""
    with transaction.atomic():
        delivery = WebhookDelivery.objects.select_for_update().filter(pk=delivery_id).first()
        if delivery is None or delivery.status in (Status.SUCCEEDED, Status.FAILED):
            return None
        if delivery.attempts != attempt - 1:
            return None
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=delivery.endpoint_id)
        now = timezone.now()
        if not endpoint.enabled:
            delivery.status, delivery.next_attempt_at = Status.FAILED, None
            delivery.last_error = "not sent: the endpoint is disabled"
            delivery.save(update_fields=["status", "next_attempt_at", "last_error"])
            return None
        if endpoint.backoff_until is not None and endpoint.backoff_until > now:
            delivery.status, delivery.next_attempt_at = Status.RETRYING, endpoint.backoff_until
            delivery.save(update_fields=["status", "next_attempt_at"])
            return NextAttempt(attempt, (endpoint.backoff_until - now).total_seconds())
        _hold_failing_endpoint(endpoint, now)
        delivery.attempts = attempt
        delivery.save(update_fields=["attempts"])
    return _signed(delivery, endpoint)


def _hold_failing_endpoint(endpoint: WebhookEndpoint, now: datetime) -> None:
    """An endpoint that has been failing gets one attempt at a time: the others wait until
    this one settles (which clears the hold or backs the endpoint off further)."""
    if endpoint.consecutive_failures:
        hold = max(retry_delay_s(endpoint.consecutive_failures), settings.WEBHOOK_TIMEOUT_S)
        endpoint.backoff_until = now + timedelta(seconds=hold)
        endpoint.save(update_fields=["backoff_until"])


def _signed(delivery: WebhookDelivery, endpoint: WebhookEndpoint) -> _Request:
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
        guard=outbound.policy(),
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


def _count_against_endpoint(endpoint_id: int, outcome: _Outcome, now: datetime) -> None:
    """A success clears the endpoint's failures; a failure backs it off (doubling, like a
    delivery's retries) and, at the limit, disables it and mails its owner."""
    endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint_id)
    if outcome.succeeded:
        endpoint.consecutive_failures, endpoint.backoff_until = 0, None
    else:
        endpoint.consecutive_failures += 1
        delay = retry_delay_s(endpoint.consecutive_failures)
        endpoint.backoff_until = now + timedelta(seconds=delay)
        limit = settings.WEBHOOK_DISABLE_AFTER_FAILURES
        if endpoint.enabled and endpoint.consecutive_failures >= limit:
            _disable(endpoint, now, f"{limit} delivery attempts in a row failed (the last: "
                                    f"{outcome.error or 'no answer'}).")  # fmt: skip
    endpoint.save(update_fields=[
        "consecutive_failures", "backoff_until", "enabled", "disabled_reason", "disabled_at"
    ])  # fmt: skip


def _disable(endpoint: WebhookEndpoint, now: datetime, reason: str) -> None:
    endpoint.enabled, endpoint.disabled_reason, endpoint.disabled_at = False, reason[:400], now
    logger.warning("webhook endpoint disabled: id=%s workspace=%s", endpoint.pk,
                   endpoint.workspace_id)  # fmt: skip
    audit_record(
        workspace=endpoint.workspace, actor=SYSTEM, action="webhook.disabled",
        target=url_shown(endpoint.url), details={"failures": endpoint.consecutive_failures},
    )  # fmt: skip
    transaction.on_commit(partial(notices.endpoint_disabled_mail, endpoint_id=endpoint.pk))


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
        _count_against_endpoint(delivery.endpoint_id, outcome, now)
    return delay


def _queue(workspace_id: int, delivery_id: int, attempt: int) -> None:
    """Queue an attempt now with a slot of its workspace's, or park it until one is free
    (the queue holds only attempts that can start)."""
    token = in_flight.take_or_park(workspace_id, in_flight.Parked(delivery_id, attempt))
    if token is not None:
        dispatch.schedule(delivery_id, attempt, 0.0, slot=token)


def delivery_attempt(
    *, delivery_id: int, attempt: int, slot: str | None = None
) -> NextAttempt | None:
    """Make attempt ``attempt`` of a delivery, within its workspace's in-flight cap (in the
    ``slot`` taken when it was queued, else one taken now). Returns the attempt to run next
    (the next one after its backoff; this one again when the endpoint backs off), or None
    when there is none (delivered, given up, not this attempt's turn, or parked: the
    workspace is at its cap, and the attempt is queued when one of its slots is free)."""
    deliveries = WebhookDelivery.objects.filter(pk=delivery_id)
    workspace_id = deliveries.values_list("workspace_id", flat=True).first()
    if workspace_id is None:  # deleted (with its endpoint) in the meantime
        if slot is not None:
            _release(slot)
        return None
    token = slot if slot is not None and in_flight.hold(slot) else None
    if token is None:
        token = in_flight.take_or_park(workspace_id, in_flight.Parked(delivery_id, attempt))
    if token is None:
        return None
    try:
        return _attempt_in_slot(delivery_id, attempt)
    finally:
        _release(token)


def _release(token: str) -> None:
    """Give a slot back; the parked attempt it passes to is queued."""
    for parked, handed in in_flight.release(token):
        dispatch.schedule(parked.delivery_id, parked.attempt, 0.0, slot=handed)


def _attempt_in_slot(delivery_id: int, attempt: int) -> NextAttempt | None:
    claimed = _claim(delivery_id, attempt)
    if not isinstance(claimed, _Request):
        return claimed
    outcome = async_to_sync(_send)(claimed)
    logger.info(
        "webhook delivery %s attempt %s: %s", delivery_id, attempt,
        outcome.status_code or "no answer",
    )  # fmt: skip
    delay = _settle(delivery_id, attempt, outcome)
    return None if delay is None else NextAttempt(attempt + 1, delay)
