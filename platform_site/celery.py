"""The Celery app. Without REDIS_URL, tasks run eagerly in the calling process."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")

app = Celery("platform_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Each task process runs one call at a time and keeps its jailed V8 workers and its
# event loop for its whole life; thread and greenlet pools would run calls side by side
# in one process, where a call's time and fetches can no longer be told apart.
SAFE_POOLS = ("prefork", "processes", "solo")


def pool_name(pool_cls: Any) -> str:
    name = pool_cls if isinstance(pool_cls, str) else getattr(pool_cls, "__module__", "")
    return str(name).rsplit(".", 1)[-1].rsplit(":", 1)[0]


@worker_init.connect
def _refuse_unsafe_pools(sender: Any = None, **_: Any) -> None:
    name = pool_name(getattr(sender, "pool_cls", "prefork"))
    aliases = {"thread": "threads", "gevent": "gevent", "eventlet": "eventlet"}
    if name not in SAFE_POOLS:
        shown = aliases.get(name, name)
        raise SystemExit(
            f"the {shown} pool is not safe for the sandbox queue: "
            "start the worker with --pool prefork (the default) or --pool solo"
        )
