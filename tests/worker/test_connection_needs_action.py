"""Health a person can act on: a revoked grant, a deleted calendar, a feed that answers 404
make the connection say what to do ("reconnect") on the dashboard, in ``flask connections
list`` and in ``/metrics``, and its people are mailed once (a real SMTP server in the test),
until it has worked again; the busy time it brought stays in force meanwhile. Against the
loopback fake of Google and a feed server of the test's own.

"The worker runs" is what its ``calendars.sync`` task does for one connection
(``sync_and_follow_up``, with the task's own link builder), at a fixed instant far in the
future (``NOW``), so nothing depends on today's date.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from app.extensions import db
from app.jobs.calendars import sync_and_follow_up
from app.models import CalendarConnection, MailMessage
from app.services.integrations.calendars.oauth import Grant
from tests.dashboard_users import agency_user, owner_email, sign_in
from tests.factories import TenantFactory, external_busy_rows, make_sub_account
from tests.feed_servers import feed_server
from tests.mail_servers import smtp_server
from tests.oauth_fakes import ACCOUNT_EMAIL as EMAIL
from worker.tasks.calendars import connection_page
from worker.tasks.calendars import sync as sync_task

NOW = datetime(2031, 1, 6, 12, tzinfo=UTC)  # a Monday
LATER = NOW + timedelta(minutes=5)
PUBLIC_URL = "https://bookings.example.test"
TOKEN = "scrape-token-1234"
SECRET_KEY = "test-secret-key"


def at(day: int, hour: int) -> datetime:
    return datetime(2031, 1, day, hour, tzinfo=UTC)


def worker_runs(connection_id: int, now: datetime = NOW):
    result = sync_and_follow_up(connection_id, now=now, page=connection_page)
    db.session.commit()
    return result


def connection(connection_id: int) -> CalendarConnection:
    return db.session.get(CalendarConnection, connection_id, populate_existing=True)


def mail_about_connections() -> list[MailMessage]:
    return list(
        db.session.scalars(
            select(MailMessage)
            .where(MailMessage.kind == "connection.needs_action")
            .order_by(MailMessage.id)
        )
    )


@pytest.fixture
def smtp():
    """A real SMTP server: (its SMTP_URL, what it received)."""
    with smtp_server() as server:
        yield server


@pytest.fixture
def inbox(smtp):
    return smtp[1]


@pytest.fixture
def google_app(make_app, google, smtp):
    app = make_app(
        **google.app_settings(),
        PUBLIC_URL=PUBLIC_URL,
        METRICS_TOKEN=TOKEN,
        SMTP_URL=smtp[0],
    )
    with app.app_context():
        yield app
        db.session.remove()


def connect(google, **fields):
    tenant = TenantFactory().create(
        calendarConnections=[
            {
                "name": "Google",
                "kind": "google",
                "refreshToken": google.issue_refresh_token(EMAIL),
                "writeBack": False,
                **fields,
            }
        ]
    )
    return tenant, tenant.connections["Google"]


def revoked(google):
    """A tenant whose Google connection synced once (one busy event), then lost its grant."""
    google.add_event(EMAIL, at(7, 15), at(7, 16))
    tenant, connection_id = connect(google)
    assert worker_runs(connection_id).ok
    google.revoke_grants(EMAIL)
    return tenant, connection_id


def reconnect(google, connection_id: int) -> None:
    """The person connects the same account again: a new grant."""
    grant = Grant(google.issue_refresh_token(EMAIL))
    connection(connection_id).encrypted_secret = grant.sealed(SECRET_KEY)
    db.session.commit()


def page_url(tenant, connection_id: int) -> str:
    return f"{PUBLIC_URL}/dashboard/s/{tenant.sub_account_id}/connections/{connection_id}"


def gauge(app) -> str:
    response = app.test_client().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    return re.search(
        r"^calendar_connections_needing_action (\S+)$", response.get_data(as_text=True), re.M
    ).group(1)


def test_a_revoked_grant_needs_action_reconnect_and_keeps_the_busy_time(google_app, google):
    _, connection_id = revoked(google)
    result = worker_runs(connection_id, now=LATER)
    assert (result.status, result.retryable) == ("failed", False)
    assert connection(connection_id).needs_action == "reconnect"
    assert [(r.start_at, r.end_at) for r in external_busy_rows(connection_id)] == [
        (at(7, 15), at(7, 16))
    ]


def test_the_owner_is_mailed_once_after_two_failing_syncs(google_app, google, inbox):
    tenant, connection_id = revoked(google)
    worker_runs(connection_id, now=LATER)
    worker_runs(connection_id, now=LATER + timedelta(minutes=5))
    (message,) = inbox.wait_for(1)
    assert message["To"] == owner_email(tenant)
    assert message["Subject"] == "Action needed for Google: reconnect"
    text = message.get_body(("plain",)).get_content()
    assert '"Google"' in text
    assert "What happened: Google no longer accepts this connection" in text
    assert "What to do: reconnect, on the connection's page:" in text
    assert page_url(tenant, connection_id) in text
    assert [m.recipient for m in mail_about_connections()] == [owner_email(tenant)]
    assert connection(connection_id).action_mailed_at == LATER


def test_agency_users_granted_the_sub_account_are_mailed_too(google_app, google, inbox):
    tenant, connection_id = revoked(google)
    helper = agency_user(tenant, tenant.sub_account_id, email="helper@agency.test")
    elsewhere = make_sub_account(tenant)
    agency_user(tenant, elsewhere.id, email="other@agency.test")
    worker_runs(connection_id, now=LATER)
    assert sorted(m.recipient for m in mail_about_connections()) == sorted(
        [owner_email(tenant), helper.email]
    )


def test_the_dashboard_says_needs_action_reconnect_in_words(google_app, google):
    tenant, connection_id = revoked(google)
    worker_runs(connection_id, now=LATER)
    client = google_app.test_client()
    sign_in(client, owner_email(tenant))
    path = page_url(tenant, connection_id).removeprefix(PUBLIC_URL)
    for page in (path, path.rsplit("/", 1)[0]):
        text = client.get(page).get_data(as_text=True)
        assert "Needs action: reconnect</span> (1 failed in a row)" in text


def test_connections_list_says_what_to_do(google_app, google):
    _, connection_id = revoked(google)
    worker_runs(connection_id, now=LATER)
    result = google_app.test_cli_runner().invoke(args=["connections", "list"])
    assert result.exit_code == 0, result.output
    (listed,) = [json.loads(line) for line in result.output.splitlines()]
    assert (listed["id"], listed["needsAction"]) == (connection_id, "reconnect")
    assert listed["actionMailedAt"] == "2031-01-06T12:05:00Z"


def test_the_metrics_gauge_counts_connections_needing_action(google_app, google):
    _, connection_id = revoked(google)
    assert gauge(google_app) == "0.0"
    worker_runs(connection_id, now=LATER)
    assert gauge(google_app) == "1.0"


def test_a_successful_sync_clears_what_was_needed(google_app, google):
    _, connection_id = revoked(google)
    worker_runs(connection_id, now=LATER)
    reconnect(google, connection_id)
    assert worker_runs(connection_id, now=LATER + timedelta(minutes=5)).ok
    healed = connection(connection_id)
    assert (healed.needs_action, healed.action_mailed_at) == (None, None)
    assert gauge(google_app) == "0.0"


def test_failing_again_after_recovering_mails_again(google_app, google, inbox):
    _, connection_id = revoked(google)
    worker_runs(connection_id, now=LATER)
    reconnect(google, connection_id)
    worker_runs(connection_id, now=LATER + timedelta(minutes=5))
    google.revoke_grants(EMAIL)
    worker_runs(connection_id, now=LATER + timedelta(minutes=10))
    worker_runs(connection_id, now=LATER + timedelta(minutes=15))
    assert len(inbox.wait_for(2)) == 2
    assert len(mail_about_connections()) == 2


def test_a_mail_the_server_refused_is_sent_at_the_next_failing_sync(google_app, google, inbox):
    _, connection_id = revoked(google)
    inbox.refuse = True
    worker_runs(connection_id, now=LATER)
    assert connection(connection_id).action_mailed_at is None
    inbox.refuse = False
    worker_runs(connection_id, now=LATER + timedelta(minutes=5))
    assert len(inbox.wait_for(1)) == 1
    assert connection(connection_id).action_mailed_at == LATER + timedelta(minutes=5)


def test_a_deleted_calendar_says_to_choose_another(google_app, google):
    team = google.add_calendar(EMAIL, "Team")
    _, connection_id = connect(google, calendars=[team])
    worker_runs(connection_id)
    google.delete_calendar(team)
    worker_runs(connection_id, now=LATER)
    assert connection(connection_id).needs_action == "choose another calendar"


def test_the_worker_task_mails_a_link_to_the_connections_page(google_app, google, inbox):
    tenant, connection_id = revoked(google)
    assert sync_task.apply(args=[connection_id]).get() == "failed"
    (message,) = inbox.wait_for(1)
    assert page_url(tenant, connection_id) in message.get_body(("plain",)).get_content()


# Feeds


@pytest.fixture
def feed_app(make_app, smtp):
    app = make_app(CALDAV_ALLOW_PRIVATE=True, SMTP_URL=smtp[0], PUBLIC_URL=PUBLIC_URL)
    with app.app_context():
        yield app
        db.session.remove()


@pytest.fixture
def feed():
    with feed_server() as served:
        served.serve(
            "\r\n".join(
                [
                    "BEGIN:VCALENDAR",
                    "VERSION:2.0",
                    "PRODID:-//needs action tests//EN",
                    "BEGIN:VEVENT",
                    "UID:rota",
                    "DTSTAMP:20300101T000000Z",
                    "DTSTART:20310107T150000Z",
                    "DTEND:20310107T160000Z",
                    "END:VEVENT",
                    "END:VCALENDAR",
                    "",
                ]
            )
        )
        yield served


def subscribe(feed) -> int:
    tenant = TenantFactory().create(
        calendarConnections=[{"name": "Rota", "kind": "ics", "url": feed.url}]
    )
    return tenant.connections["Rota"]


def test_a_feed_answering_404_says_to_subscribe_again_and_keeps_its_busy_time(
    feed_app, feed, inbox
):
    connection_id = subscribe(feed)
    worker_runs(connection_id)
    feed.answer = 404
    worker_runs(connection_id, now=LATER)
    worker_runs(connection_id, now=LATER + timedelta(minutes=5))
    assert connection(connection_id).needs_action == "subscribe again with the feed's new address"
    assert len(external_busy_rows(connection_id)) == 1
    (message,) = inbox.wait_for(1)
    assert (
        message["Subject"] == "Action needed for Rota: subscribe again with the feed's new address"
    )
    assert "HTTP 404" in message.get_body(("plain",)).get_content()


def test_a_failure_that_may_mend_by_itself_needs_no_one(feed_app, feed):
    connection_id = subscribe(feed)
    feed.answer = 503
    worker_runs(connection_id)
    assert connection(connection_id).needs_action is None
    assert mail_about_connections() == []


def test_a_failure_that_may_mend_by_itself_leaves_what_was_needed(feed_app, feed):
    connection_id = subscribe(feed)
    feed.answer = 404
    worker_runs(connection_id)
    feed.answer = 503
    worker_runs(connection_id, now=LATER)
    assert connection(connection_id).needs_action == "subscribe again with the feed's new address"
    assert len(mail_about_connections()) == 1
