"""A fake of Google's OAuth 2.0 server and Calendar API v3 on a loopback port, for tests of the
app's Google Calendar connections (which cannot reach Google from here). What it shares with
the Microsoft fake (serving, OAuth, tokens, paging, sync tokens) is ``tests.oauth_fakes``.

Endpoints, under ``FakeGoogle.url``:

* ``GET /o/oauth2/v2/auth`` — the consent page (``POST`` is its form); ``POST /token`` —
  ``authorization_code`` (PKCE) and ``refresh_token`` grants; ``POST /revoke``;
* ``/calendar/v3``: ``GET users/me/calendarList``, ``GET calendars/{id}``,
  ``GET|POST calendars/{id}/events`` (events.list, events.insert),
  ``GET|PATCH|PUT|DELETE calendars/{id}/events/{eventId}``,
  ``POST calendars/{id}/events/watch`` (events.watch), ``POST channels/stop``,
  ``POST freeBusy`` (freebusy.query); ``primary`` names the account's primary calendar.

As documented: a refresh token only for ``access_type=offline``, and refreshing does not
rotate it; revoking an access or refresh token revokes the grant (both stop working);
``invalid_grant`` bodies ``{"error", "error_description"}``. events.list: ``timeMin`` (exclusive,
on an event's end) and ``timeMax`` (exclusive, on its start) must be RFC 3339 with an offset;
``singleEvents=true`` expands ``recurrence`` (``RRULE``/``EXDATE``) into instances whose ids are
``{id}_{UTC start}`` (``{id}_{date}`` all day) with ``recurringEventId`` and
``originalStartTime``; ``orderBy=startTime`` only with ``singleEvents``; ``maxResults``
(default 250, at most 2500) pages with ``nextPageToken``, and the last page carries
``nextSyncToken``; ``syncToken`` cannot be combined with iCalUID, orderBy,
privateExtendedProperty, q, sharedExtendedProperty, timeMin, timeMax or updatedMin (400); an
incremental sync answers only the events changed since its token, deleted ones as
``status: cancelled``; an invalidated token answers 410 ``fullSyncRequired``. events.insert
takes a client ``id`` (base32hex, 5–1024 characters; 409 ``duplicate`` when the calendar has
or had it); delete answers 204, then 410 ``deleted``; errors are
``{"error": {"errors": [{"domain", "reason", "message"}], "code", "message"}}``.

Conferences, as the events reference and "Add video and phone conferences to events" document
them: with ``conferenceDataVersion=1`` (insert, update, patch) a body's ``conferenceData`` is
read, else ignored (the stored one kept). ``conferenceData.createRequest`` (``requestId``
required, ``conferenceSolutionKey.type`` ``hangoutsMeet``) makes a Google Meet conference:
``conferenceData`` answers ``conferenceId`` (``abc-defg-hij``), ``entryPoints`` (a ``video``
one, ``https://meet.google.com/{id}``, and a ``more`` one), ``conferenceSolution`` (``key``,
``name``, ``iconUri``) and the ``createRequest`` with ``status.statusCode`` ``success``, and
the event's ``hangoutLink``. A create request whose ``requestId`` the event's conference was
made by is ignored (the same conference stays); a later write that leaves ``conferenceData`` out
keeps it; ``conferenceData: null`` (version 1) removes it. Every conference made is counted
(``conferences_made``); with ``conferences_pending`` on, a new conference answers
``statusCode: pending`` without entry points until ``finish_conferences`` (as Google may
answer while it is still making one). Deleting the event ends its conference.

Push notifications, as the guide documents them: events.watch takes ``{"id", "type":
"web_hook", "address", "token"?, "expiration"? (ms), "params"?: {"ttl"}}`` and answers the
channel (``kind: api#channel``, ``resourceId``, the same for every channel of a calendar,
``resourceUri``, ``expiration`` as a string of milliseconds), which lives until the expiration
asked for, at most (and by default) a week; a channel id still live is 400
``channelIdNotUnique``; an address that is not HTTPS is 400 ``push.webhookUrlNotHttps`` (but
``http`` to a loopback address is accepted, for tests). The ``sync`` message (number 1) goes
out at once; then every insert, change or deletion of the calendar's events (through the API
or the control methods) sends each live channel an empty POST with ``X-Goog-Channel-ID``,
``X-Goog-Channel-Token`` (if any), ``X-Goog-Channel-Expiration`` (an HTTP date),
``X-Goog-Resource-ID``, ``X-Goog-Resource-URI``, ``X-Goog-Resource-State: exists`` and an
increasing ``X-Goog-Message-Number``. channels.stop answers 204, or 404 ``notFound`` for a
channel unknown, ended, of another client or of another resource. freebusy.query answers, per
calendar asked for, its busy intervals in the window (opaque events that are not cancelled,
series expanded), merged, clipped to the window, in UTC; a calendar the caller cannot see has
``errors: [{"domain": "global", "reason": "notFound"}]``.

Simplified: a sync token remembers the window and expansion of its full sync, and expands
series only within that window (or two years from the window's start, or the series' first
start); instances of a series cannot be edited one by one (``EXDATE`` removes one); a deleted
event cannot be patched (410); search, extended properties, attendees and notifications are
stored as given and not acted on. Push: the messages go out one at a time, in order, and are
not retried; ``not_exists`` is never sent (deleting a calendar tells no channel); a requested
expiration in the past is refused (400); freeBusy answers in UTC whatever its ``timeZone``, and
knows no groups nor the range limits of the real service.
"""

from __future__ import annotations

import base64
import copy
import re
import secrets
import sys
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from email.utils import format_datetime
from typing import Any
from urllib.parse import quote, urlsplit

from dateutil.rrule import rruleset, rrulestr
from werkzeug.exceptions import HTTPException, MethodNotAllowed
from werkzeug.wrappers import Request, Response

from tests.oauth_fakes import (
    Account,
    Invalid,
    OAuthFake,
    Push,
    Refusal,
    TokenGone,
    UnknownToken,
    Window,
    expand,
    iana_zone,
    is_loopback,
    locked,
    midnight,
    parse_instant,
    route,
    serve_from_command_line,
)

CALENDAR_SCOPE = "https://www.googleapis.com/auth/calendar"
EVENT_ID = re.compile(r"[a-v0-9]{5,1024}")
CHANNEL_ID = re.compile(r"[A-Za-z0-9\-_+/=]{1,64}")  # as the push guide allows
CHANNEL_LIFETIME = timedelta(days=7)  # the longest an events channel lives, and its default
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
USER_AGENT = "APIs-Google; (+https://developers.google.com/webmasters/APIs-Google.html)"
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)")
MEET_SOLUTION = {
    "key": {"type": "hangoutsMeet"},
    "name": "Google Meet",
    "iconUri": "https://fonts.gstatic.com/s/i/productlogos/meet_2020q4/v6/web-512dp/"
    "logo_meet_2020q4_color_2x_web_512dp.png",
}
# Fields of an event the server writes from a conference (a client's are ignored).
CONFERENCE_FIELDS = frozenset({"conferenceData", "hangoutLink"})
SYNC_TOKEN_RESTRICTIONS = (
    "iCalUID",
    "orderBy",
    "privateExtendedProperty",
    "q",
    "sharedExtendedProperty",
    "timeMin",
    "timeMax",
    "updatedMin",
)
# Fields the server writes; a client's values for them are ignored.
SERVER_FIELDS = frozenset(
    {"kind", "etag", "created", "updated", "htmlLink", "creator", "organizer", "sequence"}
)
# kind -> (status, error, error_description), as Google's token endpoint answers.
OAUTH_REFUSALS = {
    "invalid_client": (401, "invalid_client", "Unauthorized"),
    "unsupported_grant_type": (400, "unsupported_grant_type", "Invalid grant_type"),
    "code_invalid": (400, "invalid_grant", "Malformed auth code."),
    "code_used": (400, "invalid_grant", "Bad Request"),
    "code_expired": (400, "invalid_grant", "Bad Request"),
    "redirect_mismatch": (400, "redirect_uri_mismatch", "Bad Request"),
    "verifier_missing": (400, "invalid_grant", "Missing code verifier."),
    "verifier_mismatch": (400, "invalid_grant", "Invalid code verifier."),
    "refresh_invalid": (400, "invalid_grant", "Bad Request"),
    "refresh_expired": (400, "invalid_grant", "Token has been expired or revoked."),
    "grant_revoked": (400, "invalid_grant", "Token has been expired or revoked."),
}
UNAUTHENTICATED = (
    "Request had invalid authentication credentials. Expected OAuth 2 access token, login "
    "cookie or other valid authentication credential."
)


def google_error(
    status: int, reason: str, message: str, *, headers: dict[str, str] | None = None, **more: str
) -> Refusal:
    """Google's error body: one entry in ``errors``, ``code`` and ``message`` beside it."""
    error = {"domain": "global", "reason": reason, "message": message, **more}
    return Refusal(
        status, {"error": {"errors": [error], "code": status, "message": message}}, headers
    )


def base32hex_id() -> str:
    """An event or calendar id as Google makes them: base32hex, lowercase."""
    return base64.b32hexencode(uuid.uuid4().bytes).decode().lower().rstrip("=")


def rfc3339(instant: datetime) -> str:
    """An instant as Google writes a ``dateTime``: an offset, or ``Z`` in UTC."""
    text = instant.isoformat(timespec="seconds")
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def milliseconds(instant: datetime) -> int:
    """An instant as milliseconds since the epoch (a channel's ``expiration``), exactly."""
    return (instant - EPOCH) // timedelta(milliseconds=1)


def stamp(instant: datetime) -> str:
    """``created`` and ``updated``: UTC with milliseconds."""
    utc = instant.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def time_field(value: datetime | date, time_zone: str | None = None) -> dict[str, str]:
    """A start or end as Google writes it: ``{"date"}`` for a date (all day), else
    ``{"dateTime"[, "timeZone"]}`` for an aware datetime (shown in ``time_zone`` if given)."""
    if not isinstance(value, datetime):
        return {"date": value.isoformat()}
    if value.tzinfo is None:
        raise ValueError(f"{value!r} is naive: give an aware datetime or a date")
    if time_zone is None:
        return {"dateTime": rfc3339(value)}
    return {"dateTime": rfc3339(value.astimezone(iana_zone(time_zone))), "timeZone": time_zone}


def meet_code() -> str:
    """A Meet conference id as Google makes them: ``abc-defg-hij``."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    parts = (3, 4, 3)
    return "-".join("".join(secrets.choice(letters) for _ in range(n)) for n in parts)


def moment(when: dict[str, Any], which: str) -> datetime | date:
    """The instant (or date) of a stored or requested start/end."""
    if when.get("date"):
        try:
            return date.fromisoformat(when["date"])
        except (TypeError, ValueError) as err:
            raise Invalid("invalid", f"Invalid {which} time.") from err
    if not when.get("dateTime"):
        raise Invalid("required", f"Missing {which} time.")
    try:
        naive_zone = iana_zone(when["timeZone"]) if when.get("timeZone") else None
    except ValueError as err:
        raise Invalid("invalid", f"Invalid time zone definition for {which} time.") from err
    try:
        instant = datetime.fromisoformat(when["dateTime"])
    except (TypeError, ValueError) as err:
        raise Invalid("invalid", f"Invalid {which} time.") from err
    if instant.tzinfo is None and naive_zone is None:
        raise Invalid("invalid", f"Missing time zone definition for {which} time.")
    return parse_instant(when["dateTime"], naive_zone)


@dataclass
class GoogleCalendar:
    """A calendar of an account; the primary one's id is the account's email."""

    id: str
    owner: str  # the account's email
    summary: str
    time_zone: str
    primary: bool
    # Its events as stored (series unexpanded); deleted ones stay, with status "cancelled".
    events: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def zone(self) -> tzinfo:
        return iana_zone(self.time_zone)


@dataclass
class Channel:
    """A notification channel of events.watch: where it sends its messages (``address``, with
    ``token``), what it watches (``calendar_id``: the calendar's own id, whatever the request
    named), until when (``expiration``, in UTC to the millisecond) unless ``stopped``; the
    number of its last message (the sync message is 1)."""

    id: str
    calendar_id: str
    client_id: str
    address: str
    token: str | None
    resource_id: str
    resource_uri: str
    expiration: datetime
    stopped: bool = False
    messages: int = 1

    def live(self, now: datetime) -> bool:
        return not self.stopped and self.expiration > now


class FakeGoogle(OAuthFake):
    """Google's OAuth 2.0 server and Calendar API v3, on loopback (see the module)."""

    calendars: dict[str, GoogleCalendar]
    time_field = staticmethod(time_field)
    title = "Fake Google"
    authorize_rule = authorize_path = "/o/oauth2/v2/auth"
    token_rule = token_path = "/token"
    scope_word = "calendar"
    rotates_refresh_tokens = False
    revocation_ends_access_tokens = True
    default_page_size = 250
    prefixes = ("4/0A", "ya29.", "1//0")
    api_prefix = "/calendar/v3"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.watches: list[Channel] = []  # every channel made, ended ones too
        self.resource_ids: dict[str, str] = {}  # a calendar's id -> its channels' resourceId
        self.conferences_made: list[dict[str, Any]] = []  # every conference, as first made
        self.conferences_pending = False  # new conferences answer "pending" until finished
        super().__init__(*args, **kwargs)

    # The URLs the app is configured with
    @property
    def revoke_url(self) -> str:
        return self.url + "/revoke"

    @property
    def calendar_api_url(self) -> str:
        return self.url + "/calendar/v3"

    def app_settings(self) -> dict[str, str]:
        """The app's configuration that makes it use this fake (and its first client)."""
        client = next(iter(self.clients.values()))
        return {
            "GOOGLE_CLIENT_ID": client.id,
            "GOOGLE_CLIENT_SECRET": client.secret,
            "GOOGLE_AUTHORIZE_URL": self.authorize_url,
            "GOOGLE_TOKEN_URL": self.token_url,
            "GOOGLE_REVOKE_URL": self.revoke_url,
            "GOOGLE_CALENDAR_API_URL": self.calendar_api_url,
        }

    # Control: calendars and events
    @locked
    def add_calendar(self, email: str, summary: str, *, time_zone: str | None = None) -> str:
        """A secondary calendar of ``email``'s account; returns its id."""
        account = self.accounts[email]
        calendar_id = f"{base32hex_id()}@group.calendar.google.com"
        zone = time_zone or account.time_zone
        self.calendars[calendar_id] = GoogleCalendar(calendar_id, email, summary, zone, False)
        return calendar_id

    def add_event(
        self,
        calendar_id: str,
        start: datetime | date,
        end: datetime | date,
        *,
        summary: str = "Busy",
        event_id: str | None = None,
        time_zone: str | None = None,
        transparency: str | None = None,
        status: str | None = None,
        recurrence: list[str] | None = None,
        **fields: Any,
    ) -> str:
        """An event as a person would make it; returns its id. ``start``/``end``: aware
        datetimes (shown in ``time_zone`` when given, which a series needs) or dates (all
        day, end exclusive); ``recurrence``: ``["RRULE:…", "EXDATE…"]``; ``fields``: any
        other event fields, as the API writes them. Refused as the API would refuse it
        (``Invalid``, a ValueError)."""
        body: dict[str, Any] = {
            "summary": summary,
            "start": time_field(start, time_zone),
            "end": time_field(end, time_zone),
            **fields,
        }
        optional = {"id": event_id, "transparency": transparency, "status": status}
        body.update({key: value for key, value in optional.items() if value is not None})
        if recurrence is not None:
            body["recurrence"] = recurrence
        with self.lock:
            return self._insert(self.calendars[calendar_id], body, conference_version=1)["id"]

    @locked
    def events(self, calendar_id: str, *, include_deleted: bool = False) -> list[dict[str, Any]]:
        """The calendar's events as stored (series unexpanded), to check what the app wrote."""
        stored = self.calendars[calendar_id].events.values()
        return [copy.deepcopy(e) for e in stored if include_deleted or e["status"] != "cancelled"]

    @locked
    def event(self, calendar_id: str, event_id: str) -> dict[str, Any]:
        """One stored event (deleted ones too, as ``status: cancelled``)."""
        return copy.deepcopy(self.calendars[calendar_id].events[event_id])

    # Control: conferences
    @locked
    def finish_conferences(self) -> None:
        """Every conference still being made is made: its entry points appear and its
        create request's status is ``success`` (new ones are made at once again)."""
        self.conferences_pending = False
        for calendar in self.calendars.values():
            for event in calendar.events.values():
                conference = event.get("conferenceData")
                status = (conference or {}).get("createRequest", {}).get("status", {})
                if status.get("statusCode") == "pending":
                    self._made(event, conference)
                    event.update(
                        etag=f'"{self.next_version()}"', updated=stamp(self.current_datetime())
                    )

    # Control: push notifications
    @locked
    def channels(self, *, include_ended: bool = False) -> list[Channel]:
        """Copies of the live notification channels (with ``include_ended``, the stopped and
        expired ones too), oldest first."""
        now = self.current_datetime()
        return [replace(c) for c in self.watches if include_ended or c.live(now)]

    @locked
    def expire_channel(self, channel_id: str) -> None:
        """The live channel ``channel_id`` expires now, on the fake's clock (as every channel
        does once ``advance_clock`` passes its expiration): no more messages, and
        channels.stop answers 404."""
        now = self.current_datetime()
        live = [c for c in self.watches if c.id == channel_id and c.live(now)]
        if not live:
            raise KeyError(channel_id)
        for channel in live:
            channel.expiration = now

    # Provider hooks
    @property
    def full_scope(self) -> str:
        return CALENDAR_SCOPE

    def new_account_id(self) -> str:
        return str(uuid.uuid4().int)[:21]

    def new_primary_calendar(self, account: Account) -> str:
        calendar = GoogleCalendar(
            account.email, account.email, account.email, account.time_zone, True
        )
        self.calendars[calendar.id] = calendar
        return calendar.id

    def offline(self, args: Any) -> bool:
        return args.get("access_type") == "offline"

    def id_claims(self, account: Account) -> dict[str, Any]:
        return {
            "iss": self.url,
            "sub": account.id,
            "email": account.email,
            "email_verified": True,
            "name": account.name,
        }

    def oauth_refusal(self, kind: str) -> Refusal:
        status, error, description = OAUTH_REFUSALS[kind]
        return Refusal(status, {"error": error, "error_description": description})

    def unauthenticated(self, kind: str) -> Refusal:
        if kind == "scope":
            message = "Request had insufficient authentication scopes."
            refusal = google_error(403, "insufficientPermissions", message)
            refusal.body["error"]["status"] = "PERMISSION_DENIED"
            return refusal
        challenge = 'Bearer realm="https://accounts.google.com/", error="invalid_token"'
        refusal = google_error(
            401,
            "authError",
            "Invalid Credentials",
            headers={"WWW-Authenticate": challenge},
            location="Authorization",
            locationType="header",
        )
        refusal.body["error"].update(message=UNAUTHENTICATED, status="UNAUTHENTICATED")
        return refusal

    def unreadable(self) -> Refusal:
        return google_error(400, "parseError", "Parse Error")

    def no_such_path(self, err: HTTPException) -> Refusal:
        if isinstance(err, MethodNotAllowed):
            return google_error(405, "httpMethodNotAllowed", "Method Not Allowed")
        return google_error(404, "notFound", "Not Found")

    def removal(self, item: dict[str, Any]) -> dict[str, Any]:
        stub = {"kind": "calendar#event", "etag": item["etag"], "id": item["id"]}
        for key in ("recurringEventId", "originalStartTime"):
            if key in item:
                stub[key] = item[key]
        return {**stub, "status": "cancelled"}

    # The OAuth endpoint Google has beyond the shared ones
    @route("/revoke", "POST")
    def revoke(self, request: Request) -> Response:
        """Revoke a token (and so its grant): 200, or 400 ``invalid_token``."""
        token = request.form.get("token") or request.args.get("token", "")
        if not self.revoke_token(token):
            refusal = {"error": "invalid_token", "error_description": "Token expired or revoked"}
            return self.answer(refusal, 400)
        return self.answer({})

    # Calendar API v3
    @route("/calendar/v3/users/me/calendarList")
    def calendar_list(self, request: Request) -> Response:
        """calendarList.list: the account's calendars, the primary one marked."""
        grant = self.grant_of(request)
        mine = [c for c in self.calendars.values() if c.owner == grant.account.email]
        mine.sort(key=lambda c: (not c.primary, c.summary))
        token = request.args.get("pageToken")
        if token is None:
            token = self.rounds.begin([self._list_entry(c) for c in mine], None)
        items, next_page, _ = self._page(token, request.args, 250)
        body: dict[str, Any] = {
            "kind": "calendar#calendarList",
            "etag": f'"{self.versions}"',
            "items": items,
        }
        if next_page:
            body["nextPageToken"] = next_page
        return self.answer(body)

    @route("/calendar/v3/calendars/<calendar_id>")
    def calendar_resource(self, request: Request, calendar_id: str) -> Response:
        """calendars.get."""
        calendar = self._calendar_for(request, calendar_id)
        return self.answer(
            {
                "kind": "calendar#calendar",
                "etag": f'"{self.versions}"',
                "id": calendar.id,
                "summary": calendar.summary,
                "timeZone": calendar.time_zone,
            }
        )

    @route("/calendar/v3/calendars/<calendar_id>/events", "GET", "POST")
    def event_collection(self, request: Request, calendar_id: str) -> Response:
        """events.list (GET) and events.insert (POST)."""
        calendar = self._calendar_for(request, calendar_id)
        if request.method == "GET":
            return self._list(calendar, request.args)
        body = self.json_body(request)
        version = self._conference_version(request)
        return self._answer_event(calendar, lambda: self._insert(calendar, body, version))

    @route(
        "/calendar/v3/calendars/<calendar_id>/events/<event_id>", "GET", "PATCH", "PUT", "DELETE"
    )
    def event_resource(self, request: Request, calendar_id: str, event_id: str) -> Response:
        """events.get, events.patch, events.update (PUT) and events.delete."""
        calendar = self._calendar_for(request, calendar_id)
        if event_id not in calendar.events:
            raise google_error(404, "notFound", "Not Found")
        if request.method == "DELETE":
            self.remove_event(calendar, event_id)
            return self.answer(None, 204)
        if request.method == "GET":
            return self._answer_event(calendar, lambda: calendar.events[event_id])
        body = self.json_body(request)
        replace = request.method == "PUT"
        version = self._conference_version(request)
        return self._answer_event(
            calendar, lambda: self.change_event(calendar, event_id, body, replace, version)
        )

    @route("/calendar/v3/calendars/<calendar_id>/events/watch", "POST")
    def watch(self, request: Request, calendar_id: str) -> Response:
        """events.watch: a channel told of every change to the calendar's events; its sync
        message goes out at once."""
        calendar = self._calendar_for(request, calendar_id)
        client_id = self.grant_of(request).client_id
        channel = self._new_channel(calendar, calendar_id, client_id, self.json_body(request))
        self.watches.append(channel)
        self._send(channel, "sync")
        body: dict[str, Any] = {
            "kind": "api#channel",
            "id": channel.id,
            "resourceId": channel.resource_id,
            "resourceUri": channel.resource_uri,
        }
        if channel.token is not None:
            body["token"] = channel.token
        body["expiration"] = str(milliseconds(channel.expiration))
        return self.answer(body)

    @route("/calendar/v3/channels/stop", "POST")
    def stop_channel(self, request: Request) -> Response:
        """channels.stop: the channel sends no more messages (204); 404 for a channel that is
        unknown, ended, of another client, or of another resource."""
        grant = self.grant_of(request)
        body = self.json_body(request)
        now = self.current_datetime()
        channel = next(
            (
                c
                for c in self.watches
                if c.id == body.get("id") and c.client_id == grant.client_id and c.live(now)
            ),
            None,
        )
        if channel is None or channel.resource_id != body.get("resourceId"):
            message = f"Channel '{body.get('id')}' not found for project '{grant.client_id}'"
            raise google_error(404, "notFound", message)
        channel.stopped = True
        return self.answer(None, 204)

    @route("/calendar/v3/freeBusy", "POST")
    def free_busy(self, request: Request) -> Response:
        """freebusy.query: each calendar's busy intervals within the window."""
        grant = self.grant_of(request)
        body = self.json_body(request)
        start, end = self._body_instant(body, "timeMin"), self._body_instant(body, "timeMax")
        if end <= start:
            raise google_error(400, "timeRangeEmpty", "The specified time range is empty.")
        zone = body.get("timeZone")
        if zone is not None:
            try:
                iana_zone(zone)
            except (TypeError, ValueError) as err:
                raise google_error(400, "invalid", "Invalid time zone definition.") from err
        items = body.get("items", [])
        if not isinstance(items, list) or not all(
            isinstance(item, dict) and isinstance(item.get("id"), str) for item in items
        ):
            raise google_error(400, "invalid", "Invalid items value.")
        found: dict[str, Any] = {}
        for item in items:
            asked = item["id"]
            calendar = self.calendars.get(grant.account.email if asked == "primary" else asked)
            if calendar is None or calendar.owner != grant.account.email:
                found[asked] = {"errors": [{"domain": "global", "reason": "notFound"}], "busy": []}
            else:
                found[asked] = {"busy": self._busy(calendar, Window(start, end))}
        return self.answer(
            {
                "kind": "calendar#freeBusy",
                "timeMin": stamp(start),
                "timeMax": stamp(end),
                "calendars": found,
            }
        )

    # Conferences
    def _conference_version(self, request: Request) -> int:
        text = request.args.get("conferenceDataVersion", "0")
        if text not in ("0", "1"):
            message = f"Invalid value '{text}'. Values must be within the range: [0, 1]"
            raise google_error(400, "invalidParameter", message)
        return int(text)

    def _conference(
        self, event: dict[str, Any], body: dict[str, Any], stored: dict[str, Any], version: int
    ) -> None:
        """Set ``event``'s conference from a write's ``body`` (``stored``: the event as it was,
        {} for a new one): kept as stored unless version 1 and the body names one."""
        for key in CONFERENCE_FIELDS:
            event.pop(key, None)
            if key in stored:
                event[key] = copy.deepcopy(stored[key])
        if version != 1 or "conferenceData" not in body:
            return
        asked = body["conferenceData"]
        if asked is None:
            for key in CONFERENCE_FIELDS:
                event.pop(key, None)
            return
        if not isinstance(asked, dict):
            raise Invalid("invalid", "Invalid conference data.")
        request = asked.get("createRequest")
        if request is None:  # conference data copied from another event, as given
            event["conferenceData"] = copy.deepcopy(asked)
            return
        if not isinstance(request, dict) or not request.get("requestId"):
            raise Invalid("required", "Missing conference create request id.")
        solution = (request.get("conferenceSolutionKey") or {}).get("type")
        if solution != "hangoutsMeet":
            raise Invalid("invalid", "Invalid conference type value.")
        made = (stored.get("conferenceData") or {}).get("createRequest") or {}
        if made.get("requestId") == request["requestId"]:
            return  # a create request this conference was made by: ignored
        conference: dict[str, Any] = {
            "createRequest": {
                "requestId": request["requestId"],
                "conferenceSolutionKey": {"type": solution},
                "status": {"statusCode": "pending"},
            },
        }
        if self.conferences_pending:
            event.pop("hangoutLink", None)
            event["conferenceData"] = conference
        else:
            self._made(event, conference)
        self.conferences_made.append(copy.deepcopy(event["conferenceData"]))

    def _made(self, event: dict[str, Any], conference: dict[str, Any]) -> None:
        """The conference made: its id, entry points and solution, the request succeeded."""
        code = meet_code()
        link = f"https://meet.google.com/{code}"
        conference.update(
            conferenceId=code,
            entryPoints=[
                {"entryPointType": "video", "uri": link, "label": f"meet.google.com/{code}"},
                {
                    "entryPointType": "more",
                    "uri": f"https://tel.meet/{code}?pin={secrets.randbelow(10**13):013d}",
                    "pin": f"{secrets.randbelow(10**13):013d}",
                },
            ],
            conferenceSolution=copy.deepcopy(MEET_SOLUTION),
        )
        conference["createRequest"]["status"] = {"statusCode": "success"}
        event["conferenceData"] = conference
        event["hangoutLink"] = link

    # Push notifications
    def _new_channel(
        self, calendar: GoogleCalendar, asked_id: str, client_id: str, body: dict[str, Any]
    ) -> Channel:
        """The channel a watch request asks for, or the API's 400."""
        channel_id = body.get("id")
        if not isinstance(channel_id, str) or not channel_id:
            raise google_error(400, "required", "Required")
        if not CHANNEL_ID.fullmatch(channel_id):
            raise google_error(400, "invalid", f"Invalid channel id value: {channel_id}")
        if body.get("type") != "web_hook":
            raise google_error(400, "invalid", f"Invalid channel type: {body.get('type')}")
        address = body.get("address")
        if not isinstance(address, str) or not address:
            raise google_error(400, "required", "Required")
        parts = urlsplit(address)
        secure = parts.scheme == "https" and bool(parts.hostname)
        if not secure and not (parts.scheme == "http" and is_loopback(address)):
            message = f"WebHook callback must be HTTPS: {address}"
            raise google_error(400, "push.webhookUrlNotHttps", message)
        token = body.get("token")
        if token is not None and (not isinstance(token, str) or len(token) > 256):
            raise google_error(400, "invalid", "Invalid channel token value.")
        now = self.current_datetime()
        if any(
            c.id == channel_id and c.client_id == client_id and c.live(now) for c in self.watches
        ):
            raise google_error(400, "channelIdNotUnique", f"Channel id {channel_id} not unique")
        resource_id = self.resource_ids.setdefault(calendar.id, secrets.token_urlsafe(20))
        return Channel(
            channel_id,
            calendar.id,
            client_id,
            address,
            token,
            resource_id,
            f"{self.calendar_api_url}/calendars/{quote(asked_id, safe='@')}/events?alt=json",
            self._channel_expiration(body, now),
        )

    def _channel_expiration(self, body: dict[str, Any], now: datetime) -> datetime:
        """When a channel ends: as asked (``expiration`` in ms, or ``params.ttl`` seconds, the
        sooner of the two), at most a week from now; to the millisecond."""
        asked = [milliseconds(now + CHANNEL_LIFETIME)]
        requested = body.get("expiration")
        if requested is not None:
            if isinstance(requested, bool) or not str(requested).isdigit():
                raise google_error(400, "invalid", f"Invalid expiration value: {requested}")
            asked.append(int(requested))
        params = body.get("params") or {}
        ttl = params.get("ttl") if isinstance(params, dict) else None
        if ttl is not None:
            if isinstance(ttl, bool) or not str(ttl).isdigit():
                raise google_error(400, "invalid", f"Invalid ttl value: {ttl}")
            asked.append(milliseconds(now) + int(ttl) * 1000)
        if min(asked) <= milliseconds(now):
            raise google_error(400, "invalid", "The channel expiration is in the past.")
        return EPOCH + timedelta(milliseconds=min(asked))

    def _notify(self, calendar: GoogleCalendar) -> None:
        """Tell each live channel of ``calendar`` that its events changed."""
        now = self.current_datetime()
        for channel in self.watches:
            if channel.calendar_id == calendar.id and channel.live(now):
                channel.messages += 1
                self._send(channel, "exists")

    def _send(self, channel: Channel, state: str) -> None:
        """A message of ``channel`` (``sync`` or ``exists``), as the guide shows it."""
        headers = {
            "Content-Type": "application/json; utf-8",
            "User-Agent": USER_AGENT,
            "X-Goog-Channel-ID": channel.id,
            "X-Goog-Channel-Expiration": format_datetime(channel.expiration, usegmt=True),
            "X-Goog-Resource-ID": channel.resource_id,
            "X-Goog-Resource-URI": channel.resource_uri,
            "X-Goog-Resource-State": state,
            "X-Goog-Message-Number": "1" if state == "sync" else str(channel.messages),
        }
        if channel.token is not None:
            headers["X-Goog-Channel-Token"] = channel.token
        self.send_push(Push(channel.id, channel.address, state, headers))

    # Free/busy
    def _body_instant(self, body: dict[str, Any], name: str) -> datetime:
        text = body.get(name)
        if text is None:
            raise google_error(400, "required", f"Missing {name} parameter.")
        if not isinstance(text, str) or not RFC3339.fullmatch(text):
            raise google_error(400, "badRequest", "Bad Request")
        return parse_instant(text.replace("z", "Z"))

    def _busy(self, calendar: GoogleCalendar, window: Window) -> list[dict[str, str]]:
        """The calendar's busy intervals in ``window``: its opaque events that are not
        cancelled (series expanded), clipped to the window, merged where they touch."""
        spans = []
        for event in calendar.events.values():
            if event["status"] == "cancelled" or event.get("transparency") == "transparent":
                continue
            items = self._instances(calendar, event, window) if event.get("recurrence") else [event]
            for item in items:
                begin, finish = self._span(calendar, item)
                if window.overlaps(begin, finish):
                    spans.append((max(begin, window.start), min(finish, window.end)))
        merged: list[tuple[datetime, datetime]] = []
        for begin, finish in sorted(spans):
            if merged and begin <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], finish))
            else:
                merged.append((begin, finish))
        return [
            {"start": rfc3339(begin.astimezone(UTC)), "end": rfc3339(finish.astimezone(UTC))}
            for begin, finish in merged
        ]

    # Reading
    def _calendar_for(self, request: Request, calendar_id: str) -> GoogleCalendar:
        grant = self.grant_of(request)
        if calendar_id == "primary":
            calendar_id = grant.account.email
        calendar = self.calendars.get(calendar_id)
        if calendar is None or calendar.owner != grant.account.email:
            raise google_error(404, "notFound", "Not Found")
        return calendar

    def _answer_event(self, calendar: GoogleCalendar, action: Any) -> Response:
        try:
            event = action()
        except Invalid as err:
            status = 409 if err.reason == "duplicate" else 400
            raise google_error(status, err.reason, err.message) from err
        return self.answer(self._shown(event, calendar.zone))

    def _list_entry(self, calendar: GoogleCalendar) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "kind": "calendar#calendarListEntry",
            "etag": f'"{self.versions}"',
            "id": calendar.id,
            "summary": calendar.summary,
            "timeZone": calendar.time_zone,
            "colorId": "14",
            "backgroundColor": "#9fe1e7",
            "foregroundColor": "#000000",
            "selected": True,
            "accessRole": "owner",
            "defaultReminders": [],
        }
        if calendar.primary:
            entry["primary"] = True
        return entry

    def _page(self, token: str, args: Any, most: int) -> tuple[list, str | None, str | None]:
        text = args.get("maxResults")
        if text is not None and (not text.isdigit() or not 1 <= int(text) <= most):
            message = f"Invalid value '{text}'. Values must be within the range: [1, {most}]"
            raise google_error(400, "invalidParameter", message)
        try:
            return self.page_of(token, int(text) if text else None)
        except UnknownToken as err:
            raise google_error(400, "invalid", "Invalid page token value.") from err

    def _list(self, calendar: GoogleCalendar, args: Any) -> Response:
        sync_token = args.get("syncToken")
        if sync_token is not None and any(name in args for name in SYNC_TOKEN_RESTRICTIONS):
            message = "Sync token cannot be used with other request restrictions."
            raise google_error(400, "syncTokenWithRequestRestrictions", message)
        token = args.get("pageToken")
        if token is None and sync_token is None:
            params = self._list_params(calendar, args)
            every = self._view(calendar, params, windowed=False)
            shown = self._view(calendar, params, windowed=True)
            token = self.begin_round(calendar.id, params, every, shown=shown)
        elif token is None:
            state = self._sync_state(calendar, sync_token)
            every = self._view(calendar, state.params, windowed=False)
            token = self.begin_round(calendar.id, state.params, every, told=state.snapshot)
        items, next_page, next_sync = self._page(token, args, 2500)
        body: dict[str, Any] = {
            "kind": "calendar#events",
            "etag": f'"{self.versions}"',
            "summary": calendar.summary,
            "description": "",
            "updated": stamp(self.current_datetime()),
            "timeZone": args.get("timeZone") or calendar.time_zone,
            "accessRole": "owner",
            "defaultReminders": [],
        }
        if next_page:
            body["nextPageToken"] = next_page
        else:
            body["nextSyncToken"] = next_sync
        return self.answer({**body, "items": items})

    def _sync_state(self, calendar: GoogleCalendar, token: str) -> Any:
        try:
            state = self.sync_states.find(token)
        except TokenGone as err:
            message = "Sync token is no longer valid, a full sync is required."
            raise google_error(
                410,
                "fullSyncRequired",
                message,
                locationType="parameter",
                location="syncToken",
            ) from err
        except UnknownToken as err:
            raise google_error(400, "invalid", "Invalid sync token value.") from err
        if state.calendar_id != calendar.id:
            raise google_error(400, "invalid", "Invalid sync token value.")
        return state

    def _list_params(self, calendar: GoogleCalendar, args: Any) -> dict[str, Any]:
        def instant(name: str) -> datetime | None:
            text = args.get(name)
            if text is None:
                return None
            if not RFC3339.fullmatch(text):
                raise google_error(400, "badRequest", "Bad Request")
            return parse_instant(text.replace("z", "Z"))

        single = args.get("singleEvents", "false").lower() == "true"
        if args.get("orderBy") == "startTime" and not single:
            message = "The requested ordering is not available for the particular query."
            raise google_error(400, "badRequest", message)
        zone = args.get("timeZone")
        if zone is not None:
            try:
                iana_zone(zone)
            except ValueError as err:
                raise google_error(400, "invalid", "Invalid time zone definition.") from err
        start, end = instant("timeMin"), instant("timeMax")
        if start and end and end <= start:
            raise google_error(400, "timeRangeEmpty", "The specified time range is empty.")
        return {
            "window": Window(start, end),
            "single": single,
            "deleted": args.get("showDeleted", "false").lower() == "true",
            "zone": zone or calendar.time_zone,
        }

    def _view(
        self, calendar: GoogleCalendar, params: dict[str, Any], *, windowed: bool
    ) -> list[dict[str, Any]]:
        """What a listing shows: within the window when ``windowed``, else every event (what a
        sync token compares with); series expanded with ``singleEvents``."""
        window: Window = params["window"]
        found = []
        for event in calendar.events.values():
            if event["status"] == "cancelled" and not (windowed and params["deleted"]):
                continue
            if event.get("recurrence") and (params["single"] or windowed):
                instances = self._instances(calendar, event, window)
                if params["single"]:
                    found += instances
                elif instances:
                    found.append(event)
            elif (
                event.get("recurrence")
                or not windowed
                or window.overlaps(*self._span(calendar, event))
            ):
                found.append(event)
        found.sort(key=lambda item: (self._span(calendar, item)[0], item["id"]))
        zone = iana_zone(params["zone"])
        return [self._shown(item, zone) for item in found]

    def _span(self, calendar: GoogleCalendar, event: dict[str, Any]) -> tuple[datetime, datetime]:
        start, end = moment(event["start"], "start"), moment(event["end"], "end")
        if not isinstance(start, datetime):
            return midnight(start, calendar.zone), midnight(end, calendar.zone)
        return start, end

    def _series(
        self, calendar: GoogleCalendar, event: dict[str, Any]
    ) -> tuple[rruleset, datetime, timedelta, tzinfo | None]:
        """A series' rules, first start and duration; all-day series run on naive midnights
        (then the zone returned is None), timed ones on wall times in the event's zone."""
        start, end = moment(event["start"], "start"), moment(event["end"], "end")
        if isinstance(start, datetime):
            zone = iana_zone(event["start"].get("timeZone") or calendar.time_zone)
            first, duration, floating = start.astimezone(zone), end - start, None
        else:
            first = datetime.combine(start, time())
            duration, floating = datetime.combine(end, time()) - first, calendar.zone
        try:
            rules = rrulestr("\n".join(event["recurrence"]), dtstart=first, forceset=True)
        except (ValueError, TypeError) as err:
            raise Invalid("invalid", "Invalid recurrence rule.") from err
        return rules, first, duration, floating

    def _instances(
        self, calendar: GoogleCalendar, master: dict[str, Any], window: Window
    ) -> list[dict[str, Any]]:
        rules, first, duration, floating = self._series(calendar, master)
        aware_first = first if floating is None else first.replace(tzinfo=floating)
        start, end = window.bounds(aware_first)
        if floating is not None:
            start = start.astimezone(floating).replace(tzinfo=None)
            end = end.astimezone(floating).replace(tzinfo=None)
        try:
            begins = expand(rules, duration, start, end)
        except (ValueError, TypeError) as err:
            raise Invalid("invalid", "Invalid recurrence rule.") from err
        return [self._instance(master, begin, duration, floating is not None) for begin in begins]

    def _instance(
        self, master: dict[str, Any], begin: datetime, duration: timedelta, all_day: bool
    ) -> dict[str, Any]:
        item = {key: value for key, value in master.items() if key != "recurrence"}
        if all_day:
            item["start"] = {"date": begin.date().isoformat()}
            item["end"] = {"date": (begin + duration).date().isoformat()}
            suffix = begin.strftime("%Y%m%d")
        else:
            zone_name = master["start"].get("timeZone")
            item["start"] = {"dateTime": rfc3339(begin), "timeZone": zone_name}
            item["end"] = {"dateTime": rfc3339(begin + duration), "timeZone": zone_name}
            suffix = begin.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
        item["originalStartTime"] = dict(item["start"])
        item["id"] = f"{master['id']}_{suffix}"
        item["recurringEventId"] = master["id"]
        return item

    def _shown(self, event: dict[str, Any], zone: tzinfo) -> dict[str, Any]:
        """An event as an answer shows it: its times in the answer's zone."""
        shown = copy.deepcopy(event)
        for key in ("start", "end", "originalStartTime"):
            when = shown.get(key)
            if when and when.get("dateTime"):
                when["dateTime"] = rfc3339(moment(when, key).astimezone(zone))
        return shown

    # Writing
    def _validated(self, calendar: GoogleCalendar, event: dict[str, Any]) -> dict[str, Any]:
        """``event`` as the API stores it, or ``Invalid`` for what it refuses."""
        for which in ("start", "end"):
            if not isinstance(event.get(which), dict):
                raise Invalid("required", f"Missing {which} time.")
        start, end = moment(event["start"], "start"), moment(event["end"], "end")
        if isinstance(start, datetime) != isinstance(end, datetime):
            message = "Start and end times must either both be date or both be dateTime."
            raise Invalid("invalid", message)
        if end <= start:
            raise Invalid("timeRangeEmpty", "The specified time range is empty.")
        if event.get("transparency", "opaque") not in ("opaque", "transparent"):
            raise Invalid("invalid", "Invalid transparency value.")
        if event.get("status", "confirmed") not in ("confirmed", "tentative", "cancelled"):
            raise Invalid("invalid", "Invalid status value.")
        if event.get("recurrence") is not None:
            series = event["recurrence"]
            if not isinstance(series, list) or not all(isinstance(line, str) for line in series):
                raise Invalid("invalid", "Invalid recurrence rule.")
            if isinstance(start, datetime) and not event["start"].get("timeZone"):
                raise Invalid("invalid", "Missing time zone definition for start time.")
            self._instances(calendar, event, Window())  # refuses rules that cannot run
        else:
            event.pop("recurrence", None)
        return event

    def _insert(
        self, calendar: GoogleCalendar, body: dict[str, Any], conference_version: int = 0
    ) -> dict[str, Any]:
        event_id = body.get("id") or base32hex_id()
        if not isinstance(event_id, str) or not EVENT_ID.fullmatch(event_id):
            raise Invalid("invalid", "Invalid resource id value.")
        if event_id in calendar.events:
            raise Invalid("duplicate", "The requested identifier already exists.")
        now = stamp(self.current_datetime())
        event = {
            "kind": "calendar#event",
            "id": event_id,
            "status": "confirmed",
            "htmlLink": f"{self.url}/calendar/event?eid={event_id}",
            "created": now,
            "iCalUID": f"{event_id}@google.com",
            "creator": {"email": calendar.owner, "self": True},
            "organizer": {"email": calendar.id, "self": True},
            "sequence": 0,
            "reminders": {"useDefault": True},
            "eventType": "default",
            **{key: value for key, value in body.items() if key not in SERVER_FIELDS},
        }
        event = self._validated(calendar, event)
        self._conference(event, body, {}, conference_version)
        event.update(etag=f'"{self.next_version()}"', updated=now)
        calendar.events[event_id] = event
        self._notify(calendar)
        return event

    def change_event(
        self,
        calendar: GoogleCalendar,
        event_id: str,
        body: dict[str, Any],
        replace: bool = False,
        conference_version: int = 0,
    ) -> dict[str, Any]:
        stored = calendar.events[event_id]
        if stored["status"] == "cancelled":
            raise google_error(410, "deleted", "Resource has been deleted")
        changes = {key: value for key, value in body.items() if key not in SERVER_FIELDS | {"id"}}
        if replace:
            event = {
                key: value
                for key, value in stored.items()
                if key in SERVER_FIELDS | {"id", "iCalUID"}
            }
        else:
            event = copy.deepcopy(stored)
        for key, value in changes.items():
            if value is None:
                event.pop(key, None)
            elif (
                isinstance(value, dict)
                and isinstance(event.get(key), dict)
                and key not in ("start", "end")
            ):
                event[key] = {**event[key], **value}
            else:
                event[key] = value
        event = self._validated(calendar, event)
        self._conference(event, body, stored, conference_version)
        if any(event.get(key) != stored.get(key) for key in ("start", "end", "recurrence")):
            event["sequence"] = stored.get("sequence", 0) + 1
        event.update(etag=f'"{self.next_version()}"', updated=stamp(self.current_datetime()))
        calendar.events[event_id] = event
        self._notify(calendar)
        return event

    def remove_event(self, calendar: GoogleCalendar, event_id: str) -> None:
        event = calendar.events[event_id]
        if event["status"] == "cancelled":
            raise google_error(410, "deleted", "Resource has been deleted")
        event.update(
            status="cancelled",
            etag=f'"{self.next_version()}"',
            updated=stamp(self.current_datetime()),
        )
        self._notify(calendar)


if __name__ == "__main__":
    sys.exit(serve_from_command_line(FakeGoogle))
