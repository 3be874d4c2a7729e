"""Writes for carrier accounts and phone numbers; every change is in the audit log."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from secrets_app import services as key_services
from secrets_app.audit import SYSTEM, Actor, audit_record
from secrets_app.models import Workspace
from secrets_app.services import sealed_open, sealed_store
from secrets_app.validators import validate_secret_value
from sessions_app import versions
from sessions_app.models import Agent
from telephony_app.models import AgentCallSettings, CarrierAccount, MachineAction, PhoneNumber

E164 = re.compile(r"^\+[1-9][0-9]{6,14}\Z")
TWILIO_SID = re.compile(r"^AC[0-9a-f]{32}\Z")
ACCOUNT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}\Z")

Carrier = CarrierAccount.Carrier
UNCHANGED = object()  # an argument left out (None means: clear it)


def validate_e164(number: str) -> str:
    """A phone number as carriers write it: +, country code, digits (E.164), no spaces."""
    cleaned = re.sub(r"[\s().-]", "", number or "")
    if not E164.match(cleaned):
        raise ValidationError("must be an E.164 number like +14155550123")
    return cleaned


def number_masked(number: str) -> str:
    """A number as logs show it: country code and the last two digits."""
    return f"{number[:3]}…{number[-2:]}" if len(number) > 6 else "…"


def _clean_public_key(value: str) -> str:
    try:
        raw = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise ValidationError({"public_key": ["must be Telnyx's Ed25519 public key (base64)"]})
    return value.strip()


CONNECTION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")


def _clean_connection_id(value: str) -> str:
    if value and not CONNECTION_ID.match(value):
        raise ValidationError({"connection_id": ["letters, digits, '-' or '_', up to 64"]})
    return value


def _clean_account(
    carrier: str, name: str, account_sid: str, public_key: str, connection_id: str = ""
) -> dict[str, str]:
    if carrier not in Carrier.values:
        raise ValidationError({"carrier": [f"must be one of {', '.join(Carrier.values)}"]})
    if not ACCOUNT_NAME.match(name or ""):
        raise ValidationError({"name": ["letters, digits, space, '.', '_' or '-', up to 64"]})
    if carrier == Carrier.TWILIO:
        if not TWILIO_SID.match(account_sid or ""):
            raise ValidationError({"account_sid": ["must be AC followed by 32 hex digits"]})
        return {"account_sid": account_sid, "public_key": "", "connection_id": ""}
    return {
        "account_sid": "",
        "public_key": _clean_public_key(public_key),
        "connection_id": _clean_connection_id(connection_id),
    }


def _seal_credential(account: CarrierAccount, credential: str) -> None:
    try:
        validate_secret_value(credential)
    except ValidationError as error:
        raise ValidationError({"credential": error.messages}) from None
    sealed_store(account, credential)
    account.credential_last4 = credential[-4:]


def carrier_account_create(
    *, workspace: Workspace, carrier: str, name: str, credential: str,
    account_sid: str = "", public_key: str = "", connection_id: str = "", actor: Actor = SYSTEM,
) -> CarrierAccount:  # fmt: skip
    """``credential``: Twilio's auth token, Telnyx's API key (sealed, never shown again).
    ``connection_id``: Telnyx's Call Control application, to place calls from."""
    account = CarrierAccount(
        workspace=workspace, carrier=carrier, name=name,
        **_clean_account(carrier, name, account_sid, public_key, connection_id),
    )  # fmt: skip
    _seal_credential(account, credential)
    try:
        with transaction.atomic():
            account.save()
    except IntegrityError:
        raise ValidationError({"name": ["the workspace has an account of this name"]}) from None
    _audit(account.workspace, actor, "carrier_account.created", account, {"carrier": carrier})
    return account


def carrier_account_update(
    *, account: CarrierAccount, actor: Actor = SYSTEM, name: str | None = None,
    credential: str | None = None, account_sid: str | None = None, public_key: str | None = None,
    connection_id: str | None = None,
) -> CarrierAccount:  # fmt: skip
    name = account.name if name is None else name
    cleaned = _clean_account(
        account.carrier, name,
        account.account_sid if account_sid is None else account_sid,
        account.public_key if public_key is None else public_key,
        account.connection_id if connection_id is None else connection_id,
    )  # fmt: skip
    changed = [
        field
        for field, value in (("name", name), *cleaned.items())
        if getattr(account, field) != value
    ]
    account.name = name
    for field, value in cleaned.items():
        setattr(account, field, value)
    if credential is not None:
        _seal_credential(account, credential)
        changed.append("credential")
    account.updated_at = timezone.now()
    try:
        with transaction.atomic():
            account.save()
    except IntegrityError:
        raise ValidationError({"name": ["the workspace has an account of this name"]}) from None
    _audit(account.workspace, actor, "carrier_account.updated", account, {"changed": changed})
    return account


def carrier_account_delete(*, account: CarrierAccount, actor: Actor = SYSTEM) -> None:
    if account.numbers.exists():
        raise ValidationError({"account": ["delete the account's numbers first"]})
    _audit(account.workspace, actor, "carrier_account.deleted", account, {})
    account.delete()


def carrier_credential(account: CarrierAccount) -> str:
    """The account's sealed credential, to sign or call with. Never logged, never shown."""
    return sealed_open(account)


# ---------------------------------------------------------------- numbers


def _account_of(workspace: Workspace, name: str) -> CarrierAccount:
    account = CarrierAccount.objects.filter(workspace=workspace, name=name).first()
    if account is None:
        raise ValidationError({"account": ["no carrier account of this name"]})
    return account


def agent_of(workspace: Workspace, slug: str) -> Agent:
    agent = (
        Agent.objects.filter(workspace=workspace, slug=slug).first() if "\x00" not in slug else None
    )
    if agent is None:
        raise ValidationError({"agent": ["no agent with this slug"]})
    return agent


def phone_number_create(
    *, workspace: Workspace, account: str, number: str, agent: str, label: str = "",
    actor: Actor = SYSTEM,
) -> PhoneNumber:  # fmt: skip
    """A number of the carrier account named ``account``, answered by ``agent`` (a slug).
    It gets a publishable key of its own, for session tokens only, that its calls'
    sessions belong to (see ``PhoneNumber``)."""
    try:
        cleaned = validate_e164(number)
    except ValidationError as error:
        raise ValidationError({"number": error.messages}) from None
    carrier_account, saved_agent = _account_of(workspace, account), agent_of(workspace, agent)
    with transaction.atomic():
        key_services.workspace_lock(workspace_id=workspace.pk)  # one number added at a time
        if PhoneNumber.objects.filter(workspace=workspace, number=cleaned).exists():
            raise ValidationError({"number": ["the workspace has this number already"]})
        line_key = key_services.line_key_create(
            workspace=workspace,
            label=f"Phone line {cleaned}",
            agent=saved_agent.slug,
            actor=actor,
        )
        phone = PhoneNumber.objects.create(
            workspace=workspace, account=carrier_account, number=cleaned, agent=saved_agent,
            label=label[:100], line_key=line_key,
        )  # fmt: skip
    _audit(workspace, actor, "phone_number.created", phone, {"agent": saved_agent.slug})
    return phone


def phone_number_update(
    *, phone: PhoneNumber, actor: Actor = SYSTEM, agent: str | None = None,
    label: str | None = None, agent_version: object = UNCHANGED,
) -> PhoneNumber:  # fmt: skip
    """``agent_version``: a version number of the number's (new) agent to pin its calls
    to, or None to unpin; moving the number to another agent clears its pin."""
    details: dict[str, Any] = {}
    if agent is not None and agent != phone.agent.slug:
        phone.agent = agent_of(phone.workspace, agent)
        phone.line_key.allowed_agents = [phone.agent.slug]
        phone.line_key.save(update_fields=["allowed_agents"])
        phone.agent_version = None  # a pin names a version of the agent it answered for
        details["agent"] = agent
    if agent_version is None:
        phone.agent_version = None
        details["agent_version"] = None
    elif isinstance(agent_version, int):
        phone.agent_version = versions.version_get(agent=phone.agent, number=agent_version)
        details["agent_version"] = agent_version
    if label is not None:
        phone.label = label[:100]
    phone.updated_at = timezone.now()
    phone.save()
    _audit(phone.workspace, actor, "phone_number.updated", phone, details)
    return phone


def phone_number_delete(*, phone: PhoneNumber, actor: Actor = SYSTEM) -> None:
    """The number stops answering; its line key is revoked, which ends its live calls."""
    line_key = phone.line_key
    _audit(phone.workspace, actor, "phone_number.deleted", phone, {})
    with transaction.atomic():
        phone.delete()
        key_services.line_key_revoke(key=line_key, actor=actor)


# ---------------------------------------------------------------- agents' call settings


def agent_call_settings(agent: Agent) -> AgentCallSettings:
    """The agent's call settings; the defaults (unsaved, no ``updated_at``) if never set."""
    saved = AgentCallSettings.objects.filter(workspace_id=agent.workspace_id, agent=agent).first()
    if saved is None:
        unsaved = AgentCallSettings(workspace_id=agent.workspace_id, agent=agent)
        unsaved.updated_at = None  # type: ignore[assignment]  # never set: no date to show
        return unsaved
    return saved


def machine_setting(agent: Agent) -> tuple[str, str]:
    """(what to do when a machine answers the agent's calls, the voicemail message)."""
    saved = agent_call_settings(agent)
    return saved.machine_detection, saved.voicemail_message


def agent_call_settings_update(
    *, agent: Agent, machine_detection: str, voicemail_message: str = "", actor: Actor = SYSTEM,
) -> AgentCallSettings:  # fmt: skip
    """Set what the agent's outbound calls do when an answering machine picks up."""
    if machine_detection not in MachineAction.values:
        raise ValidationError(
            {"machine_detection": [f"must be one of {', '.join(MachineAction.values)}"]}
        )
    message = (voicemail_message or "").strip()
    if machine_detection == MachineAction.LEAVE_MESSAGE and not message:
        raise ValidationError({"voicemail_message": ["say what the message is"]})
    if len(message) > 1000:
        raise ValidationError({"voicemail_message": ["at most 1000 characters"]})
    row, _ = AgentCallSettings.objects.update_or_create(
        workspace_id=agent.workspace_id, agent=agent,
        defaults={
            "machine_detection": machine_detection, "voicemail_message": message,
            "updated_at": timezone.now(),
        },
    )  # fmt: skip
    _audit(
        agent.workspace, actor, "agent_call_settings.updated", f"agent {agent.slug}",
        {"machine_detection": machine_detection},
    )  # fmt: skip
    return row


def _audit(
    workspace: Workspace, actor: Actor, action: str, target: Any, details: dict[str, Any]
) -> None:
    audit_record(
        workspace=workspace, actor=actor, action=action, target=str(target), details=details
    )
