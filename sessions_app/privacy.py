"""What a session may keep of what was said: zero retention and redaction.

A session's privacy is fixed when it starts (``session_privacy``) and stored on its record,
so every write of the record asks the record, not the settings of the moment: a session
that started under zero retention stays so, even across a resume on another process.

Redaction replaces e-mail addresses, card numbers (13 to 19 digits passing the Luhn check)
and phone numbers (7 to 15 digits) written as digits; numbers spoken as words are not
recognised (docs/privacy.md says so).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from secrets_app.models import Workspace
from sessions_app.models import Agent, RetentionPolicy

EMAIL_MASK = "[email]"
CARD_MASK = "[card number]"
PHONE_MASK = "[phone number]"

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# Digits with single spaces or dashes between groups; the digit count decides what it is.
_NUMBER = re.compile(r"(?<![\w+])\+?\(?\d[\d ().-]{5,30}\d(?!\w)")


@dataclass(frozen=True)
class SessionPrivacy:
    zero_retention: bool = False
    redacted: bool = False


def retention_policy(*, workspace: Workspace) -> RetentionPolicy:
    """The workspace's policy (an unsaved default one when it never set any)."""
    found = RetentionPolicy.objects.filter(workspace=workspace).first()
    return found if found is not None else RetentionPolicy(workspace=workspace)


def session_privacy(*, workspace: Workspace, agent: Agent | None) -> SessionPrivacy:
    """Zero retention when the workspace or the agent asks for it; redaction by workspace."""
    policy = retention_policy(workspace=workspace)
    zero = policy.zero_retention or (agent is not None and agent.zero_retention)
    return SessionPrivacy(zero_retention=zero, redacted=policy.redact_transcripts and not zero)


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _number_mask(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group())
    if 13 <= len(digits) <= 19 and _luhn(digits):
        return CARD_MASK
    if 7 <= len(digits) <= 15:
        return PHONE_MASK
    return match.group()


def redact(text: str) -> str:
    """``text`` with e-mail addresses, card numbers and phone numbers masked."""
    return _NUMBER.sub(_number_mask, _EMAIL.sub(EMAIL_MASK, text))
