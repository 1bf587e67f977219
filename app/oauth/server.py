"""The OAuth 2.1 authorization server agents connect through, built on Authlib: what each
protocol step stores and looks up is ``app.services.accounts.agent_access``'s; here it is
adapted to Authlib's interfaces and configured to OAuth 2.1's rules:

- authorization code with PKCE, ``S256`` only, required of every client (all are public);
- redirect URIs matched exactly; no implicit grant, no password grant;
- short-lived access tokens (``OAUTH_ACCESS_TOKEN_SECONDS``) and rotating refresh tokens
  (``OAUTH_REFRESH_TOKEN_DAYS``);
- clients register themselves (RFC 7591) and revoke their tokens (RFC 7009).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import timedelta
from typing import Any

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import (
    AuthorizationCodeMixin,
    ClientMixin,
    InvalidRequestError,
    TokenMixin,
    grants,
)
from authlib.oauth2.rfc6749.util import scope_to_list
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7591 import ClientRegistrationEndpoint
from authlib.oauth2.rfc7591.errors import InvalidClientMetadataError, InvalidRedirectURIError
from authlib.oauth2.rfc7636 import CodeChallenge

from app.models import ApiKey, OAuthClient, OAuthCode, OAuthToken
from app.models.types import utcnow
from app.services.accounts.agent_access import (
    CLIENT_ID_PREFIX,
    REDIRECT_URIS_MAX,
    SCOPES,
    find_client,
    find_token,
    keep_code,
    keep_tokens,
    new_access_token,
    new_refresh_token,
    redirect_uri_problem,
    register_client,
    revoke_token,
    spend_code,
    spend_refresh_token,
    take_code,
    take_refresh_token,
)
from app.services.common.tokens import new_token

GRANT_TYPES = ("authorization_code", "refresh_token")
PUBLIC = "none"
S256 = "S256"


class Client(ClientMixin):
    """A registered client as Authlib asks about it."""

    def __init__(self, row: OAuthClient) -> None:
        self.row = row

    def get_client_id(self) -> str:
        return self.row.client_id

    def get_default_redirect_uri(self) -> str:
        """The one registered URI; with several, none ("": the request must name one)."""
        uris = self.row.redirect_uris
        return uris[0] if len(uris) == 1 else ""

    def get_allowed_scope(self, scope: Collection[str] | str) -> str:
        if not scope:
            return ""
        return " ".join(s for s in scope_to_list(scope) or [] if s in SCOPES)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.row.redirect_uris  # exactly, as registered

    def check_client_secret(self, client_secret: str) -> bool:
        return False  # public clients have none

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == PUBLIC

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in GRANT_TYPES


class Code(AuthorizationCodeMixin):
    """An authorization code as Authlib's code grant and PKCE read it."""

    def __init__(self, row: OAuthCode) -> None:
        self.row = row
        self.code_challenge = row.code_challenge
        self.code_challenge_method = row.code_challenge_method

    def get_redirect_uri(self) -> str:
        return self.row.redirect_uri or ""

    def get_scope(self) -> str:
        return self.row.scope


class Token(TokenMixin):
    """A token row as Authlib's refresh grant and revocation read it; ``plain`` is the value
    presented (access or refresh token)."""

    def __init__(self, row: OAuthToken, plain: str = "") -> None:
        self.row = row
        self.plain = plain

    def check_client(self, client: ClientMixin) -> bool:
        return isinstance(client, Client) and self.row.client_id == client.row.id

    def get_scope(self) -> str:
        return self.row.scope

    def get_expires_in(self) -> int:
        return int((self.row.access_expires_at - self.row.created_at).total_seconds())

    def is_revoked(self) -> bool:
        return self.row.revoked_at is not None

    def is_expired(self) -> bool:
        return self.row.access_expires_at <= utcnow()


class S256CodeChallenge(CodeChallenge):
    """PKCE required, with ``S256`` only: an authorization request without a challenge, or
    with ``plain``, is refused."""

    DEFAULT_CODE_CHALLENGE_METHOD = S256
    SUPPORTED_CODE_CHALLENGE_METHOD = [S256]

    def validate_code_challenge(self, grant: Any, redirect_uri: str) -> None:
        data = grant.request.payload.data
        if not data.get("code_challenge"):
            raise InvalidRequestError("PKCE is required: send code_challenge (S256).")
        if data.get("code_challenge_method") != S256:
            raise InvalidRequestError("code_challenge_method must be S256.")
        super().validate_code_challenge(grant, redirect_uri)


class CodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = [PUBLIC]

    def save_authorization_code(self, code: str, request: Any) -> None:
        data = request.payload.data
        client: Client = request.client
        keep_code(
            code,
            client=client.row,
            grant=request.user,
            redirect_uri=request.payload.redirect_uri,
            code_challenge=data["code_challenge"],
            code_challenge_method=data["code_challenge_method"],
            resource=data.get("resource"),
            now=utcnow(),
        )

    def query_authorization_code(self, code: str, client: ClientMixin) -> Code | None:
        assert isinstance(client, Client)  # the server's query_client makes them
        row = take_code(code, client.row, utcnow())
        return Code(row) if row is not None else None

    def delete_authorization_code(self, authorization_code: AuthorizationCodeMixin) -> None:
        assert isinstance(authorization_code, Code)  # query_authorization_code's
        spend_code(authorization_code.row, utcnow())

    def authenticate_user(self, authorization_code: AuthorizationCodeMixin) -> ApiKey:
        assert isinstance(authorization_code, Code)  # query_authorization_code's
        return authorization_code.row.grant


class RefreshGrant(grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = [PUBLIC]
    INCLUDE_NEW_REFRESH_TOKEN = True  # rotation: every refresh returns a new refresh token

    # Authlib's stub says a token is always returned; None is its documented refusal.
    def authenticate_refresh_token(self, refresh_token: str) -> Token | None:  # type: ignore[override]
        client = self.request.client
        assert isinstance(client, Client)  # authenticated before, by the server's query_client
        row = take_refresh_token(refresh_token, client.row, utcnow())
        return Token(row, refresh_token) if row is not None else None

    def authenticate_user(self, refresh_token: TokenMixin) -> ApiKey:
        assert isinstance(refresh_token, Token)  # authenticate_refresh_token's
        return refresh_token.row.grant

    def revoke_old_credential(self, refresh_token: TokenMixin) -> None:
        assert isinstance(refresh_token, Token)  # authenticate_refresh_token's
        spend_refresh_token(refresh_token.row, utcnow())


class Revocation(RevocationEndpoint):
    CLIENT_AUTH_METHODS = [PUBLIC]

    def query_token(self, token_string: str, token_type_hint: str | None) -> Token | None:
        row = find_token(token_string)
        return Token(row, token_string) if row is not None else None

    def revoke_token(self, token: Token, request: Any) -> None:
        revoke_token(token.row, token.plain, utcnow())


# RFC 7591 §2's metadata by the JSON type it has.
_LIST_CLAIMS = frozenset({"redirect_uris", "grant_types", "response_types", "contacts"})
_TEXT_CLAIMS = frozenset(
    {
        "client_name",
        "client_uri",
        "logo_uri",
        "scope",
        "tos_uri",
        "policy_uri",
        "jwks_uri",
        "software_id",
        "software_version",
        "token_endpoint_auth_method",
    }
)


class Registration(ClientRegistrationEndpoint):
    """Open registration (RFC 7591 §3): an MCP client registers itself with no prior
    credential. What it may then do still needs an owner's consent."""

    def __init__(self, metadata: dict[str, Any]) -> None:
        super().__init__()
        self._metadata = metadata

    def authenticate_token(self, request: Any) -> bool:
        return True

    def get_server_metadata(self) -> dict[str, Any]:
        return self._metadata

    def extract_client_metadata(self, request: Any) -> dict[str, Any]:
        """Authlib's claims, after what its claims classes assume: a JSON object, and lists
        of strings where RFC 7591 has lists, text where it has text, an object for ``jwks``
        (else they fail, a 500, instead of refusing the metadata)."""
        data = request.payload.data
        if not isinstance(data, dict):
            raise InvalidClientMetadataError("Send the client's metadata as a JSON object.")
        for name, value in data.items():
            if name in _LIST_CLAIMS:
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise InvalidClientMetadataError(f"{name} must be a list of strings.")
            elif name in _TEXT_CLAIMS and not isinstance(value, str):
                raise InvalidClientMetadataError(f"{name} must be a string.")
            elif name == "jwks" and not isinstance(value, dict):
                raise InvalidClientMetadataError("jwks must be a JSON object.")
        return dict(super().extract_client_metadata(request))

    def generate_client_id(self, request: Any) -> str:
        return CLIENT_ID_PREFIX + new_token()

    def generate_client_info(self, request: Any) -> dict[str, Any]:
        # Public clients: no secret to issue.
        return {
            "client_id": self.generate_client_id(request),
            "client_id_issued_at": int(utcnow().timestamp()),
            "token_endpoint_auth_method": PUBLIC,
        }

    def save_client(
        self, client_info: dict[str, Any], client_metadata: dict[str, Any], request: Any
    ) -> OAuthClient:
        uris = client_metadata.get("redirect_uris") or []
        if not uris or len(uris) > REDIRECT_URIS_MAX:
            raise InvalidRedirectURIError(f"Send 1 to {REDIRECT_URIS_MAX} redirect_uris.")
        for uri in uris:
            if (problem := redirect_uri_problem(uri)) is not None:
                raise InvalidRedirectURIError(f"{uri!r} {problem}.")
        # As sent: left out, it is registered as public (and the answer says so), not as
        # RFC 7591's default client_secret_basic, which needs a secret no client here keeps.
        method = request.payload.data.get("token_endpoint_auth_method") or PUBLIC
        if method != PUBLIC:
            raise InvalidClientMetadataError("token_endpoint_auth_method must be none.")
        if not set(client_metadata.get("grant_types", GRANT_TYPES)) <= set(GRANT_TYPES):
            raise InvalidClientMetadataError("grant_types: authorization_code, refresh_token.")
        if set(client_metadata.get("response_types", ["code"])) != {"code"}:
            raise InvalidClientMetadataError("response_types must be [code].")
        return register_client(
            client_id=client_info["client_id"],
            name=client_metadata.get("client_name"),
            redirect_uris=uris,
            client_uri=client_metadata.get("client_uri"),
            now=utcnow(),
        )


class AgentAuthorizationServer(AuthorizationServer):
    """Authlib's server whose error answers are also the service's envelope: RFC 6749's
    ``error`` and ``error_description`` (what OAuth clients read) with ``statusCode`` and
    ``message`` (what every other error of the service carries). An error sent back to the
    client's redirect URI stays a redirect."""

    def handle_error_response(self, request: Any, error: Any) -> Any:
        status, body, headers = error(self.get_error_uri(request, error))
        if isinstance(body, dict):
            body = {
                **body,
                "statusCode": status,
                "message": body.get("error_description") or body["error"],
            }
        return self.handle_response(status, body, headers)


def _query_client(client_id: str) -> Client | None:
    row = find_client(client_id)
    return Client(row) if row is not None else None


def _resource_of(request: Any) -> str | None:
    """The RFC 8707 resource a pair is issued for: its code's, or the refreshed pair's."""
    code: Code | None = getattr(request, "authorization_code", None)
    if code is not None:
        return code.row.resource
    refreshed: Token | None = getattr(request, "refresh_token", None)
    return refreshed.row.resource if refreshed is not None else None


def authorization_server(
    metadata: dict[str, Any], *, access_token_seconds: int, refresh_token_days: int
) -> AuthorizationServer:
    """The server, its grants and endpoints, with tokens from ``agent_access``."""

    def save_token(token: dict[str, Any], request: Any) -> None:
        """Keep the pair just issued (by a code or a refresh), as digests."""
        client: Client = request.client
        keep_tokens(
            token,
            client=client.row,
            grant=request.user,
            resource=_resource_of(request),
            refresh_lifetime=timedelta(days=refresh_token_days),
            now=utcnow(),
        )

    server = AgentAuthorizationServer(query_client=_query_client, save_token=save_token)
    server.register_token_generator(
        "default",
        BearerTokenGenerator(
            lambda **_: new_access_token(),
            lambda **_: new_refresh_token(),
            lambda client, grant_type: access_token_seconds,
        ),
    )
    server.scopes_supported = list(SCOPES)
    server.register_grant(CodeGrant, [S256CodeChallenge(required=True)])
    server.register_grant(RefreshGrant)
    server.register_endpoint(Revocation)
    # Authlib takes any endpoint instance; its stub names only the token endpoints' base.
    server.register_endpoint(Registration(metadata))  # type: ignore[arg-type]
    return server
