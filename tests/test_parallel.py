"""pytest-xdist workers never share a Redis database (tests/parallel.py)."""

from __future__ import annotations

import pytest

from tests.parallel import BASE_REDIS_URL, redis_url_for_worker, worker_index


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


def test_this_worker_uses_its_own_database(settings) -> None:
    index = worker_index()
    if index is None or not BASE_REDIS_URL:
        pytest.skip("only under pytest-xdist with REDIS_URL")
    assert settings.REDIS_URL == redis_url_for_worker(BASE_REDIS_URL, index)
    assert settings.CELERY_BROKER_URL == settings.REDIS_URL
