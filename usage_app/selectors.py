"""Reads of usage: a workspace's daily aggregates, per day or per agent, over a range."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Literal

from django.db.models import Max, Sum

from secrets_app.models import Workspace
from sessions_app.usage_figures import RECORD_FIELDS
from usage_app.models import UsageDaily

GroupBy = Literal["day", "agent"]
GROUP_BY: tuple[GroupBy, ...] = ("day", "agent")
RANGE_MAX_DAYS = 366
COUNTED = ("sessions", *RECORD_FIELDS)


@dataclass(frozen=True)
class UsageRow:
    """One day, or one agent (``agent`` None: sessions configured inline by the page)."""

    figures: dict[str, int]
    day: date | None = None
    agent: str | None = None  # slug, while the agent exists
    agent_name: str = ""

    @property
    def llm_tokens(self) -> int:
        return self.figures["prompt_tokens"] + self.figures["completion_tokens"]

    @property
    def tool_calls(self) -> int:
        return self.figures["server_tool_calls"] + self.figures["client_tool_calls"]

    @property
    def label(self) -> str:
        if self.day is not None:
            return self.day.isoformat()
        return self.agent_name or ("inline config" if self.agent is None else self.agent)

    def as_dict(self, group_by: GroupBy) -> dict[str, Any]:
        head: dict[str, Any] = (
            {"day": self.day.isoformat()}
            if group_by == "day" and self.day is not None
            else {"agent": self.agent, "agent_name": self.agent_name}
        )
        return {**head, **self.figures}


def _sums(rows: Any) -> Any:
    return rows.annotate(**{name: Sum(name) for name in COUNTED})


def _figures(values: dict[str, Any]) -> dict[str, int]:
    return {name: int(values.get(name) or 0) for name in COUNTED}


def usage_report(
    *, workspace: Workspace, start: date, end: date, group_by: GroupBy
) -> list[UsageRow]:
    """Per day (every day of the range, zeros included) or per agent (those with usage)."""
    rows = UsageDaily.objects.filter(workspace=workspace, day__gte=start, day__lte=end)
    if group_by == "day":
        found = {
            values["day"]: _figures(values) for values in _sums(rows.values("day").order_by("day"))
        }
        days = (start + timedelta(days=n) for n in range((end - start).days + 1))
        return [UsageRow(found.get(day) or _figures({}), day=day) for day in days]
    grouped = _sums(rows.values("agent_key").order_by("agent_key")).annotate(
        slug=Max("agent__slug"), current=Max("agent__name"), stored=Max("agent_name")
    )
    report = []
    for values in grouped:
        if values["agent_key"] == 0:
            name = "inline config"
        else:  # a deleted agent keeps the name it had
            name = values["current"] or f"{values['stored'] or 'an agent'} (deleted)"
        report.append(UsageRow(_figures(values), agent=values["slug"], agent_name=name))
    return report


def usage_total(rows: list[UsageRow]) -> dict[str, int]:
    return {name: sum(row.figures[name] for row in rows) for name in COUNTED}
