"""Google Meet and Microsoft Teams links made with a booking's calendar event (issue 41), against
the loopback fakes of Google Calendar and Microsoft Graph. Write-back and the mail run in-process
here; tests/worker/test_worker_meeting_links.py runs them through a real worker. Bookings lie at a
fixed instant far ahead (``NOW``): nothing depends on today."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import icalendar
import pytest
from sqlalchemy import select

from app.extensions import db
from app.jobs import outbox as outbox_job
from app.models import Booking, CalendarConnection, LocationKind, OutboxEvent, WrittenEvent
from app.models.calendar_connection import NO_EVENT_ID
from app.services.integrations.calendars.connections import remove_connection
from app.services.integrations.calendars.providers.google import google_event_id, meet_request_id
from app.services.integrations.calendars.write_back import write_back_booking, write_back_delivery
from app.services.integrations.notifications.booking_mail import HANDLER_NAME as MAIL
from app.services.integrations.outbox import Delivery, DeliveryFailed
from tests.factories import TenantFactory, make_booking, provider_connection
from tests.mail_servers import ics_of, smtp_server
from tests.oauth_fakes import ACCOUNT_EMAIL as EMAIL

NOW = datetime(2031, 1, 6, 12, tzinfo=UTC)  # a Monday
MEET = "https://meet.google.com/"
TEAMS = "https://teams.microsoft.com/l/meetup-join/"
OWNER = "front-desk@clinic.test"


@pytest.fixture
def smtp():
    with smtp_server() as (url, inbox):
        yield url, inbox


@pytest.fixture
def meetings_app(make_app, google, microsoft, smtp):
    app = make_app(
        **google.app_settings(),
        **microsoft.app_settings(),
        SMTP_URL=smtp[0],
        MAIL_FROM="Bookings <bookings@service.test>",
    )
    with app.app_context():
        yield app
        db.session.remove()


@pytest.fixture
def inbox(smtp):
    return smtp[1]


def clinic(google=None, microsoft=None):
    """A sub account with a Google Meet and/or a Teams event type and the connection that
    makes each (Google's first when both)."""
    connections, event_types = [], [{"name": "Cleaning", "duration": 30}]
    if google is not None:
        connections.append(provider_connection(google, "Google"))
        event_types.append(meeting_type("Meet call", LocationKind.GOOGLE_MEET))
    if microsoft is not None:
        connections.append(provider_connection(microsoft, "Outlook"))
        event_types.append(meeting_type("Teams call", LocationKind.MICROSOFT_TEAMS))
    return TenantFactory().create(
        settings={"notificationEmail": OWNER},
        calendarConnections=connections,
        eventTypes=event_types,
    )


def meeting_type(name, kind):
    return {"name": name, "duration": 30, "location": "Video call", "locationKind": kind.value}


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2031, 1, day, hour, minute, tzinfo=UTC)


def meet_booking(tenant):
    return make_booking(
        tenant,
        at(7, 15),
        event_type="Meet call",
        location="Video call",
        location_kind=LocationKind.GOOGLE_MEET,
    )


def teams_booking(tenant):
    return make_booking(
        tenant,
        at(7, 15),
        event_type="Teams call",
        location="Video call",
        location_kind=LocationKind.MICROSOFT_TEAMS,
    )


def write(booking_id, writer=None):
    """One write-back of the booking as it is now, committed as the worker commits it (by
    ``writer``, when named: the same delivery run again)."""
    outcomes = write_back_booking(booking_id, now=NOW, writer=writer)
    db.session.commit()
    return outcomes


def stored(booking_id) -> Booking:
    db.session.expire_all()
    return db.session.get(Booking, booking_id)


def updates(booking_id) -> list[OutboxEvent]:
    return list(
        db.session.scalars(
            select(OutboxEvent).where(
                OutboxEvent.booking_id == booking_id, OutboxEvent.kind == "booking.updated"
            )
        )
    )


def delivery(booking) -> Delivery:
    return Delivery(
        event_id=0,
        kind="booking.created",
        booking_id=booking.id,
        sub_account_id=booking.sub_account_id,
        changed=(),
        occurred_at=NOW,
        attempt=1,
    )


def moved(booking, hours: int = 2) -> None:
    """The booking rescheduled, as the write path leaves it."""
    shift = timedelta(hours=hours)
    booking.start_at, booking.end_at = booking.start_at + shift, booking.end_at + shift
    booking.occupied_start += shift
    booking.occupied_end += shift
    booking.sequence += 1
    db.session.commit()


def cancelled(booking) -> None:
    booking.status = "cancelled"
    booking.sequence += 1
    db.session.commit()


# Google Meet


def test_a_meet_booking_has_its_events_conference_link_as_its_location(meetings_app, google):
    tenant = clinic(google=google)
    booking = meet_booking(tenant)
    (outcome,) = write(booking.id)
    assert outcome.error is None and outcome.join_url.startswith(MEET)

    event = google.event(EMAIL, google_event_id(booking.uid))
    conference = event["conferenceData"]
    assert conference["createRequest"]["requestId"] == meet_request_id(booking.uid)
    assert conference["createRequest"]["status"] == {"statusCode": "success"}
    assert conference["conferenceSolution"]["key"] == {"type": "hangoutsMeet"}
    (video,) = [e for e in conference["entryPoints"] if e["entryPointType"] == "video"]
    assert video["uri"] == outcome.join_url == event["hangoutLink"]
    (insert,) = google.requests_to("/events", method="POST")
    assert insert.query.get("conferenceDataVersion") == "1"

    now = stored(booking.id)
    assert (now.location, now.sequence) == (outcome.join_url, 1)
    (update,) = updates(booking.id)
    assert update.changed == ["location"]
    assert update.snapshot["booking"]["location"] == outcome.join_url


def test_a_retried_write_makes_no_second_meet_conference(meetings_app, google):
    tenant = clinic(google=google)
    booking = meet_booking(tenant)
    (first,) = write(booking.id)
    write_back_delivery(delivery(booking), NOW)  # the outbox offers the create again
    db.session.commit()
    (again,) = write(booking.id)  # the booking.updated that followed
    assert again.join_url == first.join_url
    assert len(google.conferences_made) == 1
    assert stored(booking.id).location == first.join_url
    assert len(updates(booking.id)) == 1  # the link changed once
    assert len(google.events(EMAIL)) == 1


def test_a_rescheduled_meet_booking_keeps_its_meeting_and_a_cancel_takes_it_away(
    meetings_app, google
):
    tenant = clinic(google=google)
    booking = meet_booking(tenant)
    (first,) = write(booking.id)
    conference_id = google.event(EMAIL, google_event_id(booking.uid))["conferenceData"][
        "conferenceId"
    ]

    moved(stored(booking.id))
    (outcome,) = write(booking.id)
    assert outcome.error is None and outcome.join_url == first.join_url
    event = google.event(EMAIL, google_event_id(booking.uid))
    assert event["start"]["dateTime"] == "2031-01-07T17:00:00Z"
    assert event["conferenceData"]["conferenceId"] == conference_id
    assert event["location"] == first.join_url  # the calendar's copy shows it too
    assert len(google.conferences_made) == 1
    assert stored(booking.id).location == first.join_url
    assert len(updates(booking.id)) == 1

    cancelled(stored(booking.id))
    (gone,) = write(booking.id)
    assert (gone.action, gone.error) == ("deleted", None)
    assert google.event(EMAIL, google_event_id(booking.uid))["status"] == "cancelled"
    assert google.events(EMAIL) == []


def test_a_meet_conference_google_is_still_making_is_asked_for_again(meetings_app, google):
    tenant = clinic(google=google)
    booking = meet_booking(tenant)
    google.conferences_pending = True
    with pytest.raises(DeliveryFailed, match="link is not ready yet"):
        write_back_delivery(delivery(booking), NOW)
    db.session.commit()
    assert stored(booking.id).location == "Video call"
    connection = db.session.get(CalendarConnection, tenant.connections["Google"])
    assert connection.last_write_error is None  # nothing for a person to do

    google.finish_conferences()
    write_back_delivery(delivery(booking), NOW)  # the retry
    db.session.commit()
    assert stored(booking.id).location.startswith(MEET)
    assert len(google.conferences_made) == 1


# Microsoft Teams


def teams_event(microsoft, booking_id):
    # Google's event is found by the booking's UID (NO_EVENT_ID); Graph's by the id it chose.
    [event_id] = db.session.scalars(
        select(WrittenEvent.event_id).where(
            WrittenEvent.booking_id == booking_id, WrittenEvent.event_id != NO_EVENT_ID
        )
    ).all()
    return microsoft.event(microsoft.default_calendar_id(), event_id)


def test_a_teams_booking_has_its_events_join_url_as_its_location(meetings_app, microsoft):
    tenant = clinic(microsoft=microsoft)
    booking = teams_booking(tenant)
    (outcome,) = write(booking.id)
    assert outcome.error is None and outcome.join_url.startswith(TEAMS)
    event = teams_event(microsoft, booking.id)
    assert (event["isOnlineMeeting"], event["onlineMeetingProvider"]) == (
        True,
        "teamsForBusiness",
    )
    assert event["onlineMeeting"]["joinUrl"] == outcome.join_url

    now = stored(booking.id)
    assert (now.location, now.sequence) == (outcome.join_url, 1)
    (update,) = updates(booking.id)
    assert update.changed == ["location"]
    assert update.snapshot["booking"]["location"] == outcome.join_url


def test_a_retried_teams_create_whose_id_was_not_kept_makes_no_second_meeting(
    meetings_app, microsoft
):
    tenant = clinic(microsoft=microsoft)
    booking = teams_booking(tenant)
    write_back_booking(booking.id, now=NOW, writer="outbox event 1")
    db.session.rollback()  # the worker stopped before the event's id and the link were saved
    assert stored(booking.id).location == "Video call"
    (outcome,) = write(booking.id, writer="outbox event 1")  # its delivery, run again
    (again,) = write(booking.id)
    assert outcome.join_url == again.join_url
    assert len(microsoft.meetings_made) == 1
    assert len(microsoft.events(microsoft.default_calendar_id())) == 1
    assert len(updates(booking.id)) == 1


def test_a_rescheduled_teams_booking_keeps_its_meeting_and_a_cancel_takes_it_away(
    meetings_app, microsoft
):
    calendar = microsoft.default_calendar_id()
    tenant = clinic(microsoft=microsoft)
    booking = teams_booking(tenant)
    (first,) = write(booking.id)
    moved(stored(booking.id))
    (outcome,) = write(booking.id)
    assert outcome.join_url == first.join_url
    event = teams_event(microsoft, booking.id)
    assert event["start"]["dateTime"].startswith("2031-01-07T17:00:00")
    assert event["onlineMeeting"]["joinUrl"] == first.join_url
    assert len(microsoft.meetings_made) == 1

    cancelled(stored(booking.id))
    (gone,) = write(booking.id)
    assert (gone.action, gone.error) == ("deleted", None)
    assert microsoft.events(calendar) == []


def test_a_calendar_without_teams_says_so_and_keeps_the_location(meetings_app, microsoft):
    microsoft.set_online_meeting_providers(microsoft.default_calendar_id(), ())
    tenant = clinic(microsoft=microsoft)
    booking = teams_booking(tenant)
    (outcome,) = write(booking.id)
    assert "does not offer Microsoft Teams" in outcome.error
    assert stored(booking.id).location == "Video call"
    assert updates(booking.id) == []


# Both, and neither


def test_one_calendar_makes_the_meeting_and_the_others_show_its_link(
    meetings_app, google, microsoft
):
    tenant = clinic(google=google, microsoft=microsoft)
    booking = meet_booking(tenant)
    first = write(booking.id)
    link = next(o.join_url for o in first if o.join_url)
    assert [o.join_url is not None for o in first] == [True, False]  # Google's; Outlook's not
    write(booking.id)  # the booking.updated that followed
    event = teams_event(microsoft, booking.id)
    assert event["isOnlineMeeting"] is False and event["location"]["displayName"] == link
    assert (len(google.conferences_made), len(microsoft.meetings_made)) == (1, 0)


def test_without_a_calendar_that_makes_it_a_booking_keeps_its_location(
    meetings_app, google, microsoft
):
    tenant = clinic(google=google, microsoft=microsoft)
    remove_connection(tenant.connections["Google"])  # after the event type was saved
    db.session.commit()
    booking = meet_booking(tenant)
    (outcome,) = write(booking.id)  # into Outlook alone, without a meeting
    assert (outcome.error, outcome.join_url) == (None, None)
    assert stored(booking.id).location == "Video call"
    assert updates(booking.id) == []
    assert google.conferences_made == [] and microsoft.meetings_made == []


# The mail


def test_the_link_is_mailed_to_the_attendee_with_an_invitation_that_carries_it(
    meetings_app, google, inbox
):
    tenant = clinic(google=google)
    booking = meet_booking(tenant)
    (outcome,) = write(booking.id)
    (update,) = updates(booking.id)
    outbox_job.handle_event(update.id, MAIL, NOW)
    db.session.commit()

    (mail,) = inbox.to("pat@example.test")
    assert mail["Subject"].startswith("Updated: ")
    text = mail.get_body(("plain",)).get_content()
    assert "The link to join your booking is ready." in text
    assert f"Join: {outcome.join_url}" in text and "Where:" not in text
    assert f'href="{outcome.join_url}"' in mail.get_body(("html",)).get_content()
    event = icalendar.Calendar.from_ical(ics_of(mail)).walk("VEVENT")[0]
    assert str(event["LOCATION"]) == str(event["URL"]) == outcome.join_url
    (conference,) = event.conferences
    assert (conference.uri, conference.feature, conference.label) == (
        outcome.join_url,
        "VIDEO",
        "Google Meet",
    )
    assert event["SEQUENCE"] == 1
    (owners,) = inbox.to(OWNER)
    assert "The link to join a booking is ready." in owners.get_body(("plain",)).get_content()
