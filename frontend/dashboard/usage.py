"""The Usage room: what the workspace consumed per day or per agent, its quotas, and CSV.

The figures come from the daily aggregates (``usage_app``), updated as sessions run; the
chart is inline SVG from ``usage_chart.py``'s geometry.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from datetime import date, timedelta

from django import forms
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.utils import timezone

from frontend.dashboard.scope import Scope, render_page, workspace_page
from frontend.dashboard.usage_chart import bar_chart
from secrets_app.audit import actor_for_request
from usage_app import quotas, selectors, services
from usage_app.selectors import COUNTED, UsageRow

SECTION = "dashboard:usage"
RANGES = {"7": 7, "30": 30, "90": 90}
DEFAULTS = {"days": "30", "group": "day", "metric": "llm_tokens"}
# Chart metric → (title, value of a row).
CHART_METRICS: dict[str, tuple[str, Callable[[UsageRow], float]]] = {
    "llm_tokens": ("LLM tokens", lambda row: row.llm_tokens),
    "voice_minutes": ("Voice minutes", lambda row: row.figures["stt_audio_ms"] / 60_000),
    "phone_minutes": ("Phone minutes", lambda row: row.figures["phone_call_ms"] / 60_000),
    "tts_characters": ("TTS characters", lambda row: row.figures["tts_characters"]),
    "tool_calls": ("Tool calls", lambda row: row.tool_calls),
    "sessions": ("Sessions", lambda row: row.figures["sessions"]),
}


class UsageForm(forms.Form):
    days = forms.ChoiceField(
        required=False,
        label="Range",
        choices=[("7", "Last 7 days"), ("30", "Last 30 days"), ("90", "Last 90 days")],
    )
    group = forms.ChoiceField(
        required=False, label="Group by", choices=[("day", "Day"), ("agent", "Agent")]
    )
    metric = forms.ChoiceField(
        required=False,
        label="Chart",
        choices=[(name, title) for name, (title, _) in CHART_METRICS.items()],
    )

    def choice(self, name: str, default: str) -> str:
        if not self.is_bound or not self.is_valid():
            return default
        return self.cleaned_data.get(name) or default


def _short(row: UsageRow) -> str:
    """A chart label: "Nov 22" for a day (the bar's title has the whole date)."""
    return f"{row.day:%b} {row.day.day}" if row.day is not None else row.label


def _report(scope: Scope, form: UsageForm) -> tuple[str, list[UsageRow], str, str]:
    days = RANGES[form.choice("days", DEFAULTS["days"])]
    group = form.choice("group", DEFAULTS["group"])
    end = timezone.now().date()
    start = end - timedelta(days=days - 1)
    rows = selectors.usage_report(
        workspace=scope.workspace,
        start=start,
        end=end,
        group_by=group,  # type: ignore[arg-type]  # a ChoiceField of GroupBy's values
    )
    return group, rows, start.isoformat(), end.isoformat()


@workspace_page
def index(request: HttpRequest, scope: Scope) -> HttpResponse:
    form = UsageForm(request.GET or None, initial=DEFAULTS)
    group, rows, start, end = _report(scope, form)
    metric = form.choice("metric", DEFAULTS["metric"])
    title, value_of = CHART_METRICS[metric]
    chart = bar_chart(
        [(_short(row), value_of(row)) for row in rows],
        title=title,
        titles=[row.label for row in rows],
    )
    total = selectors.usage_total(rows)
    context = {
        "form": form,
        "group": group,
        "rows": rows,
        "total": total,
        "total_tokens": total["prompt_tokens"] + total["completion_tokens"],
        "total_tool_calls": total["server_tool_calls"] + total["client_tool_calls"],
        "chart": chart,
        "start": start,
        "end": end,
        "quotas": quotas.quota_states(workspace_id=scope.workspace.pk),
        "query": request.GET.urlencode(),
    }
    return render_page(request, scope, "dashboard/usage.html", context, section=SECTION)


@workspace_page
def export(request: HttpRequest, scope: Scope) -> HttpResponse:
    """The table as CSV, one row per day or agent, every figure in its own column."""
    group, rows, start, end = _report(scope, UsageForm(request.GET or None, initial=DEFAULTS))
    services.usage_exported(
        workspace=scope.workspace, actor=actor_for_request(request),
        start=date.fromisoformat(start), end=date.fromisoformat(end), group_by=group,
    )  # fmt: skip
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="usage-{start}-{end}-{group}.csv"'
    writer = csv.writer(response, quoting=csv.QUOTE_NONNUMERIC)  # every text cell quoted
    head = ["day"] if group == "day" else ["agent", "agent_name"]
    writer.writerow([*head, *COUNTED])
    for row in rows:
        key = [row.label] if group == "day" else [row.agent or "", row.agent_name]
        writer.writerow([*(_cell(value) for value in key), *(row.figures[n] for n in COUNTED)])
    return response


# OWASP's CSV injection rules. A spreadsheet runs a cell that begins with one of these as a
# formula. A cell may also begin inside our text: where the list separator is ";" (much of
# Europe) a "," file is split at every ";", quotes notwithstanding (a quote only opens a
# field at its start), and a line break, a tab or a "," can start a cell in other readers.
FORMULA_STARTS = "=+-@\t\r"
SEPARATORS = ",;\t\r\n"
_CELL_STARTS = re.compile(f"(?<=[{re.escape(SEPARATORS)}])(?=[{re.escape(FORMULA_STARTS)}])")


def _cell(text: str) -> str:
    """A text cell every spreadsheet reads as text, in every locale: one that begins with a
    formula character or holds a separator is prefixed with ', and so is every place in it
    where a separator is followed by a formula character (the writer quotes every text cell)."""
    if not (text.startswith(tuple(FORMULA_STARTS)) or any(c in text for c in SEPARATORS)):
        return text
    return "'" + _CELL_STARTS.sub("'", text)


urlpatterns = [
    path("usage/", index, name="usage"),
    path("usage.csv", export, name="usage-csv"),
]
