"""All key material lives here: the secret-store keyring and the API-key pepper.

Secrets are sealed with AES-256-GCM. The associated data names the workspace and
the secret, so a ciphertext copied to another row (another tenant, another name)
fails authentication instead of decrypting.

SECRETS_KEYRING is "id:base64key,id:base64key,…", oldest first; the last key
encrypts, every key decrypts. In DEBUG a keyring is generated once under var/.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

KEY_BYTES = 32
NONCE_BYTES = 12
_KEY_ID = re.compile(r"^[A-Za-z0-9_-]{1,32}\Z")
_DEV_KEYRING_FILE = "secrets_keyring"


class DecryptionError(Exception):
    """A ciphertext did not authenticate: wrong key, tampered, or moved to another row."""


@dataclass(frozen=True)
class Keyring:
    keys: tuple[tuple[str, bytes], ...]  # oldest first

    @property
    def current_id(self) -> str:
        return self.keys[-1][0]

    def _key(self, key_id: str) -> bytes:
        for candidate_id, key in self.keys:
            if candidate_id == key_id:
                return key
        raise DecryptionError(f"key {key_id!r} is not in SECRETS_KEYRING")

    def encrypt(self, plaintext: bytes, *, associated_data: bytes) -> tuple[str, bytes]:
        nonce = os.urandom(NONCE_BYTES)
        sealed = AESGCM(self._key(self.current_id)).encrypt(nonce, plaintext, associated_data)
        return self.current_id, nonce + sealed

    def decrypt(self, key_id: str, blob: bytes, *, associated_data: bytes) -> bytes:
        nonce, sealed = blob[:NONCE_BYTES], blob[NONCE_BYTES:]
        try:
            return AESGCM(self._key(key_id)).decrypt(nonce, sealed, associated_data)
        except InvalidTag:
            raise DecryptionError(
                "ciphertext does not authenticate for this workspace and name "
                "(tampered, moved to another row, or sealed under another key)"
            ) from None


def parse_keyring(raw: str) -> Keyring:
    entries: list[tuple[str, bytes]] = []
    for position, entry in enumerate(item.strip() for item in raw.split(",") if item.strip()):
        key_id, sep, encoded = entry.partition(":")
        if not sep or not _KEY_ID.match(key_id):
            raise ImproperlyConfigured(
                f"SECRETS_KEYRING entry {position + 1} must look like 'id:base64key'"
            )
        try:
            key = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        except (binascii.Error, ValueError):
            raise ImproperlyConfigured(
                f"SECRETS_KEYRING key {key_id!r} is not valid base64"
            ) from None
        if len(key) != KEY_BYTES:
            raise ImproperlyConfigured(
                f"SECRETS_KEYRING key {key_id!r} must be {KEY_BYTES} bytes, got {len(key)}"
            )
        if any(existing == key_id for existing, _ in entries):
            raise ImproperlyConfigured(f"SECRETS_KEYRING key id {key_id!r} appears twice")
        entries.append((key_id, key))
    if not entries:
        raise ImproperlyConfigured("SECRETS_KEYRING is empty")
    return Keyring(tuple(entries))


def new_keyring_entry(key_id: str) -> str:
    """A fresh 'id:base64key' entry to append to SECRETS_KEYRING."""
    if not _KEY_ID.match(key_id):
        raise ValueError("key id must be 1-32 letters, digits, '-' or '_'")
    return f"{key_id}:{base64.urlsafe_b64encode(secrets.token_bytes(KEY_BYTES)).decode()}"


def _dev_keyring_raw() -> str:
    path = Path(settings.VAR_DIR) / _DEV_KEYRING_FILE
    if not path.exists():
        # Created with 0600 so other local users cannot read the development key.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(new_keyring_entry("dev1"))
    return path.read_text().strip()


@cache
def keyring() -> Keyring:
    raw = settings.SECRETS_KEYRING
    if raw is None:
        if not settings.DEBUG:
            raise ImproperlyConfigured("SECRETS_KEYRING must be set when DEBUG=false")
        raw = _dev_keyring_raw()
    return parse_keyring(raw)


def secret_associated_data(*, workspace_id: int, name: str) -> bytes:
    return f"voice-platform/secret/v1\x00{workspace_id}\x00{name}".encode()


# Each kind of sealed value has its own label, so a ciphertext never opens as another kind
# (a provider key copied into the secrets table, where tool code could reach it, fails).
def provider_associated_data(*, workspace_id: int, kind: str, name: str) -> bytes:
    return f"voice-platform/provider/v1\x00{workspace_id}\x00{kind}\x00{name}".encode()


def webhook_associated_data(*, workspace_id: int, endpoint_uid: str) -> bytes:
    return f"voice-platform/webhook/v1\x00{workspace_id}\x00{endpoint_uid}".encode()


# ---------------------------------------------------------------- large objects (recordings)
#
# A recording is sealed with a random data key of its own, in chunks (AES-256-GCM each, so
# a file of any size streams through in bounded memory); the data key is sealed with the
# keyring like a secret (``services.sealed_store``), under the object's associated data.
# A chunk's nonce is a random prefix and its index; its associated data adds the index and
# whether it is the last, so chunks cannot be reordered, dropped or the object cut short
# without failing to open.

STREAM_CHUNK = 64 * 1024
STREAM_MAGIC = b"VPSTREAM"  # format 1: magic, 8-byte nonce prefix, sealed chunks
_TAG_BYTES = 16


def recording_associated_data(*, workspace_id: int, recording_uid: str) -> bytes:
    return f"voice-platform/recording/v1\x00{workspace_id}\x00{recording_uid}".encode()


def data_key_generate() -> bytes:
    """A fresh 256-bit data key (sealed by the caller with ``services.sealed_store``)."""
    return AESGCM.generate_key(bit_length=256)


def _chunk_ad(associated_data: bytes, index: int, last: bool) -> bytes:
    return associated_data + index.to_bytes(8, "big") + (b"\x01" if last else b"\x00")


def stream_seal(chunks: Iterable[bytes], *, key: bytes, associated_data: bytes) -> Iterator[bytes]:
    """``chunks`` (any sizes) sealed, as the pieces of one object."""
    aead, prefix = AESGCM(key), os.urandom(8)
    yield STREAM_MAGIC + prefix
    index, pending = 0, bytearray()

    def sealed(piece: bytes, last: bool) -> bytes:
        nonce = prefix + index.to_bytes(4, "big")
        return aead.encrypt(nonce, piece, _chunk_ad(associated_data, index, last))

    for chunk in chunks:
        pending += chunk
        while len(pending) > STREAM_CHUNK:  # something is always left for the last chunk
            yield sealed(bytes(pending[:STREAM_CHUNK]), False)
            del pending[:STREAM_CHUNK]
            index += 1
    yield sealed(bytes(pending), True)


STREAM_HEADER = len(STREAM_MAGIC) + 8
STREAM_BLOCK = STREAM_CHUNK + _TAG_BYTES  # a sealed chunk


def stream_prefix(read: Callable[[int], bytes]) -> bytes:
    """The nonce prefix in a sealed object's header (``read`` at its start)."""
    header = read(STREAM_HEADER)
    if header[: len(STREAM_MAGIC)] != STREAM_MAGIC or len(header) != STREAM_HEADER:
        raise DecryptionError("not a sealed object")
    return header[len(STREAM_MAGIC) :]


def _open_chunk(
    aead: AESGCM, prefix: bytes, block: bytes, ad: bytes, index: int, last: bool
) -> bytes:
    try:
        return aead.decrypt(prefix + index.to_bytes(4, "big"), block, _chunk_ad(ad, index, last))
    except (InvalidTag, ValueError, OverflowError):
        raise DecryptionError("a chunk of the object does not authenticate") from None


def stream_open_chunks(
    read: Callable[[int], bytes], *, key: bytes, associated_data: bytes, prefix: bytes,
    first: int, total: int, until: int | None = None,
) -> Iterator[bytes]:  # fmt: skip
    """Chunks ``first`` to ``until`` (default: the last, of ``total`` in the object) of a
    sealed object, ``read`` positioned at chunk ``first`` (``STREAM_HEADER + first *
    STREAM_BLOCK``): a range of a long recording without the chunks around it."""
    aead = AESGCM(key)
    for index in range(first, total if until is None else min(total, until + 1)):
        last = index == total - 1
        yield _open_chunk(aead, prefix, read(STREAM_BLOCK), associated_data, index, last)


def stream_open(
    read: Callable[[int], bytes], *, key: bytes, associated_data: bytes
) -> Iterator[bytes]:
    """The plaintext of an object sealed by ``stream_seal``, chunk by chunk, each one
    authenticated before it is given; ``DecryptionError`` when any is not."""
    aead, prefix = AESGCM(key), stream_prefix(read)
    block, index = read(STREAM_BLOCK), 0
    while True:
        following = read(STREAM_BLOCK)
        last = not following
        yield _open_chunk(aead, prefix, block, associated_data, index, last)
        if last:
            return
        block, index = following, index + 1


@cache
def _api_key_pepper() -> bytes:
    if settings.API_KEY_PEPPER:
        return settings.API_KEY_PEPPER.encode()
    return hmac.new(settings.SECRET_KEY.encode(), b"api-key-pepper/v1", hashlib.sha256).digest()


def api_key_hash(plaintext: str) -> str:
    """Keyed hash of an API key: a leaked table cannot be brute-forced without the pepper."""
    return hmac.new(_api_key_pepper(), plaintext.encode(), hashlib.sha256).hexdigest()


def token_digest(token: str) -> str:
    """Digest of a random bearer token (invitation links, resume tokens) for storage.

    Such tokens carry 200+ random bits, so a plain hash is enough: whoever reads the
    table (or Redis) cannot use what they read. ``surrogatepass``: any str hashes.
    """
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def random_token(length: int) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return "".join(secrets.choice(alphabet) for _ in range(length))


def reset_caches() -> None:
    """For tests that change the keyring or pepper settings."""
    keyring.cache_clear()
    _api_key_pepper.cache_clear()
