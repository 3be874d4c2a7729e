"""The realtime side's rate limits, counted with ``platform_site.rates`` (Redis, or memory
on the embedded default). Every limit here is in the README's "Limits" table."""

from __future__ import annotations

import logging

from django.conf import settings
from redis.exceptions import RedisError

from platform_site import rates

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
    """The ``SessionGuard`` of one session: turns of this session, LLM requests of its key.

    While Redis is unreachable a running session is let through (open sessions keep
    talking, as the README promises); only new sessions are refused then.
    """

    def __init__(self, *, session_id: str, key_id: int) -> None:
        self._session_id, self._key_id = session_id, str(key_id)

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

    async def _hit(self, rate: rates.Rate, identifier: str) -> int | None:
        try:
            return await rates.hit(rate, identifier)
        except (RedisError, rates.StorageError, OSError) as exc:
            logger.warning("rate limit %s not checked: %s", rate.name, type(exc).__name__)
            return None
