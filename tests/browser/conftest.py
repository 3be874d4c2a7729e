"""Browser tests: a real daphne platform, real Chromium (Debian's, driven by Playwright),
a fake microphone playing speech made by the offline voice, and local fakes for the LLM
and for the customer's API.

The platform runs on its embedded defaults (SQLite, in-memory channel layer, sandbox in
a thread, offline Whisper and Piper) in a subprocess; pages are served from another port
of 127.0.0.1, which a key without allowed origins accepts.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import wave
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from tests.engine.providers.llm.openai.fake_server import FakeOpenAIServer
from tests.fakes.egress_server import EgressTestServer, respond
from tests.speech import SPOKEN

ROOT = Path(__file__).resolve().parent.parent.parent
CHROMIUM = "/usr/bin/chromium"
T = TypeVar("T")

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--autoplay-policy=no-user-gesture-required",
    "--use-fake-device-for-media-stream",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Playwright's sync API keeps an event loop running on the main thread while it is
    # open: browser tests go last, and each module closes its browser when done.
    browser_items = [item for item in items if "tests/browser" in str(item.path)]
    for item in browser_items:
        item.add_marker(pytest.mark.browser)
        item.add_marker(pytest.mark.slow)
    items[:] = [item for item in items if item not in browser_items] + browser_items


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LoopThread:
    """An event loop on a thread of its own, for the async fakes next to sync Playwright."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(30)  # type: ignore[arg-type]

    def call(self, function: Callable[..., T], *args: Any) -> T:
        async def call() -> T:
            return function(*args)

        return self.run(call())

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


@pytest.fixture(scope="session")
def loop_thread() -> Iterator[LoopThread]:
    thread = LoopThread()
    yield thread
    thread.stop()


@pytest.fixture(scope="session")
def llm(loop_thread: LoopThread) -> Iterator[ThreadedLLM]:
    server = FakeOpenAIServer()
    loop_thread.run(server.start())
    yield ThreadedLLM(server, loop_thread)
    loop_thread.run(server.stop())


@dataclass
class ThreadedLLM:
    server: FakeOpenAIServer
    thread: LoopThread

    def script(self, *steps: Any) -> None:
        self.thread.call(self.server.script, *steps)

    def forget_scripts(self) -> None:
        self.thread.call(self.server.forget_scripts)

    @property
    def requests(self) -> list[Any]:
        return self.thread.call(lambda: list(self.server.requests))


# ---------------------------------------------------------------- the customer's API

WEATHER_TOKEN = "wx-secret-token-1234"


@dataclass
class WeatherApi:
    """A customer's weather API that wants ``Authorization: Bearer WEATHER_TOKEN``."""

    server: EgressTestServer
    thread: LoopThread

    @property
    def port(self) -> int:
        return int(self.server.port)

    @property
    def requests(self) -> list[Any]:
        return self.thread.call(lambda: list(self.server.requests))


async def _weather(request: Any, writer: asyncio.StreamWriter, server: object) -> None:
    if request.headers.get("authorization") != f"Bearer {WEATHER_TOKEN}":
        await respond(401, b'{"error": "bad token"}')(request, writer, server)
        return
    body = json.dumps({"city": "Paris", "temp_c": 21, "sky": "sunny"}).encode()
    await respond(200, body, [("Content-Type", "application/json")])(request, writer, server)


@pytest.fixture(scope="session")
def weather_api(loop_thread: LoopThread) -> Iterator[WeatherApi]:
    server = EgressTestServer()
    loop_thread.run(server.__aenter__())
    server.route("/weather", _weather)
    yield WeatherApi(server, loop_thread)
    loop_thread.run(server.__aexit__(None, None, None))


# ---------------------------------------------------------------- the platform


@dataclass
class Platform:
    url: str
    publishable_key: str
    secret_key: str
    log: Path | None = None  # daphne's output: the console mail backend writes mail there

    def mailed_link(self, to: str, path: str, timeout_s: float = 10) -> str:
        """The newest link to ``path`` in a mail to ``to`` (the console backend's output)."""
        assert self.log is not None
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.log.read_text()
            mail = text[text.rfind(f"To: {to}") :] if f"To: {to}" in text else ""
            found = re.search(rf"https?://\S+({re.escape(path)}\S+)", mail)
            if found:
                return found[1]
            assert time.monotonic() < deadline, f"no mail to {to} with {path}"
            time.sleep(0.1)

    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = httpx.request(
            method,
            f"{self.url}/api/v1/{path}",
            json=body,
            headers={"Authorization": f"Bearer {self.secret_key}"},
            timeout=10,
        )
        assert response.status_code < 300, response.text
        return response.json() if response.content else None


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.fixture(scope="session")
def platform(
    tmp_path_factory: pytest.TempPathFactory, llm: ThreadedLLM, weather_api: WeatherApi
) -> Iterator[Platform]:
    var = tmp_path_factory.mktemp("platform")
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "CI"}}
    env.update(
        VAR_DIR=str(var),
        DEBUG="true",
        STT_PROVIDER="local",
        TTS_PROVIDER="local",
        LLM_BASE_URL=llm.server.base_url,
        LLM_API_KEY="browser-test-llm-key",
        DEV_ALLOW_PRIVATE_EGRESS="true",
        EGRESS_PORTS=f"80,443,{weather_api.port}",
    )
    _manage(env, "migrate", "--noinput", "-v", "0")
    keys = json.loads(
        _manage(
            env,
            "create_workspace",
            "Browser",
            "--owner",
            "b@example.com",
            "--json",
            "--inline-config",
            "--inline-tool-code",
        )
    )
    port = free_port()
    log = (var / "daphne.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
         "platform_site.asgi:application"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                break
        assert process.poll() is None, (var / "daphne.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "daphne did not start"
        time.sleep(0.2)
    try:
        yield Platform(url, keys["publishable_key"], keys["secret_key"], var / "daphne.log")
    finally:
        process.terminate()
        process.wait(10)


# ---------------------------------------------------------------- pages and the browser


@dataclass
class Pages:
    root: Path
    url: str

    def add(self, name: str, html: str) -> str:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html)
        return f"{self.url}/{name}"

    def add_tree(self, name: str, source: Path) -> str:
        shutil.copytree(source, self.root / name, dirs_exist_ok=True)
        return f"{self.url}/{name}"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture(scope="session")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pages]:
    root = tmp_path_factory.mktemp("pages")
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield Pages(root, f"http://127.0.0.1:{server.server_address[1]}")
    server.shutdown()


def microphone_wav(
    directory: Path, loop_thread: LoopThread, *, silence_before_s: float, name: str = "speech.wav"
) -> Path:
    """A fake microphone's file: silence, SPOKEN in the offline voice, then 2 s of silence."""
    from engine.providers.tts.local.adapter import LocalTTS

    async def speak() -> bytes:
        return b"".join([chunk async for chunk in LocalTTS().synthesize(SPOKEN)])

    # (on the fakes' loop: Playwright's sync API keeps a loop running on this thread)
    before = b"\0\0" * round(24_000 * silence_before_s)
    pcm = before + loop_thread.run(speak()) + b"\0" * 96_000
    path = directory / name
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(24_000)
        wav.writeframes(pcm)
    return path


@pytest.fixture(scope="session")
def speech_wav(tmp_path_factory: pytest.TempPathFactory, loop_thread: LoopThread) -> Path:
    """The microphone: 1 s of silence, the question in the offline voice, 2 s of silence."""
    return microphone_wav(tmp_path_factory.mktemp("mic"), loop_thread, silence_before_s=1.0)


@pytest.fixture(scope="module")
def playwright_instance() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        reason = f"{CHROMIUM} is missing (apt-get install chromium)"
        if ci():
            pytest.fail(f"{reason}; under CI this must not be skipped", pytrace=False)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        yield playwright


def ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def launch_with_microphone(
    playwright_instance: Any, speech_wav: Path, *, autoplay: bool = True
) -> Any:
    """Chromium whose microphone says SPOKEN once, with permission granted. ``autoplay``
    False: Chromium's own default rule, named (``document-user-activation-required``: no
    sound before the user interacts with the page; a fresh profile has no sites it saw play
    before, whose exceptions would make a test depend on the ones before it). The older
    ``user-gesture-required`` does not hold an AudioContext back at all."""
    strict = "--autoplay-policy=document-user-activation-required"
    args = [a if "autoplay" not in a or autoplay else strict for a in CHROMIUM_ARGS]
    return playwright_instance.chromium.launch(
        executable_path=CHROMIUM,
        args=[
            *args,
            "--use-fake-ui-for-media-stream",
            f"--use-file-for-fake-audio-capture={speech_wav}%noloop",
        ],
    )


@pytest.fixture(scope="module")
def browser(playwright_instance: Any, speech_wav: Path) -> Iterator[Any]:
    browser = launch_with_microphone(playwright_instance, speech_wav)
    yield browser
    browser.close()


@pytest.fixture(scope="module")
def browser_without_microphone(playwright_instance: Any) -> Iterator[Any]:
    """Chromium that denies microphone access (no fake-UI auto-accept)."""
    browser = playwright_instance.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield browser
    browser.close()


@pytest.fixture(autouse=True)
def _fresh_llm_script(llm: ThreadedLLM) -> Iterator[None]:
    llm.forget_scripts()
    yield


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    page = context.new_page()
    page.on("pageerror", lambda error: print("page error:", error))
    yield page
    context.close()
