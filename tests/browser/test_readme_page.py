"""The README's one-file page, exactly as written there, in real Chromium: with the key
`./dev.sh` prints (inline config on, no allowed origins: localhost pages only), served
from localhost, it greets, hears a spoken question and speaks the model's answer."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.browser.conftest import Pages, Platform, ThreadedLLM
from tests.engine.providers.llm.openai.fake_server import text_reply
from tests.speech import words

README = Path(__file__).resolve().parents[2] / "README.md"
TIMEOUT_MS = 30_000


def readme_page(platform: Platform) -> str:
    blocks = re.findall(r"```html\n(.*?)```", README.read_text(), re.DOTALL)
    [html] = [block for block in blocks if "VoiceAgent.start" in block]
    assert 'from "http://127.0.0.1:8000/client.js"' in html and 'apiKey: "pk_…"' in html
    return html.replace("http://127.0.0.1:8000", platform.url).replace(
        '"pk_…"', json.dumps(platform.publishable_key)
    )


def test_the_readmes_first_page_greets_hears_and_answers(
    platform: Platform, llm: ThreadedLLM, pages: Pages, page: Any
) -> None:
    asked = len(llm.requests)
    llm.script(text_reply("It is sunny in Paris today."))
    page.goto(pages.add("readme/index.html", readme_page(platform)))
    page.locator(".va-start").click()

    greeting = page.locator(".va-message.va-assistant", has_text="Ask me anything about Paris")
    greeting.wait_for(timeout=TIMEOUT_MS)
    user = page.locator(".va-message.va-user").first
    user.wait_for(timeout=TIMEOUT_MS)
    assert "weather in paris" in " ".join(words(user.inner_text()))
    page.locator(".va-message.va-assistant", has_text="sunny in Paris").wait_for(timeout=TIMEOUT_MS)
    instructions = llm.requests[asked].json["messages"][0]["content"]
    assert "friendly guide to Paris" in instructions
