"""Fixtures of the fault tests that run one real daphne on the embedded default."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.providers.llm.openai.fake_server import FakeOpenAIServer
from tests.faults.processes import Daphne, Platform, prepare_platform


@pytest.fixture
def web(tmp_path: Path, llm: FakeOpenAIServer) -> Iterator[tuple[Daphne, Platform]]:
    """One daphne, embedded (no Redis), its model the ``llm`` fixture's."""
    var = tmp_path / "var"
    var.mkdir()
    platform = prepare_platform(var, redis_url="", llm_base_url=llm.base_url)
    daphne = Daphne(platform)
    yield daphne, platform
    daphne.stop()
