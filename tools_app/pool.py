"""Sandbox worker processes as their parent sees them: started, fed, watched, replaced.

The parent is whatever holds the secrets: a Celery task process in production, the
platform's own process on the embedded default; both use this module the same way. The
parent gives a worker (``tools_app.jail``) one call at a time with only what that call
may see, answers its ``ctx.fetch`` requests through the caller's fetcher (the egress
proxy), and watches it from outside: past the call's wall time, CPU budget or memory it
is killed with SIGKILL and replaced, whatever builtin it is stuck in. A worker that dies
(segfault, fatal out-of-memory) fails only its own call, at once.

Everything a worker writes is read as hostile: frames are capped and checked, and a
malformed one gets the worker killed.

No Django here: the caller passes secrets-aware fetchers and limits. One event loop per
process owns the pools (``run_on_pool_loop``), so a sync caller (a Celery task, a Django
view checking a handler) and an async one (a live session) share the same workers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib.util
import logging
import math
import os
import signal
import sys
import threading
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from tools_app.calls import (
    HEADER_BYTES,
    FrameError,
    SandboxLimits,
    SandboxResult,
    decode_frame,
    encode_frame,
    frame_length,
    is_fetch_request,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")
Fetcher = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Serves one ``ctx.fetch``: the request as the handler made it; returns ``{"status",
"headers", "body" (base64), "url"}`` or raises ``FetchDenied`` with a message for it."""
Lane = int | str  # a workspace id, or "check"

JAIL = Path(__file__).with_name("jail.py")
# All a worker may import besides the standard library and tools_app itself.
JAIL_PACKAGES = ("py_mini_racer", "pyseccomp", "tree_sitter", "tree_sitter_javascript")
PROJECT_ROOT = JAIL.parent.parent
START_TIMEOUT_S = 30.0
POLL_S = 0.05
LOW_PRIORITY_AFTER_CPU_S = 0.1
LOW_PRIORITY_NICE = 10
MAX_TEXT_FROM_WORKER = 1024 * 1024
WORKER_DIED = (
    "the sandbox process running this tool stopped (out of memory or a fatal engine "
    "error); the call was not repeated"
)
WORKER_MISBEHAVED = "the sandbox process running this tool broke its protocol and was stopped"
UNAVAILABLE = "the tool sandbox could not be started"
CHECK_FAILED = "the handler could not be checked"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


class FetchDenied(Exception):
    """A fetch the parent refused or could not make; the message is for the handler."""


class SandboxUnavailable(Exception):
    """No worker process could be started."""


@dataclass(frozen=True)
class PoolConfig:
    size: int
    per_lane: int
    memory_bytes: int


def jail_command(memory_bytes: int) -> list[str]:
    """``python -I -S jail.py``: no site, no environment; the paths it may import from."""
    paths = [str(PROJECT_ROOT)]
    for module in JAIL_PACKAGES:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.origin is not None:
            where = Path(spec.origin).parent
            paths.append(str(where.parent if where.name == module else where))
    unique = list(dict.fromkeys(paths))
    return [sys.executable, "-I", "-S", str(JAIL), ":".join(unique), str(memory_bytes)]


class SandboxWorker:
    """One jailed process. Runs one call at a time; never reused after a kill."""

    def __init__(self, memory_bytes: int) -> None:
        self.memory_bytes = memory_bytes
        self.protections: dict[str, Any] = {}
        self.alive = False
        self._process: asyncio.subprocess.Process | None = None
        self._nice = 0

    async def start(self) -> None:
        self._process = await asyncio.create_subprocess_exec(
            *jail_command(self.memory_bytes),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={},
            close_fds=True,
            start_new_session=True,
        )
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                ready = await self._read()
        except (TimeoutError, asyncio.IncompleteReadError, FrameError):
            self.kill()
            raise SandboxUnavailable(UNAVAILABLE) from None
        if ready.get("t") != "ready" or not isinstance(ready.get("protections"), dict):
            self.kill()
            raise SandboxUnavailable(UNAVAILABLE)
        self.protections = ready["protections"]
        self.alive = True

    @property
    def usable(self) -> bool:
        """Alive as far as we know, and its process has not exited since (the kernel's
        out-of-memory killer may take an idle worker too)."""
        return self.alive and self._process is not None and self._process.returncode is None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def kill(self) -> None:
        self.alive = False
        if self._process is not None and self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.send_signal(signal.SIGKILL)

    async def check(self, source: str, *, timeout_s: float) -> str | None:
        self._send({"t": "check", "source": source})
        try:
            async with asyncio.timeout(timeout_s):
                reply = await self._read()
        except TimeoutError:
            self.kill()
            return f"{CHECK_FAILED}: it took too long"
        except (asyncio.IncompleteReadError, FrameError):
            self.kill()
            return f"{CHECK_FAILED}: the checker stopped"
        error = reply.get("error")
        if reply.get("t") != "checked" or not (error is None or isinstance(error, str)):
            self.kill()
            return f"{CHECK_FAILED}: the checker stopped"
        return None if error is None else error[:2000]

    async def run(
        self,
        *,
        source: str,
        args_json: str,
        secrets_json: str,
        limits: SandboxLimits,
        fetcher: Fetcher,
    ) -> SandboxResult:
        cpu_before = self._cpu_seconds()
        call = _Fetches(limits, fetcher, self._send)
        job = {
            "t": "run",
            "limits": asdict(limits),
            "source": source,
            "args_json": args_json,
            "secrets_json": secrets_json,
        }
        reading: asyncio.Task[SandboxResult] | None = None
        try:
            self._send(job)
            reading = asyncio.create_task(self._until_result(call, limits))
            result = await self._watch(reading, limits, cpu_before)
        except BaseException:
            self.kill()  # cancelled by the caller, or our bug: the call must not go on
            raise
        finally:
            if reading is not None:
                reading.cancel()
            call.cancel()
            self._restore_priority()
        cpu_ms = max(0.0, self._cpu_seconds() - cpu_before) * 1000 if self.alive else 0.0
        return replace(result, fetch_count=call.count, cpu_ms=round(cpu_ms, 1))

    async def _watch(
        self, reading: asyncio.Task[SandboxResult], limits: SandboxLimits, cpu_before: float
    ) -> SandboxResult:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limits.wall_time_s
        while True:
            await asyncio.wait({reading}, timeout=max(0.0, min(POLL_S, deadline - loop.time())))
            if reading.done():
                return self._outcome(reading)
            if loop.time() >= deadline:
                self.kill()
                return SandboxResult.failure(
                    f"timed out after {limits.wall_time_s:g} s", timed_out=True
                )
            used = self._cpu_seconds() - cpu_before
            if used > limits.cpu_time_s:
                self.kill()
                message = f"used more than its {limits.cpu_time_s:g} s of CPU time and was stopped"
                return SandboxResult.failure(message, timed_out=True)
            if used > LOW_PRIORITY_AFTER_CPU_S:
                self._lower_priority()
            if self._resident_bytes() > self.memory_bytes:
                self.kill()
                return SandboxResult.failure("memory limit exceeded")

    def _outcome(self, reading: asyncio.Task[SandboxResult]) -> SandboxResult:
        error = reading.exception()
        if error is None:
            return reading.result()
        self.kill()
        if isinstance(error, FrameError):
            logger.warning("sandbox worker broke its protocol; killed")
            return SandboxResult.failure(WORKER_MISBEHAVED)
        if isinstance(error, asyncio.IncompleteReadError | BrokenPipeError | ConnectionError):
            logger.warning("sandbox worker died during a call")
            return SandboxResult.failure(WORKER_DIED)
        raise error

    async def _until_result(self, call: _Fetches, limits: SandboxLimits) -> SandboxResult:
        while True:
            message = await self._read()
            kind = message.get("t")
            if kind == "fetch":
                call.start(message.get("id"), message.get("request"))
            elif kind == "result":
                return _checked_result(message.get("result"), limits)
            else:
                raise FrameError("unexpected message")

    def _send(self, message: dict[str, Any]) -> None:
        assert self._process is not None and self._process.stdin is not None
        try:
            self._process.stdin.write(encode_frame(message))
        except (BrokenPipeError, ConnectionError, RuntimeError):
            self.alive = False  # the reader sees the end of the pipe and says so

    async def _read(self) -> dict[str, Any]:
        assert self._process is not None and self._process.stdout is not None
        header = await self._process.stdout.readexactly(HEADER_BYTES)
        return decode_frame(await self._process.stdout.readexactly(frame_length(header)))

    def _cpu_seconds(self) -> float:
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
        except (OSError, IndexError, ValueError):
            return 0.0

    def _resident_bytes(self) -> int:
        try:
            with open(f"/proc/{self.pid}/statm", "rb") as statm:
                return int(statm.read().split()[1]) * _PAGE_SIZE
        except (OSError, IndexError, ValueError):
            return 0

    def _set_priority(self, nice: int) -> None:
        for task in os.listdir(f"/proc/{self.pid}/task"):
            os.setpriority(os.PRIO_PROCESS, int(task), nice)

    def _lower_priority(self) -> None:
        """A call that has burnt CPU yields to short ones: a busy loop of one workspace
        must not slow down another workspace's quick calls."""
        self.yield_to(LOW_PRIORITY_NICE)

    def yield_to(self, nice: int) -> None:
        """Run at ``nice`` or lower priority for the rest of this call (never higher)."""
        if nice > self._nice and self.pid is not None:
            with contextlib.suppress(OSError):
                self._set_priority(nice)
                self._nice = nice

    def _restore_priority(self) -> None:
        if self._nice and self.alive:
            try:
                self._set_priority(0)
                self._nice = 0
            except OSError:
                self.kill()  # no right to raise it again: replaced instead


class _Fetches:
    """The fetches of one call: counted, at most N at once, answered in any order."""

    def __init__(
        self, limits: SandboxLimits, fetcher: Fetcher, send: Callable[[dict[str, Any]], None]
    ) -> None:
        self._limits = limits
        self._fetcher = fetcher
        self._send = send
        self._slots = asyncio.Semaphore(limits.max_concurrent_fetches)
        self._tasks: set[asyncio.Task[None]] = set()
        self._asked = 0
        self.count = 0

    def start(self, fetch_id: Any, request: Any) -> None:
        if not isinstance(fetch_id, int) or isinstance(fetch_id, bool):
            raise FrameError("fetch without an id")
        self._asked += 1
        if self._asked > self._limits.max_fetches:
            self._answer(fetch_id, error=f"too many fetches (limit {self._limits.max_fetches})")
            return
        if not is_fetch_request(request):
            self._answer(fetch_id, error="invalid fetch request")
            return
        limit = self._limits.max_request_bytes
        if len((request.get("body") or "").encode("utf-8", "surrogatepass")) > limit:
            self._answer(fetch_id, error=f"fetch: the body is larger than {limit // 1024} KB")
            return
        self.count += 1
        task = asyncio.create_task(self._fetch(fetch_id, request))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel(self) -> None:
        for task in self._tasks:
            task.cancel()

    async def _fetch(self, fetch_id: int, request: dict[str, Any]) -> None:
        try:
            async with self._slots:
                response = await self._fetcher(request)
        except FetchDenied as exc:
            self._answer(fetch_id, error=str(exc) or "the request was refused")
            return
        self._answer(fetch_id, response=response)

    def _answer(
        self, fetch_id: int, *, response: dict[str, Any] | None = None, error: str | None = None
    ) -> None:
        if error is not None:
            self._send({"t": "fetched", "id": fetch_id, "ok": False, "error": error})
        else:
            self._send({"t": "fetched", "id": fetch_id, "ok": True, "response": response})


def _checked_result(raw: Any, limits: SandboxLimits) -> SandboxResult:
    """A result as a worker reported it: a field of the wrong type or size is a broken
    (or hostile) worker, not a handler outcome."""
    if not isinstance(raw, dict):
        raise FrameError("result is not an object")
    texts = ("result_json", "error")
    flags = ("ok", "timed_out", "truncated")
    valid = (
        all(raw.get(name) is None or isinstance(raw.get(name), str) for name in texts)
        and all(isinstance(raw.get(name), bool) for name in flags)
        and isinstance(raw.get("console"), str)
        and len(raw.get("result_json") or "") <= limits.max_result_bytes * 2 + 256
        and len(raw.get("error") or "") <= MAX_TEXT_FROM_WORKER
        and len(raw["console"]) <= limits.max_console_bytes + 256
    )
    if not valid:
        raise FrameError("malformed result")
    return SandboxResult(
        ok=raw["ok"],
        result_json=raw.get("result_json"),
        error=raw.get("error"),
        timed_out=raw["timed_out"],
        console=raw["console"],
        fetch_count=0,
        truncated=raw["truncated"],
    )


class SandboxPool:
    """Up to ``size`` workers shared fairly: at most ``per_lane`` busy per workspace,
    waiting calls served round-robin across workspaces, never first come first served."""

    def __init__(self, config: PoolConfig) -> None:
        self.config = config
        self.protections: dict[str, Any] | None = None
        self._idle: list[SandboxWorker] = []
        self._starting = 0
        self._busy: dict[Lane, int] = {}
        self._running: dict[Lane, set[SandboxWorker]] = {}
        self._waiting: OrderedDict[Lane, deque[asyncio.Future[SandboxWorker]]] = OrderedDict()
        self._warming: asyncio.Future[None] | None = None

    async def run(self, lane: Lane, **call: Any) -> SandboxResult:
        try:
            worker = await self._acquire(lane)
        except SandboxUnavailable:
            return SandboxResult.failure(UNAVAILABLE)
        try:
            return await worker.run(**call)
        finally:
            self._release(lane, worker)

    async def check(self, source: str, *, timeout_s: float) -> str | None:
        try:
            worker = await self._acquire("check")
        except SandboxUnavailable:
            return f"{CHECK_FAILED}: {UNAVAILABLE}"
        try:
            return await worker.check(source, timeout_s=timeout_s)
        finally:
            self._release("check", worker)

    async def warm(self) -> None:
        """Start one worker ahead of the first call. A second caller while it starts waits
        for the same worker (``/healthz`` at start-up reads its protections after this)."""
        if self._warming is None:
            if self._idle or self.protections is not None:
                return
            self._warming = asyncio.ensure_future(self._warm_one())
        warming = self._warming
        try:
            await asyncio.shield(warming)
        finally:
            if warming.done() and self._warming is warming:
                self._warming = None

    async def _warm_one(self) -> None:
        worker = await self._acquire("warm")
        self._release("warm", worker)

    def close(self) -> None:
        for worker in self._idle:
            worker.kill()
        self._idle.clear()

    @property
    def _total(self) -> int:
        return len(self._idle) + self._starting + sum(self._busy.values())

    async def _acquire(self, lane: Lane) -> SandboxWorker:
        waiter: asyncio.Future[SandboxWorker] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(lane, deque()).append(waiter)
        self._dispatch()
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._release(lane, waiter.result())
            else:
                self._forget(lane, waiter)
            raise

    def _release(self, lane: Lane, worker: SandboxWorker) -> None:
        self._busy[lane] -= 1
        if not self._busy[lane]:
            del self._busy[lane]
        running = self._running.get(lane)
        if running is not None:
            running.discard(worker)
            if not running:
                del self._running[lane]
        if worker.alive:
            self._idle.append(worker)
        self._dispatch()

    def _forget(self, lane: Lane, waiter: asyncio.Future[SandboxWorker]) -> None:
        queue = self._waiting.get(lane)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del self._waiting[lane]

    def _next_lane(self) -> Lane | None:
        for lane in self._waiting:
            if self._busy.get(lane, 0) < self._cap(lane):
                return lane
        return None

    def _cap(self, lane: Lane) -> int:
        return self.config.size if isinstance(lane, str) else self.config.per_lane

    def _dispatch(self) -> None:
        self._idle = [worker for worker in self._idle if worker.usable]
        while (lane := self._next_lane()) is not None:
            if not self._idle:
                if self._total < self.config.size:
                    self._spawn()
                return
            waiter = self._waiting[lane].popleft()
            if not self._waiting[lane]:
                del self._waiting[lane]
            else:
                self._waiting.move_to_end(lane)  # the next worker goes to another workspace
            self._busy[lane] = self._busy.get(lane, 0) + 1
            # The longest idle worker: a worker that just answered is still making its
            # next context, and V8 work there would slow this call down.
            worker = self._idle.pop(0)
            self._share_cpu(lane, worker)
            waiter.set_result(worker)

    def _share_cpu(self, lane: Lane, worker: SandboxWorker) -> None:
        """A workspace's calls running at once share one call's CPU weight between them,
        whatever their length: with k of them, each runs at the nice level whose kernel
        weight is about 1/k of the default (weights step by 1.25 a level), so a flood of
        short calls takes no more CPU than one call of another workspace. (Only lowered,
        for the rest of each call: raising a priority needs privileges.)"""
        running = self._running.setdefault(lane, set())
        running.add(worker)
        if isinstance(lane, str):
            return  # checks and warm-ups: the platform's own
        nice = min(LOW_PRIORITY_NICE, round(math.log(len(running)) / math.log(1.25)))
        for busy in running:
            busy.yield_to(nice)

    def _spawn(self) -> None:
        self._starting += 1
        asyncio.get_running_loop().create_task(self._start_one())

    async def _start_one(self) -> None:
        worker = SandboxWorker(self.config.memory_bytes)
        try:
            await worker.start()
        except (SandboxUnavailable, OSError) as exc:
            logger.error("sandbox worker could not start: %s", type(exc).__name__)
            self._starting -= 1
            self._fail_waiters()
            return
        self._starting -= 1
        if self.protections is None:
            self.protections = worker.protections
            logger.info("sandbox worker protections: %s", _describe(worker.protections))
        self._idle.append(worker)
        self._dispatch()

    def _fail_waiters(self) -> None:
        if self._starting or self._idle or sum(self._busy.values()):
            return  # someone else will serve them
        for queue in self._waiting.values():
            for waiter in queue:
                if not waiter.done():
                    waiter.set_exception(SandboxUnavailable(UNAVAILABLE))
        self._waiting.clear()


def _describe(protections: dict[str, Any]) -> str:
    return ", ".join(f"{name}={value}" for name, value in sorted(protections.items()))


# --- one event loop per process owns the pools --------------------------------------


class _PoolLoop:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.pools: dict[str, SandboxPool] = {}
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="sandbox-pool", daemon=True
        )
        self.thread.start()


_pool_loop: _PoolLoop | None = None
_pool_loop_lock = threading.Lock()


def _current() -> _PoolLoop:
    global _pool_loop
    with _pool_loop_lock:
        # A forked child (a Celery pool process) gets its own loop and workers.
        if _pool_loop is None or _pool_loop.pid != os.getpid():
            _pool_loop = _PoolLoop()
        return _pool_loop


def submit(coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Run ``coroutine`` on this process's pool loop."""
    return asyncio.run_coroutine_threadsafe(coroutine, _current().loop)


async def run_on_pool_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """From any event loop: cancelling the caller cancels the coroutine there too."""
    return await asyncio.wrap_future(submit(coroutine))


def pool(name: str, config: PoolConfig) -> SandboxPool:
    """This process's pool called ``name``; call only on the pool loop."""
    pools = _current().pools
    existing = pools.get(name)
    if existing is None or existing.config != config:
        if existing is not None:
            existing.close()
        pools[name] = existing = SandboxPool(config)
    return existing


def protections() -> dict[str, Any] | None:
    """What the workers of this process reported at start (None: none started yet)."""
    current = _pool_loop
    if current is None or current.pid != os.getpid():
        return None
    for started in current.pools.values():
        if started.protections is not None:
            return dict(started.protections)
    return None


async def pool_warm(name: str, config: PoolConfig) -> None:
    await pool(name, config).warm()
