from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.sessions_app.harness import Harness


@pytest.fixture
async def make() -> AsyncIterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def factory(**kwargs: Any) -> Harness:
        made.append(Harness(**kwargs))
        return made[-1]

    yield factory
    for harness in made:
        await harness.session.close()
