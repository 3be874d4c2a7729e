"""Browser origins (for publishable keys) and host names (for secrets)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

_DEFAULT_PORTS = {"http": 80, "https": 443}
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}
_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_HOST = re.compile(rf"^(\*\.)?{_LABEL}(\.{_LABEL})*\Z")


def normalize_origin(value: str) -> str:
    """'HTTPS://App.Example.com:443' → 'https://app.example.com'; anything else is refused."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        raise ValidationError(f"{value!r} is not an origin like https://app.example.com") from None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValidationError(f"{value!r} must be an http:// or https:// origin")
    if parts.path not in {"", "/"} or parts.query or parts.fragment or parts.username:
        raise ValidationError(f"{value!r} must be scheme://host[:port] only, without a path")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port is None or port == _DEFAULT_PORTS[parts.scheme]:
        return f"{parts.scheme}://{host}"
    return f"{parts.scheme}://{host}:{port}"


def origin_allowed(allowed_origins: list[str], origin: str | None) -> bool:
    """Exact match; a key with no origins set accepts only local development origins."""
    if not origin:
        return False
    try:
        normalized = normalize_origin(origin)
    except ValidationError:
        return False
    if allowed_origins:
        return normalized in allowed_origins
    return urlsplit(normalized).hostname in _LOCAL_HOSTS


def normalize_host(value: str) -> str:
    """A host name a secret may be sent to: 'api.example.com' or '*.example.com'."""
    host = value.strip().lower().rstrip(".")
    if not _HOST.match(host) or len(host) > 253:
        raise ValidationError(
            f"{value!r} is not a host name "
            "(use api.example.com or *.example.com, no scheme or path)"
        )
    return host
