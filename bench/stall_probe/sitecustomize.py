"""Why a web process's event loop stalls: a diagnostic, loaded into daphne by ``site``.

    STALL_PROBE=/tmp/stalls PYTHONPATH=bench/stall_probe python bench/load.py ...
    python bench/stall_probe/summary.py /tmp/stalls/stalls-<pid>.jsonl

Active only in a process started as ``python -m daphne`` with ``STALL_PROBE`` (a
directory) set; any other process (the load generator, workers) ignores it. One JSON line
per observation in ``$STALL_PROBE/stalls-<pid>.jsonl``:

- ``lag``: a 10 ms timer on the event loop woke more than 15 ms late;
- ``slow``: one callback of the loop ran over 10 ms, with the main thread's stack when a
  watchdog thread caught it running past 15 ms (none while a collection holds the GIL);
- ``gc``: a collection over 5 ms (generation, ms, objects freed); every full one as
  ``gen2`` with the objects left in the old generation and the frozen ones;
- ``sched``: every 100 ms, how long the main thread ran and waited, runnable, for a CPU;
- ``summary`` at exit: callbacks run, collections by generation, their total time.

It costs about a microsecond a callback and two threads: a measurement, not for production.
"""

from __future__ import annotations

import os
import sys

if os.environ.get("STALL_PROBE") and sys.orig_argv[1:3] == ["-m", "daphne"]:
    import asyncio.events
    import atexit
    import gc
    import json
    import threading
    import time
    import traceback
    from typing import Any

    _out = open(f"{os.environ['STALL_PROBE']}/stalls-{os.getpid()}.jsonl", "a", buffering=1)
    _perf = time.perf_counter
    _main = threading.main_thread().ident
    _now: dict[str, Any] = {"handle": None, "started": 0.0, "stack": None, "ticking": False}
    _collections: list[tuple[int, float]] = []
    _callbacks = [0]

    def _note(kind: str, **fields: Any) -> None:
        _out.write(json.dumps({"kind": kind, "t": round(time.monotonic(), 4), **fields}) + "\n")

    def _on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            _now["gc"] = _perf()
            return
        ms = (_perf() - _now.get("gc", _perf())) * 1000
        _collections.append((info["generation"], ms))
        if info["generation"] == 2:
            _note("gen2", ms=round(ms, 2), left=len(gc.get_objects(2)),
                  frozen=gc.get_freeze_count())  # fmt: skip
        elif ms > 5:
            _note("gc", gen=info["generation"], ms=round(ms, 2), freed=info["collected"])

    def _tick(loop: asyncio.AbstractEventLoop, due: float) -> None:
        now = loop.time()
        if (late := (now - due) * 1000) > 15:
            _note("lag", ms=round(late, 2))
        loop.call_at(now + 0.01, _tick, loop, now + 0.01)

    _run = asyncio.events.Handle._run

    def _timed_run(self: asyncio.Handle) -> None:
        if not _now["ticking"] and (loop := asyncio.events._get_running_loop()) is not None:
            _now["ticking"] = True
            loop.call_at(loop.time() + 0.01, _tick, loop, loop.time() + 0.01)
        _now.update(handle=self, started=_perf(), stack=None)
        try:
            _run(self)
        finally:
            ms = (_perf() - _now["started"]) * 1000
            _now["handle"] = None
            _callbacks[0] += 1
            if ms > 10:
                _note("slow", ms=round(ms, 2), callback=repr(self)[:300], stack=_now["stack"])

    asyncio.events.Handle._run = _timed_run  # type: ignore[method-assign]
    gc.callbacks.append(_on_gc)

    def _watch() -> None:
        while True:
            time.sleep(0.002)
            if _now["handle"] is not None and _now["stack"] is None:
                if _perf() - _now["started"] > 0.015:
                    frame = sys._current_frames().get(_main or 0)
                    if frame is not None:
                        _now["stack"] = "".join(traceback.format_stack(frame, limit=25))[-4000:]

    def _schedstat() -> None:
        path, before = f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat", None
        while True:
            time.sleep(0.1)
            try:
                ran, waited, _ = map(int, open(path).read().split())
            except (OSError, ValueError):
                continue
            if before is not None:
                _note("sched", ran_ms=(ran - before[0]) / 1e6, waited_ms=(waited - before[1]) / 1e6)
            before = (ran, waited)

    def _summary() -> None:
        _note("summary", callbacks=_callbacks[0],
              by_generation={g: sum(1 for gen, _ in _collections if gen == g) for g in (0, 1, 2)},
              gc_ms_total=round(sum(ms for _, ms in _collections), 1),
              gc_ms_max=round(max((ms for _, ms in _collections), default=0), 1))  # fmt: skip

    threading.Thread(target=_watch, name="stall-probe watchdog", daemon=True).start()
    threading.Thread(target=_schedstat, name="stall-probe schedstat", daemon=True).start()
    atexit.register(_summary)
