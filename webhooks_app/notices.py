"""Mail about a workspace's webhooks: an endpoint the platform disabled goes to its owners."""

from __future__ import annotations

import logging

from secrets_app import mail, tasks
from secrets_app.audit import url_shown
from secrets_app.models import Membership
from webhooks_app.models import WebhookEndpoint

logger = logging.getLogger(__name__)

SUBJECT = "Webhook endpoint disabled: {url}"
BODY = """\
Deliveries to your webhook endpoint {url} (workspace "{workspace}") kept failing, so the
platform disabled it and sends it nothing more.

Why: {reason}

Fix the receiver, then enable the endpoint again on the dashboard (Webhooks, the endpoint,
Settings, "Enabled"). Events of the meantime can be sent again with Redeliver.
"""


def endpoint_disabled_mail(*, endpoint_id: int) -> None:
    endpoint = WebhookEndpoint.objects.select_related("workspace").filter(pk=endpoint_id).first()
    if endpoint is None:
        return
    owners = Membership.objects.filter(
        workspace_id=endpoint.workspace_id, role=Membership.Role.OWNER, user__is_active=True
    ).values_list("user__email", flat=True)
    words = {
        "url": url_shown(endpoint.url),
        "workspace": endpoint.workspace.name,
        "reason": endpoint.disabled_reason,
    }
    for email in owners:
        if email:
            mail.send_later(
                tasks.mail_send,
                subject=SUBJECT.format(**words),
                body=BODY.format(**words),
                to=email,
            )
    logger.info("webhook endpoint %s disabled: owners mailed", endpoint_id)
