"""Bad configuration stops the process at start, with a message naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from secrets_app import crypto

ROOT = Path(__file__).resolve().parent.parent
GOOD_SECRET_KEY = "k" * 50


def _start(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    clean.update({"VAR_DIR": str(tmp_path), **env})
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT, env=clean, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"DEBUG": "maybe"}, "DEBUG"),
        ({"DEBUG": "false"}, "SECRET_KEY"),
        ({"DEBUG": "false", "SECRET_KEY": GOOD_SECRET_KEY}, "SECRETS_KEYRING"),
        ({"SECRETS_KEYRING": "k1:tooshort"}, "SECRETS_KEYRING"),
        ({"DATABASE_URL": "nosuchdb://x"}, "DATABASE_URL"),
        ({"REDIS_URL": "http://localhost:6379"}, "REDIS_URL"),
        ({"COUNTERS_URL": "http://localhost:6379"}, "COUNTERS_URL"),
        ({"SESSION_STATE_URL": "memcached://x:11211"}, "SESSION_STATE_URL"),
        # channels-redis shards on its own: a cluster URL is refused for the channel layer
        ({"CHANNEL_LAYER_URL": "redis+cluster://a:7001"}, "CHANNEL_LAYER_URL"),
        ({"REDIS_URL": "redis+cluster://a:7001"}, "REDIS_URL"),
        ({"SESSION_LIMIT_PER_WORKSPACE": "lots"}, "SESSION_LIMIT_PER_WORKSPACE"),
        ({"SECRET_KEY_FILE": "/nonexistent/secret"}, "SECRET_KEY_FILE"),
        ({"EGRESS_PORTS": "80,https"}, "EGRESS_PORTS"),
        ({"STT_PROVIDER": "whisperer"}, "STT_PROVIDER"),
        ({"TTS_PROVIDER": "orpheuss"}, "TTS_PROVIDER"),
        ({"TOOL_RUNNER": "sandbx"}, "TOOL_RUNNER"),
        ({"STT_PROVIDER": "fake"}, "ALLOW_FAKE_PROVIDERS"),  # the scripted fakes: tests only
        ({"LOCAL_STT_END_SILENCE_MS": "5"}, "LOCAL_STT_END_SILENCE_MS"),
        ({"ORPHEUS_API_KEY_FILE": "/nonexistent/key"}, "ORPHEUS_API_KEY_FILE"),
        ({"BARGE_IN_MIN_WORDS": "-1"}, "BARGE_IN_MIN_WORDS"),
        (
            {
                "DEBUG": "false",
                "SECRET_KEY": GOOD_SECRET_KEY,
                "SECRETS_KEYRING": crypto.new_keyring_entry("k1"),
                "DEV_ALLOW_PRIVATE_EGRESS": "true",
            },
            "DEV_ALLOW_PRIVATE_EGRESS",
        ),
        (  # the old name of the switch is refused in production too
            {
                "DEBUG": "false",
                "SECRET_KEY": GOOD_SECRET_KEY,
                "SECRETS_KEYRING": crypto.new_keyring_entry("k1"),
                "SANDBOX_EGRESS_ALLOW_PRIVATE": "true",
            },
            "DEV_ALLOW_PRIVATE_EGRESS",
        ),
        ({"SANDBOX_EGRESS_PORTS": "80,https"}, "SANDBOX_EGRESS_PORTS"),
        (  # both names, saying different things
            {"DEV_ALLOW_PRIVATE_EGRESS": "true", "SANDBOX_EGRESS_ALLOW_PRIVATE": "false"},
            "set only DEV_ALLOW_PRIVATE_EGRESS",
        ),
    ],
)
def test_bad_configuration_fails_at_start(tmp_path, env, variable):
    result = _start(tmp_path, **env)
    assert result.returncode != 0
    assert variable in result.stderr, result.stderr[-2000:]


def test_production_configuration_starts(tmp_path):
    result = _start(
        tmp_path,
        DEBUG="false",
        SECRET_KEY=GOOD_SECRET_KEY,
        SECRETS_KEYRING=crypto.new_keyring_entry("k1"),
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_development_keyring_is_generated_once_and_reused(tmp_path):
    assert _start(tmp_path).returncode == 0
    keyring_file = tmp_path / "secrets_keyring"
    first = keyring_file.read_text()
    assert oct(keyring_file.stat().st_mode & 0o777) == "0o600"
    assert _start(tmp_path).returncode == 0
    assert keyring_file.read_text() == first
