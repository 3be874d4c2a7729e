"""Every name, id and header check refuses a value with a trailing newline (``$`` in a
Python pattern matches before one; the checks end with ``\\Z``)."""

from __future__ import annotations

import re

import pytest

from egress import client as egress_client
from egress import secret_refs
from engine.tools import system
from frontend import library
from mcp_app import services as mcp_services
from secrets_app import crypto, hosts, provider_credentials, validators
from telephony_app import services as telephony_services

CHECKS = [
    (mcp_services.TOOL_NAME, "lookup"),
    (mcp_services.NAME, "crm"),
    (mcp_services.HEADER_NAME, "X-Tenant"),
    (mcp_services.HEADER_VALUE, "abc"),
    (egress_client._HEADER_NAME, "X-Tenant"),
    (egress_client._HEADER_VALUE, "abc"),
    (secret_refs._BASE64_TOKEN, "Bearer abcdefgh12"),
    (system._E164, "+4915112345678"),
    (system._SIP, "sip:desk@example.com"),
    (library.FILE_NAME, "widget.js"),
    (crypto._KEY_ID, "k1"),
    (hosts._HOST, "api.example.com"),
    (provider_credentials.CONNECTION_NAME, "openai-main"),
    (validators.SECRET_NAME, "CRM_TOKEN"),
    (validators.AGENT_SLUG, "desk"),
    (telephony_services.E164, "+4915112345678"),
    (telephony_services.ACCOUNT_NAME, "Main line"),
    (telephony_services.CONNECTION_ID, "conn_1"),
]


@pytest.mark.parametrize(("check", "valid"), CHECKS, ids=[c.pattern[:30] for c, _ in CHECKS])
def test_a_trailing_newline_fails_every_check(check: re.Pattern[str], valid: str) -> None:
    assert check.match(valid)
    assert check.match(valid + "\n") is None


def test_dtmf_digits_with_a_trailing_newline_are_refused() -> None:
    assert re.fullmatch(system.DTMF_PATTERN, "12#") and not re.fullmatch(system.DTMF_PATTERN, "1\n")
