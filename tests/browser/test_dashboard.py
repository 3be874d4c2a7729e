"""The dashboard in real Chromium: sign up → workspace → secret → agent with a server tool
→ the playground answers in text mode through the tool → the session and its waterfall.

Screenshots of every main page at 1280 px and 390 px go to ``artifacts/dashboard/`` (not
committed): CI keeps them, people look at them.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import WEATHER_TOKEN, Platform, ThreadedLLM, WeatherApi
from tests.engine.providers.llm.openai.fake_server import Done, Finish, text_reply, tool_call

ROOT = Path(__file__).resolve().parent.parent.parent
SHOTS = ROOT / "artifacts" / "dashboard"
TIMEOUT_MS = 30_000
WIDE, NARROW = 1280, 390
PASSWORD = "a long passphrase for tests"

HANDLER = """async (args, ctx) => {
  const url = `__API__/weather?city=${encodeURIComponent(args.city)}`;
  const response = await ctx.fetch(url, {
    headers: { Authorization: `Bearer ${ctx.secrets.WEATHER_KEY}` },
  });
  return await response.json();
}"""


@pytest.fixture
def context(browser: Any) -> Any:
    context = browser.new_context(viewport={"width": WIDE, "height": 900})
    yield context
    context.close()


def shoot(page: Any, name: str) -> None:
    """Screenshots at both widths; neither the page nor a table may scroll sideways."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in (WIDE, NARROW):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
        overflow = page.evaluate("document.documentElement.scrollWidth - innerWidth")
        assert overflow <= 1, f"{name} scrolls sideways by {overflow}px at {width}px"
        hidden = page.evaluate(
            "Math.max(0, ...[...document.querySelectorAll('.table-wrap')]"
            ".map((wrap) => wrap.scrollWidth - wrap.clientWidth))"
        )
        assert hidden <= 1, f"a table of {name} hides {hidden}px of columns at {width}px"
        # Every section of the navigation in sight (no row that scrolls with no sign of it).
        cut = page.evaluate(
            "[...document.querySelectorAll('.nav a')].filter((a) => {"
            " const box = a.getBoundingClientRect();"
            " return box.left < 0 || box.right > innerWidth + 0.5 || box.width === 0;"
            "}).map((a) => a.textContent.trim())"
        )
        assert cut == [], f"{name} at {width}px hides navigation links: {cut}"
    page.set_viewport_size({"width": WIDE, "height": 900})


def sign_up(page: Any, platform: Platform, email: str, workspace: str) -> str:
    page.goto(f"{platform.url}/signup/")
    page.fill("#id_email", email)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    # The same answer for a new and a known address; a new account may log in at once
    # (only keys, the playground's too, wait for the emailed verification link).
    page.get_by_text("Check your email").wait_for()
    page.goto(platform.url + platform.mailed_link(email, "/verify-email/"))
    page.goto(f"{platform.url}/login/")
    page.fill("#id_username", email)
    page.fill("#id_password", PASSWORD)
    page.click("form.form button[type=submit]")
    page.wait_for_url("**/workspaces/new/")
    page.fill("#id_name", workspace)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/w/\d+/agents/$"))
    return str(page.url).removesuffix("agents/")


def create_secret(page: Any, workspace_url: str) -> None:
    page.goto(f"{workspace_url}secrets/new/")
    page.fill("#id_name", "WEATHER_KEY")
    page.fill("#id_value", WEATHER_TOKEN)
    page.fill("#id_allowed_hosts", "127.0.0.1")
    page.click("form.form button[type=submit]")
    page.wait_for_url(f"{workspace_url}secrets/")
    assert "WEATHER_KEY" in page.content() and WEATHER_TOKEN not in page.content()


def create_agent(page: Any, workspace_url: str, weather_api: WeatherApi) -> None:
    page.goto(f"{workspace_url}agents/new/")
    page.fill("#id_name", "Weather desk")
    page.fill("#id_instructions", "You tell people the weather. Use get_weather.")
    page.select_option("#id_mode", "text")
    add_tool = page.locator("[data-add-tool]")
    if add_tool.is_visible():
        add_tool.click()
    page.fill("#id_tools-0-name", "get_weather")
    page.fill("#id_tools-0-description", "Current weather for a city")
    page.fill(
        "#id_tools-0-handler", HANDLER.replace("__API__", f"http://127.0.0.1:{weather_api.port}")
    )
    page.fill("#id_tools-0-parameters", '{"city": "string"}')
    page.click("form.agent-form button[type=submit]")
    page.wait_for_url(f"{workspace_url}agents/weather-desk/")
    assert "pinned" in page.content().lower()


def test_from_sign_up_to_a_session_waterfall(
    platform: Platform, llm: ThreadedLLM, weather_api: WeatherApi, context: Any
) -> None:
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    missing: list[str] = []  # every 404 of every page's own requests
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    page.goto(f"{platform.url}/signup/")
    shoot(page, "signup")
    workspace_url = sign_up(
        page, platform, f"dash-{uuid.uuid4().hex[:8]}@example.com", "Weather Co"
    )
    create_secret(page, workspace_url)
    shoot(page, "secrets")
    create_agent(page, workspace_url, weather_api)
    shoot(page, "agent-editor")

    asked, fetched = len(llm.requests), len(weather_api.requests)
    llm.script(
        tool_call(0, "call_1", "get_weather", '{"city": "Paris"}'), Finish("tool_calls"), Done()
    )
    llm.script(text_reply("It is 21 degrees and sunny in Paris."))
    page.goto(f"{workspace_url}playground/?agent=weather-desk&mode=text")
    page.click('[data-action="start"]')
    page.locator(".va-input").wait_for(timeout=TIMEOUT_MS)
    stops = page.get_by_role("button", name="Stop", exact=True)
    assert stops.count() == 1 and stops.is_visible()  # one Stop: the page's, not a second
    page.fill(".va-input", "What is the weather in Paris?")
    page.click(".va-send")
    page.locator(".va-message.va-assistant", has_text="21 degrees").wait_for(timeout=TIMEOUT_MS)
    log = page.locator("#event-log")
    log.locator("li[data-type=tool_status]").first.wait_for(timeout=TIMEOUT_MS)
    assert log.locator("li[data-type=chat]").count() >= 1
    # A long entry is folded, not cut: a click shows all of it.
    metrics = log.locator("li[data-type=metrics]").first
    metrics.wait_for(timeout=TIMEOUT_MS)
    summary = metrics.locator("summary")
    assert "show all" in summary.inner_text()
    assert not metrics.get_by_text('"usage"').first.is_visible()
    summary.click()
    full = metrics.locator("details > div")
    assert full.is_visible() and '"usage"' in full.inner_text()
    json.loads(full.inner_text())  # all of it: the whole event, as JSON
    # The handler ran with the stored secret against the customer's API; the LLM read it.
    (request,) = weather_api.requests[fetched:]
    assert request.headers["authorization"] == f"Bearer {WEATHER_TOKEN}"
    tool_message = llm.requests[asked + 1].json["messages"][-1]
    assert tool_message["role"] == "tool" and json.loads(tool_message["content"])["sky"] == "sunny"
    assert WEATHER_TOKEN not in page.content()
    shoot(page, "playground")
    session_link = page.locator(".playground-session a")
    session_id = session_link.inner_text()
    page.click('[data-action="stop"]')
    assert page.locator('[data-action="start"]').is_enabled()

    page.goto(f"{workspace_url}sessions/")
    row = page.locator("table tr", has_text="Weather desk")
    row.first.wait_for(timeout=TIMEOUT_MS)
    shoot(page, "sessions")
    page.goto(f"{workspace_url}sessions/{session_id}/")
    assert "get_weather" in page.content() and "sunny" in page.content()
    chart = page.locator("svg[role=img]").first
    chart.wait_for(timeout=TIMEOUT_MS)
    assert chart.locator("rect").count() >= 3  # LLM, tool, LLM first token… as bars
    assert WEATHER_TOKEN not in page.content()
    shoot(page, "session-detail")

    for name, path in [
        ("agents", "agents/"),
        ("templates", "agents/templates/"),
        ("keys", "keys/"),
        ("members", "members/"),
        ("usage", "usage/"),
        ("usage-per-agent", "usage/?group=agent"),
        ("providers", "providers/"),
        ("webhooks", "webhooks/"),
    ]:
        page.goto(f"{workspace_url}{path}")
        shoot(page, name)
    assert errors == []
    assert missing == []


def test_another_workspace_sees_none_of_it(platform: Platform, browser: Any) -> None:
    owner = browser.new_context()
    stranger = browser.new_context()
    try:
        workspace_url = sign_up(
            owner.new_page(), platform, f"a-{uuid.uuid4().hex[:8]}@example.com", "A"
        )
        page = stranger.new_page()
        sign_up(page, platform, f"b-{uuid.uuid4().hex[:8]}@example.com", "B")
        for path in ("agents/", "secrets/", "keys/", "sessions/", "playground/", "members/"):
            response = page.goto(f"{workspace_url}{path}")
            assert response.status == 404, path
    finally:
        owner.close()
        stranger.close()
