"""The load benchmark's LLM: the fake OpenAI-compatible server, answering by the request.

A turn's first request (the user just spoke) gets a call of the server tool when the
request offers one, and a short echo otherwise; the request that carries the tool's
result gets a short answer. Instant: the figures are the platform's, not a model's.
Runs in its own process, so its CPU is measured apart from the load generator's.

    .venv/bin/python bench/load_llm.py [--port 0]     # prints "fake LLM on <base_url>"
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.engine.providers.llm.openai.fake_server import (
    Done,
    Echo,
    FakeOpenAIServer,
    Finish,
    RecordedRequest,
    Text,
    tool_call,
)

TOOL_ARGUMENTS = '{"n": 1}'


def reply_steps(request: RecordedRequest) -> list[Any]:
    try:
        body = request.json
    except ValueError:
        body = {}
    messages = body.get("messages") or [{}]
    if messages[-1].get("role") == "tool":
        return [Text("Done, "), Text("all good."), Finish("stop"), Done()]
    tools = body.get("tools") or []
    if tools:
        name = tools[0]["function"]["name"]
        call_id = f"call_{len(messages)}"
        return [*tool_call(0, call_id, name, TOOL_ARGUMENTS), Finish("tool_calls"), Done()]
    return [Echo("You said: "), Finish("stop"), Done()]


class LoadLLMServer(FakeOpenAIServer):
    # The fake scripts responses in order, not by request; `_serve` records the request
    # before it asks for the script, so the reply can be chosen from it here.
    def _next_script(self) -> Any:
        request = self.requests[-1]
        self.requests.clear()  # a long soak must not keep every request
        self.script(*reply_steps(request))
        return super()._next_script()


async def serve(port: int) -> None:
    async with LoadLLMServer(port=port) as server:
        print(f"fake LLM on {server.base_url}", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port))
