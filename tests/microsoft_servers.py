"""A fake of the Microsoft identity platform (v2.0) and Microsoft Graph v1.0 calendars on a
loopback port, for tests of the app's Microsoft 365 connections (which cannot reach Microsoft
from here). What it shares with the Google fake (serving, OAuth, tokens, paging, sync tokens)
is ``tests.oauth_fakes``.

Endpoints, under ``FakeMicrosoft.url``:

* ``GET /{tenant}/oauth2/v2.0/authorize`` — the consent page (``POST`` is its form); ``POST
  /{tenant}/oauth2/v2.0/token`` — ``authorization_code`` (PKCE) and ``refresh_token`` grants;
  any tenant (``common``, ``organizations``, a GUID);
* ``/v1.0``: ``GET me``, ``GET me/calendars``, ``GET me/calendar``, ``GET me/calendars/{id}``,
  ``GET me/calendars/{id}/calendarView`` (and ``me/calendarView``, ``me/calendar/calendarView``:
  the default calendar), ``GET me/calendars/{id}/calendarView/delta`` (and
  ``me/calendarView/delta``), ``POST me/calendars/{id}/events`` (and ``me/events``,
  ``me/calendar/events``), ``GET|PATCH|DELETE me/events/{id}``; ``GET|POST subscriptions``,
  ``GET|PATCH|DELETE subscriptions/{id}`` (change notifications).

As documented: a refresh token only with the ``offline_access`` scope; each refresh answers a
new refresh token (the old one keeps working until it expires); token errors carry ``error``,
``error_description`` (``AADSTS…: …``) and ``error_codes``. Revoking a grant does not end the
access tokens already handed out (they are self-contained until they expire; a test also calls
``expire_access_tokens``). calendarView/delta: ``startDateTime``/``endDateTime`` (an instant
without offset is UTC) on the first request only, ``@odata.nextLink`` with ``$skiptoken`` while
pages remain, ``@odata.deltaLink`` with ``$deltatoken`` on the last; a round from a delta link
answers what changed in the window since, a removed event as ``{"id", "@removed": {"reason":
"deleted"}}``; ``Prefer: odata.maxpagesize=N``; a bad or invalidated token answers 410
``SyncStateNotFound``. Events: ``start``/``end`` ``{dateTime, timeZone}`` with 7 fractional
digits and no offset, in UTC unless ``Prefer: outlook.timezone="…"`` names a zone (IANA or
Windows names); ``isAllDay``, ``showAs``, ``isCancelled``, ``type`` (``singleInstance``,
``occurrence``, ``exception``, ``seriesMaster``), ``seriesMasterId``; a patterned recurrence
(``daily``/``weekly`` with ``daysOfWeek`` and ``interval``; range ``endDate``, ``numbered`` or
``noEnd``) is expanded into occurrences within the view; an occurrence changed or deleted on
its own is an exception or gone. A create with a ``transactionId`` the mailbox already has
answers that event; errors are ``{"error": {"code", "message", "innerError"}}``, 404
``ErrorItemNotFound``, 401 ``InvalidAuthenticationToken``. calendarView (not delta) answers the
same items as a delta round of the same window, afresh at each request, in pages linked by
``@odata.nextLink`` (``$skip``), of ``$top`` or ``Prefer: odata.maxpagesize`` items.

Online meetings, as "Create or set an event as an online meeting in an Outlook calendar"
documents them: a calendar lists ``allowedOnlineMeetingProviders`` (``teamsForBusiness`` unless
``set_online_meeting_providers`` says otherwise) and its ``defaultOnlineMeetingProvider``. An
event created, or patched, with ``isOnlineMeeting: true`` and an ``onlineMeetingProvider`` the
calendar allows (absent: its default) gets a Teams meeting: ``onlineMeeting`` with ``joinUrl``
(``https://teams.microsoft.com/l/meetup-join/…``), ``conferenceId`` and ``tollNumber``. Once
online, an event keeps its meeting: a later write cannot change ``onlineMeetingProvider`` nor
set ``isOnlineMeeting`` back to false (both are ignored), and a write without them keeps it. A
provider the calendar does not allow makes no meeting (the event stays ``isOnlineMeeting:
false``). Every meeting made is counted (``meetings_made``); the meeting goes with its event.

Change notifications, as documented: ``POST subscriptions`` takes ``changeType`` (a comma list
of ``created``, ``updated``, ``deleted``), ``notificationUrl``, ``lifecycleNotificationUrl``?,
``resource`` (``me/events``: every calendar of the mailbox; ``me/calendar/events``;
``me/calendars/{id}/events`` or ``me/calendars('{id}')/events``; with or without a leading
slash, ``users/{id or email}`` for ``me``), ``expirationDateTime`` (in the future, at most 10080
minutes ahead) and ``clientState``? (at most 128 characters). Before it answers, it validates
each URL synchronously: a POST of ``?validationToken=…`` (``text/plain``, empty body) that must
be answered 200 within 10 s with the token as a ``text/plain`` body, else 400 ``InvalidRequest``
"Subscription validation request failed. …"; a URL that is not HTTPS is 400 too (but ``http``
to a loopback address is accepted, for tests). The answer is 201 with the subscription
resource. ``GET|PATCH`` (``expirationDateTime``, same bounds) ``|DELETE`` (204) on its id, by
the app and account that made it; anything else, or an expired one, is 404
``ResourceNotFound``. Each create, change or deletion of an event in a subscribed calendar
(through the API or the control methods) POSTs ``{"value": [{"subscriptionId",
"subscriptionExpirationDateTime", "changeType", "resource": "Users/{user id}/Events/{id}",
"resourceData": {"@odata.type", "@odata.id", "@odata.etag", "id"}, "clientState"?,
"tenantId"}]}`` to each live subscription that asked for that change type; the receiver is
expected to answer 202. Lifecycle notifications (``send_lifecycle``) go to the
``lifecycleNotificationUrl``.

The quirk: with ``answer_time_zone`` set (``set_answer_time_zone("W. Europe Standard Time")``)
every answer's times come in that Windows zone, whatever the request preferred, as some
mailboxes answer.

Simplified: only ``daily`` and ``weekly`` patterns; an all-day event's dates are read in the
answer's zone; the default page size (10) is this fake's choice; ``$select``, ``$filter`` and
attendees are not acted on. Notifications: one per change and subscription, posted one at a
time in order, never retried nor batched, without resource data (``includeResourceData`` is
refused); a change to one occurrence of a series (or its deletion) is notified as ``updated``
of the series master; the validation handshake is not repeated when a subscription is renewed;
error messages other than the validation failure's are the fake's words.
"""

from __future__ import annotations

import copy
import json
import re
import sys
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
from dateutil.rrule import DAILY, WEEKLY, rrule, rruleset
from dateutil.rrule import weekday as rrule_weekday
from dateutil.rrule import weekdays as rrule_weekdays
from werkzeug.exceptions import HTTPException, MethodNotAllowed
from werkzeug.wrappers import Request, Response

from tests import oauth_fakes
from tests.oauth_fakes import (
    Account,
    Invalid,
    OAuthFake,
    Push,
    Refusal,
    Window,
    is_loopback,
    locked,
    route,
    unlocked,
)

CALENDAR_SCOPES = "openid profile offline_access User.Read Calendars.ReadWrite"
TENANT_ID = "9188040d-6c67-4c5b-b112-36a304b66dad"  # the tenant of personal accounts
SHOW_AS = ("free", "tentative", "busy", "oof", "workingElsewhere", "unknown")
CHANGE_TYPES = ("created", "updated", "deleted")
LIFECYCLE_EVENTS = ("reauthorizationRequired", "subscriptionRemoved", "missed")
SUBSCRIPTION_MINUTES = 10080  # the longest an Outlook event subscription lives
VALIDATION_TIMEOUT = 10.0  # seconds a notification endpoint has to answer the handshake
VALIDATION_FAILED = (
    "Subscription validation request failed. Notification endpoint must respond with 200 OK to "
    "validation request."
)
# The resources of events a subscription may name: every calendar of the mailbox, the default
# one, or one by id (``calendars/{id}`` or ``calendars('{id}')``).
SUBSCRIBABLE = re.compile(
    r"/?(?:me|users/(?P<user>[^/]+))/(?:(?P<every>events)|calendar/events"
    r"|calendars(?:/(?P<id>[^/()']+)|\('(?P<quoted>[^']+)'\))/events)",
    re.IGNORECASE,
)
JSON_HEADERS = {"Content-Type": "application/json; charset=utf-8"}
DAYS: dict[str, rrule_weekday] = dict(
    zip(
        ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"),
        rrule_weekdays,
        strict=True,
    )
)
# Windows time zone names Graph uses, and their IANA zones (the common ones).
WINDOWS_ZONES = {
    "UTC": "UTC",
    "GMT Standard Time": "Europe/London",
    "Greenwich Standard Time": "Atlantic/Reykjavik",
    "W. Europe Standard Time": "Europe/Berlin",
    "Romance Standard Time": "Europe/Paris",
    "Central Europe Standard Time": "Europe/Budapest",
    "Central European Standard Time": "Europe/Warsaw",
    "GTB Standard Time": "Europe/Bucharest",
    "FLE Standard Time": "Europe/Kyiv",
    "Russian Standard Time": "Europe/Moscow",
    "Israel Standard Time": "Asia/Jerusalem",
    "South Africa Standard Time": "Africa/Johannesburg",
    "Arabian Standard Time": "Asia/Dubai",
    "India Standard Time": "Asia/Kolkata",
    "China Standard Time": "Asia/Shanghai",
    "Singapore Standard Time": "Asia/Singapore",
    "Tokyo Standard Time": "Asia/Tokyo",
    "Korea Standard Time": "Asia/Seoul",
    "AUS Eastern Standard Time": "Australia/Sydney",
    "New Zealand Standard Time": "Pacific/Auckland",
    "Atlantic Standard Time": "America/Halifax",
    "Eastern Standard Time": "America/New_York",
    "Central Standard Time": "America/Chicago",
    "Mountain Standard Time": "America/Denver",
    "US Mountain Standard Time": "America/Phoenix",
    "Pacific Standard Time": "America/Los_Angeles",
    "Alaskan Standard Time": "America/Anchorage",
    "Hawaiian Standard Time": "Pacific/Honolulu",
    "E. South America Standard Time": "America/Sao_Paulo",
}
# Fields the server writes; a client's values for them are ignored.
SERVER_FIELDS = frozenset(
    {
        "id",
        "@odata.etag",
        "createdDateTime",
        "lastModifiedDateTime",
        "changeKey",
        "type",
        "seriesMasterId",
        "iCalUId",
        "webLink",
        "originalStartTimeZone",
        "originalEndTimeZone",
        "onlineMeeting",
        "onlineMeetingUrl",
    }
)
ONLINE_MEETING_FIELDS = ("isOnlineMeeting", "onlineMeetingProvider", "onlineMeeting")
# kind -> (status, error, AADSTS number, text), as the v2.0 token endpoint answers.
OAUTH_REFUSALS = {
    "invalid_client": (
        401,
        "invalid_client",
        7000215,
        "Invalid client secret provided. Ensure the secret being sent in the request is the "
        "client secret value, not the client secret ID.",
    ),
    "unsupported_grant_type": (
        400,
        "unsupported_grant_type",
        70003,
        "The app requested an unsupported grant type.",
    ),
    "code_invalid": (400, "invalid_grant", 9002313, "Invalid request. Request is malformed."),
    "code_used": (
        400,
        "invalid_grant",
        54005,
        "OAuth2 Authorization code was already redeemed, please retry with a new valid code "
        "or use an existing refresh token.",
    ),
    "code_expired": (
        400,
        "invalid_grant",
        70008,
        "The provided authorization code or refresh token has expired due to inactivity. "
        "Send a new interactive authorization request for this user and resource.",
    ),
    "redirect_mismatch": (
        400,
        "invalid_grant",
        500112,
        "The reply address does not match the reply address provided when requesting "
        "Authorization code.",
    ),
    "verifier_missing": (
        400,
        "invalid_request",
        50148,
        "The code_verifier does not match the code_challenge supplied in the authorization "
        "request for PKCE.",
    ),
    "verifier_mismatch": (
        400,
        "invalid_grant",
        501481,
        "The Code_Verifier does not match the code_challenge supplied in the authorization "
        "request.",
    ),
    "refresh_invalid": (400, "invalid_grant", 9002313, "Invalid request. Request is malformed."),
    "refresh_expired": (
        400,
        "invalid_grant",
        700082,
        "The refresh token has expired due to inactivity. The token was inactive for 90.00:00:00.",
    ),
    "grant_revoked": (
        400,
        "invalid_grant",
        50173,
        "The provided grant has expired due to it being revoked, a fresh auth token is "
        "needed. The user might have changed or reset their password.",
    ),
}
UNAUTHENTICATED = {
    "missing": "Access token is empty.",
    "malformed": "CompactToken parsing failed with error code: 80049217",
    "expired": "Access token has expired or is not yet valid.",
}


def graph_zone(name: str) -> tzinfo:
    """The zone a Graph ``timeZone`` names: a Windows name or an IANA one."""
    return oauth_fakes.iana_zone(WINDOWS_ZONES.get(name, name))


def graph_datetime(wall_time: datetime) -> str:
    """A wall time as Graph writes it: 7 fractional digits, no offset."""
    return wall_time.replace(tzinfo=None).strftime("%Y-%m-%dT%H:%M:%S.%f") + "0"


def graph_stamp(instant: datetime) -> str:
    """``createdDateTime`` and ``lastModifiedDateTime``: UTC, 7 digits and ``Z``."""
    return graph_datetime(instant.astimezone(UTC)) + "Z"


def graph_id() -> str:
    """An id in the look of Exchange's (no ``_``: the fake marks occurrences with one)."""
    return f"AAMkAD{uuid.uuid4().hex.upper()}AAA="


def time_field(value: datetime | date, time_zone: str | None = None) -> dict[str, str]:
    """A start or end as Graph writes it, from an aware datetime (shown in ``time_zone``, UTC
    by default) or a date (midnight, for an all-day event)."""
    time_zone = time_zone or "UTC"
    if not isinstance(value, datetime):
        return {"dateTime": graph_datetime(datetime.combine(value, time())), "timeZone": time_zone}
    if value.tzinfo is None:
        raise ValueError(f"{value!r} is naive: give an aware datetime or a date")
    wall_time = value.astimezone(graph_zone(time_zone))
    return {"dateTime": graph_datetime(wall_time), "timeZone": time_zone}


def patterned_recurrence(
    kind: str,
    start_date: date,
    *,
    days_of_week: tuple[str, ...] = (),
    interval: int = 1,
    end_date: date | None = None,
    occurrences: int | None = None,
    time_zone: str | None = None,
) -> dict[str, Any]:
    """A Graph ``recurrence`` (patternedRecurrence): ``kind`` daily or weekly (on
    ``days_of_week``, e.g. ``("monday",)``), from ``start_date`` until ``end_date``, for
    ``occurrences``, or with no end."""
    pattern = {
        "type": kind,
        "interval": interval,
        "month": 0,
        "dayOfMonth": 0,
        "daysOfWeek": list(days_of_week),
        "firstDayOfWeek": "sunday",
        "index": "first",
    }
    limit = {"type": "noEnd", "endDate": "0001-01-01", "numberOfOccurrences": 0}
    if end_date is not None:
        limit.update(type="endDate", endDate=end_date.isoformat())
    elif occurrences is not None:
        limit.update(type="numbered", numberOfOccurrences=occurrences)
    limit.update(startDate=start_date.isoformat(), recurrenceTimeZone=time_zone or "UTC")
    return {"pattern": pattern, "range": limit}


def preferences(request: Request) -> dict[str, str]:
    """The request's ``Prefer`` header(s): ``{"odata.maxpagesize": "50", …}``."""
    found = {}
    for header in request.headers.getlist("Prefer"):
        for name, quoted, bare in re.findall(r'([\w.-]+)\s*=\s*(?:"([^"]*)"|([^,\s]*))', header):
            found[name.lower()] = quoted or bare
    return found


@dataclass
class GraphEvent:
    """A stored single event or series master, and the occurrences of a series changed on
    their own (key: the occurrence's date, ``YYYYMMDD``; None: deleted)."""

    resource: dict[str, Any]
    calendar_id: str
    exceptions: dict[str, dict[str, Any] | None] = field(default_factory=dict)


@dataclass
class GraphCalendar:
    """A calendar of a mailbox; ``is_default`` for the one ``/me/calendar`` names."""

    id: str
    owner: str  # the account's email
    name: str
    is_default: bool
    events: dict[str, GraphEvent] = field(default_factory=dict)
    # The online meeting providers its events may use; the first is the default.
    online_meeting_providers: tuple[str, ...] = ("teamsForBusiness",)


@dataclass
class Subscription:
    """A change-notification subscription of one app (``client_id``) to one mailbox's events:
    of every calendar (``calendar_id`` None: ``me/events``) or of one; until ``expiration``."""

    id: str
    owner: str  # the account's email
    client_id: str
    resource: str  # as the app named it
    calendar_id: str | None
    change_types: tuple[str, ...]
    notification_url: str
    lifecycle_url: str | None
    client_state: str | None
    expiration: datetime


class FakeMicrosoft(OAuthFake):
    """The Microsoft identity platform and Graph calendars, on loopback (see the module)."""

    title = "Fake Microsoft"
    authorize_rule = "/<tenant>/oauth2/v2.0/authorize"
    token_rule = "/<tenant>/oauth2/v2.0/token"
    authorize_path = "/common/oauth2/v2.0/authorize"
    token_path = "/common/oauth2/v2.0/token"
    scope_word = "Calendars."
    rotates_refresh_tokens = True
    revocation_ends_access_tokens = False
    default_page_size = 10
    prefixes = ("M.C5", "EwB", "M.C5_BAY.")
    api_prefix = "/v1.0"
    calendars: dict[str, GraphCalendar]
    time_field = staticmethod(time_field)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.answer_time_zone: str | None = None
        self.held_subscriptions: dict[str, Subscription] = {}
        self.validations: list[Push] = []  # every validation request sent, and its answer
        self.meetings_made: list[dict[str, Any]] = []  # every online meeting, as made
        super().__init__(*args, **kwargs)

    # The URLs the app is configured with
    @property
    def login_url(self) -> str:
        """Where ``/{tenant}/oauth2/v2.0/authorize`` and ``…/token`` are."""
        return self.url

    @property
    def graph_url(self) -> str:
        return self.url + "/v1.0"

    def default_calendar_id(self, email: str | None = None) -> str:
        """The id of ``email``'s (else the first account's) default calendar."""
        return next(
            c.id
            for c in self.calendars.values()
            if c.is_default and (email is None or c.owner == email)
        )

    def app_settings(self) -> dict[str, str]:
        """The app's configuration that makes it use this fake (and its first client)."""
        client = next(iter(self.clients.values()))
        return {
            "MICROSOFT_CLIENT_ID": client.id,
            "MICROSOFT_CLIENT_SECRET": client.secret,
            "MICROSOFT_LOGIN_URL": self.login_url,
            "MICROSOFT_GRAPH_URL": self.graph_url,
        }

    # Control: calendars, events, answers
    @locked
    def set_answer_time_zone(self, name: str | None) -> None:
        """Answer every time in the Windows zone ``name`` (e.g. ``W. Europe Standard Time``)
        whatever the request prefers, as some mailboxes do; None: as requested (UTC by
        default)."""
        if name is not None:
            graph_zone(name)
        self.answer_time_zone = name

    @locked
    def set_online_meeting_providers(self, calendar_id: str, providers: tuple[str, ...]) -> None:
        """The online meeting providers the calendar allows (``()``: none, as a personal
        account's calendar without Teams)."""
        self.calendars[calendar_id].online_meeting_providers = tuple(providers)

    @locked
    def add_calendar(self, email: str, name: str) -> str:
        """A further calendar of ``email``'s mailbox; returns its id."""
        calendar = GraphCalendar(graph_id(), self.accounts[email].email, name, False)
        self.calendars[calendar.id] = calendar
        return calendar.id

    @locked
    def add_event(
        self,
        calendar_id: str,
        start: datetime | date,
        end: datetime | date,
        time_zone: str = "UTC",
        *,
        subject: str = "Busy",
        show_as: str = "busy",
        is_cancelled: bool = False,
        recurrence: dict[str, Any] | None = None,
        transaction_id: str | None = None,
        **fields: Any,
    ) -> str:
        """An event as a person would make it; returns its id. ``start``/``end``: aware
        datetimes (kept in ``time_zone``, a Windows or IANA name) or dates (all day, end
        exclusive); ``recurrence``: a patternedRecurrence (``patterned_recurrence``);
        ``fields``: any other event fields as Graph writes them. Refused as the API would
        refuse it (``Invalid``, a ValueError)."""
        body = {
            "subject": subject,
            "showAs": show_as,
            "isCancelled": is_cancelled,
            "isAllDay": not isinstance(start, datetime),
            "start": time_field(start, time_zone),
            "end": time_field(end, time_zone),
            "recurrence": recurrence,
            **fields,
        }
        if transaction_id is not None:
            body["transactionId"] = transaction_id
        return self._create(self.calendars[calendar_id], body)["id"]

    @locked
    def events(self, calendar_id: str) -> list[dict[str, Any]]:
        """The calendar's single events and series masters as stored, to check what the app
        wrote (``event`` shows an occurrence)."""
        stored = self.calendars[calendar_id].events.values()
        return [copy.deepcopy(event.resource) for event in stored]

    @locked
    def event(self, calendar_id: str, event_id: str) -> dict[str, Any]:
        """One event, series master or occurrence, as stored (times in its own zone)."""
        event, key = self._found(self.calendars[calendar_id], event_id)
        return copy.deepcopy(self._occurrence(event, key) if key else event.resource)

    # Control: change notifications
    @locked
    def subscriptions(self, *, include_expired: bool = False) -> list[Subscription]:
        """Copies of the subscriptions held (with ``include_expired``, the expired ones too)."""
        now = self.current_datetime()
        return [
            replace(held)
            for held in self.held_subscriptions.values()
            if include_expired or held.expiration > now
        ]

    def send_lifecycle(
        self, subscription_id: str, event: str, *, timeout: float = 10.0
    ) -> Push | None:
        """Send the subscription's lifecycle notification ``event`` (reauthorizationRequired,
        subscriptionRemoved or missed) to its ``lifecycleNotificationUrl``, after the messages
        already queued; the attempt, once made (None when the subscription has no lifecycle
        URL or ``push_enabled`` is off). ``subscriptionRemoved`` also ends the subscription."""
        if event not in LIFECYCLE_EVENTS:
            raise ValueError(f"{event!r} is not one of {LIFECYCLE_EVENTS}")
        with self.lock:
            held = self.held_subscriptions[subscription_id]
            if event == "subscriptionRemoved":
                del self.held_subscriptions[subscription_id]
            if held.lifecycle_url is None:
                return None
            item: dict[str, Any] = {
                "subscriptionId": held.id,
                "subscriptionExpirationDateTime": graph_stamp(held.expiration),
                "tenantId": TENANT_ID,
            }
            if held.client_state is not None:
                item["clientState"] = held.client_state
            item["lifecycleEvent"] = event
            body = json.dumps({"value": [item]}).encode()
            sent = self.send_push(Push(held.id, held.lifecycle_url, event, JSON_HEADERS, body))
        return None if sent is None else sent.result(timeout)

    # Provider hooks
    @property
    def full_scope(self) -> str:
        return CALENDAR_SCOPES

    def new_primary_calendar(self, account: Account) -> str:
        calendar = GraphCalendar(graph_id(), account.email, "Calendar", True)
        self.calendars[calendar.id] = calendar
        return calendar.id

    def offline(self, args: Any) -> bool:
        return "offline_access" in args.get("scope", "").split()

    def token_fields(self) -> dict[str, Any]:
        return {"ext_expires_in": self.access_token_lifetime}

    def id_claims(self, account: Account) -> dict[str, Any]:
        return {
            "iss": f"{self.url}/{TENANT_ID}/v2.0",
            "sub": account.id.replace("-", ""),
            "oid": account.id,
            "tid": TENANT_ID,
            "preferred_username": account.email,
            "email": account.email,
            "name": account.name,
            "ver": "2.0",
        }

    def oauth_refusal(self, kind: str) -> Refusal:
        status, error, number, text = OAUTH_REFUSALS[kind]
        when = self.current_datetime().strftime("%Y-%m-%d %H:%M:%SZ")
        trace, correlation = str(uuid.uuid4()), str(uuid.uuid4())
        description = (
            f"AADSTS{number}: {text} Trace ID: {trace} Correlation ID: {correlation} "
            f"Timestamp: {when}"
        )
        body = {
            "error": error,
            "error_description": description,
            "error_codes": [number],
            "timestamp": when,
            "trace_id": trace,
            "correlation_id": correlation,
            "error_uri": f"{self.url}/error?code={number}",
        }
        return Refusal(status, body)

    def unauthenticated(self, kind: str) -> Refusal:
        if kind == "scope":
            return self.graph_error(
                403, "ErrorAccessDenied", "Access is denied. Check credentials and try again."
            )
        challenge = (
            f'Bearer realm="", authorization_uri="{self.authorize_url}", '
            'client_id="00000003-0000-0000-c000-000000000000"'
        )
        message = UNAUTHENTICATED.get(kind, UNAUTHENTICATED["expired"])
        return self.graph_error(
            401, "InvalidAuthenticationToken", message, {"WWW-Authenticate": challenge}
        )

    def unreadable(self) -> Refusal:
        message = (
            "Unable to read JSON request payload. Please ensure Content-Type header is set "
            "and payload is of valid JSON format."
        )
        return self.graph_error(400, "BadRequest", message)

    def no_such_path(self, err: HTTPException) -> Refusal:
        if isinstance(err, MethodNotAllowed):
            return self.graph_error(405, "BadRequest", "Specified HTTP method is not allowed.")
        return self.graph_error(400, "BadRequest", "Resource not found for the segment.")

    def removal(self, item: dict[str, Any]) -> dict[str, Any]:
        return {
            "@odata.type": "#microsoft.graph.event",
            "id": item["id"],
            "@removed": {"reason": "deleted"},
        }

    def graph_error(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> Refusal:
        """Graph's error body: ``code``, ``message`` and ``innerError``."""
        inner = {
            "date": self.current_datetime().strftime("%Y-%m-%dT%H:%M:%S"),
            "request-id": str(uuid.uuid4()),
            "client-request-id": str(uuid.uuid4()),
        }
        body = {"error": {"code": code, "message": message, "innerError": inner}}
        return Refusal(status, body, headers)

    def missing_item(self) -> Refusal:
        """404 ``ErrorItemNotFound``: no such calendar or event in the mailbox."""
        return self.graph_error(
            404, "ErrorItemNotFound", "The specified object was not found in the store."
        )

    # Graph v1.0
    @route("/v1.0/me")
    def me(self, request: Request) -> Response:
        """The signed-in user (needs no calendar scope)."""
        account = self.grant_of(request, calendar=False).account
        given, _, family = account.name.partition(" ")
        return self.answer(
            {
                "@odata.context": f"{self.graph_url}/$metadata#users/$entity",
                "businessPhones": [],
                "displayName": account.name,
                "givenName": given,
                "surname": family or None,
                "jobTitle": None,
                "mail": account.email,
                "mobilePhone": None,
                "officeLocation": None,
                "preferredLanguage": None,
                "userPrincipalName": account.email,
                "id": account.id,
            }
        )

    @route("/v1.0/me/calendars")
    def calendar_list(self, request: Request) -> Response:
        """The mailbox's calendars, the default one first."""
        account = self.grant_of(request).account
        mine = [c for c in self.calendars.values() if c.owner == account.email]
        mine.sort(key=lambda c: not c.is_default)
        context = f"{self.graph_url}/$metadata#users('{account.id}')/calendars"
        return self.answer(
            {"@odata.context": context, "value": [self._calendar_resource(c) for c in mine]}
        )

    @route("/v1.0/me/calendar")
    @route("/v1.0/me/calendars/<calendar_id>")
    def calendar(self, request: Request, calendar_id: str | None = None) -> Response:
        """One calendar (``/me/calendar``: the default one)."""
        return self.answer(self._calendar_resource(self._calendar_for(request, calendar_id)))

    @route("/v1.0/me/calendarView/delta")
    @route("/v1.0/me/calendars/<calendar_id>/calendarView/delta")
    def delta(self, request: Request, calendar_id: str | None = None) -> Response:
        """calendarView/delta: a first round from a window, later ones from a delta link,
        page by page (``$skiptoken``)."""
        calendar = self._calendar_for(request, calendar_id)
        args = {key.lower(): value for key, value in request.args.items()}
        label, zone, applied = self._answer_zone(request)
        token = args.get("$skiptoken")
        if token is None:
            told = None
            if "$deltatoken" in args:
                state = self._sync_state(calendar, args["$deltatoken"])
                window, told = state.params["window"], state.snapshot
            else:
                window = self._window(args)
            known = self._view(calendar, window, label, zone)
            token = self.begin_round(calendar.id, {"window": window}, known, told=told)
        requested = preferences(request).get("odata.maxpagesize", "")
        if requested.isdigit():
            applied.append(f"odata.maxpagesize={requested}")
        try:
            items, next_page, finish = self.page_of(
                token, int(requested) if requested.isdigit() else None
            )
        except oauth_fakes.UnknownToken as err:
            raise self._sync_state_gone() from err
        link = self.url + request.path
        body: dict[str, Any] = {
            "@odata.context": f"{self.graph_url}/$metadata#Collection(event)",
            "value": items,
        }
        if next_page:
            body["@odata.nextLink"] = f"{link}?$skiptoken={next_page}"
        else:
            body["@odata.deltaLink"] = f"{link}?$deltatoken={finish}"
        return self.answer(
            body, headers={"Preference-Applied": ", ".join(applied)} if applied else None
        )

    @route("/v1.0/me/calendarView")
    @route("/v1.0/me/calendar/calendarView")
    @route("/v1.0/me/calendars/<calendar_id>/calendarView")
    def calendar_view(self, request: Request, calendar_id: str | None = None) -> Response:
        """calendarView: the single events, occurrences and exceptions in the window (never a
        series master), as a delta round shows them; each page computed afresh (``$skip``)."""
        calendar = self._calendar_for(request, calendar_id)
        args = {key.lower(): value for key, value in request.args.items()}
        window = self._window(args)
        label, zone, applied = self._answer_zone(request)
        skip, top = args.get("$skip", "0"), args.get("$top")
        if not skip.isdigit() or (top is not None and not top.isdigit()):
            message = "The value of $skip or $top is invalid."
            raise self.graph_error(400, "ErrorInvalidParameter", message)
        requested = preferences(request).get("odata.maxpagesize", "")
        if top is None and requested.isdigit():
            applied.append(f"odata.maxpagesize={requested}")
            top = requested
        size = self.page_size_for(int(top) if top else None)
        found = self._view(calendar, window, label, zone)
        start = int(skip)
        account = self.accounts[calendar.owner]
        body: dict[str, Any] = {
            "@odata.context": f"{self.graph_url}/$metadata#users('{account.id}')/calendarView",
            "value": found[start : start + size],
        }
        if start + size < len(found):
            query = [(k, v) for k, v in request.args.items(multi=True) if k.lower() != "$skip"]
            query.append(("$skip", str(start + size)))
            body["@odata.nextLink"] = f"{self.url}{request.path}?{urlencode(query)}"
        return self.answer(
            body, headers={"Preference-Applied": ", ".join(applied)} if applied else None
        )

    @route("/v1.0/subscriptions", "POST")
    @unlocked
    def create_subscription(self, request: Request) -> Response:
        """Create a subscription (201), once its URLs have answered the validation request;
        the handshake runs outside the fake's lock, so the fake answers the receiver meanwhile."""
        with self.lock:
            grant = self.grant_of(request)
            held = self._new_subscription(grant, self.json_body(request))
        for url in (held.notification_url, held.lifecycle_url):
            if url is not None and not self._validated_endpoint(held.id, url):
                raise self.graph_error(400, "InvalidRequest", VALIDATION_FAILED)
        with self.lock:
            self.held_subscriptions[held.id] = held
            return self.answer(self._subscription_resource(held), 201)

    @route("/v1.0/subscriptions")
    def list_subscriptions(self, request: Request) -> Response:
        """The live subscriptions of the caller's app and account."""
        grant = self.grant_of(request)
        now = self.current_datetime()
        mine = [
            self._subscription_resource(held)
            for held in self.held_subscriptions.values()
            if held.owner == grant.account.email
            and held.client_id == grant.client_id
            and held.expiration > now
        ]
        context = f"{self.graph_url}/$metadata#subscriptions"
        return self.answer({"@odata.context": context, "value": mine})

    @route("/v1.0/subscriptions/<subscription_id>", "GET", "PATCH", "DELETE")
    def subscription(self, request: Request, subscription_id: str) -> Response:
        """Read, renew (PATCH ``expirationDateTime``) or delete (204) a subscription."""
        grant = self.grant_of(request)
        held = self.held_subscriptions.get(subscription_id)
        if (
            held is None
            or held.owner != grant.account.email
            or held.client_id != grant.client_id
            or held.expiration <= self.current_datetime()
        ):
            message = f"The object '{subscription_id}' was not found."
            raise self.graph_error(404, "ResourceNotFound", message)
        if request.method == "DELETE":
            del self.held_subscriptions[subscription_id]
            return self.answer(None, 204)
        if request.method == "PATCH":
            body = self.json_body(request)
            if "expirationDateTime" not in body:
                message = "Only expirationDateTime can be changed by this fake."
                raise self.graph_error(400, "InvalidRequest", message)
            held.expiration = self._expiration(body["expirationDateTime"])
        return self.answer(self._subscription_resource(held))

    @route("/v1.0/me/events", "POST")
    @route("/v1.0/me/calendar/events", "POST")
    @route("/v1.0/me/calendars/<calendar_id>/events", "POST")
    def create(self, request: Request, calendar_id: str | None = None) -> Response:
        """Create an event (201); a ``transactionId`` the mailbox has answers its event."""
        calendar = self._calendar_for(request, calendar_id)
        body = self.json_body(request)
        earlier = self._transaction(calendar.owner, body.get("transactionId"))
        resource = (
            earlier if earlier is not None else self._checked(lambda: self._create(calendar, body))
        )
        label, zone, _ = self._answer_zone(request)
        return self.answer(self._shown(resource, label, zone), 201)

    @route("/v1.0/me/events/<event_id>", "GET", "PATCH", "DELETE")
    @route("/v1.0/me/calendars/<calendar_id>/events/<event_id>", "GET", "PATCH", "DELETE")
    def event_resource(
        self, request: Request, event_id: str, calendar_id: str | None = None
    ) -> Response:
        """Get, patch or delete an event, a series master or one occurrence."""
        grant = self.grant_of(request)
        if calendar_id is None:
            master_id = event_id.split("_")[0]
            calendar_id = next((c.id for c in self.calendars.values() if master_id in c.events), "")
        calendar = self.calendars.get(calendar_id)
        if calendar is None or calendar.owner != grant.account.email:
            raise self.missing_item()
        try:
            found = self._found(calendar, event_id)
        except KeyError as err:
            raise self.missing_item() from err
        if request.method == "DELETE":
            self._delete(found)
            return self.answer(None, 204)
        if request.method == "PATCH":
            body = self.json_body(request)
            self._checked(lambda: self._patch(found, body))
        event, key = found
        label, zone, _ = self._answer_zone(request)
        return self.answer(
            self._shown(self._occurrence(event, key) if key else event.resource, label, zone)
        )

    # Change notifications
    def _new_subscription(self, grant: Any, body: dict[str, Any]) -> Subscription:
        """The subscription a create request asks for, or Graph's 400 (404 for a calendar the
        mailbox does not have); its URLs are not validated yet."""
        for name in ("changeType", "notificationUrl", "resource", "expirationDateTime"):
            if not isinstance(body.get(name), str) or not body[name]:
                message = f"{name} is a required property for subscription creation."
                raise self.graph_error(400, "InvalidRequest", message)
        change_types = tuple(kind.strip() for kind in body["changeType"].split(","))
        if not all(kind in CHANGE_TYPES for kind in change_types):
            message = f"Invalid changeType '{body['changeType']}': use {', '.join(CHANGE_TYPES)}."
            raise self.graph_error(400, "InvalidRequest", message)
        urls = [body["notificationUrl"], body.get("lifecycleNotificationUrl")]
        for name, url in zip(("notificationUrl", "lifecycleNotificationUrl"), urls, strict=True):
            if url is None:
                continue
            parts = urlsplit(url) if isinstance(url, str) else None
            secure = parts is not None and parts.scheme == "https" and bool(parts.hostname)
            if not secure and not (
                parts is not None and parts.scheme == "http" and is_loopback(url)
            ):
                raise self.graph_error(400, "InvalidRequest", f"{name} must be an HTTPS URL.")
        client_state = body.get("clientState")
        if client_state is not None and (
            not isinstance(client_state, str) or len(client_state) > 128
        ):
            message = "clientState must be a string of at most 128 characters."
            raise self.graph_error(400, "InvalidRequest", message)
        if body.get("includeResourceData"):
            message = "includeResourceData needs an encryptionCertificate; this fake sends none."
            raise self.graph_error(400, "InvalidRequest", message)
        return Subscription(
            str(uuid.uuid4()),
            grant.account.email,
            grant.client_id,
            body["resource"],
            self._subscribed_calendar(grant.account, body["resource"]),
            change_types,
            urls[0],
            urls[1],
            client_state,
            self._expiration(body["expirationDateTime"]),
        )

    def _subscribed_calendar(self, account: Account, resource: str) -> str | None:
        """The calendar a subscription's ``resource`` names (None: every one of the mailbox)."""
        match = SUBSCRIBABLE.fullmatch(resource.strip())
        if match is None:
            message = f"Resource '{resource}' is not supported: this fake notifies of events only."
            raise self.graph_error(400, "InvalidRequest", message)
        user = match.group("user")
        if user is not None and user.lower() not in (account.id.lower(), account.email.lower()):
            raise self.graph_error(403, "ErrorAccessDenied", "Access is denied.")
        if match.group("every"):
            return None
        calendar_id = match.group("id") or match.group("quoted")
        mine = [c for c in self.calendars.values() if c.owner == account.email]
        if calendar_id is None:
            return next(c.id for c in mine if c.is_default)
        if calendar_id not in {c.id for c in mine}:
            raise self.missing_item()
        return calendar_id

    def _expiration(self, value: Any) -> datetime:
        """A subscription's ``expirationDateTime``: in the future, within 10080 minutes."""
        try:
            instant = oauth_fakes.parse_instant(value, UTC)
        except (AttributeError, TypeError, ValueError) as err:
            message = f"Invalid expirationDateTime '{value}'."
            raise self.graph_error(400, "InvalidRequest", message) from err
        now = self.current_datetime()
        if instant <= now:
            message = "Subscription expiration can only be in the future (expirationDateTime)."
            raise self.graph_error(400, "InvalidRequest", message)
        if instant > now + timedelta(minutes=SUBSCRIPTION_MINUTES):
            message = (
                f"Subscription expiration can only be {SUBSCRIPTION_MINUTES} minutes in the "
                "future (expirationDateTime)."
            )
            raise self.graph_error(400, "InvalidRequest", message)
        return instant.astimezone(UTC)

    def _validated_endpoint(self, subscription_id: str, url: str) -> bool:
        """Graph's validation request to ``url``: whether it answered 200 in time with the
        token as its ``text/plain`` body. Called without the fake's lock."""
        token = (
            "Validation: Testing client application reachability for subscription Request-Id: "
            f"{uuid.uuid4()}"
        )
        headers = {"Content-Type": "text/plain; charset=utf-8"}
        push = Push(subscription_id, url, "validation", headers)
        if is_loopback(url):
            target = oauth_fakes.with_query(url, {"validationToken": token})
            try:
                with httpx.Client(
                    timeout=VALIDATION_TIMEOUT, trust_env=False, verify=False
                ) as client:
                    answer = client.post(target, content=b"", headers=headers)
                push = replace(push, status=answer.status_code)
                echoed = (
                    answer.status_code == 200
                    and answer.headers.get("content-type", "").lower().startswith("text/plain")
                    and answer.content == token.encode()
                )
            except httpx.HTTPError as err:
                push, echoed = replace(push, error=f"{type(err).__name__}: {err}"), False
        else:
            push, echoed = replace(push, error=oauth_fakes.NOT_LOOPBACK), False
        with self.lock:
            self.validations.append(push)
        return echoed

    def _subscription_resource(self, held: Subscription) -> dict[str, Any]:
        return {
            "@odata.context": f"{self.graph_url}/$metadata#subscriptions/$entity",
            "id": held.id,
            "resource": held.resource,
            "applicationId": held.client_id,
            "changeType": ",".join(held.change_types),
            "clientState": held.client_state,
            "notificationUrl": held.notification_url,
            "notificationQueryOptions": None,
            "lifecycleNotificationUrl": held.lifecycle_url,
            "expirationDateTime": graph_stamp(held.expiration),
            "creatorId": self.accounts[held.owner].id,
            "includeResourceData": False,
            "latestSupportedTlsVersion": "v1_2",
            "encryptionCertificate": None,
            "encryptionCertificateId": None,
            "notificationUrlAppId": None,
        }

    def _notify(self, calendar_id: str, change: str, resource: dict[str, Any]) -> None:
        """Tell each live subscription to ``calendar_id`` that asked for ``change`` that the
        event ``resource`` changed."""
        calendar = self.calendars[calendar_id]
        account = self.accounts[calendar.owner]
        now = self.current_datetime()
        path = f"Users/{account.id}/Events/{resource['id']}"
        for held in self.held_subscriptions.values():
            if (
                held.owner != calendar.owner
                or held.expiration <= now
                or change not in held.change_types
                or held.calendar_id not in (None, calendar_id)
            ):
                continue
            item: dict[str, Any] = {
                "subscriptionId": held.id,
                "subscriptionExpirationDateTime": graph_stamp(held.expiration),
                "changeType": change,
                "resource": path,
                "resourceData": {
                    "@odata.type": "#Microsoft.Graph.Event",
                    "@odata.id": path,
                    "@odata.etag": resource.get("@odata.etag"),
                    "id": resource["id"],
                },
                "tenantId": TENANT_ID,
            }
            if held.client_state is not None:
                item["clientState"] = held.client_state
            body = json.dumps({"value": [item]}).encode()
            self.send_push(Push(held.id, held.notification_url, change, JSON_HEADERS, body))

    # Reading
    def _calendar_for(self, request: Request, calendar_id: str | None) -> GraphCalendar:
        grant = self.grant_of(request)
        if calendar_id is None:
            mine = (c for c in self.calendars.values() if c.owner == grant.account.email)
            calendar_id = next((c.id for c in mine if c.is_default), "")
        calendar = self.calendars.get(calendar_id)
        if calendar is None or calendar.owner != grant.account.email:
            raise self.missing_item()
        return calendar

    def _calendar_resource(self, calendar: GraphCalendar) -> dict[str, Any]:
        account = self.accounts[calendar.owner]
        return {
            "id": calendar.id,
            "name": calendar.name,
            "color": "auto",
            "hexColor": "",
            "isDefaultCalendar": calendar.is_default,
            "changeKey": f"calendar-{calendar.id[-8:]}",
            "canShare": True,
            "canViewPrivateItems": True,
            "canEdit": True,
            "isRemovable": not calendar.is_default,
            "isTallyingResponses": True,
            "allowedOnlineMeetingProviders": list(calendar.online_meeting_providers),
            "defaultOnlineMeetingProvider": (
                calendar.online_meeting_providers[0]
                if calendar.online_meeting_providers
                else "unknown"
            ),
            "owner": {"name": account.name, "address": account.email},
        }

    def _answer_zone(self, request: Request) -> tuple[str, tzinfo, list[str]]:
        """The zone an answer's times are in, its label, and what ``Preference-Applied``
        says of it."""
        wanted = preferences(request).get("outlook.timezone")
        name = self.answer_time_zone or wanted or "UTC"
        try:
            zone = graph_zone(name)
        except ValueError:
            name, zone = "UTC", UTC
        honoured = wanted and not self.answer_time_zone and name == wanted
        return name, zone, [f'outlook.timezone="{wanted}"'] if honoured else []

    def _window(self, args: dict[str, str]) -> Window:
        if "startdatetime" not in args or "enddatetime" not in args:
            message = (
                "This request requires a time window specified by the query string parameters "
                "StartDateTime and EndDateTime."
            )
            raise self.graph_error(400, "ErrorInvalidParameter", message)
        try:
            start = oauth_fakes.parse_instant(args["startdatetime"], UTC)
            end = oauth_fakes.parse_instant(args["enddatetime"], UTC)
        except ValueError as err:
            raise self.graph_error(
                400, "ErrorInvalidParameter", "The value of the time window is invalid."
            ) from err
        return Window(start, end)

    def _sync_state_gone(self) -> Refusal:
        message = "The sync state generation is not found; a full synchronization is required."
        return self.graph_error(410, "SyncStateNotFound", message)

    def _sync_state(self, calendar: GraphCalendar, token: str) -> Any:
        try:
            state = self.sync_states.find(token)
        except (oauth_fakes.TokenGone, oauth_fakes.UnknownToken) as err:
            raise self._sync_state_gone() from err
        if state.calendar_id != calendar.id:
            raise self._sync_state_gone()
        return state

    def _view(
        self, calendar: GraphCalendar, window: Window, label: str, zone: tzinfo
    ) -> list[dict[str, Any]]:
        """The calendar view: single events, occurrences and exceptions overlapping the
        window, in the answer's zone."""
        found = []
        for event in calendar.events.values():
            if event.resource.get("recurrence"):
                candidates = [
                    self._occurrence(event, key) for key in self._keys(event, window, zone)
                ]
            else:
                candidates = [event.resource]
            found += [item for item in candidates if window.overlaps(*self._span(item, zone))]
        found.sort(key=lambda item: (self._span(item, zone)[0], item["id"]))
        return [self._shown(item, label, zone) for item in found]

    def _span(self, item: dict[str, Any], zone: tzinfo) -> tuple[datetime, datetime]:
        """An event's start and end; an all-day one's dates read in ``zone``."""
        if item.get("isAllDay"):
            days = [
                datetime.fromisoformat(item[key]["dateTime"]).date() for key in ("start", "end")
            ]
            return oauth_fakes.midnight(days[0], zone), oauth_fakes.midnight(days[1], zone)
        return self._instant(item["start"]), self._instant(item["end"])

    def _instant(self, when: dict[str, Any]) -> datetime:
        try:
            return oauth_fakes.parse_instant(
                when["dateTime"], graph_zone(when.get("timeZone") or "UTC")
            )
        except ValueError as err:
            zone = when.get("timeZone")
            raise Invalid(
                "TimeZoneNotSupportedException",
                f"A valid TimeZone value must be specified. The following TimeZone value is not supported: '{zone}'.",
            ) from err
        except (KeyError, TypeError) as err:
            raise Invalid(
                "RequestBodyRead", "A start and end with dateTime and timeZone are required."
            ) from err

    def _shown(self, item: dict[str, Any], label: str, zone: tzinfo) -> dict[str, Any]:
        """An event as an answer shows it: its times in the answer's zone (an all-day one's
        midnights stay midnights)."""
        shown = copy.deepcopy(item)
        for key in ("start", "end"):
            if item.get("isAllDay"):
                wall_time = datetime.fromisoformat(item[key]["dateTime"])
            else:
                wall_time = self._instant(item[key]).astimezone(zone)
            shown[key] = {"dateTime": graph_datetime(wall_time), "timeZone": label}
        return shown

    def _series(self, event: GraphEvent) -> tuple[rruleset, timedelta, tzinfo | None]:
        """A series' rules and duration; all-day series run on naive midnights (then the zone
        returned is None), timed ones on wall times in the series' zone."""
        resource = event.resource
        pattern, limit = resource["recurrence"]["pattern"], resource["recurrence"]["range"]
        zone = graph_zone(limit.get("recurrenceTimeZone") or resource["start"]["timeZone"])
        start, end = self._instant(resource["start"]), self._instant(resource["end"])
        first_day = date.fromisoformat(limit["startDate"])
        all_day = bool(resource.get("isAllDay"))
        if all_day:
            first = datetime.combine(first_day, time())
            until = datetime.combine(
                date.fromisoformat(limit.get("endDate") or "9999-12-30"), time(23, 59)
            )
        else:
            first = datetime.combine(first_day, start.astimezone(zone).time(), tzinfo=zone)
            until = datetime.combine(
                date.fromisoformat(limit.get("endDate") or "9999-12-30"), time(23, 59), tzinfo=zone
            )
        rule: dict[str, Any] = {
            "dtstart": first,
            "interval": max(int(pattern.get("interval") or 1), 1),
        }
        if pattern["type"] == "weekly":
            rule.update(
                freq=WEEKLY,
                byweekday=[DAYS[day.lower()] for day in pattern["daysOfWeek"]],
                wkst=DAYS[(pattern.get("firstDayOfWeek") or "sunday").lower()],
            )
        else:
            rule["freq"] = DAILY
        if limit["type"] == "endDate":
            rule["until"] = until
        elif limit["type"] == "numbered":
            rule["count"] = int(limit["numberOfOccurrences"])
        rules = rruleset()
        rules.rrule(rrule(**rule))
        return rules, end - start, None if all_day else zone

    def _keys(self, event: GraphEvent, window: Window, zone: tzinfo) -> list[str]:
        """The keys (dates) of a series' occurrences, not deleted, that start near the
        window."""
        rules, duration, series_zone = self._series(event)
        start, end = window.bounds(self._instant(event.resource["start"]))
        if series_zone is None:
            start, end = (bound.astimezone(zone).replace(tzinfo=None) for bound in (start, end))
        begins = oauth_fakes.expand(rules, duration, start, end)
        keys = [begin.strftime("%Y%m%d") for begin in begins]
        return [key for key in keys if event.exceptions.get(key, {}) is not None]

    def _occurrence(self, event: GraphEvent, key: str) -> dict[str, Any]:
        """The occurrence of a series on the date ``key`` (an exception if changed alone)."""
        master = event.resource
        _, duration, series_zone = self._series(event)
        day = datetime.strptime(key, "%Y%m%d")
        if series_zone is None:
            begin = day
        else:
            begin = datetime.combine(
                day.date(),
                self._instant(master["start"]).astimezone(series_zone).time(),
                tzinfo=series_zone,
            )
        item = {
            **master,
            "id": f"{master['id']}_{key}",
            "type": "occurrence",
            "seriesMasterId": master["id"],
            "recurrence": None,
        }
        label = master["start"]["timeZone"]
        if series_zone is None:
            item["start"] = {"dateTime": graph_datetime(begin), "timeZone": label}
            item["end"] = {"dateTime": graph_datetime(begin + duration), "timeZone": label}
        else:
            local = graph_zone(label)
            item["start"] = {"dateTime": graph_datetime(begin.astimezone(local)), "timeZone": label}
            item["end"] = {
                "dateTime": graph_datetime((begin + duration).astimezone(local)),
                "timeZone": label,
            }
        changes = event.exceptions.get(key)
        if changes:
            item.update(changes, type="exception")
        return item

    def _found(self, calendar: GraphCalendar, event_id: str) -> tuple[GraphEvent, str | None]:
        """The stored event of ``event_id`` and, for an occurrence, its key; KeyError when the
        calendar has no such event (or the series no such occurrence)."""
        master_id, _, key = event_id.partition("_")
        event = calendar.events[master_id]
        if not key:
            return event, None
        if not event.resource.get("recurrence") or not re.fullmatch(r"\d{8}", key):
            raise KeyError(event_id)
        day = datetime.strptime(key, "%Y%m%d").replace(tzinfo=UTC)
        window = Window(day - timedelta(days=2), day + timedelta(days=3))
        if key not in self._keys(event, window, UTC):
            raise KeyError(event_id)
        return event, key

    def _transaction(self, email: str, transaction_id: str | None) -> dict[str, Any] | None:
        """The event of the mailbox created with ``transaction_id``, if any."""
        if not transaction_id:
            return None
        for calendar in self.calendars.values():
            for event in calendar.events.values():
                if (
                    calendar.owner == email
                    and event.resource.get("transactionId") == transaction_id
                ):
                    return event.resource
        return None

    # Writing
    def _checked(self, action: Any) -> Any:
        try:
            return action()
        except Invalid as err:
            raise self.graph_error(400, err.reason, err.message) from err

    def _validated(self, resource: dict[str, Any]) -> dict[str, Any]:
        """``resource`` as Graph stores it, or ``Invalid`` for what it refuses."""
        start, end = (
            self._instant(resource.get("start") or {}),
            self._instant(resource.get("end") or {}),
        )
        if end < start:
            raise Invalid(
                "ErrorInvalidRequest", "The end of the event must not be before its start."
            )
        if resource.get("showAs") not in SHOW_AS:
            raise Invalid(
                "RequestBodyRead", f"Requested value '{resource.get('showAs')}' was not found."
            )
        if resource.get("isAllDay"):
            for key in ("start", "end"):
                if datetime.fromisoformat(resource[key]["dateTime"]).time() != time():
                    message = "An all-day event's start and end must be midnight."
                    raise Invalid("ErrorInvalidRequest", message)
        series = resource.get("recurrence")
        if series is not None:
            try:
                kind = series["pattern"]["type"]
                days = series["pattern"].get("daysOfWeek") or []
                if kind not in ("daily", "weekly") or (kind == "weekly" and not days):
                    raise ValueError(kind)
                self._keys(GraphEvent(resource, ""), Window(start, start + timedelta(days=7)), UTC)
            except (KeyError, TypeError, ValueError) as err:
                message = "The recurrence pattern is not valid (this fake knows daily and weekly)."
                raise Invalid("ErrorInvalidRequest", message) from err
        resource["type"] = "seriesMaster" if series else "singleInstance"
        resource["originalStartTimeZone"] = resource["start"]["timeZone"]
        resource["originalEndTimeZone"] = resource["end"]["timeZone"]
        for key in ("start", "end"):
            wall_time = datetime.fromisoformat(resource[key]["dateTime"])
            resource[key] = {
                "dateTime": graph_datetime(wall_time),
                "timeZone": resource[key]["timeZone"],
            }
        return resource

    def _stamped(self, resource: dict[str, Any]) -> dict[str, Any]:
        change_key = f"{self.next_version():08d}{uuid.uuid4().hex[:16]}"
        resource.update(
            {
                "@odata.etag": f'W/"{change_key}"',
                "changeKey": change_key,
                "lastModifiedDateTime": graph_stamp(self.current_datetime()),
            }
        )
        return resource

    def _create(self, calendar: GraphCalendar, body: dict[str, Any]) -> dict[str, Any]:
        account = self.accounts[calendar.owner]
        event_id = graph_id()
        resource = {
            "id": event_id,
            "createdDateTime": graph_stamp(self.current_datetime()),
            "categories": [],
            "iCalUId": f"040000008200E00074C5B7101A82E008{uuid.uuid4().hex.upper()}",
            "reminderMinutesBeforeStart": 15,
            "isReminderOn": True,
            "hasAttachments": False,
            "subject": "",
            "bodyPreview": "",
            "importance": "normal",
            "sensitivity": "normal",
            "isAllDay": False,
            "isCancelled": False,
            "isOrganizer": True,
            "responseRequested": True,
            "seriesMasterId": None,
            "showAs": "busy",
            "webLink": f"{self.url}/owa/?itemid={event_id}",
            "onlineMeetingUrl": None,
            "isOnlineMeeting": False,
            "recurrence": None,
            "responseStatus": {"response": "organizer", "time": "0001-01-01T00:00:00Z"},
            "body": {"contentType": "html", "content": ""},
            "location": {"displayName": ""},
            "locations": [],
            "attendees": [],
            "organizer": {"emailAddress": {"name": account.name, "address": account.email}},
            **{key: value for key, value in body.items() if key not in SERVER_FIELDS},
        }
        if not resource.get("transactionId"):
            resource.pop("transactionId", None)
        resource = self._validated(resource)
        self._online_meeting(calendar, resource, body, {})
        resource = self._stamped(resource)
        calendar.events[event_id] = GraphEvent(resource, calendar.id)
        self._notify(calendar.id, "created", resource)
        return resource

    def _patch(self, found: tuple[GraphEvent, str | None], body: dict[str, Any]) -> None:
        event, key = found
        changes = {k: v for k, v in body.items() if k not in SERVER_FIELDS | {"transactionId"}}
        if key is None:
            merged = self._validated({**copy.deepcopy(event.resource), **changes})
            calendar = self.calendars[event.calendar_id]
            self._online_meeting(calendar, merged, body, event.resource)
            event.resource = self._stamped(merged)
        else:
            occurrence = {**self._occurrence(event, key), **changes, "recurrence": None}
            self._validated(occurrence)
            own = {k: occurrence[k] for k in (*changes, "start", "end")}
            event.exceptions[key] = self._stamped({**(event.exceptions.get(key) or {}), **own})
        self._notify(event.calendar_id, "updated", event.resource)

    def _online_meeting(
        self,
        calendar: GraphCalendar,
        resource: dict[str, Any],
        body: dict[str, Any],
        stored: dict[str, Any],
    ) -> None:
        """Set ``resource``'s online meeting from a write's ``body`` (``stored``: the event as
        it was, {} for a new one): an online event keeps its meeting whatever the write says;
        one asked to go online with a provider its calendar allows gets a Teams meeting."""
        if stored.get("isOnlineMeeting"):
            for key in ONLINE_MEETING_FIELDS:
                resource[key] = copy.deepcopy(stored[key])
            return
        resource["isOnlineMeeting"] = False
        resource["onlineMeetingProvider"] = "unknown"
        resource["onlineMeeting"] = None
        if body.get("isOnlineMeeting") is not True:
            return
        allowed = calendar.online_meeting_providers
        provider = body.get("onlineMeetingProvider") or (allowed[0] if allowed else None)
        if provider not in allowed or provider != "teamsForBusiness":
            return  # this fake makes Teams meetings only
        thread = f"19%3ameeting_{uuid.uuid4().hex}%40thread.v2"
        context = f"%7b%22Tid%22%3a%22{TENANT_ID}%22%7d"
        meeting = {
            "joinUrl": f"https://teams.microsoft.com/l/meetup-join/{thread}/0?context={context}",
            "conferenceId": str(uuid.uuid4().int)[:9],
            "tollNumber": "+1 323-555-0166",
        }
        resource.update(isOnlineMeeting=True, onlineMeetingProvider=provider, onlineMeeting=meeting)
        self.meetings_made.append(copy.deepcopy(meeting))

    def change_event(self, calendar: GraphCalendar, event_id: str, fields: dict[str, Any]) -> None:
        self._patch(self._found(calendar, event_id), fields)

    def remove_event(self, calendar: GraphCalendar, event_id: str) -> None:
        self._delete(self._found(calendar, event_id))

    def _delete(self, found: tuple[GraphEvent, str | None]) -> None:
        event, key = found
        if key is None:
            del self.calendars[event.calendar_id].events[event.resource["id"]]
            self._notify(event.calendar_id, "deleted", event.resource)
        else:
            event.exceptions[key] = None
            self._notify(event.calendar_id, "updated", event.resource)


if __name__ == "__main__":
    sys.exit(oauth_fakes.serve_from_command_line(FakeMicrosoft))
