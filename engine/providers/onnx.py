"""ONNX Runtime sessions for the offline models (Silero VAD, smart-turn, Piper), bounded;
and the bound that CTranslate2's (Whisper's) threads take too.

ONNX Runtime's defaults suit one model on a machine of its own: a pool of one thread per
core, pinned to cores it chooses (outside the process's CPU set, when it has one) and
spinning between runs. Beside the event loop and Whisper in a web process, that spinning is
CPU taken from every other session. Here: at most ``threads`` threads and never more than the
process's CPUs, not pinned (ONNX Runtime pins only the pool it sizes itself), no spinning.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def cpus() -> int:
    """The CPUs this process may run on (its CPU set: ``taskset``, a container's cpuset)."""
    return len(os.sched_getaffinity(0))


def bounded(threads: int) -> int:
    """``threads``, but never more than the process's CPUs: a thread beyond them only waits
    its turn, and the switching costs CPU (CTranslate2 with two threads on one core spent
    15 % more a decode than with one, tiny.en, bench/speech_capacity.py's breakdown)."""
    return max(1, min(threads, cpus()))


def session(model: str | Path, *, threads: int = 1) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.inter_op_num_threads = 1
    options.intra_op_num_threads = bounded(threads)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(
        str(model), sess_options=options, providers=["CPUExecutionProvider"]
    )
