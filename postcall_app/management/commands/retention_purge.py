"""``manage.py retention_purge``: delete what each workspace's retention no longer keeps
(what Celery beat runs every ``RETENTION_PURGE_INTERVAL_S`` in production; on the embedded
default, run it from cron)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from postcall_app.retention import retention_purge


class Command(BaseCommand):
    help = "Delete session records older than each workspace's retention (audited)."

    def handle(self, *args: Any, **options: Any) -> None:
        purged = retention_purge()
        for workspace_id, deleted in sorted(purged.items()):
            shown = ", ".join(f"{name} {count}" for name, count in sorted(deleted.items()))
            self.stdout.write(f"workspace {workspace_id}: {shown}")
        self.stdout.write(f"{len(purged)} workspace(s) had records deleted")
