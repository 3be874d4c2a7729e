"""Where an outbound call may ring. Toll fraud is what a leaked ``calls:write`` key is
worth to an attacker (calls to premium-rate numbers they are paid for, at the customer's
expense), so the platform refuses before the carrier is asked:

- numbers that are not valid numbers of any country's plan (libphonenumber's metadata);
- number types that bill the caller or forward elsewhere: premium rate, shared cost,
  personal numbers (UK 070), pagers, UAN, voicemail access;
- other countries than the calling number's own, unless ``OUTBOUND_CALL_COUNTRIES``
  lists them (ISO 3166 codes, or ``*`` for any).
"""

from __future__ import annotations

import phonenumbers
from django.conf import settings
from django.core.exceptions import ValidationError
from phonenumbers import PhoneNumberType

REFUSED_TYPES = {
    PhoneNumberType.PREMIUM_RATE: "a premium-rate number",
    PhoneNumberType.SHARED_COST: "a shared-cost number",
    PhoneNumberType.PERSONAL_NUMBER: "a personal (forwarding) number",
    PhoneNumberType.PAGER: "a pager",
    PhoneNumberType.UAN: "a universal access number",
    PhoneNumberType.VOICEMAIL: "a voicemail access number",
}


def destination_check(*, caller: str, callee: str) -> None:
    """ValidationError (on ``to``) when ``callee`` (E.164) may not be rung from ``caller``."""
    number = phonenumbers.parse(callee)
    if not phonenumbers.is_valid_number(number):
        raise ValidationError({"to": ["not a number any country's numbering plan assigns"]})
    kind = REFUSED_TYPES.get(phonenumbers.number_type(number))
    if kind is not None:
        raise ValidationError({"to": [f"{kind}: outbound calls do not ring these"]})
    country = phonenumbers.region_code_for_number(number)
    home = phonenumbers.region_code_for_number(phonenumbers.parse(caller))
    allowed = {code.upper() for code in settings.OUTBOUND_CALL_COUNTRIES}
    if country != home and "*" not in allowed and country not in allowed:
        raise ValidationError(
            {"to": [f"calls to {country} are not enabled (OUTBOUND_CALL_COUNTRIES)"]}
        )
