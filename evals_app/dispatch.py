"""Where test runs and simulations run: Celery tasks on the ``evals`` queue, each in a slot
of its workspace's (``core.in_flight``, as knowledge indexing and webhook deliveries).

The queue is shared by every workspace and served in order, and a run or a simulation
holds a worker for minutes, so a workspace has at most ``EVALS_WORKSPACE_CONCURRENCY`` of
them queued or running: its others are parked, not queued, and the next one is queued
when one of its own ends (however it ends). Another workspace's run thus waits behind at
most that many of each busy workspace's, however many its in-flight bounds
(``TEST_RUNS_IN_FLIGHT_MAX``, ``SIMULATIONS_IN_FLIGHT_MAX``) let it start. A slot a
killed worker held lapses after ``EVALS_SLOT_TTL_S``; each evals worker's sweep then
queues what it kept parked.

On the embedded default the tasks run in place (as before: the request that starts a run
answers with its result) and the slots are counted in this process: a run over the cap is
started by the one that gives its slot back."""

from __future__ import annotations

from collections.abc import Callable

from celery import current_app
from django.conf import settings

from core.in_flight import WorkspaceSlots

TEST_RUN_TASK = "evals.test_run"  # evals_app.tasks; routed to the evals queue
SIMULATION_TASK = "evals.simulation"
_KINDS = (TEST_RUN_TASK, SIMULATION_TASK)

slots = WorkspaceSlots(
    "evals",
    cap=lambda: int(settings.EVALS_WORKSPACE_CONCURRENCY),
    ttl_s=lambda: float(settings.EVALS_SLOT_TTL_S),
)


def schedule(task: str, object_id: int, workspace_id: int) -> None:
    """Queue ``task`` (a test run's or a simulation's) in a slot of the workspace's, or
    park it until one is free."""
    job = f"{task}|{object_id}"
    slot = slots.take_or_park(workspace_id, job)
    if slot is not None:
        _start(job, slot)


def run_in_slot(object_id: int, slot: str | None, execute: Callable[[int], object]) -> None:
    """Run the task's work, then give its slot back: the workspace's next parked run or
    simulation is queued (also when the work failed)."""
    slots.run(slot, lambda: execute(object_id), _start)


def sweep() -> int:
    """Queue the parked runs of workspaces whose slots lapsed (a worker was killed)."""
    return slots.sweep_and_start(_start)


def _start(job: str, slot: str) -> None:
    task, object_id = job.rsplit("|", 1)
    if task in _KINDS:  # parked by this module: never anything else
        # The registered task (not send_task): on the embedded default it runs in place.
        current_app.tasks[task].delay(int(object_id), slot)
