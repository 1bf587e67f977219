"""A real HTTP receiver for webhooks on a free loopback port, in the test process. It answers
each POST with the next scripted answer (a status, or ``"hang"``: hold the request without
answering for ``hang_seconds``), then 200 once the script is used up, and keeps every request."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler

from tests.servers import serving_in_thread


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    def __init__(self, script: list[int | str], hang_seconds: float = 30.0) -> None:
        self.script = list(script)
        self.hang_seconds = hang_seconds
        self.requests: list[Received] = []
        self.lock = threading.Lock()
        self.url = ""

    def next_answer(self, request: Received) -> int | str:
        with self.lock:
            self.requests.append(request)
            return self.script.pop(0) if self.script else 200

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.requests) >= count:
                    return list(self.requests)
            time.sleep(0.05)
        raise AssertionError(f"expected {count} requests, got {len(self.requests)}")


@contextmanager
def webhook_receiver(
    script: list[int | str] | None = None, hang_seconds: float = 30.0, path: str = "/hooks"
) -> Iterator[Receiver]:
    receiver = Receiver(script or [], hang_seconds)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = self.rfile.read(length)
            request = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            answer = receiver.next_answer(request)
            if answer == "hang":
                time.sleep(receiver.hang_seconds)
                return
            if answer == "redirect":
                self.send_response(307)
                self.send_header("location", "http://169.254.169.254/latest/meta-data")
                self.send_header("content-length", "0")
                self.end_headers()
                return
            payload = b'{"received": true}' if answer < 400 else b"receiver error " * 200
            self.send_response(int(answer))
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args) -> None:
            pass

    with serving_in_thread(Handler) as base_url:
        receiver.url = base_url + path
        yield receiver
