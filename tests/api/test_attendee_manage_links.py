"""Each attendee's manage link: in the API's answers, and the page it opens (cancel, move,
the sub account's rules, unusable links), through the test client."""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from itsdangerous import URLSafeSerializer
from sqlalchemy import select

from app.config import settings_of
from app.extensions import db
from app.models import Booking, CalendarSettings, OutboxEvent, SlotHold
from app.models.types import utcnow
from app.services.bookings.attendee_changes import move_as_attendee, open_attendee_booking
from app.services.common.errors import InvalidRequest
from app.services.common.manage_links import manage_url
from app.unit_of_work import perform
from tests.dashboard_users import csrf_token
from tests.factories import (
    availability_through_api,
    book_through_api,
    hold_through_api,
    make_booking,
    next_monday,
    ny,
    z,
)

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday, in New York time

MONDAY = next_monday()


def _path(url: str) -> str:
    return urlsplit(url).path


def _booked(client, tenant, hour: int = 10) -> dict:
    response = book_through_api(client, tenant, ny(MONDAY, hour))
    assert response.status_code == 201, response.json
    return response.json


def _link(booking: dict) -> str:
    return _path(booking["attendees"][0]["manageUrl"])


def _settings(tenant) -> CalendarSettings:
    return db.session.get(CalendarSettings, tenant.sub_account_id)


def _events(booking_id: int) -> list[OutboxEvent]:
    return db.session.scalars(
        select(OutboxEvent).where(OutboxEvent.booking_id == booking_id).order_by(OutboxEvent.id)
    ).all()


def _cancel(client, link: str, reason: str = "", token: str | None = None):
    return client.post(
        f"{link}/cancel",
        data={"csrf_token": token or csrf_token(client, link), "reason": reason},
    )


def test_each_attendee_of_a_create_and_a_get_answer_carries_a_manage_url(client, tenant, app):
    booked = _booked(client, tenant)
    url = booked["attendees"][0]["manageUrl"]
    base = app.extensions["settings"].base_url
    assert url.startswith(f"{base}/manage/")
    shown = client.get(f"/v1/api/calendar/bookings/{booked['id']}", headers=tenant.headers())
    assert shown.json["attendees"][0]["manageUrl"] == url


def test_the_link_opens_the_booking_in_the_attendees_timezone(client, tenant):
    booked = _booked(client, tenant)
    page = client.get(_link(booked))
    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert "Cleaning" in text and "Times in America/New_York" in text
    assert "10:00" in text  # 10:00 in New York, the attendee's zone


def test_the_browsers_timezone_shows_the_times_there(client, tenant):
    booked = _booked(client, tenant)
    text = client.get(_link(booked), query_string={"tz": "Europe/Berlin"}).get_data(as_text=True)
    assert "Times in Europe/Berlin" in text and "16:00" in text


def test_the_attendee_cancels_with_a_reason_and_the_change_is_theirs(client, tenant):
    booked = _booked(client, tenant)
    answer = _cancel(client, _link(booked), "Feeling better")
    assert answer.status_code == 302
    booking = db.session.get(Booking, booked["id"])
    db.session.refresh(booking)
    assert (booking.status, booking.cancellation_reason) == ("cancelled", "Feeling better")
    assert _events(booking.id)[-1].actor == "attendee"
    assert "This booking is cancelled" in client.get(_link(booked)).get_data(as_text=True)


def test_a_cancel_without_the_forms_token_changes_nothing(client, tenant):
    booked = _booked(client, tenant)
    client.get(_link(booked))
    _cancel(client, _link(booked), token="forged")
    assert db.session.get(Booking, booked["id"]).status == "pending"


def _choose(client, link: str, start):
    token = csrf_token(client, "/login")  # the session's: any form's will do
    return client.post(f"{link}/reschedule", data={"csrf_token": token, "start": z(start)})


def _confirm(client, link: str, chosen_page: str):
    """Send the confirmation form of ``chosen_page`` as the browser would."""
    fields = dict(
        re.findall(r'name="(csrf_token|start|hold)" type="hidden" value="([^"]*)"', chosen_page)
    )
    assert set(fields) == {"csrf_token", "start", "hold"}, fields
    return client.post(f"{link}/reschedule/confirm", data=fields)


def test_the_attendee_moves_the_booking_to_an_open_slot_held_while_confirming(client, tenant):
    booked = _booked(client, tenant)
    link = _link(booked)
    slots = client.get(f"{link}/reschedule").get_data(as_text=True)
    assert z(ny(MONDAY, 14)).replace("Z", "+00:00") in slots
    chosen = _choose(client, link, ny(MONDAY, 14))
    assert chosen.status_code == 200
    assert db.session.scalar(select(SlotHold.start_at)) == ny(MONDAY, 14)
    moved = _confirm(client, link, chosen.get_data(as_text=True))
    assert moved.status_code == 302
    booking = db.session.get(Booking, booked["id"])
    db.session.refresh(booking)
    assert (booking.start_at, booking.attendee_moves) == (ny(MONDAY, 14), 1)
    assert db.session.scalar(select(SlotHold.id)) is None  # the hold became the booking
    last = _events(booking.id)[-1]
    assert (last.kind, last.actor) == ("booking.rescheduled", "attendee")


def test_a_slot_taken_between_viewing_and_choosing_offers_the_nearest_open_ones(client, tenant):
    booked = _booked(client, tenant)
    link = _link(booked)
    client.get(f"{link}/reschedule")
    assert hold_through_api(client, tenant, ny(MONDAY, 14)).status_code == 201  # someone else
    refused = _choose(client, link, ny(MONDAY, 14))
    assert refused.status_code == 409
    text = refused.get_data(as_text=True)
    assert "That time was just taken" in text and "Nearest open times" in text
    assert db.session.get(Booking, booked["id"]).start_at == ny(MONDAY, 10)


def test_inside_the_notice_window_the_page_says_whom_to_contact(client, tenant):
    settings = _settings(tenant)
    settings.attendee_change_notice_hours = 24 * 365
    settings.notification_email = "desk@clinic.test"
    db.session.commit()
    booked = _booked(client, tenant)
    text = client.get(_link(booked)).get_data(as_text=True)
    assert "Changes are possible until 8760 hours before the start" in text
    assert "desk@clinic.test" in text and "Cancel booking" not in text
    _cancel(client, _link(booked), token=csrf_token(client, "/login"))
    assert db.session.get(Booking, booked["id"]).status == "pending"


def test_moves_beyond_the_sub_accounts_limit_are_refused_but_cancel_stays(client, tenant):
    settings = _settings(tenant)
    settings.attendee_max_reschedules = 0
    db.session.commit()
    booked = _booked(client, tenant)
    text = client.get(_link(booked)).get_data(as_text=True)
    assert "moved as often as allowed (0 times)" in text and "Cancel booking" in text
    refused = _choose(client, _link(booked), ny(MONDAY, 14))
    assert refused.status_code == 302
    assert db.session.scalar(select(SlotHold.id)) is None


def test_a_forged_token_opens_nothing(client, tenant):
    booked = _booked(client, tenant)
    link = _link(booked)
    for forged in (link[:-2] + ("AA" if not link.endswith("AA") else "BB"), "/manage/nonsense"):
        answer = client.get(forged)
        assert answer.status_code == 404
        assert "This link is not valid" in answer.get_data(as_text=True)


def test_a_reissued_link_replaces_the_earlier_one(client, tenant):
    booked = _booked(client, tenant)
    old = _link(booked)
    booking = db.session.get(Booking, booked["id"])
    booking.attendees[0].manage_link_version += 1
    db.session.commit()
    answer = client.get(old)
    assert answer.status_code == 410 and "replaced by a newer one" in answer.get_data(as_text=True)
    assert client.get(_path(manage_url(booking.attendees[0]))).status_code == 200


def test_a_link_expires_a_while_after_the_booking_ended(client, tenant):
    long_ago = (utcnow() - timedelta(days=40)).replace(microsecond=0)
    booking = make_booking(tenant, long_ago, status="completed")
    answer = client.get(_path(manage_url(booking.attendees[0])))
    assert answer.status_code == 410 and "expired" in answer.get_data(as_text=True)


def test_a_past_booking_shows_but_cannot_change(client, tenant):
    yesterday = (utcnow() - timedelta(days=1)).replace(microsecond=0)
    booking = make_booking(tenant, yesterday, status="confirmed")
    text = client.get(_path(manage_url(booking.attendees[0]))).get_data(as_text=True)
    assert "already taken place" in text and "Cancel booking" not in text


def test_the_page_is_under_the_strict_policy_with_nothing_from_elsewhere(client, tenant):
    booked = _booked(client, tenant)
    page = client.get(_link(booked))
    policy = page.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy or "default-src 'self'" in policy
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    sources = re.findall(r'(?:src|href)="([^"]+)"', page.get_data(as_text=True))
    assert sources and all(s.startswith(("/", "#")) for s in sources), sources


def test_requests_over_the_per_address_limit_are_refused_whatever_the_link(make_app, tenants):
    app = make_app(ATTENDEE_PAGE_LIMIT_PER_ADDRESS="2/minute")
    with app.app_context():
        tenant = tenants.create()
        client = app.test_client()
        first, second = _link(_booked(client, tenant, 10)), _link(_booked(client, tenant, 11))
        statuses = [client.get(link).status_code for link in (first, second, "/manage/guess")]
    assert statuses == [200, 200, 429]


def _live_holds() -> list[SlotHold]:
    db.session.expire_all()
    return db.session.scalars(select(SlotHold).where(SlotHold.expires_at > utcnow())).all()


def test_twelve_choices_through_one_link_hold_one_time_from_everyone_else(client, tenant):
    booked = _booked(client, tenant)
    link = _link(booked)
    choices = [ny(MONDAY, 11) + timedelta(minutes=30 * n) for n in range(12)]  # 11:00–16:30
    for start in choices:
        assert _choose(client, link, start).status_code == 200
    (held,) = _live_holds()
    assert held.start_at == choices[-1]
    (day,) = availability_through_api(client, tenant, MONDAY).json
    open_starts = {slot["start"] for slot in day["slots"]}
    assert z(choices[-1]) not in open_starts
    # Every earlier choice is open again, but those the held time's buffers still reach.
    assert {z(start) for start in choices[:-3]} <= open_starts


def test_a_choice_of_a_time_beside_the_booking_releases_the_earlier_choice(client, tenant):
    booked = _booked(client, tenant)
    link = _link(booked)
    assert _choose(client, link, ny(MONDAY, 14)).status_code == 200
    # 10:15 overlaps the booking's own 10:00–10:30, which no hold may: it holds nothing new.
    assert _choose(client, link, ny(MONDAY, 10, 15)).status_code == 200
    assert _live_holds() == []


def test_a_refused_choice_keeps_the_earlier_one(client, tenant):
    booked = _booked(client, tenant)
    link = _link(booked)
    assert _choose(client, link, ny(MONDAY, 14)).status_code == 200
    assert book_through_api(client, tenant, ny(MONDAY, 15)).status_code == 201  # someone else
    assert _choose(client, link, ny(MONDAY, 15)).status_code == 409
    (held,) = _live_holds()
    assert held.start_at == ny(MONDAY, 14)


def test_two_confirmations_beyond_the_move_limit_move_the_booking_once(client, tenant):
    """The second confirmation opened the link before the first moved the booking (both saw
    no move yet), as two at once do; the count under the calendar's lock refuses it."""
    _settings(tenant).attendee_max_reschedules = 1
    db.session.commit()
    booked = _booked(client, tenant)
    link = _link(booked)
    first_page = _choose(client, link, ny(MONDAY, 14)).get_data(as_text=True)
    now = utcnow()
    first, second = (open_attendee_booking(_path(link).rsplit("/", 1)[1], now) for _ in "12")
    assert first.can_move and second.can_move
    hold = re.search(r'name="hold" type="hidden" value="([^"]*)"', first_page).group(1)
    perform(move_as_attendee(first, ny(MONDAY, 14), hold, now))
    with pytest.raises(InvalidRequest, match="moved as often as allowed"):
        perform(move_as_attendee(second, ny(MONDAY, 15), None, now))
    db.session.expire_all()
    booking = db.session.get(Booking, booked["id"])
    assert (booking.start_at, booking.attendee_moves) == (ny(MONDAY, 14), 1)


def test_a_link_names_a_random_key_not_the_attendees_sequential_id(client, tenant):
    first, second = _booked(client, tenant, 10), _booked(client, tenant, 11)
    for booked in (first, second):
        token = _link(booked).rsplit("/", 1)[1]
        named, _version = URLSafeSerializer(
            settings_of(client.application).secret_keys[0], salt="attendee-manage-link"
        ).loads(token)
        assert named != booked["attendees"][0]["id"]
        assert isinstance(named, str) and len(named) >= 22


def test_a_link_mailed_before_links_named_keys_still_opens_its_booking(client, tenant):
    booked = _booked(client, tenant)
    attendee = booked["attendees"][0]
    old_style = URLSafeSerializer(
        settings_of(client.application).secret_keys[0], salt="attendee-manage-link"
    ).dumps([attendee["id"], 0])
    assert client.get(f"/manage/{old_style}").status_code == 200


def test_the_attendee_pages_are_kept_in_no_cache(client, tenant):
    link = _link(_booked(client, tenant))
    for path in (link, f"{link}/reschedule", "/manage/forged"):
        assert client.get(path).headers["Cache-Control"] == "no-store"


def test_requests_over_the_per_link_limit_are_refused_whichever_page(make_app, tenants):
    """One count for all of a link's pages, not one each."""
    app = make_app(ATTENDEE_PAGE_LIMIT_PER_LINK="3/minute")
    with app.app_context():
        tenant = tenants.create()
        client = app.test_client()
        link = _link(_booked(client, tenant))
        paths = (link, f"{link}/reschedule", link, f"{link}/reschedule")
        statuses = [client.get(path).status_code for path in paths]
    assert statuses == [200, 200, 200, 429]
