"""``GET /calendar/event-types``: the event types an agent can book, with what it needs to book
them right (docs/api.md, "List event types")."""

from __future__ import annotations

from app.extensions import db
from app.models import EventType, Host
from app.models.event_type import EventTypeHost, HostAssignment

LISTED = "/v1/api/calendar/event-types"


def listed(client, tenant, key: str = "all"):
    return client.get(LISTED, headers=tenant.headers(key))


def test_each_offered_event_type_is_listed_by_name_with_what_booking_it_needs(client, tenant):
    answer = listed(client, tenant)
    assert answer.status_code == 200
    checkup, cleaning = answer.json
    assert (checkup["name"], cleaning["name"]) == ("Checkup", "Cleaning")
    assert cleaning == {
        "id": tenant.event_types["Cleaning"],
        "name": "Cleaning",
        "duration": 30,
        "slotInterval": 30,
        "timezone": "America/New_York",
        "locationKind": "in_person",
        "location": None,
        "seats": 1,
        "minimumNoticeMinutes": 0,
        "bookingHorizonDays": 60,
        "assignment": "single",
        "hosts": [{"id": cleaning["hosts"][0]["id"], "name": cleaning["hosts"][0]["name"]}],
        "questions": {
            "type": "object",
            "properties": {},
            "required": [],
            "additionalProperties": False,
        },
    }


def test_the_event_types_own_notice_horizon_and_interval_are_the_ones_given(client, tenant):
    checkup = db.session.get(EventType, tenant.event_types["Checkup"])
    checkup.minimum_notice_minutes, checkup.booking_horizon_days = 120, 14
    checkup.slot_interval = 15
    db.session.commit()
    (shown,) = [t for t in listed(client, tenant).json if t["name"] == "Checkup"]
    assert (shown["minimumNoticeMinutes"], shown["bookingHorizonDays"]) == (120, 14)
    assert (shown["duration"], shown["slotInterval"]) == (60, 15)


def test_a_deactivated_event_type_is_not_listed(client, tenant):
    db.session.get(EventType, tenant.event_types["Checkup"]).active = False
    db.session.commit()
    assert [t["name"] for t in listed(client, tenant).json] == ["Cleaning"]


def test_a_round_robin_type_lists_its_active_hosts_and_without_one_is_not_listed(client, tenant):
    first = db.session.scalars(
        db.select(Host).where(Host.sub_account_id == tenant.sub_account_id)
    ).one()
    ben = Host(sub_account_id=tenant.sub_account_id, name="Ben", active=True)
    db.session.add(ben)
    db.session.flush()
    checkup = db.session.get(EventType, tenant.event_types["Checkup"])
    checkup.assignment = HostAssignment.ROUND_ROBIN
    checkup.hosts = [
        EventTypeHost(host_id=first.id),
        EventTypeHost(host_id=ben.id),
    ]
    db.session.commit()
    (shown,) = [t for t in listed(client, tenant).json if t["name"] == "Checkup"]
    assert shown["assignment"] == "round_robin"
    assert [h["name"] for h in shown["hosts"]] == [first.name, "Ben"]

    checkup.hosts = [EventTypeHost(host_id=ben.id)]
    ben.active = False
    db.session.commit()
    assert "Checkup" not in [t["name"] for t in listed(client, tenant).json]


def test_listing_needs_can_check_availability(client, tenant):
    answer = listed(client, tenant, "without-canCheckAvailability")
    assert answer.status_code == 403
    assert answer.json["message"] == "API key does not have 'canCheckAvailability' permission"


def test_a_key_sees_only_its_own_sub_accounts_event_types(client, tenant, tenants):
    other = tenants.create()
    mine = {t["id"] for t in listed(client, tenant).json}
    theirs = {t["id"] for t in listed(client, other).json}
    assert mine == set(tenant.event_types.values())
    assert theirs == set(other.event_types.values()) and not mine & theirs
