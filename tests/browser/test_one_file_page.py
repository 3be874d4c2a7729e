"""The one-file page in real Chromium: speech in, a server tool with a secret, speech out,
barge-in, and the errors a person can read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.browser.conftest import WEATHER_TOKEN, Pages, Platform, ThreadedLLM, WeatherApi
from tests.engine.providers.llm.openai.fake_server import Done, Finish, Text, text_reply, tool_call
from tests.speech import words

ROOT = Path(__file__).resolve().parent.parent.parent
TIMEOUT_MS = 30_000

WEATHER_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Weather</title></head>
<body>
  <div id="app"></div>
  <script type="module">
    import { VoiceAgent } from "__PLATFORM__/client.js";
    window.__samples = 0;
    window.__events = [];
    const agent = VoiceAgent.start({
      element: document.querySelector("#app"),
      apiKey: "__KEY__",
      mode: "__MODE__",
      instructions: "You tell people the weather.",
      tools: {
        get_weather: {
          description: "Current weather for a city",
          parameters: { city: "string" },
          handler: async (args, ctx) => {
            const url = `__API__/weather?city=${encodeURIComponent(args.city)}`;
            const response = await ctx.fetch(url, {
              headers: { Authorization: `Bearer ${ctx.secrets.WEATHER_KEY}` },
            });
            return await response.json();
          },
        },
      },
    });
    agent.on("audio", ({ samples }) => { window.__samples += samples; });
    agent.on("event", (event) => { window.__events.push(event.type); });
    window.__agent = agent;
  </script>
</body></html>
"""


def weather_page(
    pages: Pages, platform: Platform, weather_api: WeatherApi, *, key: str | None = None,
    mode: str = "voice",
) -> str:  # fmt: skip
    html = (
        WEATHER_PAGE.replace("__PLATFORM__", platform.url)
        .replace("__KEY__", key or platform.publishable_key)
        .replace("__MODE__", mode)
        .replace("__API__", f"http://127.0.0.1:{weather_api.port}")
    )
    return pages.add(f"weather-{mode}-{(key or 'pk')[:12]}.html", html)


def store_weather_secret(platform: Platform) -> None:
    platform.api(
        "POST",
        "secrets",
        {"name": "WEATHER_KEY", "value": WEATHER_TOKEN, "allowed_hosts": ["127.0.0.1"]},
    )


def test_speech_to_a_server_tool_to_speech(
    platform: Platform, llm: ThreadedLLM, weather_api: WeatherApi, pages: Pages, page: Any
) -> None:
    store_weather_secret(platform)
    asked, fetched = len(llm.requests), len(weather_api.requests)
    llm.script(
        tool_call(0, "call_1", "get_weather", '{"city": "Paris"}'), Finish("tool_calls"), Done()
    )
    llm.script(text_reply("It is 21 degrees and sunny in Paris."))
    page.goto(weather_page(pages, platform, weather_api))
    page.locator(".va-start").click()

    user = page.locator(".va-message.va-user").first
    user.wait_for(timeout=TIMEOUT_MS)
    assert "weather in paris" in " ".join(words(user.inner_text()))
    reply = page.locator(".va-message.va-assistant", has_text="21 degrees")
    reply.wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function("window.__samples > 24000", timeout=TIMEOUT_MS)  # > 1 s of speech

    # The handler ran on the platform, with the secret, against the customer's API.
    (request,) = weather_api.requests[fetched:]
    assert request.headers["authorization"] == f"Bearer {WEATHER_TOKEN}"
    assert request.target == "/weather?city=Paris"
    tool_message = llm.requests[asked + 1].json["messages"][-1]
    assert tool_message["role"] == "tool" and json.loads(tool_message["content"])["sky"] == "sunny"
    assert WEATHER_TOKEN not in page.content()  # the browser never saw the secret


def test_barge_in_from_the_page_flushes_playback(
    platform: Platform, llm: ThreadedLLM, weather_api: WeatherApi, pages: Pages, page: Any
) -> None:
    long_reply = " ".join(
        f"Sentence number {n} of a long answer about the weather." for n in range(12)
    )
    llm.script(Text(long_reply), Finish("stop"), Done())
    page.goto(weather_page(pages, platform, weather_api))
    page.locator(".va-start").click()
    page.wait_for_function("window.__samples > 0", timeout=TIMEOUT_MS)
    page.evaluate("window.__agent.cancel()")
    page.wait_for_function("window.__events.includes('cancelled')", timeout=5_000)
    played = page.evaluate("window.__samples")
    page.wait_for_timeout(700)
    assert page.evaluate("window.__samples") == played  # nothing more reached the speaker
    status = page.locator(".va-status").inner_text().lower()
    assert "speaking" not in status


def test_a_refused_key_reads_as_words(
    platform: Platform, weather_api: WeatherApi, pages: Pages, page: Any
) -> None:
    page.goto(weather_page(pages, platform, weather_api, key="pk_not_a_real_key", mode="text"))
    error = page.locator(".va-error")
    error.wait_for(timeout=TIMEOUT_MS)
    assert "API key was refused" in error.inner_text()


def test_a_refused_origin_reads_as_words(
    platform: Platform, weather_api: WeatherApi, pages: Pages, page: Any
) -> None:
    shop_key = platform.api(
        "POST", "keys", {"kind": "publishable", "allowed_origins": ["https://shop.example"]}
    )["key"]
    page.goto(weather_page(pages, platform, weather_api, key=shop_key, mode="text"))
    error = page.locator(".va-error")
    error.wait_for(timeout=TIMEOUT_MS)
    assert "not allowed" in error.inner_text()


def test_a_denied_microphone_reads_as_words_and_text_still_works(
    platform: Platform,
    llm: ThreadedLLM,
    weather_api: WeatherApi,
    pages: Pages,
    browser_without_microphone: Any,
) -> None:
    llm.script(text_reply("Typing works too."))
    context = browser_without_microphone.new_context()  # no microphone permission
    page = context.new_page()
    try:
        page.goto(weather_page(pages, platform, weather_api))
        page.locator(".va-start").click()
        error = page.locator(".va-error")
        error.wait_for(timeout=TIMEOUT_MS)
        assert "Microphone access was denied" in error.inner_text()
        page.locator(".va-input").fill("hello?")
        page.locator(".va-input").press("Enter")
        page.locator(".va-message.va-assistant", has_text="Typing works too.").wait_for(
            timeout=TIMEOUT_MS
        )
    finally:
        context.close()


def test_the_shipped_one_file_example_runs(platform: Platform, pages: Pages, page: Any) -> None:
    html = (ROOT / "examples/vanilla/index.html").read_text()
    assert len(html.splitlines()) <= 35  # "one HTML file, about 30 lines"
    html = html.replace("http://127.0.0.1:8000", platform.url).replace(
        "pk_your_publishable_key", platform.publishable_key
    )
    page.goto(pages.add("vanilla/index.html", html))
    page.locator(".va-start").click()
    greeting = page.locator(".va-message.va-assistant", has_text="check your order status")
    greeting.wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function(
        "document.querySelector('.va-status').innerText.length > 0", timeout=TIMEOUT_MS
    )
