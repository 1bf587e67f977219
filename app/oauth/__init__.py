"""The OAuth 2.1 endpoints agents connect through (``app.oauth.server``): the metadata
(RFC 8414 for the authorization server, RFC 9728 for the API as a protected resource),
registration (RFC 7591), the token endpoint and revocation (RFC 7009), and an introspection
answer about a token (RFC 7662) for the MCP server in front of the API. The consent page is
the dashboard's (``app.dashboard.agent_consent``): an owner signs in there.

Each endpoint is one transaction, committed whatever the answer: a refused replay of a code
or a refresh token revokes its grant, and that must last. They are limited per client address
(``RATE_LIMIT_UNAUTHENTICATED``): they answer anyone. Introspection is the exception: an MCP
server asks it about every request of every agent behind it, from one address, so only its
answers about a token that is not live count against the address (a guesser is slowed as on
the API's 401s; a live token is the API's to count, per grant).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Flask, Response, current_app, jsonify, request

from app.api_terms import RESOURCE_METADATA_PATH
from app.config import settings_of
from app.extensions import db
from app.models.types import utcnow
from app.oauth.server import PUBLIC, S256, authorization_server
from app.services.accounts.agent_access import SCOPES, introspect

oauth = Blueprint("agent_oauth", __name__)
# Apart, for its own limit (see the module's note).
introspection_endpoint = Blueprint("agent_oauth_introspection", __name__)

AUTHORIZATION_METADATA = "/.well-known/oauth-authorization-server"
# The dashboard's consent page, where the authorization endpoint is.
AUTHORIZE_PATH = "/dashboard/connect-agent"


def server_metadata(base_url: str) -> dict[str, Any]:
    """RFC 8414: where each endpoint is and what the server supports."""
    return {
        "issuer": base_url,
        "authorization_endpoint": base_url + AUTHORIZE_PATH,
        "token_endpoint": base_url + "/oauth/token",
        "registration_endpoint": base_url + "/oauth/register",
        "revocation_endpoint": base_url + "/oauth/revoke",
        "introspection_endpoint": base_url + "/oauth/introspect",
        "scopes_supported": list(SCOPES),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": [PUBLIC],
        "revocation_endpoint_auth_methods_supported": [PUBLIC],
        "introspection_endpoint_auth_methods_supported": [PUBLIC],
        "code_challenge_methods_supported": [S256],
        "service_documentation": base_url + "/llms.txt",
    }


def _server() -> Any:
    return current_app.extensions["oauth_server"]


def _committed(response: Response) -> Response:
    db.session.commit()
    response.headers["Cache-Control"] = "no-store"
    return response


@oauth.get(AUTHORIZATION_METADATA)
def authorization_server_metadata() -> Response:
    return jsonify(server_metadata(settings_of(current_app).base_url))


@oauth.get(RESOURCE_METADATA_PATH)
def protected_resource_metadata() -> Response:
    """RFC 9728: the API takes bearer tokens from this authorization server."""
    base = settings_of(current_app).base_url
    return jsonify(
        {
            "resource": base + "/v1/api",
            "authorization_servers": [base],
            "scopes_supported": list(SCOPES),
            "bearer_methods_supported": ["header"],
            "resource_name": "Calendar Booking API",
            "resource_documentation": base + "/llms.txt",
        }
    )


@oauth.post("/oauth/register")
def register() -> Response:
    return _committed(_server().create_endpoint_response("client_registration"))


@oauth.post("/oauth/token")
def token() -> Response:
    return _committed(_server().create_token_response())


@oauth.post("/oauth/revoke")
def revoke() -> Response:
    return _committed(_server().create_endpoint_response("revocation"))


@introspection_endpoint.post("/oauth/introspect")
def introspection() -> Response:
    """RFC 7662's answer about the access token sent, to whoever holds it: the token is its
    own credential, so nothing is told about a token the caller does not have."""
    answer = jsonify(introspect(request.form.get("token"), utcnow()))
    answer.headers["Cache-Control"] = "no-store"
    return answer


def _not_live(response: Response) -> bool:
    """Whether an introspection answer counts against the address: only "not live"."""
    return not (response.get_json(silent=True) or {}).get("active")


def register_oauth(app: Flask, limiter: Any) -> None:
    """The authorization server (``app.extensions["oauth_server"]``, also the consent page's)
    and its endpoints, limited per address."""
    settings = settings_of(app)
    app.extensions["oauth_server"] = authorization_server(
        server_metadata(settings.base_url),
        access_token_seconds=settings.oauth_access_token_seconds,
        refresh_token_days=settings.oauth_refresh_token_days,
    )
    limit = settings.rate_limit_unauthenticated
    limiter.shared_limit(
        lambda: limit, scope="oauth-per-address", key_func=lambda: f"oauth:{request.remote_addr}"
    )(oauth)
    limiter.limit(
        lambda: limit,
        key_func=lambda: f"oauth-introspect:{request.remote_addr}",
        deduct_when=_not_live,
    )(introspection_endpoint)
    app.register_blueprint(oauth)
    app.register_blueprint(introspection_endpoint)
