"""People's accounts: sign-up without revealing who has one, email verification, login
throttling, and TOTP two-factor (django-otp).

Sign-up answers the same for a new and a known address (same page, same work: a password
hash either way, one mail either way), so it never tells whether an account exists.
Until the address is verified (the mailed link), an account cannot create API keys.
Failed logins are counted per account and per client address (``core.rates``);
past either limit even the right password is refused until the window passes.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.core import signing
from django.core.exceptions import ValidationError
from django.utils import timezone
from django_otp import match_token, user_has_device
from django_otp.plugins.otp_totp.models import TOTPDevice

from core import rates
from secrets_app.models import User

_VERIFY_SALT = "secrets_app.accounts.verify-email"


def login_account_rate() -> rates.Rate:
    window = settings.LOGIN_FAILURE_WINDOW_S
    return rates.Rate("login-account", settings.LOGIN_FAILURES_PER_ACCOUNT, window)


def login_address_rate() -> rates.Rate:
    window = settings.LOGIN_FAILURE_WINDOW_S
    return rates.Rate("login-address", settings.LOGIN_FAILURES_PER_ADDRESS, window)


def account_mail_rate() -> rates.Rate:
    return rates.Rate("account-mail", settings.ACCOUNT_MAILS_PER_ADDRESS_PER_HOUR, 3600)


# ---------------------------------------------------------------- sign-up and verification


def user_sign_up(*, email: str, password: str) -> User | None:
    """A new, unverified account; None when the address has one already (nothing changes,
    but the password is hashed all the same so both answers take the same time)."""
    email = email.strip().lower()
    if User.objects.filter(email__iexact=email).exists():
        make_password(password)
        return None
    return User.objects.create_user(email=email, password=password)


def email_verification_token(*, user: User) -> str:
    return signing.dumps({"u": user.pk, "e": user.email}, salt=_VERIFY_SALT)


def email_verify(*, token: str) -> User:
    """Mark the link's address verified; ValidationError says why not, in words for people."""
    try:
        data = signing.loads(
            token, salt=_VERIFY_SALT, max_age=settings.EMAIL_VERIFICATION_MAX_AGE_S
        )
    except signing.SignatureExpired:
        raise ValidationError("This link has expired. Log in and ask for a new one.") from None
    except signing.BadSignature:
        raise ValidationError("This link is not valid. Check that you copied all of it.") from None
    user = User.objects.filter(pk=data.get("u"), email__iexact=data.get("e", "")).first()
    if user is None:
        raise ValidationError("This link is not valid any more.")
    if user.email_verified_at is None:
        user.email_verified_at = timezone.now()
        user.save(update_fields=["email_verified_at"])
    return user


# ---------------------------------------------------------------- logins


def login_refusal(*, email: str, address: str) -> int | None:
    """Seconds to wait before this account or address may try again; None: go ahead."""
    waits = [
        rates.peek_sync(login_account_rate(), email.strip().lower()),
        rates.peek_sync(login_address_rate(), address),
    ]
    known = [wait for wait in waits if wait is not None]
    return max(known) if known else None


def login_failed(*, email: str, address: str) -> None:
    rates.hit_sync(login_account_rate(), email.strip().lower())
    rates.hit_sync(login_address_rate(), address)


def second_factor_check(*, user: User, code: str) -> TOTPDevice | None:
    """The device that accepted ``code``, None if the user has no second factor, or
    ValidationError."""
    if not user_has_device(user):
        return None
    code = (code or "").replace(" ", "")
    if not code:
        raise ValidationError(
            "Enter the 6-digit code from your authenticator app.", code="otp_required"
        )
    device = match_token(user, code)
    if device is None:
        raise ValidationError("That code is not right (or was used already).", code="otp_wrong")
    return device


# ---------------------------------------------------------------- TOTP enrolment


@dataclass(frozen=True)
class TotpSetup:
    device: TOTPDevice
    secret: str  # base32, for typing into an app by hand
    url: str  # otpauth://, what the QR code holds


def totp_setup(*, user: User) -> TotpSetup:
    """The user's unconfirmed authenticator, made on first use (a confirmed one stays)."""
    device = TOTPDevice.objects.filter(user=user, confirmed=False).first()
    if device is None:
        device = TOTPDevice.objects.create(user=user, name="Authenticator app", confirmed=False)
    secret = base64.b32encode(device.bin_key).decode().rstrip("=")
    return TotpSetup(device=device, secret=secret, url=device.config_url)


def totp_confirm(*, user: User, code: str) -> TOTPDevice:
    device = TOTPDevice.objects.filter(user=user, confirmed=False).first()
    if device is None or not device.verify_token((code or "").replace(" ", "")):
        raise ValidationError("That code is not right. Check the time on your phone and retry.")
    device.confirmed = True
    device.save(update_fields=["confirmed"])
    TOTPDevice.objects.filter(user=user, confirmed=False).delete()
    return device


def totp_disable(*, user: User, code: str) -> None:
    if match_token(user, (code or "").replace(" ", "")) is None:
        raise ValidationError("That code is not right; two-factor login stays on.")
    TOTPDevice.objects.filter(user=user).delete()


def totp_enabled(*, user: User) -> bool:
    return bool(user_has_device(user))
