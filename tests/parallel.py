"""Each pytest-xdist worker gets its own Redis database and its own VAR_DIR.

tests/conftest.py sets a worker's environment (``worker_environment``) as soon as its
process exists, before pytest-django reads the settings there. A worker (gw0, gw1, …)
takes REDIS_URL's database number plus its index: with REDIS_URL=redis://127.0.0.1:6379/8
and ``-n 2`` the workers use databases 8 and 9, so one worker's Celery queue, channel
layer and session leases never reach the other's. pytest-django gives each worker its own
test database (test_<name>_gw0, …). Without xdist nothing changes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

SHARED_REDIS_URL = "TESTS_SHARED_REDIS_URL"  # the run's REDIS_URL, as a worker sees it


def worker_index(worker_id: str | None = None) -> int | None:
    """0, 1, … in an xdist worker; None in a run without xdist (or in its controller)."""
    worker_id = worker_id or os.environ.get("PYTEST_XDIST_WORKER", "")
    match = re.fullmatch(r"gw(\d+)", worker_id)
    return int(match.group(1)) if match else None


def redis_url_for_worker(url: str, index: int) -> str:
    """``url`` with its database number moved up by ``index`` (redis:// and rediss://)."""
    parts = urlsplit(url)
    if parts.scheme not in {"redis", "rediss"}:
        raise ValueError(f"under pytest-xdist REDIS_URL must be redis:// or rediss://, not {url!r}")
    db = int(parts.path.strip("/") or 0) + index
    if db > 15:
        raise ValueError(f"worker {index} would use Redis database {db} (Redis has 0-15)")
    return urlunsplit(parts._replace(path=f"/{db}"))


def worker_environment(worker_id: str, *, redis_url: str | None, var_dir: Path) -> dict[str, str]:
    """The variables worker ``worker_id`` starts with (the run's own are ``redis_url`` and
    ``var_dir``). Its own VAR_DIR: workers creating the development keyring there at once
    would race."""
    index = worker_index(worker_id)
    if index is None:
        raise ValueError(f"not a pytest-xdist worker id: {worker_id!r}")
    own_var_dir = var_dir / f"xdist-{worker_id}"
    own_var_dir.mkdir(parents=True, exist_ok=True)
    environment = {"VAR_DIR": str(own_var_dir)}
    if redis_url:
        environment["REDIS_URL"] = redis_url_for_worker(redis_url, index)
        environment[SHARED_REDIS_URL] = redis_url
    return environment
