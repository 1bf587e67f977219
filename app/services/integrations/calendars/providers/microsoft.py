"""Microsoft 365 / Outlook (Microsoft Graph v1.0): busy time read incrementally, bookings
written into one chosen calendar. No database here; the access token comes from
``ApiAccess.token``.

A read is a round of ``calendarView/delta``: the first (and any after the window moved past
what was read) starts from the window (``startDateTime``/``endDateTime``) and follows
``@odata.nextLink`` to the last page, whose ``@odata.deltaLink`` is kept; later reads follow
that link and get only what changed since, removed events as ``{"id", "@removed"}``. A delta
link Graph no longer knows answers ``410 Gone``: the calendar is read in full again. The view
lists single events, occurrences and exceptions (never series masters), so every item has a
time of its own. ``PRIMARY`` stands for the mailbox's default calendar (``me/calendarView``,
``me/events``), whatever its id.

Free time is not busy: ``showAs`` of ``free`` or ``workingElsewhere``, and cancelled events.
Times are asked for in UTC (``Prefer: outlook.timezone="UTC"``), but each answer is read in the
zone it names, since some mailboxes answer in their own zone whatever is asked, by Windows name
(``W. Europe Standard Time``): those names are mapped to IANA zones with icalendar's table.
All-day events block their days in the sub account's timezone.

Graph chooses an event's id and its ``iCalUId``; neither can be set. So a booking's event is
created with a ``transactionId`` derived from the booking's UID (a retried create answers the
event already made), and the id Graph gave it is returned to write-back, which keeps it
(``WrittenEvent``) to update and delete that event later and to know it as the service's own
when the sync reads it back.

A booking of a Microsoft Teams event type has its event written with ``isOnlineMeeting: true``
and ``onlineMeetingProvider: teamsForBusiness`` (on the create and on every change: Graph makes
the meeting once and keeps it, and neither can be undone). The join link is the answer's
``onlineMeeting.joinUrl``; an answer without it yet means Graph is still making it (the next
write answers it). An event Graph answers as not online (the calendar offers no Teams, as a
personal account's does not) is an error that says so.
"""

from __future__ import annotations

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
    zone_by_name,
)
from app.services.integrations.calendars.providers.http_json import ApiAccess, ApiSession, Gone

PAGE_SIZE = 500  # ``odata.maxpagesize`` asked for; Graph may answer fewer
ANSWER_IN_UTC = {"Prefer": f'outlook.timezone="UTC", odata.maxpagesize={PAGE_SIZE}'}
FREE_SHOW_AS = frozenset({"free", "workingElsewhere"})
# A namespace for the transaction ids of the service's events (a create retried with the same
# id answers the event already made, instead of a second one).
_TRANSACTION_NAMESPACE = uuid.UUID("8f6c1d2e-4b1f-5a43-9c7e-2d0f6a5b3e91")


def transaction_id(uid: str, replacing: str | None = None) -> str:
    """The ``transactionId`` of the create of the booking with UID ``uid`` (or of its event
    made again after the person deleted the one with id ``replacing``)."""
    name = uid if replacing is None else f"{uid} {replacing}"
    return str(uuid.uuid5(_TRANSACTION_NAMESPACE, name))


class MicrosoftProvider:
    kind = "microsoft"
    notification_path = "/push/microsoft"
    lifecycle_path = "/push/microsoft/lifecycle"
    meetings = frozenset({LocationKind.MICROSOFT_TEAMS.value})

    def calendars(self, access: ApiAccess, limit: int) -> list[RemoteCalendar]:
        found: list[RemoteCalendar] = []
        url: str | None = "me/calendars"
        params: dict[str, Any] | None = {"$top": 100}
        with ApiSession(access) as api:
            while url and len(found) < limit:
                _, page = api.request("GET", url, params=params)
                found += [
                    RemoteCalendar(
                        item["id"],
                        item.get("name"),
                        primary=bool(item.get("isDefaultCalendar")),
                        writable=bool(item.get("canEdit", True)),
                    )
                    for item in page.get("value", [])
                ]
                url, params = page.get("@odata.nextLink"), None
        return found[:limit]

    def read(
        self, access: ApiAccess, cursor: Cursor, window: Interval, tz: ZoneInfo
    ) -> CalendarChanges:
        calendar_id = cursor.remote_id
        with ApiSession(access, headers=ANSWER_IN_UTC) as api:
            if cursor.incremental and cursor.sync_token:
                try:
                    items, link = _round(api, cursor.sync_token, None)
                    changed = [_item(e, window, tz) for e in items if "@removed" not in e]
                    removed = [e["id"] for e in items if "@removed" in e]
                    return CalendarChanges(
                        calendar_id or PRIMARY, None, False, changed, removed, link, None
                    )
                except Gone:
                    pass  # the delta link expired: read it all
            calendar_id = calendar_id or PRIMARY
            view = (
                "me/calendarView/delta"
                if calendar_id == PRIMARY
                else f"me/calendars/{quote(calendar_id, safe='')}/calendarView/delta"
            )
            window_params = {
                "startDateTime": _instant_text(window.start),
                "endDateTime": _instant_text(window.end),
            }
            items, link = _round(api, view, window_params)
            changed = [_item(e, window, tz) for e in items if "@removed" not in e]
            return CalendarChanges(calendar_id, None, True, changed, [], link, None)

    def items_in(
        self, access: ApiAccess, remote_id: str | None, window: Interval, tz: ZoneInfo
    ) -> tuple[str, list[ItemRead]]:
        """calendarView for the window alone: the same occurrences, with the same ids, as the
        delta round a sync reads."""
        calendar_id = remote_id or PRIMARY
        view = (
            "me/calendarView"
            if calendar_id == PRIMARY
            else f"me/calendars/{quote(calendar_id, safe='')}/calendarView"
        )
        params = {
            "startDateTime": _instant_text(window.start),
            "endDateTime": _instant_text(window.end),
        }
        with ApiSession(access, headers=ANSWER_IN_UTC) as api:
            items, _ = _round(api, view, params)
        return calendar_id, [_item(e, window, tz) for e in items if "@removed" not in e]

    def open_channel(
        self,
        access: ApiAccess,
        remote_id: str,
        addresses: tuple[str, str | None],
        secret: str,
        expires_at: datetime,
    ) -> OpenedChannel:
        """A subscription to the calendar's events (created, updated, deleted), ``secret`` sent
        back as ``clientState`` with each notification; Graph validates both URLs before it
        answers. The default calendar (``PRIMARY``) is subscribed to as ``me/events``: every
        calendar of the mailbox, since its id is not known."""
        resource = (
            "me/events"
            if remote_id == PRIMARY
            else f"me/calendars/{quote(remote_id, safe='')}/events"
        )
        notification_url, lifecycle_url = addresses
        body = {
            "changeType": "created,updated,deleted",
            "notificationUrl": notification_url,
            "lifecycleNotificationUrl": lifecycle_url,
            "resource": resource,
            "expirationDateTime": _instant_text(expires_at),
            "clientState": secret,
        }
        with ApiSession(access) as api:
            _, answer = api.request("POST", "subscriptions", json=body)
        subscription_id, expiry = _subscription(answer)
        return OpenedChannel(subscription_id, None, expiry)

    def renew_channel(
        self, access: ApiAccess, channel_id: str, expires_at: datetime
    ) -> datetime | None:
        """A PATCH of the subscription's expiry; returns the one Graph gave it."""
        path = f"subscriptions/{quote(channel_id, safe='')}"
        body = {"expirationDateTime": _instant_text(expires_at)}
        with ApiSession(access) as api:
            _, answer = api.request("PATCH", path, json=body, what="the subscription")
        return _subscription({"id": channel_id, **answer})[1]

    def close_channel(self, access: ApiAccess, channel_id: str, resource_id: str | None) -> None:
        """Delete the subscription; one Graph no longer knows is no error."""
        path = f"subscriptions/{quote(channel_id, safe='')}"
        with ApiSession(access) as api:
            api.request("DELETE", path, accept=(404,))

    def put_event(
        self,
        access: ApiAccess,
        uid: str,
        data: bytes,
        event_id: str | None = None,
        *,
        meeting: str | None = None,
    ) -> StoredEvent:
        body = _event_body(data)
        teams = meeting == LocationKind.MICROSOFT_TEAMS
        if teams:
            body.update(isOnlineMeeting=True, onlineMeetingProvider="teamsForBusiness")
        with ApiSession(access, headers=ANSWER_IN_UTC) as api:
            if event_id is not None:
                status, changed = api.request(
                    "PATCH", f"me/events/{quote(event_id, safe='')}", json=body, accept=(404,)
                )
                if status != 404:
                    return _stored(event_id, changed, teams)
            # Not written yet, or the person deleted it: (again) a new event.
            calendar = access.write_calendar or PRIMARY
            path = (
                "me/events"  # the default calendar
                if calendar == PRIMARY
                else f"me/calendars/{quote(calendar, safe='')}/events"
            )
            body["transactionId"] = transaction_id(uid, event_id)
            _, created = api.request("POST", path, json=body, what="the calendar to write into")
            new_id = str(created["id"])
            if not _shows(created, body):  # a retried create answers the event as first made
                _, created = api.request("PATCH", f"me/events/{quote(new_id, safe='')}", json=body)
        return _stored(new_id, created, teams)

    def delete_event(self, access: ApiAccess, uid: str, event_id: str | None = None) -> None:
        if event_id is None:
            return  # never written (or written before its id was kept: see write_back)
        with ApiSession(access) as api:
            api.request("DELETE", f"me/events/{quote(event_id, safe='')}", accept=(404, 410))


def _stored(event_id: str, event: dict[str, Any], teams: bool) -> StoredEvent:
    """The written event's id and, when a Teams meeting was asked for, its join link as the
    answer shows it (none yet: Graph is still making it)."""
    if not teams:
        return StoredEvent(event_id)
    if event and event.get("isOnlineMeeting") is False:
        raise ServerError(
            "Microsoft 365 made no Teams meeting: the calendar does not offer Microsoft Teams"
            " (a work or school account with Teams is needed)"
        )
    online = event.get("onlineMeeting")
    join_url = online.get("joinUrl") if isinstance(online, dict) else None
    if join_url:
        return StoredEvent(event_id, join_url=str(join_url))
    return StoredEvent(event_id, meeting_pending=True)


def _subscription(answer: dict[str, Any]) -> tuple[str, datetime]:
    try:
        expires = datetime.fromisoformat(str(answer["expirationDateTime"]).replace("Z", "+00:00"))
        if expires.tzinfo is None:
            expires = expires.replace(tzinfo=UTC)
        return str(answer["id"]), expires.astimezone(UTC)
    except (KeyError, TypeError, ValueError):
        raise ServerError("Microsoft 365 answered without a subscription") from None


def _shows(event: dict[str, Any], body: dict[str, Any]) -> bool:
    """The event as Graph answered it has the time, subject and availability of ``body``."""
    try:
        same_time = all(_instant(event[k]) == _instant(body[k]) for k in ("start", "end"))
    except (KeyError, TypeError, ValueError):
        return False
    return (
        same_time
        and event.get("subject") == body["subject"]
        and event.get("showAs") == body["showAs"]
    )


def _round(
    api: ApiSession, url: str, params: dict[str, Any] | None
) -> tuple[list[dict[str, Any]], str | None]:
    """Every item of a delta round's pages, and the delta link that ends it."""
    items: list[dict[str, Any]] = []
    next_url: str | None = url
    while next_url:
        _, page = api.request("GET", next_url, params=params)
        items += page.get("value", [])
        next_url, params = page.get("@odata.nextLink"), None
        if next_url is None:
            return items, page.get("@odata.deltaLink")
    return items, None


def _item(event: dict[str, Any], window: Interval, tz: ZoneInfo) -> ItemRead:
    """One event or occurrence as an item: busy unless free, cancelled or a series master."""
    key, uid, etag = event["id"], event.get("iCalUId"), event.get("@odata.etag")
    if (
        event.get("showAs") in FREE_SHOW_AS
        or event.get("isCancelled")
        or event.get("type") == "seriesMaster"
    ):
        return ItemRead(key, etag, uid, [])
    try:
        if event.get("isAllDay"):
            start = _day_start(event["start"], tz)
            end = _day_start(event["end"], tz)
        else:
            start, end = _instant(event["start"]), _instant(event["end"])
    except (KeyError, TypeError, ValueError) as err:
        return ItemRead(key, etag, uid, [], problem=f"event {key}: no readable time ({err})")
    if not (start < end and start < window.end and end > window.start):
        return ItemRead(key, etag, uid, [])
    changed_at = _stamp(event.get("lastModifiedDateTime"))
    return ItemRead(key, etag, uid, [BusyPeriod(start, end, uid or key)], changed_at=changed_at)


def _stamp(text: Any) -> datetime | None:
    """An event's ``lastModifiedDateTime``, when it can be read."""
    try:
        value = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC)


def graph_zone(name: str | None) -> ZoneInfo:
    """The zone of a Graph ``timeZone``: an IANA name, or a Windows one (``W. Europe Standard
    Time``); ValueError for one neither knows."""
    found = zone_by_name(name or "UTC")
    if found is None:
        raise ValueError(f"unknown time zone {name!r}")
    return found


def _wall_time(moment: dict[str, Any]) -> datetime:
    """A ``dateTime`` as Graph writes it (up to 7 fractional digits, no offset)."""
    text = moment["dateTime"]
    whole, _, fraction = text.partition(".")
    return datetime.fromisoformat(f"{whole}.{fraction[:6]}" if fraction else whole)


def _instant(moment: dict[str, Any]) -> datetime:
    """``{"dateTime", "timeZone"}`` as the instant it names."""
    wall = _wall_time(moment)
    if wall.tzinfo is None:
        wall = wall.replace(tzinfo=graph_zone(moment.get("timeZone")))
    return wall.astimezone(UTC)


def _day_start(moment: dict[str, Any], tz: ZoneInfo) -> datetime:
    """An all-day event's date (midnight in whatever zone it is given) as that day's first
    instant in ``tz``."""
    day: date = _wall_time(moment).date()
    return local_to_utc(day, time(0), tz)


def _instant_text(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _graph_time(instant: datetime) -> dict[str, str]:
    return {"dateTime": instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S"), "timeZone": "UTC"}


def _event_body(data: bytes) -> dict[str, Any]:
    """The booking's iCalendar event as a Graph event resource."""
    event = next(iter(icalendar.Calendar.from_ical(data).walk("VEVENT")))
    tentative = str(event.get("STATUS", "")).upper() == "TENTATIVE"
    body: dict[str, Any] = {
        "subject": str(event.get("SUMMARY", "")),
        "start": _graph_time(event.decoded("DTSTART")),
        "end": _graph_time(event.decoded("DTEND")),
        "isAllDay": False,
        "showAs": "tentative" if tentative else "busy",
        "body": {"contentType": "text", "content": str(event.get("DESCRIPTION", ""))},
    }
    if "LOCATION" in event:
        body["location"] = {"displayName": str(event["LOCATION"])}
    return body
