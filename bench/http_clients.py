"""The hot path's HTTP client: httpx (what the adapters use) against aiohttp, same wire work.

One turn's HTTP, as a session does it: one streamed chat completion (a 36-chunk SSE
stream, read as it arrives) and three TTS requests (raw PCM, chunked), against the local
fakes of ``tests/fakes`` running in a process of their own. ``--concurrency`` turns at
once, ``--turns`` in all, per client; CPU is this process's CPU time per turn, so the
figure is the client library's cost plus the few lines that drive it (the same for both).

Needs both libraries; the Pipecat venv of ``bench/vs_pipecat.py`` has them (and the same
httpx as the platform)::

    .venv-pipecat/bin/python bench/http_clients.py [--concurrency 50] [--turns 500]

Prints one JSON object, then a short table. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

API_KEY = "sk-test-key"
CHUNKS = 36
TTS_REQUESTS = 3


async def serve() -> None:
    from tests.engine.providers.llm.openai.fake_server import Done, FakeOpenAIServer, Finish, Text
    from tests.engine.providers.tts.openai.fake_server import FakeOpenAISpeechServer

    steps = [Text(f"word{i} ") for i in range(CHUNKS - 3)] + [Finish("stop"), Done()]
    async with FakeOpenAIServer(default=steps) as llm, FakeOpenAISpeechServer() as tts:
        print(json.dumps({"llm": llm.base_url, "tts": tts.base_url}), flush=True)
        while True:
            await asyncio.sleep(1)
            llm.requests.clear()
            tts.requests.clear()
            tts.connections.clear()


CHAT = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
SPEECH = {"model": "m", "voice": "alloy", "response_format": "pcm", "input": "Hello there."}
HEADERS = {"Authorization": f"Bearer {API_KEY}"}


async def httpx_turns(urls: dict[str, str], turns: int, concurrency: int) -> None:
    import httpx

    limits = httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits) as client:

        async def turn() -> None:
            async with client.stream(
                "POST", f"{urls['llm']}/chat/completions", json=CHAT, headers=HEADERS
            ) as response:
                async for _chunk in response.aiter_bytes():
                    pass
            for _ in range(TTS_REQUESTS):
                async with client.stream(
                    "POST", f"{urls['tts']}/audio/speech", json=SPEECH, headers=HEADERS
                ) as response:
                    async for _chunk in response.aiter_bytes():
                        pass

        await many(turn, turns, concurrency)


async def aiohttp_turns(urls: dict[str, str], turns: int, concurrency: int) -> None:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=concurrency * 2)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def turn() -> None:
            url = f"{urls['llm']}/chat/completions"
            async with session.post(url, json=CHAT, headers=HEADERS) as response:
                async for _chunk in response.content.iter_any():
                    pass
            for _ in range(TTS_REQUESTS):
                url = f"{urls['tts']}/audio/speech"
                async with session.post(url, json=SPEECH, headers=HEADERS) as response:
                    async for _chunk in response.content.iter_any():
                        pass

        await many(turn, turns, concurrency)


async def many(turn: Any, turns: int, concurrency: int) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            await turn()

    await asyncio.gather(*(one() for _ in range(turns)))


async def measure(client: str, urls: dict[str, str], turns: int, concurrency: int) -> float:
    run = httpx_turns if client == "httpx" else aiohttp_turns
    await run(urls, concurrency, concurrency)  # warm-up: imports, connections
    cpu = time.process_time()
    await run(urls, turns, concurrency)
    return (time.process_time() - cpu) * 1000 / turns


def main(turns: int, concurrency: int) -> dict[str, Any]:
    import aiohttp
    import httpx

    # The fakes need the platform's venv (they import its test tooling).
    server_python = ROOT / ".venv" / "bin" / "python"
    servers = subprocess.Popen(
        [str(server_python) if server_python.exists() else sys.executable, __file__, "--serve"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert servers.stdout is not None
        urls = json.loads(servers.stdout.readline())
        cpu = {}
        for client in ("httpx", "aiohttp", "httpx", "aiohttp"):  # twice, interleaved
            figure = asyncio.run(measure(client, urls, turns, concurrency))
            cpu[client] = min(cpu.get(client, figure), figure)
    finally:
        servers.terminate()
        servers.wait(timeout=10)
    return {
        "benchmark": "http_clients",
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, "
        f"python {platform.python_version()}",
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "versions": {"httpx": httpx.__version__, "aiohttp": aiohttp.__version__},
        "turn": f"1 chat stream of {CHUNKS} SSE chunks + {TTS_REQUESTS} TTS requests",
        "concurrency": concurrency,
        "turns": turns,
        "cpu_ms_per_turn": {name: round(value, 2) for name, value in cpu.items()},
        "ratio_aiohttp_to_httpx": round(cpu["aiohttp"] / cpu["httpx"], 2),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve())
    else:
        outcome = main(args.turns, args.concurrency)
        print(json.dumps(outcome, indent=1))
        figures = outcome["cpu_ms_per_turn"]
        print(f"\nCPU per turn: httpx {figures['httpx']} ms, aiohttp {figures['aiohttp']} ms "
              f"(aiohttp/httpx {outcome['ratio_aiohttp_to_httpx']}), "
              f"load average {outcome['load_average']}")  # fmt: skip
