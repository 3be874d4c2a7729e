"""The realtime side's rate limits, counted with ``core.rates`` (Redis, or memory
on the embedded default). Every limit here is in docs/limits.md."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.conf import settings
from redis.exceptions import RedisError

from core import rates
from engine.protocol import CLIENT_SAMPLE_RATE, ErrorCode
from usage_app import quota_counters

MESSAGE_BURST_S = 5  # WS_MESSAGES_PER_SECOND × this may arrive at once
MESSAGES_PENDING_S = 20  # WS_MESSAGES_PER_SECOND × this may wait for the session at most
AUDIO_BURST_S = 10  # seconds of audio that may arrive at once (a network stall, then a flush)
AUDIO_BYTES_PER_S = CLIENT_SAMPLE_RATE * 2  # PCM16 mono
INBOUND_BURST_S = 4  # seconds of a socket's byte allowance that may arrive at once

logger = logging.getLogger(__name__)


def connect_rate() -> rates.Rate:
    return rates.Rate("ws-connect", settings.WS_CONNECTIONS_PER_MINUTE, 60)


def turn_rate() -> rates.Rate:
    return rates.Rate("turn", settings.TURNS_PER_MINUTE, 60)


def llm_rate() -> rates.Rate:
    return rates.Rate("llm", settings.LLM_REQUESTS_PER_MINUTE, 60)


async def connection_refusal(*, key_id: int, address: str) -> str | None:
    """Count a new socket of this key from this address; the refusal in words, if any.
    Raises when Redis is unreachable (the caller refuses with 4503)."""
    wait_s = await rates.hit(connect_rate(), str(key_id), address)
    if wait_s is None:
        return None
    return (
        f"more than {settings.WS_CONNECTIONS_PER_MINUTE} connections a minute from this "
        f"address; try again in {wait_s} s"
    )


class SessionLimits:
    """The ``SessionGuard`` of one session: turns of this session, LLM requests of its key,
    its workspace's quotas (``usage_app.quota_counters``).

    While Redis is unreachable a running session is let through (open sessions keep
    talking, as docs/limits.md promises); only new sessions are refused then.
    """

    def __init__(self, *, session_id: str, key_id: int, workspace_id: int) -> None:
        self._session_id, self._key_id = session_id, str(key_id)
        self._workspace_id = workspace_id

    async def turn(self) -> str | None:
        wait_s = await self._hit(turn_rate(), self._session_id)
        if wait_s is None:
            return None
        return (
            f"at most {settings.TURNS_PER_MINUTE} turns a minute in one session; "
            f"try again in {wait_s} s"
        )

    async def llm_request(self) -> str | None:
        wait_s = await self._hit(llm_rate(), self._key_id)
        if wait_s is None:
            return None
        return (
            f"this key's {settings.LLM_REQUESTS_PER_MINUTE} model requests a minute are used "
            f"up; try again in {wait_s} s"
        )

    async def turn_quota(self) -> str | None:
        return await quota_counters.turn_refusal(workspace_id=self._workspace_id)

    async def tool_call_quota(self) -> str | None:
        return await quota_counters.tool_call_reserve(workspace_id=self._workspace_id)

    async def _hit(self, rate: rates.Rate, identifier: str) -> int | None:
        try:
            return await rates.hit(rate, identifier)
        except (RedisError, rates.StorageError, OSError) as exc:
            logger.warning("rate limit %s not checked: %s", rate.name, type(exc).__name__)
            return None


class _Bucket:
    """A token bucket: ``rate`` a second, ``burst`` at most saved up."""

    def __init__(self, *, rate: float, burst: float, clock: Callable[[], float]) -> None:
        self._rate, self._burst, self._clock = rate, burst, clock
        self._tokens, self._at = burst, clock()

    def take(self, amount: float) -> bool:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if self._tokens < amount:
            return False
        self._tokens -= amount
        return True


class InboundBudget:
    """The audio one socket may send, counted in its own process (it is that socket's alone):
    no faster than ``AUDIO_MAX_SPEED`` times real time. A socket past it is a flood, not a
    person, and its session ends (the refusal's code and message are returned). Its
    messages are counted before they reach the session (``InboundMessages``).

    By hand rather than with ``core.rates``: this runs on every audio frame, where
    a storage round trip (even the in-memory one's locks) costs more than the frame's own
    work, and nothing needs sharing across processes.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._audio = _Bucket(
            rate=AUDIO_BYTES_PER_S * settings.AUDIO_MAX_SPEED,
            burst=AUDIO_BYTES_PER_S * AUDIO_BURST_S,
            clock=clock,
        )

    def audio(self, size: int) -> tuple[ErrorCode, str] | None:
        if self._audio.take(size):
            return None
        return (
            ErrorCode.AUDIO_TOO_FAST,
            f"audio arrived faster than {settings.AUDIO_MAX_SPEED:g} times real time",
        )


class InboundMessages:
    """The messages one socket may send, counted as they arrive: however small, each costs
    the process its own bookkeeping (300,000 tiny ones held 25-30 MB). ``WS_MESSAGES_PER_SECOND``
    a second, ``MESSAGE_BURST_S`` of it at once; also bounds what arrived and was not handled
    yet (``pending``). A microphone's 20 ms frames are 50 a second."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_second = settings.WS_MESSAGES_PER_SECOND
        self.pending_max = self.per_second * MESSAGES_PENDING_S
        burst = self.per_second * MESSAGE_BURST_S
        self._bucket = _Bucket(rate=self.per_second, burst=burst, clock=clock)

    def take(self, *, pending: int) -> str | None:
        """None if one more message may come in now; else the refusal, in words."""
        if self._bucket.take(1) and pending < self.pending_max:
            return None
        return f"more than {self.per_second} messages a second on one socket"


class InboundBytes:
    """The bytes one socket may send, counted as they arrive: a flood of large frames is
    refused before it is buffered, whatever the session is busy with meanwhile. Also
    bounds what arrived and was not handled yet (``pending``)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        audio = AUDIO_BYTES_PER_S * settings.AUDIO_MAX_SPEED
        self.per_second = max(settings.WS_INBOUND_KB_PER_SECOND * 1024, int(2 * audio))
        self.burst = self.per_second * INBOUND_BURST_S
        self._bucket = _Bucket(rate=self.per_second, burst=self.burst, clock=clock)

    def take(self, size: int, *, pending: int) -> str | None:
        """None if ``size`` more bytes may come in now; else the refusal, in words."""
        if self._bucket.take(size) and pending + size <= self.burst:
            return None
        return f"more than {self.per_second // 1024} KB a second on one socket"
