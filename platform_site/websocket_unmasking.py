"""Under daphne, a WebSocket frame from a client is unmasked without a new native masker
object for every frame.

Every frame a browser sends is XOR-masked with a key of its own. autobahn makes a masker
object per frame: with its native (NVX) build, two cffi allocations, a finaliser and an
implementation switch, then a foreign call each time it is asked how far it got (twice a
frame): together about a tenth of a loaded web process's time, more than the XOR itself
(measured in ``docs/capacity.md``). This masker keeps its position in Python and XORs a
short payload (a JSON message) as one integer, a long one (audio) with the native routine
when autobahn has it.
"""

from __future__ import annotations

import sys

LONG = 256  # bytes: from here the native routine is cheaper than an integer XOR

try:
    from _nvx_xormasker import ffi, lib  # type: ignore[import-not-found]  # autobahn's native masker
except ImportError:  # pragma: no cover - autobahn without its native extension
    ffi = lib = None


def _xor(data: bytes, mask: bytes) -> bytes:
    size = len(data)
    if size < LONG or lib is None:
        key = (mask * (size // 4 + 1))[:size]
        unmasked = int.from_bytes(data, "little") ^ int.from_bytes(key, "little")
        return unmasked.to_bytes(size, "little")
    masker = lib.nvx_xormask_new(ffi.from_buffer(mask))
    try:
        buffer = ffi.new("uint8_t[]", data)
        lib.nvx_xormask_process(masker, buffer, size)
        return bytes(ffi.buffer(buffer, size))
    finally:
        lib.nvx_xormask_free(masker)


class Unmasker:
    """autobahn's masker interface (``pointer``, ``reset``, ``process``) for one frame,
    whose payload may arrive in several pieces."""

    __slots__ = ("_mask", "_ptr")

    def __init__(self, mask: bytes, length: int | None = None) -> None:
        del length  # autobahn's hint for choosing an implementation
        self._mask = bytes(mask)
        self._ptr = 0

    def pointer(self) -> int:
        return self._ptr

    def reset(self) -> None:
        self._ptr = 0

    def process(self, data: bytes) -> bytes:
        shift = self._ptr & 3
        self._ptr += len(data)
        if not data:
            return b""
        return _xor(bytes(data), self._mask[shift:] + self._mask[:shift])


def unmask_cheaply_in_daphne() -> None:
    """Under daphne (its server module loaded: we are its application), unmask the
    clients' frames with ``Unmasker``."""
    if "daphne.server" not in sys.modules:
        return
    from autobahn.websocket import protocol

    protocol.create_xor_masker = Unmasker  # type: ignore[attr-defined]
