"""pytest-xdist workers never share a Redis database (tests/parallel.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.parallel import (
    SHARED_REDIS_URL,
    redis_url_for_worker,
    worker_environment,
    worker_index,
)


def test_each_worker_moves_the_database_number_up_by_its_index() -> None:
    assert redis_url_for_worker("redis://127.0.0.1:6379/8", 0) == "redis://127.0.0.1:6379/8"
    assert redis_url_for_worker("redis://127.0.0.1:6379/8", 1) == "redis://127.0.0.1:6379/9"
    assert redis_url_for_worker("redis://127.0.0.1:6379", 2) == "redis://127.0.0.1:6379/2"
    assert redis_url_for_worker("rediss://:pw@cache.test:6380/0", 1) == (
        "rediss://:pw@cache.test:6380/1"
    )


@pytest.mark.parametrize(
    ("url", "index", "message"),
    [
        ("redis://127.0.0.1:6379/15", 1, "database 16"),
        ("unix:///run/redis.sock?db=0", 1, "redis:// or rediss://"),
    ],
)
def test_a_worker_that_cannot_have_a_database_of_its_own_stops_the_run(
    url: str, index: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        redis_url_for_worker(url, index)


def test_each_worker_gets_its_own_var_dir_and_redis_database(tmp_path: Path) -> None:
    assert worker_environment("gw1", redis_url="redis://r.test:6379/8", var_dir=tmp_path) == {
        "VAR_DIR": str(tmp_path / "xdist-gw1"),
        "REDIS_URL": "redis://r.test:6379/9",
        SHARED_REDIS_URL: "redis://r.test:6379/8",
    }
    assert (tmp_path / "xdist-gw1").is_dir()
    assert worker_environment("gw0", redis_url=None, var_dir=tmp_path) == {
        "VAR_DIR": str(tmp_path / "xdist-gw0")
    }


def test_this_worker_uses_its_own_database(settings) -> None:
    index, shared = worker_index(), os.environ.get(SHARED_REDIS_URL)
    if index is None or not shared:
        pytest.skip("only under pytest-xdist with REDIS_URL")
    assert settings.REDIS_URL == redis_url_for_worker(shared, index)
    assert settings.CELERY_BROKER_URL == settings.REDIS_URL
    assert settings.VAR_DIR.name == f"xdist-gw{index}"
