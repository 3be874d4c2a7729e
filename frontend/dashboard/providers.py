"""Providers: the workspace's own LLM connections and speech providers' keys.

Owners and admins add, replace, test and delete them; members see which exist. A key
goes in and never comes out: its input never renders what was typed, messages name only
the connection, and a test's words have the key masked.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import path
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST

from core import outbound
from engine.providers import registry
from engine.providers.spec import ProviderSpec
from frontend.dashboard.scope import Scope, confirm_then, render_page, workspace_page
from secrets_app import provider_credentials as credentials
from secrets_app.audit import actor_for_request
from secrets_app.models import ProviderCredential
from sessions_app import workspace_providers
from sessions_app.provider_check import provider_check

SECTION = "dashboard:providers"
Kind = ProviderCredential.Kind


def _key_field(*, required: bool, replacing: bool) -> forms.CharField:
    help_text = "Write-only: after saving, nobody can read it here, not even you."
    if replacing:
        help_text = (
            "Leave empty to keep the key you saved (a URL on another host needs it again). "
            + help_text
        )
    return forms.CharField(
        label="API key",
        required=required,
        error_messages={"required": "Enter the provider's API key."},
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=help_text,
    )


class LLMForm(forms.Form):
    name = forms.CharField(
        max_length=64,
        help_text="How agents choose it, like openai or local-ollama. The oldest connection "
        "is the workspace's default.",
    )
    base_url = forms.CharField(
        label="Base URL",
        max_length=500,
        widget=forms.TextInput(attrs={"placeholder": "https://api.openai.com/v1"}),
        help_text="An OpenAI-compatible chat completions endpoint: https://api.openai.com/v1, "
        "the AssemblyAI gateway https://llm-gateway.assemblyai.com/v1, Ollama "
        "http://localhost:11434/v1, vLLM.",
    )
    model = forms.CharField(
        max_length=100, widget=forms.TextInput(attrs={"placeholder": "gpt-4o-mini"})
    )

    def __init__(self, *args: Any, replacing: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["base_url"].help_text += " " + outbound.rule_in_words()
        self.fields["api_key"] = _key_field(required=False, replacing=replacing)
        self.fields["api_key"].help_text += " Ollama needs none."
        if replacing:
            self.fields["name"].disabled = True


class SpeechForm(forms.Form):
    def __init__(self, *args: Any, spec: ProviderSpec, replacing: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        url = spec.credential_url
        if url is not None:
            self.fields["url"] = forms.CharField(
                label=url.label,
                max_length=500,
                widget=forms.TextInput(attrs={"placeholder": url.placeholder}),
                help_text=outbound.rule_in_words(),
            )
        self.fields["api_key"] = _key_field(required=not replacing, replacing=replacing)


def _require_manager(scope: Scope) -> None:
    if not scope.can_manage_keys:
        raise PermissionDenied("Only owners and admins can manage provider accounts.")


def _put_errors(form: forms.Form, error: ValidationError) -> None:
    fields = {"base_url": "url"} if "url" in form.fields else {}
    for name, errors in error.message_dict.items():
        name = fields.get(name, name)
        form.add_error(name if name in form.fields else None, errors)


def _speech_rows(rows: list[ProviderCredential]) -> list[dict[str, Any]]:
    mine = {row.kind: row for row in rows if row.kind != Kind.LLM}
    return [
        {
            "kind": spec.name,
            "label": spec.credential_label,
            "credential": mine.get(spec.name),
            "platform": spec.platform_account(),
        }
        for spec in registry.credential_specs()
    ]


def _platform_llm() -> dict[str, str] | None:
    """The platform's model and host, as the ./dev.sh banner names them (never its key)."""
    platform = workspace_providers.platform_llm()  # LLM_BASE_URL, LLM_MODEL: the spec's settings
    if not platform:
        return None
    return {"model": platform["model"], "host": urlsplit(platform["base_url"]).hostname or ""}


@workspace_page
def index(request: HttpRequest, scope: Scope) -> HttpResponse:
    rows = list(credentials.provider_credential_list(workspace=scope.workspace))
    llms = [row for row in rows if row.kind == Kind.LLM]
    context = {
        "llms": llms,
        "speech": _speech_rows(rows),
        "platform_llm": _platform_llm(),
        "can_manage": scope.can_manage_keys,
    }
    return render_page(request, scope, "dashboard/providers.html", context, section=SECTION)


@sensitive_post_parameters("api_key")
@workspace_page
@require_http_methods(["GET", "POST"])
def llm_edit(request: HttpRequest, scope: Scope, credential_id: int | None = None) -> HttpResponse:
    _require_manager(scope)
    current = None
    if credential_id is not None:
        current = credentials.provider_credential_get(
            workspace=scope.workspace, credential_id=credential_id
        )
        if current.kind != Kind.LLM:
            raise Http404("No such LLM connection.")
    initial = (
        {"name": current.name, "base_url": current.base_url, "model": current.model}
        if current
        else None
    )
    form = LLMForm(request.POST or None, initial=initial, replacing=current is not None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            saved = credentials.provider_llm_set(
                workspace=scope.workspace,
                name=current.name if current else data["name"],
                base_url=data["base_url"],
                model=data["model"],
                api_key=data["api_key"] or None,
                actor=actor_for_request(request),
            )
        except ValidationError as error:
            _put_errors(form, error)
        else:
            messages.success(request, f"LLM connection {saved.name} saved. Test it below.")
            return redirect(SECTION, scope.workspace.pk)
    context = {"form": form, "current": current}
    return render_page(request, scope, "dashboard/providers_llm.html", context, section=SECTION)


@sensitive_post_parameters("api_key")
@workspace_page
@require_http_methods(["GET", "POST"])
def speech_edit(request: HttpRequest, scope: Scope, kind: str) -> HttpResponse:
    _require_manager(scope)
    try:
        spec = registry.credential_spec(kind)
    except registry.UnknownProvider:
        raise Http404("No such speech provider.") from None
    current = (
        credentials.provider_credential_list(workspace=scope.workspace).filter(kind=kind).first()
    )
    initial = {"url": current.base_url} if current else None
    form = SpeechForm(
        request.POST or None, initial=initial, spec=spec, replacing=current is not None
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            credentials.provider_speech_set(
                workspace=scope.workspace, kind=kind, api_key=data["api_key"] or None,
                url=data.get("url", ""), actor=actor_for_request(request),
            )  # fmt: skip
        except ValidationError as error:
            _put_errors(form, error)
        else:
            messages.success(request, f"{spec.credential_label}: saved. Test it below.")
            return redirect(SECTION, scope.workspace.pk)
    context = {"form": form, "current": current, "label": spec.credential_label}
    return render_page(request, scope, "dashboard/providers_speech.html", context, section=SECTION)


def _session_credential(scope: Scope, credential_id: int) -> ProviderCredential:
    """An LLM or speech account of the workspace's (embedding connections are the
    knowledge page's: ``frontend.dashboard.knowledge``)."""
    credential = credentials.provider_credential_get(
        workspace=scope.workspace, credential_id=credential_id
    )
    if credential.kind == Kind.EMBEDDING:
        raise Http404("No such provider account.")
    return credential


@workspace_page
@require_POST
def test(request: HttpRequest, scope: Scope, credential_id: int) -> HttpResponse:
    _require_manager(scope)
    credential = _session_credential(scope, credential_id)
    result = provider_check(credential=credential, actor=actor_for_request(request))
    (messages.success if result.ok else messages.error)(request, result.message)
    return redirect(SECTION, scope.workspace.pk)


@workspace_page
@require_http_methods(["GET", "POST"])
def delete(request: HttpRequest, scope: Scope, credential_id: int) -> HttpResponse:
    _require_manager(scope)
    credential = _session_credential(scope, credential_id)

    def act() -> str:
        credentials.provider_credential_delete(
            credential=credential, actor=actor_for_request(request)
        )
        return f"{credential.get_kind_display()} {credential.name} deleted."

    context = {"credential": credential}
    return confirm_then(
        request, scope, "dashboard/providers_delete.html", context, section=SECTION, act=act
    )


urlpatterns = [
    path("providers/", index, name="providers"),
    path("providers/llm/new/", llm_edit, name="provider-llm-new"),
    path("providers/llm/<int:credential_id>/", llm_edit, name="provider-llm"),
    path("providers/speech/<str:kind>/", speech_edit, name="provider-speech"),
    path("providers/<int:credential_id>/test/", test, name="provider-test"),
    path("providers/<int:credential_id>/delete/", delete, name="provider-delete"),
]
