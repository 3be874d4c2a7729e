"""Retention (owners): how long the workspace keeps what its sessions said, zero retention
and redaction. Changes are audited by the service."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import path

from frontend.dashboard.scope import Scope, render_page, workspace_page
from postcall_app import retention
from secrets_app.audit import actor_for_request
from sessions_app.privacy import retention_policy


def _days(label: str, help_text: str) -> forms.IntegerField:
    return forms.IntegerField(
        label=label, help_text=help_text, min_value=1, max_value=retention.RETENTION_DAYS_MAX,
        required=False,
    )  # fmt: skip


class RetentionForm(forms.Form):
    transcripts_days = _days(
        "Transcripts (days)",
        "What the user and the agent said, provider error details, and stored webhook events "
        "carrying them. Empty: kept.",
    )
    tool_logs_days = _days(
        "Tool logs (days)",
        "Tool calls' arguments, results and errors, and console output. Empty: kept.",
    )
    analysis_days = _days("Post-call analyses (days)", "Empty: kept.")
    recordings_days = _days(
        "Recordings (days)", "Session recordings, deleted from their storage too. Empty: kept."
    )
    zero_retention = forms.BooleanField(
        label="Zero retention", required=False,
        help_text="Keep nothing said in any session from now on: only metadata and usage.",
    )  # fmt: skip
    redact_transcripts = forms.BooleanField(
        label="Redact transcripts", required=False,
        help_text="Mask phone numbers, e-mail addresses and card numbers in stored transcripts.",
    )  # fmt: skip


@workspace_page
def index(request: HttpRequest, scope: Scope) -> HttpResponse:
    scope.require_owner("change how long records are kept")
    policy = retention_policy(workspace=scope.workspace)
    initial = {name: getattr(policy, name) for name in retention.POLICY_FIELDS}
    form = RetentionForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        retention.retention_policy_update(
            workspace=scope.workspace, actor=actor_for_request(request), **form.cleaned_data
        )
        messages.success(request, "Retention saved.")
        return redirect("dashboard:retention", scope.workspace.pk)
    return render_page(
        request, scope, "dashboard/retention.html", {"form": form}, section="dashboard:retention"
    )


urlpatterns = [path("retention/", index, name="retention")]
