"""API keys: list, create, a publishable key's settings, roll, revoke.

A secret key's plaintext exists only in the response to the POST that made it: it is
rendered there (never stored, never put in the session or a redirect) with no-store.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import path
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from frontend.dashboard.scope import (
    Scope,
    confirm_then,
    render_page,
    signed_in_user,
    workspace_page,
)
from secrets_app import scopes as key_scopes
from secrets_app import selectors, services
from secrets_app.audit import actor_for_request
from secrets_app.models import ApiKey
from secrets_app.validators import clean_origins
from sessions_app.selectors import agent_list

SECTION = "dashboard:keys"

GRACE_CHOICES = (
    ("0", "No time: it stops working now"),
    ("3600", "1 hour"),
    ("86400", "24 hours"),
    ("604800", "7 days"),
)


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def readable(error: ValidationError) -> list[str]:
    """Validator messages as sentences a person can act on."""
    return [message[:1].upper() + message[1:] for message in error.messages]


class KeyLimitsForm(forms.Form):
    """A publishable key's limits: what the key page creates and its settings page changes."""

    label = forms.CharField(
        max_length=100,
        required=False,
        help_text="Where the key is used, so you recognise it later (e.g. “shop website”).",
    )
    allowed_origins = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "https://shop.example.com"}),
        help_text=(
            "One origin per line, like https://shop.example.com. The browser sends the "
            "origin of the page that opens the session, and it must be listed here. "
            "Empty: only local development pages (http://localhost) may use the key."
        ),
    )
    allowed_agents = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None checked: the key works with every agent of this workspace.",
    )
    allow_inline_config = forms.BooleanField(
        required=False,
        initial=False,
        label="Pages may configure the agent themselves",
        help_text=(
            "Off (recommended): pages can only talk to the saved agents checked above. On: "
            "any page that has this key may send its own instructions, greeting, voice and "
            "browser tools, so anyone can make your agent say anything on your model."
        ),
    )
    allow_inline_tool_code = forms.BooleanField(
        required=False,
        initial=False,
        label="Pages may send server-tool code",
        help_text=(
            "Off (recommended): only handlers saved with an agent run on the platform. On: a "
            "page may send JavaScript that runs in the sandbox with your workspace's secrets "
            "(as references bound to their hosts). For local development."
        ),
    )
    tokens_only = forms.BooleanField(
        required=False,
        initial=False,
        label="Session tokens only",
        help_text=(
            "Pages cannot open sessions with this key at all: your server mints a short-lived "
            "token per session (POST /api/v1/session-tokens) and the page connects with it."
        ),
    )

    def __init__(self, *args: Any, agents: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        select = self.fields["allowed_agents"]
        assert isinstance(select, forms.ChoiceField)
        select.choices = agents
        if not agents:
            self.fields[
                "allowed_agents"
            ].help_text = (
                "This workspace has no saved agents yet; the key will work with every agent."
            )

    def clean_allowed_origins(self) -> list[str]:
        try:
            return clean_origins(lines(self.cleaned_data["allowed_origins"]))
        except ValidationError as error:
            raise ValidationError(readable(error)) from None


class KeyForm(KeyLimitsForm):
    kind = forms.ChoiceField(
        choices=(
            (ApiKey.Kind.PUBLISHABLE, "Publishable (pk_…): for web pages, safe to publish"),
            (ApiKey.Kind.SECRET, "Secret (sk_…): for your servers and the REST API only"),
        ),
        initial=ApiKey.Kind.PUBLISHABLE,
        widget=forms.RadioSelect,
    )
    scopes = forms.MultipleChoiceField(
        required=False,
        initial=key_scopes.DEFAULT,
        choices=[(name, f"{name}: {text}") for name, text in key_scopes.SCOPES.items()],
        widget=forms.CheckboxSelectMultiple,
        help_text=(
            "What a secret key may do on the REST API. Leave “keys” off unless a server must "
            "manage keys: a leaked key with it could make more keys."
        ),
    )


class RollForm(forms.Form):
    grace = forms.ChoiceField(
        choices=GRACE_CHOICES,
        initial="86400",
        widget=forms.RadioSelect,
        label="The old key keeps working for",
        help_text="Time to deploy the new key. Choose “no time” if the old key leaked.",
    )


def _agent_choices(scope: Scope) -> list[tuple[str, str]]:
    return [
        (agent.slug, f"{agent.name} ({agent.slug})")
        for agent in agent_list(workspace=scope.workspace)
    ]


def _limits(data: dict[str, Any]) -> dict[str, Any]:
    """A ``KeyLimitsForm``'s cleaned data as the key services take it."""
    names = ("allowed_origins", "allowed_agents", "allow_inline_config",
             "allow_inline_tool_code", "tokens_only")  # fmt: skip
    return {"label": data["label"].strip(), **{name: data[name] for name in names}}


def _grace_end(old: ApiKey | None) -> datetime | None:
    if old is None or old.status() != "active":
        return None
    return old.expires_at


def _show_once(
    request: HttpRequest, scope: Scope, key: ApiKey, plaintext: str, *, rolled: bool
) -> HttpResponse:
    response = render_page(
        request,
        scope,
        "dashboard/keys_created.html",
        {
            "key": key,
            "plaintext": plaintext,
            "rolled": rolled,
            "old_works_until": _grace_end(key.rolled_from),
        },
        section=SECTION,
    )
    response["Cache-Control"] = "no-store"
    return response


@workspace_page
def index(request: HttpRequest, scope: Scope) -> HttpResponse:
    now = timezone.now()
    rows = [
        {"key": key, "status": key.status(now)}
        for key in selectors.api_key_list(workspace=scope.workspace)
    ]
    return render_page(request, scope, "dashboard/keys.html", {"rows": rows}, section=SECTION)


@workspace_page
@require_http_methods(["GET", "POST"])
def create(request: HttpRequest, scope: Scope) -> HttpResponse:
    scope.require_key_manager()
    if signed_in_user(request).email_verified_at is None:  # the service refuses them too
        return render_page(request, scope, "dashboard/keys_verify.html", section=SECTION)
    form = KeyForm(request.POST or None, agents=_agent_choices(scope))
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        key, plaintext = services.api_key_create(
            actor=actor_for_request(request),
            workspace=scope.workspace,
            kind=data["kind"],
            scopes=data["scopes"],
            **_limits(data),
        )
        if key.kind == ApiKey.Kind.SECRET:
            return _show_once(request, scope, key, plaintext, rolled=False)
        messages.success(request, f"Publishable key {key.display} created.")
        return redirect("dashboard:keys", scope.workspace.pk)
    return render_page(request, scope, "dashboard/keys_new.html", {"form": form}, section=SECTION)


@workspace_page
@require_http_methods(["GET", "POST"])
def edit(request: HttpRequest, scope: Scope, key_id: int) -> HttpResponse:
    """A publishable key's limits (a secret key's scopes are changed by the REST API)."""
    scope.require_key_manager()
    key = selectors.api_key_get(workspace=scope.workspace, key_id=key_id)
    if key.kind != ApiKey.Kind.PUBLISHABLE or key.status() != "active":
        messages.error(request, f"Key {key.display}: only active publishable keys have settings.")
        return redirect("dashboard:keys", scope.workspace.pk)
    initial = {
        "label": key.label,
        "allowed_origins": "\n".join(key.allowed_origins),
        "allowed_agents": key.allowed_agents,
        "allow_inline_config": key.allow_inline_config,
        "allow_inline_tool_code": key.allow_inline_tool_code,
        "tokens_only": key.tokens_only,
    }
    form = KeyLimitsForm(request.POST or None, initial=initial, agents=_agent_choices(scope))
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        services.api_key_update(actor=actor_for_request(request), key=key, **_limits(data))
        messages.success(request, f"Key {key.display} saved.")
        return redirect("dashboard:keys", scope.workspace.pk)
    context = {"key": key, "form": form}
    return render_page(request, scope, "dashboard/keys_edit.html", context, section=SECTION)


@workspace_page
@require_http_methods(["GET", "POST"])
def roll(request: HttpRequest, scope: Scope, key_id: int) -> HttpResponse:
    scope.require_key_manager()
    if signed_in_user(request).email_verified_at is None:  # the service refuses them too
        return render_page(request, scope, "dashboard/keys_verify.html", section=SECTION)
    key = selectors.api_key_get(workspace=scope.workspace, key_id=key_id)
    if key.status() != "active":
        messages.error(
            request, f"Key {key.display} is {key.status()}; only active keys can be rolled."
        )
        return redirect("dashboard:keys", scope.workspace.pk)
    form = RollForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        grace = int(form.cleaned_data["grace"])
        expires_at = timezone.now() + timedelta(seconds=grace) if grace else None
        try:
            new_key, plaintext = services.api_key_roll(
                actor=actor_for_request(request), key=key, expires_at=expires_at
            )
        except services.KeyRejected as rejected:
            messages.error(request, f"Key {key.display} cannot be rolled: {rejected.reason}.")
            return redirect("dashboard:keys", scope.workspace.pk)
        if new_key.kind == ApiKey.Kind.SECRET:
            return _show_once(request, scope, new_key, plaintext, rolled=True)
        messages.success(request, f"Key {key.display} rolled; the new key is {new_key.display}.")
        return redirect("dashboard:keys", scope.workspace.pk)
    context = {"key": key, "form": form}
    return render_page(request, scope, "dashboard/keys_roll.html", context, section=SECTION)


@workspace_page
@require_http_methods(["GET", "POST"])
def revoke(request: HttpRequest, scope: Scope, key_id: int) -> HttpResponse:
    scope.require_key_manager()
    key = selectors.api_key_get(workspace=scope.workspace, key_id=key_id)

    def act() -> str:
        services.api_key_revoke(actor=actor_for_request(request), key=key)
        return f"Key {key.display} revoked. Requests using it are refused."

    context = {"key": key}
    return confirm_then(
        request, scope, "dashboard/keys_revoke.html", context, section=SECTION, act=act
    )


urlpatterns = [
    path("keys/", index, name="keys"),
    path("keys/new/", create, name="key-new"),
    path("keys/<id:key_id>/", edit, name="key-edit"),
    path("keys/<id:key_id>/roll/", roll, name="key-roll"),
    path("keys/<id:key_id>/revoke/", revoke, name="key-revoke"),
]
