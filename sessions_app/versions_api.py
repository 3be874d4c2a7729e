"""REST API for agent versions: list, read, diff, publish, roll back, split, pin."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.serializers import StrictSerializer, django_errors_as_drf
from secrets_app import selectors as key_selectors
from secrets_app.audit import actor_for_request
from secrets_app.authentication import request_workspace
from sessions_app import selectors, versions
from sessions_app import versions_examples as examples
from sessions_app.models import Agent, AgentVersion


class PublishBlocked(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "tests_required"


class RefusalDetail(serializers.Serializer):  # type: ignore[type-arg]
    code = serializers.CharField()
    message = serializers.CharField()


class RefusalOutput(serializers.Serializer):  # type: ignore[type-arg]
    error = RefusalDetail()


class VersionOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    published = serializers.SerializerMethodField()
    split_percent = serializers.SerializerMethodField()

    class Meta:
        model = AgentVersion
        fields = [
            "number", "note", "digest", "created_by", "created_at", "published", "split_percent",
        ]  # fmt: skip

    def _agent(self) -> Agent:
        agent = self.context["agent"]
        assert isinstance(agent, Agent)
        return agent

    def get_published(self, version: AgentVersion) -> bool:
        return self._agent().published_version_id == version.pk

    def get_split_percent(self, version: AgentVersion) -> int:
        agent = self._agent()
        return agent.split_percent if agent.split_version_id == version.pk else 0


class VersionDetailOutput(VersionOutput):
    class Meta(VersionOutput.Meta):
        fields = [*VersionOutput.Meta.fields, "config"]


class PublishInput(StrictSerializer):
    note = serializers.CharField(max_length=versions.NOTE_MAX, required=False, allow_blank=True)


class RollbackInput(StrictSerializer):
    version = serializers.IntegerField(min_value=1)


class SplitInput(StrictSerializer):
    version = serializers.IntegerField(min_value=1, allow_null=True)
    percent = serializers.IntegerField(min_value=0, max_value=100)


class PinInput(StrictSerializer):
    version = serializers.IntegerField(min_value=1, allow_null=True, help_text="null: unpin")


class PinOutput(serializers.Serializer):  # type: ignore[type-arg]
    key = serializers.IntegerField(help_text="The key's `id`.")
    version = serializers.IntegerField(allow_null=True, help_text="null: the published one")


class ChangeOutput(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField()
    before = serializers.JSONField()
    after = serializers.JSONField()
    lines = serializers.ListField(child=serializers.CharField())


READ_SCOPE = {"GET": "agents"}
WRITE_SCOPE = {"POST": "versions", "PUT": "versions"}


def _agent(request: Request, slug: str) -> Agent:
    return selectors.agent_get(workspace=request_workspace(request), slug=slug)


def _versions(agent: Agent, many: Any, *, detail: bool = False) -> Any:
    output = VersionDetailOutput if detail else VersionOutput
    return output(many, many=not isinstance(many, AgentVersion), context={"agent": agent}).data


@extend_schema(tags=["Agent versions"])
class VersionListApi(APIView):
    scopes = READ_SCOPE

    @extend_schema(
        summary="List an agent's versions",
        description="Newest first; `published` marks the one sessions get, `split_percent` "
        "the share of new sessions sent to another.",
        responses=VersionOutput(many=True),
        examples=examples.VERSION_LIST,
    )
    def get(self, request: Request, slug: str) -> Response:
        agent = _agent(request, slug)
        return Response(_versions(agent, agent.versions.filter(workspace=agent.workspace)))


@extend_schema(tags=["Agent versions"])
class VersionDetailApi(APIView):
    scopes = READ_SCOPE

    @extend_schema(
        summary="Get a version with its config",
        description="Everything the version holds: instructions, greeting, voice, providers, "
        "tools with their pinned handlers, knowledge attachments.",
        responses=VersionDetailOutput,
        examples=examples.VERSION_DETAIL,
    )
    def get(self, request: Request, slug: str, version: int) -> Response:
        agent = _agent(request, slug)
        with django_errors_as_drf():
            found = versions.version_get(agent=agent, number=version)
        return Response(_versions(agent, found, detail=True))


@extend_schema(tags=["Agent versions"])
class VersionDiffApi(APIView):
    scopes = READ_SCOPE

    @extend_schema(
        summary="What changed between two versions",
        description="Field by field, with a unified diff of each; `to=draft` compares with "
        "the unpublished draft.",
        parameters=[
            OpenApiParameter("from", int, required=True),
            OpenApiParameter("to", str, required=True, description="a number or `draft`"),
        ],
        responses=ChangeOutput(many=True),
        examples=examples.VERSION_DIFF,
    )
    def get(self, request: Request, slug: str) -> Response:
        agent = _agent(request, slug)
        before = self._config(agent, request.query_params.get("from", ""))
        after = self._config(agent, request.query_params.get("to", ""))
        changes = versions.versions_diff(before, after)
        return Response(ChangeOutput(changes, many=True).data)

    def _config(self, agent: Agent, raw: str) -> dict[str, Any]:
        if raw == "draft":
            return versions.agent_snapshot(agent)
        if not raw.isdigit():
            raise serializers.ValidationError({"version": ["a version number or draft"]})
        with django_errors_as_drf():
            config: dict[str, Any] = versions.version_get(agent=agent, number=int(raw)).config
        return config


@extend_schema(tags=["Agent versions"])
class PublishApi(APIView):
    scopes = WRITE_SCOPE

    @extend_schema(
        summary="Publish the draft",
        description="The draft becomes the next numbered version, and new sessions get it "
        "(live sessions keep theirs). An agent with `require_tests` publishes only a draft "
        "whose latest test run passed: otherwise 409 `tests_required`.",
        request=PublishInput,
        responses={201: VersionOutput, 409: RefusalOutput},
        examples=examples.PUBLISH,
    )
    def post(self, request: Request, slug: str) -> Response:
        agent = _agent(request, slug)
        data = PublishInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            version = versions.agent_publish(
                agent=agent,
                actor=actor_for_request(request),
                note=data.validated_data.get("note", ""),
            )
        except versions.PublishRefused as refused:
            raise PublishBlocked(str(refused)) from None
        return Response(_versions(agent, version), status=status.HTTP_201_CREATED)


@extend_schema(tags=["Agent versions"])
class RollbackApi(APIView):
    scopes = WRITE_SCOPE

    @extend_schema(
        summary="Publish an older version again",
        description="New sessions get `version`; the draft stays as it is.",
        request=RollbackInput,
        responses=VersionOutput,
        examples=examples.ROLLBACK,
    )
    def post(self, request: Request, slug: str) -> Response:
        agent = _agent(request, slug)
        data = RollbackInput(data=request.data)
        data.is_valid(raise_exception=True)
        with django_errors_as_drf():
            version = versions.agent_rollback(
                agent=agent, number=data.validated_data["version"], actor=actor_for_request(request)
            )
        return Response(_versions(agent, version))


@extend_schema(tags=["Agent versions"])
class SplitApi(APIView):
    scopes = WRITE_SCOPE

    @extend_schema(
        summary="Split traffic between the published version and another",
        description="`percent` of new sessions get `version`, the rest the published one; a "
        "session keeps its version for its whole life, resumes included. `percent` 0 (or "
        "`version` null) ends the split.",
        request=SplitInput,
        responses=VersionOutput(many=True),
        examples=examples.SPLIT,
    )
    def put(self, request: Request, slug: str) -> Response:
        agent = _agent(request, slug)
        data = SplitInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        with django_errors_as_drf():
            versions.agent_split_set(
                agent=agent, number=values["version"], percent=values["percent"],
                actor=actor_for_request(request),
            )  # fmt: skip
        return Response(_versions(agent, agent.versions.filter(workspace=agent.workspace)))


@extend_schema(tags=["Agent versions"])
class PinApi(APIView):
    scopes = WRITE_SCOPE

    @extend_schema(
        summary="Pin a publishable key to a version",
        description="Sessions of this agent opened with the key get `version` instead of the "
        "published one (null: unpin). Session tokens pin with their own `agent_version`.",
        request=PinInput,
        responses=PinOutput,
        examples=examples.PIN,
    )
    def put(self, request: Request, slug: str, key_id: int) -> Response:
        agent = _agent(request, slug)
        data = PinInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        key = key_selectors.api_key_get(workspace=agent.workspace, key_id=key_id)
        with django_errors_as_drf():
            versions.agent_pin_set(
                agent=agent, api_key=key, number=values["version"],
                actor=actor_for_request(request),
            )  # fmt: skip
        return Response(PinOutput({"key": key.pk, "version": values["version"]}).data)
