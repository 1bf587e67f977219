"""A calendar feed of the test's own: an HTTP server on a free loopback port, in the test
process, serving one iCalendar file as a feed host does (``ETag`` and ``Last-Modified``, and
``304`` to a matching ``If-None-Match``/``If-Modified-Since``), and keeping every request.

``answer`` changes what it serves instead: a status (404, 500 …), ``"html"`` (a sign-in page),
``"drip"`` (the file one byte every ``drip_seconds``), ``"drip headers"`` (the status line
and headers so, endlessly: each byte arrives well within any read timeout), or ``"plain"`` (the file with neither
validator, as some hosts serve it)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler

from tests.servers import serving_in_thread


@dataclass(frozen=True)
class FeedRequest:
    path: str
    headers: dict[str, str]
    status: int


class Feed:
    def __init__(self) -> None:
        self.body = b""
        self.modified = 1_900_000_000.0  # Last-Modified: a fixed instant, one second per version
        self.answer: int | str = 200
        self.drip_seconds = 1.0
        self.requests: list[FeedRequest] = []
        self.in_flight = 0  # requests being answered now
        self.most_in_flight = 0  # the most ever answered at once
        self.lock = threading.Lock()
        self.url = ""

    def serve(self, ics: str | bytes) -> None:
        """Serve ``ics`` from now on (a new version: new ETag and Last-Modified)."""
        with self.lock:
            self.body = ics.encode() if isinstance(ics, str) else ics
            self.modified += 1

    @property
    def etag(self) -> str:
        return '"' + hashlib.sha256(self.body).hexdigest()[:16] + '"'

    @property
    def last_modified(self) -> str:
        return formatdate(self.modified, usegmt=True)

    def statuses(self) -> list[int]:
        with self.lock:
            return [r.status for r in self.requests]


@contextmanager
def feed_server(path: str = "/calendar/secret-address/basic.ics") -> Iterator[Feed]:
    feed = Feed()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            with feed.lock:
                answer, body = feed.answer, feed.body
                etag, modified = feed.etag, feed.last_modified
                feed.in_flight += 1
                feed.most_in_flight = max(feed.most_in_flight, feed.in_flight)
            self.headers_seen = headers
            try:
                self._answer(answer, headers, body, etag, modified)
            finally:
                with feed.lock:
                    feed.in_flight -= 1

        def _record(self, status: int) -> None:
            """The request and its answer, recorded before the answer is sent: a client that
            has read the answer finds it recorded."""
            with feed.lock:
                feed.requests.append(FeedRequest(self.path, self.headers_seen, status))

        def _answer(self, answer, headers, body, etag, modified) -> int:
            if self.path != path:
                return self._send(404, b"not here", "text/plain")
            if isinstance(answer, int) and answer != 200:
                return self._send(answer, b"no", "text/plain")
            if answer == "html":
                page = b"<!DOCTYPE html><html><body><form>Sign in</form></body></html>"
                return self._send(200, page, "text/html; charset=utf-8")
            validators = {} if answer == "plain" else {"ETag": etag, "Last-Modified": modified}
            if validators and (
                headers.get("if-none-match") == etag or headers.get("if-modified-since") == modified
            ):
                return self._send(304, b"", None, validators)
            if answer == "drip":
                return self._drip(body)
            if answer == "drip headers":
                return self._drip_headers()
            return self._send(200, body, "text/calendar; charset=utf-8", validators)

        def _send(self, status, body, kind, extra=None) -> int:
            self._record(status)
            self.send_response(status)
            if kind:
                self.send_header("Content-Type", kind)
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            if status != 304:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if status != 304:
                self.wfile.write(body)
            return status

        def _drip(self, body: bytes) -> int:
            self._record(200)
            self.send_response(200)
            self.send_header("Content-Type", "text/calendar")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                for i in range(len(body)):
                    self.wfile.write(body[i : i + 1])
                    self.wfile.flush()
                    time.sleep(feed.drip_seconds)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return 200

        def _drip_headers(self) -> int:
            self._record(200)
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/calendar\r\n"
            try:
                for i in range(len(head)):
                    self.wfile.write(head[i : i + 1])
                    self.wfile.flush()
                    time.sleep(feed.drip_seconds)
                while True:  # one header that never ends
                    self.wfile.write(b"X")
                    self.wfile.flush()
                    time.sleep(feed.drip_seconds)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return 200

        def log_message(self, *args) -> None:
            pass

    with serving_in_thread(Handler) as base_url:
        feed.url = base_url + path
        yield feed
