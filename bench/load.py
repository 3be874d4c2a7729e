"""Load and scale-out: N realtime sessions against 1 and 2 daphne processes (issue 8).

For every (web processes, N): a fresh stack (daphne processes, a Celery worker when the
sessions have a server tool), N WebSocket sessions spread round-robin over the daphne
ports, each streaming PCM16 frames (20 ms, or --frame-ms) on a real-time schedule with fake
STT/TTS and a fake OpenAI-compatible LLM, a ping a second and a spoken turn every few
seconds. After a
warm-up, a steady-state window measures event latency (ping -> pong), frames dropped,
turn latencies, and CPU and memory of every process (from /proc). Then a soak at the
largest N whose p99 event latency held 50 ms, with memory at its start and end.

Prints one JSON object (``definitions`` says what each figure is). A measurement, not a
test: there are no thresholds. Needs Redis and Postgres; it creates and drops its own
Postgres database and uses one Redis database number (flushed before and after).

    .venv/bin/python bench/load.py [--sessions 50,100,200] [--processes 1,2] [--seconds 30]
        [--soak-seconds 300] [--turn-every 10] [--no-server-tool] [--frame-ms 20]
        [--web-cpu N] [--redis-per-role] [--profile DIR] [--quick]

``--web-cpu 0``: every daphne process on CPU 0, the load generator, the worker and the
fake LLM on the other CPUs (sessions per core). ``--quick``: 20 sessions, 10 s windows, a
15 s soak (about a minute). ``--redis-per-role``: each Redis role on a redis-server of its own
(started on loopback ports), so ``redis_ops`` counts each role's commands. ``--profile DIR``:
a py-spy profile (raw, collapsed stacks) of the first web process over each window.
Environment:
``BENCH_REDIS_URL`` (default redis://127.0.0.1:6379), ``BENCH_POSTGRES_URL`` (default
postgres://postgres@127.0.0.1:5432).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.load_clients import (
    ClientSession,
    Counters,
    LoopLag,
    Observations,
    Plan,
)
from bench.load_stack import SERVERS, Child, Reading, Stack, take_reading

P99_TARGET_MS = 50.0
OPEN_CONCURRENCY = 20  # sessions connecting at once while ramping up
PONG_GRACE_S = 1.0  # after the window: the last pings' pongs may still arrive
SETTLE_S = 1.0  # after the warm-up turn (idle memory), after the clients closed (logs)

DEFINITIONS = {
    "event_latency_ms": "client: pong arrival - ping send (t), both on the load generator's "
    "monotonic clock; a ping a second per session, sent right after an audio frame. It is "
    "the web process's responsiveness under load, plus the load generator's own loop lag "
    "(client_loop_lag_ms).",
    "event_latency_split_ms": "the same pings split at the pong's `ts` (the server's wall clock "
    "when it stamped the pong, whole ms; client and server share the machine's clock): "
    "in = ping send -> pong stamped (the load generator's send, the web process's read "
    "and handling), out = stamped -> pong read (the web process's send, the load "
    "generator's read). A tail in `in` and not in `out`, with a quiet client loop, is "
    "the web process's.",
    "frames.dropped": "frames not sent within one frame period (frame_ms) after their "
    "real-time deadline: 'skipped' (already a period late before the send could start; "
    "not sent, as a capture buffer overflows) plus 'late' (sent, but the send finished a "
    "period late). 'with_full_send_buffer': of those, the ones whose socket still held "
    "unsent bytes (backpressure from the server) rather than a late load generator. The "
    "server counts no dropped frames of its own (server_reported: null).",
    "turns": "each session speaks 600 ms of tone every turn_every_s; the fake recogniser "
    "ends the turn after 500 ms of silence. turn_to_first_chat_delta_ms: client, `turn` "
    "event -> first `chat_delta`. speech_end_to_first_audio_ms: client, last speech frame "
    "sent -> first audio frame back (includes the 500 ms). server_*: from the `metrics` "
    "event the server sends after each turn (its own clock).",
    "cpu_pct": "CPU time (user+system) over the window / wall time x 100: 100 = one core. "
    "A Celery worker counts its children, recycled ones too. machine_busy: all processes "
    "of the machine (max 100 x cpus). redis_server: the whole Redis server (shared).",
    "web_waiting_for_cpu_pct": "of the window, the share each web process's main thread "
    "(its event loop) was runnable but waited for a CPU another task held "
    "(/proc/<pid>/schedstat): on a shared machine, the time the pinned core was not its own.",
    "rss_mb": "VmRSS; idle: after start-up and one warm-up turn per web process, before the "
    "sessions; mean/max: over the window (one reading a second). A worker sums its "
    "processes (shared pages counted per process).",
    "per_session": "the web processes' (or workers') total divided by N; *_added_kb: "
    "(mean RSS - idle RSS) / N.",
    "redis_ops": "INFO commandstats deltas over the window: calls a second of every command, "
    "per role (with --redis-per-role a server each: channel_layer, session_state, counters, "
    "broker; else one 'all'), and divided by N; used_memory_mb at the window's end.",
    "postgres": "pg_stat_database of the benchmark's database over the window: commits and "
    "rows inserted, updated or deleted a second (Postgres publishes them about once a second).",
    "load_average": "os.getloadavg() at the window's end: the shared machine's load.",
    "server_log_problems": "WARNING, ERROR and traceback lines the web processes and workers "
    "logged (LOG_LEVEL=WARNING) until every session had closed, with the first three; "
    "at_shutdown: those logged while they stopped on SIGTERM.",
}


# ---------------------------------------------------------------- statistics


def percentiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)

    def rank(q: float) -> float:
        return round(ordered[max(0, math.ceil(q * len(ordered)) - 1)], 2)

    return {"p50": rank(0.5), "p90": rank(0.9), "p99": rank(0.99), "max": rank(1.0),
            "n": len(ordered)}  # fmt: skip


def between(samples: list[tuple[float, float]], start: float, end: float) -> list[float]:
    return [value for at, value in samples if start <= at < end]


def mb(kb: float) -> float:
    return round(kb / 1024, 1)


# ---------------------------------------------------------------- one run


@dataclasses.dataclass(frozen=True)
class Mark:
    """One moment of the window: the clients' counters and the processes' reading."""

    at: float  # loop time, the clock of every client sample
    counters: Counters
    reading: Reading


@dataclasses.dataclass
class Window:
    """What one run saw, from its first mark to its last (one a second)."""

    processes: int
    sessions: int
    children: list[Child]
    idle: Reading
    marks: list[Mark]
    seen: Observations
    lag: LoopLag
    failures: Counter[str]
    load_average: tuple[float, float, float] = (0.0, 0.0, 0.0)  # at the window's end
    profile: str | None = None
    # Warning/error lines of the web processes and workers: until the sessions closed,
    # and while the processes stopped (SIGTERM).
    problems: list[str] = dataclasses.field(default_factory=list)
    shutdown_problems: list[str] = dataclasses.field(default_factory=list)

    @property
    def start(self) -> float:
        return self.marks[0].at

    @property
    def end(self) -> float:
        return self.marks[-1].at


async def open_all(clients: list[ClientSession]) -> Counter[str]:
    gate = asyncio.Semaphore(OPEN_CONCURRENCY)
    failures: Counter[str] = Counter()

    async def open_one(client: ClientSession) -> None:
        async with gate:
            try:
                await client.open()
            except Exception as exc:
                failures[f"{type(exc).__name__}: {str(exc)[:120]}"] += 1

    await asyncio.gather(*(open_one(client) for client in clients))
    return failures


async def read(children: list[Child], stack: Stack) -> Reading:
    pids = [c.pid for c in children]
    return await asyncio.to_thread(take_reading, pids, stack.redis_urls, stack.database_url)


async def mark(children: list[Child], stack: Stack, seen: Observations) -> Mark:
    at, counters = asyncio.get_running_loop().time(), dataclasses.replace(seen.counters)
    return Mark(at, counters, await read(children, stack))


def start_profile(
    web: Child, directory: Path | None, seconds: float, sessions: int
) -> tuple[subprocess.Popen[bytes], Path] | None:
    """py-spy (requirements/dev.txt) samples the first web process over the window."""
    if directory is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / f"web-{sessions}-{web.pid}.txt"
    command = ["py-spy", "record", "-p", str(web.pid), "-d", str(max(1, int(seconds))),
               "-r", "50", "-f", "raw", "-o", str(out), "--nonblocking"]  # fmt: skip
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    process = subprocess.Popen([spy, *command[1:]], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)  # fmt: skip
    return process, out


async def finish_profile(profiling: tuple[subprocess.Popen[bytes], Path] | None) -> str | None:
    if profiling is None:
        return None
    process, out = profiling
    try:
        await asyncio.to_thread(process.wait, 30)
    except subprocess.TimeoutExpired:
        process.kill()
    return str(out) if out.exists() else None


async def run(
    stack: Stack,
    *,
    processes: int,
    sessions: int,
    seconds: float,
    warmup: float,
    plan: Plan,
    profile: Path | None = None,
    server: str = "daphne",
) -> Window:
    # Starting and stopping block the loop on purpose: no session runs then, and a
    # cancelled thread would go on starting processes behind the clean-up's back.
    webs = stack.start_web(processes, server)
    started = list(webs)
    clients: list[ClientSession] = []
    lag = LoopLag()
    try:
        if plan.server_tool:
            started += stack.start_workers()
        children = [*started, *(c for c in stack.children if c.role == "fake_llm")]
        await asyncio.gather(*(
            ClientSession(index=0, of=1, port=web.port or 0, plan=plan, seen=Observations())
            .warm_up()
            for web in webs
        ))  # fmt: skip
        await asyncio.sleep(SETTLE_S)
        idle = await read(children, stack)
        seen = Observations()
        lag.start()
        clients = [
            ClientSession(index=i, of=sessions, port=webs[i % processes].port or 0, plan=plan,
                          seen=seen)
            for i in range(sessions)
        ]  # fmt: skip
        failures = await open_all(clients)
        await asyncio.sleep(warmup)
        marks = [await mark(children, stack, seen)]
        profiling = start_profile(webs[0], profile, seconds, sessions)
        end = marks[0].at + seconds
        while (left := end - asyncio.get_running_loop().time()) > 0:
            await asyncio.sleep(min(1.0, left))
            marks.append(await mark(children, stack, seen))
        load_average = os.getloadavg()
        await asyncio.sleep(PONG_GRACE_S)
        window = Window(processes, sessions, children, idle, marks, seen, lag, failures,
                        load_average, await finish_profile(profiling))  # fmt: skip
    finally:
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
        await lag.stop()
        await asyncio.sleep(SETTLE_S)  # the server ends the closed sessions
        logged = {child.pid: child.problems() for child in started}
        stack.stop(started)
        stack.flush_redis()
    window.problems = [line for child in started for line in logged[child.pid]]
    window.shutdown_problems = [
        line for child in started for line in child.problems()[len(logged[child.pid]) :]
    ]
    return window


# ---------------------------------------------------------------- reports


def frames_report(counters: Counters) -> dict[str, Any]:
    dropped = counters.frames_skipped + counters.frames_late
    return {
        "due": counters.frames_due,
        "sent": counters.frames_sent,
        "dropped": dropped,
        "dropped_pct": round(100 * dropped / counters.frames_due, 3) if counters.frames_due else 0,
        "skipped": counters.frames_skipped,
        "late": counters.frames_late,
        "with_full_send_buffer": counters.frames_dropped_backpressure,
        "server_reported": None,
    }


def turns_report(w: Window, counters: Counters) -> dict[str, Any]:
    events = [event for at, event in w.seen.server_metrics if w.start <= at < w.end]

    def server(field: str) -> dict[str, float] | None:
        return percentiles([e[field] for e in events if isinstance(e.get(field), int | float)])

    tool_ms = [t["ms"] for e in events for t in e.get("tools") or [] if t.get("ms") is not None]
    return {
        "spoken": counters.turns_spoken,
        "outcomes": dict(Counter(str(e.get("outcome")) for e in events)),
        "turn_to_first_chat_delta_ms": percentiles(
            between(w.seen.turn_to_first_delta_ms, w.start, w.end)
        ),
        "speech_end_to_first_audio_ms": percentiles(
            between(w.seen.speech_end_to_audio_ms, w.start, w.end)
        ),
        "server_first_audio_ms": server("firstAudioMs"),
        "server_llm_first_token_ms": server("llmFirstTokenMs"),
        "server_tool_ms": percentiles(tool_ms),
    }


def cpu_pct(first: Reading, last: Reading, pid: int) -> float:
    return round(100 * (last.cpu_s[pid] - first.cpu_s[pid]) / (last.at - first.at), 1)


def waiting_for_cpu(w: Window) -> list[float]:
    first, last = w.marks[0].reading, w.marks[-1].reading
    elapsed = max(0.001, last.at - first.at)
    return [
        round(100 * (last.runqueue_wait_s.get(c.pid, 0) - first.runqueue_wait_s.get(c.pid, 0))
              / elapsed, 1)
        for c in w.children if c.role == "web"
    ]  # fmt: skip


def resources_report(w: Window) -> dict[str, Any]:
    first, last = w.marks[0].reading, w.marks[-1].reading
    readings = [m.reading for m in w.marks]
    me = os.getpid()

    def memory(pid: int, idle: bool = True) -> dict[str, float]:
        values = [r.rss_kb[pid] for r in readings]
        shown = {"mean": mb(sum(values) / len(values)), "max": mb(max(values))}
        return {"idle": mb(w.idle.rss_kb[pid]), **shown} if idle else shown

    roles: dict[str, list[int]] = {}
    for child in w.children:
        roles.setdefault(child.role, []).append(child.pid)
    cpu = {role: [cpu_pct(first, last, pid) for pid in pids] for role, pids in roles.items()}
    busy = (last.machine[0] - first.machine[0]) / max(1, last.machine[1] - first.machine[1])
    redis_s = (last.redis_cpu_s or 0) - (first.redis_cpu_s or 0)
    return {
        "cpu_pct": {
            **cpu,
            "load_generator": cpu_pct(first, last, me),
            "redis_server": round(100 * redis_s / (last.at - first.at), 1)
            if first.redis_cpu_s is not None
            else None,
            "machine_busy": round(100 * busy * (os.cpu_count() or 1), 1),
        },
        "rss_mb": {
            **{role: [memory(pid) for pid in pids] for role, pids in roles.items()},
            "load_generator": memory(me, idle=False),
        },
    }


def redis_report(w: Window) -> dict[str, Any]:
    """Commands a second over the window, per Redis role (each role on its own server with
    --redis-per-role, else all on one), and per session; the busiest commands of each."""
    first, last = w.marks[0].reading, w.marks[-1].reading
    elapsed = max(0.001, last.at - first.at)
    report: dict[str, Any] = {}
    for role, calls in last.redis_calls.items():
        before = first.redis_calls.get(role, {})
        delta = {cmd: n - before.get(cmd, 0) for cmd, n in calls.items()}
        total = sum(delta.values())
        top = sorted(delta.items(), key=lambda item: -item[1])[:6]
        report[role] = {
            "ops_per_s": round(total / elapsed, 1),
            "ops_per_session_per_s": round(total / elapsed / max(1, w.sessions), 2),
            "top_per_s": {cmd: round(n / elapsed, 1) for cmd, n in top if n},
            "used_memory_mb": last.redis_memory_mb.get(role),
        }
    return report


def postgres_report(w: Window) -> dict[str, Any]:
    """Commits and rows written a second over the window (the statistics Postgres flushes
    about once a second), and per session."""
    first, last = w.marks[0].reading.postgres, w.marks[-1].reading.postgres
    elapsed = max(0.001, w.marks[-1].reading.at - w.marks[0].reading.at)
    if not first or not last:
        return {}
    rates = {name: (last[name] - first[name]) / elapsed for name in last}
    rows = rates["inserted"] + rates["updated"] + rates["deleted"]
    return {
        "commits_per_s": round(rates["commits"], 1),
        "rows_written_per_s": round(rows, 1),
        "rows_written_per_session_per_s": round(rows / max(1, w.sessions), 3),
    }


def per_session(w: Window, resources: dict[str, Any]) -> dict[str, float]:
    webs = [c.pid for c in w.children if c.role == "web"]
    n = max(1, w.sessions)
    rss_mean = sum(sum(m.reading.rss_kb[pid] for pid in webs) for m in w.marks) / len(w.marks)
    idle = sum(w.idle.rss_kb[pid] for pid in webs)
    shares = {
        "web_cpu_pct": sum(resources["cpu_pct"]["web"]) / n,
        "worker_cpu_pct": sum(resources["cpu_pct"].get("worker", [])) / n,
        "load_generator_cpu_pct": resources["cpu_pct"]["load_generator"] / n,
        "web_rss_kb": rss_mean / n,
        "web_rss_added_kb": (rss_mean - idle) / n,
    }
    return {name: round(value, 3) for name, value in shares.items()}


def run_report(w: Window) -> dict[str, Any]:
    counters = w.marks[-1].counters.minus(w.marks[0].counters)
    latency = between(w.seen.ping_ms, w.start, w.end)
    resources = resources_report(w)
    ready = len(w.seen.setup_ms)
    report = {
        "processes": w.processes,
        "sessions": w.sessions,
        "seconds": round(w.end - w.start, 1),
        "sessions_ready": ready,
        "session_failures": dict(w.failures),
        "setup_ms": percentiles(w.seen.setup_ms),
        "event_latency_ms": percentiles(latency),
        "event_latency_split_ms": {
            "in": percentiles(between(w.seen.ping_in_ms, w.start, w.end)),
            "out": percentiles(between(w.seen.ping_out_ms, w.start, w.end)),
        },
        "pings": {"sent": counters.pings_sent, "unanswered": counters.pings_sent - len(latency)},
        "frames": frames_report(counters),
        "turns": turns_report(w, counters),
        "errors": dict(w.seen.errors),
        "unexpected_closes": w.seen.unexpected_closes,
        "server_log_problems": {
            "count": len(w.problems),
            "first": w.problems[:3],
            "at_shutdown": len(w.shutdown_problems),
            "first_at_shutdown": w.shutdown_problems[:3],
        },
        **resources,
        "web_waiting_for_cpu_pct": waiting_for_cpu(w),
        "per_session": per_session(w, resources),
        # The web processes' CPU over the window per audio frame the clients sent (the
        # messages that dominate): what a server costs per message.
        "web_cpu_us_per_frame": round(
            sum(resources["cpu_pct"]["web"])
            / 100
            * (w.end - w.start)
            * 1e6
            / max(1, counters.frames_sent),
            1,
        ),
        "client_loop_lag_ms": percentiles(between(w.lag.samples, w.start, w.end)),
        "load_average": [round(value, 2) for value in w.load_average],
        "redis_ops": redis_report(w),
        "postgres": postgres_report(w),
        "profile": w.profile,
    }
    p99 = (report["event_latency_ms"] or {}).get("p99")
    report["p99_within_50ms"] = bool(
        p99 is not None and p99 <= P99_TARGET_MS and ready == w.sessions
    )
    return report


def soak_report(w: Window, slices: int) -> dict[str, Any]:
    report = run_report(w)
    webs = [c.pid for c in w.children if c.role == "web"]
    workers = [c.pid for c in w.children if c.role == "worker"]
    first, last = w.marks[0].reading, w.marks[-1].reading

    def total(reading: Reading, pids: list[int]) -> float:
        return mb(sum(reading.rss_kb[pid] for pid in pids))

    report["memory"] = {
        "web_rss_mb_start": [mb(first.rss_kb[pid]) for pid in webs],
        "web_rss_mb_end": [mb(last.rss_kb[pid]) for pid in webs],
        "web_rss_growth_mb": round(total(last, webs) - total(first, webs), 1),
        "worker_rss_mb_start": total(first, workers) if workers else None,
        "worker_rss_mb_end": total(last, workers) if workers else None,
    }
    step = max(1, (len(w.marks) - 1) // max(1, slices))
    marks = w.marks[::step]
    if marks[-1] is not w.marks[-1]:
        marks.append(w.marks[-1])
    report["slices"] = [
        {
            "from_s": round(a.at - w.start),
            "to_s": round(b.at - w.start),
            "event_latency_ms": percentiles(between(w.seen.ping_ms, a.at, b.at)),
            "frames_dropped": frames_report(b.counters.minus(a.counters))["dropped"],
            "web_rss_mb": total(b.reading, webs),
        }
        for a, b in itertools.pairwise(marks)
    ]
    return report


# ---------------------------------------------------------------- the benchmark


def soak_choice(runs: list[dict[str, Any]], options: argparse.Namespace) -> tuple[int, int, str]:
    """(processes, sessions, why): the largest N that held p99, on the fewest processes.

    When none held, the lightest run (fewest sessions, most processes) is soaked anyway:
    its memory at start and end still shows a leak.
    """
    if options.soak_sessions and options.soak_processes:
        return options.soak_processes, options.soak_sessions, "--soak-sessions/--soak-processes"
    held = [r for r in runs if r["p99_within_50ms"]]
    if held:
        best = max(held, key=lambda r: (r["sessions"], -r["processes"]))
        why = f"the largest N that held p99 <= {P99_TARGET_MS:g} ms, on the fewest processes"
    else:
        best = min(runs, key=lambda r: (r["sessions"], -r["processes"]))
        why = f"no run held p99 <= {P99_TARGET_MS:g} ms: the lightest run"
    return best["processes"], best["sessions"], why


async def benchmark(stack: Stack, options: argparse.Namespace) -> dict[str, Any]:
    stack.prepare()
    plan = Plan(stack.publishable_key, options.turn_every, options.server_tool, options.frame_ms)
    runs = []
    for processes, sessions, _, server in itertools.product(
        options.processes, options.sessions, range(options.repeat), options.server
    ):  # the servers alternate within each size, so they share the machine's moments
        window = await run(
            stack, processes=processes, sessions=sessions, seconds=options.seconds,
            warmup=options.warmup, plan=plan, profile=options.profile, server=server,
        )  # fmt: skip
        runs.append({"server": server, **run_report(window)})
        print(f"load: run {json.dumps(runs[-1])}", file=sys.stderr)  # kept should a later run fail
        print(f"load: {server} {processes} web x {sessions} sessions done "
              f"(load {window.load_average[0]:.2f})", file=sys.stderr)  # fmt: skip
    soak: dict[str, Any] = {"skipped": "--soak-seconds 0"}
    if options.soak_seconds > 0 and runs:
        processes, sessions, why = soak_choice(runs, options)
        window = await run(
            stack, processes=processes, sessions=sessions, seconds=options.soak_seconds,
            warmup=options.warmup, plan=plan, server=options.server[0],
        )  # fmt: skip
        soak = {"chosen": why, **soak_report(window, slices=round(options.soak_seconds / 60))}
    return {
        "benchmark": "load",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "settings": {
            "frame_ms": plan.frame_ms,
            "frame_bytes": plan.frame_bytes,
            "web_cpu": options.web_cpu,
            "redis_per_role": options.redis_per_role,
            "ping_every_s": 1,
            "turn_every_s": options.turn_every,
            "server_tool": options.server_tool,
            "worker_concurrency": options.worker_concurrency,
            "warmup_s": options.warmup,
            "seconds": options.seconds,
            "soak_seconds": options.soak_seconds,
            "stack": "daphne web processes, Redis channel layer and resume store, Postgres, "
            "Celery sandbox worker (with server_tool), fake STT/TTS, fake OpenAI-compatible "
            "LLM in its own process (instant)",
        },
        "definitions": DEFINITIONS,
        "runs": runs,
        "soak": soak,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    def numbers(text: str) -> list[int]:
        return [int(part) for part in text.split(",") if part.strip()]

    def servers(text: str) -> list[str]:
        names = [part.strip() for part in text.split(",") if part.strip()]
        if unknown := set(names) - set(SERVERS):
            raise argparse.ArgumentTypeError(f"unknown server(s): {', '.join(sorted(unknown))}")
        return names

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=numbers, default=[50, 100, 200])
    parser.add_argument("--processes", type=numbers, default=[1, 2], help="daphne processes")
    parser.add_argument("--seconds", type=float, default=30.0, help="steady-state window")
    parser.add_argument("--warmup", type=float, default=5.0, help="after every session is ready")
    parser.add_argument("--soak-seconds", type=float, default=300.0, help="0: no soak")
    parser.add_argument("--soak-sessions", type=int, help="soak this N (with --soak-processes)")
    parser.add_argument("--soak-processes", type=int)
    parser.add_argument("--turn-every", type=float, default=10.0, help="s between turns; 0: none")
    parser.add_argument("--no-server-tool", dest="server_tool", action="store_false",
                        help="no server tool in the turns, no Celery worker")  # fmt: skip
    parser.add_argument("--worker-concurrency", type=int, default=1)
    parser.add_argument("--frame-ms", type=int, default=20, help="audio per message; client.js: 40")
    parser.add_argument("--web-cpu", type=int, help="pin the daphne processes to this CPU, the "
                        "rest (load generator, worker, fake LLM) to the others")  # fmt: skip
    parser.add_argument("--redis-db", type=int, default=7, help="flushed before and after")
    parser.add_argument("--database", help="Postgres database to create and drop (default: "
                        "bench_load_<pid>)")  # fmt: skip
    parser.add_argument("--redis-per-role", action="store_true", help="a redis-server of its "
                        "own per role (channel layer, session state, counters, broker), "
                        "started by the benchmark: operations per role")  # fmt: skip
    parser.add_argument("--profile", type=Path, help="py-spy (requirements/dev.txt) samples "
                        "the first web process over each window into this directory")  # fmt: skip
    parser.add_argument(
        "--server",
        type=servers,
        default=["daphne"],
        help=f"ASGI servers, comma-separated, alternating at each size: {', '.join(SERVERS)}",
    )
    parser.add_argument("--repeat", type=int, default=1, help="run each size this many times")
    parser.add_argument("--quick", action="store_true", help="about a minute: a sanity run")
    options = parser.parse_args(argv)
    if options.quick:
        options.sessions, options.seconds, options.warmup = [20], 10.0, 3.0
        options.soak_seconds, options.turn_every = min(options.soak_seconds, 15.0), 5.0
    return options


async def main(options: argparse.Namespace) -> dict[str, Any]:
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, task.cancel)  # clean up as on Ctrl-C
    if options.web_cpu is not None:  # the load generator, and the children it starts below
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)) - {options.web_cpu})
    stack = Stack(
        web_cpu=options.web_cpu,
        redis_url_base=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379"),
        redis_db=options.redis_db,
        **({"database": options.database} if options.database else {}),
        postgres_url=os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432"),
        worker_concurrency=options.worker_concurrency,
        redis_per_role=options.redis_per_role,
    )
    with stack.running():
        return await benchmark(stack, options)


if __name__ == "__main__":
    try:
        print(json.dumps(asyncio.run(main(parse_args()))))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("load: interrupted; everything it started is stopped", file=sys.stderr)
        sys.exit(130)
