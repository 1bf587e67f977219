"""Every spelling of a private address refused, for webhooks and CalDAV connections alike (one
rule, ``app.services.integrations.outbound.addresses.is_public``): an IPv4 address written inside IPv6
(IPv4-mapped, -compatible, -translated, NAT64 ``64:ff9b::/96`` and ``64:ff9b:1::/48``, 6to4,
Teredo) is judged as the address it hides, when a URL is saved and again at connect time, and
the refusal names the setting that allows private targets.

Nothing here connects anywhere: addresses are judged as strings, literal URLs resolve to
themselves, and names resolve to loopback or through ``resolving``, a stand-in resolver.
"""

from __future__ import annotations

from ipaddress import IPv4Address, ip_address

import pytest

from app.extensions import db
from app.models import CalendarConnection, SubAccount
from app.services.common.errors import InvalidRequest
from app.services.integrations.calendars.connections import connect_calendar
from app.services.integrations.outbound.addresses import (
    UnsafeUrl,
    embedded_ipv4,
    is_public,
    resolve_target,
)
from tests.addresses import disguised, resolving

WEBHOOK_HINT = "(set WEBHOOK_ALLOW_PRIVATE=1 to allow private targets, for tests)"
CALDAV_HINT = (
    "(the operator can allow calendar servers on a private network with the setting"
    " CALDAV_ALLOW_PRIVATE=1 and a restart of the service)"
)


@pytest.fixture
def app(make_app):
    app = make_app(WEBHOOK_ALLOW_PRIVATE=False, CALDAV_ALLOW_PRIVATE=False)
    with app.app_context():
        yield app
        db.session.remove()


def connect(tenant, url: str, calendar: str | None = None) -> CalendarConnection:
    sub_account = db.session.get(SubAccount, tenant.sub_account_id)
    document = {"name": "Personal", "url": url, "username": "owner", "password": "pw"}
    return connect_calendar(sub_account, {**document, "calendar": calendar})


@pytest.mark.parametrize(
    ("address", "embedded"),
    [
        ("::ffff:127.0.0.1", ["127.0.0.1"]),
        ("::7f00:1", ["127.0.0.1"]),
        ("::ffff:0:a00:1", ["10.0.0.1"]),
        ("64:ff9b::a9fe:a9fe", ["169.254.169.254"]),
        ("64:ff9b:1:c0a8:0:100::", ["192.168.0.1"]),
        ("64:ff9b:1:c0a8:0:1ff:ffff:ffff", ["192.168.0.1"]),  # the suffix is not read
        ("2002:c0a8:1::1", ["192.168.0.1"]),
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", ["65.54.227.120", "127.0.0.1"]),
        ("::", []),
        ("::1", []),
        ("2606:4700:4700::1111", []),
    ],
)
def test_embedded_ipv4_reads_every_spelling(address, embedded):
    assert embedded_ipv4(ip_address(address)) == [IPv4Address(a) for a in embedded]


@disguised
def test_an_ipv6_address_hiding_a_non_public_ipv4_address_is_not_public(address):
    assert not is_public(address)


@pytest.mark.parametrize(
    "address",
    ["64:ff9b::808:808", "64:ff9b::1.1.1.1", "2002:808:808::1", "2002:5db8:d822:1::1"],
)
def test_nat64_and_6to4_carrying_a_public_ipv4_address_are_public(address):
    assert is_public(address)


@pytest.mark.parametrize(
    "address",
    [
        "::ffff:8.8.8.8",
        "::8.8.8.8",
        "::ffff:0:808:808",
        "64:ff9b:1:808:8:800::",
        "2001:0:4136:e378:8000:63bf:f7f7:f7f7",  # Teredo: server and client both public
    ],
)
def test_mapped_compatible_translated_local_nat64_and_teredo_are_never_public(address):
    assert not is_public(address)


@pytest.mark.parametrize(
    "address",
    [
        "192.0.0.8",  # IETF protocol assignments (192.0.0.0/24)
        "198.18.0.1",  # benchmarking
        "240.0.0.1",  # reserved
        "fec0::1",  # site-local, deprecated
        "3fff::1",  # documentation (RFC 9637)
        "5f00::1",  # SRv6 SIDs (RFC 9602)
        "100::1",  # discard-only
        "2001:db8::1",  # documentation
        "2001:2::1",  # benchmarking, inside the IETF protocol assignments
    ],
)
def test_special_purpose_ranges_python_may_call_global_are_not_public(address):
    assert not is_public(address)


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450::1"])
def test_ordinary_internet_addresses_are_public(address):
    assert is_public(address)


@disguised
def test_a_webhook_url_spelling_a_private_address_is_refused(address):
    with pytest.raises(UnsafeUrl, match="which is not a public address"):
        resolve_target(f"https://[{address}]/hooks", require_https=True, allow_private=False)


@disguised
def test_a_caldav_url_spelling_a_private_address_is_refused(tenant, address):
    with pytest.raises(InvalidRequest) as refused:
        connect(tenant, f"http://[{address}]:5232/")
    (message,) = refused.value.errors["url"]
    assert "which is not a public address" in message


@disguised
def test_a_caldav_calendar_url_spelling_a_private_address_is_refused(tenant, address):
    with pytest.raises(InvalidRequest) as refused:
        connect(tenant, "https://93.184.215.14/dav/", calendar=f"http://[{address}]/owner/x/")
    (message,) = refused.value.errors["calendar"]
    assert "which is not a public address" in message


@disguised
def test_the_connect_time_check_refuses_a_name_resolving_to_a_disguised_address(
    monkeypatch, address
):
    resolving(monkeypatch, {"hooks.example.test": [address]})
    with pytest.raises(UnsafeUrl, match=r"hooks\.example\.test resolves to"):
        resolve_target("https://hooks.example.test/", require_https=True, allow_private=False)


def test_a_name_with_one_disguised_address_among_public_ones_is_refused(monkeypatch):
    resolving(monkeypatch, {"hooks.example.test": ["93.184.215.14", "64:ff9b::7f00:1"]})
    with pytest.raises(UnsafeUrl, match="resolves to 64:ff9b::7f00:1"):
        resolve_target("https://hooks.example.test/", require_https=True, allow_private=False)


@pytest.mark.parametrize("url", ["http://localhost:8080/hooks", "http://[64:ff9b::7f00:1]/"])
def test_a_webhook_refusal_names_webhook_allow_private(url):
    with pytest.raises(UnsafeUrl) as refused:
        resolve_target(url, require_https=False, allow_private=False)
    assert refused.value.message.endswith(f"which is not a public address {WEBHOOK_HINT}")


@pytest.mark.parametrize("url", ["http://localhost:5232/", "http://[64:ff9b::7f00:1]/"])
def test_a_caldav_refusal_names_caldav_allow_private(tenant, url):
    with pytest.raises(InvalidRequest) as refused:
        connect(tenant, url)
    (message,) = refused.value.errors["url"]
    assert message.endswith(f"which is not a public address {CALDAV_HINT}.")
    assert "WEBHOOK_ALLOW_PRIVATE" not in message
