"""Private addresses in disguise and a stand-in resolver, for the tests of the one rule that
refuses private targets (``app.services.integrations.outbound.addresses.is_public``) wherever a
URL is saved or connected to: webhooks and CalDAV connections alike."""

from __future__ import annotations

import socket

import pytest

# IPv6 spellings of non-public IPv4 addresses (127.0.0.1 unless the name says otherwise).
DISGUISED = {
    "compatible": "::7f00:1",
    "compatible-metadata": "::169.254.169.254",
    "mapped": "::ffff:127.0.0.1",
    "translated": "::ffff:0:7f00:1",
    "nat64": "64:ff9b::7f00:1",
    "nat64-private": "64:ff9b::a00:1",  # 10.0.0.1
    "nat64-metadata": "64:ff9b::a9fe:a9fe",  # 169.254.169.254
    "nat64-local-use": "64:ff9b:1:7f00:0:100::",  # RFC 6052's /48 layout
    "nat64-local-use-private": "64:ff9b:1:c0a8:0:100::",  # 192.168.0.1
    "6to4": "2002:7f00:1::1",
    "6to4-private": "2002:c0a8:1::1",  # 192.168.0.1
    "6to4-metadata": "2002:a9fe:a9fe::1",  # 169.254.169.254
    "teredo-client": "2001:0:4136:e378:8000:63bf:80ff:fffe",  # server public, client 127.0.0.1
    "teredo-server": "2001:0:7f00:1:8000:63bf:f7f7:f7f7",  # server 127.0.0.1, client 8.8.8.8
}
disguised = pytest.mark.parametrize("address", DISGUISED.values(), ids=DISGUISED.keys())


def resolving(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[str]]) -> None:
    """Make the names in ``answers`` resolve to their addresses, as a DNS server might answer
    (change ``answers`` to answer differently later); every other name resolves as before."""
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host not in answers:
            return real(host, port, *args, **kwargs)
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in answers[host]
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
