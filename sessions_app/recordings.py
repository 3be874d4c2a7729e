"""Recordings (docs/privacy.md, "Recordings"): store a session's captured audio sealed, open
it, delete it, and the signed short-lived URLs that play it.

The object in the ``recordings`` storage (the filesystem under VAR_DIR, or an S3-compatible
bucket) is ciphertext only: the WAV sealed in chunks with a data key of its own
(``secrets_app.crypto.stream_seal``), that key sealed by the secret-store keyring like a
secret (``secrets_app.services.sealed_store``; the keyring's rotation re-seals it) and kept
on the row. Both are bound to the workspace and the recording's id, so an object or a key
copied to another row does not open.

A URL names the recording and its workspace, signed with ``TimestampSigner`` (the project's
SECRET_KEY) and good for ``RECORDING_URL_TTL_S``; whoever holds it may play the audio in
that time (it is a bearer link, like a cloud bucket's presigned URL), so it is only ever
given to members and to secret keys that read sessions.
"""

from __future__ import annotations

import base64
import logging
import os
import tempfile
import uuid
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import IO

from django.conf import settings
from django.core import signing
from django.core.files import File
from django.core.files.storage import Storage, storages
from django.db import transaction
from django.db.models.signals import post_delete
from django.urls import reverse
from django.utils import timezone

from engine.doors.capture import AudioCapture
from secrets_app import crypto
from secrets_app import services as secret_services
from sessions_app.models import Recording, Session

logger = logging.getLogger(__name__)

_URL_SALT = "sessions_app.recordings.url"


def storage() -> Storage:
    return storages["recordings"]


def capture_new() -> AudioCapture:
    """A capture for a session that records (the spool directory made if missing)."""
    spool = settings.RECORDING_SPOOL_DIR
    os.makedirs(spool, mode=0o700, exist_ok=True)
    return AudioCapture(spool_dir=spool, max_seconds=settings.RECORDING_MAX_SECONDS)


def recording_store(*, session: Session, capture: AudioCapture) -> Recording | None:
    """Seal the captured audio into the storage and keep its row; None when nothing was
    heard or said. The capture's spool is deleted either way."""
    try:
        capture.finish()
        if capture.failed:
            logger.warning("session recording dropped: its spool could not be written")
            return None
        if capture.frames == 0 or session.zero_retention:
            return None
        recording = Recording(
            workspace_id=session.workspace_id, session=session, size_bytes=capture.wav_size(),
            duration_ms=capture.duration_ms, truncated=capture.truncated,
            started_at=datetime.fromtimestamp(capture.started_at, tz=UTC),
        )  # fmt: skip
        key = crypto.data_key_generate()
        secret_services.sealed_store(recording, base64.b64encode(key).decode())
        associated = recording.associated_data()
        name = f"{session.workspace_id}/{recording.uid.hex}.sealed"
        with tempfile.TemporaryFile(dir=settings.RECORDING_SPOOL_DIR) as sealed:
            for piece in crypto.stream_seal(
                capture.wav_chunks(), key=key, associated_data=associated
            ):
                sealed.write(piece)
            sealed.seek(0)
            recording.storage_name = storage().save(name, File(sealed, name=name))
        try:
            recording.save()
        except Exception:  # the session or its workspace was deleted meanwhile: no orphan
            _object_delete(recording.storage_name)
            raise
        return recording
    finally:
        capture.close()


def _exact(handle: IO[bytes]) -> Callable[[int], bytes]:
    """``read(size)`` that returns ``size`` bytes unless the object ends first."""

    def read(size: int) -> bytes:
        parts, left = [], size
        while left > 0 and (part := handle.read(left)):
            parts.append(part)
            left -= len(part)
        return b"".join(parts)

    return read


@contextmanager
def _object_read(name: str, *, offset: int, length: int) -> Iterator[Callable[[int], bytes]]:
    """Read ``length`` bytes of a stored object from ``offset`` on. From S3 that is one
    ranged GET streamed as it is read: django-storages' own file would first download the
    whole object (into memory, by default) for every request, a player's every seek."""
    with storage().open(name, "rb") as handle:
        s3_object = getattr(handle, "obj", None)  # django-storages' S3File: its boto3 Object
        if s3_object is None:
            handle.seek(offset)
            yield _exact(handle)
            return
        body = s3_object.get(Range=f"bytes={offset}-{offset + length - 1}")["Body"]
        try:
            yield _exact(body)
        finally:
            body.close()


def _sealed_chunks(recording: Recording) -> int:
    return max(1, -(-recording.size_bytes // crypto.STREAM_CHUNK))


def recording_open(*, recording: Recording) -> Generator[bytes]:
    """The WAV, chunk by chunk, each authenticated before it is given."""
    return recording_range(recording=recording, start=0, end=recording.size_bytes - 1)


def recording_range(*, recording: Recording, start: int, end: int) -> Generator[bytes]:
    """Bytes ``start`` to ``end`` (inclusive) of the WAV: only the sealed chunks that hold
    them are read and opened (a player seeking in a long recording)."""
    chunk, total = crypto.STREAM_CHUNK, _sealed_chunks(recording)
    first, last = start // chunk, min(total - 1, max(start, end) // chunk)
    key = base64.b64decode(secret_services.sealed_open(recording))
    name = recording.storage_name
    with _object_read(name, offset=0, length=crypto.STREAM_HEADER) as read:
        prefix = crypto.stream_prefix(read)
    offset = crypto.STREAM_HEADER + first * crypto.STREAM_BLOCK
    length = (last - first + 1) * crypto.STREAM_BLOCK
    with _object_read(name, offset=offset, length=length) as read:
        position = first * chunk
        for plain in crypto.stream_open_chunks(
            read, key=key, associated_data=recording.associated_data(), prefix=prefix,
            first=first, total=total, until=last,
        ):  # fmt: skip
            piece = plain[max(0, start - position) : end + 1 - position]
            if piece:
                yield piece
            position += len(plain)
            if position > end:
                return


def _object_delete(name: str) -> None:
    try:
        storage().delete(name)
    except Exception as exc:  # the row is gone either way; say which kind of failure
        logger.error("recording object not deleted: %s", type(exc).__name__)


def _on_recording_deleted(sender: type[Recording], instance: Recording, **kwargs: object) -> None:
    """A deleted row (retention, a deleted session or workspace) takes its object along,
    once the deletion is committed."""
    name = instance.storage_name
    transaction.on_commit(lambda: _object_delete(name))


post_delete.connect(_on_recording_deleted, sender=Recording, dispatch_uid="recording-object")


# ---------------------------------------------------------------- signed URLs


def recording_url(*, recording: Recording) -> tuple[str, datetime]:
    """A path that plays the recording for ``RECORDING_URL_TTL_S``, and when it stops."""
    token = signing.TimestampSigner(salt=_URL_SALT).sign_object(
        {"r": recording.uid.hex, "w": recording.workspace_id}
    )
    expires_at = timezone.now() + timedelta(seconds=settings.RECORDING_URL_TTL_S)
    return reverse("recording-play", args=[token]), expires_at


def recording_from_url(token: str) -> Recording | None:
    """The recording a signed token names, if it is genuine, current and still kept."""
    try:
        claim = signing.TimestampSigner(salt=_URL_SALT).unsign_object(
            token, max_age=settings.RECORDING_URL_TTL_S
        )
    except (signing.BadSignature, ValueError):  # forged, altered, expired, not timestamped
        return None
    if not isinstance(claim, dict) or not isinstance(claim.get("w"), int):
        return None
    try:
        uid = uuid.UUID(hex=str(claim.get("r")))
    except ValueError:
        return None
    return Recording.objects.filter(uid=uid, workspace_id=claim["w"]).first()
