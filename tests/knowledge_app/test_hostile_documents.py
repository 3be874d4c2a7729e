"""Documents made to take a parser quadratic time: read by the same fenced command the
platform runs, each well inside the parse timeout (one slow file would hold the
``knowledge`` queue, and so every workspace's indexing, for a minute)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _parse(kind: str, content: bytes) -> tuple[float, dict[str, str]]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-E", "-s", "-m", "knowledge_app.parse_worker", kind, "500", "2000000"],
        input=content, capture_output=True, timeout=120, cwd=ROOT, check=True,
    )  # fmt: skip
    return time.monotonic() - started, json.loads(done.stdout)


@pytest.mark.parametrize(
    ("kind", "content"),
    [
        ("markdown", b"[" * 80_000),  # 80 KB: past the 60 s limit on main
        ("markdown", b"[](" * 30_000),
        ("html", b"<!--" * 20_000),  # 80 KB: 11 s with html.parser
        ("html", b"<a b='" * 20_000),
    ],
    ids=["markdown-brackets", "markdown-parens", "html-comments", "html-attributes"],
)
def test_a_small_hostile_file_is_read_in_well_under_the_parse_timeout(
    kind: str, content: bytes
) -> None:
    seconds, answer = _parse(kind, content)
    assert seconds < 3, seconds
    assert "text" in answer


def test_html_and_markdown_still_read_as_text() -> None:
    page = (
        b'<?xml version="1.0" encoding="utf-8"?><html><head><title>Hidden</title>'
        b"<style>p{}</style></head><body><h1>Returns</h1><p>Within 30 days &amp; with a "
        b"receipt.<br>Caf\xc3\xa9 hours</p><!-- a note --><script>track()</script>Thanks</body>"
    )
    _, answer = _parse("html", page)
    wanted = "Returns\n\nWithin 30 days & with a receipt.\n\nCaf\u00e9 hours\nThanks"
    assert answer["text"] == wanted
    _, answer = _parse("markdown", b"# Help\nSee [the guide](https://x.example/g) ![logo](l.png).")
    assert answer["text"] == "Help\nSee the guide logo."
