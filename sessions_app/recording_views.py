"""The signed recording URL (``sessions_app.recordings``): the decrypted WAV, streamed.

The signed token is the only credential: no session cookie or API key is read, so a page
or a server may fetch it while it is current. Anything else (forged, altered, expired, a
recording since deleted) is a bare 404 that says nothing about why. A ``Range`` request
(a player seeking) gets only the bytes asked, opening only the chunks that hold them.
Under ASGI (daphne) the body is pulled piece by piece: Django reads a synchronous
iterator whole before it sends a byte there, an hour of audio held per request.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Generator, Iterable

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.http import require_GET

from sessions_app import recordings

# ASCII digits, at most 18 of them: a position past any recording, never an int() that
# refuses thousands of digits (a 500) or a big number's arithmetic.
_RANGE = re.compile(r"bytes=([0-9]{0,18})-([0-9]{0,18})")


def _range(header: str, size: int) -> tuple[int, int] | bool | None:
    """A single ``Range`` as (first, last) byte, inclusive; None: no range asked (or one
    this view does not serve, answered whole); False: unsatisfiable."""
    match = _RANGE.fullmatch(header.strip())
    if match is None or match.group(1) == match.group(2) == "":
        return None
    first, last = match.group(1), match.group(2)
    if first == "":  # the last N bytes
        start, end = max(0, size - int(last)), size - 1
    else:
        start, end = int(first), min(size - 1, int(last)) if last else size - 1
    return (start, end) if start <= end and start < size else False


async def _pulled(chunks: Generator[bytes]) -> AsyncIterator[bytes]:
    """``chunks`` served under ASGI one piece at a time, off the event loop."""
    pull = sync_to_async(lambda: next(chunks, None), thread_sensitive=False)
    try:
        while (piece := await pull()) is not None:
            yield piece
    finally:  # a player that went away: the stored object is closed now
        await sync_to_async(chunks.close, thread_sensitive=False)()


def _body(request: HttpRequest, chunks: Generator[bytes]) -> Iterable[bytes] | AsyncIterator[bytes]:
    return _pulled(chunks) if isinstance(request, ASGIRequest) else chunks


@require_GET
def play(request: HttpRequest, token: str) -> HttpResponse | StreamingHttpResponse:
    recording = recordings.recording_from_url(token)
    if recording is None:
        raise Http404
    size = recording.size_bytes
    asked = _range(request.headers.get("Range", ""), size)
    if asked is False:
        refused = HttpResponse(status=416)
        refused["Content-Range"] = f"bytes */{size}"
        return refused
    if isinstance(asked, tuple):
        start, end = asked
        body = recordings.recording_range(recording=recording, start=start, end=end)
        response = StreamingHttpResponse(_body(request, body), content_type="audio/wav", status=206)
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
        response["Content-Length"] = str(end - start + 1)
    else:
        response = StreamingHttpResponse(
            _body(request, recordings.recording_open(recording=recording)),
            content_type="audio/wav",
        )
        response["Content-Length"] = str(size)
    response["Accept-Ranges"] = "bytes"
    response["Cache-Control"] = "private, no-store"
    response["Referrer-Policy"] = "no-referrer"
    name = f"session-{recording.session.public_id}.wav"
    disposition = "attachment" if request.GET.get("download") else "inline"
    response["Content-Disposition"] = f'{disposition}; filename="{name}"'
    return response
