"""Agents connecting with OAuth 2.1 (``app.oauth``, the dashboard's consent page): what an
MCP client does, step by step, against the service, and each security rule the issue names.

The agent is a test client of its own; the owner consents through the signed-in dashboard."""

from __future__ import annotations

import base64
import hashlib
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from sqlalchemy import select, text

from app.extensions import db
from app.models import OAuthCode, OAuthToken
from tests.dashboard_users import agency_user, csrf_token, owner_email, sign_in

CALLBACK = "http://127.0.0.1:33418/callback"
ALL = ["canCheckAvailability", "canGetBookings", "canBook", "canCancel"]
EVENT_TYPES = "/v1/api/calendar/event-types"


def challenge_for(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


@pytest.fixture
def agent(app):
    """The agent's own HTTP client: no dashboard session."""
    return app.test_client()


def register(agent, redirect_uris=(CALLBACK,), **metadata):
    return agent.post(
        "/oauth/register",
        json={
            "client_name": "Helpful Assistant",
            "redirect_uris": list(redirect_uris),
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            **metadata,
        },
    )


def authorize_path(client_id: str, verifier: str, **params: str) -> str:
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": CALLBACK,
        "code_challenge": challenge_for(verifier),
        "code_challenge_method": "S256",
        "state": "st-1",
        "resource": "http://127.0.0.1:8000/mcp",
        **params,
    }
    return "/dashboard/connect-agent?" + urlencode({k: v for k, v in query.items() if v})


def consent(owner, path: str, sub_account_id: int, permissions=ALL, decision="allow"):
    token = csrf_token(owner, path)
    return owner.post(
        path,
        data={
            "csrf_token": token,
            "sub_account_id": str(sub_account_id),
            "permissions": list(permissions),
            "decision": decision,
        },
    )


def exchange(agent, client_id: str, code: str, verifier: str, redirect_uri: str = CALLBACK):
    return agent.post(
        "/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "client_id": client_id,
            "code_verifier": verifier,
        },
    )


def refresh(agent, client_id: str, refresh_token: str):
    return agent.post(
        "/oauth/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": refresh_token,
            "client_id": client_id,
        },
    )


def code_from(answer) -> str:
    assert answer.status_code == 302, answer.get_data(as_text=True)
    location = urlsplit(answer.headers["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == CALLBACK
    query = parse_qs(location.query)
    assert query["state"] == ["st-1"]
    return query["code"][0]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def connect_agent(agent, owner, sub_account_id: int, permissions=ALL) -> tuple[str, dict]:
    """What an MCP client does, with ``owner`` (signed in) allowing ``permissions`` for the
    sub account: the client's id and its first tokens."""
    client_id = register(agent).json["client_id"]
    verifier = secrets.token_urlsafe(48)
    code = code_from(
        consent(owner, authorize_path(client_id, verifier), sub_account_id, permissions)
    )
    tokens = exchange(agent, client_id, code, verifier)
    assert tokens.status_code == 200, tokens.json
    return client_id, tokens.json


@pytest.fixture
def connected(agent, signed_in, tenant):
    """Connect the agent to the tenant with ``permissions`` (default all)."""
    return lambda permissions=ALL: connect_agent(
        agent, signed_in, tenant.sub_account_id, permissions
    )


def on_own_app(make_app, tenant, **config):
    """An app of its own (``config``: its limits), its agent and the agent's access token."""
    app = make_app(**config)
    agent, owner = app.test_client(), app.test_client()
    sign_in(owner, owner_email(tenant))
    _, tokens = connect_agent(agent, owner, tenant.sub_account_id)
    return agent, tokens["access_token"]


def test_the_metadata_says_where_everything_is_and_that_pkce_s256_is_required(agent):
    server = agent.get("/.well-known/oauth-authorization-server").json
    base = server["issuer"]
    assert server["authorization_endpoint"] == base + "/dashboard/connect-agent"
    assert server["token_endpoint"] == base + "/oauth/token"
    assert server["registration_endpoint"] == base + "/oauth/register"
    assert server["revocation_endpoint"] == base + "/oauth/revoke"
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert server["scopes_supported"] == ALL
    resource = agent.get("/.well-known/oauth-protected-resource").json
    assert resource["resource"] == base + "/v1/api"
    assert resource["authorization_servers"] == [base]


def test_a_connected_agent_acts_like_an_api_key_with_the_granted_permissions(
    agent, connected, tenant
):
    _, tokens = connected(["canCheckAvailability", "canGetBookings"])
    assert tokens["token_type"] == "Bearer" and tokens["expires_in"] == 1800
    assert tokens["scope"] == "canCheckAvailability canGetBookings"
    listed = agent.get(EVENT_TYPES, headers=bearer(tokens["access_token"]))
    assert listed.status_code == 200
    assert {t["id"] for t in listed.json} == set(tenant.event_types.values())
    refused = agent.post(
        f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings",
        json={},
        headers=bearer(tokens["access_token"]),
    )
    assert refused.status_code == 403
    assert refused.json["message"] == "API key does not have 'canBook' permission"


def test_a_token_for_one_sub_account_never_sees_another(agent, connected, tenants):
    from tests.factories import make_booking, next_monday, ny

    other = tenants.create()
    theirs = make_booking(other, ny(next_monday(), 10))
    _, tokens = connected()
    answer = agent.get(
        f"/v1/api/calendar/bookings/{theirs.id}", headers=bearer(tokens["access_token"])
    )
    assert answer.status_code == 404


def test_an_unknown_or_garbled_token_gets_the_api_keys_401(agent):
    answer = agent.get(EVENT_TYPES, headers=bearer("cba_not-a-token"))
    assert answer.status_code == 401
    assert answer.json["message"] == "Invalid or inactive API key"


def test_a_refresh_rotates_and_a_replayed_refresh_token_revokes_the_family(agent, connected):
    client_id, first = connected()
    second = refresh(agent, client_id, first["refresh_token"])
    assert second.status_code == 200, second.json
    assert second.json["refresh_token"] != first["refresh_token"]
    assert agent.get(EVENT_TYPES, headers=bearer(second.json["access_token"])).status_code == 200
    # The spent access token ended with its refresh token.
    assert agent.get(EVENT_TYPES, headers=bearer(first["access_token"])).status_code == 401

    replayed = refresh(agent, client_id, first["refresh_token"])
    assert replayed.status_code == 400 and replayed.json["error"] == "invalid_grant"
    assert agent.get(EVENT_TYPES, headers=bearer(second.json["access_token"])).status_code == 401
    assert refresh(agent, client_id, second.json["refresh_token"]).status_code == 400


def test_a_replayed_code_is_refused_and_revokes_what_it_gave(agent, signed_in, tenant):
    client_id = register(agent).json["client_id"]
    verifier = secrets.token_urlsafe(48)
    code = code_from(consent(signed_in, authorize_path(client_id, verifier), tenant.sub_account_id))
    first = exchange(agent, client_id, code, verifier)
    assert first.status_code == 200
    again = exchange(agent, client_id, code, verifier)
    assert again.status_code == 400 and again.json["error"] == "invalid_grant"
    assert agent.get(EVENT_TYPES, headers=bearer(first.json["access_token"])).status_code == 401


def test_pkce_is_required_and_only_s256(agent, signed_in, tenant):
    client_id = register(agent).json["client_id"]
    verifier = secrets.token_urlsafe(48)
    for params in ({"code_challenge": ""}, {"code_challenge_method": "plain"}):
        page = signed_in.get(authorize_path(client_id, verifier, **params))
        assert page.status_code == 400
        assert "Location" not in page.headers
    code = code_from(consent(signed_in, authorize_path(client_id, verifier), tenant.sub_account_id))
    wrong = exchange(agent, client_id, code, secrets.token_urlsafe(48))
    assert wrong.status_code == 400 and wrong.json["error"] == "invalid_grant"
    missing = agent.post(
        "/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": CALLBACK,
            "client_id": client_id,
        },
    )
    assert missing.status_code == 400


def test_redirect_uris_are_matched_exactly_and_never_followed_unverified(agent, signed_in):
    client_id = register(agent).json["client_id"]
    verifier = secrets.token_urlsafe(48)
    for near in (CALLBACK + "/", CALLBACK.upper(), CALLBACK + "?x=1", "https://evil.example/cb"):
        page = signed_in.get(authorize_path(client_id, verifier, redirect_uri=near))
        assert page.status_code == 400, near
        assert "Location" not in page.headers


@pytest.mark.parametrize(
    "uris",
    [["http://agent.example/callback"], ["ftp://127.0.0.1/cb"], ["https://a.example/cb#frag"], []],
)
def test_registration_refuses_redirect_uris_that_are_not_https_or_loopback(agent, uris):
    answer = register(agent, uris)
    assert answer.status_code == 400
    assert answer.json["error"] in ("invalid_redirect_uri", "invalid_client_metadata")


def test_registration_takes_only_public_clients(agent):
    answer = register(agent, token_endpoint_auth_method="client_secret_basic")
    assert answer.status_code == 400
    registered = register(agent)
    assert registered.status_code == 201
    assert registered.json["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in registered.json
    unsaid = agent.post(
        "/oauth/register", json={"client_name": "Terse", "redirect_uris": [CALLBACK]}
    )
    assert unsaid.status_code == 201
    assert unsaid.json["token_endpoint_auth_method"] == "none"


def test_the_consent_page_is_unframable_and_csrf_protected(agent, signed_in, tenant):
    client_id = register(agent).json["client_id"]
    path = authorize_path(client_id, secrets.token_urlsafe(48))
    page = signed_in.get(path)
    assert page.status_code == 200
    assert "Helpful Assistant" in page.get_data(as_text=True)
    assert page.headers["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    assert "form-action 'self' http://127.0.0.1:33418" in page.headers["Content-Security-Policy"]
    forged = signed_in.post(
        path,
        data={"sub_account_id": tenant.sub_account_id, "permissions": ALL, "decision": "allow"},
    )
    assert forged.status_code == 400 and "Location" not in forged.headers
    assert db.session.scalar(select(OAuthCode.id)) is None


def test_only_an_agency_owner_may_consent(app, agent, tenant):
    helper = app.test_client()
    agency_user(tenant, tenant.sub_account_id)
    sign_in(helper, "helper@agency.test")
    client_id = register(agent).json["client_id"]
    assert helper.get(authorize_path(client_id, secrets.token_urlsafe(48))).status_code == 403


def test_denying_sends_the_agent_back_with_access_denied(agent, signed_in, tenant):
    client_id = register(agent).json["client_id"]
    path = authorize_path(client_id, secrets.token_urlsafe(48))
    answer = consent(signed_in, path, tenant.sub_account_id, decision="deny")
    assert answer.status_code == 302
    query = parse_qs(urlsplit(answer.headers["Location"]).query)
    assert query["error"] == ["access_denied"] and query["state"] == ["st-1"]


def test_codes_and_tokens_are_stored_only_as_digests(agent, connected):
    _, tokens = connected()
    stored = db.session.execute(
        text("SELECT access_digest, refresh_digest FROM oauth_tokens")
    ).one()
    assert tokens["access_token"] not in stored and tokens["refresh_token"] not in stored
    assert stored.access_digest == hashlib.sha256(tokens["access_token"].encode()).hexdigest()
    dumped = " ".join(str(row) for row in db.session.execute(text("SELECT * FROM oauth_codes")))
    assert "cba_" not in dumped and len(db.session.scalars(select(OAuthToken)).all()) == 1


def test_the_owner_sees_the_agent_beside_the_api_keys_and_revoking_it_refuses_at_once(
    agent, connected, signed_in, tenant
):
    _, tokens = connected()
    assert agent.get(EVENT_TYPES, headers=bearer(tokens["access_token"])).status_code == 200
    keys_page = f"/dashboard/s/{tenant.sub_account_id}/api-keys"
    page = signed_in.get(keys_page).get_data(as_text=True)
    assert "Connected agents" in page and "Helpful Assistant" in page
    grant_id = db.session.scalar(select(OAuthToken.grant_id))
    revoked = signed_in.post(
        f"{keys_page}/{grant_id}/revoke", data={"csrf_token": csrf_token(signed_in, keys_page)}
    )
    assert revoked.status_code == 302
    answer = agent.get(EVENT_TYPES, headers=bearer(tokens["access_token"]))
    assert answer.status_code == 401
    assert answer.json["message"] == "Invalid or inactive API key"


def test_a_client_revokes_its_refresh_token_and_the_grant_ends(agent, connected):
    client_id, tokens = connected()
    answer = agent.post(
        "/oauth/revoke",
        data={
            "token": tokens["refresh_token"],
            "token_type_hint": "refresh_token",
            "client_id": client_id,
        },
    )
    assert answer.status_code == 200
    assert agent.get(EVENT_TYPES, headers=bearer(tokens["access_token"])).status_code == 401
    assert refresh(agent, client_id, tokens["refresh_token"]).status_code == 400


def test_introspection_says_whether_a_token_is_live(agent, connected):
    _, tokens = connected(["canBook"])
    live = agent.post("/oauth/introspect", data={"token": tokens["access_token"]}).json
    assert live["active"] is True and live["scope"] == "canBook"
    assert agent.post("/oauth/introspect", data={"token": "cba_nope"}).json == {"active": False}


def test_each_connection_counts_against_the_api_keys_rate_limit_of_its_own(make_app, tenant):
    agent, token = on_own_app(make_app, tenant, RATE_LIMIT="2/minute")
    answers = [agent.get(EVENT_TYPES, headers=bearer(token)).status_code for _ in range(3)]
    assert answers == [200, 200, 429]
    # A plain API key of the same sub account has its own count.
    assert agent.get(EVENT_TYPES, headers=tenant.headers()).status_code == 200


def test_a_live_tokens_introspection_never_uses_up_the_addresss_limit(make_app, tenant):
    agent, token = on_own_app(make_app, tenant, RATE_LIMIT_UNAUTHENTICATED="2/minute")
    asked = [agent.post("/oauth/introspect", data={"token": token}) for _ in range(5)]
    assert [a.json["active"] for a in asked] == [True] * 5
    guesses = [agent.post("/oauth/introspect", data={"token": "cba_x"}) for _ in range(3)]
    assert [g.status_code for g in guesses] == [200, 200, 429]


def test_revoking_an_access_token_leaves_its_refresh_token_working(agent, connected):
    client_id, tokens = connected()
    answer = agent.post(
        "/oauth/revoke",
        data={"token": tokens["access_token"], "client_id": client_id},
    )
    assert answer.status_code == 200
    assert agent.get(EVENT_TYPES, headers=bearer(tokens["access_token"])).status_code == 401
    renewed = refresh(agent, client_id, tokens["refresh_token"])
    assert renewed.status_code == 200
    assert agent.get(EVENT_TYPES, headers=bearer(renewed.json["access_token"])).status_code == 200


def test_a_redirect_uri_left_out_of_the_request_is_left_out_of_the_exchange(
    agent, signed_in, tenant
):
    client_id = register(agent).json["client_id"]
    verifier = secrets.token_urlsafe(48)
    path = authorize_path(client_id, verifier, redirect_uri="")
    code = code_from(consent(signed_in, path, tenant.sub_account_id))
    answer = agent.post(
        "/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "client_id": client_id,
            "code_verifier": verifier,
        },
    )
    assert answer.status_code == 200, answer.json


def test_a_refused_bearer_token_is_told_where_the_oauth_metadata_is(agent):
    answer = agent.get(EVENT_TYPES, headers=bearer("cba_gone"))
    assert answer.status_code == 401
    challenge = answer.headers["WWW-Authenticate"]
    assert challenge.startswith('Bearer error="invalid_token", resource_metadata="')
    assert challenge.endswith('/.well-known/oauth-protected-resource"')
    assert (
        "WWW-Authenticate"
        not in agent.get(EVENT_TYPES, headers={"x-calendar-api-key": "x"}).headers
    )


def test_an_oauth_error_is_also_the_services_error_envelope(agent):
    client_id = register(agent).json["client_id"]
    refused = refresh(agent, client_id, "cbr_not-a-token")
    assert refused.status_code == 400
    assert refused.json["error"] == "invalid_grant"
    assert refused.json["statusCode"] == 400 and refused.json["message"]
    unregistered = register(agent, ["http://agent.example/cb"])
    assert unregistered.json["statusCode"] == 400
    assert unregistered.json["message"] == unregistered.json["error_description"]


@pytest.mark.parametrize(
    "body",
    [
        [1, 2],
        "a string",
        {"redirect_uris": [123]},
        {"redirect_uris": CALLBACK},
        {"redirect_uris": [CALLBACK], "client_name": 123},
        {"redirect_uris": [CALLBACK], "grant_types": "authorization_code"},
        {"redirect_uris": [CALLBACK], "contacts": [None]},
        {"redirect_uris": [CALLBACK], "jwks": 5},
    ],
)
def test_registration_metadata_of_the_wrong_shape_is_refused_not_a_500(agent, body):
    answer = agent.post("/oauth/register", json=body)
    assert answer.status_code == 400
    assert answer.json["error"] == "invalid_client_metadata"
    assert answer.json["statusCode"] == 400
