"""A booking held online in its iCalendar copy and its mail (issue 41): the join link as
LOCATION, URL and an RFC 7986 CONFERENCE property, and "Join: <link>" where the mail shows the
location. No database: the booking is built in memory, as the mail builds it from an event."""

from __future__ import annotations

from datetime import UTC, datetime

import icalendar
import pytest

from app.models import Attendee, Booking, LocationKind
from app.services.integrations.ical import Organizer, booking_calendar, join_link
from app.services.integrations.notifications.messages import Letterhead, Recipient, compose

NOW = datetime(2031, 1, 6, 12, tzinfo=UTC)
MEET_LINK = "https://meet.google.com/abc-defg-hij"
TEAMS_LINK = "https://teams.microsoft.com/l/meetup-join/19%3ameeting_x%40thread.v2/0"
MANAGE = "https://calendar.example.test/manage/abc"


def booking(location: str | None, kind: LocationKind, status: str = "confirmed") -> Booking:
    made = Booking(
        id=7,
        sub_account_id=1,
        uid="kY3v0c8mQ1uQx8bq4w2H7A",
        status=status,
        sequence=1,
        title="Consultation",
        description=None,
        location=location,
        location_kind=kind,
        timezone="America/New_York",
        meta={},
        start_at=datetime(2031, 1, 7, 15, tzinfo=UTC),
        end_at=datetime(2031, 1, 7, 15, 30, tzinfo=UTC),
        created_at=NOW,
        updated_at=NOW,
    )
    made.attendees = [Attendee(email="pat@example.test", name="Pat", timezone="Europe/Berlin")]
    return made


def vevent(made: Booking, **kwargs) -> icalendar.Event:
    return icalendar.Calendar.from_ical(booking_calendar(made, now=NOW, **kwargs)).walk("VEVENT")[0]


@pytest.mark.parametrize(
    ("link", "kind", "label"),
    [
        (MEET_LINK, LocationKind.GOOGLE_MEET, "Google Meet"),
        (TEAMS_LINK, LocationKind.MICROSOFT_TEAMS, "Microsoft Teams"),
        ("https://zoom.example.test/j/123", LocationKind.LINK, "Online meeting"),
    ],
)
def test_a_meeting_link_is_the_location_the_url_and_a_conference(link, kind, label):
    event = vevent(booking(link, kind))
    assert str(event["LOCATION"]) == str(event["URL"]) == link
    (conference,) = event.conferences
    assert (conference.uri, conference.feature, conference.label) == (link, "VIDEO", label)
    text = booking_calendar(booking(link, kind), now=NOW).decode()
    assert "CONFERENCE;" in text and "VALUE=URI" in text


def test_the_manage_link_stays_in_the_description_when_the_url_is_the_meetings():
    event = vevent(booking(MEET_LINK, LocationKind.GOOGLE_MEET), manage_url=MANAGE)
    assert str(event["URL"]) == MEET_LINK
    assert f"Reschedule or cancel: {MANAGE}" in str(event["DESCRIPTION"])


@pytest.mark.parametrize(
    ("location", "kind"),
    [
        ("Video call", LocationKind.GOOGLE_MEET),  # the worker has no link yet
        (None, LocationKind.MICROSOFT_TEAMS),
        ("https://maps.example.test/clinic", LocationKind.IN_PERSON),  # an address's map
        ("+1 212 555 0100", LocationKind.PHONE),
        ("not a link", LocationKind.LINK),
    ],
)
def test_no_conference_without_a_link_to_join(location, kind):
    made = booking(location, kind)
    assert join_link(made) is None
    event = vevent(made)
    assert "CONFERENCE" not in event and "URL" not in event
    assert event.get("LOCATION") == location or (location is None and "LOCATION" not in event)


def letter(made: Booking, kind: str, *, owner: bool = False):
    recipient = Recipient(
        "front-desk@clinic.test" if owner else "pat@example.test",
        None if owner else "Pat",
        "Europe/Berlin",
        is_owner=owner,
        manage_url=None if owner else MANAGE,
    )
    head = Letterhead(
        "Bookings <bookings@service.test>",
        "Clinic",
        Organizer("front-desk@clinic.test", "Clinic"),
    )
    return compose(made, kind, recipient, head, now=NOW, dedupe_key="k")


def test_the_mail_says_join_with_the_link_where_it_shows_the_location():
    mail = letter(booking(MEET_LINK, LocationKind.GOOGLE_MEET), "booking.rescheduled")
    text = mail.get_body(("plain",)).get_content()
    assert f"Join: {MEET_LINK}" in text and "Where:" not in text
    html = mail.get_body(("html",)).get_content()
    assert f'<a href="{MEET_LINK}">{MEET_LINK}</a>' in html


def test_a_mail_without_a_link_shows_where():
    mail = letter(booking("Room 2", LocationKind.IN_PERSON), "booking.created")
    text = mail.get_body(("plain",)).get_content()
    assert "Where: Room 2" in text and "Join:" not in text


def test_the_update_that_brings_the_link_says_so():
    made = booking(TEAMS_LINK, LocationKind.MICROSOFT_TEAMS)
    mail = letter(made, "booking.updated")
    assert mail["Subject"].startswith("Updated: Consultation — ")
    text = mail.get_body(("plain",)).get_content()
    assert "The link to join your booking is ready." in text
    assert f"Join: {TEAMS_LINK}" in text
    owners = letter(made, "booking.updated", owner=True).get_body(("plain",)).get_content()
    assert "The link to join a booking is ready." in owners


def test_a_cancelled_meetings_mail_offers_no_link_to_join():
    mail = letter(booking(MEET_LINK, LocationKind.GOOGLE_MEET, "cancelled"), "booking.cancelled")
    text = mail.get_body(("plain",)).get_content()
    assert "Join:" not in text and MEET_LINK not in text
