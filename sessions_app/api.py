"""REST API for saved agents, session records, live sessions and session tokens."""

from __future__ import annotations

import re
import uuid
from typing import Any

from django.conf import settings
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.pagination import SessionPages
from core.serializers import StrictSerializer, django_errors_as_drf
from engine import protocol
from engine.providers import languages, registry
from secrets_app.audit import actor_for_request
from secrets_app.authentication import request_workspace
from secrets_app.scopes import grants as scope_grants
from secrets_app.validators import AGENT_SLUG
from sessions_app import api_examples as examples
from sessions_app import recordings, selectors, services, versions
from sessions_app.agent_warnings import agent_warnings
from sessions_app.models import Agent, Recording, Session, SessionAnalysis
from sessions_app.session_control import session_control
from sessions_app.usage_figures import RECORD_FIELDS


class AgentOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    published_version = serializers.IntegerField(
        source="published_version.number", allow_null=True, read_only=True,
        help_text="The number of the version new sessions get (docs/versions.md).",
    )  # fmt: skip

    class Meta:
        model = Agent
        fields = [
            "id", "name", "slug", "instructions", "greeting", "voice", "mode", "llm_model",
            "llm_provider", "stt_provider", "tts_provider", "vocabulary", "empty_reply",
            "language", "idle_timeout_s", "max_session_s", "llm_fallbacks", "tts_fallbacks",
            "tools", "zero_retention", "record_audio", "analysis", "tool_filler",
            "tool_filler_after_ms", "preemptive_generation",
            "knowledge_timeout_ms", "drafts", "require_tests", "published_version", "created_at",
            "updated_at",
        ]  # fmt: skip


class AgentWarningOutput(serializers.Serializer):  # type: ignore[type-arg]
    field = serializers.CharField(help_text='The field it is about, like "tools[0].handler".')
    message = serializers.CharField()


class AgentDetailOutput(AgentOutput):
    """One agent, with what it needs that the workspace does not have yet."""

    warnings = serializers.SerializerMethodField(
        help_text="Saved anyway: secrets its handlers read that the workspace does not have, "
        "a speech provider without a key, no language model at all."
    )

    class Meta(AgentOutput.Meta):
        fields = [*AgentOutput.Meta.fields, "warnings"]

    @extend_schema_field(AgentWarningOutput(many=True))
    def get_warnings(self, agent: Agent) -> list[dict[str, str]]:
        return [warning.as_dict() for warning in agent_warnings(agent=agent)]


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
    language = serializers.ChoiceField(
        choices=["", *languages.CHOICES],
        required=False,
        allow_blank=True,
        help_text='An ISO 639-1 code ("es"), "detect" (the caller\'s) or blank (English); '
        "the agent's speech providers must hear and speak it.",
    )
    empty_reply = serializers.CharField(
        max_length=protocol.EMPTY_REPLY_MAX,
        required=False,
        allow_blank=True,
        help_text="Said when the LLM's reply is empty. Blank: the platform's sentence.",
    )
    tool_filler = serializers.CharField(
        max_length=200, required=False, allow_blank=True,
        help_text="Said once while tools are slow to answer. Blank: "
        '"One moment, let me check that."',
    )  # fmt: skip
    tool_filler_after_ms = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=60_000,
        help_text="After how long the filler is said (null: 1500; 0: never).",
    )  # fmt: skip
    knowledge_timeout_ms = serializers.IntegerField(
        required=False, allow_null=True, min_value=100, max_value=60_000,
        help_text="How long a knowledge search may take (null: 10000).",
    )  # fmt: skip
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
    zero_retention = serializers.BooleanField(
        required=False,
        help_text="Keep nothing said in this agent's sessions: only metadata and usage.",
    )
    record_audio = serializers.BooleanField(
        required=False,
        help_text="Record both sides of its sessions' audio, encrypted (never under zero "
        "retention); part of the version.",
    )
    preemptive_generation = serializers.BooleanField(
        required=False,
        help_text="Start the reply, held back, when the user has probably finished speaking, "
        "and send it at once if they have (faster; spends LLM tokens on pauses that were not "
        "the end). Default on; part of the version.",
    )
    analysis = serializers.JSONField(
        required=False,
        help_text='Post-call analysis: {"summary": true, "criteria": [{"name", "description"}], '
        '"fields": [{"name", "type", "description"}]}; {} for none.',
    )
    drafts = serializers.BooleanField(
        required=False,
        help_text="On: saves change the draft only, and sessions get it once it is published "
        "(POST …/publish). Off (the default): every save publishes at once.",
    )
    require_tests = serializers.BooleanField(
        required=False, help_text="Publish only a draft whose tests passed (turns drafts on)."
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field, kind in registry.SPEECH_FIELDS:
            choice = self.fields[field]
            assert isinstance(choice, serializers.ChoiceField)
            choice.choices = registry.names(kind, choosable=True)


# Secret keys are made by owners and admins only: handlers saved with one are theirs.
SECRET_KEYS_READ_SECRETS = True
AGENTS_SCOPE = dict.fromkeys(("GET", "POST", "PUT", "PATCH", "DELETE"), "agents")


AGENT_FIELDS_HELP = (
    "`slug` is what pages and session tokens name the agent by (lowercase letters, digits "
    "and `-`); `instructions` are the LLM's system prompt; in it and in `greeting`, "
    "`{{name}}` is filled from the session's variables. `voice` must be one of the "
    "text-to-speech provider's voices when it has a fixed list. A tool with a JavaScript "
    "`handler` is a server tool, run on the platform in the sandbox; one with `client: true` "
    "runs in the page. Every handler is checked when saved (parsed, never run); a refusal "
    "names its field, like `tools[0].handler`."
)


@extend_schema(tags=["Agents"])
class AgentListCreateApi(APIView):
    scopes = AGENTS_SCOPE

    @extend_schema(
        summary="List agents",
        description="The workspace's saved agents, with their settings and tools.",
        responses=AgentOutput(many=True),
        examples=examples.AGENT_LIST,
    )
    def get(self, request: Request) -> Response:
        agents = selectors.agent_list(workspace=request_workspace(request))
        return Response(AgentOutput(agents, many=True).data)

    @extend_schema(
        summary="Create an agent",
        description=f"A saved agent: `name` and `slug` are needed, the rest has defaults. "
        f"{AGENT_FIELDS_HELP} Handlers saved with a secret key may read the secrets marked "
        "readable by code.",
        request=AgentInput,
        responses={201: AgentDetailOutput},
        examples=examples.AGENT_CREATE,
    )
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
        return Response(AgentDetailOutput(agent).data, status=status.HTTP_201_CREATED)


def _versioning_change_allowed(request: Request, agent: Agent, fields: dict[str, Any]) -> None:
    """Switching ``drafts`` or ``require_tests`` decides what gets published: it needs the
    ``versions`` scope, like publishing does."""
    changed = [name for name in services.VERSIONING_FIELDS
               if name in fields and fields[name] != getattr(agent, name)]  # fmt: skip
    key_scopes = getattr(request.auth, "scopes", [])
    if changed and not scope_grants(key_scopes, "versions"):
        raise exceptions.PermissionDenied(
            f"changing {' and '.join(changed)} needs the scope 'versions'; create a key "
            "with it in the dashboard",
            code="missing_scope",
        )


@extend_schema(tags=["Agents"])
class AgentDetailApi(APIView):
    scopes = AGENTS_SCOPE

    def _agent(self, request: Request, slug: str) -> Agent:
        return selectors.agent_get(workspace=request_workspace(request), slug=slug)

    @extend_schema(
        summary="Get an agent",
        description="One agent of the workspace, by its slug.",
        responses=AgentDetailOutput,
        examples=examples.AGENT_DETAIL,
    )
    def get(self, request: Request, slug: str) -> Response:
        return Response(AgentDetailOutput(self._agent(request, slug)).data)

    def _update(self, request: Request, slug: str, *, partial: bool) -> Response:
        agent = self._agent(request, slug)
        data = AgentInput(data=request.data, partial=partial)
        data.is_valid(raise_exception=True)
        fields: dict[str, Any] = dict(data.validated_data)
        _versioning_change_allowed(request, agent, fields)
        with django_errors_as_drf("tools"):
            agent = services.agent_update(
                actor=actor_for_request(request),
                agent=agent,
                reads_secrets=SECRET_KEYS_READ_SECRETS,
                **fields,
            )
        return Response(AgentDetailOutput(agent).data)

    @extend_schema(
        summary="Update an agent (name and slug given)",
        description="Like PATCH, but `name` and `slug` must be sent; fields left out keep "
        "their values. A new `slug` renames the agent for pages and tokens. "
        f"{AGENT_FIELDS_HELP}",
        request=AgentInput,
        responses=AgentDetailOutput,
        examples=examples.AGENT_REPLACE,
    )
    def put(self, request: Request, slug: str) -> Response:
        return self._update(request, slug, partial=False)

    @extend_schema(
        summary="Change some of an agent's settings",
        description="Only the fields sent change. `tools`, when sent, replaces the whole "
        "list; a handler whose code did not change keeps its pin and its right to read "
        f"secrets. {AGENT_FIELDS_HELP}",
        request=AgentInput,
        responses=AgentDetailOutput,
        examples=examples.AGENT_UPDATE,
    )
    def patch(self, request: Request, slug: str) -> Response:
        return self._update(request, slug, partial=True)

    @extend_schema(
        summary="Delete an agent",
        description="The agent and its tools. Its session records stay (their `agent` "
        "becomes null); session tokens minted for it and not yet used stop working. An "
        "agent that answers phone numbers is not deleted (409 `agent_in_use`): move or "
        "remove its numbers first.",
        responses={204: None, 409: OpenApiResponse(description="the agent answers phone numbers")},
    )
    def delete(self, request: Request, slug: str) -> Response:
        try:
            services.agent_delete(
                actor=actor_for_request(request), agent=self._agent(request, slug)
            )
        except services.AgentInUse as in_use:
            raise AgentInUseConflict(str(in_use)) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class AgentInUseConflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "agent_in_use"


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


class AnalysisOutput(serializers.Serializer):  # type: ignore[type-arg]
    status = serializers.CharField(help_text="pending, completed, failed or skipped.")
    summary = serializers.CharField()
    criteria = serializers.ListField(
        child=serializers.DictField(), help_text="[{name, result, reason}]; result is "
        "success, failure or unknown."
    )  # fmt: skip
    error = serializers.CharField(help_text="Why it failed or was skipped.")
    requested_at = serializers.DateTimeField()
    completed_at = serializers.DateTimeField(allow_null=True)

    def get_fields(self) -> dict[str, serializers.Field]:  # type: ignore[type-arg]
        fields = super().get_fields()
        # "data" would shadow the serializer's own ``data`` if declared as an attribute.
        fields["data"] = serializers.DictField(
            help_text="The extracted fields, by name (null: not said)."
        )
        return fields


class SessionOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    id = serializers.UUIDField(source="public_id")
    agent: serializers.SlugRelatedField[Agent] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )
    live = serializers.SerializerMethodField()
    agent_version = serializers.IntegerField(
        source="agent_version.number", allow_null=True, read_only=True,
        help_text="The number of the agent's version that served the session.",
    )  # fmt: skip

    def get_live(self, session: Session) -> bool:
        return session.ended_at is None

    class Meta:
        model = Session
        fields = [
            "id", "agent", "agent_version", "origin", "end_user", "mode", "started_at",
            "ended_at", "close_code", "turn_count", "tool_call_count", "live",
        ]  # fmt: skip


class RecordingOutput(serializers.Serializer):  # type: ignore[type-arg]
    url = serializers.CharField(
        help_text="Plays the stereo WAV (left: the caller, right: the agent) until "
        "`expires_at`; `?download=1` saves it. Signed: anyone holding it may play it then."
    )
    expires_at = serializers.DateTimeField()
    duration_ms = serializers.IntegerField()
    size_bytes = serializers.IntegerField()
    truncated = serializers.BooleanField(help_text="It reached the longest recording kept.")
    started_at = serializers.DateTimeField(help_text="Its time 0 (transcript timestamps).")


class SessionDetailOutput(SessionOutput):
    transcript = TranscriptOutput(many=True)
    turns = serializers.SerializerMethodField()
    tool_calls = ToolCallOutput(many=True)
    usage = serializers.SerializerMethodField()
    analysis = serializers.SerializerMethodField()
    recording = serializers.SerializerMethodField()

    class Meta(SessionOutput.Meta):
        fields = [
            *SessionOutput.Meta.fields, "zero_retention", "transcript", "turns", "tool_calls",
            "usage", "analysis", "recording",
        ]  # fmt: skip

    @extend_schema_field(RecordingOutput(allow_null=True))
    def get_recording(self, session: Session) -> dict[str, Any] | None:
        """The session's recording, with a signed URL that plays it for a few minutes."""
        recording = Recording.objects.filter(
            session=session, workspace_id=session.workspace_id
        ).first()
        if recording is None:
            return None
        path, expires_at = recordings.recording_url(recording=recording)
        request = self.context.get("request")
        url = request.build_absolute_uri(path) if request is not None else path
        return dict(
            RecordingOutput(
                {"url": url, "expires_at": expires_at, "duration_ms": recording.duration_ms,
                 "size_bytes": recording.size_bytes, "truncated": recording.truncated,
                 "started_at": recording.started_at}
            ).data
        )  # fmt: skip

    @extend_schema_field(AnalysisOutput(allow_null=True))
    def get_analysis(self, session: Session) -> dict[str, Any] | None:
        """The post-call analysis, when the session's agent asks for one."""
        analysis = SessionAnalysis.objects.filter(
            session=session, workspace_id=session.workspace_id
        ).first()
        return None if analysis is None else dict(AnalysisOutput(analysis).data)

    @extend_schema_field(serializers.DictField(child=serializers.IntegerField()))
    def get_usage(self, session: Session) -> dict[str, int]:
        """What the session consumed (audio in milliseconds; ``estimated_llm_requests``:
        requests whose provider reported no token counts, so they were estimated)."""
        return {name: int((session.usage or {}).get(name, 0)) for name in RECORD_FIELDS}

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_turns(self, session: Session) -> list[dict[str, Any]]:
        """Per-turn latency figures (milliseconds; null where a stage did not happen)."""
        return [_snake_keys(t.metrics) for t in session.turns.all()]


class SessionPageOutput(serializers.Serializer):  # type: ignore[type-arg]
    next = serializers.URLField(allow_null=True, help_text="The next (older) page, if any.")
    previous = serializers.URLField(allow_null=True)
    results = SessionOutput(many=True)


@extend_schema(tags=["Sessions"])
class SessionListApi(APIView):
    scopes = {"GET": "sessions:read"}
    paginator_class = SessionPages

    @extend_schema(
        summary="List sessions",
        description="The workspace's session records, newest first, in pages of 50 (`next` "
        "leads to older ones); `live=true`: only sessions still running. A session whose "
        "process is gone is marked ended here, so no record stays live forever.",
        operation_id="sessions_list",
        parameters=[
            OpenApiParameter("live", bool, description="true: only live sessions"),
            OpenApiParameter("cursor", str, description="from `next` or `previous`"),
        ],
        responses=SessionPageOutput,
        examples=examples.SESSION_PAGE,
    )
    def get(self, request: Request) -> Response:
        workspace = request_workspace(request)
        live = request.query_params.get("live", "").lower() in {"true", "1"}
        session_control().sessions_sweep(workspace=workspace)  # no record stays live forever
        sessions = selectors.session_list(workspace=workspace, status="live" if live else None)
        paginator = self.paginator_class()
        page = paginator.paginate_queryset(sessions, request, view=self)
        return paginator.get_paginated_response(SessionOutput(page, many=True).data)


@extend_schema(tags=["Sessions"])
class SessionDetailApi(APIView):
    scopes = {"GET": "sessions:read"}

    @extend_schema(
        summary="Get a session with its transcript",
        description="The record of one session: `transcript` (what the user and the agent "
        "said, in order), `turns` (each turn's latencies in milliseconds, `null` where a "
        "stage did not happen, its `timeline` and what it consumed: the realtime `metrics` "
        "event, in snake_case), `tool_calls` (arguments, status, result or error, duration; "
        "secrets scrubbed) and `usage` (the whole session's).",
        responses=SessionDetailOutput,
        examples=examples.SESSION_DETAIL,
    )
    def get(self, request: Request, session_id: uuid.UUID) -> Response:
        session = selectors.session_get(
            workspace=request_workspace(request), public_id=str(session_id)
        )
        return Response(SessionDetailOutput(session, context={"request": request}).data)


@extend_schema(tags=["Sessions"])
class SessionEndApi(APIView):
    scopes = {"POST": "sessions:write"}

    @extend_schema(
        summary="End a live session",
        description="End a live session: its page gets `error` `session_ended` and close "
        "4009, and it cannot be resumed. Ending an ended session changes nothing. The end is "
        "in the audit log (`session.ended`).",
        request=None,
        responses=SessionOutput,
        examples=examples.SESSION_END,
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        session = selectors.session_get(
            workspace=request_workspace(request), public_id=str(session_id)
        )
        session = session_control().session_end(session=session, actor=actor_for_request(request))
        return Response(SessionOutput(session).data)


# ---------------------------------------------------------------- session tokens


class SessionTokenInput(StrictSerializer):
    agent = serializers.RegexField(AGENT_SLUG, max_length=64, help_text="The agent's slug.")
    variables = serializers.DictField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        required=False,
        help_text="Fixed for the session: the page cannot change them.",
    )
    page_variables = serializers.ListField(
        child=serializers.CharField(max_length=64),
        required=False,
        help_text="Names of the variables the page may set itself (in `configure` or "
        "`context`); none by default. A name fixed in `variables` cannot be one.",
    )
    end_user = serializers.CharField(
        max_length=200, required=False, allow_blank=True,
        help_text="Your label for the person (kept on the session record).",
    )  # fmt: skip
    origin = serializers.CharField(
        max_length=300, required=False, allow_blank=True,
        help_text="The page origin (scheme://host[:port]) that may connect with the token; "
        "blank: any. A resumed session keeps its origin either way.",
    )  # fmt: skip
    agent_version = serializers.IntegerField(
        required=False, allow_null=True, min_value=1,
        help_text="Pin the session to this version of the agent (default: the published one).",
    )  # fmt: skip
    ttl_s = serializers.IntegerField(
        required=False, min_value=5, max_value=settings.SESSION_TOKEN_TTL_MAX_S,
        help_text="Seconds the token can be used to connect (default SESSION_TOKEN_TTL_S, 60).",
    )  # fmt: skip


class SessionTokenOutput(serializers.Serializer):  # type: ignore[type-arg]
    token = serializers.CharField(help_text="Single use: connect with ?token=…")
    expires_at = serializers.DateTimeField()
    agent = serializers.CharField()


@extend_schema(tags=["Session tokens"])
class SessionTokenApi(APIView):
    scopes = {"POST": "session_tokens"}

    @extend_schema(
        summary="Mint a session token",
        description="A single-use token for one session of a saved agent, for a page that "
        "holds no publishable key: your server mints one per session with its secret key and "
        "hands it to the page, which connects with `?token=…` within `ttl_s` seconds. The "
        "token is bound to the agent, to `variables` (the page sets no variable but those "
        "`page_variables` names: any other in `configure` is refused with "
        "`inline_config_refused`, in `context` with `invalid`), to `origin` when given "
        "(another origin is refused, close 4003) and to `end_user` (kept "
        "on the session record). The session belongs to this key: revoking the key ends it. "
        "Sent with `Cache-Control: no-store`.",
        request=SessionTokenInput,
        responses={201: SessionTokenOutput},
        examples=examples.TOKEN_CREATE,
    )
    def post(self, request: Request) -> Response:
        data = SessionTokenInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        workspace = request_workspace(request)
        agent = selectors.agent_find(workspace=workspace, slug=values["agent"])
        if agent is None:
            raise serializers.ValidationError({"agent": ["no agent with this slug"]})
        with django_errors_as_drf():
            number = values.get("agent_version")
            pinned = versions.version_get(agent=agent, number=number) if number else None
            token, plaintext = services.session_token_create(
                workspace=workspace,
                agent=agent,
                created_by_key=request.auth,  # type: ignore[arg-type]  # an ApiKey: see authentication
                variables=values.get("variables") or {},
                page_variables=values.get("page_variables") or [],
                end_user=values.get("end_user", ""),
                origin=values.get("origin", ""),
                ttl_s=values.get("ttl_s") or settings.SESSION_TOKEN_TTL_S,
                agent_version=pinned,
            )
        body = {"token": plaintext, "expires_at": token.expires_at, "agent": agent.slug}
        response = Response(SessionTokenOutput(body).data, status=status.HTTP_201_CREATED)
        response["Cache-Control"] = "no-store"
        return response
