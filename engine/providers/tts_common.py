"""What the text-to-speech adapters share: whole PCM16 samples, settings checks, the shape
of their errors and the WebSocket plumbing of the streaming vendors.

Every failure becomes ``ProviderError(code="tts_failed")`` with a sentence a customer can
act on. Neither messages nor logs carry the API key or the text being spoken: a vendor's own
words pass through ``Vendor.quote``, which removes both and bounds the length.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import (
    ConnectionClosed,
    InvalidHandshake,
    InvalidStatus,
    InvalidURI,
)
from websockets.frames import CloseCode

import egress
from egress.websocket import open_websocket
from engine.protocol import ErrorCode
from engine.providers import base
from engine.providers.base import ProviderError

logger = logging.getLogger(__name__)

ERROR_CODE = ErrorCode.TTS_FAILED
_MAX_PROVIDER_MESSAGE = 200
# A barge-in closes the socket: wait this long for the vendor's close frame, then drop it.
_CLOSE_TIMEOUT_S = 1.0
_MAX_MESSAGE_BYTES = 16 * 2**20

# The websockets library logs every frame at DEBUG, and our frames carry the spoken text.
_WIRE_LOGGER = logging.getLogger(f"{__name__}.wire")
_WIRE_LOGGER.setLevel(logging.INFO)

# Close codes that say the request itself was wrong: repeating it cannot help.
_CLIENT_CLOSE_CODES = {
    CloseCode.PROTOCOL_ERROR,
    CloseCode.UNSUPPORTED_DATA,
    CloseCode.INVALID_DATA,
    CloseCode.POLICY_VIOLATION,
    CloseCode.MESSAGE_TOO_BIG,
}


def is_blank(text: str) -> bool:
    return not text.strip()


def require_setting(value: str, setting: str) -> str:
    if not value or not value.strip():
        raise ProviderError(
            f"text-to-speech is not configured: {setting} is not set", code=ERROR_CODE
        )
    return value.strip()


class Pcm16Aligner:
    """Re-cuts a byte stream so that every chunk holds whole 16-bit samples.

    An odd trailing byte waits for the next chunk; one left at the very end is half a
    sample and is dropped.
    """

    def __init__(self) -> None:
        self._carry = b""

    def feed(self, data: bytes) -> bytes:
        data = self._carry + data
        whole = len(data) - len(data) % 2
        self._carry = data[whole:]
        return data[:whole]


@dataclass(frozen=True)
class Vendor:
    """A text-to-speech vendor as customers know it, for error messages."""

    name: str  # "ElevenLabs"
    key_setting: str  # "ELEVENLABS_API_KEY"

    def error(
        self, message: str, *, retryable: bool, reason: str = base.REASON_FAILED
    ) -> ProviderError:
        logger.warning("%s text-to-speech failed (retryable=%s)", self.name, retryable)
        return ProviderError(message, code=ERROR_CODE, retryable=retryable, reason=reason)

    def quote(self, message: object, *, secrets: Iterable[str]) -> str:
        """The vendor's own words, safe to show: no secrets, no spoken text, bounded."""
        if not isinstance(message, str):
            return ""
        text = " ".join(message.split())
        for secret in secrets:
            if secret.strip():
                text = text.replace(secret.strip(), "[redacted]")
        if len(text) > _MAX_PROVIDER_MESSAGE:
            text = text[: _MAX_PROVIDER_MESSAGE - 1] + "…"
        return text

    def status_error(self, status: int, detail: str = "") -> ProviderError:
        """An HTTP error status, at a WebSocket handshake or on a plain request."""
        if status in (401, 403):
            return self.key_error(f"HTTP {status}")
        retryable = status in (408, 429) or status >= 500
        suffix = f": {detail}" if detail else ""
        return self.error(
            f"{self.name} returned HTTP {status}{suffix}",
            retryable=retryable,
            reason=base.status_reason(status),
        )

    def key_error(self, detail: str) -> ProviderError:
        # Vendors quote (part of) the rejected key back: their message is not shown.
        return self.error(
            f"{self.name} rejected the API key ({detail}); check {self.key_setting}",
            retryable=False,
            reason=base.REASON_AUTH,
        )

    def timeout_error(self, timeout_s: float) -> ProviderError:
        return self.error(
            f"{self.name} did not answer within {timeout_s:g} s",
            retryable=True,
            reason=base.REASON_TIMEOUT,
        )

    def unreachable_error(self) -> ProviderError:
        return self.error(
            f"could not connect to {self.name}", retryable=True, reason=base.REASON_UNREACHABLE
        )

    def broken_error(self) -> ProviderError:
        return self.error(
            f"the connection to {self.name} broke", retryable=True, reason=base.REASON_BROKEN
        )

    def garbage_error(self, what: str) -> ProviderError:
        return self.error(
            f"{self.name} sent {what}", retryable=False, reason=base.REASON_BAD_RESPONSE
        )


# ---------------------------------------------------------------- WebSocket vendors


@contextlib.asynccontextmanager
async def websocket_session(
    vendor: Vendor,
    url: str,
    *,
    headers: Mapping[str, str],
    timeout_s: float,
    secrets: Iterable[str],
    policy: egress.Policy = egress.OPERATOR,
) -> AsyncIterator[ClientConnection]:
    """An open WebSocket to the vendor, dialled through the egress guard under ``policy``
    (a workspace's own URL: public addresses only); any failure inside becomes a
    ``ProviderError``, a refused address the guard's one sentence.

    Leaving the block closes the socket, also when the consumer stopped listening.
    """
    try:
        websocket = await open_websocket(
            url,
            policy=policy,
            additional_headers=dict(headers),
            open_timeout=timeout_s,
            close_timeout=_CLOSE_TIMEOUT_S,
            max_size=_MAX_MESSAGE_BYTES,
            logger=_WIRE_LOGGER,
        )
        async with websocket:
            yield websocket
    except InvalidStatus as exc:
        raise vendor.status_error(exc.response.status_code) from None
    except (InvalidURI, egress.InvalidURL):
        message = f"the {vendor.name} URL is not a ws:// or wss:// URL"
        raise vendor.error(message, retryable=False) from None
    except egress.EgressRefused as exc:
        raise vendor.error(str(exc), retryable=True, reason=base.REASON_UNREACHABLE) from None
    except egress.EgressUnreachable as exc:
        message = f"{vendor.name}: {exc}"
        raise vendor.error(message, retryable=True, reason=base.REASON_UNREACHABLE) from None
    except TimeoutError:
        raise vendor.timeout_error(timeout_s) from None
    except ConnectionClosed as exc:
        raise closed_error(vendor, exc, secrets=secrets) from None
    except (OSError, InvalidHandshake):
        raise vendor.unreachable_error() from None


async def receive(websocket: ClientConnection, timeout_s: float) -> str | bytes | None:
    """The vendor's next message, or ``None`` once it closed the connection normally."""
    try:
        async with asyncio.timeout(timeout_s):
            return await websocket.recv()
    except ConnectionClosed as exc:
        if exc.rcvd is not None and exc.rcvd.code == CloseCode.NORMAL_CLOSURE:
            return None
        raise


def closed_error(vendor: Vendor, exc: ConnectionClosed, *, secrets: Iterable[str]) -> ProviderError:
    close = exc.rcvd
    if close is None:
        return vendor.broken_error()
    reason = vendor.quote(close.reason, secrets=secrets)
    detail = f": {reason}" if reason else ""
    return vendor.error(
        f"{vendor.name} closed the connection (code {close.code}){detail}",
        retryable=close.code not in _CLIENT_CLOSE_CODES,
    )
