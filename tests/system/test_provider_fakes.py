"""The loopback fakes of Google and Microsoft 365 (``tests.google_servers``,
``tests.microsoft_servers``) behave as the providers document, over real HTTP: the OAuth 2.0
code flow with PKCE, refreshing and how it fails, and the calendar APIs' paging, incremental
sync, idempotent creation, deletion and errors. The app's tests trust these fakes for what
Google and Microsoft would answer; these tests are why they may.

Every instant is fixed (January 2031), so no test depends on today's date; expiries are moved
with the fakes' own clock (``advance_clock``) or controls (``expire_access_tokens``).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit
from zoneinfo import ZoneInfo

import httpx
import pytest

from tests.google_servers import FakeGoogle
from tests.microsoft_servers import FakeMicrosoft, patterned_recurrence
from tests.oauth_fakes import OAuthFake
from tests.servers import ROOT, stop_process

CLIENT_ID = "calendar-booking-tests"
CLIENT_SECRET = "s3cret-for-tests"
EMAIL = "ada@example.com"
REDIRECT_URI = "http://127.0.0.1:9/connections/callback"
BERLIN = ZoneInfo("Europe/Berlin")
MONDAY = datetime(2031, 1, 6, 9, tzinfo=BERLIN)  # a Monday in winter (UTC+1)
HOUR = timedelta(hours=1)
JANUARY = {"timeMin": "2031-01-01T00:00:00Z", "timeMax": "2031-02-01T00:00:00Z"}
# One client for every request (plain HTTP on loopback: no certificates to load).
http = httpx.Client(timeout=10, verify=False)
GRAPH_JANUARY = {"startDateTime": "2031-01-01T00:00:00", "endDateTime": "2031-02-01T00:00:00"}
# What each provider's authorize request adds to get a refresh token with calendar access.
GRANT_PARAMS: dict[type, dict[str, str]] = {
    FakeGoogle: {
        "scope": "openid https://www.googleapis.com/auth/calendar",
        "access_type": "offline",
    },
    FakeMicrosoft: {"scope": "openid offline_access User.Read Calendars.ReadWrite"},
}


@pytest.fixture
def google() -> Iterator[FakeGoogle]:
    """A Google with one account (in Berlin) and its primary calendar (its email)."""
    with FakeGoogle(CLIENT_ID, CLIENT_SECRET) as fake:
        fake.add_account(EMAIL, name="Ada Lovelace", time_zone="Europe/Berlin")
        yield fake


@pytest.fixture
def microsoft() -> Iterator[FakeMicrosoft]:
    """A Microsoft with one mailbox and its default calendar."""
    with FakeMicrosoft(CLIENT_ID, CLIENT_SECRET) as fake:
        fake.add_account(EMAIL, name="Ada Lovelace", time_zone="Europe/Berlin")
        yield fake


@pytest.fixture(params=["google", "microsoft"])
def fake(request: pytest.FixtureRequest) -> OAuthFake:
    """Each fake in turn, for what both providers do alike."""
    return request.getfixturevalue(request.param)


# The OAuth flow, as the app runs it
def pkce() -> tuple[str, str]:
    """A code verifier and its S256 challenge."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def authorize_url(fake: OAuthFake, challenge: str | None, **params: str) -> str:
    """Where the app sends the person: its client, redirect URI, state and challenge."""
    query = {
        "client_id": CLIENT_ID,
        "redirect_uri": REDIRECT_URI,
        "response_type": "code",
        "state": "state-42",
        **GRANT_PARAMS[type(fake)],
        **params,
    }
    if challenge is not None:
        query.update(code_challenge=challenge, code_challenge_method="S256")
    return f"{fake.authorize_url}?{urlencode(query)}"


def returned(location: str) -> dict[str, str]:
    """The query the provider sent the browser back with."""
    assert location.startswith(REDIRECT_URI + "?")
    return {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}


def consented_code(fake: OAuthFake) -> tuple[str, str]:
    """A code (and its verifier) from a person who pressed Allow."""
    verifier, challenge = pkce()
    return returned(fake.consent(authorize_url(fake, challenge)))["code"], verifier


def redeem(
    fake: OAuthFake, code: str, verifier: str, url: str | None = None, **changes: str
) -> httpx.Response:
    """The token request for a code (at ``url``, else the fake's token URL)."""
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT_URI,
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "code_verifier": verifier,
        **changes,
    }
    return http.post(url or fake.token_url, data=form)


def refresh(fake: OAuthFake | str, refresh_token: str) -> httpx.Response:
    """The token request for a refresh (at the fake's token URL, or the URL given)."""
    form = {
        "grant_type": "refresh_token",
        "refresh_token": refresh_token,
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
    }
    return http.post(fake if isinstance(fake, str) else fake.token_url, data=form)


def tokens(fake: OAuthFake) -> dict[str, Any]:
    """The token answer of a whole consent."""
    code, verifier = consented_code(fake)
    return redeem(fake, code, verifier).raise_for_status().json()


def bearer(access_token: str, **headers: str) -> dict[str, str]:
    """Headers with ``access_token`` as the bearer."""
    return {"Authorization": f"Bearer {access_token}", **headers}


def calendars_url(fake: OAuthFake) -> str:
    """The provider's list of the account's calendars."""
    if isinstance(fake, FakeGoogle):
        return fake.calendar_api_url + "/users/me/calendarList"
    return fake.graph_url + "/me/calendars"


def daily_events(fake: OAuthFake, calendar_id: str, count: int) -> list[str]:
    """``count`` hour-long events at 9:00 in Berlin on the days from MONDAY on; their ids."""
    days = (MONDAY + timedelta(days=day) for day in range(count))
    return [fake.add_event(calendar_id, start, start + HOUR) for start in days]


def assert_invalid_grant(fake: OAuthFake, answer: httpx.Response, aadsts: int) -> None:
    """400 ``invalid_grant``; Microsoft's also names its AADSTS code."""
    assert (answer.status_code, answer.json()["error"]) == (400, "invalid_grant")
    if isinstance(fake, FakeMicrosoft):
        assert answer.json()["error_codes"] == [aadsts]
        assert answer.json()["error_description"].startswith(f"AADSTS{aadsts}: ")


# Both providers: the authorization server
def test_the_consent_page_shows_the_account_and_allow_and_deny_buttons(fake: OAuthFake) -> None:
    page = http.get(authorize_url(fake, pkce()[1]))
    assert page.status_code == 200
    assert EMAIL in page.text
    assert '<form method="post"' in page.text
    assert ">Allow</button>" in page.text
    assert ">Deny</button>" in page.text


def test_allow_redirects_to_the_redirect_uri_with_a_code_and_the_state(fake: OAuthFake) -> None:
    query = returned(fake.consent(authorize_url(fake, pkce()[1])))
    assert query["state"] == "state-42"
    assert query["code"]


def test_deny_redirects_with_access_denied_and_the_state(fake: OAuthFake) -> None:
    query = returned(fake.consent(authorize_url(fake, pkce()[1]), allow=False))
    assert query == {"error": "access_denied", "state": "state-42"}


def test_an_authorize_request_without_a_code_challenge_is_refused(fake: OAuthFake) -> None:
    location = http.get(authorize_url(fake, None)).headers["location"]
    assert returned(location)["error"] == "invalid_request"


def test_an_unregistered_redirect_uri_gets_an_error_page_not_a_redirect(fake: OAuthFake) -> None:
    fake.register_client("strict-client", "secret", [REDIRECT_URI])
    url = authorize_url(
        fake, pkce()[1], client_id="strict-client", redirect_uri="http://evil.test/"
    )
    answer = http.get(url)
    assert answer.status_code == 400
    assert "location" not in answer.headers


def test_a_code_and_its_verifier_buy_a_bearer_token_for_3599_seconds(fake: OAuthFake) -> None:
    answer = tokens(fake)
    assert answer["token_type"] == "Bearer"
    assert answer["expires_in"] == 3599
    assert answer["refresh_token"]
    calendars = http.get(calendars_url(fake), headers=bearer(answer["access_token"]))
    assert calendars.status_code == 200


def test_a_wrong_code_verifier_is_refused(fake: OAuthFake) -> None:
    code, _ = consented_code(fake)
    assert_invalid_grant(fake, redeem(fake, code, pkce()[0]), 501481)


def test_a_code_is_single_use(fake: OAuthFake) -> None:
    code, verifier = consented_code(fake)
    assert redeem(fake, code, verifier).status_code == 200
    assert_invalid_grant(fake, redeem(fake, code, verifier), 54005)


def test_a_code_expires_after_ten_minutes(fake: OAuthFake) -> None:
    code, verifier = consented_code(fake)
    fake.advance_clock(601)
    assert_invalid_grant(fake, redeem(fake, code, verifier), 70008)


def test_the_token_request_must_name_the_authorize_requests_redirect_uri(fake: OAuthFake) -> None:
    code, verifier = consented_code(fake)
    answer = redeem(fake, code, verifier, redirect_uri="http://127.0.0.1:9/other")
    assert answer.status_code == 400
    assert answer.json()["error"] in ("redirect_uri_mismatch", "invalid_grant")


def test_a_wrong_client_secret_is_invalid_client(fake: OAuthFake) -> None:
    code, verifier = consented_code(fake)
    answer = redeem(fake, code, verifier, client_secret="wrong")
    assert (answer.status_code, answer.json()["error"]) == (401, "invalid_client")


def test_a_refresh_token_buys_a_new_access_token(fake: OAuthFake) -> None:
    first = tokens(fake)
    answer = refresh(fake, first["refresh_token"]).raise_for_status().json()
    assert answer["access_token"] != first["access_token"]
    assert answer["expires_in"] == 3599


def test_a_refresh_after_the_grant_is_revoked_is_invalid_grant(fake: OAuthFake) -> None:
    refresh_token = tokens(fake)["refresh_token"]
    fake.revoke_grants(EMAIL)
    assert_invalid_grant(fake, refresh(fake, refresh_token), 50173)


def test_an_expired_refresh_token_is_invalid_grant(fake: OAuthFake) -> None:
    refresh_token = tokens(fake)["refresh_token"]
    fake.expire_refresh_token(refresh_token)
    assert_invalid_grant(fake, refresh(fake, refresh_token), 700082)


def test_an_expired_access_token_gets_401_and_a_refreshed_one_works(fake: OAuthFake) -> None:
    answer = tokens(fake)
    fake.expire_access_tokens()
    assert http.get(calendars_url(fake), headers=bearer(answer["access_token"])).status_code == 401
    renewed = refresh(fake, answer["refresh_token"]).json()["access_token"]
    assert http.get(calendars_url(fake), headers=bearer(renewed)).status_code == 200


def test_an_access_token_expires_when_its_lifetime_has_passed(fake: OAuthFake) -> None:
    access_token = tokens(fake)["access_token"]
    fake.advance_clock(3600)
    assert http.get(calendars_url(fake), headers=bearer(access_token)).status_code == 401


def test_a_request_without_a_bearer_token_gets_401(fake: OAuthFake) -> None:
    assert http.get(calendars_url(fake)).status_code == 401


def test_a_refresh_token_issued_directly_refreshes(fake: OAuthFake) -> None:
    answer = refresh(fake, fake.issue_refresh_token(EMAIL)).raise_for_status().json()
    assert http.get(calendars_url(fake), headers=bearer(answer["access_token"])).status_code == 200


def test_the_fake_records_each_requests_method_path_and_query(fake: OAuthFake) -> None:
    access_token = fake.issue_access_token(EMAIL)
    fake.clear_requests()
    http.get(calendars_url(fake), params={"maxResults": "5"}, headers=bearer(access_token))
    [seen] = fake.requests
    assert (seen.method, seen.path, seen.query) == (
        "GET",
        urlsplit(calendars_url(fake)).path,
        {"maxResults": "5"},
    )


# Google: OAuth specifics
def test_google_refreshing_keeps_the_refresh_token(google: FakeGoogle) -> None:
    answer = refresh(google, tokens(google)["refresh_token"]).json()
    assert "refresh_token" not in answer


def test_google_gives_no_refresh_token_without_offline_access(google: FakeGoogle) -> None:
    verifier, challenge = pkce()
    url = authorize_url(google, challenge, access_type="online")
    code = returned(google.consent(url))["code"]
    assert "refresh_token" not in redeem(google, code, verifier).json()


def test_google_revoke_endpoint_ends_the_grant(google: FakeGoogle) -> None:
    answer = tokens(google)
    assert http.post(google.revoke_url, data={"token": answer["access_token"]}).status_code == 200
    assert_invalid_grant(google, refresh(google, answer["refresh_token"]), 0)
    assert refresh(google, answer["refresh_token"]).json()["error_description"] == (
        "Token has been expired or revoked."
    )
    again = http.post(google.revoke_url, data={"token": answer["refresh_token"]})
    assert (again.status_code, again.json()["error"]) == (400, "invalid_token")


# Google Calendar API v3
@pytest.fixture
def google_api(google: FakeGoogle) -> httpx.Client:
    """A client of the Calendar API as the connected account."""
    with google.api_client(EMAIL) as client:
        yield client


def listing(api: httpx.Client, params: dict[str, str] | None = None) -> httpx.Response:
    """events.list of the primary calendar."""
    return api.get("/calendars/primary/events", params=params)


def test_google_calendar_list_marks_the_primary_calendar(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    other = google.add_calendar(EMAIL, "Team")
    items = google_api.get("/users/me/calendarList").json()["items"]
    assert [(i["id"], i.get("primary", False)) for i in items] == [(EMAIL, True), (other, False)]


def test_google_events_list_pages_then_hands_out_a_sync_token(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    daily_events(google, EMAIL, 5)
    google.set_page_size(2)
    pages = [listing(google_api, {**JANUARY, "singleEvents": "true"}).json()]
    while "nextPageToken" in pages[-1]:
        assert "nextSyncToken" not in pages[-1]
        pages.append(listing(google_api, {"pageToken": pages[-1]["nextPageToken"]}).json())
    assert [len(page["items"]) for page in pages] == [2, 2, 1]
    assert pages[-1]["nextSyncToken"]


def test_google_max_results_is_honoured_below_the_fakes_page_size(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    daily_events(google, EMAIL, 3)
    page = listing(google_api, {**JANUARY, "maxResults": "1"}).json()
    assert len(page["items"]) == 1
    assert page["nextPageToken"]


def test_google_events_list_keeps_to_the_window(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    inside = google.add_event(EMAIL, MONDAY, MONDAY + HOUR)
    google.add_event(EMAIL, MONDAY + timedelta(days=40), MONDAY + timedelta(days=40) + HOUR)
    items = listing(google_api, JANUARY).json()["items"]
    assert [item["id"] for item in items] == [inside]


def test_google_single_events_expands_a_series_in_the_window_without_its_exdates(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    series = google.add_event(
        EMAIL,
        MONDAY,
        MONDAY + HOUR,
        time_zone="Europe/Berlin",
        recurrence=["RRULE:FREQ=WEEKLY;BYDAY=MO", "EXDATE;TZID=Europe/Berlin:20310113T090000"],
    )
    params = {**JANUARY, "singleEvents": "true", "orderBy": "startTime"}
    items = listing(google_api, params).json()["items"]
    assert [item["start"]["dateTime"] for item in items] == [
        "2031-01-06T09:00:00+01:00",
        "2031-01-20T09:00:00+01:00",
        "2031-01-27T09:00:00+01:00",
    ]
    assert {item["recurringEventId"] for item in items} == {series}
    assert items[0]["id"] == f"{series}_20310106T080000Z"
    assert items[0]["originalStartTime"] == {
        "dateTime": "2031-01-06T09:00:00+01:00",
        "timeZone": "Europe/Berlin",
    }


def test_google_a_series_keeps_its_wall_time_across_daylight_saving(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    start = datetime(2031, 3, 24, 9, tzinfo=BERLIN)  # Berlin moves to summer time on 30 March
    rule = "RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=2"
    google.add_event(EMAIL, start, start + HOUR, time_zone="Europe/Berlin", recurrence=[rule])
    params = {"singleEvents": "true", "timeZone": "UTC"}
    items = listing(google_api, params).json()["items"]
    assert [item["start"]["dateTime"] for item in items] == [
        "2031-03-24T08:00:00Z",
        "2031-03-31T07:00:00Z",
    ]


def test_google_without_single_events_a_series_is_one_master(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    series = google.add_event(
        EMAIL, MONDAY, MONDAY + HOUR, time_zone="Europe/Berlin", recurrence=["RRULE:FREQ=DAILY"]
    )
    items = listing(google_api, JANUARY).json()["items"]
    assert [(item["id"], item["recurrence"]) for item in items] == [(series, ["RRULE:FREQ=DAILY"])]


def test_google_order_by_start_time_needs_single_events(google_api: httpx.Client) -> None:
    assert listing(google_api, {"orderBy": "startTime"}).status_code == 400


def test_google_all_day_transparent_and_tentative_events_keep_their_fields(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    google.add_event(
        EMAIL, date(2031, 1, 7), date(2031, 1, 8), transparency="transparent", status="tentative"
    )
    [item] = listing(google_api, JANUARY).json()["items"]
    assert (item["start"], item["end"]) == ({"date": "2031-01-07"}, {"date": "2031-01-08"})
    assert (item["transparency"], item["status"]) == ("transparent", "tentative")


def test_google_incremental_sync_answers_only_a_change_and_a_deletion_in_one_request(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    kept, changed, deleted = daily_events(google, EMAIL, 3)
    google.set_page_size(2)
    full = listing(google_api, {**JANUARY, "singleEvents": "true"}).json()
    full = listing(google_api, {"pageToken": full["nextPageToken"]}).json()
    google.update_event(EMAIL, changed, summary="Moved")
    google.delete_event(EMAIL, deleted)
    google.clear_requests()
    answer = listing(
        google_api,
        {"singleEvents": "true", "syncToken": full["nextSyncToken"]},
    ).json()
    assert len(google.requests) == 1
    assert [(item["id"], item["status"]) for item in answer["items"]] == [
        (changed, "confirmed"),
        (deleted, "cancelled"),
    ]
    assert answer["items"][0]["summary"] == "Moved"
    assert kept not in {item["id"] for item in answer["items"]}
    assert answer["nextSyncToken"] != full["nextSyncToken"]


def test_google_incremental_sync_with_nothing_changed_is_empty(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    google.add_event(EMAIL, MONDAY, MONDAY + HOUR)
    token = listing(google_api, JANUARY).json()["nextSyncToken"]
    answer = listing(google_api, {"syncToken": token}).json()
    assert answer["items"] == []


def test_google_an_exdate_added_to_a_series_syncs_as_a_cancelled_instance(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    rule = "RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=3"
    series = google.add_event(
        EMAIL, MONDAY, MONDAY + HOUR, time_zone="Europe/Berlin", recurrence=[rule]
    )
    token = listing(google_api, {**JANUARY, "singleEvents": "true"}).json()["nextSyncToken"]
    google.update_event(EMAIL, series, recurrence=[rule, "EXDATE:20310113T080000Z"])
    answer = listing(google_api, {"singleEvents": "true", "syncToken": token}).json()
    cancelled = [item for item in answer["items"] if item["status"] == "cancelled"]
    assert [(item["id"], item["recurringEventId"]) for item in cancelled] == [
        (f"{series}_20310113T080000Z", series)
    ]


def test_google_an_invalidated_sync_token_is_410_full_sync_required(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    token = listing(google_api, JANUARY).json()["nextSyncToken"]
    google.invalidate_sync_tokens()
    answer = listing(google_api, {"syncToken": token})
    assert answer.status_code == 410
    assert answer.json()["error"]["errors"][0]["reason"] == "fullSyncRequired"


@pytest.mark.parametrize(
    "restriction", ["timeMin", "timeMax", "orderBy", "q", "updatedMin", "iCalUID"]
)
def test_google_a_sync_token_cannot_be_combined_with_a_restriction(
    google_api: httpx.Client, restriction: str
) -> None:
    token = listing(google_api).json()["nextSyncToken"]
    answer = listing(
        google_api,
        {"syncToken": token, restriction: "2031-01-01T00:00:00Z"},
    )
    assert answer.status_code == 400


def test_google_time_min_needs_an_offset(google_api: httpx.Client) -> None:
    assert listing(google_api, {"timeMin": "2031-01-01T00:00:00"}).status_code == 400


def test_google_insert_with_a_client_id_stores_the_event(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    body = {
        "id": "booking0001v",
        "summary": "Booked",
        "start": {"dateTime": "2031-01-06T10:00:00Z"},
        "end": {"dateTime": "2031-01-06T11:00:00Z"},
    }
    answer = google_api.post("/calendars/primary/events", json=body)
    assert (answer.status_code, answer.json()["id"]) == (200, "booking0001v")
    assert google.event(EMAIL, "booking0001v")["summary"] == "Booked"


def test_google_insert_with_an_existing_id_is_409_duplicate(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    body = {
        "id": "booking0001v",
        "start": {"dateTime": "2031-01-06T10:00:00Z"},
        "end": {"dateTime": "2031-01-06T11:00:00Z"},
    }
    assert google_api.post("/calendars/primary/events", json=body).status_code == 200
    again = google_api.post("/calendars/primary/events", json=body)
    assert again.status_code == 409
    assert again.json()["error"]["errors"][0]["reason"] == "duplicate"
    assert len(google.events(EMAIL)) == 1


def test_google_insert_refuses_an_id_outside_base32hex(google_api: httpx.Client) -> None:
    body = {
        "id": "Booking-1",
        "start": {"dateTime": "2031-01-06T10:00:00Z"},
        "end": {"dateTime": "2031-01-06T11:00:00Z"},
    }
    assert google_api.post("/calendars/primary/events", json=body).status_code == 400


def test_google_patch_changes_only_the_fields_given(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    event_id = google.add_event(
        EMAIL, MONDAY, MONDAY + HOUR, summary="Before", transparency="transparent"
    )
    answer = google_api.patch(f"/calendars/primary/events/{event_id}", json={"summary": "After"})
    assert answer.status_code == 200
    stored = google.event(EMAIL, event_id)
    assert (stored["summary"], stored["transparency"]) == ("After", "transparent")


def test_google_delete_is_204_then_410_deleted(
    google: FakeGoogle, google_api: httpx.Client
) -> None:
    event_id = google.add_event(EMAIL, MONDAY, MONDAY + HOUR)
    first = google_api.delete(f"/calendars/primary/events/{event_id}")
    assert (first.status_code, first.content) == (204, b"")
    second = google_api.delete(f"/calendars/primary/events/{event_id}")
    assert second.status_code == 410
    assert second.json()["error"]["errors"][0]["reason"] == "deleted"
    assert google.events(EMAIL) == []


def test_google_an_unknown_event_is_404(google_api: httpx.Client) -> None:
    assert google_api.delete("/calendars/primary/events/nosuchevent").status_code == 404


def test_google_a_deleted_calendar_is_404(google: FakeGoogle, google_api: httpx.Client) -> None:
    team = google.add_calendar(EMAIL, "Team")
    google.delete_calendar(team)
    assert google_api.get(f"/calendars/{team}/events").status_code == 404


def test_google_a_scope_without_calendar_access_is_403(google: FakeGoogle) -> None:
    access_token = google.issue_access_token(EMAIL, scope="openid email")
    answer = http.get(
        google.calendar_api_url + "/users/me/calendarList", headers=bearer(access_token)
    )
    assert answer.status_code == 403


# Microsoft: identity platform specifics
def test_microsoft_refreshing_rotates_the_refresh_token(microsoft: FakeMicrosoft) -> None:
    first = tokens(microsoft)["refresh_token"]
    second = refresh(microsoft, first).json()["refresh_token"]
    assert second != first
    assert refresh(microsoft, second).status_code == 200


def test_microsoft_accepts_any_tenant(microsoft: FakeMicrosoft) -> None:
    code, verifier = consented_code(microsoft)
    url = f"{microsoft.login_url}/organizations/oauth2/v2.0/token"
    assert redeem(microsoft, code, verifier, url).status_code == 200


def test_microsoft_gives_no_refresh_token_without_offline_access(microsoft: FakeMicrosoft) -> None:
    verifier, challenge = pkce()
    url = authorize_url(microsoft, challenge, scope="Calendars.ReadWrite")
    code = returned(microsoft.consent(url))["code"]
    assert "refresh_token" not in redeem(microsoft, code, verifier).json()


def test_microsoft_a_revoked_grant_keeps_its_access_tokens_until_they_expire(
    microsoft: FakeMicrosoft,
) -> None:
    access_token = tokens(microsoft)["access_token"]
    microsoft.revoke_grants(EMAIL)
    assert http.get(calendars_url(microsoft), headers=bearer(access_token)).status_code == 200
    microsoft.expire_access_tokens()
    answer = http.get(calendars_url(microsoft), headers=bearer(access_token))
    assert (answer.status_code, answer.json()["error"]["code"]) == (
        401,
        "InvalidAuthenticationToken",
    )


# Microsoft Graph v1.0
@pytest.fixture
def graph(microsoft: FakeMicrosoft) -> httpx.Client:
    """A client of Graph as the connected account."""
    with microsoft.api_client(EMAIL) as client:
        yield client


def delta_round(
    graph: httpx.Client, url: str, params: dict[str, str] | None = None, **headers: str
) -> list[dict[str, Any]]:
    """Every page of a delta round, from its first URL to its delta link."""
    pages = [graph.get(url, params=params, headers=headers).raise_for_status().json()]
    while "@odata.nextLink" in pages[-1]:
        assert "@odata.deltaLink" not in pages[-1]
        pages.append(
            graph.get(pages[-1]["@odata.nextLink"], headers=headers).raise_for_status().json()
        )
    return pages


def test_microsoft_me_names_the_account(graph: httpx.Client) -> None:
    me = graph.get("/me").json()
    assert (me["mail"], me["userPrincipalName"], me["displayName"]) == (
        EMAIL,
        EMAIL,
        "Ada Lovelace",
    )


def test_microsoft_calendars_lists_the_default_calendar_first(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    other = microsoft.add_calendar(EMAIL, "Team")
    value = graph.get("/me/calendars").json()["value"]
    assert [(c["id"], c["isDefaultCalendar"]) for c in value] == [
        (microsoft.default_calendar_id(), True),
        (other, False),
    ]


def test_microsoft_delta_pages_with_next_links_then_a_delta_link(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    daily_events(microsoft, microsoft.default_calendar_id(), 5)
    url = f"/me/calendars/{microsoft.default_calendar_id()}/calendarView/delta"
    pages = delta_round(graph, url, GRAPH_JANUARY, Prefer="odata.maxpagesize=2")
    assert [len(page["value"]) for page in pages] == [2, 2, 1]
    assert all("$skiptoken=" in page["@odata.nextLink"] for page in pages[:-1])
    assert "$deltatoken=" in pages[-1]["@odata.deltaLink"]


def test_microsoft_the_fakes_page_size_caps_every_page(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    daily_events(microsoft, microsoft.default_calendar_id(), 3)
    microsoft.set_page_size(1)
    pages = delta_round(
        graph, "/me/calendarView/delta", GRAPH_JANUARY, Prefer="odata.maxpagesize=50"
    )
    assert [len(page["value"]) for page in pages] == [1, 1, 1]


def test_microsoft_a_delta_link_answers_only_a_change_and_a_removal(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    calendar = microsoft.default_calendar_id()
    kept, changed, removed = daily_events(microsoft, calendar, 3)
    delta_link = delta_round(graph, f"/me/calendars/{calendar}/calendarView/delta", GRAPH_JANUARY)[
        -1
    ]["@odata.deltaLink"]
    microsoft.update_event(calendar, changed, showAs="tentative")
    microsoft.delete_event(calendar, removed)
    microsoft.clear_requests()
    [page] = delta_round(graph, delta_link)
    assert len(microsoft.requests) == 1
    assert page["value"] == [
        {**page["value"][0], "id": changed, "showAs": "tentative"},
        {"@odata.type": "#microsoft.graph.event", "id": removed, "@removed": {"reason": "deleted"}},
    ]
    assert kept not in {item["id"] for item in page["value"]}


def test_microsoft_an_invalidated_delta_link_is_410_sync_state_not_found(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    delta_link = delta_round(graph, "/me/calendarView/delta", GRAPH_JANUARY)[-1]["@odata.deltaLink"]
    microsoft.invalidate_sync_tokens()
    answer = graph.get(delta_link)
    assert (answer.status_code, answer.json()["error"]["code"]) == (410, "SyncStateNotFound")


def test_microsoft_a_delta_without_a_time_window_is_400(graph: httpx.Client) -> None:
    assert graph.get("/me/calendarView/delta").status_code == 400


def the_only_event(graph: httpx.Client, **headers: str) -> dict[str, Any]:
    """The one event a delta round of January shows in the default calendar."""
    [item] = delta_round(graph, "/me/calendarView/delta", GRAPH_JANUARY, **headers)[-1]["value"]
    return item


def test_microsoft_answers_in_utc_with_seven_fractional_digits(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    microsoft.add_event(
        microsoft.default_calendar_id(), MONDAY, MONDAY + HOUR, "W. Europe Standard Time"
    )
    item = the_only_event(graph)
    assert item["start"] == {"dateTime": "2031-01-06T08:00:00.0000000", "timeZone": "UTC"}
    assert (item["type"], item["isAllDay"], item["originalStartTimeZone"]) == (
        "singleInstance",
        False,
        "W. Europe Standard Time",
    )


def test_microsoft_prefer_outlook_timezone_answers_in_that_zone(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    microsoft.add_event(microsoft.default_calendar_id(), MONDAY, MONDAY + HOUR)
    start = the_only_event(graph, Prefer='outlook.timezone="America/New_York"')["start"]
    assert start == {"dateTime": "2031-01-06T03:00:00.0000000", "timeZone": "America/New_York"}


def test_microsoft_answer_time_zone_answers_in_a_windows_zone_whatever_was_preferred(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    microsoft.add_event(
        microsoft.default_calendar_id(),
        datetime(2031, 1, 6, 8, tzinfo=UTC),
        datetime(2031, 1, 6, 9, tzinfo=UTC),
    )
    microsoft.set_answer_time_zone("W. Europe Standard Time")
    start = the_only_event(graph, Prefer='outlook.timezone="UTC"')["start"]
    assert start == {
        "dateTime": "2031-01-06T09:00:00.0000000",
        "timeZone": "W. Europe Standard Time",
    }


def test_microsoft_an_all_day_event_runs_from_midnight_to_midnight(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    microsoft.add_event(
        microsoft.default_calendar_id(), date(2031, 1, 7), date(2031, 1, 8), show_as="oof"
    )
    item = the_only_event(graph, Prefer='outlook.timezone="Pacific Standard Time"')
    assert (item["isAllDay"], item["showAs"]) == (True, "oof")
    assert (item["start"]["dateTime"], item["end"]["dateTime"]) == (
        "2031-01-07T00:00:00.0000000",
        "2031-01-08T00:00:00.0000000",
    )


def test_microsoft_a_weekly_series_is_expanded_into_occurrences_in_the_window(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    recurrence = patterned_recurrence(
        "weekly",
        date(2031, 1, 6),
        days_of_week=("monday", "wednesday"),
        time_zone="W. Europe Standard Time",
    )
    series = microsoft.add_event(
        microsoft.default_calendar_id(),
        MONDAY,
        MONDAY + HOUR,
        time_zone="W. Europe Standard Time",
        recurrence=recurrence,
    )
    window = {"startDateTime": "2031-01-06T00:00:00", "endDateTime": "2031-01-14T00:00:00"}
    items = [
        i for page in delta_round(graph, "/me/calendarView/delta", window) for i in page["value"]
    ]
    assert [item["start"]["dateTime"] for item in items] == [
        "2031-01-06T08:00:00.0000000",
        "2031-01-08T08:00:00.0000000",
        "2031-01-13T08:00:00.0000000",
    ]
    assert {(item["type"], item["seriesMasterId"]) for item in items} == {("occurrence", series)}


def test_microsoft_a_daily_series_ends_at_its_end_date(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    recurrence = patterned_recurrence(
        "daily", date(2031, 1, 6), interval=2, end_date=date(2031, 1, 10)
    )
    microsoft.add_event(
        microsoft.default_calendar_id(), MONDAY, MONDAY + HOUR, recurrence=recurrence
    )
    items = delta_round(graph, "/me/calendarView/delta", GRAPH_JANUARY)[-1]["value"]
    assert [item["start"]["dateTime"][:10] for item in items] == [
        "2031-01-06",
        "2031-01-08",
        "2031-01-10",
    ]


def test_microsoft_an_occurrence_changed_alone_is_an_exception(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    recurrence = patterned_recurrence("daily", date(2031, 1, 6), occurrences=2)
    series = microsoft.add_event(
        microsoft.default_calendar_id(), MONDAY, MONDAY + HOUR, recurrence=recurrence
    )
    answer = graph.patch(f"/me/events/{series}_20310107", json={"showAs": "free"})
    assert (answer.status_code, answer.json()["type"], answer.json()["showAs"]) == (
        200,
        "exception",
        "free",
    )
    items = delta_round(graph, "/me/calendarView/delta", GRAPH_JANUARY)[-1]["value"]
    assert [(item["type"], item["showAs"]) for item in items] == [
        ("occurrence", "busy"),
        ("exception", "free"),
    ]


def test_microsoft_a_retried_create_with_the_same_transaction_id_answers_the_same_event(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    body = {
        "subject": "Booked",
        "start": {"dateTime": "2031-01-06T10:00:00", "timeZone": "UTC"},
        "end": {"dateTime": "2031-01-06T11:00:00", "timeZone": "UTC"},
        "showAs": "busy",
        "transactionId": "booking-17",
    }
    first = graph.post(f"/me/calendars/{microsoft.default_calendar_id()}/events", json=body)
    again = graph.post(f"/me/calendars/{microsoft.default_calendar_id()}/events", json=body)
    assert (first.status_code, again.status_code) == (201, 201)
    assert first.json()["id"] == again.json()["id"]
    assert [
        event["transactionId"] for event in microsoft.events(microsoft.default_calendar_id())
    ] == ["booking-17"]


def test_microsoft_patch_changes_only_the_fields_given(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    event_id = microsoft.add_event(
        microsoft.default_calendar_id(), MONDAY, MONDAY + HOUR, subject="Before", show_as="oof"
    )
    answer = graph.patch(f"/me/events/{event_id}", json={"subject": "After"})
    assert answer.status_code == 200
    stored = microsoft.event(microsoft.default_calendar_id(), event_id)
    assert (stored["subject"], stored["showAs"]) == ("After", "oof")


def test_microsoft_a_create_with_a_show_as_graph_does_not_know_is_400(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    body = {
        "start": {"dateTime": "2031-01-06T10:00:00", "timeZone": "UTC"},
        "end": {"dateTime": "2031-01-06T11:00:00", "timeZone": "UTC"},
        "showAs": "away",
    }
    assert graph.post("/me/events", json=body).status_code == 400


def test_microsoft_delete_is_204_then_404_item_not_found(
    microsoft: FakeMicrosoft, graph: httpx.Client
) -> None:
    event_id = microsoft.add_event(microsoft.default_calendar_id(), MONDAY, MONDAY + HOUR)
    first = graph.delete(f"/me/events/{event_id}")
    assert (first.status_code, first.content) == (204, b"")
    second = graph.delete(f"/me/events/{event_id}")
    assert (second.status_code, second.json()["error"]["code"]) == (404, "ErrorItemNotFound")


def test_microsoft_a_deleted_calendar_is_404(microsoft: FakeMicrosoft, graph: httpx.Client) -> None:
    team = microsoft.add_calendar(EMAIL, "Team")
    microsoft.delete_calendar(team)
    answer = graph.get(f"/me/calendars/{team}/calendarView/delta", params=GRAPH_JANUARY)
    assert (answer.status_code, answer.json()["error"]["code"]) == (404, "ErrorItemNotFound")


# Each fake as a process of its own
@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "token_path"),
    [("tests.google_servers", "/token"), ("tests.microsoft_servers", "/common/oauth2/v2.0/token")],
)
def test_each_fake_runs_as_its_own_process(module: str, token_path: str) -> None:
    command = [
        sys.executable,
        "-m",
        module,
        "--port",
        "0",
        "--client-id",
        CLIENT_ID,
        "--client-secret",
        CLIENT_SECRET,
    ]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        base = process.stdout.readline().strip()
        lines = dict(process.stdout.readline().strip().split(": ", 1) for _ in range(3))
        assert lines["account"] == "someone@example.com"
        assert refresh(base + token_path, lines["refresh token"]).status_code == 200
    finally:
        stop_process(process)
