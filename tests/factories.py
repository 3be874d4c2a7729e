"""Test data built through the real services (so tests exercise the real rules)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from secrets_app import scopes, services
from secrets_app.models import ApiKey, User, Workspace
from tests.telephony_app.carrier import TWILIO_SID, TWILIO_TOKEN


@dataclass
class Tenant:
    user: User
    workspace: Workspace
    publishable_key: str
    secret_key: str


def make_tenant(email: str, *, workspace_name: str = "Workspace", **pk_options: Any) -> Tenant:
    """A user, their workspace, a publishable key and an all-scopes secret key.

    New publishable keys refuse inline config and inline tool code; most tests send
    their own configure, so this key opts in to both (pass ``allow_inline_config=False``
    etc. to test the defaults).
    """
    user, _ = services.user_get_or_create(email=email, password="pw-" + email)
    workspace = services.workspace_create(name=workspace_name, owner=user)
    pk_options = {"allow_inline_config": True, "allow_inline_tool_code": True, **pk_options}
    _, publishable = services.api_key_create(
        workspace=workspace, kind=ApiKey.Kind.PUBLISHABLE, label="browser", **pk_options
    )
    _, secret = services.api_key_create(
        workspace=workspace, kind=ApiKey.Kind.SECRET, label="server", scopes=scopes.ALL
    )
    return Tenant(user=user, workspace=workspace, publishable_key=publishable, secret_key=secret)


def order_tool(**overrides: Any) -> dict[str, Any]:
    tool = {
        "name": "track_order",
        "description": "Look up an order by number",
        "parameters": {"order_number": "string"},
        "handler": "async (args, ctx) => ({ status: 'shipped', order: args.order_number })",
    }
    return {**tool, **overrides}


def phone_line(
    workspace: Workspace, agent: str, *, number: str = "+14155550100", name: str = "Main Twilio"
) -> tuple[Any, Any]:
    """A Twilio account (made once per workspace, by name) and a number answered by ``agent``."""
    from telephony_app import services as phone_services
    from telephony_app.models import CarrierAccount

    account = CarrierAccount.objects.filter(workspace=workspace, name=name).first()
    if account is None:
        account = phone_services.carrier_account_create(
            workspace=workspace, carrier="twilio", name=name, account_sid=TWILIO_SID,
            credential=TWILIO_TOKEN,
        )  # fmt: skip
    phone = phone_services.phone_number_create(
        workspace=workspace, account=name, number=number, agent=agent
    )
    return account, phone
