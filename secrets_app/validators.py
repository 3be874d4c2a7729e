"""Rules for what customers may store; shared by services, the API and the admin."""

from __future__ import annotations

import re
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import ValidationError

from secrets_app.hosts import normalize_host, normalize_origin

SECRET_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,63}\Z")
AGENT_SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?\Z")
MAX_LIST_ITEMS = 50


def validate_secret_name(name: str) -> None:
    if not SECRET_NAME.match(name or ""):
        raise ValidationError(
            "must be 1-64 characters of A-Z, 0-9 and _, starting with a letter (like STRIPE_KEY)"
        )


def validate_secret_value(value: str) -> None:
    if not isinstance(value, str) or value == "":
        raise ValidationError("must be a non-empty string")
    size = len(value.encode())
    if size > settings.SECRET_VALUE_MAX_BYTES:
        raise ValidationError(
            f"is {size} bytes; the limit is {settings.SECRET_VALUE_MAX_BYTES} bytes"
        )


def _normalized_list(values: list[str], normalize: Callable[[str], str], what: str) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValidationError(f"must be a list of {what}")
    if len(values) > MAX_LIST_ITEMS:
        raise ValidationError(f"at most {MAX_LIST_ITEMS} {what}")
    normalized: list[str] = []
    for value in values:
        item = normalize(value)
        if item not in normalized:
            normalized.append(item)
    return normalized


def clean_origins(values: list[str]) -> list[str]:
    return _normalized_list(values, normalize_origin, "origins")


def clean_hosts(values: list[str]) -> list[str]:
    return _normalized_list(values, normalize_host, "host names")


def clean_agent_slugs(values: list[str]) -> list[str]:
    def check(slug: str) -> str:
        if not AGENT_SLUG.match(slug):
            raise ValidationError(f"{slug!r} is not an agent slug")
        return slug

    return _normalized_list(values, check, "agent slugs")
