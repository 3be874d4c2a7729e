"""``usage:read`` for the secret keys that could read usage before it had a scope, and no
working key left that an unverified account made through the paths now closed."""

from django.db import migrations
from django.utils import timezone

PLAYGROUND_KEY_LABEL = "Dashboard playground"


def usage_for_existing_keys(apps, schema_editor):
    """Every secret key read ``GET /usage`` before the scope existed: it keeps doing so."""
    ApiKey = apps.get_model("secrets_app", "ApiKey")
    for key in ApiKey.objects.filter(kind="secret").only("pk", "scopes"):
        if "usage:read" not in key.scopes:
            ApiKey.objects.filter(pk=key.pk).update(scopes=[*key.scopes, "usage:read"])


def revoke_keys_of_unverified_accounts(apps, schema_editor):
    """Keys an unverified person rolled, and the playground keys made without saying for
    whom (the dashboard makes a new one, for a verified person, on the next visit); with
    every key those keys made."""
    ApiKey = apps.get_model("secrets_app", "ApiKey")
    active = ApiKey.objects.filter(revoked_at__isnull=True)
    pending = list(active.filter(created_by__email_verified_at__isnull=True,
                                 created_by__isnull=False).values_list("pk", flat=True))
    pending += active.filter(
        kind="publishable", label=PLAYGROUND_KEY_LABEL, created_by__isnull=True
    ).values_list("pk", flat=True)
    now, seen = timezone.now(), set()
    while pending:
        key_id = pending.pop()
        if key_id in seen:
            continue
        seen.add(key_id)
        ApiKey.objects.filter(pk=key_id, revoked_at__isnull=True).update(revoked_at=now)
        pending += ApiKey.objects.filter(created_by_key_id=key_id).values_list("pk", flat=True)


class Migration(migrations.Migration):
    dependencies = [
        ("secrets_app", "0005_provider_credential"),
    ]

    operations = [
        migrations.RunPython(usage_for_existing_keys, migrations.RunPython.noop),
        migrations.RunPython(revoke_keys_of_unverified_accounts, migrations.RunPython.noop),
    ]
