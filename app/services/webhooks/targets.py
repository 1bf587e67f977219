"""Where a webhook may be sent: checked when a subscription is saved and again at every send,
after DNS resolution, so a name that later resolves somewhere private is refused too.

Refused: a scheme other than https (http too, outside production), credentials in the URL,
and any address that is not globally routable: loopback, private (RFC 1918, unique-local),
link-local (which holds the cloud metadata service, 169.254.169.254), shared, reserved,
multicast, unspecified, and IPv4 written inside IPv6. ``WEBHOOK_ALLOW_PRIVATE=1`` (tests, a
private deployment) lifts the address check, never the scheme check.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit


class UnsafeWebhookUrl(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Target:
    """A checked URL and the address to connect to (resolved once, so the connection goes
    where the check looked: no second lookup for a rebinding name to answer differently)."""

    url: str
    scheme: str
    host: str
    port: int
    path: str  # path and query, as sent in the request line
    address: str


def check_url(url: str, *, require_https: bool) -> None:
    """The URL's form alone (no DNS): for saving a subscription."""
    _parts(url, require_https)


def resolve_target(url: str, *, require_https: bool, allow_private: bool) -> Target:
    """The URL checked and resolved to one permitted address; raises ``UnsafeWebhookUrl``."""
    parts = _parts(url, require_https)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as err:
        raise UnsafeWebhookUrl(f"cannot resolve {parts.hostname}: {err}") from None
    addresses = list(dict.fromkeys(info[4][0] for info in infos))
    if not addresses:
        raise UnsafeWebhookUrl(f"{parts.hostname} has no address")
    if not allow_private:
        refused = [a for a in addresses if not is_public(a)]
        if refused:
            raise UnsafeWebhookUrl(
                f"{parts.hostname} resolves to {refused[0]}, which is not a public address"
            )
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(url, parts.scheme, parts.hostname, port, path, addresses[0])


def is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and (ip.ipv4_mapped or ip.sixtofour or ip.teredo):
        return False  # an IPv4 address in disguise: judged as what it hides, refused outright
    return ip.is_global and not ip.is_multicast


def _parts(url: str, require_https: bool):
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as err:
        raise UnsafeWebhookUrl(f"not a URL: {err}") from None
    allowed = ("https",) if require_https else ("https", "http")
    if parts.scheme not in allowed:
        raise UnsafeWebhookUrl(f"the URL must start with {' or '.join(a + '://' for a in allowed)}")
    if not parts.hostname:
        raise UnsafeWebhookUrl("the URL has no host")
    if parts.username or parts.password:
        raise UnsafeWebhookUrl("the URL must not hold credentials (the signature authenticates)")
    if parts.fragment:
        raise UnsafeWebhookUrl("the URL must not have a fragment")
    return parts
