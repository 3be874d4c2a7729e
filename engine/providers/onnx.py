"""ONNX Runtime sessions for the offline models (Silero VAD, smart-turn, Piper), bounded.

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


def session(model: str | Path, *, threads: int = 1) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.inter_op_num_threads = 1
    options.intra_op_num_threads = max(1, min(threads, len(os.sched_getaffinity(0))))
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(
        str(model), sess_options=options, providers=["CPUExecutionProvider"]
    )
