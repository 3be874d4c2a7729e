"""Running the same work in N threads at the same instant (attacks that race)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from django.db import connection

_Result = TypeVar("_Result")


def at_once(work: Callable[[int], _Result], count: int, *, timeout_s: float = 60) -> list[_Result]:
    """``work(0)`` … ``work(count - 1)``, each in its own thread, released together by a
    barrier; their results in index order. An exception in a thread is raised here. Each
    thread closes its database connection (a test database must be dropped afterwards)."""
    start = threading.Barrier(count)
    results: dict[int, _Result] = {}
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            start.wait()
            results[index] = work(index)
        except BaseException as error:  # raised in the test's thread below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout_s)
    if errors:
        raise errors[0]
    assert len(results) == count, f"{count - len(results)} threads did not finish"
    return [results[i] for i in range(count)]
