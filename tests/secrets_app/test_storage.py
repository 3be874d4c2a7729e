"""What is actually in the database: no plaintext secrets, no sk_ plaintext."""

from __future__ import annotations

import pytest
from django.db import connection

from secrets_app import services
from tests.factories import make_tenant

SECRET_VALUE = "very-secret-value-8f2b1c"


def _every_cell() -> list[bytes]:
    cells: list[bytes] = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            for row in cursor.fetchall():
                for value in row:
                    if isinstance(value, memoryview):
                        value = value.tobytes()
                    cells.append(value if isinstance(value, bytes) else str(value).encode())
    return cells


@pytest.mark.django_db(transaction=True)
def test_no_plaintext_secret_or_secret_key_in_any_table():
    tenant = make_tenant("raw@example.com")
    services.secret_set(
        workspace=tenant.workspace, name="API_TOKEN", value=SECRET_VALUE, allowed_hosts=[]
    )
    cells = _every_cell()
    assert cells, "the scan must see rows"
    needles = [SECRET_VALUE.encode(), tenant.secret_key.encode(), tenant.secret_key[3:].encode()]
    for needle in needles:
        assert not any(needle in cell for cell in cells), needle
    # the publishable key is public by design and kept for display
    assert any(tenant.publishable_key.encode() in cell for cell in cells)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_postgres_enforces_one_secret_name_per_workspace():
    from django.db import IntegrityError

    from secrets_app.models import Secret

    tenant = make_tenant("pg@example.com")
    secret, _ = services.secret_set(
        workspace=tenant.workspace, name="ONE", value="v", allowed_hosts=[]
    )
    with pytest.raises(IntegrityError):
        Secret.objects.create(workspace=tenant.workspace, name="ONE", ciphertext=b"x", key_id="k")
    assert bytes(Secret.objects.get(pk=secret.pk).ciphertext) == bytes(secret.ciphertext)
