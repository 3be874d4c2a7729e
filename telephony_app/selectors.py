"""Reads of carrier accounts, numbers and calls, always scoped to a workspace."""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from secrets_app.models import Workspace
from sessions_app.models import Agent
from telephony_app.models import CarrierAccount, PhoneCall, PhoneNumber


def carrier_account_list(*, workspace: Workspace) -> QuerySet[CarrierAccount]:
    return CarrierAccount.objects.filter(workspace=workspace).defer("ciphertext")


def carrier_account_get(*, workspace: Workspace, account_id: int) -> CarrierAccount:
    return get_object_or_404(CarrierAccount, workspace=workspace, pk=account_id)


def phone_number_list(*, workspace: Workspace) -> QuerySet[PhoneNumber]:
    return PhoneNumber.objects.filter(workspace=workspace).select_related("account", "agent")


def phone_number_get(*, workspace: Workspace, number_id: int) -> PhoneNumber:
    return get_object_or_404(phone_number_list(workspace=workspace), pk=number_id)


def phone_number_by_uid(*, carrier: str, uid: str) -> PhoneNumber | None:
    """The number a carrier's webhook names (its URL is the only thing that says which);
    the signature check that follows decides whether anything happens."""
    if len(uid) > 40 or "\x00" in uid:
        return None
    return (
        PhoneNumber.objects.select_related("account", "agent", "workspace", "line_key")
        .filter(uid=uid, account__carrier=carrier)
        .first()
    )


def phone_call_list(*, workspace: Workspace) -> QuerySet[PhoneCall]:
    return PhoneCall.objects.filter(workspace=workspace).select_related("number")


def phone_call_get(*, workspace: Workspace, call_id: int) -> PhoneCall:
    return get_object_or_404(phone_call_list(workspace=workspace), pk=call_id)


def agent_get(*, workspace: Workspace, slug: str) -> Agent:
    return get_object_or_404(Agent, workspace=workspace, slug=slug)
