"""One webhook POST, with ``urllib3``: to the address the target was resolved to (the Host
header and TLS name are the URL's), no redirects followed, no retries (the delivery schedule
retries), a timeout on connecting and on every read, and at most ``EXCERPT_BYTES`` of the
answer read and kept."""

from __future__ import annotations

import time
from dataclasses import dataclass

import urllib3
from urllib3.exceptions import HTTPError, TimeoutError

from app.services.common.tls import shared_tls_context
from app.services.integrations.webhooks.targets import Target

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


def pinned_pool(target: Target, timeout: float) -> urllib3.HTTPConnectionPool:
    """A connection pool to the address ``target`` was resolved to (TLS checked against its
    host name), with ``timeout`` on connecting and on every read, and no retries."""
    limits = urllib3.Timeout(connect=timeout, read=timeout)
    if target.scheme == "https":
        return urllib3.HTTPSConnectionPool(
            target.address,
            target.port,
            timeout=limits,
            retries=False,
            ssl_context=shared_tls_context(),
            server_hostname=target.host,
            assert_hostname=target.host,
        )
    return urllib3.HTTPConnectionPool(target.address, target.port, timeout=limits, retries=False)


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
