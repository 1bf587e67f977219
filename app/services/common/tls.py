"""One TLS client context per process for every outbound connection (mail, webhooks, feeds,
provider APIs): building one loads the system's CA certificates, about 16–20 ms of CPU, and a
context serves any number of connections, from any thread."""

from __future__ import annotations

import ssl
from functools import cache


@cache
def shared_tls_context() -> ssl.SSLContext:
    """The process's default-verifying client context (certificates and host names checked)."""
    return ssl.create_default_context()
