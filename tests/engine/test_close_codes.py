"""Close codes are one enum: the protocol page's table lists exactly the ones the platform
sends, and close_reasons gives each of them words for the dashboard."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from engine.protocol import CloseCode
from sessions_app.close_reasons import CLOSE_REASONS

PROTOCOL_PAGE = Path(__file__).parents[2] / "docs" / "protocol.md"
# Sent by the platform itself: its own range, a displaced socket, a restart on the record.
SENT = {code for code in CloseCode if code >= 4000} | {CloseCode.DISPLACED, CloseCode.RESTART}


def documented_close_codes() -> set[int]:
    lines = PROTOCOL_PAGE.read_text().splitlines()
    header = lines.index("| Close code | Error code | Why |")
    rows = itertools.takewhile(lambda line: line.startswith("|"), lines[header + 2 :])
    return {int(match) for row in rows for match in re.findall(r"^\| (\d{4}) \|", row)}


def test_the_protocol_page_lists_exactly_the_close_codes_the_platform_sends() -> None:
    assert documented_close_codes() == SENT


def test_every_close_code_a_record_can_hold_has_words() -> None:
    recorded = SENT - {CloseCode.TRY_AGAIN}  # refused before any record exists
    assert recorded <= set(CLOSE_REASONS)
