# The kinds of provider accounts come from the registry (secrets_app.models.credential_kinds):
# a new speech provider with a credential kind needs no migration of its own. No schema change.

import secrets_app.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('secrets_app', '0006_usage_scope_and_unverified_keys'),
    ]

    operations = [
        migrations.AlterField(
            model_name='providercredential',
            name='kind',
            field=models.CharField(choices=secrets_app.models.credential_kinds, max_length=12),
        ),
    ]
