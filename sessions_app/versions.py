"""Agent versions: publish a draft as an immutable numbered version, roll back, split
traffic, pin a key to a version, and pick the version a new session gets.

The ``Agent`` row is the draft. A version's ``config`` is everything that defines the
agent (``VERSIONED_FIELDS``, its tools with their pinned handlers and hashes, its knowledge
attachments). An agent whose ``drafts`` switch is off publishes on every save (how agents
behaved before versions existed, and what the existing REST API still does); with it on,
only Publish does, and ``require_tests`` makes Publish wait for the draft's tests to pass
(the gate is installed by the app that runs tests, a layer above: ``publish_gate_install``).
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max

from secrets_app.audit import SYSTEM, Actor, audit_record
from secrets_app.models import ApiKey
from sessions_app.models import Agent, AgentVersion, AgentVersionPin

# What a version holds besides its knowledge attachments (``knowledge_base_ids``).
VERSIONED_FIELDS = (
    "name", "instructions", "greeting", "voice", "mode", "llm_model", "llm_provider",
    "stt_provider", "tts_provider", "llm_fallbacks", "tts_fallbacks", "tools", "vocabulary",
    "empty_reply", "idle_timeout_s", "max_session_s", "knowledge_mode", "knowledge_timeout_ms",
    "tool_filler", "tool_filler_after_ms", "language", "record_audio", "preemptive_generation",
)  # fmt: skip
NOTE_MAX = 200


class PublishRefused(Exception):
    """Publishing was refused (the draft's required tests have not passed); in words."""


class NoPublishedVersion(Exception):
    """An agent with drafts on that was never published serves no session."""


# ---------------------------------------------------------------- snapshots


def agent_snapshot(agent: Agent) -> dict[str, Any]:
    """The draft as a version's ``config`` would hold it."""
    config = {name: getattr(agent, name) for name in VERSIONED_FIELDS}
    config["knowledge_base_ids"] = (
        sorted(agent.knowledge_bases.values_list("pk", flat=True)) if agent.pk else []
    )
    return config


def config_digest(config: dict[str, Any]) -> str:
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def draft_digest(agent: Agent) -> str:
    return config_digest(agent_snapshot(agent))


@dataclass(frozen=True)
class ServedAgent:
    """What a session is built from: a version's config (or, for an agent never
    published with drafts off, its current settings)."""

    pk: int
    slug: str
    version: AgentVersion | None
    config: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        if name in VERSIONED_FIELDS:
            return self.config.get(name, getattr(Agent, name).field.get_default())
        raise AttributeError(name)

    @property
    def knowledge_base_ids(self) -> list[int]:
        return [int(pk) for pk in self.config.get("knowledge_base_ids", [])]

    @property
    def version_number(self) -> int | None:
        return self.version.number if self.version is not None else None


# ---------------------------------------------------------------- publishing

PublishGate = Callable[[Agent], str | None]
_gate: PublishGate | None = None


def publish_gate_install(gate: PublishGate) -> None:
    """``gate(agent)`` returns why the agent's draft may not be published, or None."""
    global _gate
    _gate = gate


def _audit(agent: Agent, actor: Actor, action: str, details: dict[str, Any]) -> None:
    audit_record(
        workspace=agent.workspace, actor=actor, action=action, target=agent.slug, details=details
    )


def agent_publish(*, agent: Agent, actor: Actor = SYSTEM, note: str = "") -> AgentVersion:
    """The draft as the next numbered version, published. ``PublishRefused`` when the agent
    requires passing tests and its draft has none."""
    if agent.require_tests and _gate is not None:
        refusal = _gate(agent)
        if refusal is not None:
            raise PublishRefused(refusal)
    config = agent_snapshot(agent)
    with transaction.atomic():
        locked = Agent.objects.select_for_update().get(pk=agent.pk, workspace=agent.workspace)
        latest = locked.versions.aggregate(latest=Max("number"))["latest"] or 0
        version = AgentVersion.objects.create(
            workspace=agent.workspace, agent=locked, number=latest + 1, config=config,
            digest=config_digest(config), note=note[:NOTE_MAX], created_by=actor.label[:200],
        )  # fmt: skip
        Agent.objects.filter(pk=agent.pk).update(published_version=version)
    agent.published_version = version
    _audit(agent, actor, "agent.published", {"version": version.number, "sha256": version.digest})
    return version


def agent_changed(*, agent: Agent, actor: Actor = SYSTEM) -> AgentVersion | None:
    """After a save: publish at once unless the agent keeps drafts (or nothing changed)."""
    if agent.drafts:
        return None
    published = agent.published_version
    if published is not None and published.digest == draft_digest(agent):
        return published
    return agent_publish(agent=agent, actor=actor, note="saved")


# Fields that say which version serves: saving only these is no change of the agent.
SERVING_FIELDS = frozenset({"published_version", "split_version", "split_percent"})
_caller_publishes: ContextVar[bool] = ContextVar("caller_publishes", default=False)


@contextmanager
def published_by_caller() -> Iterator[None]:
    """Saves inside publish through the caller's ``agent_changed`` (with its actor)."""
    token = _caller_publishes.set(True)
    try:
        yield
    finally:
        _caller_publishes.reset(token)


def on_agent_saved(
    sender: type[Agent], instance: Agent, raw: bool = False,
    update_fields: frozenset[str] | None = None, **kwargs: object,
) -> None:  # fmt: skip
    """Any other save of an agent (the ORM, a script) publishes too, unless it keeps drafts:
    what sessions get never lags behind a save nobody meant as a draft."""
    if raw or _caller_publishes.get() or (update_fields and update_fields <= SERVING_FIELDS):
        return
    agent_changed(agent=instance)


def version_get(*, agent: Agent, number: int) -> AgentVersion:
    version = AgentVersion.objects.filter(
        workspace=agent.workspace, agent=agent, number=number
    ).first()
    if version is None:
        raise ValidationError({"version": [f"this agent has no version {number}"]})
    return version


def agent_rollback(*, agent: Agent, number: int, actor: Actor = SYSTEM) -> AgentVersion:
    """Publish an older version again (the draft is left as it is)."""
    version = version_get(agent=agent, number=number)
    previous = agent.published_version.number if agent.published_version else None
    agent.published_version = version
    agent.save(update_fields=["published_version"])
    _audit(agent, actor, "agent.rolled_back", {"from_version": previous, "version": number})
    return version


def agent_split_set(
    *, agent: Agent, number: int | None, percent: int, actor: Actor = SYSTEM
) -> None:
    """Send ``percent`` of new sessions to version ``number`` (None or 0 %: no split)."""
    if not 0 <= percent <= 100:
        raise ValidationError({"percent": ["a whole number from 0 to 100"]})
    version = version_get(agent=agent, number=number) if number is not None and percent else None
    agent.split_version, agent.split_percent = version, percent if version else 0
    agent.save(update_fields=["split_version", "split_percent"])
    _audit(agent, actor, "agent.split_changed", {"version": number, "percent": agent.split_percent})


def agent_pin_set(
    *, agent: Agent, api_key: ApiKey, number: int | None, actor: Actor = SYSTEM
) -> None:
    """The key's sessions of this agent get version ``number`` (None: the published one)."""
    if api_key.workspace_id != agent.workspace_id:
        raise ValidationError({"key": ["no such key"]})
    if number is None:
        pins = AgentVersionPin.objects.filter(workspace=agent.workspace, agent=agent)
        pins.filter(api_key=api_key).delete()
    else:
        AgentVersionPin.objects.update_or_create(
            workspace=agent.workspace, agent=agent, api_key=api_key,
            defaults={"version": version_get(agent=agent, number=number)},
        )  # fmt: skip
    _audit(agent, actor, "agent.pin_changed", {"key": api_key.display, "version": number})


# ---------------------------------------------------------------- serving


def split_bucket(session_id: str) -> int:
    """0-99, fixed by the session id: a session (and its resume) stays on one side."""
    return int(hashlib.sha256(session_id.encode()).hexdigest()[:8], 16) % 100


def version_for_session(
    *, agent: Agent, session_id: str, key: ApiKey | None, pinned: AgentVersion | None = None
) -> AgentVersion | None:
    """A pin (the token's, else the key's), else the split, else the published version. A
    pinned version of another agent (a number moved to another agent, a stale token) is
    never served: it is ignored."""
    if pinned is not None and (
        pinned.agent_id != agent.pk or pinned.workspace_id != agent.workspace_id
    ):
        pinned = None
    if pinned is None and key is not None:
        pin = (
            AgentVersionPin.objects.select_related("version")
            .filter(workspace_id=agent.workspace_id, agent=agent, api_key=key)
            .first()
        )
        pinned = pin.version if pin is not None else None
    if pinned is not None:
        return pinned
    if agent.split_version_id and split_bucket(session_id) < agent.split_percent:
        return agent.split_version
    if agent.published_version_id is None and agent.drafts:
        raise NoPublishedVersion(f"agent {agent.slug!r} has no published version yet")
    return agent.published_version


def served_agent(
    *, agent: Agent, session_id: str, key: ApiKey | None, pinned: AgentVersion | None = None
) -> ServedAgent:
    version = version_for_session(agent=agent, session_id=session_id, key=key, pinned=pinned)
    config = version.config if version is not None else agent_snapshot(agent)
    return ServedAgent(pk=agent.pk, slug=agent.slug, version=version, config=config)


def draft_served(agent: Agent) -> ServedAgent:
    """The draft itself, for tests run against it."""
    return ServedAgent(pk=agent.pk, slug=agent.slug, version=None, config=agent_snapshot(agent))


def version_served(agent: Agent, version: AgentVersion) -> ServedAgent:
    return ServedAgent(pk=agent.pk, slug=agent.slug, version=version, config=version.config)


# ---------------------------------------------------------------- diffs


@dataclass(frozen=True)
class FieldChange:
    name: str
    before: Any
    after: Any
    lines: list[str]  # a unified diff for texts and JSON, without its header


def _as_lines(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.splitlines()
    return json.dumps(value, indent=2, sort_keys=True, default=str).splitlines()


def versions_diff(before: dict[str, Any], after: dict[str, Any]) -> list[FieldChange]:
    """What changed from one config to another, field by field."""
    changes = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        lines = list(difflib.unified_diff(_as_lines(old), _as_lines(new), lineterm="", n=2))
        changes.append(FieldChange(name=name, before=old, after=new, lines=lines[2:]))
    return changes
