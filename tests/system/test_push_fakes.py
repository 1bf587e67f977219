"""The push notifications and live checks of the loopback fakes (``tests.google_servers``,
``tests.microsoft_servers``), over real HTTP: Google's notification channels (events.watch,
their messages, channels.stop) and freebusy.query; Graph's non-delta calendarView, its
subscriptions (the validation handshake, renewal, deletion), change and lifecycle
notifications; and both fakes' slow answers (``stall``). The app's tests trust these fakes for
what Google and Microsoft would send and answer; these tests are why they may.

Messages are received by a small werkzeug server of the test's own on a free loopback port
(``Receiver``). What was sent is waited for (``wait_for_pushes``, ``Receiver.wait_for``); what
was not sent is proved without sleeping: the fakes post in the order they queue, so once
``flush_pushes`` returns, everything queued before it has been delivered. Every event is in
January 2031; expiries are moved with the fakes' own clock (``advance_clock``).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from tests.google_servers import FakeGoogle
from tests.microsoft_servers import VALIDATION_FAILED, FakeMicrosoft, patterned_recurrence
from tests.oauth_fakes import NOT_LOOPBACK, OAuthFake, QuietHandler
from tests.servers import free_port

CLIENT_ID = "calendar-booking-tests"
CLIENT_SECRET = "s3cret-for-tests"
EMAIL = "ada@example.com"
OTHER = "grace@example.com"
BERLIN = ZoneInfo("Europe/Berlin")
MONDAY = datetime(2031, 1, 6, 9, tzinfo=BERLIN)  # a Monday in winter (UTC+1)
HOUR = timedelta(hours=1)
WEEK_MS = 7 * 24 * 3600 * 1000
GRAPH_JANUARY = {"startDateTime": "2031-01-01T00:00:00", "endDateTime": "2031-02-01T00:00:00"}
# One client for the tests' own requests (plain HTTP on loopback: no certificates to load).
http = httpx.Client(timeout=10, verify=False)


# A receiver of push messages
@dataclass(frozen=True)
class Received:
    """One request a receiver got."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # names in lower case
    body: bytes

    @property
    def json(self) -> Any:
        return httpx.Response(200, content=self.body).json()


class Receiver:
    """A webhook endpoint on a free loopback port, in this process. A Graph validation request
    (``?validationToken=``) is answered as ``validation`` says: ``echo`` (200, the token as
    ``text/plain``), ``wrong`` (another body), ``error`` (500) or ``json`` (the token, as
    ``application/json``), after ``on_validation`` (if set) has run; any other POST gets
    ``status``. It keeps every request, and a test waits for them (``wait_for``)."""

    def __init__(self, status: int = 202, validation: str = "echo") -> None:
        self.status = status
        self.validation = validation
        self.on_validation: Callable[[], Any] | None = None
        self.seen: list[Any] = []  # what on_validation returned (or raised)
        self.received: list[Received] = []
        self.arrived = threading.Condition()
        self.url = ""

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Any:
        request = Request(environ)
        got = Received(
            request.method,
            request.path,
            request.args.to_dict(),
            {key.lower(): value for key, value in request.headers.items()},
            request.get_data(),
        )
        with self.arrived:
            self.received.append(got)
            self.arrived.notify_all()
        token = request.args.get("validationToken")
        if token is None:
            response = Response("", self.status)
        else:
            if self.on_validation is not None:
                try:
                    self.seen.append(self.on_validation())
                except Exception as err:  # the test asserts on it
                    self.seen.append(err)
            response = {
                "echo": Response(token, 200, content_type="text/plain; charset=utf-8"),
                "wrong": Response("not the token", 200, content_type="text/plain"),
                "error": Response(token, 500, content_type="text/plain"),
                "json": Response(f'"{token}"', 200, content_type="application/json"),
            }[self.validation]
        return response(environ, start_response)

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        with self.arrived:
            if not self.arrived.wait_for(lambda: len(self.received) >= count, timeout):
                raise AssertionError(f"expected {count} requests, got {self.received}")
            return list(self.received)


@contextmanager
def receiving(status: int = 202, validation: str = "echo") -> Iterator[Receiver]:
    """A ``Receiver`` serving at ``receiver.url`` (``…/hooks``) until the block ends."""
    receiver = Receiver(status, validation)
    server = make_server(
        "127.0.0.1", free_port(), receiver, threaded=True, request_handler=QuietHandler
    )
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    receiver.url = f"http://127.0.0.1:{server.server_port}/hooks"
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def hook() -> Iterator[Receiver]:
    with receiving() as receiver:
        yield receiver


def bearer(access_token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {access_token}"}


# Google: fixtures and helpers
@pytest.fixture
def google() -> Iterator[FakeGoogle]:
    """A Google with one account (in Berlin) and its primary calendar (its email)."""
    with FakeGoogle(CLIENT_ID, CLIENT_SECRET) as fake:
        fake.add_account(EMAIL, name="Ada Lovelace", time_zone="Europe/Berlin")
        yield fake


@pytest.fixture
def google_api(google: FakeGoogle) -> Iterator[httpx.Client]:
    """A client of the Calendar API as the connected account."""
    with google.api_client(EMAIL) as client:
        yield client


def watch(
    api: httpx.Client, address: str, calendar: str = "primary", **fields: Any
) -> httpx.Response:
    """events.watch of ``calendar`` with a new channel id (unless ``fields`` name one)."""
    body = {"id": str(uuid.uuid4()), "type": "web_hook", "address": address, **fields}
    return api.post(f"/calendars/{calendar}/events/watch", json=body)


def ms(instant: datetime) -> int:
    """An instant in milliseconds since the epoch, as a channel's expiration."""
    return int(instant.timestamp() * 1000)


def reason(answer: httpx.Response) -> tuple[int, str]:
    """The status and reason of a Google error."""
    return answer.status_code, answer.json()["error"]["errors"][0]["reason"]


def utc(hour: int, minute: int = 0, day: int = 6) -> datetime:
    return datetime(2031, 1, day, hour, minute, tzinfo=UTC)


def free_busy(api: httpx.Client, ids: list[str], time_min: str, time_max: str) -> httpx.Response:
    body = {"timeMin": time_min, "timeMax": time_max, "items": [{"id": i} for i in ids]}
    return api.post("/freeBusy", json=body)


# Google: events.watch
def test_google_watch_answers_the_channel_its_resource_and_its_expiration(
    google: FakeGoogle, google_api: httpx.Client, hook: Receiver
) -> None:
    answer = watch(google_api, hook.url, id="channel-1", token="target=calendar-7")
    body = answer.json()
    assert answer.status_code == 200
    assert {k: v for k, v in body.items() if k not in ("resourceId", "expiration")} == {
        "kind": "api#channel",
        "id": "channel-1",
        "resourceUri": f"{google.calendar_api_url}/calendars/primary/events?alt=json",
        "token": "target=calendar-7",
    }
    assert body["resourceId"]
    assert body["expiration"].isdigit()


def test_google_every_channel_of_a_calendar_has_the_same_resource_id(
    google: FakeGoogle, google_api: httpx.Client, hook: Receiver
) -> None:
    team = google.add_calendar(EMAIL, "Team")
    first = watch(google_api, hook.url).json()["resourceId"]
    again = watch(google_api, hook.url, calendar=EMAIL).json()["resourceId"]
    other = watch(google_api, hook.url, calendar=team).json()["resourceId"]
    assert first == again != other


def test_google_a_channel_lives_a_week_by_default(
    google: FakeGoogle, google_api: httpx.Client, hook: Receiver
) -> None:
    before = ms(google.current_datetime())
    expiration = int(watch(google_api, hook.url).json()["expiration"])
    assert before + WEEK_MS <= expiration <= ms(google.current_datetime()) + WEEK_MS


def test_google_a_requested_expiration_is_kept_up_to_a_week(
    google: FakeGoogle, google_api: httpx.Client, hook: Receiver
) -> None:
    soon = ms(google.current_datetime()) + 3_600_000
    kept = watch(google_api, hook.url, expiration=soon).json()["expiration"]
    month = ms(google.current_datetime()) + 4 * WEEK_MS
    capped = int(watch(google_api, hook.url, expiration=str(month)).json()["expiration"])
    assert kept == str(soon)
    assert capped <= ms(google.current_datetime()) + WEEK_MS < month


def test_google_params_ttl_sets_the_expiration_in_seconds(
    google: FakeGoogle, google_api: httpx.Client, hook: Receiver
) -> None:
    before = ms(google.current_datetime())
    expiration = int(watch(google_api, hook.url, params={"ttl": "3600"}).json()["expiration"])
    assert before + 3_600_000 <= expiration <= ms(google.current_datetime()) + 3_600_000


def test_google_a_live_channel_id_cannot_be_used_again(
    google_api: httpx.Client, hook: Receiver
) -> None:
    watch(google_api, hook.url, id="channel-1").raise_for_status()
    assert reason(watch(google_api, hook.url, id="channel-1")) == (400, "channelIdNotUnique")


def test_google_a_stopped_channels_id_may_be_used_again(
    google_api: httpx.Client, hook: Receiver
) -> None:
    resource_id = watch(google_api, hook.url, id="channel-1").json()["resourceId"]
    google_api.post("/channels/stop", json={"id": "channel-1", "resourceId": resource_id})
    assert watch(google_api, hook.url, id="channel-1").status_code == 200


def test_google_watch_refuses_a_channel_type_other_than_web_hook(
    google_api: httpx.Client, hook: Receiver
) -> None:
    assert watch(google_api, hook.url, type="email").status_code == 400


@pytest.mark.parametrize(
    "address", ["http://hooks.example.com/calendar", "ftp://127.0.0.1/hooks", "hooks"]
)
def test_google_watch_refuses_an_address_that_is_not_https(
    google_api: httpx.Client, address: str
) -> None:
    assert reason(watch(google_api, address)) == (400, "push.webhookUrlNotHttps")


def test_google_an_https_address_off_loopback_is_accepted_and_never_contacted(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    assert watch(google_api, "https://hooks.example.com/calendar").status_code == 200
    [push] = google.flush_pushes()
    assert (push.status, push.error) == (None, NOT_LOOPBACK)


def test_google_watch_needs_a_token_of_the_calendars_owner(
    google: FakeGoogle, hook: Receiver
) -> None:
    google.add_account(OTHER)
    url = f"{google.calendar_api_url}/calendars/{EMAIL}/events/watch"
    body = {"id": "channel-1", "type": "web_hook", "address": hook.url}
    stranger = bearer(google.issue_access_token(OTHER))
    assert http.post(url, json=body, headers=stranger).status_code == 404
    assert http.post(url, json=body).status_code == 401


# Google: the messages
def test_google_watch_sends_the_sync_message_at_once(
    google: FakeGoogle, google_api: httpx.Client, hook: Receiver
) -> None:
    channel = watch(google_api, hook.url, id="channel-1", token="target=calendar-7").json()
    [sync] = hook.wait_for(1)
    expiration = datetime.fromtimestamp(int(channel["expiration"]) / 1000, UTC)
    assert (sync.method, sync.path, sync.body) == ("POST", "/hooks", b"")
    assert {k: v for k, v in sync.headers.items() if k.startswith("x-goog-")} == {
        "x-goog-channel-id": "channel-1",
        "x-goog-channel-token": "target=calendar-7",
        "x-goog-channel-expiration": format_datetime(expiration, usegmt=True),
        "x-goog-resource-id": channel["resourceId"],
        "x-goog-resource-uri": channel["resourceUri"],
        "x-goog-resource-state": "sync",
        "x-goog-message-number": "1",
    }
    [push] = google.wait_for_pushes(1)
    assert (push.target, push.address, push.state, push.status) == (
        "channel-1",
        hook.url,
        "sync",
        202,
    )


def test_google_an_insert_through_the_api_sends_exists_with_the_next_message_number(
    google_api: httpx.Client, hook: Receiver
) -> None:
    watch(google_api, hook.url, id="channel-1")
    event = {
        "start": {"dateTime": "2031-01-06T09:00:00Z"},
        "end": {"dateTime": "2031-01-06T10:00:00Z"},
    }
    google_api.post("/calendars/primary/events", json=event).raise_for_status()
    message = hook.wait_for(2)[1]
    assert (
        message.headers["x-goog-channel-id"],
        message.headers["x-goog-resource-state"],
        message.headers["x-goog-message-number"],
    ) == ("channel-1", "exists", "2")


def test_google_a_patch_and_a_delete_through_the_api_are_notified(
    google: FakeGoogle, google_api: httpx.Client, hook: Receiver
) -> None:
    event = google.add_event(EMAIL, MONDAY, MONDAY + HOUR)
    watch(google_api, hook.url)
    google_api.patch(f"/calendars/primary/events/{event}", json={"summary": "Moved"})
    google_api.delete(f"/calendars/primary/events/{event}")
    pushes = google.wait_for_pushes(3)
    assert [(p.state, p.headers["X-Goog-Message-Number"]) for p in pushes] == [
        ("sync", "1"),
        ("exists", "2"),
        ("exists", "3"),
    ]


def test_google_changes_made_with_the_control_methods_are_notified(
    google: FakeGoogle, google_api: httpx.Client, hook: Receiver
) -> None:
    watch(google_api, hook.url)
    event = google.add_event(EMAIL, MONDAY, MONDAY + HOUR)
    google.update_event(EMAIL, event, summary="Moved")
    google.delete_event(EMAIL, event)
    assert [p.state for p in google.wait_for_pushes(4)] == ["sync", "exists", "exists", "exists"]


def test_google_a_channel_without_a_token_sends_no_token_header(
    google_api: httpx.Client, hook: Receiver
) -> None:
    watch(google_api, hook.url)
    [sync] = hook.wait_for(1)
    assert "x-goog-channel-token" not in sync.headers


def test_google_a_change_is_sent_to_every_live_channel_of_its_calendar_and_no_other(
    google: FakeGoogle, google_api: httpx.Client, hook: Receiver
) -> None:
    team = google.add_calendar(EMAIL, "Team")
    for channel_id, calendar in (("a", "primary"), ("b", EMAIL), ("c", team)):
        watch(google_api, hook.url, calendar=calendar, id=channel_id)
    google.add_event(EMAIL, MONDAY, MONDAY + HOUR)
    pushes = google.flush_pushes()
    assert [(p.target, p.state) for p in pushes[3:]] == [("a", "exists"), ("b", "exists")]


def test_google_a_stopped_channel_gets_no_more_messages(
    google: FakeGoogle, google_api: httpx.Client, hook: Receiver
) -> None:
    resource_id = watch(google_api, hook.url, id="channel-1").json()["resourceId"]
    stop = google_api.post("/channels/stop", json={"id": "channel-1", "resourceId": resource_id})
    google.add_event(EMAIL, MONDAY, MONDAY + HOUR)
    assert (stop.status_code, stop.content) == (204, b"")
    assert [p.state for p in google.flush_pushes()] == ["sync"]


@pytest.mark.parametrize("channel_id, right_resource", [("channel-1", False), ("other", True)])
def test_google_stopping_an_unknown_channel_or_another_resource_is_404(
    google_api: httpx.Client, hook: Receiver, channel_id: str, right_resource: bool
) -> None:
    resource_id = watch(google_api, hook.url, id="channel-1").json()["resourceId"]
    body = {"id": channel_id, "resourceId": resource_id if right_resource else "elsewhere"}
    assert reason(google_api.post("/channels/stop", json=body)) == (404, "notFound")


def test_google_a_channel_past_its_expiration_gets_no_messages(
    google: FakeGoogle, google_api: httpx.Client, hook: Receiver
) -> None:
    watch(google_api, hook.url, params={"ttl": "60"})
    google.advance_clock(61)
    google.add_event(EMAIL, MONDAY, MONDAY + HOUR)
    assert [p.state for p in google.flush_pushes()] == ["sync"]


def test_google_expire_channel_ends_a_channel_now(
    google: FakeGoogle, google_api: httpx.Client, hook: Receiver
) -> None:
    resource_id = watch(google_api, hook.url, id="channel-1").json()["resourceId"]
    google.expire_channel("channel-1")
    google.add_event(EMAIL, MONDAY, MONDAY + HOUR)
    stop = google_api.post("/channels/stop", json={"id": "channel-1", "resourceId": resource_id})
    assert [p.state for p in google.flush_pushes()] == ["sync"]
    assert stop.status_code == 404


def test_google_with_push_disabled_a_change_sends_no_message(
    google: FakeGoogle, google_api: httpx.Client, hook: Receiver
) -> None:
    watch(google_api, hook.url)
    google.push_enabled = False
    google.add_event(EMAIL, MONDAY, MONDAY + HOUR)
    google.push_enabled = True
    google.add_event(EMAIL, MONDAY + 2 * HOUR, MONDAY + 3 * HOUR)
    assert [p.state for p in google.flush_pushes()] == ["sync", "exists"]
    assert len(hook.received) == 2


def test_google_a_receivers_error_is_recorded_and_not_retried(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    with receiving(status=500) as failing:
        watch(google_api, failing.url)
        google.add_event(EMAIL, MONDAY, MONDAY + HOUR)
        pushes = google.flush_pushes()
    assert [(p.state, p.status) for p in pushes] == [("sync", 500), ("exists", 500)]
    assert len(failing.received) == 2


def test_google_an_address_nobody_listens_on_is_recorded_with_the_error(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    watch(google_api, f"http://127.0.0.1:{free_port()}/hooks")
    [push] = google.flush_pushes()
    assert push.status is None
    assert push.error.startswith("ConnectError")


def test_google_channels_lists_the_live_channels_and_on_request_the_ended_ones(
    google: FakeGoogle, google_api: httpx.Client, hook: Receiver
) -> None:
    first = watch(google_api, hook.url, id="a", token="t").json()
    watch(google_api, hook.url, id="b")
    google_api.post("/channels/stop", json={"id": "b", "resourceId": first["resourceId"]})
    [live] = google.channels()
    expiration = datetime.fromtimestamp(int(first["expiration"]) / 1000, UTC)
    assert (live.id, live.calendar_id, live.address, live.token) == ("a", EMAIL, hook.url, "t")
    assert (live.resource_id, live.expiration, live.stopped) == (
        first["resourceId"],
        expiration,
        False,
    )
    assert [(c.id, c.stopped) for c in google.channels(include_ended=True)] == [
        ("a", False),
        ("b", True),
    ]


# Google: freebusy.query
def test_google_free_busy_merges_overlapping_events_and_clips_them_to_the_window(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    for start, end in [
        (utc(9), utc(10)),
        (utc(9, 30), utc(11)),
        (utc(11), utc(11, 30)),  # touches the one before
        (utc(13), utc(14)),
        (utc(14), utc(15)),  # runs past the window
        (utc(16), utc(17)),  # after the window
    ]:
        google.add_event(EMAIL, start, end)
    answer = free_busy(google_api, [EMAIL], "2031-01-06T10:15:00+01:00", "2031-01-06T14:30:00Z")
    assert answer.json() == {
        "kind": "calendar#freeBusy",
        "timeMin": "2031-01-06T09:15:00.000Z",
        "timeMax": "2031-01-06T14:30:00.000Z",
        "calendars": {
            EMAIL: {
                "busy": [
                    {"start": "2031-01-06T09:15:00Z", "end": "2031-01-06T11:30:00Z"},
                    {"start": "2031-01-06T13:00:00Z", "end": "2031-01-06T14:30:00Z"},
                ]
            }
        },
    }


def test_google_free_busy_leaves_out_transparent_and_cancelled_events_and_expands_series(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    google.add_event(EMAIL, utc(8), utc(9), transparency="transparent")
    google.delete_event(EMAIL, google.add_event(EMAIL, utc(9), utc(10)))
    google.add_event(EMAIL, utc(10), utc(11), status="tentative")
    start = datetime(2031, 1, 6, 13, tzinfo=BERLIN)
    google.add_event(
        EMAIL,
        start,
        start + HOUR,
        time_zone="Europe/Berlin",
        recurrence=["RRULE:FREQ=DAILY;COUNT=3"],
    )
    body = free_busy(google_api, ["primary"], "2031-01-06T00:00:00Z", "2031-01-08T00:00:00Z").json()
    assert body["calendars"]["primary"]["busy"] == [
        {"start": "2031-01-06T10:00:00Z", "end": "2031-01-06T11:00:00Z"},
        {"start": "2031-01-06T12:00:00Z", "end": "2031-01-06T13:00:00Z"},
        {"start": "2031-01-07T12:00:00Z", "end": "2031-01-07T13:00:00Z"},
    ]


def test_google_free_busy_of_a_calendar_the_caller_cannot_see_is_a_not_found_error(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    google.add_account(OTHER)
    google.add_event(OTHER, utc(9), utc(10))
    ids = [EMAIL, OTHER, "nobody@example.com"]
    calendars = free_busy(google_api, ids, "2031-01-06T00:00:00Z", "2031-01-07T00:00:00Z").json()[
        "calendars"
    ]
    not_found = {"errors": [{"domain": "global", "reason": "notFound"}], "busy": []}
    assert calendars == {EMAIL: {"busy": []}, OTHER: not_found, "nobody@example.com": not_found}


@pytest.mark.parametrize(
    "time_min, time_max, expected",
    [
        ("2031-01-06T10:00:00Z", "2031-01-06T10:00:00Z", "timeRangeEmpty"),
        ("2031-01-06T10:00:00Z", "2031-01-06T09:00:00Z", "timeRangeEmpty"),
        ("2031-01-06", "2031-01-07T00:00:00Z", "badRequest"),
        ("2031-01-06T10:00:00", "2031-01-07T00:00:00Z", "badRequest"),
    ],
)
def test_google_free_busy_refuses_an_empty_or_malformed_window(
    google_api: httpx.Client, time_min: str, time_max: str, expected: str
) -> None:
    assert reason(free_busy(google_api, [EMAIL], time_min, time_max)) == (400, expected)


# Both: a slow provider
@pytest.fixture(params=["google", "microsoft"])
def fake(request: pytest.FixtureRequest) -> OAuthFake:
    """Each fake in turn."""
    if request.param == "google":
        return request.getfixturevalue("google")
    return request.getfixturevalue("microsoft")


def api_urls(fake: OAuthFake) -> tuple[str, str, str]:
    """The list of the account's calendars, the fragment of its path, and another URL."""
    if isinstance(fake, FakeGoogle):
        base = fake.calendar_api_url
        return base + "/users/me/calendarList", "calendarList", base + "/calendars/primary"
    return fake.graph_url + "/me/calendars", "/me/calendars", fake.graph_url + "/me"


def test_a_stalled_request_waits_while_the_fake_answers_others(fake: OAuthFake) -> None:
    stalled_url, fragment, other_url = api_urls(fake)
    headers = bearer(fake.issue_access_token(EMAIL))
    fake.stall(30, path_contains=fragment)
    with ThreadPoolExecutor(1) as pool, httpx.Client(timeout=5) as client:
        slow = pool.submit(http.get, stalled_url, headers=headers)
        fake.wait_until_stalled()
        other = client.get(other_url, headers=headers)
        assert other.status_code == 200
        assert not slow.done()
        fake.unstall()
        assert slow.result(timeout=5).status_code == 200


def test_a_stalled_request_is_answered_as_usual_once_the_stall_has_passed(
    fake: OAuthFake,
) -> None:
    stalled_url, _, _ = api_urls(fake)
    headers = bearer(fake.issue_access_token(EMAIL))
    fake.stall(0.3)
    started = time.monotonic()
    answer = http.get(stalled_url, headers=headers)
    assert answer.status_code == 200
    assert time.monotonic() - started >= 0.3


def test_a_stall_never_holds_the_oauth_token_endpoint(fake: OAuthFake) -> None:
    refresh_token = fake.issue_refresh_token(EMAIL)
    fake.stall(30)
    form = {
        "grant_type": "refresh_token",
        "refresh_token": refresh_token,
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
    }
    with httpx.Client(timeout=5) as client:
        assert client.post(fake.token_url, data=form).status_code == 200


# Microsoft: fixtures and helpers
@pytest.fixture
def microsoft() -> Iterator[FakeMicrosoft]:
    """A Microsoft with one mailbox and its default calendar."""
    with FakeMicrosoft(CLIENT_ID, CLIENT_SECRET) as fake:
        fake.add_account(EMAIL, name="Ada Lovelace", time_zone="Europe/Berlin")
        yield fake


@pytest.fixture
def graph(microsoft: FakeMicrosoft) -> Iterator[httpx.Client]:
    """A client of Graph as the connected account."""
    with microsoft.api_client(EMAIL) as client:
        yield client


def pages(
    graph: httpx.Client, url: str, params: dict[str, str] | None = None, **headers: str
) -> list[dict[str, Any]]:
    """Every page of a listing, from its first URL along its next links."""
    found = [graph.get(url, params=params, headers=headers).raise_for_status().json()]
    while "@odata.nextLink" in found[-1]:
        found.append(graph.get(found[-1]["@odata.nextLink"], headers=headers).json())
    return found


def items(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for page in found for item in page["value"]]


def graph_instant(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


def subscribe(
    microsoft: FakeMicrosoft, graph: httpx.Client, address: str, **fields: Any
) -> httpx.Response:
    """POST /subscriptions for every change of the mailbox's events, for an hour."""
    body = {
        "changeType": "created,updated,deleted",
        "notificationUrl": address,
        "resource": "me/events",
        "expirationDateTime": graph_instant(microsoft.current_datetime() + HOUR),
        "clientState": "secret-state",
        **fields,
    }
    return graph.post("/subscriptions", json=body)


def graph_error(answer: httpx.Response) -> tuple[int, str]:
    return answer.status_code, answer.json()["error"]["code"]


# Microsoft: calendarView
def test_microsoft_calendar_view_answers_what_a_delta_round_answers(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    calendar = microsoft.default_calendar_id()
    for day in range(3):
        microsoft.add_event(
            calendar, MONDAY + timedelta(days=day), MONDAY + timedelta(days=day) + HOUR
        )
    recurrence = patterned_recurrence("daily", MONDAY.date(), occurrences=3)
    microsoft.add_event(calendar, MONDAY + 3 * HOUR, MONDAY + 4 * HOUR, recurrence=recurrence)
    view = items(pages(graph, "/me/calendarView", GRAPH_JANUARY))
    delta = items(pages(graph, "/me/calendarView/delta", GRAPH_JANUARY))
    assert len(view) == 6
    assert view == delta


def test_microsoft_calendar_view_shows_occurrences_never_their_series_master(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    recurrence = patterned_recurrence("daily", MONDAY.date(), occurrences=3)
    series = microsoft.add_event(
        microsoft.default_calendar_id(), MONDAY, MONDAY + HOUR, recurrence=recurrence
    )
    found = items(pages(graph, "/me/calendarView", GRAPH_JANUARY))
    assert [(i["type"], i["seriesMasterId"]) for i in found] == [("occurrence", series)] * 3


def test_microsoft_calendar_view_pages_with_next_links_of_the_preferred_size(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    for day in range(5):
        microsoft.add_event(
            microsoft.default_calendar_id(),
            MONDAY + timedelta(days=day),
            MONDAY + timedelta(days=day) + HOUR,
        )
    first = graph.get(
        "/me/calendarView", params=GRAPH_JANUARY, headers={"Prefer": "odata.maxpagesize=2"}
    )
    found = pages(graph, "/me/calendarView", GRAPH_JANUARY, Prefer="odata.maxpagesize=2")
    assert [len(page["value"]) for page in found] == [2, 2, 1]
    assert "skip=2" in first.json()["@odata.nextLink"]
    assert first.headers["Preference-Applied"] == "odata.maxpagesize=2"
    assert len({i["id"] for i in items(found)}) == 5


def test_microsoft_calendar_view_top_sets_the_page_size(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    for day in range(5):
        microsoft.add_event(
            microsoft.default_calendar_id(),
            MONDAY + timedelta(days=day),
            MONDAY + timedelta(days=day) + HOUR,
        )
    found = pages(graph, "/me/calendarView", {**GRAPH_JANUARY, "$top": "3"})
    assert [len(page["value"]) for page in found] == [3, 2]


def test_microsoft_calendar_view_answers_in_the_preferred_time_zone(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    microsoft.add_event(microsoft.default_calendar_id(), MONDAY, MONDAY + HOUR)
    found = items(
        pages(
            graph, "/me/calendarView", GRAPH_JANUARY, Prefer='outlook.timezone="America/New_York"'
        )
    )
    assert found[0]["start"] == {
        "dateTime": "2031-01-06T03:00:00.0000000",
        "timeZone": "America/New_York",
    }


def test_microsoft_calendar_view_without_a_window_is_400(graph: httpx.Client) -> None:
    answer = graph.get("/me/calendarView", params={"startDateTime": "2031-01-01T00:00:00"})
    assert graph_error(answer) == (400, "ErrorInvalidParameter")


def test_microsoft_calendar_view_of_a_calendar_shows_its_events_only(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    team = microsoft.add_calendar(EMAIL, "Team")
    mine = microsoft.add_event(microsoft.default_calendar_id(), MONDAY, MONDAY + HOUR)
    theirs = microsoft.add_event(team, MONDAY, MONDAY + HOUR)
    for url, expected in [
        ("/me/calendarView", mine),
        ("/me/calendar/calendarView", mine),
        (f"/me/calendars/{microsoft.default_calendar_id()}/calendarView", mine),
        (f"/me/calendars/{team}/calendarView", theirs),
    ]:
        assert [i["id"] for i in items(pages(graph, url, GRAPH_JANUARY))] == [expected], url


# Microsoft: subscriptions
def test_microsoft_a_subscription_is_created_once_its_url_echoes_the_validation_token(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver
) -> None:
    answer = subscribe(microsoft, graph, hook.url)
    [validation] = hook.received
    body = answer.json()
    assert answer.status_code == 201
    assert (validation.method, validation.path, validation.body) == ("POST", "/hooks", b"")
    assert validation.headers["content-type"].startswith("text/plain")
    assert validation.query["validationToken"].startswith("Validation: ")
    assert {k: v for k, v in body.items() if k not in ("id", "expirationDateTime")} == {
        "@odata.context": f"{microsoft.graph_url}/$metadata#subscriptions/$entity",
        "resource": "me/events",
        "applicationId": CLIENT_ID,
        "changeType": "created,updated,deleted",
        "clientState": "secret-state",
        "notificationUrl": hook.url,
        "notificationQueryOptions": None,
        "lifecycleNotificationUrl": None,
        "creatorId": graph.get("/me").json()["id"],
        "includeResourceData": False,
        "latestSupportedTlsVersion": "v1_2",
        "encryptionCertificate": None,
        "encryptionCertificateId": None,
        "notificationUrlAppId": None,
    }
    assert str(uuid.UUID(body["id"])) == body["id"]
    assert body["expirationDateTime"].endswith("Z")
    assert [held.id for held in microsoft.subscriptions()] == [body["id"]]


@pytest.mark.parametrize("validation", ["wrong", "error", "json"])
def test_microsoft_a_url_that_does_not_echo_the_token_fails_validation(
    microsoft: FakeMicrosoft, graph: httpx.Client, validation: str
) -> None:
    with receiving(validation=validation) as failing:
        answer = subscribe(microsoft, graph, failing.url)
    assert graph_error(answer) == (400, "InvalidRequest")
    assert answer.json()["error"]["message"] == VALIDATION_FAILED
    assert microsoft.subscriptions() == []


def test_microsoft_the_lifecycle_url_is_validated_too(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver
) -> None:
    with receiving(validation="wrong") as lifecycle:
        answer = subscribe(microsoft, graph, hook.url, lifecycleNotificationUrl=lifecycle.url)
        assert len(lifecycle.received) == 1
    assert graph_error(answer) == (400, "InvalidRequest")


def test_microsoft_the_fake_answers_the_receiver_during_the_handshake(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver
) -> None:
    headers = bearer(microsoft.issue_access_token(EMAIL))

    def call_the_fake() -> int:
        with httpx.Client(timeout=3) as client:
            return client.get(microsoft.graph_url + "/me", headers=headers).status_code

    hook.on_validation = call_the_fake
    assert subscribe(microsoft, graph, hook.url).status_code == 201
    assert hook.seen == [200]


@pytest.mark.parametrize("ahead", [timedelta(minutes=-1), timedelta(minutes=10081)])
def test_microsoft_an_expiration_in_the_past_or_beyond_10080_minutes_is_400(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver, ahead: timedelta
) -> None:
    expiration = graph_instant(microsoft.current_datetime() + ahead)
    answer = subscribe(microsoft, graph, hook.url, expirationDateTime=expiration)
    assert graph_error(answer) == (400, "InvalidRequest")
    assert "expirationDateTime" in answer.json()["error"]["message"]
    assert hook.received == []


def test_microsoft_a_subscription_may_last_almost_10080_minutes(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver
) -> None:
    expiration = graph_instant(microsoft.current_datetime() + timedelta(minutes=10079))
    assert subscribe(microsoft, graph, hook.url, expirationDateTime=expiration).status_code == 201


@pytest.mark.parametrize("url", ["http://hooks.example.com/graph", "ftp://127.0.0.1/hooks"])
def test_microsoft_a_notification_url_that_is_not_https_is_400(
    microsoft: FakeMicrosoft, graph: httpx.Client, url: str
) -> None:
    assert graph_error(subscribe(microsoft, graph, url)) == (400, "InvalidRequest")


@pytest.mark.parametrize(
    "fields",
    [
        {"changeType": "created,moved"},
        {"resource": "me/messages"},
        {"clientState": "x" * 129},
        {"expirationDateTime": "next week"},
    ],
)
def test_microsoft_a_subscription_graph_would_refuse_is_400(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver, fields: dict[str, str]
) -> None:
    assert graph_error(subscribe(microsoft, graph, hook.url, **fields)) == (400, "InvalidRequest")


@pytest.mark.parametrize(
    "resource",
    [
        "me/events",
        "/me/events",
        "me/calendar/events",
        "me/calendars/{calendar}/events",
        "/me/calendars('{calendar}')/events",
    ],
)
def test_microsoft_the_events_resources_of_the_mailbox_may_be_subscribed_to(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver, resource: str
) -> None:
    named = resource.format(calendar=microsoft.default_calendar_id())
    answer = subscribe(microsoft, graph, hook.url, resource=named)
    assert (answer.status_code, answer.json()["resource"]) == (201, named)


def test_microsoft_a_subscription_to_a_calendar_the_mailbox_lacks_is_404(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver
) -> None:
    answer = subscribe(microsoft, graph, hook.url, resource="me/calendars/AAMkADnone/events")
    assert answer.status_code == 404


def test_microsoft_a_subscription_is_read_by_its_id(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver
) -> None:
    created = subscribe(microsoft, graph, hook.url).json()
    read = graph.get(f"/subscriptions/{created['id']}")
    assert (read.status_code, read.json()) == (200, created)


def test_microsoft_patch_renews_a_subscription_within_10080_minutes(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver
) -> None:
    created = subscribe(microsoft, graph, hook.url).json()
    url = f"/subscriptions/{created['id']}"
    later = microsoft.current_datetime() + timedelta(days=3)
    renewed = graph.patch(url, json={"expirationDateTime": graph_instant(later)})
    too_late = microsoft.current_datetime() + timedelta(days=8)
    refused = graph.patch(url, json={"expirationDateTime": graph_instant(too_late)})
    assert renewed.status_code == 200
    assert renewed.json()["expirationDateTime"].startswith(later.strftime("%Y-%m-%dT%H:%M:%S"))
    assert graph_error(refused) == (400, "InvalidRequest")
    [held] = microsoft.subscriptions()
    assert held.expiration == later


def test_microsoft_delete_ends_a_subscription_then_it_is_404(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver
) -> None:
    created = subscribe(microsoft, graph, hook.url).json()
    deleted = graph.delete(f"/subscriptions/{created['id']}")
    assert (deleted.status_code, deleted.content) == (204, b"")
    assert graph_error(graph.get(f"/subscriptions/{created['id']}")) == (404, "ResourceNotFound")
    assert microsoft.subscriptions() == []


def test_microsoft_another_account_cannot_see_a_subscription(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver
) -> None:
    created = subscribe(microsoft, graph, hook.url).json()
    microsoft.add_account(OTHER)
    stranger = bearer(microsoft.issue_access_token(OTHER))
    answer = http.get(f"{microsoft.graph_url}/subscriptions/{created['id']}", headers=stranger)
    assert graph_error(answer) == (404, "ResourceNotFound")


# Microsoft: change and lifecycle notifications
def test_microsoft_a_created_event_is_notified_with_its_resource_and_the_client_state(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver
) -> None:
    subscription = subscribe(microsoft, graph, hook.url).json()
    event = {
        "subject": "Checkup",
        "start": {"dateTime": "2031-01-06T09:00:00", "timeZone": "UTC"},
        "end": {"dateTime": "2031-01-06T10:00:00", "timeZone": "UTC"},
    }
    created = graph.post("/me/events", json=event).json()
    [push] = microsoft.wait_for_pushes(1)
    notification = hook.wait_for(2)[1]
    resource = f"Users/{graph.get('/me').json()['id']}/Events/{created['id']}"
    assert (push.state, push.status, notification.headers["content-type"]) == (
        "created",
        202,
        "application/json; charset=utf-8",
    )
    assert notification.json == {
        "value": [
            {
                "subscriptionId": subscription["id"],
                "subscriptionExpirationDateTime": subscription["expirationDateTime"],
                "changeType": "created",
                "resource": resource,
                "resourceData": {
                    "@odata.type": "#Microsoft.Graph.Event",
                    "@odata.id": resource,
                    "@odata.etag": created["@odata.etag"],
                    "id": created["id"],
                },
                "tenantId": "9188040d-6c67-4c5b-b112-36a304b66dad",
                "clientState": "secret-state",
            }
        ]
    }


def test_microsoft_changes_made_with_the_control_methods_are_notified(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver
) -> None:
    subscribe(microsoft, graph, hook.url)
    event = microsoft.add_event(microsoft.default_calendar_id(), MONDAY, MONDAY + HOUR)
    microsoft.update_event(microsoft.default_calendar_id(), event, subject="Moved")
    microsoft.delete_event(microsoft.default_calendar_id(), event)
    pushes = microsoft.wait_for_pushes(3)
    assert [(p.state, p.json["value"][0]["resourceData"]["id"]) for p in pushes] == [
        ("created", event),
        ("updated", event),
        ("deleted", event),
    ]


def test_microsoft_a_patch_and_a_delete_through_the_api_are_notified(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver
) -> None:
    event = microsoft.add_event(microsoft.default_calendar_id(), MONDAY, MONDAY + HOUR)
    subscribe(microsoft, graph, hook.url)
    graph.patch(f"/me/events/{event}", json={"subject": "Moved"}).raise_for_status()
    graph.delete(f"/me/events/{event}").raise_for_status()
    assert [p.state for p in microsoft.wait_for_pushes(2)] == ["updated", "deleted"]


def test_microsoft_only_the_change_types_asked_for_are_notified(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver
) -> None:
    subscribe(microsoft, graph, hook.url, changeType="deleted")
    event = microsoft.add_event(microsoft.default_calendar_id(), MONDAY, MONDAY + HOUR)
    microsoft.update_event(microsoft.default_calendar_id(), event, subject="Moved")
    microsoft.delete_event(microsoft.default_calendar_id(), event)
    assert [p.state for p in microsoft.flush_pushes()] == ["deleted"]


def test_microsoft_me_events_covers_every_calendar_and_a_calendar_subscription_its_own(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver
) -> None:
    team = microsoft.add_calendar(EMAIL, "Team")
    every = subscribe(microsoft, graph, hook.url).json()["id"]
    own = subscribe(microsoft, graph, hook.url, resource=f"me/calendars/{team}/events").json()["id"]
    mine = microsoft.add_event(microsoft.default_calendar_id(), MONDAY, MONDAY + HOUR)
    theirs = microsoft.add_event(team, MONDAY, MONDAY + HOUR)
    pushes = microsoft.flush_pushes()
    assert [(p.target, p.json["value"][0]["resourceData"]["id"]) for p in pushes] == [
        (every, mine),
        (every, theirs),
        (own, theirs),
    ]


def test_microsoft_an_expired_subscription_gets_no_notifications(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver
) -> None:
    expiration = graph_instant(microsoft.current_datetime() + timedelta(minutes=10))
    subscribe(microsoft, graph, hook.url, expirationDateTime=expiration)
    microsoft.advance_clock(601)
    microsoft.add_event(microsoft.default_calendar_id(), MONDAY, MONDAY + HOUR)
    assert microsoft.flush_pushes() == []
    assert microsoft.subscriptions() == []
    assert len(microsoft.subscriptions(include_expired=True)) == 1


def test_microsoft_with_push_disabled_a_change_sends_no_notification(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver
) -> None:
    subscribe(microsoft, graph, hook.url)
    microsoft.push_enabled = False
    first = microsoft.add_event(microsoft.default_calendar_id(), MONDAY, MONDAY + HOUR)
    microsoft.push_enabled = True
    second = microsoft.add_event(
        microsoft.default_calendar_id(), MONDAY + 2 * HOUR, MONDAY + 3 * HOUR
    )
    pushes = microsoft.flush_pushes()
    assert [p.json["value"][0]["resourceData"]["id"] for p in pushes] == [second]
    assert first != second


def test_microsoft_a_lifecycle_notification_goes_to_the_lifecycle_url(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver
) -> None:
    with receiving() as lifecycle:
        created = subscribe(microsoft, graph, hook.url, lifecycleNotificationUrl=lifecycle.url)
        subscription = created.json()
        push = microsoft.send_lifecycle(subscription["id"], "reauthorizationRequired")
        received = lifecycle.wait_for(2)[1]
    expected = {
        "value": [
            {
                "subscriptionId": subscription["id"],
                "subscriptionExpirationDateTime": subscription["expirationDateTime"],
                "tenantId": "9188040d-6c67-4c5b-b112-36a304b66dad",
                "clientState": "secret-state",
                "lifecycleEvent": "reauthorizationRequired",
            }
        ]
    }
    assert (push.target, push.address, push.state, push.status) == (
        subscription["id"],
        lifecycle.url,
        "reauthorizationRequired",
        202,
    )
    assert received.json == push.json == expected
    assert len(hook.received) == 1  # its validation only
    assert [held.id for held in microsoft.subscriptions()] == [subscription["id"]]


def test_microsoft_subscription_removed_ends_the_subscription(
    microsoft: FakeMicrosoft, graph: httpx.Client, hook: Receiver
) -> None:
    subscription = subscribe(microsoft, graph, hook.url, lifecycleNotificationUrl=hook.url).json()
    push = microsoft.send_lifecycle(subscription["id"], "subscriptionRemoved")
    assert (push.state, push.status) == ("subscriptionRemoved", 202)
    assert graph.get(f"/subscriptions/{subscription['id']}").status_code == 404
    assert microsoft.subscriptions() == []
