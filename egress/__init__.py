"""One egress guard for every URL the platform dials on a customer's behalf: the
sandbox's ``ctx.fetch``, webhooks, workspaces' LLM and speech-provider URLs.

Plain Python, no Django: the caller passes the ``Policy`` (the Django side builds it from
settings in ``core.outbound``). ``guard`` holds the rules and the one sentence a
refusal says; ``websocket`` and ``pinned_http`` dial under them (provider streams);
``client`` is the one HTTP client for customer-given URLs (``ctx.fetch``, webhooks),
``transport`` the httpx transport for libraries that make their own requests (the MCP SDK),
bound to one origin, and ``secret_refs`` the references both expand into a secret's value
for that secret's hosts only.
"""

from egress.guard import (
    OPERATOR,
    EgressRefused,
    EgressUnreachable,
    InvalidURL,
    Policy,
    Target,
    check,
    is_public,
    parse,
    refusal,
    vet,
    vet_host,
    where,
)

__all__ = [
    "OPERATOR",
    "EgressRefused",
    "EgressUnreachable",
    "InvalidURL",
    "Policy",
    "Target",
    "check",
    "is_public",
    "parse",
    "refusal",
    "vet",
    "vet_host",
    "where",
]
