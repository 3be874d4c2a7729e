"""The browser library's microphone frames: their length (``frameMs``) and its checks.

The capture worklet runs under node with the three globals an AudioWorkletGlobalScope gives
it (``sampleRate``, ``AudioWorkletProcessor``, ``registerProcessor``), fed one second of a
48 kHz tone in the 128-sample blocks a browser hands it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.tools_app.test_chacha20 import _node

LIB = Path(__file__).resolve().parents[2] / "frontend" / "lib"

WORKLET_HARNESS = """
const posted = [];
globalThis.sampleRate = 48000;
globalThis.AudioWorkletProcessor = class { constructor() {
  this.port = { postMessage: (message) => posted.push(message), onmessage: null }; } };
let Processor;
globalThis.registerProcessor = (name, cls) => { Processor = cls; };
await import(process.argv[1]);
const options = process.argv[2] === "default" ? undefined
  : { processorOptions: { frameMs: Number(process.argv[2]) } };
const processor = new Processor(options);
for (let block = 0; block < 375; block++) {  // 1 s at 48 kHz
  const samples = Float32Array.from({ length: 128 },
    (_, i) => 0.5 * Math.sin(2 * Math.PI * 440 * (block * 128 + i) / 48000));
  processor.process([[samples]]);
}
console.log(JSON.stringify(posted.map((m) => m.pcm.byteLength)));
"""

OPTION_HARNESS = """
const { AgentSession } = await import(process.argv[1]);
const results = {};
for (const value of JSON.parse(process.argv[2])) {
  try {
    new AgentSession({ apiKey: "pk_test", platformUrl: "http://localhost:8000", frameMs: value });
    results[JSON.stringify(value)] = "ok";
  } catch (error) {
    results[JSON.stringify(value)] = `${error.name}: ${error.message}`;
  }
}
console.log(JSON.stringify(results));
"""


def run_node(script: str, *args: str) -> object:
    done = subprocess.run(
        [_node(), "--input-type=module", "-e", script, *args],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    ("frame_ms", "frame_bytes"), [("default", 1280), ("20", 640), ("100", 3200)]
)
def test_the_microphone_sends_frames_of_frame_ms(frame_ms: str, frame_bytes: int) -> None:
    sizes = run_node(WORKLET_HARNESS, str(LIB / "capture-worklet.js"), frame_ms)
    assert isinstance(sizes, list)
    assert set(sizes) == {frame_bytes}  # every frame whole, none short
    assert sum(sizes) // 32 in range(990, 1001)  # one second of audio at 16 kHz, in ms


def test_frame_ms_outside_20_to_100_whole_ms_is_a_type_error() -> None:
    values = [None, 20, 60, 100, 19, 101, 40.5, "40"]
    results = run_node(OPTION_HARNESS, str(LIB / "core.js"), json.dumps(values))
    assert isinstance(results, dict)
    assert [results[json.dumps(v)] for v in (None, 20, 60, 100)] == ["ok"] * 4
    for bad in (19, 101, 40.5, "40"):
        assert results[json.dumps(bad)] == (
            "TypeError: voice agent: frameMs must be a whole number from 20 to 100"
        )
