"""One webhook POST, with ``urllib3``: to the address the target was resolved to (the Host
header and TLS name are the URL's), no redirects followed, no retries (the delivery schedule
retries), a timeout on connecting and on every read, and at most ``EXCERPT_BYTES`` of the
answer read and kept."""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass

import urllib3
from urllib3.exceptions import HTTPError, TimeoutError

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


def post(target: Target, body: bytes, headers: dict[str, str], timeout: float) -> Answer:
    started = time.monotonic()
    limits = urllib3.Timeout(connect=timeout, read=timeout)
    if target.scheme == "https":
        pool: urllib3.HTTPConnectionPool = urllib3.HTTPSConnectionPool(
            target.address,
            target.port,
            timeout=limits,
            retries=False,
            ssl_context=ssl.create_default_context(),
            server_hostname=target.host,
            assert_hostname=target.host,
        )
    else:
        pool = urllib3.HTTPConnectionPool(
            target.address, target.port, timeout=limits, retries=False
        )
    default_port = 443 if target.scheme == "https" else 80
    host = target.host if target.port == default_port else f"{target.host}:{target.port}"
    if ":" in target.host and not target.host.startswith("["):
        host = f"[{target.host}]" + ("" if target.port == default_port else f":{target.port}")
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
