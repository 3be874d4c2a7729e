"""The Sessions room: the workspace's sessions, filtered and paged, and one in detail.

The detail page shows what the session recorded: its transcript, its tool calls and, per
turn, a latency waterfall drawn as inline SVG from ``waterfall.py``'s geometry.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import path, re_path
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_POST

from core import parsers
from engine.protocol import ToolStatus
from frontend.dashboard.scope import Scope, render_page, workspace_page
from frontend.dashboard.waterfall import Waterfall, format_ms, waterfall_for
from knowledge_app import session_tool as knowledge_tool
from postcall_app import analysis
from realtime import control
from secrets_app.audit import actor_for_request
from sessions_app import recordings, selectors
from sessions_app.close_reasons import close_reason_words, ended_normally
from sessions_app.models import (
    Agent,
    Recording,
    Session,
    SessionAnalysis,
    ToolCallRecord,
    TranscriptEntry,
    TurnRecord,
)
from sessions_app.usage_figures import RECORD_FIELDS

PAGE_SIZE = 50
STARTED_WITHIN = {
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
TOOL_STATUS_BADGES: dict[str, str] = {
    ToolStatus.COMPLETED: "green",
    ToolStatus.FAILED: "red",
    ToolStatus.TIMED_OUT: "amber",
    ToolStatus.CANCELLED: "gray",
}


def close_reason(session: Session) -> tuple[str, str]:
    """(human words, badge colour) for how the session ended, or that it is live."""
    if session.ended_at is None:
        return "Live", "green"
    code = session.close_code
    return close_reason_words(code), "gray" if ended_normally(code) else "red"


def format_duration(elapsed: timedelta) -> str:
    seconds = max(0, round(elapsed.total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def agent_label(session: Session) -> str:
    return session.agent.name if session.agent is not None else "inline config"


@dataclass(frozen=True)
class SessionRow:
    session: Session
    agent: str
    duration: str  # "live" while it runs
    reason: str
    badge: str

    @classmethod
    def of(cls, session: Session) -> SessionRow:
        reason, badge = close_reason(session)
        ended = session.ended_at
        duration = "live" if ended is None else format_duration(ended - session.started_at)
        return cls(session, agent_label(session), duration, reason, badge)


# ---------------------------------------------------------------- the list


class SessionFilterForm(forms.Form):
    agent = forms.ChoiceField(required=False)
    status = forms.ChoiceField(
        required=False,
        choices=[
            ("", "Any status"),
            ("live", "Live"),
            ("ended", "Ended normally"),
            ("failed", "Refused or error"),
        ],
    )
    started = forms.ChoiceField(
        required=False,
        label="Started within",
        choices=[
            ("", "All time"),
            ("24h", "Last 24 hours"),
            ("7d", "Last 7 days"),
            ("30d", "Last 30 days"),
        ],
    )
    origin = forms.CharField(
        required=False,
        max_length=255,
        label="Origin contains",
        widget=forms.TextInput(attrs={"type": "search", "placeholder": "shop.example.com"}),
    )

    def __init__(self, data: Any, *, agents: list[Agent]) -> None:
        super().__init__(data)
        self._agents = {str(agent.pk): agent for agent in agents}
        select = self.fields["agent"]
        assert isinstance(select, forms.ChoiceField)
        select.choices = [
            ("", "Any agent"),
            (selectors.INLINE_CONFIG, "Inline config"),
            *((str(agent.pk), agent.name) for agent in agents),
        ]

    def filters(self) -> dict[str, Any]:
        """The valid filters as ``session_list`` takes them (an invalid one is left out)."""
        if not self.is_bound:
            return {}
        self.is_valid()
        data = self.cleaned_data
        filters: dict[str, Any] = {}
        if agent := data.get("agent"):
            filters["agent"] = self._agents.get(agent, agent)
        if status := data.get("status"):
            filters["status"] = status
        if started := data.get("started"):
            filters["started_after"] = timezone.now() - STARTED_WITHIN[started]
        if origin := (data.get("origin") or "").strip():
            filters["origin_contains"] = origin
        return filters


@workspace_page
def index(request: HttpRequest, scope: Scope) -> HttpResponse:
    control.sessions_sweep(workspace=scope.workspace)  # no record stays "Live" forever
    agents = list(selectors.agent_list(workspace=scope.workspace))
    form = SessionFilterForm(request.GET or None, agents=agents)
    filters = form.filters()
    sessions = selectors.session_list(workspace=scope.workspace, **filters)
    page = Paginator(sessions, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "form": form,
        "page": page,
        "rows": [SessionRow.of(session) for session in page],
        "filtered": bool(filters),
    }
    return render_page(
        request, scope, "dashboard/sessions.html", context, section="dashboard:sessions"
    )


# ---------------------------------------------------------------- one session


@dataclass(frozen=True)
class TurnView:
    record: TurnRecord
    metrics: dict[str, Any]
    chart: Waterfall | None

    @classmethod
    def of(cls, record: TurnRecord) -> TurnView:
        metrics = record.metrics if isinstance(record.metrics, dict) else {}
        return cls(record, metrics, waterfall_for(metrics, turn_id=record.turn_id))


@dataclass(frozen=True)
class ToolCallView:
    call: ToolCallRecord
    arguments: str
    result: str
    badge: str
    sources: list[dict[str, str]] = field(default_factory=list)  # a knowledge search's

    @property
    def duration(self) -> str:
        return "" if self.call.duration_ms is None else format_ms(self.call.duration_ms)


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def pretty_text(text: str) -> str:
    """JSON text indented for reading; anything else (a cut-off result) as it is."""
    try:
        return pretty_json(parsers.loads(text))
    except ValueError:
        return text


def _session(scope: Scope, session_id: str) -> Session:
    try:  # the wire spells session ids as 32 hex digits, the API with dashes: take both
        public_id = uuid.UUID(session_id)
    except ValueError:
        raise Http404("No such session.") from None
    return selectors.session_get(workspace=scope.workspace, public_id=str(public_id))


@workspace_page
@require_POST
def end(request: HttpRequest, scope: Scope, session_id: str) -> HttpResponse:
    scope.require_key_manager()
    session = _session(scope, session_id)
    if session.ended_at is None:
        control.session_end(session=session, actor=actor_for_request(request))
        messages.success(request, "The session was ended; its page was told why.")
    return redirect("dashboard:session", scope.workspace.pk, session.public_id)


@workspace_page
@require_POST
def analyse(request: HttpRequest, scope: Scope, session_id: str) -> HttpResponse:
    scope.require_key_manager()
    session = _session(scope, session_id)
    try:
        if session.ended_at is not None and analysis.analysis_request(session=session, rerun=True):
            messages.success(request, "The session is being analysed again.")
    except analysis.AnalysisBusy:
        messages.info(request, "An analysis of this session is already pending.")
    except analysis.AnalysisRefused as refused:
        messages.error(request, str(refused))
    return redirect("dashboard:session", scope.workspace.pk, session.public_id)


@dataclass(frozen=True)
class RecordingView:
    url: str  # signed, for RECORDING_URL_TTL_S
    recording: Recording


def _recording(scope: Scope, session: Session) -> RecordingView | None:
    recording = Recording.objects.filter(session=session, workspace=scope.workspace).first()
    if recording is None:
        return None
    url, _ = recordings.recording_url(recording=recording)
    return RecordingView(url=url, recording=recording)


def _timed(
    entries: list[TranscriptEntry], recording: RecordingView | None
) -> list[tuple[TranscriptEntry, float | None]]:
    """Each entry with its second on the recording's timeline (what the player follows)."""
    if recording is None:
        return [(entry, None) for entry in entries]
    start = recording.recording.started_at
    return [(e, max(0.0, round((e.created_at - start).total_seconds(), 2))) for e in entries]


@workspace_page
def detail(request: HttpRequest, scope: Scope, session_id: str) -> HttpResponse:
    control.sessions_sweep(workspace=scope.workspace)
    session = _session(scope, session_id)
    tool_calls = [
        ToolCallView(
            call,
            arguments=pretty_json(call.arguments),
            result=pretty_text(call.result),
            badge=TOOL_STATUS_BADGES.get(call.status, "gray"),
            sources=knowledge_tool.sources_in(call.name, call.result),
        )
        for call in session.tool_calls.all()
    ]
    recording = _recording(scope, session)
    context = {
        "session": session,
        "row": SessionRow.of(session),
        "recording": recording,
        "transcript": _timed(list(session.transcript.all()), recording),
        "tool_calls": tool_calls,
        "errors": session.errors.all(),
        "analysis": SessionAnalysis.objects.filter(
            session=session, workspace=scope.workspace
        ).first(),
        "turns": [TurnView.of(record) for record in session.turns.all()],
        "usage": {name: int((session.usage or {}).get(name, 0)) for name in RECORD_FIELDS},
    }
    response = render_page(
        request, scope, "dashboard/session_detail.html", context, section="dashboard:sessions"
    )
    # What was said, and a recording's bearer link: kept by no cache, the browser's included.
    add_never_cache_headers(response)
    return response


urlpatterns = [
    path("sessions/", index, name="sessions"),
    re_path(r"^sessions/(?P<session_id>[0-9a-fA-F-]{32,36})/$", detail, name="session"),
    re_path(r"^sessions/(?P<session_id>[0-9a-fA-F-]{32,36})/end/$", end, name="session-end"),
    re_path(
        r"^sessions/(?P<session_id>[0-9a-fA-F-]{32,36})/analyse/$",
        analyse,
        name="session-analyse",
    ),
]
