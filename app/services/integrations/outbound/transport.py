"""One webhook POST, with ``urllib3``: to the address the target was resolved to (the Host
header and TLS name are the URL's), no redirects followed, no retries (the delivery schedule
retries), a timeout on connecting and on every read, and at most ``EXCERPT_BYTES`` of the
answer read and kept.

Also the pinned connection pool other outgoing requests use (calendar feeds), and the bound on a
whole exchange (``ExchangeDeadline``): a timeout on every read bounds nothing against a server
that sends a byte just before each one runs out, its headers as much as its body."""

from __future__ import annotations

import socket
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import HTTPError, TimeoutError

from app.services.common.tls import shared_tls_context
from app.services.integrations.outbound.addresses import Target

EXCERPT_BYTES = 1024


@dataclass(frozen=True)
class Answer:
    status: int | None  # None: no answer (the error says why)
    duration_ms: int
    excerpt: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class ExchangeDeadline:
    """How long a whole exchange may take (connecting, sending, the answer's headers and body,
    redirects followed), however slowly the server sends: the one deadline of every outbound
    exchange (webhooks, calendar feeds, CalDAV). ``urllib3``'s read timeout restarts with every
    byte, and ``http.client`` reads the status line and headers a line at a time, so a server
    dripping its headers a byte a second holds a request for as long as it likes.

    Every connection the exchange makes shows its socket here (``watch``: a duplicate, which a
    TLS wrapper does not detach); when the deadline passes they are all shut down, so the read
    in progress ends at once and the library raises, and no connection is opened after that.
    Kept two ways: used as a context manager, a timer ends it (``expired`` then tells the caller
    why: webhooks and feeds, with ``deadline=`` given to ``pinned_pool``); or the caller waits
    for the exchange's thread until ``remaining`` is spent and ends it (``end``: CalDAV, whose
    library runs in a thread of its own)."""

    def __init__(self, seconds: float) -> None:
        self.started = time.monotonic()
        self.seconds = seconds
        self.expired = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self.expire)
        self._timer.daemon = True

    def __enter__(self) -> ExchangeDeadline:
        self._timer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def remaining(self) -> float:
        """Seconds left before the deadline (0 or less: passed)."""
        return self.started + self.seconds - time.monotonic()

    def allow(self, seconds: float) -> bool:
        """Let the exchange take ``seconds`` in all, if that is longer (a CalDAV read that turns
        full); whether it did. Moves what ``remaining`` says, not a timer already started."""
        with self._lock:
            if seconds <= self.seconds:
                return False
            self.seconds = seconds
            return True

    def watch(self, sock: socket.socket) -> None:
        """Keep a new connection's socket, to shut down at the deadline; past it, refuse it."""
        with self._lock:
            if not self.expired:
                self._sockets.append(sock.dup())
                return
        shut_down(sock)
        raise ConnectionAbortedError(f"the exchange's {self.seconds:g} s have passed")

    def expire(self) -> None:
        """The deadline has passed: every connection is shut down (the read in progress ends
        with it) and no new one may open."""
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            shut_down(sock)

    def close(self) -> None:
        """The exchange is over: the timer, if any, stops and the duplicates are closed."""
        self._timer.cancel()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            sock.close()

    def end(self) -> None:
        """End the exchange now, whether or not its time has passed: ``expire``, then
        ``close``."""
        self.expire()
        self.close()


def shut_down(sock: socket.socket) -> None:
    """End a connection's socket both ways now (a read in progress on it returns at once)."""
    with suppress(OSError):  # closed already, or never connected
        sock.shutdown(socket.SHUT_RDWR)


class _Watched:
    """A connection whose new socket is shown to its exchange's deadline, if it has one (given
    by its pool: ``exchange_deadline=`` among the pool's ``**conn_kw``, which urllib3 hands to
    every connection it makes).

    Relies on a urllib3 internal, the one this module keeps: ``HTTPConnection._new_conn``
    makes the TCP socket, which ``connect`` then wraps in TLS (urllib3 has no public hook
    between the two, and the socket must be watched before the handshake, which a server can
    drip as slowly as its headers). ``tests/conventions/test_library_internals.py`` fails when the
    pinned urllib3 changes it."""

    def __init__(
        self, *args: Any, exchange_deadline: ExchangeDeadline | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.exchange_deadline = exchange_deadline

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()  # type: ignore[misc]
        if self.exchange_deadline is not None:
            self.exchange_deadline.watch(sock)
        return sock


class _WatchedHTTPConnection(_Watched, HTTPConnection):
    pass


class _WatchedHTTPSConnection(_Watched, HTTPSConnection):
    pass


class _HTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


def pinned_pool(
    target: Target, timeout: float, deadline: ExchangeDeadline | None = None
) -> urllib3.HTTPConnectionPool:
    """A connection pool to the address ``target`` was resolved to (TLS checked against its
    host name), with ``timeout`` on connecting and on every read, and no retries; with
    ``deadline``, its connections end when that does."""
    limits = urllib3.Timeout(connect=timeout, read=timeout)
    pool: _HTTPPool | _HTTPSPool
    if target.scheme == "https":
        pool = _HTTPSPool(
            target.address,
            target.port,
            timeout=limits,
            retries=False,
            ssl_context=shared_tls_context(),
            server_hostname=target.host,
            assert_hostname=target.host,
            exchange_deadline=deadline,
        )
    else:
        pool = _HTTPPool(
            target.address, target.port, timeout=limits, retries=False, exchange_deadline=deadline
        )
    return pool


def host_header(target: Target) -> str:
    """The ``Host`` header for ``target``: its name (not the address), with a port that is not
    the scheme's default."""
    default_port = 443 if target.scheme == "https" else 80
    host = (
        f"[{target.host}]"
        if ":" in target.host and not target.host.startswith("[")
        else target.host
    )
    return host if target.port == default_port else f"{host}:{target.port}"


def post(target: Target, body: bytes, headers: dict[str, str], timeout: float) -> Answer:
    started = time.monotonic()
    pool = pinned_pool(target, timeout)
    host = host_header(target)
    try:
        with pool:
            response = pool.urlopen(
                "POST",
                target.path,
                body=body,
                headers={**headers, "Host": host},
                redirect=False,
                assert_same_host=False,
                preload_content=False,
            )
            try:
                excerpt = response.read(EXCERPT_BYTES, decode_content=False)
            finally:
                response.release_conn()
                response.close()
    except TimeoutError:
        return Answer(None, _ms(started), error=f"no answer within {timeout:g} s")
    except HTTPError as err:
        return Answer(None, _ms(started), error=_reason(err))
    return Answer(response.status, _ms(started), excerpt.decode("utf-8", errors="replace"))


def _ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def _reason(err: Exception) -> str:
    reason = getattr(err, "reason", None) or err
    text = " ".join(str(reason).split())
    return f"{type(err).__name__}: {text}"[:500]
