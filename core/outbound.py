"""The Django side of the egress guard (``egress``): its policy from settings, and the
check a customer-given URL passes when it is saved.

Every URL the platform dials on a customer's behalf (a tool's ``ctx.fetch``, a webhook, a
workspace's LLM or Orpheus URL) is held to ``policy()``: public addresses on
``EGRESS_PORTS`` only, unless ``DEV_ALLOW_PRIVATE_EGRESS`` (development only) allows any
address and port. Saving checks what needs no DNS (``clean_outbound_url``); dialling
resolves the name once and connects to the checked address. Either way a refusal says the
same sentence, which names the settings that would allow more.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError

import egress

URL_MAX = 500
PORTS_SETTING = "EGRESS_PORTS"
DEV_SETTING = "DEV_ALLOW_PRIVATE_EGRESS"


def hint() -> str:
    """What every refusal ends with: the rule, and the settings that change it."""
    ports = ", ".join(str(port) for port in sorted(settings.EGRESS_PORTS))
    return (
        f"Only public addresses on ports {ports} are reached ({PORTS_SETTING}); "
        f"on a development machine {DEV_SETTING}=true allows any address and port."
    )


def policy() -> egress.Policy:
    """The policy for every customer-given URL, as the settings are now."""
    if settings.DEV_ALLOW_PRIVATE_EGRESS:
        return egress.Policy(allow_private=True, ports=None)
    return egress.Policy(allow_private=False, ports=frozenset(settings.EGRESS_PORTS), hint=hint())


def allows_private() -> bool:
    return bool(settings.DEV_ALLOW_PRIVATE_EGRESS)


def rule_in_words() -> str:
    """The rule as it stands, for the help text of a field that takes such a URL."""
    if allows_private():
        return (
            f"This platform runs with {DEV_SETTING}=true (development): any address and "
            "port, localhost too."
        )
    ports = ", ".join(str(port) for port in sorted(settings.EGRESS_PORTS))
    return (
        f"Public addresses on ports {ports} only ({PORTS_SETTING}); "
        f"{DEV_SETTING}=true allows local ones on a development machine."
    )


def clean_outbound_url(value: str, *, schemes: tuple[str, ...], what: str = "URL") -> str:
    """A URL the platform may dial later, as the one parser normalises it (what is stored
    is what is dialled); ValidationError in words otherwise."""
    url = (value or "").strip()
    if len(url) > URL_MAX:
        raise ValidationError(f"The {what} is longer than {URL_MAX} characters.")
    try:
        target = egress.check(url, schemes=schemes, policy=policy())
    except egress.InvalidURL as error:
        raise ValidationError(f"The {what} {error}.") from None
    except egress.EgressRefused as error:
        raise ValidationError(f"The {what} is refused: {error}") from None
    if target.has_credentials:
        raise ValidationError(f"The {what} must not carry a user name or password.")
    if target.has_fragment:
        raise ValidationError(f"The {what} must not have a #fragment.")
    return target.url
