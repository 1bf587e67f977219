"""The MCP server over HTTP as an OAuth 2.1 protected resource (the MCP authorization spec):
an MCP client that knows only the server's URL is told where to get a token, and a token is
checked before any MCP message is read.

- A request with an API key (``x-calendar-api-key``) passes as before: the API checks the key.
- A request with ``Authorization: Bearer`` passes when the service's introspection answers that
  the token is live (``POST /oauth/introspect``) and was issued for this server (its ``aud``,
  the RFC 8707 resource the client asked for, is this server's URL or the API's, or none);
  otherwise it is answered 401 ``invalid_token``, so the client refreshes or connects again.
  Revoked in the dashboard, a token is refused from the next request. When the service cannot
  say (unreachable, 429, 5xx), the answer is 503 with ``Retry-After``: the token may be fine.
- A request with neither is answered 401 with ``WWW-Authenticate: Bearer resource_metadata=…``,
  where the protected resource metadata (RFC 9728) names this server as the resource and the
  service as its authorization server.

The token is then handed to the API with each call (``app.mcp.server``), which checks it again
and acts as the grant its owner consented to.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from app.api_terms import PERMISSION_LABELS, RESOURCE_METADATA_PATH
from app.client.client import API_KEY_HEADER

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

# The API's path under the service's base URL (the authorization server's).
API_PATH = "/v1/api"
UNSURE = "The service could not be asked about the token just now; try again in a second."


class OAuthGate:
    """ASGI middleware in front of the MCP app: see the module's note. ``resource`` is the MCP
    endpoint's public URL (``…/mcp``), ``authorization_server`` the service's base URL."""

    def __init__(
        self,
        app: App,
        *,
        resource: str,
        authorization_server: str,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.app = app
        self.resource = resource
        self.authorization_server = authorization_server.rstrip("/")
        parts = urlsplit(resource)
        # RFC 9728 §3.1: the metadata of https://host/mcp is at
        # https://host/.well-known/oauth-protected-resource/mcp.
        self.metadata_path = RESOURCE_METADATA_PATH + parts.path.rstrip("/")
        self.metadata_url = f"{parts.scheme}://{parts.netloc}{self.metadata_path}"
        self.http = http or httpx.AsyncClient(timeout=10.0)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] in (self.metadata_path, RESOURCE_METADATA_PATH):
            await _json(send, 200, self.metadata())
            return
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope["headers"]
        }
        if headers.get(API_KEY_HEADER):
            await self.app(scope, receive, send)
            return
        authorization = headers.get("authorization", "")
        if authorization[:7].lower() != "bearer ":
            await self.refuse(send, None)
            return
        live = await self.is_live(authorization[7:].strip())
        if live is None:
            await _json(
                send,
                503,
                {"error": "temporarily_unavailable", "error_description": UNSURE},
                [(b"retry-after", b"1")],
            )
            return
        if not live:
            await self.refuse(send, "invalid_token")
            return
        await self.app(scope, receive, send)

    def metadata(self) -> dict[str, Any]:
        return {
            "resource": self.resource,
            "authorization_servers": [self.authorization_server],
            "scopes_supported": list(PERMISSION_LABELS),
            "bearer_methods_supported": ["header"],
            "resource_name": "Calendar booking (MCP)",
            "resource_documentation": self.authorization_server + "/llms.txt",
        }

    async def is_live(self, token: str) -> bool | None:
        """Whether the token is live and this server's to take; None when the service could
        not say."""
        try:
            answer = await self.http.post(
                self.authorization_server + "/oauth/introspect", data={"token": token}
            )
            found = answer.json() if answer.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None
        if not isinstance(found, dict):
            return None
        return found.get("active") is True and found.get("aud") in (
            None,
            self.resource,
            self.authorization_server + API_PATH,
        )

    async def refuse(self, send: Send, error: str | None) -> None:
        challenge = f'Bearer resource_metadata="{self.metadata_url}"'
        if error:
            challenge += f', error="{error}"'
        description = (
            "The access token is not valid (expired, revoked or unknown)."
            if error
            else "Connect with OAuth (see the resource metadata) or send an API key in the "
            f"{API_KEY_HEADER} header."
        )
        await _json(
            send,
            401,
            {"error": error or "unauthorized", "error_description": description},
            [(b"www-authenticate", challenge.encode())],
        )


async def _json(
    send: Send, status: int, body: dict[str, Any], headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"cache-control", b"no-store"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
