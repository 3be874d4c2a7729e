"""Reads for webhooks, always within a workspace."""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from secrets_app.models import Workspace
from webhooks_app.models import WebhookDelivery, WebhookEndpoint

DELIVERIES_SHOWN = 50


def endpoint_list(*, workspace: Workspace) -> QuerySet[WebhookEndpoint]:
    return WebhookEndpoint.objects.filter(workspace=workspace).defer("ciphertext")


def endpoint_get(*, workspace: Workspace, endpoint_id: int) -> WebhookEndpoint:
    return get_object_or_404(WebhookEndpoint, workspace=workspace, pk=endpoint_id)


def delivery_list(*, endpoint: WebhookEndpoint) -> QuerySet[WebhookDelivery]:
    """The endpoint's newest deliveries, with their attempts."""
    deliveries = WebhookDelivery.objects.filter(
        workspace_id=endpoint.workspace_id, endpoint=endpoint
    ).defer("payload")
    return deliveries.prefetch_related("attempt_log")[:DELIVERIES_SHOWN]


def delivery_get(*, workspace: Workspace, endpoint_id: int, delivery_id: int) -> WebhookDelivery:
    return get_object_or_404(
        WebhookDelivery, workspace=workspace, endpoint_id=endpoint_id, pk=delivery_id
    )
