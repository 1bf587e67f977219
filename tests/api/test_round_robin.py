"""Teams (docs/api.md, "Hosts"): a round-robin event type offers the slots any of its hosts
can take, books one free host chosen by priority, weighted share and least recent booking,
says why (``assignmentReason``), books a named host on request (``hostId``), and a reschedule
keeps its host when free; a collective type offers the times all its hosts are free and takes
every host's time."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.extensions import db
from app.models import Booking, EventType, EventTypeHost, Host, SlotHold
from app.scheduling.intervals import Interval
from app.services.scheduling_inputs import load_busy_by_host
from tests.factories import TenantFactory, make_booking, next_monday, ny, z

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday

MONDAY = next_monday()
TEN = ny(MONDAY, 10)

MORNINGS = {d: [["09:00", "12:00"]] for d in ("mon", "tue", "wed", "thu", "fri")}
AFTERNOONS = {d: [["13:00", "17:00"]] for d in ("mon", "tue", "wed", "thu", "fri")}


def make_host_booking(tenant, host: str, start):
    """A booking of ``host``'s alone (stored directly, as another event type's would be)."""
    return make_booking(tenant, start, event_type="Panel", host_id=tenant.hosts[host])


def team(hosts, assignment="round_robin", type_name="Team call", **event_type):
    """A sub account whose ``type_name`` (30 min) is ``assignment`` over ``hosts`` (names, or
    dicts with a profile, priority and weight), each 09:00–17:00 unless a host says
    otherwise."""
    listed = [h if isinstance(h, dict) else {"name": h} for h in hosts]
    return TenantFactory().create(
        hosts=[{"name": h["name"], "availabilityProfile": h.get("profile")} for h in listed],
        availabilityProfiles=[
            {
                "name": "Office",
                "default": True,
                "weeklyHours": {
                    d: [["09:00", "17:00"]] for d in ("mon", "tue", "wed", "thu", "fri")
                },
            },
            {"name": "Mornings", "weeklyHours": MORNINGS},
            {"name": "Afternoons", "weeklyHours": AFTERNOONS},
            {"name": "Late", "weeklyHours": {d: [["11:00", "17:00"]] for d in ("mon", "tue")}},
        ],
        eventTypes=[
            {
                "name": type_name,
                "duration": 30,
                "assignment": assignment,
                "hosts": [
                    {k: v for k, v in h.items() if k in ("name", "priority", "weight")}
                    for h in listed
                ],
                **event_type,
            }
        ],
    )


def book(client, tenant, start, type_name="Team call", **extra):
    return client.post(
        f"/v1/api/calendar/event-types/{tenant.event_types[type_name]}/bookings",
        json={
            "startTime": z(start),
            "endTime": z(start + timedelta(minutes=30)),
            "attendees": [{"email": "caller@example.test"}],
            **extra,
        },
        headers=tenant.headers(),
    )


def day_starts(client, tenant, type_name="Team call", **query):
    """Monday's open slot starts of the event type."""
    answer = client.get(
        "/v1/api/calendar/availability",
        query_string={
            "startDate": MONDAY.isoformat(),
            "endDate": MONDAY.isoformat(),
            "eventTypeId": tenant.event_types[type_name],
            "timezone": "America/New_York",
            **query,
        },
        headers=tenant.headers(),
    )
    assert answer.status_code == 200, answer.json
    return [slot["start"] for slot in answer.json[0]["slots"]]


def test_availability_is_every_slot_any_host_can_take(client, app):
    tenant = team(
        [{"name": "Ana", "profile": "Mornings"}, {"name": "Ben", "profile": "Afternoons"}]
    )
    starts = day_starts(client, tenant)
    assert z(ny(MONDAY, 9)) in starts and z(ny(MONDAY, 11, 30)) in starts
    assert z(ny(MONDAY, 12)) not in starts and z(ny(MONDAY, 12, 30)) not in starts
    assert z(ny(MONDAY, 13)) in starts and z(ny(MONDAY, 16, 30)) in starts


def test_host_id_on_availability_asks_that_hosts_slots_alone(client, app):
    tenant = team(
        [{"name": "Ana", "profile": "Mornings"}, {"name": "Ben", "profile": "Afternoons"}]
    )
    starts = day_starts(client, tenant, hostId=tenant.hosts["Ben"])
    assert starts[0] == z(ny(MONDAY, 13)) and z(ny(MONDAY, 9)) not in starts


def test_a_slot_stays_offered_while_one_host_is_free(client, app):
    tenant = team(["Ana", "Ben"])
    assert book(client, tenant, TEN).status_code == 201
    assert z(TEN) in day_starts(client, tenant)
    assert book(client, tenant, TEN).status_code == 201
    assert z(TEN) not in day_starts(client, tenant)


def test_a_create_goes_to_a_free_host_and_says_why(client, app):
    tenant = team(
        [{"name": "Ana", "profile": "Mornings"}, {"name": "Ben", "profile": "Afternoons"}]
    )
    created = book(client, tenant, ny(MONDAY, 14))
    assert created.status_code == 201, created.json
    assert [h["name"] for h in created.json["hosts"]] == ["Ben"]
    assert created.json["hosts"][0]["id"] == tenant.hosts["Ben"]
    # Ana is not free at 14:00: Ben is the only candidate of the top priority.
    assert created.json["assignmentReason"] == "priority"


def test_equal_hosts_take_turns_least_recently_booked_first(client, app):
    tenant = team(["Ana", "Ben", "Cy"])
    hosts = [book(client, tenant, TEN + timedelta(hours=i)).json for i in range(6)]
    assert [h["hosts"][0]["name"] for h in hosts] == ["Ana", "Ben", "Cy", "Ana", "Ben", "Cy"]
    # All level: the one never booked (then by id); one behind the others: its share.
    assert [h["assignmentReason"] for h in hosts[:3]] == [
        "least_recently_booked",
        "least_recently_booked",
        "weight",
    ]


def test_a_higher_priority_host_is_chosen_while_free(client, app):
    tenant = team([{"name": "Ana"}, {"name": "Ben", "priority": 4}])
    first, second = (book(client, tenant, TEN).json for _ in range(2))
    assert (first["hosts"][0]["name"], first["assignmentReason"]) == ("Ben", "priority")
    assert second["hosts"][0]["name"] == "Ana"  # Ben is taken at 10:00


def test_a_host_below_its_weighted_share_is_chosen(client, app):
    tenant = team([{"name": "Ana", "weight": 300}, {"name": "Ben"}])
    names = [book(client, tenant, TEN + timedelta(hours=i)).json for i in range(4)]
    assert [n["hosts"][0]["name"] for n in names].count("Ana") == 3
    assert "weight" in {n["assignmentReason"] for n in names}


def test_host_id_books_the_named_host(client, app):
    tenant = team(["Ana", "Ben"])
    created = book(client, tenant, TEN, hostId=tenant.hosts["Ben"])
    assert created.status_code == 201
    assert (created.json["hosts"][0]["name"], created.json["assignmentReason"]) == (
        "Ben",
        "requested",
    )


def test_host_id_of_a_busy_host_is_refused_with_that_hosts_slots(client, app):
    tenant = team([{"name": "Ana"}, {"name": "Ben", "profile": "Afternoons"}])
    refused = book(client, tenant, TEN, hostId=tenant.hosts["Ben"])
    assert refused.status_code == 400
    assert refused.json["code"] == "host_unavailable"
    suggested = [slot["start"] for slot in refused.json["suggestedSlots"]]
    assert suggested and all(start >= z(ny(MONDAY, 13)) for start in suggested)


def test_host_id_of_another_event_types_host_is_refused(client, app):
    tenant = team(["Ana"])
    other = TenantFactory().create()
    refused = book(client, tenant, TEN, hostId=next(iter(other.hosts.values())))
    assert refused.status_code == 400
    assert refused.json["errors"] == {"hostId": ["hostId is not a host of this event type"]}


def test_every_host_taken_refuses_with_the_teams_nearest_slots(client, app):
    tenant = team(["Ana", "Ben"])
    assert [book(client, tenant, TEN).status_code for _ in range(2)] == [201, 201]
    refused = book(client, tenant, TEN)
    assert refused.status_code == 400
    assert refused.json["code"] == "slot_taken"
    assert z(ny(MONDAY, 10, 30)) in [s["start"] for s in refused.json["suggestedSlots"]]


def test_a_reschedule_keeps_the_host_when_free(client, app):
    tenant = team(["Ana", "Ben"])
    booking = book(client, tenant, TEN, hostId=tenant.hosts["Ben"]).json
    moved = client.put(
        f"/v1/api/calendar/event-types/{tenant.event_types['Team call']}/bookings/{booking['id']}",
        json={"startTime": z(ny(MONDAY, 11))},
        headers=tenant.headers(),
    )
    assert moved.status_code == 200
    stored = db.session.get(Booking, booking["id"])
    assert (stored.host_id, stored.assignment_reason) == (tenant.hosts["Ben"], "requested")


def test_a_reschedule_to_a_time_its_host_is_busy_goes_to_a_free_host(client, app):
    tenant = team(["Ana", "Ben"])
    booking = book(client, tenant, TEN, hostId=tenant.hosts["Ben"]).json
    book(client, tenant, ny(MONDAY, 11), hostId=tenant.hosts["Ben"])
    moved = client.put(
        f"/v1/api/calendar/event-types/{tenant.event_types['Team call']}/bookings/{booking['id']}",
        json={"startTime": z(ny(MONDAY, 11))},
        headers=tenant.headers(),
    )
    assert moved.status_code == 200, moved.json
    db.session.expire_all()
    assert db.session.get(Booking, booking["id"]).host_id == tenant.hosts["Ana"]


def test_host_id_on_update_moves_the_booking_to_that_host(client, app):
    tenant = team(["Ana", "Ben"])
    booking = book(client, tenant, TEN, hostId=tenant.hosts["Ana"]).json
    moved = client.put(
        f"/v1/api/calendar/event-types/{tenant.event_types['Team call']}/bookings/{booking['id']}",
        json={"hostId": tenant.hosts["Ben"]},
        headers=tenant.headers(),
    )
    assert moved.status_code == 200, moved.json
    db.session.expire_all()
    assert db.session.get(Booking, booking["id"]).host_id == tenant.hosts["Ben"]


def test_a_booking_made_from_a_hold_goes_to_the_holds_host(client, app):
    tenant = team(["Ana", "Ben"])
    held = client.post(
        f"/v1/api/calendar/event-types/{tenant.event_types['Team call']}/holds",
        json={"startTime": z(TEN), "endTime": z(TEN + timedelta(minutes=30))},
        headers=tenant.headers(),
    )
    assert held.status_code == 201, held.json
    hold_host = db.session.get(SlotHold, held.json["id"]).host_id
    # The other host is still free at 10:00: the slot is offered, and another create takes it.
    other = book(client, tenant, TEN)
    assert other.status_code == 201 and other.json["hosts"][0]["id"] != hold_host
    created = book(client, tenant, TEN, holdToken=held.json["holdToken"])
    assert created.status_code == 201, created.json
    assert created.json["hosts"][0]["id"] == hold_host


def test_max_ahead_hides_a_host_too_far_ahead(client, app):
    tenant = team([{"name": "Ana", "priority": 4}, {"name": "Ben", "profile": "Afternoons"}])
    call = db.session.get(EventType, tenant.event_types["Team call"])
    call.max_ahead = 1
    db.session.commit()
    first = book(client, tenant, TEN).json  # Ana (priority), one ahead of Ben
    assert first["hosts"][0]["name"] == "Ana"
    # Two ahead would be too far: Ana, the only host in the mornings, is hidden there.
    assert z(ny(MONDAY, 11)) in day_starts(client, tenant)
    assert book(client, tenant, ny(MONDAY, 11)).status_code == 201
    assert z(ny(MONDAY, 11, 30)) not in day_starts(client, tenant)
    refused = book(client, tenant, ny(MONDAY, 11, 30))
    assert refused.status_code == 400


def test_a_deactivated_host_is_not_offered_nor_booked(client, app):
    tenant = team(
        [{"name": "Ana", "profile": "Mornings"}, {"name": "Ben", "profile": "Afternoons"}]
    )
    db.session.get(Host, tenant.hosts["Ana"]).active = False
    db.session.commit()
    assert z(ny(MONDAY, 9)) not in day_starts(client, tenant)
    assert book(client, tenant, ny(MONDAY, 9)).json["code"] == "outside_hours"


def test_the_event_types_hosts_are_stored_with_priority_and_weight(app):
    tenant = team([{"name": "Ana", "priority": 3, "weight": 250}, {"name": "Ben"}])
    rows = db.session.query(EventTypeHost).filter_by(event_type_id=tenant.event_types["Team call"])
    assert {(r.host_id, r.priority, r.weight) for r in rows} == {
        (tenant.hosts["Ana"], 3, 250),
        (tenant.hosts["Ben"], 2, 100),
    }


def test_a_collective_type_offers_only_times_every_host_is_free(client, app):
    tenant = team(["Ana", {"name": "Ben", "profile": "Late"}], "collective", "Panel")
    starts = day_starts(client, tenant, "Panel")
    assert z(ny(MONDAY, 10)) not in starts  # Ben starts at 11:00
    assert z(ny(MONDAY, 11)) in starts
    # Ana booked alone (another type's booking, made with her) takes the time from the panel.
    make_host_booking(tenant, "Ana", ny(MONDAY, 11))
    assert z(ny(MONDAY, 11)) not in day_starts(client, tenant, "Panel")


def test_a_collective_booking_takes_every_hosts_time(client, app):
    tenant = team(["Ana", "Ben"], "collective", "Panel")
    created = book(client, tenant, TEN, "Panel")
    assert created.status_code == 201, created.json
    assert [h["name"] for h in created.json["hosts"]] == ["Ana", "Ben"]
    assert created.json["assignmentReason"] == "collective"
    shown = client.get(f"/v1/api/calendar/bookings/{created.json['id']}", headers=tenant.headers())
    assert [h["name"] for h in shown.json["hosts"]] == ["Ana", "Ben"]
    listed = client.get("/v1/api/calendar/bookings", headers=tenant.headers())
    assert [h["name"] for h in listed.json["bookings"][0]["hosts"]] == ["Ana", "Ben"]
    busy = load_busy_by_host(
        tenant.sub_account_id,
        Interval(TEN, TEN + timedelta(minutes=30)),
        [tenant.hosts["Ana"], tenant.hosts["Ben"]],
    )
    assert all(busy[h].bookings for h in busy)


def test_a_collective_create_one_host_cannot_take_is_refused_with_common_slots(client, app):
    tenant = team(["Ana", {"name": "Ben", "profile": "Late"}], "collective", "Panel")
    refused = book(client, tenant, TEN, "Panel")
    assert refused.status_code == 400
    assert refused.json["code"] == "outside_hours"
    assert all(s["start"] >= z(ny(MONDAY, 11)) for s in refused.json["suggestedSlots"])
    assert refused.json["suggestedSlots"]


def test_a_team_whose_hosts_are_all_deactivated_offers_and_books_nothing(client, app):
    tenant = team(["Ana"])
    db.session.get(Host, tenant.hosts["Ana"]).active = False
    db.session.commit()
    assert day_starts(client, tenant) == []
    refused = book(client, tenant, TEN)
    assert refused.status_code == 400
    assert refused.json["code"] == "outside_hours"
    assert refused.json["message"] == "No host of this event type is active"
