"""How many deliveries of a workspace are in flight, capped (``WEBHOOK_WORKSPACE_IN_FLIGHT``),
and the deliveries that wait for one of its slots: ``core.in_flight`` with a delivery's
attempt as the parked job. A slot lapses after ``slot_ttl_s()``, longer than any attempt
can take; each webhook worker sweeps every ``WEBHOOK_PARKED_SWEEP_S``.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from core.in_flight import WorkspaceSlots

SLOT_MARGIN_S = 10.0


@dataclass(frozen=True)
class Parked:
    """Attempt ``attempt`` of a delivery, waiting for a slot of its workspace."""

    delivery_id: int
    attempt: int

    def encoded(self) -> str:
        return f"{self.delivery_id}:{self.attempt}"

    @classmethod
    def decoded(cls, entry: str) -> Parked:
        delivery_id, attempt = entry.split(":")
        return cls(int(delivery_id), int(attempt))


def slot_ttl_s() -> float:
    """Longer than an attempt can take: the receiver's timeout (connect, then answer) and
    the database work around it."""
    return 2 * float(settings.WEBHOOK_TIMEOUT_S) + SLOT_MARGIN_S


_slots = WorkspaceSlots(
    "webhooks", cap=lambda: int(settings.WEBHOOK_WORKSPACE_IN_FLIGHT), ttl_s=slot_ttl_s
)


def take_or_park(workspace_id: int, parked: Parked) -> str | None:
    """A slot of the workspace's (its token), or None: the attempt is parked."""
    return _slots.take_or_park(workspace_id, parked.encoded())


def hold(token: str) -> bool:
    return _slots.hold(token)


def release(token: str) -> list[tuple[Parked, str]]:
    return [(Parked.decoded(job), handed) for job, handed in _slots.release(token)]


def sweep() -> list[tuple[Parked, str]]:
    return [(Parked.decoded(job), handed) for job, handed in _slots.sweep()]


def in_flight(workspace_id: int) -> int:
    return _slots.in_flight(workspace_id)


def parked(workspace_id: int) -> int:
    return _slots.parked(workspace_id)
