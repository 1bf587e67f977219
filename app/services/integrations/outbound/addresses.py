"""Where the service may send a request of its own: checked when a URL is saved and again just
before each connection, after DNS resolution, so a name that later resolves somewhere private
is refused too. The one home of this rule: webhooks use it, and so do CalDAV connections
(``app.services.integrations.calendars.connections``) and any other outgoing request, each
naming its own setting.

Refused: a scheme other than https (http too, outside production), credentials in the URL,
and any address that is not public: loopback, private (RFC 1918, unique-local), link-local
(which holds the cloud metadata service, 169.254.169.254), shared, reserved, multicast and
unspecified. The setting the caller names (``WEBHOOK_ALLOW_PRIVATE=1``, ``CALDAV_ALLOW_PRIVATE=1``:
tests, a private deployment) lifts the address check, never the scheme check, and the refusal
says which setting that is.

An IPv4 address written inside IPv6 is judged as what it hides (``embedded_ipv4`` reads every
spelling): an IPv6 address is public only if it is public itself and every IPv4 address it
embeds is public too. Per spelling:

- IPv4-mapped (``::ffff:a.b.c.d``), IPv4-compatible (``::a.b.c.d``, deprecated) and
  IPv4-translated (``::ffff:0:a.b.c.d``): refused outright, whatever they embed. No server
  has such an address (they live in the reserved ``::/8``); a DNS answer holding one is a
  disguise.
- Teredo (``2001::/32``): refused outright; not globally reachable (IANA), a tunnel to a host
  behind a NAT.
- Local-use NAT64 (``64:ff9b:1::/48``, RFC 8215): refused outright; not globally reachable
  (IANA), and a site may use any RFC 6052 prefix length inside it, so what it embeds cannot be
  read for sure (``embedded_ipv4`` reads it as a /48).
- Well-known NAT64 (``64:ff9b::/96``) and 6to4 (``2002::/16``): allowed when the IPv4 address
  they carry is public (that is how an IPv6-only network reaches a public IPv4 host: the
  request ends where the IPv4 address would have led), refused when it is not.

``ipaddress.is_global`` alone does not say this: it calls ``::7f00:1`` and ``64:ff9b::7f00:1``
(both 127.0.0.1) global, and what it says of 6to4 and 64:ff9b:1::/48 changed in Python 3.13.
Nor does it know every special-purpose range (Python 3.11 calls ``192.0.0.8``, site-local
``fec0::1``, documentation ``3fff::1`` and SRv6 ``5f00::1`` global). So the rule is also an
explicit one, from IANA's special-purpose address registries: IPv4 outside ``_SPECIAL_IPV4``,
and IPv6 inside global unicast (``2000::/3``, the only IPv6 space assigned for the internet)
and outside ``_SPECIAL_IPV6``; what a Python version's ``is_global`` refuses on top stays
refused.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from urllib.parse import urlsplit

from flask import current_app, has_app_context

WEBHOOK_ALLOW_PRIVATE = "WEBHOOK_ALLOW_PRIVATE"
# The setting that lets CalDAV servers and feeds on private addresses be connected.
CALDAV_ALLOW_PRIVATE = "CALDAV_ALLOW_PRIVATE"

# What a refusal says lifts it, by the setting that does. A calendar server on the local
# network (a NAS, an office's own CalDAV) is a deployment's real need, met first in the
# dashboard's connection form by someone who may not run the service: the refusal says who
# can allow it and how (the settings are read at start, hence the restart).
_LIFTED_BY = {
    WEBHOOK_ALLOW_PRIVATE: "set WEBHOOK_ALLOW_PRIVATE=1 to allow private targets, for tests",
    CALDAV_ALLOW_PRIVATE: (
        "the operator can allow calendar servers on a private network with the setting"
        " CALDAV_ALLOW_PRIVATE=1 and a restart of the service"
    ),
}

_COMPATIBLE = IPv6Network("::/96")  # also holds the unspecified and the loopback address
_MAPPED = IPv6Network("::ffff:0:0/96")
_TRANSLATED = IPv6Network("::ffff:0:0:0/96")
_TEREDO = IPv6Network("2001::/32")
_NAT64 = IPv6Network("64:ff9b::/96")  # the well-known prefix
_NAT64_LOCAL = IPv6Network("64:ff9b:1::/48")  # local use
_SIX_TO_FOUR = IPv6Network("2002::/16")
# Refused whatever they embed (see the module's docstring).
_NEVER_PUBLIC = (_COMPATIBLE, _MAPPED, _TRANSLATED, _TEREDO, _NAT64_LOCAL)
# Public exactly when the IPv4 address they carry is (whatever the Python version says of them).
_IPV4_CARRIERS = (_NAT64, _SIX_TO_FOUR)
# IANA's IPv4 special-purpose ranges, refused whatever ``is_global`` says (192.0.0.0/24 whole:
# its two globally reachable anycast addresses, PCP's and TURN's, are no one's calendar).
_SPECIAL_IPV4 = tuple(
    IPv4Network(network)
    for network in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
    )
)
# IPv6: only global unicast is the internet's; inside it, IANA's special-purpose blocks (IETF
# protocol assignments, Teredo among them, and the two documentation prefixes) are refused.
_GLOBAL_UNICAST = IPv6Network("2000::/3")
_SPECIAL_IPV6 = tuple(
    IPv6Network(network) for network in ("2001::/23", "2001:db8::/32", "3fff::/20")
)


class UnsafeUrl(Exception):
    """A URL the service may not send a request to (webhooks, CalDAV, …): the message says why."""

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


def system_addresses(host: str, port: int) -> list[str]:
    """The addresses the system's resolver gives ``host``, each once, in its order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class AddressPolicy:
    """How a name becomes addresses (``resolve``) and which addresses are public
    (``is_public``): the system's resolver and this module's rule. The app's is
    ``ADDRESS_POLICY`` when set (tests give one of their own: a name whose answer changes, a
    loopback address counted as public), so every outgoing request is checked the same way
    without touching the standard library."""

    resolve: Callable[[str, int], list[str]] = system_addresses
    is_public: Callable[[str], bool] = lambda address: is_public(address)


DEFAULT_POLICY = AddressPolicy()


def app_policy() -> AddressPolicy:
    """The app's address policy (``ADDRESS_POLICY``), else the default."""
    if has_app_context():
        return current_app.extensions.get("address_policy") or DEFAULT_POLICY
    return DEFAULT_POLICY


@dataclass(frozen=True)
class AddressGuard:
    """Where one connection's requests may go: every address a name resolves to must be public
    unless ``allow_private``, whose setting (``setting``) a refusal names. Plain data, for a
    client that resolves names itself (CalDAV's), so that it connects to the addresses checked
    and to no other: a redirect's target and a name resolved again are checked anew."""

    policy: AddressPolicy
    allow_private: bool
    setting: str = WEBHOOK_ALLOW_PRIVATE

    def addresses(self, host: str, port: int) -> list[str]:
        """``host``'s addresses, resolved once; raises ``UnsafeUrl`` when it has none or
        one of them is refused."""
        try:
            addresses = self.policy.resolve(host, port)
        except (OSError, UnicodeError) as err:
            raise UnsafeUrl(f"cannot resolve {host}: {err}") from None
        if not addresses:
            raise UnsafeUrl(f"{host} has no address")
        if not self.allow_private:
            refused = [a for a in addresses if not self.policy.is_public(a)]
            if refused:
                lifted_by = _LIFTED_BY.get(
                    self.setting, f"set {self.setting}=1 to allow private targets"
                )
                raise UnsafeUrl(
                    f"{host} resolves to {refused[0]}, which is not a public address ({lifted_by})"
                )
        return addresses


def resolve_target(
    url: str,
    *,
    require_https: bool,
    allow_private: bool,
    setting: str = WEBHOOK_ALLOW_PRIVATE,
) -> Target:
    """The URL checked and resolved to one permitted address; raises ``UnsafeUrl``.
    Every address the name resolves to (by the app's ``AddressPolicy``) must be public unless
    ``allow_private``; ``setting`` is the configuration key that allows private ones, named in
    the refusal."""
    parts = _parts(url, require_https)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    guard = AddressGuard(app_policy(), allow_private, setting)
    addresses = guard.addresses(parts.hostname, port)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(url, parts.scheme, parts.hostname, port, path, addresses[0])


def is_public(address: str) -> bool:
    """Whether a request may go to ``address`` (IPv4 or IPv6, a ``%zone`` ignored): see the
    module's docstring. Used when a URL is saved and at connect time alike."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, IPv4Address):
        return _public_ipv4(ip)
    if any(ip in network for network in _NEVER_PUBLIC):
        return False
    if not all(_public_ipv4(embedded) for embedded in embedded_ipv4(ip)):
        return False
    if any(ip in network for network in _IPV4_CARRIERS):
        return True  # the IPv4 address it carries is public (checked above)
    return (
        ip in _GLOBAL_UNICAST
        and not any(ip in network for network in _SPECIAL_IPV6)
        and ip.is_global
        and not ip.is_multicast
    )


def embedded_ipv4(ip: IPv6Address) -> list[IPv4Address]:
    """Every IPv4 address ``ip`` embeds, in any spelling; empty for an IPv6 address that embeds
    none (``::`` and ``::1`` embed none). Bits are numbered from 0, the most significant."""
    value = int(ip)
    low32 = IPv4Address(value & 0xFFFF_FFFF)
    found = []
    if ip in _MAPPED:  # ::ffff:a.b.c.d (RFC 4291 2.5.5.2)
        found.append(low32)
    if ip in _TRANSLATED:  # ::ffff:0:a.b.c.d, IPv4-translated (RFC 2765)
        found.append(low32)
    if ip in _COMPATIBLE and value > 1:  # ::a.b.c.d, IPv4-compatible (RFC 4291 2.5.5.1)
        found.append(low32)
    if ip in _NAT64:  # 64:ff9b::a.b.c.d, NAT64 well-known prefix (RFC 6052)
        found.append(low32)
    if ip in _NAT64_LOCAL:
        # 64:ff9b:1::/48, local-use NAT64 (RFC 8215), read with the /48 layout of RFC 6052 2.2:
        # the IPv4 address's first 16 bits are bits 48..63, bits 64..71 are the "u" octet
        # (always zero, skipped), its last 16 bits are bits 72..87; the rest is the suffix.
        high16 = (value >> (128 - 64)) & 0xFFFF
        low16 = (value >> (128 - 88)) & 0xFFFF
        found.append(IPv4Address(high16 << 16 | low16))
    if ip.sixtofour is not None:  # 2002:AABB:CCDD::/48, 6to4 (RFC 3056): bits 16..47
        found.append(ip.sixtofour)
    if ip.teredo is not None:  # 2001::/32 Teredo (RFC 4380): the server, bits 32..63, and
        found.extend(ip.teredo)  # the client, bits 96..127 inverted (``teredo`` undoes that)
    return found


def _public_ipv4(ip: IPv4Address) -> bool:
    return not any(ip in network for network in _SPECIAL_IPV4) and ip.is_global


def _parts(url: str, require_https: bool):
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as err:
        raise UnsafeUrl(f"not a URL: {err}") from None
    allowed = ("https",) if require_https else ("https", "http")
    if parts.scheme not in allowed:
        raise UnsafeUrl(f"the URL must start with {' or '.join(a + '://' for a in allowed)}")
    if not parts.hostname:
        raise UnsafeUrl("the URL has no host")
    if parts.username or parts.password:
        raise UnsafeUrl("the URL must not hold credentials (the signature authenticates)")
    if parts.fragment:
        raise UnsafeUrl("the URL must not have a fragment")
    return parts
