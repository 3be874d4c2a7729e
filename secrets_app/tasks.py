"""Mail the dashboard sends, off the request: every answer takes the same time whether or
not a mail goes out (password reset for a known address, sign-up of a known address).

With Redis the tasks go to Celery's default queue; on the embedded default they run on a
thread of the web process (``secrets_app.mail.send_later``).
"""

from __future__ import annotations

import logging
import smtplib

from celery import shared_task
from django.contrib.auth.forms import PasswordResetForm
from django.core.mail import send_mail

logger = logging.getLogger(__name__)

_RESET = "dashboard/password_reset"


@shared_task(name="mail.send", ignore_result=True)
def mail_send(*, subject: str, body: str, to: str) -> None:
    try:
        send_mail(subject, body, None, [to])
    except (smtplib.SMTPException, OSError) as exc:
        # The type only: SMTP errors quote the recipient's address.
        logger.warning("mail not sent: %s", type(exc).__name__)


@shared_task(name="mail.password_reset", ignore_result=True)
def mail_password_reset(*, email: str, domain: str, use_https: bool) -> None:
    """Django's reset mail to every active account of ``email`` (none: nothing happens)."""
    form = PasswordResetForm({"email": email})
    if not form.is_valid():
        return
    try:
        form.save(
            domain_override=domain,
            use_https=use_https,
            subject_template_name=f"{_RESET}_subject.txt",
            email_template_name=f"{_RESET}_email.txt",
        )
    except (smtplib.SMTPException, OSError) as exc:
        logger.warning("password reset mail not sent: %s", type(exc).__name__)
