"""The signed recording URL (``sessions_app.recordings``): the decrypted WAV, streamed.

The signed token is the only credential: no session cookie or API key is read, so a page
or a server may fetch it while it is current. Anything else (forged, altered, expired, a
recording since deleted) is a bare 404 that says nothing about why.
"""

from __future__ import annotations

from django.http import Http404, HttpRequest, StreamingHttpResponse
from django.views.decorators.http import require_GET

from sessions_app import recordings


@require_GET
def play(request: HttpRequest, token: str) -> StreamingHttpResponse:
    recording = recordings.recording_from_url(token)
    if recording is None:
        raise Http404
    response = StreamingHttpResponse(
        recordings.recording_open(recording=recording), content_type="audio/wav"
    )
    response["Content-Length"] = str(recording.size_bytes)
    response["Cache-Control"] = "private, no-store"
    response["Referrer-Policy"] = "no-referrer"
    name = f"session-{recording.session.public_id}.wav"
    disposition = "attachment" if request.GET.get("download") else "inline"
    response["Content-Disposition"] = f'{disposition}; filename="{name}"'
    return response
