"""Who may open a realtime session: checked before anything is created for it.

A browser connects with a publishable key (``?key=pk_…``) or a session token
(``?token=st_…``) that the customer's server minted with a secret key. A token session
belongs to the secret key that minted it: revoking that key ends it like any other.
"""

from __future__ import annotations

from dataclasses import dataclass

from secrets_app import services as key_services
from secrets_app.hosts import origin_allowed
from secrets_app.models import ApiKey, Workspace
from sessions_app.models import Agent
from sessions_app.protocol import ErrorCode
from sessions_app.selectors import agent_find
from sessions_app.services import session_token_redeem

# WebSocket close codes of protocol v1 (4000-4999 is the application range; 4000-4099
# are refusals the browser library does not retry). Listed in the README's table.
CLOSE_NO_CONFIGURE = 4000
CLOSE_BAD_KEY = 4001  # also: a revoked or expired key ends its live sessions
CLOSE_SECRET_KEY = 4002
CLOSE_ORIGIN = 4003
CLOSE_AGENT = 4004
CLOSE_INLINE_REFUSED = 4008
CLOSE_ENDED = 4009  # ended by the workspace (dashboard or API)
CLOSE_IDLE = 4010
CLOSE_TOO_LONG = 4011
CLOSE_TOO_MANY = 4029
# The platform restarted while the session was live (set on its record afterwards).
CLOSE_RESTART = 1012
CLOSE_QUOTA_EXCEEDED = 4030  # the workspace used up a quota (usage_app.quotas)


class ConnectionRefused(Exception):
    """Refuse the socket: ``close_code`` for the WebSocket, ``code``/``message`` for humans."""

    def __init__(self, close_code: int, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.close_code, self.code, self.message = close_code, ErrorCode(code), message


@dataclass(frozen=True)
class Access:
    key: ApiKey  # the pk_ key; for a token, the sk_ key that minted it
    workspace: Workspace
    origin: str
    agent: Agent | None  # named in the URL, or the token's
    address: str = ""
    # A token's binding: its agent only, these variables fixed, this end-user label.
    token_variables: dict[str, str] | None = None
    end_user: str = ""

    @property
    def by_token(self) -> bool:
        return self.token_variables is not None


def agent_allowed(key: ApiKey, slug: str) -> Agent:
    agent = agent_find(workspace=key.workspace, slug=slug)
    if agent is None or (key.allowed_agents and slug not in key.allowed_agents):
        raise ConnectionRefused(
            CLOSE_AGENT,
            ErrorCode.AGENT_NOT_ALLOWED,
            f"agent {slug[:64]!r} is unknown or not allowed",
        )
    return agent


def _origin_refusal(origin: str | None) -> str:
    if origin in (None, "", "null"):
        # A page opened from a file (or in a sandboxed frame) has no origin to allow: "null"
        # would let any such page anywhere use the key.
        return (
            "this page has no origin (opened from a file, or in a sandboxed frame); serve it "
            "from a web address instead, e.g. python3 -m http.server 8080 and "
            "http://localhost:8080/ (a key without allowed origins accepts localhost)"
        )
    return (
        f"origin {origin[:200]!r} is not allowed for this key; add it to the key's allowed origins"
    )


def _publishable(key: str) -> ApiKey:
    try:
        api_key = key_services.api_key_authenticate(plaintext=key, kind=ApiKey.Kind.PUBLISHABLE)
    except key_services.KeyRejected as rejected:
        if rejected.code == "wrong_key_kind":
            raise ConnectionRefused(
                CLOSE_SECRET_KEY, ErrorCode.SECRET_KEY_REFUSED, rejected.reason
            ) from None
        raise ConnectionRefused(CLOSE_BAD_KEY, ErrorCode.INVALID_KEY, rejected.reason) from None
    if api_key.tokens_only:
        raise ConnectionRefused(
            CLOSE_BAD_KEY,
            ErrorCode.TOKEN_REQUIRED,
            "this key only accepts session tokens: have your server mint one "
            "(POST /api/v1/session-tokens) and connect with ?token=",
        )
    return api_key


def _by_token(token: str, agent_slug: str | None, origin: str, address: str) -> Access:
    redeemed = session_token_redeem(token=token)
    minted_by = redeemed.created_by_key if redeemed is not None else None
    if redeemed is None or minted_by is None or minted_by.status() != "active":
        raise ConnectionRefused(
            CLOSE_BAD_KEY, ErrorCode.INVALID_TOKEN, "the session token is unknown, used or expired"
        )
    if agent_slug and agent_slug != redeemed.agent.slug:
        raise ConnectionRefused(
            CLOSE_AGENT, ErrorCode.AGENT_NOT_ALLOWED, "the session token is for another agent"
        )
    return Access(
        key=minted_by,
        workspace=redeemed.workspace,
        origin=origin,
        agent=redeemed.agent,
        address=address,
        token_variables=dict(redeemed.variables),
        end_user=redeemed.end_user,
    )


def authorize_connection(
    *,
    key: str,
    origin: str | None,
    agent_slug: str | None,
    token: str = "",
    address: str = "",
) -> Access:
    if token and not key:
        # The token is the capability (single use, short-lived): no origin list to check.
        return _by_token(token, agent_slug, origin or "", address)
    api_key = _publishable(key)
    if not origin_allowed(api_key.allowed_origins, origin):
        raise ConnectionRefused(CLOSE_ORIGIN, ErrorCode.ORIGIN_NOT_ALLOWED, _origin_refusal(origin))
    agent = agent_allowed(api_key, agent_slug) if agent_slug else None
    return Access(
        key=api_key, workspace=api_key.workspace, origin=origin or "", agent=agent, address=address
    )
