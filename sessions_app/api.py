"""REST API for saved agents."""

from __future__ import annotations

import re
import uuid
from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from platform_site.serializers import StrictSerializer, django_errors_as_drf
from secrets_app.authentication import request_workspace
from secrets_app.validators import AGENT_SLUG
from sessions_app import protocol, selectors, services
from sessions_app.models import Agent, Session
from sessions_app.orchestrator.usage import USAGE_FIELDS
from sessions_app.providers import registry


class AgentOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = Agent
        fields = [
            "id", "name", "slug", "instructions", "greeting", "voice", "mode", "llm_model",
            "llm_provider", "stt_provider", "tts_provider", "vocabulary", "empty_reply", "tools",
            "created_at", "updated_at",
        ]  # fmt: skip


class AgentInput(StrictSerializer):
    name = serializers.CharField(max_length=100)
    slug = serializers.RegexField(
        AGENT_SLUG,
        max_length=64,
        error_messages={"invalid": "use lowercase letters, digits and '-' (like order-status)"},
    )
    instructions = serializers.CharField(
        max_length=16 * 1024, required=False, allow_blank=True, trim_whitespace=False
    )
    greeting = serializers.CharField(max_length=1024, required=False, allow_blank=True)
    voice = serializers.CharField(max_length=64, required=False, allow_blank=True)
    mode = serializers.ChoiceField(choices=Agent.Mode.choices, required=False)
    llm_model = serializers.CharField(max_length=100, required=False, allow_blank=True)
    llm_provider = serializers.CharField(
        max_length=64,
        required=False,
        allow_blank=True,
        help_text="One of the workspace's LLM connections, by name; blank: its default.",
    )
    stt_provider = serializers.ChoiceField(
        choices=registry.names("stt"), required=False, allow_blank=True
    )
    tts_provider = serializers.ChoiceField(
        choices=registry.names("tts"), required=False, allow_blank=True
    )
    vocabulary = serializers.ListField(
        child=serializers.CharField(max_length=protocol.VOCABULARY_TERM_MAX),
        max_length=protocol.VOCABULARY_MAX,
        required=False,
        help_text="Words users are expected to say (names, code identifiers): recognition hints.",
    )
    empty_reply = serializers.CharField(
        max_length=protocol.EMPTY_REPLY_MAX,
        required=False,
        allow_blank=True,
        help_text="Said when the LLM's reply is empty. Blank: the platform's sentence.",
    )
    tools = serializers.ListField(child=serializers.JSONField(), required=False)


# Secret keys are made by owners and admins only: handlers saved with one are theirs.
SECRET_KEYS_READ_SECRETS = True


class AgentListCreateApi(APIView):
    @extend_schema(responses=AgentOutput(many=True))
    def get(self, request: Request) -> Response:
        agents = selectors.agent_list(workspace=request_workspace(request))
        return Response(AgentOutput(agents, many=True).data)

    @extend_schema(request=AgentInput, responses={201: AgentOutput})
    def post(self, request: Request) -> Response:
        data = AgentInput(data=request.data)
        data.is_valid(raise_exception=True)
        with django_errors_as_drf("tools"):
            agent = services.agent_create(
                workspace=request_workspace(request),
                reads_secrets=SECRET_KEYS_READ_SECRETS,
                **data.validated_data,
            )
        return Response(AgentOutput(agent).data, status=status.HTTP_201_CREATED)


class AgentDetailApi(APIView):
    def _agent(self, request: Request, slug: str) -> Agent:
        return selectors.agent_get(workspace=request_workspace(request), slug=slug)

    @extend_schema(responses=AgentOutput)
    def get(self, request: Request, slug: str) -> Response:
        return Response(AgentOutput(self._agent(request, slug)).data)

    def _update(self, request: Request, slug: str, *, partial: bool) -> Response:
        agent = self._agent(request, slug)
        data = AgentInput(data=request.data, partial=partial)
        data.is_valid(raise_exception=True)
        fields: dict[str, Any] = dict(data.validated_data)
        with django_errors_as_drf("tools"):
            agent = services.agent_update(
                agent=agent, reads_secrets=SECRET_KEYS_READ_SECRETS, **fields
            )
        return Response(AgentOutput(agent).data)

    @extend_schema(request=AgentInput, responses=AgentOutput)
    def put(self, request: Request, slug: str) -> Response:
        return self._update(request, slug, partial=False)

    @extend_schema(request=AgentInput, responses=AgentOutput)
    def patch(self, request: Request, slug: str) -> Response:
        return self._update(request, slug, partial=True)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, slug: str) -> Response:
        services.agent_delete(agent=self._agent(request, slug))
        return Response(status=status.HTTP_204_NO_CONTENT)


# ---------------------------------------------------------------- session records

_CAMEL = re.compile(r"[A-Z]")


def _snake(name: str) -> str:
    return _CAMEL.sub(lambda match: "_" + match[0].lower(), name)


def _snake_keys(value: Any) -> Any:
    """The metrics event's keys in the API's spelling, nested ones too (``timeline``)."""
    if isinstance(value, dict):
        return {_snake(key): _snake_keys(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_snake_keys(item) for item in value]
    return value


class TranscriptOutput(serializers.Serializer):  # type: ignore[type-arg]
    role = serializers.CharField()
    text = serializers.CharField()
    created_at = serializers.DateTimeField()


class ToolCallOutput(serializers.Serializer):  # type: ignore[type-arg]
    call_id = serializers.CharField()
    name = serializers.CharField()
    arguments = serializers.JSONField()
    status = serializers.CharField()
    result = serializers.CharField()
    error = serializers.CharField()
    duration_ms = serializers.FloatField(allow_null=True)
    created_at = serializers.DateTimeField()


class SessionOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    id = serializers.UUIDField(source="public_id")
    agent = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Session
        fields = [
            "id", "agent", "origin", "mode", "started_at", "ended_at", "close_code",
            "turn_count", "tool_call_count",
        ]  # fmt: skip


class SessionDetailOutput(SessionOutput):
    transcript = TranscriptOutput(many=True)
    turns = serializers.SerializerMethodField()
    tool_calls = ToolCallOutput(many=True)
    usage = serializers.SerializerMethodField()

    class Meta(SessionOutput.Meta):
        fields = [*SessionOutput.Meta.fields, "transcript", "turns", "tool_calls", "usage"]

    @extend_schema_field(serializers.DictField(child=serializers.IntegerField()))
    def get_usage(self, session: Session) -> dict[str, int]:
        """What the session consumed (audio in milliseconds; ``estimated_llm_requests``:
        requests whose provider reported no token counts, so they were estimated)."""
        return {name: int((session.usage or {}).get(name, 0)) for name in USAGE_FIELDS}

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_turns(self, session: Session) -> list[dict[str, Any]]:
        """Per-turn latency figures (milliseconds; null where a stage did not happen)."""
        return [_snake_keys(t.metrics) for t in session.turns.all()]


class SessionPagination(CursorPagination):
    ordering = "-started_at"
    page_size = 50


class SessionListApi(APIView):
    @extend_schema(responses=SessionOutput(many=True))
    def get(self, request: Request) -> Response:
        paginator = SessionPagination()
        sessions = selectors.session_list(workspace=request_workspace(request))
        page = paginator.paginate_queryset(sessions, request, view=self)
        return paginator.get_paginated_response(SessionOutput(page, many=True).data)


class SessionDetailApi(APIView):
    @extend_schema(responses=SessionDetailOutput)
    def get(self, request: Request, session_id: uuid.UUID) -> Response:
        session = selectors.session_get(
            workspace=request_workspace(request), public_id=str(session_id)
        )
        return Response(SessionDetailOutput(session).data)
