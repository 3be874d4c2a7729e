"""``{% mail_printed_to_console as printed %}``: whether mail goes to the console (./dev.sh's
default), so a "Check your email" page can say where the message really is."""

from __future__ import annotations

from django import template
from django.conf import settings

register = template.Library()

CONSOLE_BACKEND = "django.core.mail.backends.console.EmailBackend"


@register.simple_tag
def mail_printed_to_console() -> bool:
    return bool(settings.EMAIL_BACKEND == CONSOLE_BACKEND)
