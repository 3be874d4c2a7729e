"""A real daphne sends what a session writes at the end of the loop's step, without the
reactor (platform_site/socket_writes.py): a client that reads at once and one that stops
reading while several megabytes of a reply's audio pile up in the socket's buffers (the
sends only partly taken, the rest left to Twisted) both get every byte of the reply's
audio, and every event once and in order."""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.typing import Origin

from tests.engine.providers.llm.openai.fake_server import FakeOpenAIServer, text_reply
from tests.faults.processes import LOCAL_ORIGIN, Daphne, Platform

pytestmark = pytest.mark.slow

ORIGIN = Origin(LOCAL_ORIGIN)
# About 11,000 characters: with the fake voice's 10 ms a character, 110 s of 24 kHz audio,
# 5 MB: more than the loopback socket's send buffer (4 MB at most) and a small receive buffer.
REPLY = " ".join(f"This is sentence {n} of a long answer." for n in range(300))
STALL_S = 3.0


async def _reply(daphne: Daphne, key: str, *, stall: bool) -> tuple[list[dict[str, Any]], bytes]:
    """A typed turn's events (from ``turn`` to ``tts_done``) and its audio; ``stall``: the
    client reads nothing for a while after asking, with a small receive buffer."""
    sock = socket.socket()
    if stall:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", daphne.port))
    events: list[dict[str, Any]] = []
    audio = hashlib.sha256()
    async with connect(
        daphne.session_url(key), origin=ORIGIN, sock=sock, max_queue=2 if stall else 64
    ) as ws:
        await ws.send(json.dumps({"type": "configure", "instructions": "Talk at length."}))
        while json.loads(await ws.recv())["type"] != "ready":
            pass
        await ws.send(json.dumps({"type": "text", "text": "Tell me everything."}))
        if stall:
            await asyncio.sleep(STALL_S)
        while not events or events[-1]["type"] != "tts_done":
            frame = await asyncio.wait_for(ws.recv(), 30)
            if isinstance(frame, bytes):
                audio.update(frame)
            else:
                events.append(json.loads(frame))
    return events, audio.digest()


async def test_a_stalled_reader_gets_every_byte_and_event_in_order(
    web: tuple[Daphne, Platform], llm: FakeOpenAIServer
) -> None:
    daphne, platform = web
    llm.script(text_reply(REPLY))
    llm.script(text_reply(REPLY))
    prompt_events, prompt_audio = await _reply(daphne, platform.publishable_key, stall=False)
    stalled_events, stalled_audio = await _reply(daphne, platform.publishable_key, stall=True)

    assert stalled_audio == prompt_audio
    assert [e["type"] for e in stalled_events] == [e["type"] for e in prompt_events]
    for events in (prompt_events, stalled_events):
        seqs = [event["seq"] for event in events]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # once each, in order
        assert events[-1]["type"] == "tts_done"
        assert [e["text"] for e in events if e["type"] == "chat"] == [REPLY]
    assert daphne.alive()
