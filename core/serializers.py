"""Serializer base shared by every API: unknown fields are an error, not ignored."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from rest_framework import serializers

_In = TypeVar("_In")
_Out = TypeVar("_Out")


class StrictSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """Refuses fields it does not declare, so a typo never silently does nothing."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            writable = {name for name, f in self.fields.items() if not f.read_only}
            unknown = sorted(set(data) - writable)
            if unknown:
                raise serializers.ValidationError({name: ["unknown field"] for name in unknown})
        return super().to_internal_value(data)


def clean_with(cleaner: Callable[[_In], _Out], value: _In) -> _Out:
    """Run a Django-style cleaner (raises django ValidationError) inside a DRF serializer."""
    from django.core.exceptions import ValidationError as DjangoValidationError

    try:
        return cleaner(value)
    except DjangoValidationError as exc:
        raise serializers.ValidationError(exc.messages) from None


@contextmanager
def django_errors_as_drf(field: str | None = None) -> Iterator[None]:
    """Services raise django's ValidationError; the API answers them as 400s."""
    from django.core.exceptions import ValidationError as DjangoValidationError

    try:
        yield
    except DjangoValidationError as exc:
        if hasattr(exc, "error_dict"):
            raise serializers.ValidationError(exc.message_dict) from None
        detail = {field: exc.messages} if field else exc.messages
        raise serializers.ValidationError(detail) from None
