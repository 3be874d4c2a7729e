from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _pools_closed(http_pools_closed: None) -> None:
    """Every test here reaches a provider's adapter, which keeps an HTTP pool per loop."""
