"""The browser library's modules run in node: a scripted WebSocket, and a runner that gives
back the script's last line of output as JSON (its report)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

LIB = Path(__file__).resolve().parents[2] / "frontend" / "lib"

# A socket that opens at once and records what is sent (JSON parsed, audio as Int16Array);
# a test drops it or hands it events.
SCRIPTED_SOCKET = """
const sockets = [];
globalThis.WebSocket = class {
  static OPEN = 1;
  constructor(url) { this.url = url; this.readyState = 0; this.sent = []; sockets.push(this);
    setTimeout(() => { this.readyState = 1; this.onopen(); }, 0); }
  send(data) { this.sent.push(typeof data === "string" ? JSON.parse(data) : new Int16Array(data)); }
  close() { this.readyState = 3; }
  drop(code = 1006) { this.readyState = 3; this.onclose({ code }); }
  event(e) { this.onmessage({ data: JSON.stringify(e) }); }
};
const tick = (ms = 20) => new Promise((r) => setTimeout(r, ms));
"""


def run_library_script(script: str) -> dict[str, Any]:
    """Run ``script`` (``LIB`` in it: the library's folder as a URL); its last line's JSON."""
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI"):
            pytest.fail("node is missing; under CI this must not be skipped")
        pytest.skip("node is missing")
    source = script.replace("LIB", LIB.as_uri())
    result = subprocess.run(
        [node, "--input-type=module", "-e", source], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return report
