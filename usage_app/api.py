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
from usage_app import quotas, selectors

DEFAULT_DAYS = 30
FROM_HELP = "First day (UTC), YYYY-MM-DD; default: 29 days before 'to'."


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
        start = data.get("from") or end - timedelta(days=DEFAULT_DAYS - 1)
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


class UsageApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("from", str, description=FROM_HELP),
            OpenApiParameter("to", str, description="Last day (UTC), included; default: today."),
            OpenApiParameter("group_by", str, enum=list(selectors.GROUP_BY)),
        ],
        responses={200: dict},
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
