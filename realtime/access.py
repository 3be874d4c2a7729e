"""Who may open a realtime session: checked before anything is created for it.

A browser connects with a publishable key (``?key=pk_…``) or a session token
(``?token=st_…``) that the customer's server minted with a secret key. A token session
belongs to the secret key that minted it: revoking that key ends it like any other.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.protocol import CloseCode, ErrorCode
from secrets_app import services as key_services
from secrets_app.hosts import origin_allowed
from secrets_app.models import ApiKey, Workspace
from sessions_app.models import Agent, AgentVersion
from sessions_app.selectors import agent_find
from sessions_app.services import session_token_redeem


class ConnectionRefused(Exception):
    """Refuse the socket: ``close_code`` for the WebSocket, ``code``/``message`` for humans."""

    def __init__(self, close_code: int, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.close_code, self.code, self.message = close_code, ErrorCode(code), message


@dataclass(frozen=True)
class TokenBinding:
    """What a session token fixes when it is minted; a connection can narrow nothing and
    widen nothing of it: its agent only, these variables (the page sets no other but
    ``page_variables``), this end-user label, and (when the minting server named one) this
    page origin."""

    agent: Agent
    variables: dict[str, str]
    end_user: str = ""
    agent_version: AgentVersion | None = None  # pinned by the token: not the published one
    origin: str = ""  # "": any origin (the token itself is the capability)
    page_variables: tuple[str, ...] = ()


@dataclass(frozen=True)
class Access:
    """Who a connection is and what it may ask for. For a token, the binding is the only
    source of what the session may be: the minting sk_ key's own settings never count."""

    key: ApiKey  # the pk_ key; for a token, the sk_ key that minted it
    workspace: Workspace
    origin: str
    agent: Agent | None  # named in the URL, or the token's
    address: str = ""
    token: TokenBinding | None = None

    @property
    def by_token(self) -> bool:
        return self.token is not None

    @property
    def inline_config_allowed(self) -> bool:
        return self.token is None and self.key.allow_inline_config

    @property
    def inline_tool_code_allowed(self) -> bool:
        return self.token is None and self.key.allow_inline_tool_code

    @property
    def locked_variables(self) -> dict[str, str]:
        return dict(self.token.variables) if self.token is not None else {}

    @property
    def page_variables(self) -> list[str] | None:
        """The variables the page may set: a token's list, or any (None) for a key."""
        return list(self.token.page_variables) if self.token is not None else None

    @property
    def pinned_version(self) -> AgentVersion | None:
        return self.token.agent_version if self.token is not None else None

    @property
    def end_user(self) -> str:
        return self.token.end_user if self.token is not None else ""

    def agent_for(self, requested: str | None) -> Agent | None:
        """The agent a ``configure`` may run: a token's own only; for a key, the one in the
        URL or another the key allows. ``ConnectionRefused`` (4004) otherwise."""
        if self.token is not None:
            if requested and requested != self.token.agent.slug:
                raise _token_agent_refused()
            return self.token.agent
        if requested and (self.agent is None or requested != self.agent.slug):
            return agent_allowed(self.key, requested)
        return self.agent


def _token_agent_refused() -> ConnectionRefused:
    return ConnectionRefused(
        CloseCode.AGENT, ErrorCode.AGENT_NOT_ALLOWED, "the session token is for another agent"
    )


def agent_allowed(key: ApiKey, slug: str) -> Agent:
    agent = agent_find(workspace=key.workspace, slug=slug)
    if agent is None or (key.allowed_agents and slug not in key.allowed_agents):
        raise ConnectionRefused(
            CloseCode.AGENT,
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
                CloseCode.SECRET_KEY, ErrorCode.SECRET_KEY_REFUSED, rejected.reason
            ) from None
        raise ConnectionRefused(CloseCode.BAD_KEY, ErrorCode.INVALID_KEY, rejected.reason) from None
    if api_key.tokens_only:
        raise ConnectionRefused(
            CloseCode.BAD_KEY,
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
            CloseCode.BAD_KEY,
            ErrorCode.INVALID_TOKEN,
            "the session token is unknown, used or expired",
        )
    binding = TokenBinding(
        agent=redeemed.agent,
        variables=dict(redeemed.variables),
        end_user=redeemed.end_user,
        origin=redeemed.origin,
        page_variables=tuple(redeemed.page_variables),
        agent_version=redeemed.agent_version,
    )
    if binding.origin and origin != binding.origin:
        raise ConnectionRefused(
            CloseCode.ORIGIN,
            ErrorCode.ORIGIN_NOT_ALLOWED,
            "the session token is for another origin",
        )
    if agent_slug and agent_slug != binding.agent.slug:
        raise _token_agent_refused()
    return Access(
        key=minted_by,
        workspace=redeemed.workspace,
        origin=origin,
        agent=binding.agent,
        address=address,
        token=binding,
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
        raise ConnectionRefused(
            CloseCode.ORIGIN, ErrorCode.ORIGIN_NOT_ALLOWED, _origin_refusal(origin)
        )
    agent = agent_allowed(api_key, agent_slug) if agent_slug else None
    return Access(
        key=api_key, workspace=api_key.workspace, origin=origin or "", agent=agent, address=address
    )
