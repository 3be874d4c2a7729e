from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from knowledge_app import dispatch, search, session_tool
from tests.sessions_app.conftest import _pools_closed, no_leases  # noqa: F401 (fixtures)


@pytest.fixture(autouse=True)
def _index_on_a_thread(settings: Any) -> None:
    """Indexing on the embedded default's thread, whatever the stack (test_celery_indexing
    runs the production path, with a real worker)."""
    settings.CELERY_TASK_ALWAYS_EAGER = True


@pytest.fixture(autouse=True)
def _fresh_vector_cache() -> Iterator[None]:
    """Each test's database numbers its knowledge bases anew: no vectors from another."""
    search.vectors.clear()
    search.questions.clear()
    yield
    dispatch.wait_idle()
    session_tool.searches_stop()
    search.vectors.clear()
