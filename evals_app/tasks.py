"""Runs of agent tests and simulations, off the request."""

from __future__ import annotations

from celery import shared_task
from django.db import close_old_connections

from evals_app import services
from evals_app.models import Simulation, Status, TestRun


@shared_task(name="evals.test_run", ignore_result=True)
def test_run(run_id: int) -> None:
    close_old_connections()
    if TestRun.objects.filter(pk=run_id, status=Status.QUEUED).exists():  # once, redelivered or not
        services.test_run_execute(run_id=run_id)


@shared_task(name="evals.simulation", ignore_result=True)
def simulation(simulation_id: int) -> None:
    close_old_connections()
    if Simulation.objects.filter(pk=simulation_id, status=Status.QUEUED).exists():
        services.simulation_execute(simulation_id=simulation_id)


@shared_task(name="evals.stuck_sweep", ignore_result=True)
def stuck_sweep() -> None:
    close_old_connections()
    services.stuck_sweep()


def test_run_start(run_id: int) -> None:
    test_run.delay(run_id)


def simulations_start(simulation_ids: list[int]) -> None:
    for simulation_id in simulation_ids:
        simulation.delay(simulation_id)
