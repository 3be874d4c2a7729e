"""Close codes are one enum: the protocol page's table lists exactly the ones the platform
sends, and close_reasons gives each of them words for the dashboard."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from engine.protocol import CloseCode
from sessions_app.close_reasons import CLOSE_REASONS

PROTOCOL_PAGE = Path(__file__).parents[2] / "docs" / "protocol.md"
# Sent by the platform itself: its own range, and a restart on the record.
SENT = {code for code in CloseCode if code >= 4000} | {CloseCode.RESTART}


def documented_close_codes() -> set[int]:
    lines = PROTOCOL_PAGE.read_text().splitlines()
    header = lines.index("| Close code | Error code | Why |")
    rows = itertools.takewhile(lambda line: line.startswith("|"), lines[header + 2 :])
    return {int(match) for row in rows for match in re.findall(r"^\| (\d{4}) \|", row)}


def test_the_protocol_page_lists_exactly_the_close_codes_the_platform_sends() -> None:
    assert documented_close_codes() == SENT


def test_every_close_code_a_record_can_hold_has_words() -> None:
    # Refused before any record exists; a displaced socket's session goes on elsewhere.
    recorded = SENT - {CloseCode.TRY_AGAIN, CloseCode.DISPLACED}
    assert recorded <= set(CLOSE_REASONS)


def test_every_close_code_the_platform_sends_is_one_daphne_may_send() -> None:
    """autobahn refuses any other code, and the socket then stays open."""
    assert all(code == CloseCode.NORMAL or 3000 <= code <= 4999 for code in SENT - {1012})
