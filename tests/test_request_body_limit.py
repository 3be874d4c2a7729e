"""The request body cap as ASGI middleware (platform_site/body_limit.py), under a server
that streams the body to the application: a body over the path's limit is answered 413
and read no further. tests/faults/test_request_body_limit.py runs it under real daphne."""

from __future__ import annotations

from typing import Any

from platform_site.body_limit import BodyLimit, limit_for

MB = 1024 * 1024


class Client:
    """A client sending ``chunks`` megabytes; counts how many the application took."""

    def __init__(self, chunks: int) -> None:
        self.left, self.taken = chunks, 0
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        self.left -= 1
        self.taken += 1
        return {"type": "http.request", "body": b"a" * MB, "more_body": self.left > 0}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    def status(self) -> int:
        return int(next(m["status"] for m in self.sent if m["type"] == "http.response.start"))


async def _reads_everything(scope: Any, receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return  # Django's handler: the request is dropped, no response
        if not message["more_body"]:
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def _scope(path: str, length: int | None = None) -> dict[str, Any]:
    headers = [] if length is None else [(b"content-length", str(length).encode())]
    return {"type": "http", "path": path, "headers": headers}


async def test_a_streamed_body_past_the_limit_is_refused_and_read_no_further() -> None:
    client = Client(chunks=100)
    await BodyLimit(_reads_everything)(_scope("/phone/twilio/x/voice"), client.receive, client.send)
    assert client.status() == 413
    assert client.taken == 2  # 1 MB is the limit: the second megabyte ends it


async def test_a_declared_length_past_the_limit_is_refused_unread() -> None:
    client = Client(chunks=100)
    scope = _scope("/api/v1/knowledge-bases/b/documents", length=100 * MB)
    await BodyLimit(_reads_everything)(scope, client.receive, client.send)
    assert (client.status(), client.taken) == (413, 0)


async def test_an_upload_route_takes_a_whole_document() -> None:
    client = Client(chunks=10)
    scope = _scope("/api/v1/knowledge-bases/b/documents")
    await BodyLimit(_reads_everything)(scope, client.receive, client.send)
    assert (client.status(), client.taken) == (200, 10)


def test_only_the_upload_paths_themselves_get_the_upload_cap(settings: Any) -> None:
    upload = "/api/v1/knowledge-bases/kb1/documents"
    assert limit_for(upload) == settings.HTTP_UPLOAD_BODY_MAX_BYTES
    for near in (upload + "\n", upload + "/x", "/x" + upload, "/w/acme/knowledge/kb1/\n"):
        assert limit_for(near) == settings.HTTP_BODY_MAX_BYTES, near
