"""A fake OpenAI-compatible ``/embeddings`` server: the chat fake (``FakeOpenAIServer``, on
a real socket, HTTP/1.1 with keep-alive) serving ``POST …/embeddings`` instead.

With nothing scripted, each input gets the fake model's vector, OpenAI's answer shape::

    {"object": "list", "model": …, "usage": {…},
     "data": [{"object": "embedding", "index": 0, "embedding": [0.1, …]}, …]}

The fake model counts words into ``dimensions`` buckets, a word's bucket chosen by its
*concept* (``synonyms`` maps words to one), so "reimbursed" lands where "refund" does:
a question can find a passage it shares no word with, which full text cannot. Scripted
responses (the chat fake's whole-response steps: ``JsonBody``, ``HttpError``,
``PlainBody``, ``Delay``, ``Cut``) answer the next requests first::

    async with FakeEmbeddingsServer(synonyms={"reimbursed": "refund"}) as server:
        server.script(fake_openai.HttpError(503, "overloaded"))
        ...
        assert server.requests[0].json["input"] == ["…"]
"""

from __future__ import annotations

import asyncio
import re
import zlib
from collections.abc import Mapping
from typing import Any

from tests.engine.providers.llm.openai import fake_server as fake_openai
from tests.engine.providers.llm.openai.fake_server import RecordedRequest


class FakeEmbeddingsServer(fake_openai.FakeOpenAIServer):
    def __init__(self, *, dimensions: int = 64, synonyms: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.dimensions = dimensions
        self.synonyms = dict(synonyms or {})

    def vector(self, text: str) -> list[float]:
        """The fake model: a bag of concepts, one bucket each."""
        vector = [0.0] * self.dimensions
        vector[0] = 0.01  # no text is all zeros
        for word in re.findall(r"\w+", text.lower()):
            concept = self.synonyms.get(word, word)
            vector[1 + zlib.crc32(concept.encode()) % (self.dimensions - 1)] += 1.0
        return vector

    def inputs(self) -> list[str]:
        """Every text every request asked for, in order."""
        return [text for request in self.requests for text in request.json["input"]]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (request := await fake_openai.read_request(reader)) is not None:
            self.requests.append(request)
            if request.method != "POST" or not request.path.endswith("/embeddings"):
                body = fake_openai.error_body("Unknown path", error_type="not_found")
                await fake_openai.send_json(writer, 404, body)
            elif self.pending_scripts:
                script = self._next_script()
                played = fake_openai._Response(writer, request, script, self._next_id())
                if not await played.run():
                    return
            else:
                await fake_openai.send_json(writer, 200, self._answer(request))

    def _answer(self, request: RecordedRequest) -> dict[str, Any]:
        texts = request.json["input"]
        texts = [texts] if isinstance(texts, str) else texts
        tokens = sum(len(text.split()) for text in texts)
        return {
            "object": "list",
            "model": request.json.get("model"),
            "data": [
                {"object": "embedding", "index": index, "embedding": self.vector(text)}
                for index, text in enumerate(texts)
            ],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
