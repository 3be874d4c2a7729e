"""A sandbox worker process: the only place V8 runs. Started by ``tools_app.pool``.

It starts with an empty environment and imports mini-racer, the V8 runner and this
file, nothing of Django: no settings, database, keyring or broker. Before it takes any
work it closes what it can of the way out, and tells the parent what it managed:

- resource limits: address space for data (``RLIMIT_DATA``: allocations past it fail
  inside the handler), no core dumps, no file writes (``RLIMIT_FSIZE`` = 0), few files;
- its own empty network namespace, and an unprivileged user, when it starts as root;
- a syscall filter (seccomp, through libseccomp): no sockets, no new processes or
  programs, no opening of files at all, no signals to other processes, no ptrace;
  so its only way out is the pipe to its parent (``tools_app.confinement``).

Then it runs calls one at a time, each in a fresh V8 context prepared while it was
idle. Time, CPU and memory are watched from outside by the parent, which kills this
process when a call passes a limit: nothing here has to stop a handler.

Run as ``python -I -S jail.py PATH[:PATH…] MEMORY_BYTES``: the paths it may import from.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # before anything else is imported: our paths only
    sys.path[:0] = sys.argv[1].split(":")

import asyncio
import contextlib
import json
import math
import os
import resource
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from tools_app.calls import (
    HEADER_BYTES,
    FrameError,
    SandboxLimits,
    decode_frame,
    encode_frame,
    frame_length,
)
from tools_app.confinement import die_with_parent, drop_privileges, filter_syscalls, leave_network
from tools_app.handler_shape import is_one_function
from tools_app.sandbox import (
    NOT_ONE_FUNCTION,
    FetchRefused,
    PreparedContext,
    run_prepared,
    syntax_error,
)

MAX_OPEN_FILES = 64
CPU_SLACK_S = 2


def limit_resources(memory_bytes: int) -> dict[str, Any]:
    """Kernel limits on this process; applied first, before V8 exists."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))
    return {"memory_limit_mb": memory_bytes // (1024 * 1024), "file_writes": "blocked"}


def cap_cpu(seconds: float) -> None:
    """A second line under the parent's CPU watch: the kernel stops this process (SIGXCPU)
    a little past this call's budget, should the parent be too busy to look. Set here,
    since a parent without CAP_SYS_RESOURCE may not change another user's limits."""
    soft = math.ceil(time.process_time() + seconds) + CPU_SLACK_S
    resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.RLIM_INFINITY))


def close_files() -> None:
    """Only the two protocol pipes stay open; nothing else is inherited by accident."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (MAX_OPEN_FILES, MAX_OPEN_FILES))


class Channel:
    """Frames to and from the parent over the inherited pipes."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._reader: asyncio.StreamReader | None = None
        self._replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._jobs: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._next_id = 0
        self._reading: asyncio.Task[None] | None = None

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        self._reader = asyncio.StreamReader(limit=2**20)
        protocol = asyncio.StreamReaderProtocol(self._reader)
        await loop.connect_read_pipe(lambda: protocol, os.fdopen(self._read_fd, "rb", 0))
        self._reading = loop.create_task(self._read_forever())

    def send(self, message: dict[str, Any]) -> None:
        data = memoryview(encode_frame(message))
        while data:
            data = data[os.write(self._write_fd, data) :]

    async def next_job(self) -> dict[str, Any]:
        return await self._jobs.get()

    async def fetch(self, request: dict[str, Any]) -> dict[str, Any]:
        self._next_id += 1
        fetch_id = self._next_id
        reply = asyncio.get_running_loop().create_future()
        self._replies[fetch_id] = reply
        self.send({"t": "fetch", "id": fetch_id, "request": request})
        answer = await reply
        if not answer.get("ok"):
            raise FetchRefused(str(answer.get("error") or "the request failed"))
        response = answer.get("response")
        if not isinstance(response, dict):
            raise FetchRefused("invalid response from the fetch proxy")
        return response

    async def _read_forever(self) -> None:
        try:
            await self._dispatch_forever()
        except (asyncio.IncompleteReadError, FrameError, ConnectionError):
            os._exit(0)  # the parent is gone (or broken): stop now, whatever V8 is doing

    async def _dispatch_forever(self) -> None:
        assert self._reader is not None
        while True:
            header = await self._reader.readexactly(HEADER_BYTES)
            message = decode_frame(await self._reader.readexactly(frame_length(header)))
            if message.get("t") == "fetched":
                # A frame without an id (None) finds no reply, as an unknown id does.
                reply = self._replies.pop(message.get("id"), None)  # type: ignore[arg-type]
                if reply is not None and not reply.done():
                    reply.set_result(message)
            else:
                self._jobs.put_nowait(message)


async def check_source(source: str) -> str | None:
    """None if ``source`` is one function expression, else why not. Never runs it."""
    error = await syntax_error(source)
    if error is None and not is_one_function(source):
        error = NOT_ONE_FUNCTION
    return error


class Contexts:
    """Prepared contexts kept ready, made in the background between calls, so that a
    call never waits for a context and its runtime (about 5 ms) to be built."""

    SPARES = 2

    def __init__(self, limits: SandboxLimits) -> None:
        self.limits = limits
        self._ready: deque[PreparedContext] = deque()
        self._making: asyncio.Task[None] | None = None

    async def take(self, limits: SandboxLimits) -> PreparedContext:
        if limits.engine_config() != self.limits.engine_config():
            await self._settle()
            while self._ready:
                self._ready.popleft().close()
            self.limits = limits
        while not self._ready:
            self.refill()
            assert self._making is not None
            await asyncio.shield(self._making)
        return self._ready.popleft()  # refilled after the call: V8 work would slow it

    def refill(self) -> None:
        if self._making is None and len(self._ready) < self.SPARES:
            self._making = asyncio.get_running_loop().create_task(self._make())

    async def _make(self) -> None:
        limits = self.limits
        try:
            prepared = await PreparedContext.open(limits)
        finally:
            self._making = None
        if limits.engine_config() == self.limits.engine_config():
            self._ready.append(prepared)
            self.refill()
        else:  # the limits changed while it was being made
            prepared.close()

    async def _settle(self) -> None:
        if self._making is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._making)


async def serve(channel: Channel, protections: dict[str, Any]) -> None:
    await channel.open()
    contexts = Contexts(SandboxLimits())
    contexts.refill()
    channel.send({"t": "ready", "protections": protections})
    while True:
        job = await channel.next_job()
        if job.get("t") == "check":
            channel.send({"t": "checked", "error": await check_source(str(job.get("source")))})
            continue
        limits = SandboxLimits(**job["limits"])
        cap_cpu(limits.cpu_time_s)
        prepared = await contexts.take(limits)
        result = await run_prepared(
            prepared,
            job["source"],
            job["args_json"],
            job["secrets_json"],
            fetcher=channel.fetch,
        )
        channel.send({"t": "result", "result": asdict(result)})
        prepared.close()  # after the reply: nobody waits for it
        contexts.refill()


def _private_pipes() -> tuple[int, int]:
    """The protocol moves off fds 0 and 1, which point at /dev/null from now on, so a
    stray print (ours, V8's) can never corrupt a frame."""
    read_fd, write_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    return read_fd, write_fd


def harden(memory_bytes: int, warm_up: Callable[[], None]) -> dict[str, Any]:
    """Everything that closes the way out, in the order it has to happen: limits first,
    then what still needs files or privileges (``warm_up`` loads V8 and the parsers),
    then the user and the syscall filter. Returns what is in force on this host."""
    parent = os.getppid()
    die_with_parent(parent)
    protections = limit_resources(memory_bytes)
    protections["network_namespace"] = leave_network()
    warm_up()
    import pyseccomp  # noqa: F401  (finds libseccomp now, while files may still be opened)

    protections["uid"] = drop_privileges(parent)
    close_files()
    # Python itself may set LC_CTYPE (PEP 538); nothing else is there.
    protections["environment"] = sorted(os.environ)
    protections["syscall_filter"] = filter_syscalls()
    protections["no_new_processes"] = protections["syscall_filter"]
    return protections


def main() -> None:
    read_fd, write_fd = _private_pipes()
    loop = asyncio.new_event_loop()  # its self-pipe needs a socket: made before the filter
    asyncio.set_event_loop(loop)
    protections = harden(int(sys.argv[2]), lambda: loop.run_until_complete(_warm_up()))
    channel = Channel(read_fd, write_fd)
    try:
        loop.run_until_complete(serve(channel, protections))
    except (asyncio.IncompleteReadError, BrokenPipeError):
        pass  # the parent went away or closed the pipe: done
    os._exit(0)


async def _warm_up() -> None:
    """The first context loads V8 and ICU from disk, while files may still be opened."""
    prepared = await PreparedContext.open(SandboxLimits())
    prepared.close()
    await check_source("() => 1")  # and the parsers, once
    json.dumps({})


if __name__ == "__main__":
    main()
