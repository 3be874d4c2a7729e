"""A newcomer's first hour, in Chromium: the seed's React code as written (only the host and
the key changed) in a fresh Vite + React + TypeScript project, the npm package of the
library, the default UI's Start button when autoplay is blocked, secure platform URLs kept
secure, and a page opened from a file."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import Pages, Platform, ThreadedLLM, launch_with_microphone
from tests.browser.test_examples import installed
from tests.fakes.openai_server import Done, Finish, text_reply, tool_call
from tests.speech import words

ROOT = Path(__file__).resolve().parent.parent.parent
SEED = ROOT / "examples" / "seed-react"
SEED_HOST = "https://platform.example.com"
TEMPLATE_PACKAGE_HOST = "http://127.0.0.1:8000"
TIMEOUT_MS = 30_000

# The conventional path: the package from the platform, the hook from `voice-agent/react`.
NPM_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="UTF-8" /><title>npm</title></head>
<body><div id="root"></div><script type="module" src="/src/npm-main.tsx"></script></body></html>
"""
NPM_MAIN = """import { createRoot } from "react-dom/client";
import { useState } from "react";
import { useVoiceAgent } from "voice-agent/react";

function NpmApp() {
  const [draft, setDraft] = useState("");
  const { state, messages, sendText } = useVoiceAgent({
    apiKey: import.meta.env.VITE_API_KEY,
    config: { mode: "text", instructions: "Answer briefly." },
  });
  return (
    <main>
      <div className="status">{state}</div>
      {messages.map((m) => <div key={m.id} className={`message ${m.role}`}>{m.text}</div>)}
      <input className="draft" value={draft} onChange={(e) => setDraft(e.target.value)} />
      <button className="send" onClick={() => sendText(draft)}>Send</button>
    </main>
  );
}

createRoot(document.getElementById("root")!).render(<NpmApp />);
"""
NPM_CONFIG = """import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

export default defineConfig({
  plugins: [react()],
  build: { rollupOptions: { input: "npm.html" } },
});
"""


def npm_run(npm: str, project: Path, *args: str) -> None:
    result = subprocess.run(
        [npm, *args], cwd=project, capture_output=True, text=True, timeout=600,
        env={**os.environ, "npm_config_update_notifier": "false"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


@pytest.fixture(scope="module")
def seed_project(platform: Platform, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seed's files in a fresh Vite project, installed and built (`npm run build` runs
    TypeScript first, so the types of the URL import are checked too)."""
    npm, _ = installed("react")  # the same pinned versions: npm's cache already has them
    project = tmp_path_factory.mktemp("seed") / "voice-agent"
    shutil.copytree(SEED, project, ignore=shutil.ignore_patterns("node_modules", "dist"))
    app = project / "src" / "App.tsx"
    app.write_text(app.read_text().replace(SEED_HOST, platform.url))  # the host…
    (project / ".env").write_text(f"VITE_API_KEY={platform.publishable_key}\n")  # …and the key
    package = project / "package.json"
    package.write_text(package.read_text().replace(TEMPLATE_PACKAGE_HOST, platform.url))
    (project / "npm.html").write_text(NPM_PAGE)
    (project / "src" / "npm-main.tsx").write_text(NPM_MAIN)
    (project / "vite.npm.config.ts").write_text(NPM_CONFIG)
    npm_run(npm, project, "install", "--no-audit", "--no-fund", "--prefer-offline")
    # (relative asset URLs: the test serves each build from a folder, not from the root)
    npm_run(npm, project, "run", "build", "--", "--base", "./")
    npm_run(npm, project, "exec", "--", "vite", "build", "-c", "vite.npm.config.ts", "--base",
            "./", "--outDir", "dist-npm")  # fmt: skip
    return project


def test_the_seeds_react_app_runs_as_written(
    seed_project: Path, platform: Platform, llm: ThreadedLLM, pages: Pages, page: Any
) -> None:
    # Bound to another host, the secret keeps the seed's handler from reaching the real
    # api.weather.com: the call fails before any lookup, and is still a step of the reply.
    platform.api(
        "POST",
        "secrets",
        {"name": "WEATHER_API_KEY", "value": "k", "allowed_hosts": ["api.weather.example"]},
    )
    llm.script(
        tool_call(0, "call_w", "get_weather", '{"city": "Paris"}'), Finish("tool_calls"), Done()
    )
    llm.script(text_reply("I could not reach the weather service just now."))
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{pages.add_tree('seed', seed_project / 'dist')}/index.html")

    page.locator(".message.user", has_text="eather").wait_for(timeout=TIMEOUT_MS)
    reply = page.locator(".message.assistant", has_text="could not reach the weather")
    reply.wait_for(timeout=TIMEOUT_MS)
    assert reply.locator(".step").all_inner_texts() == ["Using get_weather"]
    # The reply is shown as it streams; the status moves on from "thinking" a moment later.
    page.wait_for_function(
        "['listening', 'speaking', 'ready'].includes(document.querySelector('.status')"
        "?.textContent.trim())",
        timeout=TIMEOUT_MS,
    )
    assert errors == []


def test_the_npm_package_gives_the_hook_with_types(
    seed_project: Path, llm: ThreadedLLM, pages: Pages, page: Any
) -> None:
    llm.script(text_reply("Installed from the platform."))
    page.goto(f"{pages.add_tree('seed-npm', seed_project / 'dist-npm')}/npm.html")
    page.locator(".status", has_text="ready").wait_for(timeout=TIMEOUT_MS)
    page.fill(".draft", "Hello?")
    page.click(".send")
    page.locator(".message.assistant", has_text="Installed from the platform.").wait_for(
        timeout=TIMEOUT_MS
    )
    types = seed_project / "node_modules" / "voice-agent" / "react.d.ts"
    assert "useVoiceAgent" in types.read_text()


# ---------------------------------------------------------------- the default UI


VOICE_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Start</title></head>
<body><div id="app"></div>
<script type="module">
  import { VoiceAgent } from "__PLATFORM__/client.js";
  window.__samples = 0;
  const agent = VoiceAgent.start({
    element: "#app", apiKey: "__KEY__", greeting: "Hello there, I can hear you now.",
    instructions: "Be brief.", __EXTRA__
  });
  agent.on("audio", ({ samples }) => { window.__samples += samples; });
  window.__agent = agent;
</script></body></html>
"""


def voice_page(pages: Pages, platform: Platform, name: str, extra: str = "") -> str:
    html = (
        VOICE_PAGE.replace("__PLATFORM__", platform.url)
        .replace("__KEY__", platform.publishable_key)
        .replace("__EXTRA__", extra)
    )
    return pages.add(name, html)


@pytest.fixture(scope="module")
def strict_browser(playwright_instance: Any, speech_wav: Path) -> Any:
    """Chromium with its default autoplay rules: no sound before the user clicks."""
    browser = launch_with_microphone(playwright_instance, speech_wav, autoplay=False)
    yield browser
    browser.close()


def test_the_start_button_starts_sound_and_microphone_with_autoplay_blocked(
    strict_browser: Any, platform: Platform, llm: ThreadedLLM, pages: Pages
) -> None:
    llm.script(text_reply("It is sunny in Paris."))
    context = strict_browser.new_context()
    page = context.new_page()
    try:
        page.goto(voice_page(pages, platform, "start.html"))
        start = page.locator(".va-start")
        start.wait_for(timeout=TIMEOUT_MS)
        assert page.locator(".va-status").inner_text() == "Press Start to talk"
        assert page.evaluate("window.__agent.status") == "idle"  # nothing before the click
        start.click()
        page.wait_for_function("window.__samples > 12000", timeout=TIMEOUT_MS)  # the greeting
        page.locator(".va-level").wait_for(timeout=TIMEOUT_MS)  # the microphone meter
        user = page.locator(".va-message.va-user").first
        user.wait_for(timeout=TIMEOUT_MS)  # the microphone was heard
        assert "weather in paris" in " ".join(words(user.inner_text()))
        page.locator(".va-message.va-assistant", has_text="sunny in Paris").wait_for(
            timeout=TIMEOUT_MS
        )
        assert not start.is_visible()
        assert page.locator(".va-input").is_visible()  # typing is the fallback
    finally:
        context.close()


# ---------------------------------------------------------------- URLs and files

RECORD_SOCKETS = """
window.__sockets = [];
window.WebSocket = class {
  static OPEN = 1;
  constructor(url) { window.__sockets.push(String(url)); this.readyState = 0; }
  send() {}
  close() {}
};
"""
URL_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><div id="app"></div>
<script type="module">
  import { VoiceAgent } from "__PLATFORM__/client.js";
  window.__start = (platformUrl) => {
    try {
      VoiceAgent.start({ ui: false, apiKey: "pk_x", mode: "text", platformUrl });
      return "started";
    } catch (error) { return `${error.name}: ${error.message}`; }
  };
  window.__ready = true;
</script></body></html>
"""


def test_secure_platform_urls_stay_secure_and_others_are_refused(
    platform: Platform, pages: Pages, page: Any
) -> None:
    page.add_init_script(RECORD_SOCKETS)  # no socket leaves the machine
    page.goto(pages.add("urls.html", URL_PAGE.replace("__PLATFORM__", platform.url)))
    page.wait_for_function("window.__ready === true", timeout=TIMEOUT_MS)
    for url in ("wss://voice.example.test", "https://voice.example.test/base/"):
        assert page.evaluate("(url) => window.__start(url)", url) == "started"
    page.wait_for_function("window.__sockets.length === 2", timeout=TIMEOUT_MS)
    wss, https = page.evaluate("window.__sockets")
    assert wss.startswith("wss://voice.example.test/v1/session?key=pk_x")
    assert https.startswith("wss://voice.example.test/base/v1/session?key=pk_x")
    refused = page.evaluate("window.__start('ftp://voice.example.test')")
    assert refused.startswith("TypeError:") and "https://, wss://" in refused
    assert page.evaluate("window.__start('voice.example.test')").startswith("TypeError:")
    assert len(page.evaluate("window.__sockets")) == 2


def test_a_page_opened_from_a_file_says_how_to_serve_it(
    platform: Platform, tmp_path: Path, page: Any
) -> None:
    page.add_init_script(RECORD_SOCKETS)
    html = tmp_path / "index.html"
    html.write_text(
        VOICE_PAGE.replace("__PLATFORM__", platform.url)
        .replace("__KEY__", platform.publishable_key)
        .replace("__EXTRA__", "")
    )
    page.goto(html.as_uri())
    error = page.locator(".va-error")
    error.wait_for(timeout=TIMEOUT_MS)
    assert "opened from a file" in error.inner_text()
    assert "http://localhost:8080/" in error.inner_text()
    assert page.evaluate("window.__sockets") == []  # it did not even try
