"""REST API for saved agents, session records, live sessions and session tokens."""

from __future__ import annotations

import re
import uuid
from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from platform_site.pagination import SessionPages
from platform_site.serializers import StrictSerializer, django_errors_as_drf
from secrets_app.audit import actor_for_request
from secrets_app.authentication import request_workspace
from secrets_app.validators import AGENT_SLUG
from sessions_app import control, protocol, selectors, services
from sessions_app.models import Agent, Session
from sessions_app.orchestrator.usage import USAGE_FIELDS
from sessions_app.providers import registry


class AgentOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = Agent
        fields = [
            "id", "name", "slug", "instructions", "greeting", "voice", "mode", "llm_model",
            "llm_provider", "stt_provider", "tts_provider", "vocabulary", "empty_reply",
            "idle_timeout_s", "max_session_s", "llm_fallbacks", "tts_fallbacks", "tools",
            "created_at", "updated_at",
        ]  # fmt: skip


class LLMFallbackInput(StrictSerializer):
    connection = serializers.CharField(
        max_length=64,
        required=False,
        allow_blank=True,
        default="",
        help_text="One of the workspace's LLM connections, by name; blank: its default.",
    )
    model = serializers.CharField(
        max_length=100,
        required=False,
        allow_blank=True,
        default="",
        help_text="Blank: the connection's model.",
    )


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
    idle_timeout_s = serializers.IntegerField(
        required=False, allow_null=True, min_value=5, max_value=24 * 3600,
        help_text="Seconds without speech, text or a tool result before the session ends "
        "(null: SESSION_IDLE_TIMEOUT_S).",
    )  # fmt: skip
    max_session_s = serializers.IntegerField(
        required=False, allow_null=True, min_value=10, max_value=24 * 3600,
        help_text="Longest session in seconds (null: SESSION_MAX_DURATION_S).",
    )  # fmt: skip
    llm_provider = serializers.CharField(
        max_length=64,
        required=False,
        allow_blank=True,
        help_text="One of the workspace's LLM connections, by name; blank: its default.",
    )
    # Choices set per request: the scripted fakes only where ALLOW_FAKE_PROVIDERS is on.
    stt_provider = serializers.ChoiceField(choices=[], required=False, allow_blank=True)
    tts_provider = serializers.ChoiceField(choices=[], required=False, allow_blank=True)
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
    llm_fallbacks = serializers.ListField(
        child=LLMFallbackInput(),
        max_length=services.FALLBACKS_MAX,
        required=False,
        help_text="LLMs tried in order when the agent's own fails before answering.",
    )
    tts_fallbacks = serializers.ListField(
        child=serializers.ChoiceField(choices=registry.platform_names("tts")),
        max_length=services.FALLBACKS_MAX,
        required=False,
        help_text="Text-to-speech providers tried in order when the agent's own fails.",
    )
    tools = serializers.ListField(child=serializers.JSONField(), required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field, kind in registry.SPEECH_FIELDS:
            choice = self.fields[field]
            assert isinstance(choice, serializers.ChoiceField)
            choice.choices = registry.names(kind, choosable=True)


# Secret keys are made by owners and admins only: handlers saved with one are theirs.
SECRET_KEYS_READ_SECRETS = True
AGENTS_SCOPE = dict.fromkeys(("GET", "POST", "PUT", "PATCH", "DELETE"), "agents")


class AgentListCreateApi(APIView):
    scopes = AGENTS_SCOPE

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
                actor=actor_for_request(request),
                workspace=request_workspace(request),
                reads_secrets=SECRET_KEYS_READ_SECRETS,
                **data.validated_data,
            )
        return Response(AgentOutput(agent).data, status=status.HTTP_201_CREATED)


class AgentDetailApi(APIView):
    scopes = AGENTS_SCOPE

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
                actor=actor_for_request(request),
                agent=agent,
                reads_secrets=SECRET_KEYS_READ_SECRETS,
                **fields,
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
        services.agent_delete(actor=actor_for_request(request), agent=self._agent(request, slug))
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
    agent: serializers.SlugRelatedField[Agent] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )
    live = serializers.SerializerMethodField()

    def get_live(self, session: Session) -> bool:
        return session.ended_at is None

    class Meta:
        model = Session
        fields = [
            "id", "agent", "origin", "end_user", "mode", "started_at", "ended_at", "close_code",
            "turn_count", "tool_call_count", "live",
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


class SessionPageOutput(serializers.Serializer):  # type: ignore[type-arg]
    next = serializers.URLField(allow_null=True, help_text="The next (older) page, if any.")
    previous = serializers.URLField(allow_null=True)
    results = SessionOutput(many=True)


class SessionListApi(APIView):
    scopes = {"GET": "sessions:read"}
    paginator_class = SessionPages

    @extend_schema(
        operation_id="sessions_list",
        parameters=[
            OpenApiParameter("live", bool, description="true: only live sessions"),
            OpenApiParameter("cursor", str, description="from `next` or `previous`"),
        ],
        responses=SessionPageOutput,
    )
    def get(self, request: Request) -> Response:
        workspace = request_workspace(request)
        live = request.query_params.get("live", "").lower() in {"true", "1"}
        control.sessions_sweep(workspace=workspace)  # no record stays live forever
        sessions = selectors.session_list(workspace=workspace, status="live" if live else None)
        paginator = self.paginator_class()
        page = paginator.paginate_queryset(sessions, request, view=self)
        return paginator.get_paginated_response(SessionOutput(page, many=True).data)


class SessionDetailApi(APIView):
    scopes = {"GET": "sessions:read"}

    @extend_schema(responses=SessionDetailOutput)
    def get(self, request: Request, session_id: uuid.UUID) -> Response:
        session = selectors.session_get(
            workspace=request_workspace(request), public_id=str(session_id)
        )
        return Response(SessionDetailOutput(session).data)


class SessionEndApi(APIView):
    scopes = {"POST": "sessions:write"}

    @extend_schema(
        request=None,
        responses=SessionOutput,
        description="End a live session: its page gets `error` `session_ended` and close "
        "4009. Ending an ended session changes nothing.",
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        session = selectors.session_get(
            workspace=request_workspace(request), public_id=str(session_id)
        )
        session = control.session_end(session=session, actor=actor_for_request(request))
        return Response(SessionOutput(session).data)


# ---------------------------------------------------------------- session tokens


class SessionTokenInput(StrictSerializer):
    agent = serializers.RegexField(AGENT_SLUG, max_length=64, help_text="The agent's slug.")
    variables = serializers.DictField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        required=False,
        help_text="Fixed for the session: the page cannot change them.",
    )
    end_user = serializers.CharField(
        max_length=200, required=False, allow_blank=True,
        help_text="Your label for the person (kept on the session record).",
    )  # fmt: skip
    ttl_s = serializers.IntegerField(
        required=False, min_value=5, max_value=3600,
        help_text="Seconds the token can be used to connect (default SESSION_TOKEN_TTL_S, 60).",
    )  # fmt: skip


class SessionTokenOutput(serializers.Serializer):  # type: ignore[type-arg]
    token = serializers.CharField(help_text="Single use: connect with ?token=…")
    expires_at = serializers.DateTimeField()
    agent = serializers.CharField()


class SessionTokenApi(APIView):
    scopes = {"POST": "session_tokens"}

    @extend_schema(request=SessionTokenInput, responses={201: SessionTokenOutput})
    def post(self, request: Request) -> Response:
        data = SessionTokenInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        workspace = request_workspace(request)
        agent = selectors.agent_find(workspace=workspace, slug=values["agent"])
        if agent is None:
            raise serializers.ValidationError({"agent": ["no agent with this slug"]})
        with django_errors_as_drf():
            token, plaintext = services.session_token_create(
                workspace=workspace,
                agent=agent,
                created_by_key=request.auth,  # type: ignore[arg-type]  # an ApiKey: see authentication
                variables=values.get("variables") or {},
                end_user=values.get("end_user", ""),
                ttl_s=values.get("ttl_s") or settings.SESSION_TOKEN_TTL_S,
            )
        body = {"token": plaintext, "expires_at": token.expires_at, "agent": agent.slug}
        response = Response(SessionTokenOutput(body).data, status=status.HTTP_201_CREATED)
        response["Cache-Control"] = "no-store"
        return response
