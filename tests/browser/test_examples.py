"""The Vite examples, built for real and driven in Chromium: the React app (react.js from
the platform with the app's own React) and the Monaco voice IDE's client tools."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import Pages, Platform, ThreadedLLM, ci
from tests.engine.providers.llm.openai.fake_server import Done, Finish, text_reply, tool_call

ROOT = Path(__file__).resolve().parent.parent.parent
TIMEOUT_MS = 30_000
GREET = "function greet() { return 'hi'; }"


def not_installed(source: Path) -> list[str]:
    """What examples/NAME's node_modules lacks: a package its package.json names, or a
    command one of them provides (``tsc``, ``vite``…). An interrupted install leaves
    node_modules in place without them, and ``npm exec`` then fails ("npx canceled due to
    missing packages")."""
    modules = source / "node_modules"
    manifest = json.loads((source / "package.json").read_text())
    missing = []
    for package in {**manifest.get("dependencies", {}), **manifest.get("devDependencies", {})}:
        found = modules / package / "package.json"
        if not found.is_file():
            missing.append(package)
            continue
        commands = json.loads(found.read_text()).get("bin", {})
        if isinstance(commands, str):  # one command, named after the package
            commands = {package.rsplit("/", 1)[-1]: commands}
        missing += [f".bin/{c}" for c in commands if not (modules / ".bin" / c).exists()]
    return missing


def installed(name: str) -> tuple[str, Path]:
    """npm, and examples/NAME with everything it needs (``npm ci`` when anything lacks)."""
    npm = shutil.which("npm")
    if npm is None:
        reason = "npm is needed to build the examples"
        if ci():
            pytest.fail(f"{reason}; under CI this must not be skipped", pytrace=False)
        pytest.skip(reason)
    source = ROOT / "examples" / name
    # Two test workers may need the same example at once: one installs, the other waits
    # for it (two ``npm ci`` in one folder delete each other's files).
    with open(ROOT / "examples" / f".{name}.install-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        install(npm, source, name)
    return npm, source


def install(npm: str, source: Path, name: str) -> None:
    """``npm ci`` in examples/NAME when anything lacks, under the caller's lock."""
    if not_installed(source):
        try:
            subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"],
                cwd=source, check=True, capture_output=True, text=True, timeout=600,
            )  # fmt: skip
        except subprocess.CalledProcessError as failed:
            output = f"{failed.stdout}\n{failed.stderr}".strip()
            pytest.fail(f"npm ci in examples/{name} failed:\n{output}", pytrace=False)
        lacking = not_installed(source)
        assert not lacking, f"npm ci left examples/{name} without {lacking}"


def build(name: str, platform: Platform, out: Path) -> Path:
    """``tsc`` (the types are the library's own, frontend/lib/*.d.ts) then ``vite build`` of
    examples/NAME for this platform."""
    npm, source = installed(name)
    typecheck = subprocess.run(
        [npm, "exec", "--", "tsc", "--noEmit"], cwd=source, timeout=600, capture_output=True
    )
    assert typecheck.returncode == 0, typecheck.stdout.decode()
    env = {
        **os.environ,
        "VITE_PLATFORM_URL": platform.url,
        "VITE_PUBLISHABLE_KEY": platform.publishable_key,
    }
    subprocess.run(
        [npm, "exec", "--", "vite", "build", "--outDir", str(out), "--emptyOutDir"],
        cwd=source, env=env, check=True, timeout=600, capture_output=True,
    )  # fmt: skip
    return out


@pytest.fixture(scope="module")
def react_app(platform: Platform, pages: Pages, tmp_path_factory: pytest.TempPathFactory) -> str:
    dist = build("react", platform, tmp_path_factory.mktemp("react-dist"))
    return pages.add_tree("react-app", dist)


@pytest.fixture(scope="module")
def voice_ide(platform: Platform, pages: Pages, tmp_path_factory: pytest.TempPathFactory) -> str:
    dist = build("voice-ide", platform, tmp_path_factory.mktemp("ide-dist"))
    return pages.add_tree("voice-ide", dist)


def test_the_react_example_builds_and_talks(react_app: str, llm: ThreadedLLM, page: Any) -> None:
    llm.script(text_reply("Your order ships today."))
    page.goto(f"{react_app}/index.html?mode=text")
    page.locator(".status[data-state='ready']").wait_for(timeout=TIMEOUT_MS)
    page.locator(".text-input").fill("Where is my order?")
    page.locator(".send").click()
    page.locator(".message.assistant", has_text="Your order ships today.").wait_for(
        timeout=TIMEOUT_MS
    )
    assert page.locator(".message.user").first.inner_text() == "Where is my order?"


# ---------------------------------------------------------------- the voice IDE


def ask(page: Any, text: str) -> None:
    box = page.locator("#agent .va-input")
    box.fill(text)
    box.press("Enter")


def tool_results(llm: ThreadedLLM) -> list[dict[str, Any]]:
    """The client tools' results as the LLM received them, in order."""
    results = []
    for request in llm.requests:
        message = request.json["messages"][-1]
        if message["role"] == "tool":
            results.append(json.loads(message["content"]))
    return results


def test_the_voice_ide_edits_monaco_through_client_tools(
    voice_ide: str, llm: ThreadedLLM, page: Any
) -> None:
    page.goto(f"{voice_ide}/index.html?mode=text")
    page.wait_for_function("window.__ide && window.__ide.getValue().length > 0", timeout=TIMEOUT_MS)
    page.locator("#agent .va-input").wait_for(timeout=TIMEOUT_MS)
    before = page.evaluate("window.__ide.getValue()")
    lines = before.split("\n")
    requests_before = len(llm.requests)

    edit = {"lineEdits": [{"op": "insert", "line": len(lines), "position": "after", "text": GREET}]}
    llm.script(tool_call(0, "call_open", "open_file", "{}"), Finish("tool_calls"), Done())
    llm.script(
        tool_call(0, "call_write", "write_file", json.dumps(edit)), Finish("tool_calls"), Done()
    )
    llm.script(text_reply("I added greet at the end."))
    ask(page, "Add a greet function at the end, please.")
    page.locator("#agent .va-message.va-assistant", has_text="I added greet").wait_for(
        timeout=TIMEOUT_MS
    )

    after = page.evaluate("window.__ide.getValue()")
    assert after.split("\n") == [*lines, GREET]
    opened, written = tool_results(llm)[-2:]
    assert opened["content"].split("\n")[0] == f"L1:{lines[0]}"
    assert opened["content"].split("\n")[-1] == f"L{len(lines)}:{lines[-1]}"
    assert written["ok"] is True
    assert written["diffs"] == [{"op": "insert", "line": len(lines) + 1, "after": GREET}]
    assert page.evaluate("window.__ide.lastDiffs") == written["diffs"]
    assert len(llm.requests) == requests_before + 3

    out_of_range = {"lineEdits": [{"op": "replace", "line": 999, "text": "x"}]}
    llm.script(
        tool_call(0, "call_bad", "write_file", json.dumps(out_of_range)),
        Finish("tool_calls"),
        Done(),
    )
    llm.script(text_reply("That line does not exist."))
    ask(page, "Replace line 999.")
    page.locator("#agent .va-message.va-assistant", has_text="does not exist").wait_for(
        timeout=TIMEOUT_MS
    )
    (refused,) = tool_results(llm)[-1:]
    assert refused["ok"] is False and "out of range" in refused["error"]
    assert page.evaluate("window.__ide.getValue()") == after  # nothing changed


def test_the_voice_ide_edit_rules_unit_tests() -> None:
    npm, source = installed("voice-ide")
    result = subprocess.run([npm, "test"], cwd=source, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
