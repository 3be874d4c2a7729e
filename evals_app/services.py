"""Writes for agent tests and simulations, and running them (from Celery tasks)."""

from __future__ import annotations

import logging
import time
import uuid
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from core.storable import storable, strings_mapped
from engine import protocol
from engine.providers.base import LLM
from engine.providers.resilience import resilient_llm
from evals_app import checks, judge, speech
from evals_app.conversation import Conversation, Reply
from evals_app.models import AgentTest, Simulation, Status, TestRun
from realtime.access import Access
from realtime.session_setup import ConfigureRefused, SessionPlan, session_plan_build
from secrets_app.audit import SYSTEM, Actor, audit_record
from secrets_app.models import ApiKey
from secrets_app.services import workspace_lock
from sessions_app import versions, workspace_providers
from sessions_app.models import Agent, AgentVersion, Session
from usage_app import services as usage_services

logger = logging.getLogger(__name__)
FAILED_LLM = (
    "The language model's request failed (a refused key or an outage), so the run stopped: "
    "check the LLM connection on the Providers page, then run again."
)
STUCK = "The run stopped without finishing (the worker running it was lost): run it again."
NO_LLM = (
    "No language model is configured for this workspace, so the agent cannot answer: add an "
    "LLM connection on the Providers page (or set LLM_BASE_URL for the platform), then run "
    "again."
)


# ---------------------------------------------------------------- tests


def agent_test_save(
    *, agent: Agent, name: str, turns: Any, tool_results: Any = None, actor: Actor = SYSTEM
) -> AgentTest:
    cleaned = checks.turns_clean(turns)
    if not isinstance(tool_results or {}, dict):
        raise ValidationError({"tool_results": ["an object: {tool name: result}"]})
    for field, value in (("turns", cleaned), ("tool_results", tool_results or {})):
        if strings_mapped(value, storable) != value:  # a NUL or a lone surrogate: a DataError
            raise ValidationError({field: ["no NUL characters or lone UTF-16 surrogates"]})
    with transaction.atomic():
        workspace_lock(workspace_id=agent.workspace_id)  # counted and written as one step
        existing = AgentTest.objects.filter(workspace=agent.workspace, agent=agent)
        if not existing.filter(name=name).exists() and existing.count() >= settings.AGENT_TESTS_MAX:
            raise ValidationError(
                {"name": [f"an agent has at most {settings.AGENT_TESTS_MAX} tests"]}
            )
        test, _ = AgentTest.objects.update_or_create(
            workspace=agent.workspace, agent=agent, name=name,
            defaults={"turns": cleaned, "tool_results": tool_results or {}},
        )  # fmt: skip
    audit_record(
        workspace=agent.workspace, actor=actor, action="agent_test.saved",
        target=f"{agent.slug}/{name}",
    )  # fmt: skip
    return test


def agent_test_delete(*, test: AgentTest, actor: Actor = SYSTEM) -> None:
    audit_record(
        workspace=test.workspace, actor=actor, action="agent_test.deleted",
        target=f"{test.agent.slug}/{test.name}",
    )  # fmt: skip
    test.delete()


class TooManyRunning(ValidationError):
    """The workspace already has as many unfinished runs as it may."""


UNFINISHED = (Status.QUEUED, Status.RUNNING)


def test_run_create(
    *, agent: Agent, version: AgentVersion | None = None, spoken: bool = False,
    actor: Actor = SYSTEM,
) -> TestRun:  # fmt: skip
    """Queue a run of the agent's tests against ``version`` (None: the draft); at most
    TEST_RUNS_IN_FLIGHT_MAX unfinished per workspace. ``spoken``: every user turn is
    spoken and heard, not only those marked ``spoken``."""
    if spoken or _speaks(AgentTest.objects.filter(workspace=agent.workspace, agent=agent)):
        speech.offline_speech_required("spoken")
    digest = "" if version else versions.draft_digest(agent)
    with transaction.atomic():
        workspace_lock(workspace_id=agent.workspace_id)
        unfinished = TestRun.objects.filter(workspace=agent.workspace, status__in=UNFINISHED)
        if unfinished.count() >= settings.TEST_RUNS_IN_FLIGHT_MAX:
            raise TooManyRunning(
                f"at most {settings.TEST_RUNS_IN_FLIGHT_MAX} test runs run at once in a "
                "workspace; wait for one to finish"
            )
        run = TestRun.objects.create(
            workspace=agent.workspace, agent=agent, version=version, draft_digest=digest,
            spoken=spoken, created_by=actor.label[:200],
        )  # fmt: skip
    audit_record(
        workspace=agent.workspace, actor=actor, action="agent_test.run_started",
        target=agent.slug,
        details={"run": str(run.uid), "version": version and version.number, "spoken": spoken},
    )  # fmt: skip
    return run


def _speaks(tests: Any) -> bool:
    """Whether any of ``tests`` has a spoken turn."""
    return any(turn.get("spoken") for test in tests for turn in test.turns)


def _served(agent: Agent, version: AgentVersion | None) -> versions.ServedAgent:
    return versions.version_served(agent, version) if version else versions.draft_served(agent)


def _plan(agent: Agent, version: AgentVersion | None) -> SessionPlan:
    """The session an agent's version (or draft) would get, built as a page's would be."""
    access = Access(
        key=ApiKey(workspace=agent.workspace, kind=ApiKey.Kind.SECRET),
        workspace=agent.workspace, origin="", agent=agent,
    )  # fmt: skip
    return session_plan_build(
        access=access,
        configure=protocol.ConfigureMessage(mode="text"),
        session_id=uuid.uuid4().hex,
        resume_token="",
        served=_served(agent, version),
    )


def _refusal(workspace_id: int, plan: SessionPlan) -> str | None:
    if plan.config.llm_name == workspace_providers.OFFLINE:
        return NO_LLM
    return usage_services.quota_check(workspace_id=workspace_id)


def _meter(
    agent: Agent, version: AgentVersion | None, usage: dict[str, int], origin: str,
    mode: str = "text",
) -> None:  # fmt: skip
    """What a run consumed counts like a session's (usage pages and quotas)."""
    record = Session.objects.create(
        workspace=agent.workspace, agent=agent, agent_version=version, origin=origin,
        mode=mode, ended_at=timezone.now(), close_code=1000,
    )  # fmt: skip
    usage_services.usage_record(session=record, usage=usage, ended=True)


def _unrunnable(item: TestRun | Simulation) -> str | None:
    """Mark ``item`` running; why it cannot run (a refused config, no LLM, a used-up quota)."""
    item.status = Status.RUNNING
    item.save(update_fields=["status"])
    try:
        plan = _plan(item.agent, item.version)
    except ConfigureRefused as refused:
        return refused.message
    return _refusal(item.workspace_id, plan)


def test_run_execute(*, run_id: int) -> TestRun:
    run = TestRun.objects.select_related("agent__workspace", "version").get(pk=run_id)
    refusal = _unrunnable(run)
    if refusal is not None:
        return _finish(run, Status.ERROR, refusal)
    tests = list(AgentTest.objects.filter(workspace=run.workspace, agent=run.agent))
    if not tests:
        return _finish(run, Status.ERROR, "this agent has no tests yet: write one first")
    spoken = run.spoken or _speaks(tests)
    missing = speech.offline_speech_missing() if spoken else None
    if missing is not None:
        return _finish(run, Status.ERROR, missing)
    mode = "voice" if spoken else "text"
    usage: dict[str, int] = {}
    deadline = _deadline(run.created_at)
    try:
        results = [async_to_sync(_run_test)(run, test, usage, deadline) for test in tests]
    except OutOfTime as late:
        _meter(run.agent, run.version, usage, "test run", mode)
        return _finish(run, Status.ERROR, str(late))
    except Exception as error:  # any failure finishes the run; its text may hold a key
        logger.warning("test run %s failed: %s", run.uid, type(error).__name__)
        _meter(run.agent, run.version, usage, "test run", mode)
        return _finish(run, Status.ERROR, FAILED_LLM)
    _meter(run.agent, run.version, usage, "test run", mode)
    run.results = results
    failed = sum(1 for result in results if not result["passed"])
    message = f"{len(results) - failed} of {len(results)} tests passed"
    return _finish(run, Status.FAILED if failed else Status.PASSED, message)


def _finish(run: TestRun, status: str, message: str) -> TestRun:
    run.status, run.message, run.finished_at = status, message[:500], timezone.now()
    run.results = strings_mapped(run.results, storable)  # what the agent's LLM wrote
    run.save(update_fields=["status", "message", "finished_at", "results"])
    return run


class OutOfTime(Exception):
    """A run or a simulation reached its deadline (a sentence of ours)."""


def _deadline(created_at: datetime) -> float:
    """When (``time.monotonic``) a run or simulation stops starting turns: its last turn
    and judging end before the stuck sweep would finish it as ``error`` and free its
    in-flight place while its worker went on (a workspace could then hold one more worker
    every EVALS_STUCK_AFTER_MIN with runs of slow turns)."""
    sweep = created_at + timedelta(minutes=settings.EVALS_STUCK_AFTER_MIN)
    margin = 2.0 * settings.AGENT_TEST_TURN_TIMEOUT_S
    left: float = (sweep - timezone.now()).total_seconds() - margin
    return time.monotonic() + left


def _in_time(deadline: float) -> None:
    if time.monotonic() > deadline:
        raise OutOfTime(
            f"stopped: it would have run past {settings.EVALS_STUCK_AFTER_MIN} minutes "
            "(EVALS_STUCK_AFTER_MIN); fewer or shorter turns, or an LLM that answers sooner"
        )


async def _run_test(
    run: TestRun, test: AgentTest, usage: dict[str, int], deadline: float
) -> dict[str, Any]:
    agent, version = run.agent, run.version
    plan = await database_sync_to_async(_plan)(agent, version)
    judge_llm = resilient_llm((await database_sync_to_async(_plan)(agent, version)).llm)
    spoken = [run.spoken or bool(turn.get("spoken")) for turn in test.turns]
    conversation = Conversation(
        plan,
        tool_results=dict(test.tool_results),
        turn_timeout_s=settings.AGENT_TEST_TURN_TIMEOUT_S,
        stt=speech.listener(plan.config) if any(spoken) else None,
    )
    turns: list[dict[str, Any]] = []
    heard: list[tuple[str, str]] = []
    await conversation.start()
    try:
        for expected, aloud in zip(test.turns, spoken, strict=True):
            _in_time(deadline)
            line = expected["user"]
            say = conversation.say_aloud if aloud else conversation.say
            reply = await say(line)
            # What the agent got is what it heard; the judge reads the same.
            heard += [("user", line if reply.heard is None else reply.heard)]
            heard += [("assistant", reply.text)]
            results = await checks.turn_checks(expected, reply, heard, judge_llm)
            turns.append(_turn_result(line, reply, results))
            if reply.error:
                break
    finally:  # what it used counts, whether or not it ran to its end
        await conversation.close()
        for name, value in conversation.usage.items():
            usage[name] = usage.get(name, 0) + value
    passed = bool(turns) and all(c["passed"] for t in turns for c in t["checks"])
    passed = passed and len(turns) == len(test.turns)
    return {"test": test.name, "passed": passed, "turns": turns}


def _turn_result(user: str, reply: Reply, results: list[dict[str, Any]]) -> dict[str, Any]:
    spoken = {} if reply.heard is None else {"heard": reply.heard}
    return {
        "user": user,
        "spoken": reply.heard is not None,
        **spoken,
        "reply": reply.text,
        "error": reply.error,
        "tools": [{"name": use.name, "arguments": use.arguments} for use in reply.tools],
        "checks": results,
    }


# ---------------------------------------------------------------- simulations


def simulations_create(
    *, agent: Agent, scenarios: list[dict[str, Any]], version: AgentVersion | None = None,
    actor: Actor = SYSTEM,
) -> list[Simulation]:  # fmt: skip
    """Queue one simulation per scenario ({persona, goal, criteria, max_turns?}), one batch;
    at most SIMULATIONS_PER_BATCH_MAX, and SIMULATIONS_IN_FLIGHT_MAX unfinished per workspace."""
    if not 1 <= len(scenarios) <= settings.SIMULATIONS_PER_BATCH_MAX:
        raise ValidationError(
            {"scenarios": [f"1 to {settings.SIMULATIONS_PER_BATCH_MAX} scenarios at once"]}
        )
    refusal = usage_services.quota_check(workspace_id=agent.workspace_id)
    if refusal is not None:
        raise ValidationError({"scenarios": [refusal]})
    batch = uuid.uuid4()
    cleaned = [checks.scenario_clean(scenario) for scenario in scenarios]
    with transaction.atomic():
        workspace_lock(workspace_id=agent.workspace_id)
        unfinished = Simulation.objects.filter(
            workspace=agent.workspace, status__in=UNFINISHED
        ).count()
        if unfinished + len(scenarios) > settings.SIMULATIONS_IN_FLIGHT_MAX:
            raise ValidationError(
                {"scenarios": [f"at most {settings.SIMULATIONS_IN_FLIGHT_MAX} simulations "
                               "running at once in a workspace; wait for some to finish"]}
            )  # fmt: skip
        made = [
            Simulation.objects.create(
                workspace=agent.workspace, agent=agent, version=version, batch=batch, **scenario
            )
            for scenario in cleaned
        ]
    audit_record(
        workspace=agent.workspace, actor=actor, action="simulation.started", target=agent.slug,
        details={"batch": str(batch), "count": len(made)},
    )  # fmt: skip
    return made


def simulation_execute(*, simulation_id: int) -> Simulation:
    simulation = Simulation.objects.select_related("agent__workspace", "version").get(
        pk=simulation_id
    )
    refusal = _unrunnable(simulation)
    if refusal is None and simulation.mode == "voice":
        refusal = speech.offline_speech_missing()
    if refusal is not None:
        return _simulation_finish(simulation, Status.ERROR, refusal)
    usage: dict[str, int] = {}
    meter = (simulation.agent, simulation.version, usage, "simulation", simulation.mode)
    try:
        transcript, verdicts = async_to_sync(_simulate)(
            simulation, usage, _deadline(simulation.created_at)
        )
    except OutOfTime as late:
        _meter(*meter)
        return _simulation_finish(simulation, Status.ERROR, str(late))
    except Exception as error:  # any failure finishes the simulation; its text may hold a key
        logger.warning("simulation %s failed: %s", simulation.uid, type(error).__name__)
        _meter(*meter)
        return _simulation_finish(simulation, Status.ERROR, FAILED_LLM)
    _meter(*meter)
    simulation.transcript = transcript
    simulation.verdicts = [
        {"criterion": criterion, "passed": verdict.passed, "reason": verdict.reason}
        for criterion, verdict in verdicts
    ]
    passed = all(verdict.passed for _, verdict in verdicts)
    return _simulation_finish(
        simulation, Status.PASSED if passed else Status.FAILED,
        f"{sum(v.passed for _, v in verdicts)} of {len(verdicts)} criteria met",
    )  # fmt: skip


async def _simulate(
    simulation: Simulation, usage: dict[str, int], deadline: float
) -> tuple[list[dict[str, Any]], list[tuple[str, judge.Verdict]]]:
    """The conversation (each line as said; in voice mode the user's also as heard, the
    agent's with its audio's length), and each criterion's verdict on what was heard."""
    plan = await database_sync_to_async(_plan)(simulation.agent, simulation.version)
    llm: LLM = resilient_llm(
        (await database_sync_to_async(_plan)(simulation.agent, simulation.version)).llm
    )
    voice = simulation.mode == "voice"
    conversation = Conversation(
        plan, tool_results={}, turn_timeout_s=settings.AGENT_TEST_TURN_TIMEOUT_S,
        stt=speech.listener(plan.config) if voice else None,
        tts=speech.agent_voice(plan.config) if voice else None,
    )  # fmt: skip
    said: list[tuple[str, str]] = []  # the simulated user's side: its own words
    heard: list[tuple[str, str]] = []  # the agent's side: what reached it
    transcript: list[dict[str, Any]] = []
    await conversation.start()
    try:
        for _ in range(simulation.max_turns):
            _in_time(deadline)
            line = await judge.user_line(
                llm, persona=simulation.persona, goal=simulation.goal, turns=said
            )
            if not line or judge.DONE in line:
                break
            reply = await (conversation.say_aloud(line) if voice else conversation.say(line))
            said += [("user", line), ("assistant", reply.text)]
            heard += [("user", line if reply.heard is None else reply.heard)]
            heard += [("assistant", reply.text)]
            transcript += _simulated_turn(line, reply, voice)
            if reply.error:
                break
    finally:  # what it used counts, whether or not it ran to its end
        await conversation.close()
        usage.update(conversation.usage)
    verdicts = [
        (criterion, await judge.judge(llm, criterion=criterion, turns=heard))
        for criterion in simulation.criteria
    ]
    return transcript, verdicts


def _simulated_turn(line: str, reply: Reply, voice: bool) -> list[dict[str, Any]]:
    """The line and the reply; a voice line with what was heard, a reply with its audio's
    length; a turn that got no reply with the reason (``error``)."""
    user: dict[str, Any] = {"role": "user", "text": line}
    agent: dict[str, Any] = {"role": "assistant", "text": reply.text}
    if voice:
        user["heard"], agent["audio_ms"] = reply.heard or "", reply.audio_ms
    if reply.error:
        agent["error"] = reply.error
    return [user, agent]


def _simulation_finish(simulation: Simulation, status: str, message: str) -> Simulation:
    simulation.status, simulation.message = status, message[:500]
    simulation.finished_at = timezone.now()
    # What the LLMs wrote (the simulated user's lines, the agent's, the judge's reasons).
    simulation.transcript = strings_mapped(simulation.transcript, storable)
    simulation.verdicts = strings_mapped(simulation.verdicts, storable)
    simulation.save(update_fields=["status", "message", "finished_at", "transcript", "verdicts"])
    return simulation


# ---------------------------------------------------------------- stuck runs


def stuck_sweep() -> int:
    """Finish as ``error`` the runs and simulations unfinished EVALS_STUCK_AFTER_MIN after
    they were queued (a worker lost mid-run): they free their in-flight slots."""
    before = timezone.now() - timedelta(minutes=settings.EVALS_STUCK_AFTER_MIN)
    swept = 0
    for model in (TestRun, Simulation):
        swept += model.objects.filter(status__in=UNFINISHED, created_at__lt=before).update(
            status=Status.ERROR, message=STUCK, finished_at=timezone.now()
        )
    return swept
