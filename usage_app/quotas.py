"""Quotas: per workspace, per UTC day and calendar month, of LLM tokens, voice minutes and
tool calls. None by default; platform admins set them (Django admin), owners see them.

At 80 % an owner is told (the dashboard's banner, a ``quota.warning`` webhook); at 100 %
new sessions are refused with ``quota_exceeded`` and a running session is told and ends
after its current turn. Each alert is raised once per quota and period.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone

from usage_app.models import QuotaAlert, UsageDaily, WorkspaceQuota

WARNING_RATIO = 0.8


@dataclass(frozen=True)
class Metric:
    name: str
    label: str  # "LLM tokens"
    unit: str  # how one is written: "tokens", "min", "calls"
    sums: tuple[str, ...]  # UsageDaily columns added up
    scale: float = 1.0  # used = sum / scale


METRICS = (
    Metric("llm_tokens", "LLM tokens", "tokens", ("prompt_tokens", "completion_tokens")),
    Metric("voice_minutes", "voice minutes", "min", ("stt_audio_ms",), scale=60_000.0),
    Metric("tool_calls", "tool calls", "calls", ("server_tool_calls", "client_tool_calls")),
)
PERIODS = ("day", "month")


@dataclass(frozen=True)
class QuotaState:
    metric: Metric
    period: str  # day | month
    period_start: date
    limit: int
    used: float

    @property
    def ratio(self) -> float:
        return self.used / self.limit if self.limit else float("inf")

    @property
    def percent(self) -> int:
        return min(999, int(self.ratio * 100))

    @property
    def level(self) -> str:
        if self.ratio >= 1:
            return QuotaAlert.Level.EXCEEDED
        if self.ratio >= WARNING_RATIO:
            return QuotaAlert.Level.WARNING
        return "ok"

    @property
    def when(self) -> str:
        return "today (UTC)" if self.period == "day" else "this month (UTC)"

    def figures(self) -> str:
        used = f"{self.used:.1f}" if self.metric.scale != 1 else f"{int(self.used)}"
        return f"{used} of {self.limit} {self.metric.unit}"

    def words(self) -> str:
        """'LLM tokens today (UTC): 110 of 100 tokens (110 %)'."""
        return f"{self.metric.label} {self.when}: {self.figures()} ({self.percent} %)"

    def as_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric.name,
            "period": self.period,
            "period_start": self.period_start.isoformat(),
            "limit": self.limit,
            "used": round(self.used, 3),
            "percent": self.percent,
            "level": self.level,
        }


def _period_starts(now: datetime) -> dict[str, date]:
    today = now.date()
    return {"day": today, "month": today.replace(day=1)}


_COLUMNS = sorted({column for metric in METRICS for column in metric.sums})


def _sums(workspace_id: int, since: date) -> dict[str, int]:
    """Every column a quota reads, summed since ``since``: one query per period."""
    sums = UsageDaily.objects.filter(workspace_id=workspace_id, day__gte=since).aggregate(
        **{column: Sum(column) for column in _COLUMNS}
    )
    return {column: value or 0 for column, value in sums.items()}


def quota_states(*, workspace_id: int, now: datetime | None = None) -> list[QuotaState]:
    """Every quota the workspace has, with what it used in the current period."""
    quota = WorkspaceQuota.objects.filter(workspace_id=workspace_id).first()
    if quota is None:
        return []
    starts = _period_starts(now or timezone.now())
    limits = [
        (metric, period, getattr(quota, f"{metric.name}_per_{period}"))
        for metric in METRICS
        for period in PERIODS
    ]
    limits = [(metric, period, limit) for metric, period, limit in limits if limit is not None]
    sums = {period: _sums(workspace_id, starts[period]) for period in {p for _, p, _ in limits}}
    return [
        QuotaState(
            metric,
            period,
            starts[period],
            limit,
            used=sum(sums[period][c] for c in metric.sums) / metric.scale,
        )
        for metric, period, limit in limits
    ]


def exceeded_message(states: list[QuotaState]) -> str | None:
    """Words for the first quota used up (None: none is)."""
    for state in states:
        if state.level == QuotaAlert.Level.EXCEEDED:
            again = "tomorrow" if state.period == "day" else "next month"
            return (
                f"This workspace has used its quota of {state.metric.label} "
                f"{state.when}: {state.figures()}. Conversations can start again {again}, "
                "or when the platform's administrators raise the quota."
            )
    return None


AlertSink = Callable[[QuotaAlert, QuotaState], None]


def quota_alerts_raise(*, workspace_id: int, on_new_alert: AlertSink) -> list[QuotaState]:
    """Check the workspace's quotas after new usage; each warning or exceeded quota is
    alerted once per period (``on_new_alert``). Returns the states checked."""
    states = quota_states(workspace_id=workspace_id)
    for state in states:
        if state.level == "ok":
            continue
        alert = _new_alert(workspace_id, state)
        if alert is not None:
            on_new_alert(alert, state)
    return states


def _new_alert(workspace_id: int, state: QuotaState) -> QuotaAlert | None:
    try:
        with transaction.atomic():
            return QuotaAlert.objects.create(
                workspace_id=workspace_id,
                metric=state.metric.name,
                period=state.period,
                period_start=state.period_start,
                level=state.level,
                used=int(state.used),
                limit=state.limit,
            )
    except IntegrityError:  # raised before, maybe by another process at the same moment
        return None
