"""REST API: rerun a session's analysis; read and change the workspace's retention."""

from __future__ import annotations

import uuid

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.serializers import StrictSerializer
from postcall_app import analysis, retention
from postcall_app import api_examples as examples
from secrets_app.audit import actor_for_request
from secrets_app.authentication import request_workspace
from sessions_app import selectors
from sessions_app.api import AnalysisOutput
from sessions_app.models import RetentionPolicy
from sessions_app.privacy import retention_policy


class AnalysisRefused(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "analysis_refused"


@extend_schema(tags=["Sessions"])
class SessionAnalysisApi(APIView):
    scopes = {"POST": "sessions:write"}

    @extend_schema(
        summary="Analyse a session again",
        description="Runs the post-call analysis of an ended session again, with its agent's "
        "current settings (docs: Post-call analysis). Answers 202 with the pending analysis; "
        "`GET /api/v1/sessions/{id}` shows the result, and `analysis.completed` is sent when "
        "it is ready. 409 while the session is live, while an analysis of it is pending, or "
        "when its agent asks for no analysis, or when the session's analysis was rerun "
        "`ANALYSIS_MAX_RERUNS` times; 429 past the workspace's `ANALYSIS_RERUNS_PER_HOUR`. "
        "The request counts in the workspace's usage.",
        request=None,
        responses={202: AnalysisOutput},
        examples=examples.ANALYSIS_PENDING,
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        session = selectors.session_get(
            workspace=request_workspace(request), public_id=str(session_id)
        )
        if session.ended_at is None:
            raise AnalysisRefused("The session is still live.")
        try:
            pending = analysis.analysis_request(session=session, rerun=True)
        except analysis.AnalysisBusy:
            raise AnalysisRefused("An analysis of this session is already pending.") from None
        except analysis.AnalysisRefused as refused:
            if refused.wait_s is not None:
                raise exceptions.Throttled(refused.wait_s, str(refused)) from None
            raise AnalysisRefused(str(refused)) from None
        if pending is None:
            raise AnalysisRefused("The session's agent asks for no analysis.")
        return Response(AnalysisOutput(pending).data, status=status.HTTP_202_ACCEPTED)


def _days(help_text: str) -> serializers.IntegerField:
    return serializers.IntegerField(
        min_value=1, max_value=retention.RETENTION_DAYS_MAX, allow_null=True, required=False,
        help_text=help_text,
    )  # fmt: skip


class RetentionSerializer(StrictSerializer):
    transcripts_days = _days(
        "Days transcripts (and webhook events carrying them) are kept; null: kept."
    )
    tool_logs_days = _days(
        "Days tool calls (arguments, results) and console logs are kept; null: kept."
    )
    analysis_days = _days("Days post-call analyses are kept; null: kept.")
    recordings_days = _days(
        "Days session recordings are kept (deleted from their storage too); null: kept."
    )
    zero_retention = serializers.BooleanField(
        required=False, help_text="Keep nothing said in any session: only metadata and usage."
    )
    redact_transcripts = serializers.BooleanField(
        required=False,
        help_text="Mask e-mail addresses, card numbers and phone numbers in stored transcripts.",
    )


def _shown(policy: RetentionPolicy) -> dict[str, object]:
    return {name: getattr(policy, name) for name in retention.POLICY_FIELDS}


@extend_schema(tags=["Retention"])
class RetentionApi(APIView):
    scopes = {"GET": "retention", "PATCH": "retention"}

    @extend_schema(
        summary="Get the workspace's retention",
        description="How long session records are kept, zero retention and redaction.",
        responses=RetentionSerializer,
        examples=examples.RETENTION,
    )
    def get(self, request: Request) -> Response:
        return Response(_shown(retention_policy(workspace=request_workspace(request))))

    @extend_schema(
        summary="Change the workspace's retention",
        description="Only the fields sent change; the change is in the audit log "
        "(`retention.updated`). A shorter period applies at the next purge (hourly by "
        "default). Zero retention and redaction apply to sessions that start afterwards.",
        request=RetentionSerializer,
        responses=RetentionSerializer,
        examples=examples.RETENTION_UPDATE,
    )
    def patch(self, request: Request) -> Response:
        data = RetentionSerializer(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        policy = retention.retention_policy_update(
            workspace=request_workspace(request),
            actor=actor_for_request(request),
            **data.validated_data,
        )
        return Response(_shown(policy))
