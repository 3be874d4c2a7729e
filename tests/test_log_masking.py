"""No log line carries a token a URL carries (platform_site/log_masking.py): every route
that takes a ``token`` is masked, and a logged URL has no query."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator

from django.urls import URLPattern, URLResolver, get_resolver, reverse

from platform_site.log_masking import CredentialUrlFilter, loggable_url, mask_credential_urls


def _token_routes(
    patterns: list[URLPattern | URLResolver], namespace: str = ""
) -> Iterator[tuple[str, list[str]]]:
    """(the route's name, its arguments) for every named route with a ``token`` argument."""
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            yield from _token_routes(pattern.url_patterns, inner)
        elif pattern.name and "token" in pattern.pattern.regex.groupindex:
            yield f"{namespace}{pattern.name}", list(pattern.pattern.regex.groupindex)


def test_every_route_that_takes_a_token_is_masked() -> None:
    routes = list(_token_routes(get_resolver().url_patterns))
    assert len(routes) >= 4, routes  # recordings, email verification, reset, invitation
    for name, arguments in routes:
        token = secrets.token_urlsafe(24)
        url = reverse(name, kwargs={argument: "MQ" for argument in arguments} | {"token": token})
        assert token not in mask_credential_urls(f'"GET {url}?download=1" 200'), name


def test_a_logged_url_has_no_query() -> None:
    assert loggable_url("/v1/session?token=st_abc&agent=x") == "/v1/session"
    assert loggable_url("/recordings/abc.def?download=1") == "/recordings/…"
    assert loggable_url("/password-reset/sent/") == "/password-reset/sent/"
    assert loggable_url("/verify-email/") == "/verify-email/"


def test_lines_that_pass_the_url_as_an_argument_lose_the_query_and_the_token() -> None:
    """Access-log style lines: the URL is an argument of the record, not in its message."""
    records = [
        ('%s - "%s %s HTTP/%s" %d', ("127.0.0.1:5", "GET", "/invitations/abc/?x=1", "1.1", 404)),
        ('%s - "WebSocket %s" [accepted]', ("127.0.0.1:5", "/phone/telnyx/stream?token=abc")),
    ]
    lines = []
    for message, args in records:
        record = logging.LogRecord("django.request", logging.INFO, "", 0, message, args, None)
        assert CredentialUrlFilter().filter(record)
        lines.append(record.getMessage())
    assert lines == [
        '127.0.0.1:5 - "GET /invitations/…/ HTTP/1.1" 404',
        '127.0.0.1:5 - "WebSocket /phone/telnyx/stream" [accepted]',
    ]
