"""Where post-call work runs: a Celery task on the ``postcall`` queue in production, a
thread of the platform's own process on the embedded default (an eager task would run an
LLM request inside the session's record writer), one at a time: it is never urgent
(``core.background``)."""

from __future__ import annotations

from collections.abc import Callable

from core.background import BackgroundQueue

ANALYSIS_TASK = "postcall.analysis_run"  # postcall_app.tasks; routed to the postcall queue

_queue = BackgroundQueue("postcall")


def schedule(task: str, object_id: int, run: Callable[[int], object]) -> None:
    _queue.schedule(task, object_id, run)


def wait_idle() -> None:
    """Tests on the embedded default: wait for queued post-call work to finish."""
    _queue.wait_idle()
