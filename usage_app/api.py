"""REST API: ``GET /api/v1/usage?from=&to=&group_by=day|agent``."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from secrets_app.authentication import request_workspace
from usage_app import api_examples as examples
from usage_app import quotas, selectors
from usage_app.models import QuotaAlert

DEFAULT_DAYS = 30
# No usage is older: an earlier day is a typo (and ``to=0001-01-01`` would leave no room for
# the default range before it).
FIRST_DAY = date(2000, 1, 1)
FROM_HELP = f"First day (UTC), YYYY-MM-DD, {FIRST_DAY} or later; default: 29 days before 'to'."


class UsageQuery(serializers.Serializer):  # type: ignore[type-arg]
    group_by = serializers.ChoiceField(choices=selectors.GROUP_BY, default="day")

    def get_fields(self) -> dict[str, serializers.Field]:  # type: ignore[type-arg]
        fields = super().get_fields()
        # "from" is a Python keyword, so these two cannot be declared as attributes.
        fields["from"] = serializers.DateField(required=False)
        fields["to"] = serializers.DateField(required=False)
        return fields

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        end = data.get("to") or timezone.now().date()
        for name in ("from", "to"):
            if name in data and data[name] < FIRST_DAY:
                raise serializers.ValidationError({name: [f"must be {FIRST_DAY} or later"]})
        start = data.get("from") or max(FIRST_DAY, end - timedelta(days=DEFAULT_DAYS - 1))
        if start > end:
            raise serializers.ValidationError({"from": ["must not be after 'to'"]})
        if (end - start).days + 1 > selectors.RANGE_MAX_DAYS:
            raise serializers.ValidationError(
                {"from": [f"the range is at most {selectors.RANGE_MAX_DAYS} days"]}
            )
        return {"start": start, "end": end, "group_by": data["group_by"]}


def usage_query(params: Any) -> dict[str, Any]:
    """The query string's ``from``/``to``/``group_by``, checked (400 naming the field)."""
    data = {name: params[name] for name in ("from", "to", "group_by") if params.get(name)}
    query = UsageQuery(data=data)
    query.is_valid(raise_exception=True)
    return dict(query.validated_data)


class UsageFiguresOutput(serializers.Serializer):  # type: ignore[type-arg]
    """What sessions consumed (audio and CPU in milliseconds)."""

    def get_fields(self) -> dict[str, serializers.Field]:  # type: ignore[type-arg]
        return {name: serializers.IntegerField() for name in selectors.COUNTED}


class UsageRowOutput(UsageFiguresOutput):
    """One day (``group_by=day``) or one agent (``group_by=agent``), and its figures."""

    def get_fields(self) -> dict[str, serializers.Field]:  # type: ignore[type-arg]
        return {
            "day": serializers.DateField(required=False, help_text="group_by=day: the UTC day."),
            "agent": serializers.CharField(
                required=False, allow_null=True,
                help_text="group_by=agent: its slug; null for inline config or a deleted agent.",
            ),
            "agent_name": serializers.CharField(required=False),
            **super().get_fields(),
        }  # fmt: skip


class QuotaOutput(serializers.Serializer):  # type: ignore[type-arg]
    metric = serializers.ChoiceField(choices=[metric.name for metric in quotas.METRICS])
    period = serializers.ChoiceField(choices=quotas.PERIODS)
    period_start = serializers.DateField()
    limit = serializers.IntegerField()
    used = serializers.FloatField()
    percent = serializers.IntegerField(help_text="Of the limit, at most 999.")
    level = serializers.ChoiceField(choices=["ok", *QuotaAlert.Level.values])


class UsageOutput(serializers.Serializer):  # type: ignore[type-arg]
    def get_fields(self) -> dict[str, serializers.Field]:  # type: ignore[type-arg]
        # "from" is a Python keyword, so the fields cannot be declared as attributes.
        return {
            "from": serializers.DateField(),
            "to": serializers.DateField(),
            "group_by": serializers.ChoiceField(choices=selectors.GROUP_BY),
            "rows": UsageRowOutput(many=True),
            "total": UsageFiguresOutput(),
            "quotas": QuotaOutput(many=True),
        }


@extend_schema(tags=["Usage"])
class UsageApi(APIView):
    scopes = {"GET": "usage:read"}

    @extend_schema(
        summary="Get usage figures and quotas",
        description="What the workspace's sessions consumed (LLM requests and tokens, audio "
        "sent to speech recognition, text-to-speech characters and audio, tool calls and "
        "their CPU, time on phone calls as `phone_call_ms`) from `from` to `to` (UTC days, "
        "at most 366; default: the last 30), per "
        "day (every day, zeros included) or per agent (`group_by=agent`; those with usage), "
        "with the range's `total` and the workspace's `quotas` (`level` `warning` from 80 %, "
        "`exceeded` from 100 %).",
        parameters=[
            OpenApiParameter("from", str, description=FROM_HELP),
            OpenApiParameter(
                "to",
                str,
                description=f"Last day (UTC), included, {FIRST_DAY} or later; default: today.",
            ),
            OpenApiParameter("group_by", str, enum=list(selectors.GROUP_BY)),
        ],
        responses=UsageOutput,
        examples=examples.USAGE,
    )
    def get(self, request: Request) -> Response:
        workspace = request_workspace(request)
        query = usage_query(request.query_params)
        start: date = query["start"]
        end: date = query["end"]
        rows = selectors.usage_report(
            workspace=workspace, start=start, end=end, group_by=query["group_by"]
        )
        return Response(
            {
                "from": start.isoformat(),
                "to": end.isoformat(),
                "group_by": query["group_by"],
                "rows": [row.as_dict(query["group_by"]) for row in rows],
                "total": selectors.usage_total(rows),
                "quotas": [s.as_dict() for s in quotas.quota_states(workspace_id=workspace.pk)],
            }
        )
