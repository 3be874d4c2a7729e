"""The offline models load once, one at a time, verified; a model that failed fails
``/healthz``, refuses voice sessions in words, and is loaded again after a while."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from engine.protocol import ErrorCode
from engine.providers import audio
from engine.providers.audio import OfflineModel
from engine.providers.base import ProviderError
from engine.providers.stt.local import turn as local_turn

# A fresh interpreter (nothing imported yet: the import race is the point) starts both
# loads at the same moment, as the web process does at start, and waits for them.
_LOAD_BOTH = """
import json, time
from engine.providers.stt.local import adapter, turn
adapter.preload_models()
deadline = time.monotonic() + 240
while time.monotonic() < deadline:
    status = {m.name: m.status for m in (adapter._WHISPER, *turn.models())}
    if "loading" not in status.values():
        break
    time.sleep(0.05)
print(json.dumps(status))
"""


@pytest.fixture
def burning_cpus() -> Iterator[None]:
    """Two processes spinning (this machine has two cores): loads happen under pressure."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


@pytest.mark.skipif(not local_turn.available(), reason="the end-of-turn model is not installed")
@pytest.mark.usefixtures("burning_cpus")
def test_whisper_and_smart_turn_load_at_the_same_moment_under_cpu_pressure() -> None:
    for _start in range(3):
        run = subprocess.run(
            [sys.executable, "-c", _LOAD_BOTH], capture_output=True, text=True, timeout=300
        )
        assert run.returncode == 0, run.stderr[-2000:]
        assert json.loads(run.stdout) == {"whisper": "ok", "smart-turn": "ok"}
        assert "DeadlockError" not in run.stderr


@pytest.fixture
def models() -> Iterator[list[OfflineModel]]:
    """Models made by a test, taken out of the process's list afterwards."""
    made: list[OfflineModel] = []
    yield made
    for model in made:
        audio._MODELS.remove(model)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _flaky(failures: int) -> tuple[list[str], Any]:
    calls: list[str] = []

    def load() -> object:
        calls.append("load")
        if len(calls) <= failures:
            raise ImportError("no module named faster_whisper")
        return object()

    return calls, load


def test_a_model_that_loads_but_cannot_run_counts_as_failed(models: list[OfflineModel]) -> None:
    def broken_run(_model: object) -> None:
        raise RuntimeError("bad weights")

    with ThreadPoolExecutor(max_workers=1) as executor:
        model = OfflineModel(
            object, verify=broken_run, executor=executor, failure="reinstall",
            code=ErrorCode.STT_FAILED,
        )  # fmt: skip
        models.append(model)
        with pytest.raises(ProviderError, match="reinstall"):
            model.get()
    assert model.status == "failed"


def test_a_failed_model_fails_healthz_and_is_loaded_again_later(
    client: Any, db: None, models: list[OfflineModel]
) -> None:
    clock = Clock()
    calls, load = _flaky(failures=1)
    with ThreadPoolExecutor(max_workers=1) as executor:
        model = OfflineModel(
            load, name="whisper-test", executor=executor, failure="install it",
            code=ErrorCode.STT_FAILED, retry_after_s=30, clock=clock,
        )  # fmt: skip
        models.append(model)
        done = model.preload()
        assert done is not None
        done.result()
        down = client.get("/healthz")
        assert down.status_code == 503
        assert (down.json()["speech"], down.json()["speech_models"]["whisper-test"]) == (
            "down",
            "failed",
        )
        with pytest.raises(ProviderError, match="install it"):
            model.get()  # refused at once while the failure is fresh…
        assert calls == ["load"]
        clock.now += 31  # …and tried again once the pause is over
        client.get("/healthz")
        deadline = time.monotonic() + 5
        while model.status != "ok" and time.monotonic() < deadline:
            time.sleep(0.01)
    assert calls == ["load", "load"]
    assert client.get("/healthz").json()["speech_models"]["whisper-test"] == "ok"
