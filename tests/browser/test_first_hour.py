"""A newcomer's first hour, in Chromium: the seed's React code as written (only the host and
the key changed) in a fresh Vite + React + TypeScript project, built and on the dev server;
the seed's pages with a new key (the refusal names the key's switches); the seed's app when
the browser holds sound until a click (the hint, and the click that starts it); the first
words said before the session is ready; the npm package of the library, the default UI's
Start button when autoplay is blocked, secure platform URLs kept secure, and a page opened
from a file."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.conftest import (
    CHROMIUM,
    CHROMIUM_ARGS,
    LoopThread,
    Pages,
    Platform,
    ThreadedLLM,
    free_port,
    launch_with_microphone,
    microphone_wav,
)
from tests.browser.test_examples import installed
from tests.engine.providers.llm.openai.fake_server import Done, Finish, text_reply, tool_call
from tests.speech import SPOKEN_WORDS, words

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


def new_publishable_key(platform: Platform) -> tuple[str, str]:
    """A key made as the dashboard makes one: its switches off. Its plaintext and display."""
    key = platform.api("POST", "keys", {"kind": "publishable", "label": "new"})
    return key["key"], key["display"]


def console_of(page: Any) -> list[tuple[str, str]]:
    lines: list[tuple[str, str]] = []
    page.on("console", lambda message: lines.append((message.type, message.text)))
    return lines


# Chromium's own default autoplay rule, named (see launch_with_microphone).
CHROMIUM_ARGS_STRICT = [
    "--autoplay-policy=document-user-activation-required" if "autoplay" in arg else arg
    for arg in CHROMIUM_ARGS
]

REFUSED_MICROPHONE = """
navigator.mediaDevices.getUserMedia = async () => {
  throw new DOMException("Permission denied", "NotAllowedError");
};
"""

# What the browser did with sound: its AudioContexts, and the frames of the agent's voice
# handed to the playback worklet.
WATCH_AUDIO = """
window.__contexts = [];
window.__frames = 0;
const NativeContext = window.AudioContext;
window.AudioContext = class extends NativeContext {
  constructor(...args) { super(...args); window.__contexts.push(this); }
};
const post = MessagePort.prototype.postMessage;
MessagePort.prototype.postMessage = function (message, ...rest) {
  if (message && message.type === "frame") window.__frames += 1;
  return post.call(this, message, ...rest);
};
"""


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


def test_the_seeds_react_app_with_a_new_key_says_which_switches_to_turn_on(
    seed_project: Path, platform: Platform, pages: Pages, page: Any
) -> None:
    npm, _ = installed("react")
    plaintext, display = new_publishable_key(platform)
    env = {**os.environ, "VITE_API_KEY": plaintext, "npm_config_update_notifier": "false"}
    built = subprocess.run(
        [npm, "exec", "--", "vite", "build", "--base", "./", "--outDir", "dist-new-key"],
        cwd=seed_project, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    console = console_of(page)
    page.goto(f"{pages.add_tree('seed-new-key', seed_project / 'dist-new-key')}/index.html")
    notice = page.locator(".message.notice")
    notice.wait_for(timeout=TIMEOUT_MS)
    text = notice.inner_text()
    # One refusal naming everything refused, both switches, the key and its settings page.
    assert "server-tool code (get_weather)" in text
    assert "its own agent settings (greeting, instructions, voice)" in text
    assert "“Pages may configure the agent themselves”" in text
    assert "“Pages may send server-tool code”" in text
    assert display in text and f"{platform.url}/w/" in text  # a link that works from here
    assert page.locator(".status").inner_text() == "error"
    errors = [line for kind, line in console if kind == "error" and "voice agent:" in line]
    assert len(errors) == 1 and "Pages may send server-tool code" in errors[0]


def test_the_seeds_one_file_page_with_a_new_key_says_the_same(
    platform: Platform, pages: Pages, page: Any
) -> None:
    plaintext, _display = new_publishable_key(platform)
    html = (ROOT / "examples" / "vanilla" / "index.html").read_text()
    html = html.replace("http://127.0.0.1:8000", platform.url).replace(
        "pk_your_publishable_key", plaintext
    )
    console = console_of(page)
    page.goto(pages.add("vanilla-new-key.html", html))
    page.locator(".va-start").click()
    error = page.locator(".va-error")
    error.wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function(
        "document.querySelector('.va-error').textContent.includes('server-tool code')",
        timeout=TIMEOUT_MS,
    )
    text = error.inner_text()
    assert "server-tool code (check_order)" in text
    assert "“Pages may configure the agent themselves”" in text
    assert "“Pages may send server-tool code”" in text
    assert page.locator(".va-status").inner_text() == "Not connected"
    assert any(kind == "error" and "server-tool code" in line for kind, line in console)


def test_the_seeds_react_app_says_when_a_click_is_needed_and_the_click_starts_audio(
    seed_project: Path, playwright_instance: Any, pages: Pages
) -> None:
    """Chromium's default autoplay rule, and a microphone this site was refused before: no
    sound may play before the user interacts with the page. The seed's App, unchanged, says
    so, and a click anywhere starts the agent's voice.

    (The refusal is answered at once, as for a site the user blocked: while Chromium has a
    microphone request open the page counts as recording, and a page that records may play,
    which would make the test depend on how fast a prompt is refused. Likewise the test
    touches the page only once the library has decided: Playwright runs its locators and
    evaluate() as user gestures, which give the page the user activation that lets it play.)"""
    browser = playwright_instance.chromium.launch(
        executable_path=CHROMIUM, args=CHROMIUM_ARGS_STRICT
    )
    page = browser.new_page()
    page.add_init_script(REFUSED_MICROPHONE + WATCH_AUDIO)
    console = console_of(page)
    try:
        with page.expect_console_message(lambda m: "until you click" in m.text, timeout=TIMEOUT_MS):
            page.goto(f"{pages.add_tree('seed-strict', seed_project / 'dist')}/index.html")
        hint = page.locator(".message.notice", has_text="click anywhere on the page")
        hint.wait_for(timeout=TIMEOUT_MS)
        assert "to start the audio" in hint.inner_text()
        page.locator(".status", has_text="ready").wait_for(timeout=TIMEOUT_MS)
        assert page.evaluate("window.__contexts.map((c) => c.state)") == ["suspended"]
        time.sleep(1)
        assert page.evaluate("window.__frames") == 0  # the greeting waits for the click
        assert any(kind == "warning" and "until you click" in line for kind, line in console)
        page.mouse.click(5, 5)  # anywhere
        hint.wait_for(state="detached", timeout=TIMEOUT_MS)
        page.wait_for_function("window.__frames > 0", timeout=TIMEOUT_MS)  # the greeting
        assert page.evaluate("window.__contexts.map((c) => c.state)") == ["running"]
    finally:
        browser.close()


def test_the_seeds_react_app_needs_no_click_once_the_microphone_is_on(
    seed_project: Path, strict_browser: Any, llm: ThreadedLLM, pages: Pages
) -> None:
    """The same rule with the microphone allowed: a page that records may play sound, so
    the library starts the audio as soon as the microphone is on."""
    llm.script(text_reply("It is sunny in Paris."))
    context = strict_browser.new_context()
    page = context.new_page()
    page.add_init_script(WATCH_AUDIO)
    try:
        page.goto(f"{pages.add_tree('seed-strict-mic', seed_project / 'dist')}/index.html")
        page.wait_for_function("window.__frames > 0", timeout=TIMEOUT_MS)  # the greeting
        assert page.evaluate("window.__contexts.map((c) => c.state)") == ["running"]
        user = page.locator(".message.user:not(.partial)").first
        user.wait_for(timeout=TIMEOUT_MS)  # the microphone was heard
        assert "weather in paris" in " ".join(words(user.inner_text()))
        page.locator(".message.assistant", has_text="sunny in Paris").wait_for(timeout=TIMEOUT_MS)
        assert not page.locator(".message.notice", has_text="click anywhere").count()
    finally:
        context.close()


@contextlib.contextmanager
def dev_server(npm: str, project: Path) -> Iterator[str]:
    """`npm run dev` (Vite's dev server) on a free port; its address."""
    port = free_port()
    process = subprocess.Popen(
        [npm, "run", "dev", "--", "--host", "127.0.0.1", "--port", str(port), "--strictPort"],
        cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "npm_config_update_notifier": "false"}, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url, timeout=2).status_code == 200:
                    break
            assert process.poll() is None, "the dev server stopped"
            assert time.monotonic() < deadline, "the dev server did not start"
            time.sleep(0.2)
        yield url
    finally:
        os.killpg(process.pid, 15)
        process.wait(10)


def test_the_seeds_react_app_works_on_the_dev_server_as_written(
    seed_project: Path, llm: ThreadedLLM, page: Any
) -> None:
    """`npm run dev` starts React DOM before the platform's react.js: the hook finds the
    app's React through the dev server, with no extra line in src/main.tsx."""
    npm, _ = installed("react")
    assert "globalThis" not in (seed_project / "src" / "main.tsx").read_text()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    console = console_of(page)
    with dev_server(npm, seed_project) as url:
        page.goto(url)
        greeting = page.locator(".message.assistant", has_text="Ask me about the weather")
        greeting.wait_for(timeout=TIMEOUT_MS)
        page.wait_for_function(
            "['listening', 'speaking', 'ready'].includes(document.querySelector('.status')"
            "?.textContent.trim())",
            timeout=TIMEOUT_MS,
        )
    assert errors == []
    # The seed's voice "jess" is not the offline voice's: said in the console, not hidden.
    assert any(kind == "warning" and "jess" in line for kind, line in console)


# ---------------------------------------------------------------- the first words


@pytest.fixture(scope="module")
def early_speech_wav(tmp_path_factory: pytest.TempPathFactory, loop_thread: LoopThread) -> Path:
    """The microphone: the question half a second after it opens, then 2 s of silence."""
    return microphone_wav(tmp_path_factory.mktemp("mic-early"), loop_thread, silence_before_s=0.5)


# A page whose server mints its session tokens slowly (`getToken` answers only once the user
# has been speaking for 0.7 s, as a busy backend might): the microphone is on from Start, the
# session is ready later, whatever the machine's speed.
FIRST_WORDS_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>First words</title></head>
<body><script type="module">
  import { VoiceAgent } from "__PLATFORM__/client.js";
  const started = performance.now();
  window.__turns = [];
  window.__voiceAt = null;
  window.__readyAt = null;
  const getToken = () => new Promise((resolve) => {
    const check = () => {
      const now = performance.now() - started;
      if (window.__voiceAt !== null && now - window.__voiceAt >= 700) resolve("__TOKEN__");
      else setTimeout(check, 20);
    };
    check();
  });
  const agent = VoiceAgent.start({ ui: false, getToken, agent: "geo" });
  agent.on("level", ({ rms }) => {
    if (rms > 0.02 && window.__voiceAt === null) window.__voiceAt = performance.now() - started;
  });
  agent.on("event", (event) => {
    if (event.type === "ready") window.__readyAt = performance.now() - started;
    if (event.type === "turn") window.__turns.push(event.text);
  });
</script></body></html>
"""


def test_words_spoken_before_the_session_is_ready_arrive_whole(
    playwright_instance: Any, early_speech_wav: Path, platform: Platform, llm: ThreadedLLM,
    pages: Pages,
) -> None:  # fmt: skip
    llm.script(text_reply("Sunny."))
    with contextlib.suppress(AssertionError):  # made by an earlier run of this module's platform
        platform.api("POST", "agents", {"name": "Geo", "slug": "geo", "mode": "voice",
                                        "greeting": "Hello! Ask me anything."})  # fmt: skip
    token = platform.api("POST", "session-tokens", {"agent": "geo"})["token"]
    browser = launch_with_microphone(playwright_instance, early_speech_wav)
    try:
        page = browser.new_page()
        html = FIRST_WORDS_PAGE.replace("__PLATFORM__", platform.url).replace("__TOKEN__", token)
        page.goto(pages.add("first-words.html", html))
        page.wait_for_function("window.__turns.length > 0", timeout=TIMEOUT_MS)
        voice_at, ready_at = page.evaluate("[window.__voiceAt, window.__readyAt]")
        assert voice_at + 500 < ready_at  # the user was half a sentence in before `ready`…
        (turn,) = page.evaluate("window.__turns")
        assert words(turn) == SPOKEN_WORDS  # …and every word arrived
    finally:
        browser.close()


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
