"""Circuit breakers: a provider that keeps failing is skipped for a while, not retried on
every sentence.

One breaker per provider and workspace (``key``: the kind, the provider's label and the
workspace whose credential it uses), shared by every session of that workspace in this
process. ``failures`` failed calls in a row (each after its retries) open it: the
fallbacks serve at once, without paying the primary's retries first. While it is open a
probe (``resilience`` gives one: a one-word synthesis, a two-word chat) asks the provider
every ``cooldown_s``; the first answer closes it. As LiveKit's ``FallbackAdapter`` does,
a chain whose every provider is open tries them all anyway: skipping everyone would
answer nobody.

Openings and closings are reported to ``listeners`` (``engine.metrics`` counts them) and
logged with the provider's label, never the workspace's data.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

logger = logging.getLogger(__name__)

Key = tuple[str, str, str]  # kind, provider label, scope (the workspace)
Probe = Callable[[], Awaitable[object]]
Listener = Callable[[str, bool], None]  # kind, opened (False: closed)

_KEEP = 10_000  # breakers kept per process (the least recently used go first)
_PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class BreakerPolicy:
    failures: int = 3  # failed calls in a row that open the breaker
    cooldown_s: float = 30.0  # between two probes while it is open


class Breaker:
    def __init__(
        self, key: Key, policy: BreakerPolicy, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.key, self.policy, self._clock = key, policy, clock
        self.failures = 0
        self.opened_at: float | None = None
        self._probe: asyncio.Task[None] | None = None

    @property
    def open(self) -> bool:
        return self.opened_at is not None

    def allows(self) -> bool:
        """Whether a call may go to the provider now. Open: no, unless its probe is gone
        (its event loop ended) and a cool-down passed; then one real call is the probe."""
        if self.opened_at is None:
            return True
        probing = self._probe is not None and not self._probe.done()
        return not probing and self._clock() - self.opened_at >= self.policy.cooldown_s

    def succeeded(self) -> None:
        self.failures = 0
        if self.opened_at is not None:
            self._change(opened=False)

    def failed(self, probe: Probe | None) -> None:
        self.failures += 1
        if self.failures < self.policy.failures:
            return
        if self.opened_at is None:
            self._change(opened=True)
        else:
            self.opened_at = self._clock()  # a failed real call: another cool-down
        if probe is not None and (self._probe is None or self._probe.done()):
            self._probe = asyncio.get_running_loop().create_task(self._probing(probe))

    async def _probing(self, probe: Probe) -> None:
        while self.opened_at is not None:
            await asyncio.sleep(self.policy.cooldown_s)
            if self.opened_at is None:
                return
            try:
                await asyncio.wait_for(probe(), _PROBE_TIMEOUT_S)
            except Exception as exc:  # still failing: wait another cool-down
                logger.info("%s %s: probe failed (%s)", *self.key[:2], type(exc).__name__)
                continue
            self.succeeded()

    def _change(self, *, opened: bool) -> None:
        kind, label, _scope = self.key
        self.opened_at = self._clock() if opened else None
        if not opened:
            self.failures = 0
        logger.warning("%s provider %s: circuit %s", kind, label, "opened" if opened else "closed")
        for listener in listeners:
            with contextlib.suppress(Exception):  # metrics never break a call
                listener(kind, opened)

    def stop(self) -> None:
        if self._probe is not None:
            with contextlib.suppress(RuntimeError):  # its event loop is already closed
                self._probe.cancel()


listeners: list[Listener] = []
_breakers: OrderedDict[Key, Breaker] = OrderedDict()


def breaker_for(key: Key, policy: BreakerPolicy) -> Breaker:
    """This process's breaker for ``key`` (made on first use)."""
    breaker = _breakers.get(key)
    if breaker is None:
        breaker = _breakers[key] = Breaker(key, policy)
        while len(_breakers) > _KEEP:
            _key, oldest = _breakers.popitem(last=False)
            oldest.stop()
    else:
        _breakers.move_to_end(key)
    return breaker


def forget_all() -> None:
    """Drop every breaker (tests; a process that starts over)."""
    for breaker in _breakers.values():
        breaker.stop()
    _breakers.clear()
