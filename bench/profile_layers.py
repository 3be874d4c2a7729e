"""Where a web process's event loop spends its time, by layer, from a py-spy raw profile.

``bench/load.py --profile DIR`` writes one (collapsed stacks: ``frame;frame;... count``)
per run. Samples of the event loop's thread (the one that started in ``runpy``) are
counted by the layer of their innermost frame that belongs to a known package (self time
by layer), and inclusively for a few paths of the platform's own.

    .venv/bin/python bench/profile_layers.py DIR/web-100-1234.txt [--rate 50 --seconds 20]

Prints JSON: ``busy_pct`` (loop samples / samples it could have taken), ``layers`` and
``paths`` (percent of the loop's samples).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

# (layer, pattern of a frame's file); the first that matches, from the innermost frame out.
LAYERS = [
    ("redis client", r"\((redis|hiredis)/"),
    ("daphne/twisted/autobahn", r"\((daphne|twisted|autobahn|txaio|zope)/"),
    ("uvicorn/websockets", r"\((uvicorn|websockets|httptools|uvloop)/"),
    ("channels", r"\((channels|channels_redis|asgiref)/"),
    ("json", r"\(json/"),
    ("celery/kombu", r"\((celery|kombu|amqp|vine|billiard)/"),
    ("fakes (tests/)", r"\(tests/"),
    ("django", r"\(django/"),
    ("aiohttp", r"\((aiohttp|multidict|yarl)/"),
    ("platform", r"\((engine|realtime|core|tools_app|sessions_app|usage_app|egress|"
     r"secrets_app|webhooks_app|telephony_app|platform_site|postcall_app)/"),
    ("asyncio", r"\((asyncio|selectors|socket)"),
]  # fmt: skip

# Inclusive: a sample counts for every path one of whose frames it holds.
PATHS = {
    "resume store writes": r"SessionHost\.(flush|_write_loop)|ResumeWrites|RedisResumeStore",
    "record writes (loop side)": r"SessionRecorder\.|_write_loop \(realtime/records",
    "audio in (consumer -> recogniser)": r"VoiceConsumer\.dispatch|Connection\.audio",
    "events out (emit -> socket)": r"SessionHost\.emit|BrowserDoor\.send",
    "sandbox slot (fairness)": r"fairness\.py",
    "channel layer": r"channels_redis/",
    "recogniser (fake)": r"FakeSTTStream",
}


def _layer(frames: list[str]) -> str:
    """The innermost frame's layer; asyncio's frames count for the code that called into
    them (a socket write, a future), and the loop's own only between callbacks."""
    fallback = "other"
    for frame in reversed(frames):
        if "_run_once (asyncio" in frame or "Handle._run (asyncio" in frame:
            return fallback if fallback != "other" else "event loop (asyncio)"
        for name, pattern in LAYERS:
            if re.search(pattern, frame):
                if name != "asyncio":
                    return name
                fallback = "asyncio"
    return fallback


def summarise(path: Path, *, rate: float, seconds: float) -> dict[str, object]:
    layers: Counter[str] = Counter()
    paths: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack.startswith("_run_module_as_main"):
            continue  # another thread (database writer, Celery publisher)
        n = int(count)
        total += n
        layer = _layer(stack.split(";"))
        layers[layer] += n
        for name, pattern in PATHS.items():
            if re.search(pattern, stack):
                paths[name] += n

    def share(counts: Counter[str]) -> dict[str, float]:
        return {k: round(100 * v / max(1, total), 1) for k, v in counts.most_common()}

    return {
        "profile": str(path),
        "loop_samples": total,
        "busy_pct": round(100 * total / max(1, rate * seconds), 1),
        "layers": share(layers),
        "paths": share(paths),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="+", type=Path)
    parser.add_argument("--rate", type=float, default=50.0, help="py-spy's samples a second")
    parser.add_argument("--seconds", type=float, default=20.0, help="the window")
    args = parser.parse_args()
    for profile in args.profiles:
        summary = summarise(profile, rate=args.rate, seconds=args.seconds)
        json.dump(summary, sys.stdout)
        print()
