"""Webhooks: endpoints, the events they receive, and the log of every delivery.

Owners and admins add, change and delete endpoints and redeliver events; members see
them. A signing secret exists in plain text only in the response to the POST that made
the endpoint (rendered with no-store), like a secret API key.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import path
from django.views.decorators.http import require_http_methods, require_POST

from core import outbound
from frontend.dashboard.scope import Scope, confirm_then, render_page, workspace_page
from secrets_app.audit import actor_for_request
from webhooks_app import selectors, services
from webhooks_app.models import EventType, WebhookDelivery, WebhookEndpoint

SECTION = "dashboard:webhooks"
STATUS_BADGES: dict[str, str] = {
    WebhookDelivery.Status.SUCCEEDED: "green",
    WebhookDelivery.Status.FAILED: "red",
    WebhookDelivery.Status.RETRYING: "amber",
    WebhookDelivery.Status.PENDING: "gray",
}


class EndpointForm(forms.Form):
    url = forms.CharField(
        label="Endpoint URL",
        max_length=500,
        widget=forms.URLInput(attrs={"placeholder": "https://api.example.com/voice-webhooks"}),
        help_text="Your server's URL. Events are POSTed as JSON, signed.",
    )
    description = forms.CharField(max_length=200, required=False)
    events = forms.MultipleChoiceField(
        choices=EventType.choices, widget=forms.CheckboxSelectMultiple
    )
    enabled = forms.BooleanField(required=False, initial=True, label="Enabled")

    def __init__(self, *args: Any, existing: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["url"].help_text += " " + outbound.rule_in_words()
        if existing:  # a new URL would need a new secret: make a new endpoint instead
            self.fields["url"].disabled = True
        else:
            del self.fields["enabled"]


def _require_manager(scope: Scope) -> None:
    if not scope.can_manage_keys:
        raise PermissionDenied("Only owners and admins can manage webhooks.")


def _put_errors(form: forms.Form, error: ValidationError) -> None:
    if not hasattr(error, "error_dict"):
        form.add_error(None, error)
        return
    for name, errors in error.message_dict.items():
        form.add_error(name if name in form.fields else None, errors)


@workspace_page
def index(request: HttpRequest, scope: Scope) -> HttpResponse:
    endpoints = list(selectors.endpoint_list(workspace=scope.workspace))
    context = {"endpoints": endpoints, "can_manage": scope.can_manage_keys}
    return render_page(request, scope, "dashboard/webhooks.html", context, section=SECTION)


@workspace_page
@require_http_methods(["GET", "POST"])
def create(request: HttpRequest, scope: Scope) -> HttpResponse:
    _require_manager(scope)
    form = EndpointForm(request.POST or None, initial={"events": ["session.ended"]})
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            endpoint, secret = services.endpoint_create(
                workspace=scope.workspace,
                url=data["url"],
                events=data["events"],
                description=data["description"],
                actor=actor_for_request(request),
            )
        except ValidationError as error:
            _put_errors(form, error)
        else:
            context = {"endpoint": endpoint, "secret": secret}
            response = render_page(
                request, scope, "dashboard/webhooks_created.html", context, section=SECTION
            )
            response["Cache-Control"] = "no-store"
            return response
    return render_page(
        request, scope, "dashboard/webhooks_new.html", {"form": form}, section=SECTION
    )


def _endpoint(scope: Scope, endpoint_id: int) -> WebhookEndpoint:
    return selectors.endpoint_get(workspace=scope.workspace, endpoint_id=endpoint_id)


@workspace_page
@require_http_methods(["GET", "POST"])
def detail(request: HttpRequest, scope: Scope, endpoint_id: int) -> HttpResponse:
    endpoint = _endpoint(scope, endpoint_id)
    initial = {
        "url": endpoint.url,
        "description": endpoint.description,
        "events": endpoint.events,
        "enabled": endpoint.enabled,
    }
    form = EndpointForm(request.POST or None, initial=initial, existing=True)
    if request.method == "POST":
        _require_manager(scope)
        if form.is_valid():
            data = form.cleaned_data
            services.endpoint_update(
                endpoint=endpoint, events=data["events"], enabled=data["enabled"],
                description=data["description"], actor=actor_for_request(request),
            )  # fmt: skip
            messages.success(request, "Endpoint updated.")
            return redirect("dashboard:webhook", scope.workspace.pk, endpoint.pk)
    deliveries = [
        {"delivery": d, "badge": STATUS_BADGES.get(d.status, "gray")}
        for d in selectors.delivery_list(endpoint=endpoint)
    ]
    context = {
        "endpoint": endpoint,
        "form": form,
        "deliveries": deliveries,
        "can_manage": scope.can_manage_keys,
        "disable_after": settings.WEBHOOK_DISABLE_AFTER_FAILURES,
    }
    return render_page(request, scope, "dashboard/webhook_detail.html", context, section=SECTION)


@workspace_page
@require_POST
def redeliver(
    request: HttpRequest, scope: Scope, endpoint_id: int, delivery_id: int
) -> HttpResponse:
    _require_manager(scope)
    delivery = selectors.delivery_get(
        workspace=scope.workspace, endpoint_id=endpoint_id, delivery_id=delivery_id
    )
    if delivery.status in (WebhookDelivery.Status.PENDING, WebhookDelivery.Status.RETRYING):
        messages.info(request, f"Event {delivery.event_id} is still being retried; nothing more.")
    else:
        services.delivery_redeliver(delivery=delivery, actor=actor_for_request(request))
        messages.success(request, f"Event {delivery.event_id} is being sent again.")
    return redirect("dashboard:webhook", scope.workspace.pk, endpoint_id)


@workspace_page
@require_http_methods(["GET", "POST"])
def delete(request: HttpRequest, scope: Scope, endpoint_id: int) -> HttpResponse:
    _require_manager(scope)
    endpoint = _endpoint(scope, endpoint_id)

    def act() -> str:
        services.endpoint_delete(endpoint=endpoint, actor=actor_for_request(request))
        return f"Endpoint {endpoint.url} deleted; it receives nothing more."

    context = {"endpoint": endpoint}
    return confirm_then(
        request, scope, "dashboard/webhooks_delete.html", context, section=SECTION, act=act
    )


urlpatterns = [
    path("webhooks/", index, name="webhooks"),
    path("webhooks/new/", create, name="webhook-new"),
    path("webhooks/<int:endpoint_id>/", detail, name="webhook"),
    path("webhooks/<int:endpoint_id>/delete/", delete, name="webhook-delete"),
    path(
        "webhooks/<int:endpoint_id>/deliveries/<int:delivery_id>/redeliver/",
        redeliver,
        name="webhook-redeliver",
    ),
]
