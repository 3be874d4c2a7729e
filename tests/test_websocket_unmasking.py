"""The web process's WebSocket unmasker (platform_site/websocket_unmasking.py) gives what
autobahn's own gives, for every size a client sends (a ping, an audio frame, a large
message) and for a payload that arrives in pieces split anywhere."""

from __future__ import annotations

import os
import random

import pytest
from autobahn.nvx._xormasker import create_xor_masker

from platform_site.websocket_unmasking import LONG, Unmasker

SIZES = [0, 1, 3, 4, 5, 41, LONG - 1, LONG, LONG + 3, 1280, 3200, 65_537]


@pytest.mark.parametrize("size", SIZES)
def test_whole_payloads_unmask_as_autobahn_does(size: int) -> None:
    mask, payload = os.urandom(4), os.urandom(size)
    ours = Unmasker(mask, size)
    assert ours.process(payload) == create_xor_masker(mask, size).process(payload)
    assert ours.pointer() == size


@pytest.mark.parametrize("size", [7, 300, 3200])
def test_a_payload_in_pieces_unmasks_as_one(size: int) -> None:
    mask, payload = os.urandom(4), os.urandom(size)
    expected = create_xor_masker(mask, size).process(payload)
    rng = random.Random(size)
    for _ in range(20):
        cuts = sorted(rng.sample(range(1, size), k=min(5, size - 1)))
        pieces = [payload[a:b] for a, b in zip([0, *cuts], [*cuts, size], strict=True)]
        ours = Unmasker(mask)
        assert b"".join(ours.process(piece) for piece in pieces) == expected
        assert ours.pointer() == size
        ours.reset()
        assert ours.pointer() == 0
