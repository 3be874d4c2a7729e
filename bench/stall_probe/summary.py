"""Summarise a stall probe's file (``sitecustomize.py`` beside this): the loop's lateness
over 50 ms and the full collections, in time order, then the counts.

    python bench/stall_probe/summary.py /tmp/stalls/stalls-<pid>.jsonl
"""

from __future__ import annotations

import json
import sys
from collections import Counter


def main(path: str) -> None:
    rows = [json.loads(line) for line in open(path)]
    start = rows[0]["t"] if rows else 0.0
    for row in rows:
        if row["kind"] == "gen2" or (row["kind"] == "lag" and row["ms"] > 50):
            extra = f" left {row['left']} frozen {row['frozen']}" if row["kind"] == "gen2" else ""
            print(f"{row['t'] - start:8.2f} s  {row['kind']:4} {row['ms']:7.1f} ms{extra}")
    print(dict(Counter(row["kind"] for row in rows)))
    waits = sorted(row["waited_ms"] for row in rows if row["kind"] == "sched")
    if waits:
        print(f"waited for a CPU, ms per 100 ms: p50 {waits[len(waits) // 2]:.1f}, "
              f"p90 {waits[int(len(waits) * 0.9)]:.1f}, max {waits[-1]:.1f}")  # fmt: skip
    for row in rows:
        if row["kind"] == "summary":
            print(row)


if __name__ == "__main__":
    main(sys.argv[1])
