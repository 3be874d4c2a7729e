"""Runs of agent tests and simulations, off the request, each in the slot of its
workspace's taken when it was queued (``dispatch``). Each evals worker sweeps now and then
for runs parked behind slots a killed worker held."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import close_old_connections

from core import in_flight
from evals_app import dispatch, services
from evals_app.models import Simulation, Status, TestRun

QUEUE = "evals"


def _test_run(run_id: int) -> None:
    if TestRun.objects.filter(pk=run_id, status=Status.QUEUED).exists():  # once, redelivered or not
        services.test_run_execute(run_id=run_id)


def _simulation(simulation_id: int) -> None:
    if Simulation.objects.filter(pk=simulation_id, status=Status.QUEUED).exists():
        services.simulation_execute(simulation_id=simulation_id)


@shared_task(name=dispatch.TEST_RUN_TASK, ignore_result=True, acks_late=False)
def test_run(run_id: int, slot: str | None = None) -> None:
    close_old_connections()
    dispatch.run_in_slot(run_id, slot, _test_run)


@shared_task(name=dispatch.SIMULATION_TASK, ignore_result=True, acks_late=False)
def simulation(simulation_id: int, slot: str | None = None) -> None:
    close_old_connections()
    dispatch.run_in_slot(simulation_id, slot, _simulation)


@worker_ready.connect
def _start_sweeper(sender: Any = None, **_: Any) -> None:
    in_flight.start_sweeper(
        sender, queue=QUEUE, every_s=lambda: float(settings.EVALS_PARKED_SWEEP_S),
        sweep=dispatch.sweep,
    )  # fmt: skip


@shared_task(name="evals.stuck_sweep", ignore_result=True)
def stuck_sweep() -> None:
    close_old_connections()
    services.stuck_sweep()


def test_run_start(run_id: int) -> None:
    workspace_id = TestRun.objects.values_list("workspace_id", flat=True).get(pk=run_id)
    dispatch.schedule(dispatch.TEST_RUN_TASK, run_id, workspace_id)


def simulations_start(simulation_ids: list[int]) -> None:
    owners = Simulation.objects.filter(pk__in=simulation_ids).values_list("pk", "workspace_id")
    for simulation_id, workspace_id in sorted(owners):
        dispatch.schedule(dispatch.SIMULATION_TASK, simulation_id, workspace_id)
