"""One calendar on a CalDAV server, through the ``caldav`` library: read for the inbound sync,
written for write-back. No database here.

``read_calendar`` finds the calendar (by URL, or by display name among the principal's
calendars, or the only one), asks for its change markers in one PROPFIND (``DAV:sync-token``,
RFC 6578, and CalendarServer's ``getctag``; for servers with neither, a digest of its members'
ETags from a depth-1 PROPFIND), and unless they equal the ones given, reads the events in a
window with one calendar-query REPORT (a time-range search). ``put_event`` and
``delete_event`` write one event at ``<calendar>/<UID>.ics``: a PUT there replaces what is
there, and a DELETE of what is gone is no error, so both are safe to repeat. Every request has
the timeout given (connect and each read). Failures are raised as ``CalendarSyncError``
subclasses whose messages never include the password.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar
from urllib.parse import quote, urljoin, urlsplit

import caldav
from caldav.elements import dav
from caldav.elements.base import BaseElement
from caldav.lib import error as caldav_error
from caldav.lib.http_sync import requests as http  # niquests (or requests), as caldav uses it
from lxml import etree

from app.services.integrations.calendars.busy_time import CalendarObject
from app.services.integrations.calendars.errors import (
    AuthenticationFailed,
    CalendarNotFound,
    CalendarSyncError,
    ServerError,
    ServerTimeout,
    ServerUnreachable,
)


class GetCtag(BaseElement):
    """CalendarServer's collection tag: changes whenever anything in the calendar does."""

    tag: ClassVar[str] = "{http://calendarserver.org/ns/}getctag"


@dataclass(frozen=True)
class CalendarAccess:
    url: str  # the server or principal URL
    username: str | None
    password: str | None = field(repr=False)  # never in a log line or traceback
    calendar: str | None  # the calendar's URL or display name; None: the only calendar
    calendar_url: str | None  # where an earlier sync found it, if it did
    timeout: float


@dataclass(frozen=True)
class ChangeMarkers:
    """What the server says about the calendar's version. Equal markers, same contents."""

    calendar_url: str
    sync_token: str | None
    ctag: str | None  # the server's ctag, else "etags:<sha256 of its members' ETags>"

    def same_as(self, sync_token: str | None, ctag: str | None) -> bool:
        """The calendar is unchanged since markers ``sync_token``/``ctag`` (None: unknown)."""
        if self.sync_token is not None:
            return self.sync_token == sync_token
        return self.ctag is not None and self.ctag == ctag


@dataclass(frozen=True)
class CalendarRead:
    markers: ChangeMarkers
    objects: list[CalendarObject] | None  # None: unchanged, nothing read


def read_calendar(
    access: CalendarAccess,
    window_start: datetime,
    window_end: datetime,
    *,
    known_sync_token: str | None = None,
    known_ctag: str | None = None,
) -> CalendarRead:
    """The calendar's markers and, unless they match the known ones, its events in
    [window_start, window_end) (a day wider on both sides: the server places all-day and
    floating events in UTC, the caller in the sub account's timezone)."""
    with _translated_errors(access), _client(access) as client:
        calendar, markers = _open(client, access)
        if markers.same_as(known_sync_token, known_ctag):
            return CalendarRead(markers, None)
        found = calendar.search(
            event=True,
            start=window_start - timedelta(days=1),
            end=window_end + timedelta(days=1),
            expand=False,
            post_filter=False,
        )
        objects = [
            CalendarObject(href=str(obj.url), data=_text(obj.data)) for obj in found if obj.data
        ]
        return CalendarRead(markers, objects)


def account_calendars(access: CalendarAccess, limit: int) -> list[tuple[str | None, str]]:
    """The account's calendars as (display name, URL), at most ``limit``: what a person
    chooses a connection's calendar from. Reaches the server as a sync does (same client,
    timeouts and errors: ``CalendarSyncError`` subclasses)."""
    with _translated_errors(access), _client(access) as client:
        calendars = client.principal().get_calendars()[:limit]
        return [(_clean(c.get_display_name()), str(c.url)) for c in calendars]


def put_event(access: CalendarAccess, uid: str, data: bytes) -> str:
    """Store the iCalendar object ``data`` (one event, UID ``uid``) in the calendar, replacing
    any earlier version; returns the calendar's URL."""
    with _translated_errors(access), _client(access) as client:
        calendar = _writable(client, access)
        try:
            _event_at(client, calendar, uid, data).save(increase_seqno=False)
        except caldav_error.NotFoundError:
            if not access.calendar_url:
                raise
            calendar = _find(client, access)  # the remembered URL is gone: look it up
            _event_at(client, calendar, uid, data).save(increase_seqno=False)
        return str(calendar.url)


def delete_event(access: CalendarAccess, uid: str) -> None:
    """Remove the event with UID ``uid`` that ``put_event`` stored (nothing there: done)."""
    with _translated_errors(access), _client(access) as client:
        _event_at(client, _writable(client, access), uid).delete()


def _writable(client: caldav.DAVClient, access: CalendarAccess) -> Any:
    """The calendar to write to: where a sync found it, else looked up (no PROPFIND for
    change markers, which a write does not need)."""
    if access.calendar_url:
        return client.calendar(url=access.calendar_url)
    return _find(client, access)


def _event_at(client: caldav.DAVClient, calendar: Any, uid: str, data: bytes | None = None) -> Any:
    url = calendar.url.join(quote(uid, safe="") + ".ics")
    return caldav.Event(client=client, url=url, data=data, parent=calendar, id=uid)


@contextmanager
def _client(access: CalendarAccess) -> Iterator[caldav.DAVClient]:
    client = caldav.DAVClient(
        url=access.url,
        username=access.username,
        password=access.password,
        timeout=access.timeout,
        enable_rfc6764=False,  # the URL is given; no DNS discovery
    )
    try:
        yield client
    finally:
        client.close()


def _open(client: caldav.DAVClient, access: CalendarAccess) -> tuple[Any, ChangeMarkers]:
    """The calendar and its markers; a remembered URL that is gone is looked up again."""
    if access.calendar_url:
        calendar = client.calendar(url=access.calendar_url)
        try:
            return calendar, _markers(calendar, access)
        except (CalendarNotFound, caldav_error.NotFoundError):
            pass
    calendar = _find(client, access)
    return calendar, _markers(calendar, access)


def _find(client: caldav.DAVClient, access: CalendarAccess) -> Any:
    ref = access.calendar
    if ref and (ref.startswith("/") or "://" in ref):
        return client.calendar(url=urljoin(access.url, ref))
    calendars = client.principal().get_calendars()
    names = [c.get_display_name() for c in calendars]
    if ref:
        matches = [c for c, name in zip(calendars, names, strict=True) if name == ref]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise CalendarNotFound(f"{len(matches)} calendars are named {ref!r}; give its URL")
        raise CalendarNotFound(f"no calendar named {ref!r} (found: {_listing(names)})")
    if len(calendars) == 1:
        return calendars[0]
    at_url = [c for c in calendars if _same_url(str(c.url), access.url)]
    if at_url:
        return at_url[0]
    if not calendars:
        raise CalendarNotFound("the account has no calendars")
    raise CalendarNotFound(
        f"the account has {len(calendars)} calendars ({_listing(names)}); name one in 'calendar'"
    )


# The change markers asked for, most standard first (module attributes so a test can ask for
# properties no server has, to exercise the ETag fallback against a real server).
SYNC_TOKEN: type[BaseElement] = dav.SyncToken
CTAG: type[BaseElement] = GetCtag


def _markers(calendar: Any, access: CalendarAccess) -> ChangeMarkers:
    try:
        props = calendar.get_properties([SYNC_TOKEN(), CTAG(), dav.DisplayName()])
    except caldav_error.NotFoundError:
        raise CalendarNotFound(f"no calendar at {calendar.url} (HTTP 404)") from None
    if not props:
        raise CalendarNotFound(f"no calendar at {calendar.url}")
    name = props.get(dav.DisplayName.tag)
    if access.calendar and not _is_url(access.calendar) and name != access.calendar:
        # Renamed since the URL was remembered: look the name up again.
        raise CalendarNotFound(f"the calendar at {calendar.url} is no longer {access.calendar!r}")
    sync_token = _clean(props.get(SYNC_TOKEN.tag))
    ctag = _clean(props.get(CTAG.tag))
    if sync_token is None and ctag is None:
        ctag = _etags_digest(calendar)
    return ChangeMarkers(calendar_url=str(calendar.url), sync_token=sync_token, ctag=ctag)


def _etags_digest(calendar: Any) -> str:
    response = calendar.get_properties([dav.GetEtag()], depth=1, parse_response_xml=False)
    etags = response.expand_simple_props([dav.GetEtag()])
    lines = sorted(f"{href} {props.get(dav.GetEtag.tag)}" for href, props in etags.items())
    return "etags:" + hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _clean(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _text(data: Any) -> str:
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else str(data)


def _is_url(ref: str) -> bool:
    return ref.startswith("/") or "://" in ref


def _same_url(a: str, b: str) -> bool:
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.hostname, pa.port, pa.path.rstrip("/")) == (
        pb.hostname,
        pb.port,
        pb.path.rstrip("/"),
    )


def _listing(names: list[str | None]) -> str:
    shown = ", ".join(repr(n) if n else "(unnamed)" for n in names[:10])
    return shown + (", …" if len(names) > 10 else "")


@contextmanager
def _translated_errors(access: CalendarAccess) -> Iterator[None]:
    """The library's and the HTTP client's exceptions as ``CalendarSyncError``s, with short
    messages that name the server and never the password."""
    server = _server(access.url)
    try:
        yield
    except CalendarSyncError:
        raise
    except http.exceptions.Timeout:
        raise ServerTimeout(f"{server} did not answer within {access.timeout:g} s") from None
    except http.exceptions.ConnectionError as err:
        raise ServerUnreachable(f"cannot connect to {server}: {_os_reason(err)}") from None
    except http.exceptions.RequestException as err:
        raise ServerUnreachable(f"{server}: {type(err).__name__}") from None
    except caldav_error.AuthorizationError as err:
        if err.status == 403 or "forbidden" in str(err.reason).lower():
            raise AuthenticationFailed(
                f"{server} refused access (HTTP 403): check the user's rights"
            ) from None
        raise AuthenticationFailed(
            f"{server} rejected the username or password (HTTP 401)"
        ) from None
    except caldav_error.NotFoundError:
        raise CalendarNotFound(f"{server} has nothing at the URL asked for (HTTP 404)") from None
    except caldav_error.RateLimitError:
        raise ServerError(f"{server} is rate limiting requests (HTTP 429/503)") from None
    except caldav_error.DAVError as err:
        status = f"HTTP {err.status}" if err.status else _short(err.reason)
        raise ServerError(f"{server} answered {type(err).__name__} ({status})") from None
    except etree.LxmlError:
        raise ServerError(f"{server} sent a response that is not valid XML") from None


def _short(text: object, limit: int = 120) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _server(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\"\)]+)")


def _os_reason(err: Exception) -> str:
    found = _ERRNO.search(str(err))
    return found.group(1).strip() if found else type(err).__name__
