"""Phone: the workspace's carrier accounts and the numbers its agents answer.

Owners and admins add and delete them, place calls and set what an agent's calls do when
an answering machine picks up; members see them. Each number shows the voice webhook URL
to paste into the carrier's console (built from ``PUBLIC_URL``); the latest calls show
their direction, status, who answered and length.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import path
from django.views.decorators.http import require_http_methods

from frontend.dashboard.scope import Scope, confirm_then, render_page, workspace_page
from secrets_app.audit import actor_for_request
from secrets_app.services import KeyRejected
from sessions_app.selectors import agent_list
from telephony_app import links, outbound, selectors, services
from telephony_app.carrier_rest import CarrierError
from telephony_app.models import CarrierAccount, MachineAction

SECTION = "dashboard:phone"
CALLS_SHOWN = 50


class AccountForm(forms.Form):
    carrier = forms.ChoiceField(choices=CarrierAccount.Carrier.choices)
    name = forms.CharField(max_length=64, help_text="Your name for the account.")
    account_sid = forms.CharField(
        label="Twilio Account SID", max_length=34, required=False,
        help_text="Twilio only: AC followed by 32 hex digits (Twilio console, Account info).",
    )  # fmt: skip
    public_key = forms.CharField(
        label="Telnyx public key", max_length=64, required=False,
        help_text="Telnyx only: the portal's Ed25519 public key, for webhook signatures.",
    )  # fmt: skip
    connection_id = forms.CharField(
        label="Telnyx Call Control application id", max_length=64, required=False,
        help_text="Telnyx only, to place calls: the id of a Call Control application "
        "(Voice → Programmable Voice).",
    )  # fmt: skip
    credential = forms.CharField(
        label="Auth token or API key", max_length=512, strip=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Twilio's auth token or Telnyx's API key: sealed, never shown again.",
    )  # fmt: skip


class NumberForm(forms.Form):
    account = forms.ChoiceField(label="Carrier account")
    number = forms.CharField(max_length=32, help_text="E.164, like +14155550123.")
    agent = forms.ChoiceField(label="Answered by")
    label = forms.CharField(max_length=100, required=False)

    def __init__(self, *args: Any, scope: Scope, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        accounts = selectors.carrier_account_list(workspace=scope.workspace)
        self.fields["account"].choices = [(a.name, str(a)) for a in accounts]  # type: ignore[attr-defined]
        agents = agent_list(workspace=scope.workspace)
        self.fields["agent"].choices = [(a.slug, a.name) for a in agents]  # type: ignore[attr-defined]


class CallForm(forms.Form):
    from_number = forms.ChoiceField(label="From")
    to = forms.CharField(max_length=32, help_text="The number to ring, E.164 (+447700900123).")
    agent = forms.ChoiceField(label="Agent", required=False)
    variables = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Optional, one name=value a line: {{name}} in the agent's instructions.",
    )  # fmt: skip

    def __init__(self, *args: Any, scope: Scope, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        numbers = selectors.phone_number_list(workspace=scope.workspace)
        self.fields["from_number"].choices = [  # type: ignore[attr-defined]
            (phone.number, f"{phone.number} ({phone.agent.name})") for phone in numbers
        ]
        agents = agent_list(workspace=scope.workspace)
        self.fields["agent"].choices = [  # type: ignore[attr-defined]
            ("", "The number's agent"),
            *((a.slug, a.name) for a in agents),
        ]

    def clean_variables(self) -> dict[str, str]:
        variables = {}
        for line in self.cleaned_data.get("variables", "").splitlines():
            if not line.strip():
                continue
            name, equals, value = line.partition("=")
            if not equals or not name.strip():
                raise ValidationError("one name=value a line")
            variables[name.strip()] = value.strip()
        return variables


class CallSettingsForm(forms.Form):
    machine_detection = forms.ChoiceField(
        label="When an answering machine picks up", choices=MachineAction.choices
    )
    voicemail_message = forms.CharField(
        max_length=1000, required=False, widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Spoken after the beep by the carrier's voice, then the call hangs up.",
    )  # fmt: skip


def _require_manager(scope: Scope) -> None:
    if not scope.can_manage_keys:
        raise PermissionDenied("Only owners and admins can manage phone numbers.")


def _put_errors(form: forms.Form, error: ValidationError) -> None:
    if not hasattr(error, "error_dict"):
        form.add_error(None, error)
        return
    for name, errors in error.message_dict.items():
        form.add_error(name if name in form.fields else None, errors)


@workspace_page
def index(request: HttpRequest, scope: Scope) -> HttpResponse:
    phones = list(selectors.phone_number_list(workspace=scope.workspace))
    numbers = [
        {
            "phone": phone,
            "webhook_url": links.voice_webhook_url(phone, links.platform_base(request)),
        }
        for phone in phones
    ]
    calls = selectors.phone_call_list(workspace=scope.workspace)[:CALLS_SHOWN]
    agents = {phone.agent for phone in phones}
    context = {
        "agents": [
            {"agent": agent, "settings": services.agent_call_settings(agent)}
            for agent in sorted(agents, key=lambda agent: agent.name)
        ],
        "accounts": list(selectors.carrier_account_list(workspace=scope.workspace)),
        "numbers": numbers,
        "calls": [{"call": call, "seconds": call.duration_ms // 1000} for call in calls],
        "can_manage": scope.can_manage_keys,
    }
    return render_page(request, scope, "dashboard/phone.html", context, section=SECTION)


def _form_page(
    request: HttpRequest, scope: Scope, form: forms.Form, title: str, save: Any,
    done: str = "{} saved.",
) -> HttpResponse:  # fmt: skip
    if request.method == "POST" and form.is_valid():
        try:
            saved = save(form.cleaned_data)
        except ValidationError as error:
            _put_errors(form, error)
        except (KeyRejected, outbound.CallsThrottled, outbound.QuotaExceeded) as refused:
            form.add_error(None, getattr(refused, "reason", None) or str(refused))
        except CarrierError as error:  # fixed words: never the carrier's own
            form.add_error(None, str(error))
        else:
            messages.success(request, done.format(saved))
            return redirect(SECTION, scope.workspace.pk)
    context = {"form": form, "title": title}
    return render_page(request, scope, "dashboard/phone_form.html", context, section=SECTION)


@workspace_page
@require_http_methods(["GET", "POST"])
def account_new(request: HttpRequest, scope: Scope) -> HttpResponse:
    _require_manager(scope)

    def save(data: dict[str, Any]) -> Any:
        return services.carrier_account_create(
            workspace=scope.workspace, actor=actor_for_request(request), **data
        )

    form = AccountForm(request.POST or None)
    return _form_page(request, scope, form, "Add a carrier account", save)


@workspace_page
@require_http_methods(["GET", "POST"])
def number_new(request: HttpRequest, scope: Scope) -> HttpResponse:
    _require_manager(scope)

    def save(data: dict[str, Any]) -> Any:
        return services.phone_number_create(
            workspace=scope.workspace, actor=actor_for_request(request), **data
        )

    form = NumberForm(request.POST or None, scope=scope)
    return _form_page(request, scope, form, "Add a phone number", save)


@workspace_page
@require_http_methods(["GET", "POST"])
def number_delete(request: HttpRequest, scope: Scope, number_id: int) -> HttpResponse:
    _require_manager(scope)
    phone = selectors.phone_number_get(workspace=scope.workspace, number_id=number_id)

    def act() -> str:
        services.phone_number_delete(phone=phone, actor=actor_for_request(request))
        return f"{phone.number} deleted; it answers no more calls."

    context = {"what": phone.number, "consequence": "It answers no more calls; live calls end."}
    return confirm_then(
        request, scope, "dashboard/phone_delete.html", context, section=SECTION, act=act
    )


@workspace_page
@require_http_methods(["GET", "POST"])
def account_delete(request: HttpRequest, scope: Scope, account_id: int) -> HttpResponse:
    _require_manager(scope)
    account = selectors.carrier_account_get(workspace=scope.workspace, account_id=account_id)
    if request.method == "POST" and account.numbers.exists():
        messages.error(request, "Delete the account's numbers first.")
        return redirect(SECTION, scope.workspace.pk)

    def act() -> str:
        services.carrier_account_delete(account=account, actor=actor_for_request(request))
        return f"{account} deleted."

    context = {"what": str(account), "consequence": "Its credential is deleted with it."}
    return confirm_then(
        request, scope, "dashboard/phone_delete.html", context, section=SECTION, act=act
    )


@workspace_page
@require_http_methods(["GET", "POST"])
def call_new(request: HttpRequest, scope: Scope) -> HttpResponse:
    _require_manager(scope)

    def save(data: dict[str, Any]) -> Any:
        return outbound.outbound_call_place(
            workspace=scope.workspace, from_number=data["from_number"], to=data["to"],
            agent=data["agent"] or None, variables=data["variables"],
            base_url=links.platform_base(request), actor=actor_for_request(request),
        )  # fmt: skip

    form = CallForm(request.POST or None, scope=scope)
    done = "Calling {0.caller}: the call's status shows below."
    return _form_page(request, scope, form, "Place a call", save, done)


@workspace_page
@require_http_methods(["GET", "POST"])
def call_settings(request: HttpRequest, scope: Scope, slug: str) -> HttpResponse:
    _require_manager(scope)
    agent = selectors.agent_get(workspace=scope.workspace, slug=slug)

    def save(data: dict[str, Any]) -> Any:
        services.agent_call_settings_update(agent=agent, actor=actor_for_request(request), **data)
        return f"{agent.name}'s call settings"

    current = services.agent_call_settings(agent)
    initial = {
        "machine_detection": current.machine_detection,
        "voicemail_message": current.voicemail_message,
    }
    form = CallSettingsForm(request.POST or None, initial=initial)
    return _form_page(request, scope, form, f"{agent.name}: answering machines", save)


urlpatterns = [
    path("phone/", index, name="phone"),
    path("phone/accounts/new/", account_new, name="phone-account-new"),
    path("phone/accounts/<int:account_id>/delete/", account_delete, name="phone-account-delete"),
    path("phone/numbers/new/", number_new, name="phone-number-new"),
    path("phone/numbers/<int:number_id>/delete/", number_delete, name="phone-number-delete"),
    path("phone/calls/new/", call_new, name="phone-call-new"),
    path("phone/agents/<slug:slug>/call-settings/", call_settings, name="phone-call-settings"),
]
