"""Each pytest-xdist worker gets its own Redis database and its own VAR_DIR.

Loaded with ``-p tests.parallel`` (pyproject's addopts), so it runs before pytest-django
reads the settings. A worker (gw0, gw1, …) takes REDIS_URL's database number plus its
index: with REDIS_URL=redis://127.0.0.1:6379/8 and ``-n 2`` the workers use databases 8
and 9, so one worker's Celery queue, channel layer and session leases never reach the
other's. pytest-django gives each worker its own test database (test_<name>_gw0, …).
Without xdist nothing changes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
BASE_REDIS_URL = os.environ.get("REDIS_URL", "")  # as the run was started


def worker_index() -> int | None:
    """0, 1, … in an xdist worker; None in a run without xdist (or in its controller)."""
    match = re.fullmatch(r"gw(\d+)", _WORKER)
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


def _isolate_worker() -> None:
    index = worker_index()
    if index is None:
        return
    if os.environ.get("REDIS_URL"):
        os.environ["REDIS_URL"] = redis_url_for_worker(os.environ["REDIS_URL"], index)
    # The development keyring (and collected static files) live under VAR_DIR; workers
    # creating the same keyring file at once would race.
    base = Path(os.environ.get("VAR_DIR") or Path(__file__).resolve().parent.parent / "var")
    var_dir = base / f"xdist-{_WORKER}"
    var_dir.mkdir(parents=True, exist_ok=True)
    os.environ["VAR_DIR"] = str(var_dir)


_isolate_worker()
