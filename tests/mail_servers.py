"""A real SMTP server (``aiosmtpd``) on a free loopback port, in the test process: it accepts
every message and keeps it, parsed, for the test to read."""

from __future__ import annotations

import email
import email.policy
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import EmailMessage

from tests.servers import free_port


class Inbox:
    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        self._lock = threading.Lock()
        self.refuse = False  # answer 451 to every message (a server in trouble)

    async def handle_DATA(self, server, session, envelope) -> str:
        if self.refuse:
            return "451 Requested action aborted: try again later"
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        with self._lock:
            self.messages.append(message)
            self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        return "250 OK"

    def to(self, address: str) -> list[EmailMessage]:
        with self._lock:
            return [m for m in self.messages if address in str(m["To"])]

    def clear(self) -> None:
        """Forget what came so far (the next step's messages are read alone)."""
        with self._lock:
            self.messages.clear()
            self.envelopes.clear()

    def wait_for(self, count: int, timeout: float = 30.0) -> list[EmailMessage]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.messages) >= count:
                    return list(self.messages)
            time.sleep(0.1)
        raise AssertionError(f"expected {count} messages, got {len(self.messages)}")


@contextmanager
def smtp_server() -> Iterator[tuple[str, Inbox]]:
    """Yields ``(SMTP_URL, inbox)``."""
    from aiosmtpd.controller import Controller

    inbox = Inbox()
    port = free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield f"smtp://127.0.0.1:{port}", inbox
    finally:
        controller.stop()


def ics_of(message: EmailMessage) -> bytes:
    (part,) = [p for p in message.iter_attachments() if p.get_content_type() == "text/calendar"]
    return part.get_payload(decode=True)
