"""Google Calendar (API v3): busy time read incrementally, bookings written into one chosen
calendar. No database here; the access token comes from ``ApiAccess.token``.

A read lists the calendar's events with ``singleEvents=true`` (recurring events as their
instances). The first read, and any read after the window moved past what was read, asks for
the window (``timeMin``/``timeMax``) and keeps the ``nextSyncToken`` of the last page; later
reads send that token and get only what changed since, deleted events as
``status: cancelled``. A token Google no longer knows answers ``410 Gone``: the calendar is
read in full again. Free time is not busy: ``transparency: transparent``, cancelled events and
working-location entries; all-day events (``date``) block their days in the sub account's
timezone.

A booking's event has an id derived from the booking's UID (base32hex, as Google requires), so
writing it is an insert that, when the event exists (a retry, a change), becomes an update; its
``iCalUID`` is the booking's UID, so the sync knows it as the service's own.

A booking of a Google Meet event type has its event written with a conference: every write
(insert, or the update that follows a 409) carries ``conferenceDataVersion=1`` and
``conferenceData.createRequest`` with a ``requestId`` derived from the booking's UID and
``conferenceSolutionKey.type: hangoutsMeet``. Google makes the conference with the first
write and ignores a create request whose id it has seen, so a retried or later write keeps
the same meeting. The join link is the answer's ``conferenceData.entryPoints`` entry of
``entryPointType: video``; a ``createRequest.status.statusCode`` of ``pending`` means Google
is still making it (the next write answers it), ``failure`` that it will not.
"""

from __future__ import annotations

import base64
import uuid
from datetime import UTC, date, datetime, time
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import icalendar

from app.models import LocationKind
from app.scheduling.intervals import Interval
from app.scheduling.timezones import local_to_utc
from app.services.integrations.calendars.busy_time import BusyPeriod
from app.services.integrations.calendars.errors import ServerError
from app.services.integrations.calendars.providers.base import (
    PRIMARY,
    CalendarChanges,
    Cursor,
    ItemRead,
    OpenedChannel,
    RemoteCalendar,
    StoredEvent,
)
from app.services.integrations.calendars.providers.http_json import ApiAccess, ApiSession, Gone

PAGE_SIZE = 2500  # events.list's largest page
# A namespace for the request ids of the service's Meet conferences (a create request whose id
# Google has seen for the event is ignored: the conference made first stays).
_MEET_NAMESPACE = uuid.UUID("3b0f7c52-9e1d-5c8a-a6f4-71d2e98c0b3a")


def google_event_id(uid: str) -> str:
    """The Google event id of the booking with UID ``uid``: base32hex of its bytes."""
    return base64.b32hexencode(uid.encode()).decode().rstrip("=").lower()


def meet_request_id(uid: str) -> str:
    """The ``conferenceData.createRequest.requestId`` of the booking with UID ``uid``: the same
    for every write of its event, so Google makes one Meet conference for it."""
    return str(uuid.uuid5(_MEET_NAMESPACE, uid))


class GoogleProvider:
    kind = "google"
    notification_path = "/push/google"
    lifecycle_path = None
    meetings = frozenset({LocationKind.GOOGLE_MEET.value})

    def calendars(self, access: ApiAccess, limit: int) -> list[RemoteCalendar]:
        found: list[RemoteCalendar] = []
        with ApiSession(access) as api:
            params: dict[str, Any] = {"maxResults": 250}
            while len(found) < limit:
                _, page = api.request("GET", "users/me/calendarList", params=params)
                found += [
                    RemoteCalendar(
                        item["id"],
                        item.get("summaryOverride") or item.get("summary"),
                        primary=bool(item.get("primary")),
                        writable=item.get("accessRole") in ("owner", "writer"),
                    )
                    for item in page.get("items", [])
                ]
                if not page.get("nextPageToken"):
                    break
                params["pageToken"] = page["nextPageToken"]
        return found[:limit]

    def read(
        self, access: ApiAccess, cursor: Cursor, window: Interval, tz: ZoneInfo
    ) -> CalendarChanges:
        calendar_id = cursor.remote_id or PRIMARY
        path = f"calendars/{quote(calendar_id, safe='')}/events"
        with ApiSession(access) as api:
            if cursor.incremental and cursor.sync_token:
                try:
                    items, token = _pages(api, path, {"syncToken": cursor.sync_token})
                    changed = [_item(e, window, tz) for e in items if not _deleted(e)]
                    removed = [e["id"] for e in items if _deleted(e)]
                    return CalendarChanges(calendar_id, None, False, changed, removed, token, None)
                except Gone:
                    pass  # the token expired: read it all
            window_params = {
                "timeMin": _rfc3339(window.start),
                "timeMax": _rfc3339(window.end),
            }
            items, token = _pages(api, path, window_params)
            changed = [_item(e, window, tz) for e in items if not _deleted(e)]
            return CalendarChanges(calendar_id, None, True, changed, [], token, None)

    def items_in(
        self, access: ApiAccess, remote_id: str | None, window: Interval, tz: ZoneInfo
    ) -> tuple[str, list[ItemRead]]:
        """events.list for the window alone (``singleEvents``: instances keyed as a sync keys
        them), rather than freeBusy: an event's ``iCalUID`` tells the service's own written-back
        bookings apart, which freeBusy's bare intervals cannot."""
        calendar_id = remote_id or PRIMARY
        path = f"calendars/{quote(calendar_id, safe='')}/events"
        params = {"timeMin": _rfc3339(window.start), "timeMax": _rfc3339(window.end)}
        with ApiSession(access) as api:
            items, _ = _pages(api, path, params)
        return calendar_id, [_item(e, window, tz) for e in items if not _deleted(e)]

    def open_channel(
        self,
        access: ApiAccess,
        remote_id: str,
        addresses: tuple[str, str | None],
        secret: str,
        expires_at: datetime,
    ) -> OpenedChannel:
        """events.watch: a ``web_hook`` channel (its id chosen here) telling the notification
        address of every change of the calendar's events, with ``secret`` as the channel's
        ``token``. Google has no lifecycle notices."""
        channel_id = str(uuid.uuid4())
        path = f"calendars/{quote(remote_id, safe='')}/events/watch"
        body = {
            "id": channel_id,
            "type": "web_hook",
            "address": addresses[0],
            "token": secret,
            "expiration": int(expires_at.timestamp() * 1000),
        }
        with ApiSession(access) as api:
            _, answer = api.request("POST", path, json=body)
        try:
            expiration = datetime.fromtimestamp(int(answer["expiration"]) / 1000, UTC)
            return OpenedChannel(channel_id, str(answer["resourceId"]), expiration)
        except (KeyError, TypeError, ValueError):
            raise ServerError("Google answered a watch request without a channel") from None

    def renew_channel(
        self, access: ApiAccess, channel_id: str, expires_at: datetime
    ) -> datetime | None:
        """Google's channels cannot be extended: a new one replaces each."""
        return None

    def close_channel(self, access: ApiAccess, channel_id: str, resource_id: str | None) -> None:
        """channels.stop; a channel Google no longer knows is no error."""
        body = {"id": channel_id, "resourceId": resource_id}
        with ApiSession(access) as api:
            api.request("POST", "channels/stop", json=body, accept=(404,))

    def put_event(
        self,
        access: ApiAccess,
        uid: str,
        data: bytes,
        event_id: str | None = None,
        *,
        meeting: str | None = None,
    ) -> StoredEvent:
        calendar_id = access.write_calendar or PRIMARY
        path = f"calendars/{quote(calendar_id, safe='')}/events"
        body = {"id": google_event_id(uid), "iCalUID": uid, **_event_body(data)}
        params: dict[str, Any] | None = None
        if meeting == LocationKind.GOOGLE_MEET:
            # Version 1 on every write: with 0 Google ignores conferenceData in the body.
            params = {"conferenceDataVersion": 1}
            body["conferenceData"] = {
                "createRequest": {
                    "requestId": meet_request_id(uid),
                    "conferenceSolutionKey": {"type": "hangoutsMeet"},
                }
            }
        with ApiSession(access) as api:
            status, answer = api.request(
                "POST",
                path,
                params=params,
                json=body,
                accept=(409,),
                what="the calendar to write into",
            )
            if status == 409:  # written before: this is a change, or a retry
                _, answer = api.request(
                    "PUT", f"{path}/{google_event_id(uid)}", params=params, json=body
                )
        return _meet(answer) if meeting == LocationKind.GOOGLE_MEET else StoredEvent()

    def delete_event(self, access: ApiAccess, uid: str, event_id: str | None = None) -> None:
        calendar_id = access.write_calendar or PRIMARY
        path = f"calendars/{quote(calendar_id, safe='')}/events/{google_event_id(uid)}"
        with ApiSession(access) as api:
            api.request("DELETE", path, accept=(404, 410))  # already gone: done


def _meet(event: dict[str, Any]) -> StoredEvent:
    """The Meet conference of a written event, as its answer shows it: the join link (the
    ``video`` entry point), or that Google is still making it."""
    conference = event.get("conferenceData")
    if not isinstance(conference, dict):
        raise ServerError("Google answered without the Google Meet meeting asked for")
    for entry in conference.get("entryPoints") or []:
        if isinstance(entry, dict) and entry.get("entryPointType") == "video" and entry.get("uri"):
            return StoredEvent(join_url=str(entry["uri"]))
    status = ((conference.get("createRequest") or {}).get("status") or {}).get("statusCode")
    if status == "failure":
        raise ServerError(
            "Google did not make the Google Meet meeting (its create request failed):"
            " check that the account may use Google Meet"
        )
    return StoredEvent(meeting_pending=True)


def _pages(
    api: ApiSession, path: str, params: dict[str, Any]
) -> tuple[list[dict[str, Any]], str | None]:
    """Every event of every page, and the sync token of the last."""
    params = {**params, "singleEvents": "true", "maxResults": PAGE_SIZE}
    items: list[dict[str, Any]] = []
    while True:
        _, page = api.request("GET", path, params=params)
        items += page.get("items", [])
        if not page.get("nextPageToken"):
            return items, page.get("nextSyncToken")
        params["pageToken"] = page["nextPageToken"]


def _deleted(event: dict[str, Any]) -> bool:
    return event.get("status") == "cancelled"


def _item(event: dict[str, Any], window: Interval, tz: ZoneInfo) -> ItemRead:
    """One event (or instance) as an item: busy unless free, cancelled or a working location."""
    key, uid = event["id"], event.get("iCalUID")
    free = event.get("transparency") == "transparent" or event.get("eventType") in (
        "workingLocation",
    )
    if free:
        return ItemRead(key, event.get("etag"), uid, [])
    try:
        start = _instant(event["start"], tz)
        end = _instant(event["end"], tz)
    except (KeyError, ValueError) as err:
        return ItemRead(
            key, event.get("etag"), uid, [], problem=f"event {key}: no readable time ({err})"
        )
    if not (start < end and start < window.end and end > window.start):
        return ItemRead(key, event.get("etag"), uid, [])
    periods = [BusyPeriod(start, end, uid or key)]
    return ItemRead(key, event.get("etag"), uid, periods, changed_at=_stamp(event.get("updated")))


def _stamp(text: Any) -> datetime | None:
    """An event's ``updated`` (RFC 3339), when it can be read."""
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None


def _instant(moment: dict[str, Any], tz: ZoneInfo) -> datetime:
    """``{"dateTime": RFC 3339}`` as that instant; ``{"date": …}`` as the day's first instant
    in ``tz`` (all-day events block their days where the calendar's owner is)."""
    if "dateTime" in moment:
        value = datetime.fromisoformat(moment["dateTime"].replace("Z", "+00:00"))
        if value.tzinfo is None:
            value = value.replace(tzinfo=ZoneInfo(moment.get("timeZone") or "UTC"))
        return value.astimezone(UTC)
    return local_to_utc(date.fromisoformat(moment["date"]), time(0), tz)


def _rfc3339(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _event_body(data: bytes) -> dict[str, Any]:
    """The booking's iCalendar event as Google's event resource."""
    event = next(iter(icalendar.Calendar.from_ical(data).walk("VEVENT")))
    body: dict[str, Any] = {
        "summary": str(event.get("SUMMARY", "")),
        "start": {"dateTime": _rfc3339(event.decoded("DTSTART"))},
        "end": {"dateTime": _rfc3339(event.decoded("DTEND"))},
        "transparency": "opaque",
        "status": "tentative"
        if str(event.get("STATUS", "")).upper() == "TENTATIVE"
        else "confirmed",
    }
    for prop, name in (("DESCRIPTION", "description"), ("LOCATION", "location")):
        if prop in event:
            body[name] = str(event[prop])
    return body
