"""``python -m app.mcp``: the MCP server over stdio, for one agent with one key
(``CALENDAR_API_URL``, ``CALENDAR_API_KEY``); ``python -m app.mcp --http --port N``: over
streamable HTTP at ``/mcp``, for many clients, each sending its own key in the
``x-calendar-api-key`` header, or an OAuth access token the service issued
(``Authorization: Bearer``), which is passed on to the API for that call and never kept. A
client that sends neither is told where to connect with OAuth (``app.mcp.oauth_gate``).

Over HTTP the server answers only requests whose ``Host`` header names it, and refuses a
browser's request from another origin (DNS-rebinding protection, the SDK's transport security):
a web page whose name an attacker points at this machine cannot use it. The loopback names (and
the address it listens on) are allowed; the names it is reached by from elsewhere are the
operator's to list (``--allowed-host``, ``--allowed-origin``). The SDK turns the protection on
by itself only when it listens on loopback, so it is always given here."""

from __future__ import annotations

import argparse
import logging
import os
import sys

import uvicorn
from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecuritySettings

from app.client.client import API_KEY_HEADER
from app.mcp.oauth_gate import API_PATH, OAuthGate
from app.mcp.server import BEARER, build_server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m app.mcp", description=__doc__)
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a name clients reach the server by (its Host header), with or without a port;"
        " repeat for more (the loopback names are always allowed)",
    )
    parser.add_argument(
        "--public-url",
        metavar="URL",
        help="the /mcp URL clients reach the server at (OAuth's resource); default"
        " http://HOST:PORT/mcp",
    )
    parser.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a web origin (https://agent.example.com) whose pages may call the server; repeat"
        " for more",
    )
    args = parser.parse_args(argv)
    # httpx logs every request at INFO; the API's own access log already has them.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    base_url = os.environ.get("CALENDAR_API_URL", "").rstrip("/")
    if not base_url:
        sys.exit("CALENDAR_API_URL must be set: the API's base URL, ending in /v1/api")

    if args.http:
        serve_http(base_url, args)
    else:
        key = os.environ.get("CALENDAR_API_KEY")
        if not key:
            sys.exit("CALENDAR_API_KEY must be set for stdio")
        build_server(base_url, lambda ctx: key).run("stdio")


def credential_of(ctx: Context) -> str | None:
    """The caller's API key, else its OAuth access token (as ``Bearer <token>``)."""
    headers = ctx.headers or {}
    if key := headers.get(API_KEY_HEADER):
        return key
    authorization = headers.get("authorization", "")
    if authorization[:7].lower() == "bearer ":
        return BEARER + authorization[7:].strip()
    return None


def serve_http(base_url: str, args: argparse.Namespace) -> None:
    """Streamable HTTP at /mcp behind the OAuth gate, on uvicorn."""
    server = build_server(base_url, credential_of)
    app = server.streamable_http_app(
        stateless_http=True,
        transport_security=transport_security(args.host, args.allowed_host, args.allowed_origin),
        host=args.host,
    )
    host = f"[{args.host}]" if ":" in args.host else args.host
    resource = args.public_url or f"http://{host}:{args.port}/mcp"
    gated = OAuthGate(app, resource=resource, authorization_server=base_url.removesuffix(API_PATH))
    uvicorn.run(gated, host=args.host, port=args.port, log_level="warning")


# What any server here may be called, on any port.
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
_ANY_ADDRESS = ("0.0.0.0", "::", "")


def transport_security(
    listen_host: str, hosts: list[str], origins: list[str]
) -> TransportSecuritySettings:
    """DNS-rebinding protection, on whatever address the server listens: ``Host`` must be a
    loopback name, the address it listens on (unless that is every address), or one of
    ``hosts``; a browser's ``Origin`` one of those over http, or one of ``origins``."""
    names = list(_LOOPBACK)
    if listen_host not in _ANY_ADDRESS and listen_host not in ("localhost", "::1"):
        names.append(f"[{listen_host}]" if ":" in listen_host else listen_host)
    allowed_hosts = [f"{name}:*" for name in names]
    for host in hosts:
        allowed_hosts += [host] if ":" in host.rsplit("]", 1)[-1] else [host, f"{host}:*"]
    allowed_origins = [f"http://{name}:*" for name in names] + list(origins)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
    )


if __name__ == "__main__":
    main()
