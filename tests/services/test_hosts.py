"""Hosts in storage (migration 0029): what occupies time belongs to a host, one host's active
bookings and holds never overlap, two hosts may be booked at the same instant, and a row
written without a host takes the sub account's first; provisioning names the hosts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from app.extensions import db
from app.models import BlockedTime, Booking, BookingHost, CalendarConnection, Host, SlotHold
from app.scheduling.intervals import Interval
from app.services.accounts.provisioning import ProvisioningInvalid, provision
from app.services.scheduling_inputs import load_busy
from tests.factories import TenantFactory, make_booking, next_monday, ny, tenant_document
from tests.oauth_fakes import ACCOUNT_EMAIL
from tests.services.test_hold_constraints import refused_constraint, store_hold

MONDAY = next_monday()
TEN = ny(MONDAY, 10)

pytestmark = pytest.mark.date_sensitive  # bookings and holds on next Monday


def second_host(tenant, name="Dr. Lee") -> Host:
    host = Host(sub_account_id=tenant.sub_account_id, name=name, email="lee@clinic.test")
    db.session.add(host)
    db.session.commit()
    return host


def first_host(tenant) -> Host:
    return db.session.scalars(
        select(Host).where(Host.sub_account_id == tenant.sub_account_id).order_by(Host.id)
    ).first()


def test_a_sub_account_provisioned_without_hosts_has_one_named_after_it(tenant):
    (host,) = db.session.scalars(select(Host).where(Host.sub_account_id == tenant.sub_account_id))
    sub_account = tenant.raw["agencies"][0]["subAccounts"][0]
    assert host.name == sub_account["name"]
    assert tenant.hosts == {host.name: host.id}


def test_a_booking_written_without_a_host_takes_the_first(tenant):
    second_host(tenant)
    booking = make_booking(tenant, TEN)
    assert booking.host_id == first_host(tenant).id


def test_one_hosts_active_bookings_never_overlap(tenant):
    make_booking(tenant, TEN)
    with pytest.raises(IntegrityError) as refused:
        make_booking(tenant, ny(MONDAY, 10, 15))
    assert refused_constraint(refused.value) == ("23P01", "ex_bookings_no_overlap")
    db.session.rollback()


def test_two_hosts_may_be_booked_at_the_same_instant(tenant):
    other = second_host(tenant)
    first = make_booking(tenant, TEN)
    same_time = make_booking(tenant, TEN, host_id=other.id)
    assert {first.host_id, same_time.host_id} == {first_host(tenant).id, other.id}


def test_a_hold_keeps_only_its_own_hosts_time(tenant):
    other = second_host(tenant)
    make_booking(tenant, TEN)
    with pytest.raises(IntegrityError) as refused:
        store_hold(tenant, ny(MONDAY, 10, 15))  # the first host's: over its booking
    assert refused_constraint(refused.value) == ("23P01", "ex_slot_holds_no_booking_overlap")
    db.session.rollback()
    hold = store_hold(tenant, ny(MONDAY, 10, 15), host_id=other.id)
    assert db.session.get(SlotHold, hold.id).host_id == other.id


def test_a_booking_may_not_cover_its_own_hosts_hold_but_may_another_hosts(tenant):
    other = second_host(tenant)
    store_hold(tenant, TEN, host_id=other.id)
    make_booking(tenant, TEN)  # the first host's time: the other's hold does not count
    with pytest.raises(IntegrityError) as refused:
        make_booking(tenant, ny(MONDAY, 10, 15), host_id=other.id, emails=("sam@example.test",))
    assert refused_constraint(refused.value) == ("23P01", "ex_bookings_no_hold_overlap")
    db.session.rollback()


def test_blocked_time_without_a_host_is_everyones(tenant):
    blocked = BlockedTime(
        sub_account_id=tenant.sub_account_id, start_at=TEN, end_at=TEN + timedelta(hours=1)
    )
    db.session.add(blocked)
    db.session.commit()
    assert db.session.get(BlockedTime, blocked.id).host_id is None


def test_provisioning_names_the_hosts_their_hours_user_and_calendars(app, google):
    document = tenant_document(
        availabilityProfiles=[
            {"name": "Office", "default": True, "weeklyHours": {"mon": [["09:00", "12:00"]]}},
            {"name": "Afternoons", "weeklyHours": {"mon": [["13:00", "17:00"]]}},
        ],
        hosts=[
            {"name": "Dr. Kim", "email": "kim@clinic.test"},
            {
                "name": "Dr. Lee",
                "email": "lee@clinic.test",
                "timezone": "Europe/Berlin",
                "availabilityProfile": "Afternoons",
            },
        ],
        calendarConnections=[
            {
                "name": "Lee's calendar",
                "kind": "google",
                "refreshToken": google.issue_refresh_token(ACCOUNT_EMAIL),
                "host": "Dr. Lee",
            },
            {
                "name": "Kim's calendar",
                "kind": "google",
                "refreshToken": google.issue_refresh_token(ACCOUNT_EMAIL),
            },
        ],
    )
    agency = document["agencies"][0]
    agency["subAccounts"][0]["hosts"][1]["user"] = agency["owner"]["email"].upper()
    created = provision(document)["agencies"][0]
    db.session.commit()
    sub_account = created["subAccounts"][0]
    hosts = sub_account["hosts"]
    assert list(hosts) == ["Dr. Kim", "Dr. Lee"]
    lee = db.session.get(Host, hosts["Dr. Lee"])
    assert (lee.email, lee.timezone) == ("lee@clinic.test", "Europe/Berlin")
    assert lee.availability_profile_id == sub_account["availabilityProfiles"]["Afternoons"]
    assert lee.user_id == created["ownerId"]
    connections = sub_account["calendarConnections"]
    assert db.session.get(CalendarConnection, connections["Lee's calendar"]).host_id == lee.id
    kim = hosts["Dr. Kim"]  # the first host: a connection naming none is its
    assert db.session.get(CalendarConnection, connections["Kim's calendar"]).host_id == kim


@pytest.mark.parametrize(
    ("sub_account", "path"),
    [
        ({"hosts": [{"name": "A", "availabilityProfile": "Nope"}]}, "hosts[0].availabilityProfile"),
        (
            {
                "calendarConnections": [
                    {"name": "C", "kind": "ics", "url": "https://x.test/a.ics", "host": "Nobody"}
                ]
            },
            "calendarConnections[0].host",
        ),
        ({"hosts": [{"name": "A", "user": "stranger@example.test"}]}, "hosts[0].user"),
        ({"hosts": [{"name": "A"}, {"name": "A"}]}, "hosts"),
    ],
)
def test_provisioning_refuses_a_host_reference_that_does_not_resolve(app, sub_account, path):
    with pytest.raises(ProvisioningInvalid) as refused:
        TenantFactory().create(**sub_account)
    assert any(path in key for key in refused.value.errors), refused.value.errors
    db.session.rollback()


def test_every_booking_carries_its_host(tenant):
    booking = make_booking(tenant, TEN)
    db.session.expire_all()
    assert db.session.get(Booking, booking.id).host_id == first_host(tenant).id


def test_a_hosts_busy_time_is_its_own_and_everyones_blocked_time(tenant):
    lee = second_host(tenant)
    kim = first_host(tenant)
    make_booking(tenant, TEN)  # Kim's
    store_hold(tenant, ny(MONDAY, 11), host_id=lee.id)
    for hour, host_id, source in ((12, None, "manual"), (13, kim.id, "external")):
        db.session.add(
            BlockedTime(
                sub_account_id=tenant.sub_account_id,
                host_id=host_id,
                start_at=ny(MONDAY, hour),
                end_at=ny(MONDAY, hour, 30),
                source=source,
            )
        )
    db.session.commit()
    day = Interval(ny(MONDAY, 0), ny(MONDAY + timedelta(days=1), 0))

    def busy(hosts):
        found = load_busy(tenant.sub_account_id, day, hosts=hosts)
        return [
            [i.start for i in kind]
            for kind in (found.bookings, found.held, found.blocked, found.external)
        ]

    assert busy([lee.id]) == [[], [ny(MONDAY, 11)], [ny(MONDAY, 12)], []]
    assert busy([kim.id]) == [[TEN], [], [ny(MONDAY, 12)], [ny(MONDAY, 13)]]
    assert busy(None) == [[TEN], [ny(MONDAY, 11)], [ny(MONDAY, 12)], [ny(MONDAY, 13)]]


def collective_booking(tenant, start, first: int, others: list[int]) -> Booking:
    booking = make_booking(tenant, start, host_id=first)
    db.session.add_all(BookingHost(booking_id=booking.id, host_id=h) for h in others)
    db.session.commit()
    return booking


def test_a_collective_bookings_other_host_is_not_booked_over_it(tenant):
    other = second_host(tenant)
    collective_booking(tenant, TEN, first_host(tenant).id, [other.id])
    with pytest.raises(IntegrityError) as refused:
        make_booking(tenant, ny(MONDAY, 10, 15), host_id=other.id)
    assert refused_constraint(refused.value) == ("23P01", "ex_bookings_no_overlap")
    db.session.rollback()


def test_a_host_booked_already_is_not_made_another_host_of_a_collective_booking(tenant):
    other = second_host(tenant)
    make_booking(tenant, TEN, host_id=other.id)
    with pytest.raises(IntegrityError) as refused:
        collective_booking(tenant, ny(MONDAY, 10, 15), first_host(tenant).id, [other.id])
    assert refused_constraint(refused.value) == ("23P01", "ex_bookings_no_overlap")
    db.session.rollback()


def test_a_cancelled_booking_leaves_its_other_hosts_time_free(tenant):
    other = second_host(tenant)
    booking = collective_booking(tenant, TEN, first_host(tenant).id, [other.id])
    booking.status = "cancelled"
    db.session.commit()
    assert make_booking(tenant, TEN, host_id=other.id).host_id == other.id
