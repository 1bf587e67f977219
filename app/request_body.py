"""Whole request bodies before any work: a WSGI middleware.

A view authenticates its API key (a pooled database connection, held until the request ends)
before it reads the body. A client sending its body a byte at a time would hold that
connection for as long as it likes, and a few hundred such clients would take every pooled
connection from everyone else. So the body is read here first, before the app runs: slowly if
the client is slow, but holding nothing but its own connection (a greenlet of the gevent
worker). Bodies are small (``MAX_CONTENT_LENGTH``, 1 MiB), so they are kept in memory.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import Any

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class WholeBodyFirst:
    def __init__(self, app: WSGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        stream = environ["wsgi.input"]
        length = environ.get("CONTENT_LENGTH") or ""
        if length.isdigit():
            # Over the limit, the app answers 413 from the header alone, reading nothing.
            if int(length) <= self.limit:
                environ["wsgi.input"] = io.BytesIO(stream.read(int(length)))
        elif environ.get("wsgi.input_terminated"):
            # Chunked: one byte past the limit is enough for the app to answer 413.
            environ["wsgi.input"] = io.BytesIO(stream.read(self.limit + 1))
        return self.app(environ, start_response)
