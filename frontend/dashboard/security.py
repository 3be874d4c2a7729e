"""The account's security page: two-factor login (TOTP) on or off, email verification."""

from __future__ import annotations

import segno
from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods

from frontend.dashboard.scope import signed_in_user
from secrets_app import accounts


class CodeForm(forms.Form):
    code = forms.CharField(
        max_length=12,
        label="Code from your authenticator app",
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "inputmode": "numeric"}),
    )


def _qr_svg(url: str) -> str:
    # segno writes the SVG from the otpauth URL alone: nothing user-controlled gets in raw.
    return mark_safe(segno.make(url, error="m").svg_inline(scale=4, border=2))  # noqa: S308


@login_required
@require_http_methods(["GET", "POST"])
def index(request: HttpRequest) -> HttpResponse:
    user = signed_in_user(request)
    enabled = accounts.totp_enabled(user=user)
    form = CodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            if enabled:
                accounts.totp_disable(user=user, code=form.cleaned_data["code"])
                messages.success(request, "Two-factor login is off.")
            else:
                accounts.totp_confirm(user=user, code=form.cleaned_data["code"])
                messages.success(request, "Two-factor login is on: log-ins now ask for a code.")
            return redirect("dashboard:security")
        except ValidationError as error:
            form.add_error("code", error)
    context: dict[str, object] = {
        "enabled": enabled,
        "form": form,
        "verified": user.email_verified_at,
    }
    if not enabled:
        setup = accounts.totp_setup(user=user)
        context.update(secret=setup.secret, qr=_qr_svg(setup.url))
    response = render(request, "dashboard/security.html", context)
    response["Cache-Control"] = "no-store"  # the page shows the authenticator's secret
    return response


urlpatterns = [path("account/security/", index, name="security")]
