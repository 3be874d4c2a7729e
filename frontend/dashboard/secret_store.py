"""Secrets: list, create, replace, change access, delete.

Any member may add, replace and delete secrets; only owners and admins choose where a
value may be sent (its allowed hosts) and whether saved handlers may read it.

A value goes in and never comes out: the value inputs never render what was typed (not
even after an error), error reports mask it, and messages name only the secret.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import path
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods

from frontend.dashboard.keys import lines, readable
from frontend.dashboard.scope import Scope, confirm_then, render_page, workspace_page
from secrets_app import selectors, services
from secrets_app.audit import actor_for_request
from secrets_app.models import Secret
from secrets_app.validators import clean_hosts, validate_secret_name, validate_secret_value

SECTION = "dashboard:secrets"


def _value_field() -> forms.CharField:
    return forms.CharField(
        strip=False,
        # render_value=False: a value typed into a form that failed is not sent back.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only: after saving, nobody can read it here, not even you.",
    )


def _hosts_field() -> forms.CharField:
    return forms.CharField(
        required=False,
        label="Allowed hosts",
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "api.stripe.com"}),
        help_text=(
            "One host per line, like api.stripe.com or *.example.com. Tool code may send "
            "the value only to these hosts; empty means it is never sent anywhere."
        ),
    )


def _readable_field() -> forms.BooleanField:
    return forms.BooleanField(
        required=False,
        label="Readable by code",
        help_text=(
            "Off (recommended): tool code holds a reference, and the platform puts the "
            "value in only on its way to an allowed host. On: handlers saved by an owner or "
            "admin see the value itself, so you trust that code not to leak it."
        ),
    )


class HostsForm(forms.Form):
    allowed_hosts = _hosts_field()
    readable_by_code = _readable_field()

    def clean_allowed_hosts(self) -> list[str]:
        try:
            return clean_hosts(lines(self.cleaned_data["allowed_hosts"]))
        except ValidationError as error:
            raise ValidationError(readable(error)) from None


class ReplaceForm(HostsForm):
    value = _value_field()

    field_order = ["value", "allowed_hosts", "readable_by_code"]

    def __init__(self, *args: Any, scope: Scope, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scope = scope
        if not scope.can_read_secrets:  # access stays as an owner or admin set it
            del self.fields["allowed_hosts"]
            del self.fields["readable_by_code"]

    def access(self) -> dict[str, Any]:
        """The access fields this user may set, for ``secret_set``."""
        return {
            name: self.cleaned_data[name]
            for name in ("allowed_hosts", "readable_by_code")
            if name in self.fields
        }

    def clean_value(self) -> str:
        value: str = self.cleaned_data["value"]
        try:
            validate_secret_value(value)
        except ValidationError as error:
            raise ValidationError([f"The value {m}." for m in error.messages]) from None
        return value


class CreateForm(ReplaceForm):
    name = forms.CharField(
        max_length=64,
        widget=forms.TextInput(attrs={"autocomplete": "off", "placeholder": "STRIPE_KEY"}),
        help_text="Capitals, digits and _, starting with a letter. Tool code reads it as "
        "<code>ctx.secrets.NAME</code>.",
    )

    field_order = ["name", "value", "allowed_hosts", "readable_by_code"]

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"].strip()
        try:
            validate_secret_name(name)
        except ValidationError as error:
            raise ValidationError([f"The name {m}." for m in error.messages]) from None
        if selectors.secret_find(workspace=self.scope.workspace, name=name) is not None:
            raise ValidationError(f"A secret named {name} exists. Replace it from the list.")
        return name


@workspace_page
def index(request: HttpRequest, scope: Scope) -> HttpResponse:
    secrets = selectors.secret_list(workspace=scope.workspace)
    return render_page(
        request, scope, "dashboard/secrets.html", {"secrets": secrets}, section=SECTION
    )


@sensitive_post_parameters("value")
@workspace_page
@require_http_methods(["GET", "POST"])
def create(request: HttpRequest, scope: Scope) -> HttpResponse:
    form = CreateForm(request.POST or None, scope=scope)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            secret, _ = services.secret_set(
                actor=actor_for_request(request),
                workspace=scope.workspace,
                name=data["name"],
                value=data["value"],
                **form.access(),
            )
        except ValidationError as error:
            form.add_error("name", readable(error))
        else:
            messages.success(request, f"Secret {secret.name} saved.")
            return redirect("dashboard:secrets", scope.workspace.pk)
    return render_page(
        request, scope, "dashboard/secrets_new.html", {"form": form}, section=SECTION
    )


@sensitive_post_parameters("value")
@workspace_page
@require_http_methods(["GET", "POST"])
def replace(request: HttpRequest, scope: Scope, name: str) -> HttpResponse:
    secret = selectors.secret_get(workspace=scope.workspace, name=name)
    form = ReplaceForm(request.POST or None, initial=_access_initial(secret), scope=scope)
    if request.method == "POST" and form.is_valid():
        services.secret_set(
            actor=actor_for_request(request),
            workspace=scope.workspace,
            name=secret.name,
            value=form.cleaned_data["value"],
            **form.access(),
        )
        messages.success(request, f"Secret {secret.name} replaced.")
        return redirect("dashboard:secrets", scope.workspace.pk)
    context = {"secret": secret, "form": form}
    return render_page(request, scope, "dashboard/secrets_replace.html", context, section=SECTION)


def _access_initial(secret: Secret) -> dict[str, object]:
    return {
        "allowed_hosts": "\n".join(secret.allowed_hosts),
        "readable_by_code": secret.readable_by_code,
    }


@workspace_page
@require_http_methods(["GET", "POST"])
def hosts(request: HttpRequest, scope: Scope, name: str) -> HttpResponse:
    scope.require_secret_manager()
    secret = selectors.secret_get(workspace=scope.workspace, name=name)
    form = HostsForm(request.POST or None, initial=_access_initial(secret))
    if request.method == "POST" and form.is_valid():
        services.secret_update_hosts(
            actor=actor_for_request(request), secret=secret, **form.cleaned_data
        )
        messages.success(request, f"Access to {secret.name} updated; its value is unchanged.")
        return redirect("dashboard:secrets", scope.workspace.pk)
    context = {"secret": secret, "form": form}
    return render_page(request, scope, "dashboard/secrets_hosts.html", context, section=SECTION)


@workspace_page
@require_http_methods(["GET", "POST"])
def delete(request: HttpRequest, scope: Scope, name: str) -> HttpResponse:
    secret = selectors.secret_get(workspace=scope.workspace, name=name)

    def act() -> str:
        services.secret_delete(actor=actor_for_request(request), secret=secret)
        return f"Secret {secret.name} deleted."

    context = {"secret": secret}
    return confirm_then(
        request, scope, "dashboard/secrets_delete.html", context, section=SECTION, act=act
    )


urlpatterns = [
    path("secrets/", index, name="secrets"),
    path("secrets/new/", create, name="secret-new"),
    path("secrets/<str:name>/", replace, name="secret-replace"),
    path("secrets/<str:name>/hosts/", hosts, name="secret-hosts"),
    path("secrets/<str:name>/delete/", delete, name="secret-delete"),
]
