"""REST API for agent tests, their runs, and simulations."""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.serializers import StrictSerializer, django_errors_as_drf
from evals_app import api_examples as examples
from evals_app import selectors, services, tasks
from evals_app.models import AgentTest, Simulation, TestRun
from secrets_app.audit import actor_for_request
from secrets_app.authentication import request_workspace
from sessions_app import selectors as agent_selectors
from sessions_app import versions
from sessions_app.models import Agent, AgentVersion

SCOPE = {method: "agent_tests" for method in ("GET", "POST", "DELETE")}


def _agent(request: Request, slug: str) -> Agent:
    return agent_selectors.agent_get(workspace=request_workspace(request), slug=slug)


def _version(agent: Agent, number: int | None) -> AgentVersion | None:
    if number is None:
        return None
    with django_errors_as_drf():
        return versions.version_get(agent=agent, number=number)


class AgentTestInput(StrictSerializer):
    name = serializers.CharField(max_length=100)
    turns = serializers.ListField(
        child=serializers.JSONField(),
        help_text="[{user, spoken? (true: the line is said by the offline voice and heard by "
        "the offline recogniser), tool_called?, tool_arguments? {argument: pattern}, "
        "tool_not_called? (a name or *), reply_contains?, reply_matches? (a pattern), judge? "
        "(a criterion)}]",
    )
    tool_results = serializers.DictField(
        child=serializers.JSONField(), required=False,
        help_text="{tool name: result}: what each tool answers (tools are not run in tests; "
        'default {"ok": true}).',
    )  # fmt: skip


class AgentTestOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = AgentTest
        fields = ["name", "turns", "tool_results", "created_at"]


class TestRunInput(StrictSerializer):
    version = serializers.IntegerField(
        min_value=1, required=False, allow_null=True, help_text="Blank: the draft."
    )
    spoken = serializers.BooleanField(
        default=False,
        help_text="Every user turn spoken by the offline voice and heard by the offline "
        "recogniser (turns marked `spoken` are, either way).",
    )


class TestRunOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    id = serializers.UUIDField(source="uid")
    agent = serializers.CharField(source="agent.slug")
    version = serializers.IntegerField(source="version.number", allow_null=True)

    class Meta:
        model = TestRun
        fields = ["id", "agent", "version", "spoken", "status", "message", "results",
                  "created_at", "finished_at"]  # fmt: skip


class ScenarioInput(StrictSerializer):
    persona = serializers.CharField(max_length=1000)
    goal = serializers.CharField(max_length=1000)
    criteria = serializers.ListField(child=serializers.CharField(max_length=2000), max_length=10)
    max_turns = serializers.IntegerField(min_value=1, required=False)
    mode = serializers.ChoiceField(
        choices=["text", "voice"], default="text",
        help_text="voice: the user's lines go through the offline voice and recogniser to "
        "the agent, whose replies the offline voice says.",
    )  # fmt: skip


class SimulationInput(StrictSerializer):
    version = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    scenarios = serializers.ListField(child=ScenarioInput(), min_length=1)


class SimulationOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    id = serializers.UUIDField(source="uid")
    version = serializers.IntegerField(source="version.number", allow_null=True)

    class Meta:
        model = Simulation
        fields = ["id", "batch", "version", "persona", "goal", "criteria", "max_turns", "mode",
                  "status", "message", "transcript", "verdicts", "created_at",
                  "finished_at"]  # fmt: skip


@extend_schema(tags=["Agent tests"])
class AgentTestListApi(APIView):
    scopes = SCOPE

    @extend_schema(
        summary="List an agent's tests",
        description="Each scripted conversation with its expectations per turn.",
        responses=AgentTestOutput(many=True),
        examples=examples.TEST_LIST,
    )
    def get(self, request: Request, slug: str) -> Response:
        tests = selectors.agent_tests(agent=_agent(request, slug))
        return Response(AgentTestOutput(tests, many=True).data)

    @extend_schema(
        summary="Save a test",
        description="Creates the test, or replaces the agent's test of that `name`. Each turn "
        "is what the user types, and what the agent's answer must do.",
        request=AgentTestInput,
        responses={201: AgentTestOutput},
        examples=examples.TEST_SAVE,
    )
    def post(self, request: Request, slug: str) -> Response:
        agent = _agent(request, slug)
        data = AgentTestInput(data=request.data)
        data.is_valid(raise_exception=True)
        with django_errors_as_drf():
            test = services.agent_test_save(
                agent=agent, actor=actor_for_request(request), **data.validated_data
            )
        return Response(AgentTestOutput(test).data, status=status.HTTP_201_CREATED)


@extend_schema(tags=["Agent tests"])
class AgentTestDetailApi(APIView):
    scopes = SCOPE

    @extend_schema(summary="Delete a test", description="The test, by name.", responses={204: None})
    def delete(self, request: Request, slug: str, name: str) -> Response:
        test = selectors.agent_test_get(agent=_agent(request, slug), name=name)
        services.agent_test_delete(test=test, actor=actor_for_request(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["Agent tests"])
class TestRunListApi(APIView):
    scopes = SCOPE

    @extend_schema(
        summary="List an agent's test runs",
        description="Newest first, at most 50.",
        responses=TestRunOutput(many=True),
        examples=examples.RUN_LIST,
    )
    def get(self, request: Request, slug: str) -> Response:
        runs = selectors.test_runs(agent=_agent(request, slug))[:50]
        return Response(TestRunOutput(runs, many=True).data)

    @extend_schema(
        summary="Run an agent's tests",
        description="Runs every test of the agent against its draft (or `version`), off the "
        "request, with the workspace's LLM: poll `GET test-runs/{id}`. A run ends `passed`, "
        "`failed` (each check says what it saw) or `error` (`message` says why, for instance "
        "that no LLM is configured). Tools are not run; each answers with the test's "
        "`tool_results`. Spoken turns (and `spoken: true`) need the offline speech models: "
        "without them the run is refused with 400, saying what to install. At most "
        "TEST_RUNS_IN_FLIGHT_MAX runs are unfinished per workspace: one more is refused with "
        "429.",
        request=TestRunInput,
        responses={202: TestRunOutput, 429: OpenApiResponse(description="too many runs")},
        examples=examples.RUN_CREATE,
    )
    def post(self, request: Request, slug: str) -> Response:
        agent = _agent(request, slug)
        data = TestRunInput(data=request.data)
        data.is_valid(raise_exception=True)
        version = _version(agent, data.validated_data.get("version"))
        with django_errors_as_drf():  # no offline speech for a spoken run: 400
            try:
                run = services.test_run_create(
                    agent=agent, version=version, spoken=data.validated_data["spoken"],
                    actor=actor_for_request(request),
                )  # fmt: skip
            except services.TooManyRunning as busy:
                raise RunsInFlight(busy.messages[0]) from None
        tasks.test_run_start(run.pk)
        run.refresh_from_db()
        return Response(TestRunOutput(run).data, status=status.HTTP_202_ACCEPTED)


class RunsInFlight(exceptions.APIException):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "too_many_runs"


@extend_schema(tags=["Agent tests"])
class TestRunDetailApi(APIView):
    scopes = {"GET": "agent_tests"}

    @extend_schema(
        summary="Get a test run with its results",
        description="Per test, per turn: what the user said, the reply, the tools called with "
        "their arguments, and each check with what it saw (a judged check: the judge's reason).",
        responses=TestRunOutput,
        examples=examples.RUN_DETAIL,
    )
    def get(self, request: Request, run_id: uuid.UUID) -> Response:
        run = selectors.test_run_get(workspace=request_workspace(request), uid=run_id)
        return Response(TestRunOutput(run).data)


@extend_schema(tags=["Agent tests"])
class SimulationListApi(APIView):
    scopes = SCOPE

    @extend_schema(
        summary="List an agent's simulations",
        description="Newest first, at most 50; `?batch=` those started together.",
        parameters=[OpenApiParameter("batch", uuid.UUID)],
        responses=SimulationOutput(many=True),
        examples=examples.SIMULATION_LIST,
    )
    def get(self, request: Request, slug: str) -> Response:
        raw = request.query_params.get("batch")
        try:
            batch = uuid.UUID(raw) if raw else None
        except ValueError:
            raise serializers.ValidationError({"batch": ["not a batch id"]}) from None
        found = selectors.simulations(agent=_agent(request, slug), batch=batch)[:50]
        return Response(SimulationOutput(found, many=True).data)

    @extend_schema(
        summary="Start simulated conversations",
        description="For each scenario an LLM plays a user (`persona`, `goal`) against the agent "
        "for up to `max_turns`, in text or `voice` mode (the user's lines spoken and heard "
        "offline: the transcript keeps what was `heard`; refused with 400 where the offline "
        "speech models are not installed), and the transcript is judged against `criteria`. "
        "At most SIMULATIONS_PER_BATCH_MAX at once and SIMULATIONS_IN_FLIGHT_MAX unfinished per "
        "workspace; refused when a quota is used up; what they consume counts as usage.",
        request=SimulationInput,
        responses={202: SimulationOutput(many=True)},
        examples=examples.SIMULATION_CREATE,
    )
    def post(self, request: Request, slug: str) -> Response:
        agent = _agent(request, slug)
        data = SimulationInput(data=request.data)
        data.is_valid(raise_exception=True)
        values: dict[str, Any] = data.validated_data
        version = _version(agent, values.get("version"))
        with django_errors_as_drf():
            made = services.simulations_create(
                agent=agent, version=version, scenarios=values["scenarios"],
                actor=actor_for_request(request),
            )  # fmt: skip
        tasks.simulations_start([simulation.pk for simulation in made])
        fresh = selectors.simulations(agent=agent, batch=made[0].batch)
        return Response(SimulationOutput(fresh, many=True).data, status=status.HTTP_202_ACCEPTED)
