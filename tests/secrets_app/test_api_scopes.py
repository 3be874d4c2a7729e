"""REST API: requests per key (429 with Retry-After), key scopes, keys that made keys, the
safer defaults of new keys, and the audit log. The outsider sees nothing."""

from __future__ import annotations

from typing import Any

import pytest

from secrets_app import scopes
from secrets_app.models import ApiKey, AuditEvent
from tests.concurrency import at_once
from tests.conftest import api_client
from tests.factories import Tenant


def test_requests_per_key_are_limited_with_retry_after(
    owner_api: Any, outsider_api: Any, settings: Any
) -> None:
    settings.API_REQUESTS_PER_MINUTE = 5
    answers = [owner_api.get("/api/v1/secrets").status_code for _ in range(8)]
    assert answers == [200] * 5 + [429] * 3
    refused = owner_api.get("/api/v1/agents")
    assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= 60
    assert refused.json()["error"]["code"] == "throttled"
    assert outsider_api.get("/api/v1/secrets").status_code == 200  # its own budget


def test_guessing_keys_from_one_address_is_refused(db: None, settings: Any) -> None:
    settings.API_REQUESTS_PER_MINUTE = 3
    guesser = api_client("sk_guess")
    answers = [guesser.get("/api/v1/secrets").status_code for _ in range(5)]
    assert answers == [401, 401, 401, 429, 429]


def _key(api: Any, **body: Any) -> Any:
    return api.post("/api/v1/keys", {"kind": "secret", **body}, format="json")


def test_a_key_without_the_keys_scope_cannot_make_keys(owner: Tenant, owner_api: Any) -> None:
    made = _key(owner_api, label="ci")
    assert made.status_code == 201
    assert made.json()["scopes"] == scopes.DEFAULT and "keys" not in made.json()["scopes"]
    ci = api_client(made.json()["key"])
    refused = _key(ci)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "missing_scope"
    assert ci.post(f"/api/v1/keys/{made.json()['id']}/roll", {}, format="json").status_code == 403
    assert ci.get("/api/v1/agents").status_code == 200


def test_a_key_grants_only_scopes_it_has(owner: Tenant, owner_api: Any) -> None:
    limited = api_client(_key(owner_api, scopes=["keys", "agents"]).json()["key"])
    refused = _key(limited, scopes=["secrets"])
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "missing_scope"
    assert "only give scopes it holds itself; this key lacks secrets" in refused.text
    assert _key(limited, scopes=["agents"]).status_code == 201


def test_keys_record_who_made_them_and_revoking_a_key_revokes_its_offspring(
    owner: Tenant, owner_api: Any
) -> None:
    parent = _key(owner_api, scopes=["keys", "secrets"]).json()
    child = _key(api_client(parent["key"]), scopes=["secrets"]).json()
    assert child["created_by_key"] == parent["display"]
    owner_api.post(f"/api/v1/keys/{parent['id']}/revoke", format="json")
    assert ApiKey.objects.get(pk=child["id"]).status() == "revoked"
    assert api_client(child["key"]).get("/api/v1/secrets").status_code == 401


def test_new_publishable_keys_take_no_inline_config_or_code(owner_api: Any) -> None:
    body = owner_api.post("/api/v1/keys", {"kind": "publishable"}, format="json").json()
    assert body["allow_inline_config"] is False and body["allow_inline_tool_code"] is False
    changed = owner_api.patch(
        f"/api/v1/keys/{body['id']}", {"allow_inline_tool_code": True, "tokens_only": True},
        format="json",
    ).json()  # fmt: skip
    assert changed["allow_inline_tool_code"] is True and changed["tokens_only"] is True


def test_changes_through_the_api_are_audited(owner: Tenant, owner_api: Any) -> None:
    owner_api.post(
        "/api/v1/secrets", {"name": "SHOP_KEY", "value": "s3cr3t-v4lue", "allowed_hosts": []},
        format="json", REMOTE_ADDR="192.0.2.44",
    )  # fmt: skip
    event = AuditEvent.objects.get(workspace=owner.workspace, action="secret.created")
    assert event.actor_key is not None and event.actor_key.kind == "secret"
    assert event.address == "192.0.2.44" and event.target == "SHOP_KEY"
    listed = owner_api.get("/api/v1/audit-events").json()["results"]
    assert listed[0]["action"] == "secret.created"
    assert "s3cr3t-v4lue" not in str(listed)


@pytest.mark.parametrize(
    ("method", "path"),
    [("get", "/api/v1/audit-events"), ("get", "/api/v1/keys"), ("get", "/api/v1/secrets")],
)
def test_the_outsider_sees_nothing(
    owner: Tenant, owner_api: Any, outsider_api: Any, method: str, path: str
) -> None:
    owner_api.post("/api/v1/secrets", {"name": "SHOP_KEY", "value": "v"}, format="json")
    body = getattr(outsider_api, method)(path).json()
    assert "SHOP_KEY" not in str(body) and "owner@example.com" not in str(body)


# ---------------------------------------------------------------- no key grows another


def _refused_for_scope(response: Any) -> bool:
    return response.status_code == 403 and response.json()["error"]["code"] == "missing_scope"


def _active_keys(tenant: Tenant) -> int:
    return sum(
        1 for key in ApiKey.objects.filter(workspace=tenant.workspace) if key.status() == "active"
    )


def test_rolling_never_gives_more_than_the_roller_holds(owner: Tenant, owner_api: Any) -> None:
    keys_only = _key(owner_api, scopes=["keys"]).json()
    target = _key(owner_api, label="ci").json()  # the default scopes
    roller = api_client(keys_only["key"])
    before = _active_keys(owner)
    for victim in (target["id"], ApiKey.objects.get(label="server").pk):  # ...and the owner's
        refused = roller.post(f"/api/v1/keys/{victim}/roll", {}, format="json")
        assert _refused_for_scope(refused), refused.content
        assert "this key lacks secrets, agents," in refused.json()["error"]["message"]
    assert _active_keys(owner) == before  # nothing made, nothing expired
    assert api_client(target["key"]).get("/api/v1/agents").status_code == 200
    # Beside it: a key that holds every scope it rolls gets the same scopes.
    rolled = owner_api.post(f"/api/v1/keys/{target['id']}/roll", {}, format="json")
    assert rolled.status_code == 201 and rolled.json()["scopes"] == target["scopes"]
    assert api_client(rolled.json()["key"]).get("/api/v1/agents").status_code == 200
    assert roller.post(f"/api/v1/keys/{keys_only['id']}/roll", {}, format="json").status_code == 201


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_rolls_at_the_same_instant_escalate_nothing_and_make_one_successor(
    owner: Tenant, owner_api: Any
) -> None:
    keys_only = _key(owner_api, scopes=["keys"]).json()["key"]
    target = _key(owner_api, label="ci").json()
    before = _active_keys(owner)
    answers = at_once(
        lambda i: api_client(keys_only).post(
            f"/api/v1/keys/{target['id']}/roll", {}, format="json"
        ),
        8,
    )
    assert all(_refused_for_scope(answer) for answer in answers)
    assert _active_keys(owner) == before
    # The owner's key rolls it eight times at once: one successor, seven clear refusals.
    answers = at_once(
        lambda i: api_client(owner.secret_key).post(
            f"/api/v1/keys/{target['id']}/roll", {}, format="json"
        ),
        8,
    )
    codes = sorted(answer.status_code for answer in answers)
    assert codes == [201] + [400] * 7, codes
    assert ApiKey.objects.filter(rolled_from_id=target["id"]).count() == 1


def test_patching_a_key_never_adds_scopes_the_caller_lacks(owner: Tenant, owner_api: Any) -> None:
    limited = _key(owner_api, scopes=["keys", "agents"]).json()
    other = _key(owner_api, scopes=["agents"]).json()
    caller = api_client(limited["key"])
    for key_id in (limited["id"], other["id"]):  # its own, and another
        refused = caller.patch(
            f"/api/v1/keys/{key_id}", {"scopes": ["keys", "agents", "secrets"]}, format="json"
        )
        assert _refused_for_scope(refused), refused.content
        assert refused.json()["error"]["message"].endswith("this key lacks secrets")
    assert ApiKey.objects.get(pk=limited["id"]).scopes == ["keys", "agents"]
    assert ApiKey.objects.get(pk=other["id"]).scopes == ["agents"]
    assert api_client(limited["key"]).get("/api/v1/secrets").status_code == 403
    # Within what it holds, it changes keys as before.
    narrowed = caller.patch(f"/api/v1/keys/{other['id']}", {"scopes": []}, format="json")
    assert narrowed.status_code == 200 and narrowed.json()["scopes"] == []
    labelled = caller.patch(f"/api/v1/keys/{limited['id']}", {"label": "ops"}, format="json")
    assert labelled.status_code == 200 and labelled.json()["label"] == "ops"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_key_narrowed_while_it_makes_keys_grants_only_what_it_still_holds(
    owner: Tenant, owner_api: Any
) -> None:
    wide = _key(owner_api, scopes=["keys", "agents", "secrets"]).json()

    def act(index: int) -> Any:
        if index == 0:
            return api_client(owner.secret_key).patch(
                f"/api/v1/keys/{wide['id']}", {"scopes": ["keys", "agents"]}, format="json"
            )
        return _key(api_client(wide["key"]), scopes=["secrets"])

    answers = at_once(act, 6)
    assert answers[0].status_code == 200
    made = [a.json() for a in answers[1:] if a.status_code == 201]
    assert all(a.status_code in (201, 403) for a in answers[1:])
    # Every key made holds secrets only if it was made before its maker lost it.
    narrowed_at = AuditEvent.objects.get(action="key.updated", target=wide["display"]).created_at
    for key in made:
        assert ApiKey.objects.get(pk=key["id"]).created_at <= narrowed_at
    assert _refused_for_scope(_key(api_client(wide["key"]), scopes=["secrets"]))


# ---------------------------------------------------------------- no key disables a wider one


def _narrow_relabel_revoke(api: Any, key_id: int) -> list[Any]:
    return [
        api.patch(f"/api/v1/keys/{key_id}", {"scopes": []}, format="json"),
        api.patch(f"/api/v1/keys/{key_id}", {"label": "pwned"}, format="json"),
        api.post(f"/api/v1/keys/{key_id}/revoke", format="json"),
    ]


def test_a_keys_only_key_cannot_narrow_relabel_or_revoke_a_wider_key(
    owner: Tenant, owner_api: Any
) -> None:
    wide = _key(owner_api, label="big", scopes=["agents", "secrets", "sessions:read"]).json()
    keys_only = api_client(_key(owner_api, scopes=["keys"]).json()["key"])
    server = ApiKey.objects.get(workspace=owner.workspace, label="server")
    for victim in (wide["id"], server.pk):
        for refused in _narrow_relabel_revoke(keys_only, victim):
            assert _refused_for_scope(refused), refused.content
            assert "keys whose scopes it holds itself; this key lacks" in refused.text
    kept = ApiKey.objects.get(pk=wide["id"])
    assert (kept.label, kept.scopes, kept.status()) == ("big", wide["scopes"], "active")
    assert api_client(wide["key"]).get("/api/v1/secrets").status_code == 200
    assert api_client(owner.secret_key).get("/api/v1/keys").status_code == 200
    assert not AuditEvent.objects.filter(target=wide["display"], action="key.revoked").exists()
    # Beside it: a key holding every scope of the other one changes and revokes it.
    for done in _narrow_relabel_revoke(owner_api, wide["id"]):
        assert done.status_code == 200, done.content
    assert api_client(wide["key"]).get("/api/v1/secrets").status_code == 401


def test_a_key_still_narrows_and_revokes_itself_and_keys_within_its_scopes(
    owner_api: Any,
) -> None:
    mine = _key(owner_api, scopes=["keys", "agents"]).json()
    caller = api_client(mine["key"])
    narrower = _key(owner_api, scopes=["agents"]).json()
    publishable = owner_api.post("/api/v1/keys", {"kind": "publishable"}, format="json").json()
    for key_id in (narrower["id"], publishable["id"]):
        relabelled = caller.patch(f"/api/v1/keys/{key_id}", {"label": "x"}, format="json")
        assert relabelled.status_code == 200
        assert caller.post(f"/api/v1/keys/{key_id}/revoke", format="json").status_code == 200
    narrowed = caller.patch(f"/api/v1/keys/{mine['id']}", {"scopes": ["keys"]}, format="json")
    assert narrowed.status_code == 200 and narrowed.json()["scopes"] == ["keys"]
    revoked = caller.post(f"/api/v1/keys/{mine['id']}/revoke", format="json")
    assert revoked.status_code == 200 and revoked.json()["status"] == "revoked"
    assert caller.get("/api/v1/keys").status_code == 401


def test_a_key_cannot_revoke_its_wider_maker_and_so_itself(owner: Tenant, owner_api: Any) -> None:
    maker = _key(owner_api, label="full", scopes=["keys", "agents"]).json()
    made = _key(api_client(maker["key"]), scopes=["keys"]).json()
    refused = api_client(made["key"]).post(f"/api/v1/keys/{maker['id']}/revoke", format="json")
    assert _refused_for_scope(refused) and refused.json()["error"]["message"].endswith("agents")
    assert api_client(maker["key"]).get("/api/v1/agents").status_code == 200
    assert api_client(made["key"]).get("/api/v1/keys").status_code == 200


def test_revoking_a_narrowed_key_cannot_take_down_wider_keys_it_made(owner_api: Any) -> None:
    """Revoking reaches every key the revoked one made: the caller holds their scopes too."""
    parent = _key(owner_api, scopes=["keys", "secrets"]).json()
    child = _key(api_client(parent["key"]), scopes=["secrets"]).json()
    owner_api.patch(f"/api/v1/keys/{parent['id']}", {"scopes": ["keys"]}, format="json")
    caller = api_client(_key(owner_api, scopes=["keys"]).json()["key"])
    refused = caller.post(f"/api/v1/keys/{parent['id']}/revoke", format="json")
    assert _refused_for_scope(refused) and refused.json()["error"]["message"].endswith("secrets")
    assert ApiKey.objects.get(pk=child["id"]).status() == "active"
    assert ApiKey.objects.get(pk=parent["id"]).status() == "active"


def _self_revoke_setup(owner_api: Any) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """A makes C as wide as itself, then narrows itself below C."""
    maker = _key(owner_api, scopes=["keys", "secrets"]).json()
    caller = api_client(maker["key"])
    made = _key(caller, scopes=["keys", "secrets"])
    assert made.status_code == 201
    narrowed = caller.patch(f"/api/v1/keys/{maker['id']}", {"scopes": ["keys"]}, format="json")
    assert narrowed.status_code == 200
    return maker, made.json(), caller


def test_a_narrowed_key_revoking_itself_cannot_take_down_a_wider_key_it_made(
    owner: Tenant, owner_api: Any
) -> None:
    maker, made, caller = _self_revoke_setup(owner_api)
    refused = caller.post(f"/api/v1/keys/{maker['id']}/revoke", format="json")
    assert _refused_for_scope(refused), refused.content
    message = refused.json()["error"]["message"]
    assert made["display"] in message and message.endswith("this key lacks secrets")
    assert ApiKey.objects.get(pk=made["id"]).status() == "active"
    assert ApiKey.objects.get(pk=maker["id"]).status() == "active"
    assert api_client(made["key"]).get("/api/v1/secrets").status_code == 200
    assert not AuditEvent.objects.filter(action="key.revoked").exists()
    # Beside it: once the wider key is gone (the owner revokes it), the key revokes itself.
    assert owner_api.post(f"/api/v1/keys/{made['id']}/revoke", format="json").status_code == 200
    revoked = caller.post(f"/api/v1/keys/{maker['id']}/revoke", format="json")
    assert revoked.status_code == 200 and revoked.json()["status"] == "revoked"


def test_a_key_revoking_itself_takes_down_the_keys_it_made_within_its_scopes(
    owner_api: Any,
) -> None:
    maker = _key(owner_api, scopes=["keys", "secrets"]).json()
    caller = api_client(maker["key"])
    made = _key(caller, scopes=["secrets"]).json()
    revoked = caller.post(f"/api/v1/keys/{maker['id']}/revoke", format="json")
    assert revoked.status_code == 200
    assert api_client(made["key"]).get("/api/v1/secrets").status_code == 401
    cascade = AuditEvent.objects.get(action="key.revoked", target=made["display"])
    assert cascade.details == {"because": f"made by {maker['display']}"}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_narrowed_key_racing_to_revoke_itself_never_takes_down_a_wider_key(
    owner: Tenant, owner_api: Any
) -> None:
    maker, made, _caller = _self_revoke_setup(owner_api)
    answers = at_once(
        lambda _i: api_client(maker["key"]).post(
            f"/api/v1/keys/{maker['id']}/revoke", format="json"
        ),
        6,
    )
    assert all(_refused_for_scope(answer) for answer in answers), [a.content for a in answers]
    assert ApiKey.objects.get(pk=made["id"]).status() == "active"
    assert ApiKey.objects.get(pk=maker["id"]).status() == "active"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_keys_only_keys_racing_to_disable_a_wider_key_all_fail(
    owner: Tenant, owner_api: Any
) -> None:
    wide = _key(owner_api, label="big", scopes=["agents", "secrets"]).json()
    attackers = [_key(owner_api, scopes=["keys"]).json()["key"] for _ in range(3)]

    def attack(index: int) -> Any:
        api = api_client(attackers[index % 3])
        return _narrow_relabel_revoke(api, wide["id"])[index % 3]

    answers = at_once(attack, 9)
    assert all(_refused_for_scope(answer) for answer in answers), [a.content for a in answers]
    kept = ApiKey.objects.get(pk=wide["id"])
    assert (kept.label, kept.scopes, kept.status()) == ("big", wide["scopes"], "active")
    # The owner's key, racing the same way, revokes it once; the rest see it revoked.
    answers = at_once(
        lambda i: api_client(owner.secret_key).post(
            f"/api/v1/keys/{wide['id']}/revoke", format="json"
        ),
        4,
    )
    assert [a.status_code for a in answers] == [200] * 4
    assert AuditEvent.objects.filter(target=wide["display"], action="key.revoked").count() == 1
