"""The secret store's encryption: binding, rotation, keyring configuration."""

from __future__ import annotations

import io
import os

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command

from secrets_app import crypto, services
from secrets_app.models import Secret
from tests.factories import make_tenant


@pytest.fixture
def keyring_setting(monkeypatch):
    """Use a keyring parsed from a SECRETS_KEYRING value for the rest of the test."""

    def use(raw: str) -> None:
        ring = crypto.parse_keyring(raw)
        monkeypatch.setattr(crypto, "keyring", lambda: ring)

    use(crypto.new_keyring_entry("k1"))
    return use


def test_ciphertext_moved_to_another_row_fails_to_decrypt(db, keyring_setting):
    alice, bob = make_tenant("a@example.com"), make_tenant("b@example.com")
    a, _ = services.secret_set(workspace=alice.workspace, name="TOKEN", value="A", allowed_hosts=[])
    b, _ = services.secret_set(workspace=bob.workspace, name="TOKEN", value="B", allowed_hosts=[])
    renamed, _ = services.secret_set(
        workspace=alice.workspace, name="OTHER", value="C", allowed_hosts=[]
    )
    # Same name, other tenant; and same tenant, other name.
    for target, source in ((b, a), (renamed, a)):
        Secret.objects.filter(pk=target.pk).update(ciphertext=source.ciphertext)
        target.refresh_from_db()
        with pytest.raises(crypto.DecryptionError, match="does not authenticate"):
            services.secret_resolve(secret=target)
    a.refresh_from_db()
    assert services.secret_resolve(secret=a) == "A"


def test_each_encryption_uses_a_fresh_nonce(db, keyring_setting):
    tenant = make_tenant("n@example.com")
    first, _ = services.secret_set(
        workspace=tenant.workspace, name="X", value="same", allowed_hosts=[]
    )
    first_blob = bytes(first.ciphertext)
    second, _ = services.secret_set(
        workspace=tenant.workspace, name="X", value="same", allowed_hosts=[]
    )
    assert bytes(second.ciphertext) != first_blob


def test_rotation_re_encrypts_everything_and_is_safe_twice(db, keyring_setting, capsys):
    old_entry = crypto.new_keyring_entry("k1")
    keyring_setting(old_entry)
    tenants = [make_tenant(f"r{i}@example.com") for i in range(3)]
    values = {}
    for index, tenant in enumerate(tenants):
        for name in ("ONE", "TWO"):
            value = f"value-{index}-{name}-ü"
            services.secret_set(
                workspace=tenant.workspace, name=name, value=value, allowed_hosts=[]
            )
            values[(tenant.workspace.pk, name)] = value
    new_entry = crypto.new_keyring_entry("k2")
    keyring_setting(f"{old_entry},{new_entry}")

    call_command("rotate_secrets_key")
    assert "6 re-encrypted" in capsys.readouterr().out
    assert set(Secret.objects.values_list("key_id", flat=True)) == {"k2"}
    call_command("rotate_secrets_key")
    assert "0 re-encrypted, 6 already current" in capsys.readouterr().out

    # Drop the old key entirely: everything still decrypts.
    keyring_setting(new_entry)
    for secret in Secret.objects.all():
        assert services.secret_resolve(secret=secret) == values[(secret.workspace_id, secret.name)]


def test_rotation_reports_rows_it_cannot_decrypt_and_keeps_them(db, keyring_setting):
    tenant = make_tenant("bad@example.com")
    good, _ = services.secret_set(
        workspace=tenant.workspace, name="GOOD", value="g", allowed_hosts=[]
    )
    bad, _ = services.secret_set(
        workspace=tenant.workspace, name="BAD", value="b", allowed_hosts=[]
    )
    Secret.objects.filter(pk=bad.pk).update(ciphertext=good.ciphertext)
    keyring_setting(crypto.new_keyring_entry("k1") + "," + crypto.new_keyring_entry("k2"))
    # Both rows are now under an unknown key id "k1" of another keyring: nothing decrypts.
    with pytest.raises(CommandError, match="BAD"):
        call_command("rotate_secrets_key")
    assert set(Secret.objects.values_list("key_id", flat=True)) == {"k1"}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "SECRETS_KEYRING is empty"),
        ("nocolon", "SECRETS_KEYRING entry 1"),
        ("k1:!!!notbase64", "SECRETS_KEYRING key 'k1'"),
        ("k1:c2hvcnQ=", "must be 32 bytes"),
        ("bad id:" + "A" * 43, "SECRETS_KEYRING entry 1"),
    ],
)
def test_malformed_keyring_is_refused_naming_the_variable(raw, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        crypto.parse_keyring(raw)


def test_duplicate_key_ids_are_refused():
    entry = crypto.new_keyring_entry("k1")
    with pytest.raises(ImproperlyConfigured, match="appears twice"):
        crypto.parse_keyring(f"{entry},{entry}")


# ---------------------------------------------------------------- sealed streams (recordings)


def _sealed(plaintext: bytes, key: bytes, ad: bytes, piece: int = 1000) -> bytes:
    pieces = (plaintext[i : i + piece] for i in range(0, len(plaintext), piece))
    return b"".join(crypto.stream_seal(pieces, key=key, associated_data=ad))


def _opened(blob: bytes, key: bytes, ad: bytes) -> bytes:
    return b"".join(crypto.stream_open(io.BytesIO(blob).read, key=key, associated_data=ad))


@pytest.mark.parametrize("size", [0, 1, crypto.STREAM_CHUNK, 3 * crypto.STREAM_CHUNK + 5])
def test_a_sealed_stream_opens_to_its_plaintext_and_shows_none_of_it(size: int) -> None:
    key, ad = os.urandom(32), b"recording/1"
    plaintext = (b"RIFF-canary-" * (size // 12 + 1))[:size]
    blob = _sealed(plaintext, key, ad)
    assert _opened(blob, key, ad) == plaintext
    assert b"canary" not in blob and b"RIFF" not in blob


def test_a_sealed_stream_cut_reordered_altered_or_moved_does_not_open() -> None:
    key, ad = os.urandom(32), b"recording/1"
    blob = _sealed(os.urandom(3 * crypto.STREAM_CHUNK), key, ad)
    block = crypto.STREAM_CHUNK + 16
    head, chunks = (
        blob[:16],
        [blob[16 + i : 16 + i + block] for i in range(0, len(blob) - 16, block)],
    )
    altered = bytearray(blob)
    altered[-1] ^= 1
    for broken, ad_used in (
        (head + b"".join(chunks[:-1]), ad),  # cut at a chunk's end
        (head + chunks[1] + chunks[0] + b"".join(chunks[2:]), ad),  # reordered
        (bytes(altered), ad),
        (blob, b"recording/2"),  # another recording's row
    ):
        with pytest.raises(crypto.DecryptionError):
            _opened(broken, key, ad_used)
