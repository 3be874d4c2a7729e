"""The collector under daphne: start-up's objects are frozen once the reactor runs."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from typing import Any

import pytest

from platform_site import collector


class Reactor:
    def __init__(self) -> None:
        self.when_running: list[Callable[[], Any]] = []

    def callWhenRunning(self, function: Callable[[], Any]) -> None:
        self.when_running.append(function)


def test_under_daphne_start_up_is_frozen_once_the_reactor_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reactor = Reactor()
    monkeypatch.setitem(sys.modules, "twisted.internet.reactor", reactor)
    collector.freeze_start_up_in_daphne()
    assert reactor.when_running == [collector.freeze]
    try:
        collector.freeze()
        assert gc.get_freeze_count() > 0
        assert gc.isenabled()  # young and full collections go on, without those objects
    finally:
        gc.unfreeze()


def test_without_daphne_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "twisted.internet.reactor", raising=False)
    collector.freeze_start_up_in_daphne()
    assert gc.get_freeze_count() == 0
