"""Push channels against the Google and Microsoft fakes, with the app served on loopback (a werkzeug
server in the test process, ``PUBLIC_URL`` its address) so the fakes deliver their messages to it
for real: channels made under ``PUBLIC_URL``, a change at the provider asks for exactly one sync
however many messages it sends, forged and stale messages do nothing, channels are renewed before
they expire and stopped when no longer needed.

No worker runs here: a sync asked for is seen as the connection's mark
(``sync_requested_at``) and the enqueueing the app's registry records."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import delete, event, select, update
from werkzeug.serving import make_server

from app.config import Settings, settings_of
from app.counters import PUSH_NOTIFICATIONS
from app.extensions import db
from app.jobs.calendars import keep_channels
from app.models import CalendarConnection, PushChannel
from app.models.types import utcnow
from app.push import PUSH_MAX_BODY_BYTES
from app.services.integrations.calendars.connections import remove_connection
from app.services.integrations.calendars.consent import choose_calendars
from app.services.integrations.calendars.push import (
    GRAPH_ENTRIES_READ,
    connections_due_for_channels,
    push_enabled,
)
from app.services.integrations.registry import app_registry
from tests.factories import TenantFactory, changed_settings
from tests.oauth_fakes import ACCOUNT_EMAIL
from tests.servers import free_port, serve_in_thread

START = datetime(2031, 1, 6, 12, tzinfo=UTC)


@pytest.fixture
def served(make_app):
    """Builds an app with ``settings``, served on a free loopback port that is its
    ``PUBLIC_URL``, with push on; records the syncs it enqueues."""
    servers = []

    def serve(**settings):
        port = free_port()
        app = make_app(PUBLIC_URL=f"http://127.0.0.1:{port}", CALENDAR_PUSH="on", **settings)
        app.handed_over = []
        app.handed = threading.Condition()

        def record(task, args, delay):
            with app.handed:
                app.handed_over.append(args[0])
                app.handed.notify_all()

        app_registry(app).set_task_dispatcher(record)
        server = make_server("127.0.0.1", port, app, threaded=True)
        serve_in_thread(server)
        servers.append(server)
        return app

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


class Connected:
    """A tenant with one connection of ``kind`` to the fake's account, its mark cleared (as
    after its first sync), and its channels made."""

    def __init__(self, app, fake, kind):
        self.app, self.fake, self.kind = app, fake, kind
        self.tenant = TenantFactory().create(
            calendarConnections=[
                {
                    "name": "Calendar",
                    "kind": kind,
                    "refreshToken": fake.issue_refresh_token(ACCOUNT_EMAIL),
                }
            ]
        )
        self.connection_id = self.tenant.connections["Calendar"]
        self.calendar_id = ACCOUNT_EMAIL if kind == "google" else fake.default_calendar_id()
        self.clear_mark()

    def set(self, **values):
        """Change the connection's row (committed)."""
        db.session.execute(
            update(CalendarConnection)
            .where(CalendarConnection.id == self.connection_id)
            .values(**values)
        )
        db.session.commit()

    def clear_mark(self):
        self.set(sync_requested_at=None)
        with self.app.handed:
            self.app.handed_over.clear()

    def keep(self, now=None):
        return keep_channels(self.connection_id, now or utcnow())

    def channels(self):
        return db.session.scalars(
            select(PushChannel)
            .where(PushChannel.calendar_connection_id == self.connection_id)
            .order_by(PushChannel.id)
            .execution_options(populate_existing=True)
        ).all()

    def mark(self):
        return db.session.scalar(
            select(CalendarConnection.sync_requested_at)
            .where(CalendarConnection.id == self.connection_id)
            .execution_options(populate_existing=True)
        )

    def add_event(self, hour=15):
        return self.fake.add_event(
            self.calendar_id,
            START + timedelta(hours=hour),
            START + timedelta(hours=hour, minutes=30),
        )

    def wait_handed_over(self, count=1, timeout=10.0):
        with self.app.handed:
            assert self.app.handed.wait_for(lambda: len(self.app.handed_over) >= count, timeout), (
                self.app.handed_over
            )
            return list(self.app.handed_over)


@pytest.fixture
def google_push(served, google):
    app = served(**google.app_settings())
    with app.app_context():
        connected = Connected(app, google, "google")
        kept = connected.keep()
        assert (kept.made, kept.errors) == (1, ())
        yield connected
        db.session.remove()


@pytest.fixture
def microsoft_push(served, microsoft):
    app = served(**microsoft.app_settings())
    with app.app_context():
        connected = Connected(app, microsoft, "microsoft")
        kept = connected.keep()
        assert (kept.made, kept.errors) == (1, ())
        yield connected
        db.session.remove()


def refused_count(provider):
    return PUSH_NOTIFICATIONS.labels(provider, "refused")._value.get()


# Google


def test_a_google_calendar_gets_a_watch_channel_addressed_under_public_url(google_push):
    (channel,) = google_push.fake.channels()
    assert channel.address == settings_of(google_push.app).base_url + "/push/google"
    (row,) = google_push.channels()
    assert (row.channel_id, row.resource_id) == (channel.id, channel.resource_id)
    assert channel.token and row.secret_digest != channel.token  # only its digest is kept
    (first,) = google_push.fake.wait_for_pushes(1)
    assert (first.state, first.status) == ("sync", 200)
    assert google_push.mark() is None  # the sync message is only acknowledged


def test_a_change_at_google_asks_for_a_sync_of_the_connection(google_push):
    google_push.fake.wait_for_pushes(1)
    google_push.add_event()
    pushes = google_push.fake.wait_for_pushes(2)
    assert (pushes[-1].state, pushes[-1].status) == ("exists", 200)
    assert google_push.wait_handed_over() == [google_push.connection_id]
    assert google_push.mark() is not None


def test_a_burst_of_google_messages_queues_one_sync(google_push):
    for hour in range(9, 17):
        google_push.add_event(hour)
    pushes = google_push.fake.flush_pushes()
    assert [p.status for p in pushes] == [200] * 9  # the sync message and eight changes
    assert google_push.app.handed_over == [google_push.connection_id]


def google_message(app, channel, **headers):
    sent = {
        "X-Goog-Channel-ID": channel.channel_id,
        "X-Goog-Channel-Token": "not-the-token",
        "X-Goog-Resource-ID": channel.resource_id,
        "X-Goog-Resource-State": "exists",
        "X-Goog-Message-Number": "7",
        **headers,
    }
    return httpx.post(settings_of(app).base_url + "/push/google", headers=sent, timeout=10)


@pytest.mark.parametrize(
    "forged",
    [
        {},  # a wrong token
        {"X-Goog-Channel-ID": "no-such-channel"},
        {"X-Goog-Resource-ID": "another-resource"},
        {"X-Goog-Channel-Token": None},
    ],
)
def test_a_forged_google_message_asks_for_nothing_and_calls_no_provider(google_push, forged):
    google_push.fake.flush_pushes()
    (channel,) = google_push.channels()
    google_push.fake.clear_requests()
    before = refused_count("google")
    headers = {k: v for k, v in forged.items() if v is not None}
    if forged.get("X-Goog-Channel-Token", "") is None:
        headers["X-Goog-Channel-Token"] = ""
    answer = google_message(google_push.app, channel, **headers)
    assert (answer.status_code, answer.content) == (200, b"")
    assert google_push.mark() is None and google_push.app.handed_over == []
    assert google_push.fake.requests == []
    assert refused_count("google") == before + 1


def test_a_message_for_a_switched_off_connection_asks_for_nothing(google_push):
    google_push.fake.flush_pushes()
    connection = db.session.get(CalendarConnection, google_push.connection_id)
    connection.active = False
    db.session.commit()
    google_push.add_event()
    (*_, last) = google_push.fake.flush_pushes()
    assert last.status == 200
    assert google_push.mark() is None and google_push.app.handed_over == []


def test_a_google_message_without_its_headers_is_a_400(google_push):
    answer = httpx.post(settings_of(google_push.app).base_url + "/push/google", timeout=10)
    assert answer.status_code == 400


def test_google_channels_are_renewed_a_day_before_they_expire(google_push):
    (old,) = google_push.channels()
    assert google_push.keep(old.expires_at - timedelta(days=2)).renewed == 0
    kept = google_push.keep(old.expires_at - timedelta(hours=23))
    assert (kept.renewed, kept.errors) == (1, ())
    (new,) = google_push.channels()
    assert new.channel_id != old.channel_id
    live = [c for c in google_push.fake.channels() if not c.stopped]
    assert [c.id for c in live] == [new.channel_id]
    (stopped,) = [c for c in google_push.fake.channels(include_ended=True) if c.stopped]
    assert stopped.id == old.channel_id


def test_removing_a_connection_stops_its_google_channel(google_push):
    remove_connection(google_push.connection_id)
    db.session.commit()
    assert [c.stopped for c in google_push.fake.channels(include_ended=True)] == [True]
    assert db.session.scalars(select(PushChannel)).all() == []


def test_a_calendar_no_longer_chosen_has_its_channel_stopped(google_push):
    other = google_push.fake.add_calendar(ACCOUNT_EMAIL, "Team")
    sub_account = db.session.get(CalendarConnection, google_push.connection_id).sub_account_id
    from app.models import SubAccount

    choose_calendars(
        db.session.get(SubAccount, sub_account),
        google_push.connection_id,
        [other],
        None,
        False,
    )
    db.session.commit()
    kept = google_push.keep()
    assert (kept.stopped, kept.made) == (1, 1)
    live = [c for c in google_push.fake.channels() if not c.stopped]
    assert [c.calendar_id for c in live] == [other]


def test_with_push_switched_off_channels_are_stopped_and_none_made(google_push):
    with changed_settings(google_push.app, calendar_push="off"):
        kept = google_push.keep()
    assert (kept.stopped, kept.made) == (1, 0)
    assert google_push.channels() == []
    assert all(c.stopped for c in google_push.fake.channels(include_ended=True))


# What beat's upkeep gives a task of its own (``calendars.keep_channels``)


def test_the_upkeep_leaves_a_connection_whose_channels_are_not_due(google_push):
    (channel,) = google_push.channels()
    assert connections_due_for_channels(channel.expires_at - timedelta(days=2)) == []


def test_the_upkeep_takes_a_connection_with_a_channel_a_day_from_expiry(google_push):
    (channel,) = google_push.channels()
    due = channel.expires_at - timedelta(hours=23)
    assert connections_due_for_channels(due) == [google_push.connection_id]


def test_the_upkeep_takes_a_connection_with_a_calendar_that_has_no_channel(google_push):
    db.session.execute(delete(PushChannel))
    db.session.commit()
    assert connections_due_for_channels(utcnow()) == [google_push.connection_id]


def test_the_upkeep_takes_a_switched_off_connection_that_still_has_channels(google_push):
    google_push.set(active=False)
    assert connections_due_for_channels(utcnow()) == [google_push.connection_id]


def test_with_push_switched_off_the_upkeep_takes_every_connection_with_channels(google_push):
    with changed_settings(google_push.app, calendar_push="off"):
        assert connections_due_for_channels(utcnow()) == [google_push.connection_id]


# Microsoft


def test_a_microsoft_calendar_gets_a_subscription_after_the_validation_handshake(
    microsoft_push,
):
    (subscription,) = microsoft_push.fake.subscriptions()
    base = settings_of(microsoft_push.app).base_url
    assert subscription.notification_url == base + "/push/microsoft"
    assert subscription.lifecycle_url == base + "/push/microsoft/lifecycle"
    assert subscription.change_types == ("created", "updated", "deleted")
    assert {v.status for v in microsoft_push.fake.validations} == {200}
    (row,) = microsoft_push.channels()
    assert row.channel_id == subscription.id
    assert row.secret_digest != subscription.client_state


def test_the_validation_token_is_echoed_as_plain_text(microsoft_push):
    url = settings_of(microsoft_push.app).base_url + "/push/microsoft"
    answer = httpx.post(url, params={"validationToken": "Validation: <b>token</b>"}, timeout=10)
    assert answer.status_code == 200
    assert answer.text == "Validation: <b>token</b>"
    assert answer.headers["Content-Type"].startswith("text/plain")
    assert answer.headers["X-Content-Type-Options"] == "nosniff"
    too_long = httpx.post(url, params={"validationToken": "x" * 2000}, timeout=10)
    assert too_long.status_code == 400


def test_a_change_at_microsoft_asks_for_a_sync_answered_202(microsoft_push):
    microsoft_push.add_event()
    (push,) = microsoft_push.fake.wait_for_pushes(1)
    assert push.status == 202
    assert microsoft_push.wait_handed_over() == [microsoft_push.connection_id]


def test_a_microsoft_notification_with_a_wrong_client_state_asks_for_nothing(microsoft_push):
    (row,) = microsoft_push.channels()
    before = refused_count("microsoft")
    body = {"value": [{"subscriptionId": row.channel_id, "clientState": "guess"}]}
    answer = httpx.post(
        settings_of(microsoft_push.app).base_url + "/push/microsoft", json=body, timeout=10
    )
    assert answer.status_code == 202
    assert microsoft_push.mark() is None
    assert refused_count("microsoft") == before + 1


@pytest.mark.parametrize("body", [b"not json", b'{"value": 3}', b"[]"])
def test_a_malformed_microsoft_notification_is_a_400(microsoft_push, body):
    answer = httpx.post(
        settings_of(microsoft_push.app).base_url + "/push/microsoft",
        content=body,
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    assert answer.status_code == 400


def test_an_oversized_notification_is_a_413(microsoft_push):
    body = b'{"value": [' + b'{"subscriptionId": "x"},' * 20000 + b"{}]}"
    answer = httpx.post(
        settings_of(microsoft_push.app).base_url + "/push/microsoft",
        content=body,
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    assert answer.status_code == 413


def test_reauthorization_required_renews_the_subscription(microsoft_push):
    (subscription,) = microsoft_push.fake.subscriptions()
    push = microsoft_push.fake.send_lifecycle(subscription.id, "reauthorizationRequired")
    assert push.status == 202
    assert microsoft_push.wait_handed_over() == [microsoft_push.connection_id]
    microsoft_push.fake.clear_requests()
    kept = microsoft_push.keep()
    assert kept.renewed == 1
    assert microsoft_push.fake.requests_to("/subscriptions/", method="PATCH")


def test_a_removed_subscription_is_made_again(microsoft_push):
    (subscription,) = microsoft_push.fake.subscriptions()
    microsoft_push.fake.send_lifecycle(subscription.id, "subscriptionRemoved")
    microsoft_push.wait_handed_over()
    assert microsoft_push.channels() == []
    assert microsoft_push.keep().made == 1
    (again,) = microsoft_push.fake.subscriptions()
    assert again.id != subscription.id


def test_missed_notifications_ask_for_a_sync(microsoft_push):
    (subscription,) = microsoft_push.fake.subscriptions()
    microsoft_push.fake.send_lifecycle(subscription.id, "missed")
    assert microsoft_push.wait_handed_over() == [microsoft_push.connection_id]


def test_microsoft_subscriptions_are_renewed_a_day_before_they_expire(microsoft_push):
    (row,) = microsoft_push.channels()
    expires = row.expires_at
    microsoft_push.fake.advance_clock((expires - utcnow() - timedelta(hours=20)).total_seconds())
    kept = microsoft_push.keep(expires - timedelta(hours=20))
    assert (kept.renewed, kept.errors) == (1, ())
    (renewed,) = microsoft_push.channels()
    assert renewed.channel_id == row.channel_id and renewed.expires_at > expires


def test_removing_a_connection_deletes_its_subscription(microsoft_push):
    remove_connection(microsoft_push.connection_id)
    db.session.commit()
    assert microsoft_push.fake.subscriptions() == []


# When push is on


@pytest.mark.parametrize(
    ("setting", "public_url", "on"),
    [
        ("auto", "https://calendar.example.com", True),
        ("auto", "http://127.0.0.1:5000", False),
        ("on", "http://127.0.0.1:5000", True),
        ("off", "https://calendar.example.com", False),
    ],
)
def test_push_is_on_with_an_https_public_url_or_when_forced(setting, public_url, on):
    assert push_enabled(Settings(calendar_push=setting, public_url=public_url)) is on


# What any client can send to the notification endpoints


def test_json_nested_deeper_than_the_parser_goes_is_a_400(client):
    body = b'{"value": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    for path in ("/push/microsoft", "/push/microsoft/lifecycle"):
        answer = client.post(path, data=body, content_type="application/json")
        assert answer.status_code == 400, path


def test_an_oversized_notification_says_its_own_limit(client):
    answer = client.post(
        "/push/microsoft", data=b"x" * (PUSH_MAX_BODY_BYTES + 1), content_type="application/json"
    )
    assert answer.status_code == 413
    assert answer.get_data(as_text=True) == "Request body too large (limit: 256 KiB)"


@pytest.fixture
def statements(app):
    """The SQL statements the app's engine runs while the test goes on, as a list."""
    ran: list[str] = []

    def count(conn, cursor, statement, *args):
        ran.append(statement)

    with app.app_context():
        engine = db.engine
    event.listen(engine, "before_cursor_execute", count)
    yield ran
    event.remove(engine, "before_cursor_execute", count)


def test_a_batch_of_unknown_subscriptions_costs_one_query_and_one_log_line(
    client, statements, caplog
):
    entries = [{"subscriptionId": f"guess-{n}", "clientState": "x"} for n in range(1000)]
    with caplog.at_level(logging.INFO, logger="app.services.integrations.calendars.push"):
        answer = client.post("/push/microsoft", json={"value": entries})
    assert answer.status_code == 202
    lookups = [s for s in statements if "push_channels" in s]
    assert len(lookups) == 1
    refused_lines = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(refused_lines) == 1
    assert f"{GRAPH_ENTRIES_READ} unknown subscription" in refused_lines[0].getMessage()


def test_the_notification_endpoints_share_one_count_per_address(make_app):
    app = make_app(PUSH_RATE_LIMIT="2/minute")
    client = app.test_client()
    answers = [
        client.post("/push/google").status_code,
        client.post("/push/microsoft", json={"value": []}).status_code,
        client.post("/push/microsoft/lifecycle", json={"value": []}).status_code,
    ]
    assert answers == [400, 202, 429]
