"""``python -m app.mcp``: the MCP server over stdio, for one agent with one key
(``CALENDAR_API_URL``, ``CALENDAR_API_KEY``); ``python -m app.mcp --http --port N``: over
streamable HTTP at ``/mcp``, for many clients, each sending its own key in the
``x-calendar-api-key`` header, which is passed on to the API for that call and never kept."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from mcp.server.mcpserver import Context

from app.client.client import API_KEY_HEADER
from app.mcp.server import build_server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m app.mcp", description=__doc__)
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    # httpx logs every request at INFO; the API's own access log already has them.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    base_url = os.environ.get("CALENDAR_API_URL", "").rstrip("/")
    if not base_url:
        sys.exit("CALENDAR_API_URL must be set: the API's base URL, ending in /v1/api")

    if args.http:

        def from_header(ctx: Context) -> str | None:
            return (ctx.headers or {}).get(API_KEY_HEADER)

        server = build_server(base_url, from_header)
        server.run("streamable-http", host=args.host, port=args.port, stateless_http=True)
    else:
        key = os.environ.get("CALENDAR_API_KEY")
        if not key:
            sys.exit("CALENDAR_API_KEY must be set for stdio")
        build_server(base_url, lambda ctx: key).run("stdio")


if __name__ == "__main__":
    main()
