"""channels-redis, made to keep WebSocket sessions alive through Redis trouble.

A consumer waits on its channel (tool outcomes from sandbox workers arrive there) next
to its socket, and Channels ends the whole connection if that wait raises. Two things
made it raise although nothing was wrong with the session:

- redis-py 8 reads with a 5 s socket timeout by default, and channels-redis waits on
  its channel with a blocking pop of 5 s: every idle session died after about 5 s with
  ``TimeoutError``. The read timeout here is longer than the blocking pop.
- While Redis is down or restarting, every wait raised at once, ending every live
  session of the process. Here a wait that fails on the connection waits a little and
  tries again; the session goes on (only what needs Redis, such as server tools, fails
  meanwhile, each with its own error), and messages resume when Redis is back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from channels.exceptions import ChannelFull
from channels_redis.core import RedisChannelLayer
from channels_redis.utils import decode_hosts
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

RETRY_FIRST_S = 0.2
RETRY_MAX_S = 2.0
WARN_EVERY_S = 30.0
RECANCEL_S = 0.5


# channels-redis' send, in one round trip instead of four: drop expired messages, refuse
# past capacity, add, refresh the expiry. Tool outcomes and handovers go through it.
_SEND = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""


class ResilientRedisChannelLayer(RedisChannelLayer):  # type: ignore[misc]  # channels-redis has no types
    async def send(self, channel: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        assert self.require_valid_channel_name(channel), "Channel name not valid"
        assert "__asgi_channel__" not in message
        target = channel
        if "!" in channel:  # a process-local channel: the message names it
            message = {**message, "__asgi_channel__": channel}
            target = self.non_local_name(channel)
            # The shard of the process's channel, where its receive (and group_send) look:
            # channels-redis' own send hashes the full name, which with several hosts
            # puts a direct message on a shard nobody reads.
            index = self.consistent_hash(target)
        else:
            index = next(self._send_index_generator)
        now = time.time()
        sent = await self.connection(index).eval(
            _SEND,
            1,
            self.prefix + target,
            int(now) - int(self.expiry),
            self.get_capacity(channel),
            now,
            self.serialize(message),
            int(self.expiry),
        )
        if not sent:
            raise ChannelFull()

    def __init__(self, hosts: Any = None, **options: Any) -> None:
        read_timeout = self.brpop_timeout + 10
        hosts = [{"socket_timeout": read_timeout, **host} for host in decode_hosts(hosts)]
        super().__init__(hosts=hosts, **options)
        self._last_warning = -WARN_EVERY_S

    async def receive(self, channel: str) -> dict[str, Any]:
        delay = RETRY_FIRST_S
        while True:
            waiting = asyncio.ensure_future(super().receive(channel))
            try:
                # Not ``await waiting``: a cancel that lands while redis-py starts a read is
                # lost there, and channels-redis would then wait on the channel forever,
                # keeping a closed socket's consumer alive. Waiting this way, the
                # consumer's cancel always ends it; the wait itself is cancelled until done.
                await asyncio.wait({waiting})
            except asyncio.CancelledError:
                _cancel_until_done(waiting)
                raise
            try:
                message: dict[str, Any] = waiting.result()
                return message
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                self._warn(exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)

    def _warn(self, exc: BaseException) -> None:
        now = time.monotonic()
        if now - self._last_warning >= WARN_EVERY_S:  # once per outage, not once per session
            self._last_warning = now
            logger.warning(
                "channel layer: Redis unreachable (%s); sessions wait and retry",
                type(exc).__name__,
            )


def _cancel_until_done(task: asyncio.Future[Any]) -> None:
    if not task.done():
        task.cancel()
        asyncio.get_running_loop().call_later(RECANCEL_S, _cancel_until_done, task)
    elif not task.cancelled():
        task.exception()  # retrieved: a late Redis error is not "never retrieved" noise
