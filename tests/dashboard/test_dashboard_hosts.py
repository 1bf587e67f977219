"""Host pages: the list with each host's id, adding and editing a host, deactivating one (which
asks what becomes of the bookings still to come, and keeps or cancels them), reactivating one,
refusals next to their fields, and other sub accounts' hosts (404)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.extensions import db
from app.models import BlockedTime, Booking, CalendarConnection, EventType, Host
from tests.dashboard_users import csrf_token, owner_email, sign_in
from tests.factories import TenantFactory, make_blocked_time, make_booking, next_monday, ny

MONDAY = next_monday()


def base(tenant) -> str:
    return f"/dashboard/s/{tenant.sub_account_id}/hosts"


def host_named(tenant, name: str) -> Host | None:
    db.session.expire_all()
    return db.session.query(Host).filter_by(sub_account_id=tenant.sub_account_id, name=name).first()


def post(client, url: str, token_from: str | None = None, **data):
    """POST ``data`` to ``url`` with the CSRF token of the page ``token_from`` (default
    ``url``)."""
    return client.post(url, data={**data, "csrf_token": csrf_token(client, token_from or url)})


def add(client, tenant, **fields):
    url = f"{base(tenant)}/new"
    return client.post(
        url,
        data={
            "name": "Dr. Lee",
            "email": "lee@clinic.test",
            "timezone": "",
            "availability_profile_id": "",
            **fields,
            "csrf_token": csrf_token(client, url),
        },
    )


def test_the_list_shows_each_host_with_its_id(signed_in, tenant):
    page = signed_in.get(base(tenant)).get_data(as_text=True)
    for name, host_id in tenant.hosts.items():
        assert name in page and f"<code>{host_id}</code>" in page


def test_hosts_is_an_area_of_the_menu(signed_in, tenant):
    page = signed_in.get(f"/dashboard/s/{tenant.sub_account_id}/event-types").get_data(as_text=True)
    assert f'href="{base(tenant)}"' in page


def test_an_owner_adds_a_host_with_working_hours(signed_in, tenant):
    office = tenant.raw["agencies"][0]["subAccounts"][0]["availabilityProfiles"]["Office"]
    response = add(signed_in, tenant, availability_profile_id=str(office))
    assert response.status_code == 302
    added = host_named(tenant, "Dr. Lee")
    assert (added.email, added.availability_profile_id, added.active) == (
        "lee@clinic.test",
        office,
        True,
    )


def test_a_taken_name_and_a_bad_email_are_refused_next_to_their_fields(signed_in, tenant):
    taken = next(iter(tenant.hosts))
    page = add(signed_in, tenant, name=taken).get_data(as_text=True)
    assert 'id="name-errors"' in page and "Duplicate name" in page
    page = add(signed_in, tenant, email="not an email").get_data(as_text=True)
    assert 'id="email-errors"' in page
    assert host_named(tenant, "Dr. Lee") is None


def test_an_owner_edits_a_host(signed_in, tenant):
    add(signed_in, tenant)
    host = host_named(tenant, "Dr. Lee")
    response = post(
        signed_in,
        f"{base(tenant)}/{host.id}",
        name="Dr. Lee-Park",
        email="",
        timezone="Europe/Berlin",
        availability_profile_id="",
    )
    assert response.status_code == 302
    edited = host_named(tenant, "Dr. Lee-Park")
    assert (edited.email, edited.timezone) == (None, "Europe/Berlin")


def test_another_sub_accounts_host_is_not_found(signed_in, tenant, app):
    other = TenantFactory().create()
    other_host = next(iter(other.hosts.values()))
    assert signed_in.get(f"{base(tenant)}/{other_host}").status_code == 404


def test_a_host_without_bookings_to_come_is_deactivated_at_once(signed_in, tenant):
    add(signed_in, tenant)
    host = host_named(tenant, "Dr. Lee")
    page = signed_in.get(f"{base(tenant)}/{host.id}/deactivate").get_data(as_text=True)
    assert "No bookings still to come" in page
    response = post(signed_in, f"{base(tenant)}/{host.id}/deactivate", future="keep")
    assert response.status_code == 302
    assert host_named(tenant, "Dr. Lee").active is False
    reactivated = post(signed_in, f"{base(tenant)}/{host.id}/reactivate", token_from=base(tenant))
    assert reactivated.status_code == 302
    assert host_named(tenant, "Dr. Lee").active is True


@pytest.mark.date_sensitive  # a booking next Monday
def test_deactivating_a_host_with_bookings_to_come_asks_and_can_cancel_them(signed_in, tenant):
    add(signed_in, tenant)
    host = host_named(tenant, "Dr. Lee")
    booking = make_booking(tenant, ny(MONDAY, 10), host_id=host.id)
    page = signed_in.get(f"{base(tenant)}/{host.id}/deactivate").get_data(as_text=True)
    assert "1 booking still to come" in page
    unanswered = post(signed_in, f"{base(tenant)}/{host.id}/deactivate")
    assert unanswered.status_code == 200 and host_named(tenant, "Dr. Lee").active is True
    response = post(signed_in, f"{base(tenant)}/{host.id}/deactivate", future="cancel")
    assert response.status_code == 302
    db.session.expire_all()
    assert db.session.get(Booking, booking.id).status == "cancelled"
    assert host_named(tenant, "Dr. Lee").active is False


@pytest.mark.date_sensitive  # a booking next Monday
def test_keeping_the_bookings_of_a_deactivated_host_keeps_them(signed_in, tenant):
    add(signed_in, tenant)
    host = host_named(tenant, "Dr. Lee")
    booking = make_booking(tenant, ny(MONDAY, 10) + timedelta(hours=1), host_id=host.id)
    post(signed_in, f"{base(tenant)}/{host.id}/deactivate", future="keep")
    db.session.expire_all()
    assert db.session.get(Booking, booking.id).status == "pending"


def test_the_one_host_of_an_offered_event_type_is_not_deactivated(signed_in, tenant):
    first = host_named(tenant, next(iter(tenant.hosts)))
    refused = post(signed_in, f"{base(tenant)}/{first.id}/deactivate", future="keep")
    assert refused.status_code == 200
    assert "give it another host, or deactivate it, first" in refused.get_data(as_text=True)
    assert host_named(tenant, first.name).active is True


def ana_and_ben():
    """A sub account with hosts Ana and Ben and "Intro", round robin over both."""
    return TenantFactory().create(
        hosts=[{"name": "Ana"}, {"name": "Ben"}],
        eventTypes=[
            {
                "name": "Intro",
                "duration": 30,
                "availabilityProfile": "Office",
                "assignment": "round_robin",
                "hosts": [{"name": "Ana"}, {"name": "Ben"}],
            }
        ],
    )


def event_types_base(tenant) -> str:
    return f"/dashboard/s/{tenant.sub_account_id}/event-types"


def type_form(**overrides) -> dict:
    return {
        "name": "Intro call",
        "duration": "30",
        "buffer_before": "",
        "buffer_after": "",
        "slot_interval": "",
        "location": "",
        "availability_profile_id": "",
        "minimum_notice_minutes": "",
        "booking_horizon_days": "",
        "assignment": "round_robin",
        "max_ahead": "",
        **overrides,
    }


def test_an_owner_makes_a_round_robin_event_type_of_chosen_hosts(signed_in, tenant):
    add(signed_in, tenant)
    lee = host_named(tenant, "Dr. Lee")
    first = tenant.hosts[next(iter(tenant.hosts))]
    url = f"{event_types_base(tenant)}/new"
    form = type_form(team_host=[str(first), str(lee.id)], max_ahead="3")
    form[f"priority_{lee.id}"], form[f"weight_{lee.id}"] = "4", "250"
    response = signed_in.post(url, data={**form, "csrf_token": csrf_token(signed_in, url)})
    assert response.status_code == 302, response.get_data(as_text=True)
    db.session.expire_all()
    made = db.session.query(EventType).filter_by(name="Intro call").one()
    assert (made.assignment, made.max_ahead, made.host_id) == ("round_robin", 3, first)
    assert {(h.host_id, h.priority, h.weight) for h in made.hosts} == {
        (first, 2, 100),
        (lee.id, 4, 250),
    }
    page = signed_in.get(f"{event_types_base(tenant)}/{made.id}").get_data(as_text=True)
    assert f'name="team_host" value="{lee.id}" checked' in page
    assert f'name="weight_{lee.id}" value="250"' in page


def test_a_round_robin_type_without_hosts_is_refused_next_to_its_field(signed_in, tenant):
    url = f"{event_types_base(tenant)}/new"
    response = signed_in.post(url, data={**type_form(), "csrf_token": csrf_token(signed_in, url)})
    assert response.status_code == 200
    assert "needs at least one host" in response.get_data(as_text=True)


def test_editing_a_team_keeps_when_each_host_became_eligible(signed_in, tenant):
    add(signed_in, tenant)
    lee = host_named(tenant, "Dr. Lee")
    first = tenant.hosts[next(iter(tenant.hosts))]
    url = f"{event_types_base(tenant)}/new"
    signed_in.post(
        url,
        data={
            **type_form(assignment="collective", team_host=[str(first)]),
            "csrf_token": csrf_token(signed_in, url),
        },
    )
    db.session.expire_all()
    made = db.session.query(EventType).filter_by(name="Intro call").one()
    since = made.hosts[0].eligible_since
    edit = f"{event_types_base(tenant)}/{made.id}"
    response = signed_in.post(
        edit,
        data={
            **type_form(assignment="collective", team_host=[str(first), str(lee.id)]),
            "csrf_token": csrf_token(signed_in, edit),
        },
    )
    assert response.status_code == 302, response.get_data(as_text=True)
    db.session.expire_all()
    rows = {h.host_id: h.eligible_since for h in db.session.get(EventType, made.id).hosts}
    assert rows[first] == since and rows[lee.id] >= since


@pytest.mark.date_sensitive  # a booking next Monday
def test_a_round_robin_booking_is_moved_to_another_free_host_from_its_page(client, app):
    tenant = ana_and_ben()
    sign_in(client, owner_email(tenant))
    booking = make_booking(tenant, ny(MONDAY, 10), event_type="Intro", host_id=tenant.hosts["Ana"])
    page_url = f"/dashboard/s/{tenant.sub_account_id}/bookings/{booking.id}"
    page = client.get(page_url).get_data(as_text=True)
    assert "With Ana" in page and f'<option value="{tenant.hosts["Ben"]}">Ben</option>' in page
    moved = post(client, f"{page_url}/reassign", token_from=page_url, host_id=tenant.hosts["Ben"])
    assert moved.status_code == 302
    db.session.expire_all()
    assert db.session.get(Booking, booking.id).host_id == tenant.hosts["Ben"]
    assert "With Ben (asked for by name)" in client.get(page_url).get_data(as_text=True)


@pytest.mark.date_sensitive  # busy time next Monday
def test_a_connection_is_made_another_hosts_calendar_with_its_busy_time(client, app):
    tenant = TenantFactory().create(
        hosts=[{"name": "Ana"}, {"name": "Ben"}],
        calendarConnections=[
            {"name": "Family", "kind": "ics", "url": "http://127.0.0.1:9/family.ics"}
        ],
    )
    sign_in(client, owner_email(tenant))
    connection_id = tenant.connections["Family"]
    make_blocked_time(
        tenant,
        ny(MONDAY, 12),
        ny(MONDAY, 13),
        source="external",
        calendar_connection_id=connection_id,
        host_id=tenant.hosts["Ana"],
    )
    url = f"/dashboard/s/{tenant.sub_account_id}/connections/{connection_id}"
    page = client.get(url).get_data(as_text=True)
    assert f'<option value="{tenant.hosts["Ben"]}">Ben</option>' in page
    moved = post(client, f"{url}/host", token_from=url, host_id=str(tenant.hosts["Ben"]))
    assert moved.status_code == 302
    db.session.expire_all()
    assert db.session.get(CalendarConnection, connection_id).host_id == tenant.hosts["Ben"]
    busy = db.session.query(BlockedTime).filter_by(calendar_connection_id=connection_id).all()
    assert [row.host_id for row in busy] == [tenant.hosts["Ben"]]


@pytest.mark.date_sensitive  # bookings next Monday
def test_the_calendar_shows_one_hosts_bookings_and_time_when_asked(client, app):
    tenant = ana_and_ben()
    sign_in(client, owner_email(tenant))
    ana = make_booking(tenant, ny(MONDAY, 10), event_type="Intro", host_id=tenant.hosts["Ana"])
    ben = make_booking(tenant, ny(MONDAY, 10), event_type="Intro", host_id=tenant.hosts["Ben"])
    make_blocked_time(tenant, ny(MONDAY, 12), ny(MONDAY, 13), reason="Lunch")  # everyone's
    make_blocked_time(
        tenant, ny(MONDAY, 14), ny(MONDAY, 15), reason="Ben's errand", host_id=tenant.hosts["Ben"]
    )
    calendar = f"/dashboard/s/{tenant.sub_account_id}/calendar"
    page = client.get(calendar).get_data(as_text=True)
    assert f'<option value="{tenant.hosts["Ana"]}">Ana</option>' in page
    window = {"start": MONDAY.isoformat(), "end": (MONDAY + timedelta(days=1)).isoformat()}

    def titles(**query):
        entries = client.get(f"{calendar}/entries", query_string={**window, **query}).json
        return {(e.get("id"), e["title"]) for e in entries}

    everyone = titles()
    assert {f"booking-{ana.id}", f"booking-{ben.id}"} <= {i for i, _ in everyone}
    only_ana = titles(host=tenant.hosts["Ana"])
    assert {i for i, _ in only_ana if i} == {f"booking-{ana.id}"}
    assert {t for i, t in only_ana if not i} == {"Blocked: Lunch"}
    shown = client.get(calendar, query_string={"host": tenant.hosts["Ana"]}).get_data(as_text=True)
    assert f"host={tenant.hosts['Ana']}" in shown
