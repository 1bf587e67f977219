"""CalDAV calendars (RFC 4791), through the ``caldav`` library: read for the inbound sync,
written for write-back. No database here.

A read finds the calendar (where the last read found it, else by display name among the
principal's calendars, else the only one) and asks for its change markers in one PROPFIND
(``DAV:sync-token``, RFC 6578, and CalendarServer's ``getctag``; for servers with neither, a
digest of its members' ETags from a depth-1 PROPFIND). Then:

- markers equal to the cursor's: unchanged, nothing more is asked;
- an incremental read on a server with sync tokens: a ``sync-collection`` REPORT lists what
  changed and what was removed since the cursor's token, and one ``calendar-multiget`` fetches
  the changed resources; a token the server no longer knows means a full read;
- an incremental read on a server without (its ctag changed, or it has none): the members'
  ETags (one depth-1 PROPFIND, or the one the digest came from) are compared with the stored
  ones, and only new or changed resources are fetched;
- a full read: one ``calendar-query`` REPORT for the events in the window (on a server without
  sync tokens, with every member's ETag beside it, so the next read can compare).

``put_event`` and ``delete_event`` write one event at ``<calendar>/<UID>.ics``: a PUT there
replaces what is there, and a DELETE of what is gone is no error, so both are safe to repeat.
Every request has the timeout given (connect and each read). Failures are raised as
``CalendarSyncError`` subclasses whose messages never include the password.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar
from urllib.parse import quote, unquote, urljoin, urlsplit
from zoneinfo import ZoneInfo

import caldav
from caldav.elements import dav
from caldav.elements.base import BaseElement
from caldav.lib import error as caldav_error
from caldav.lib.http_sync import requests as http  # niquests (or requests), as caldav uses it
from lxml import etree

from app.scheduling.intervals import Interval
from app.services.integrations.calendars.errors import (
    AuthenticationFailed,
    CalendarNotFound,
    CalendarSyncError,
    ServerError,
    ServerTimeout,
    ServerUnreachable,
)
from app.services.integrations.calendars.providers.base import (
    CalendarChanges,
    Cursor,
    ItemRead,
    RemoteCalendar,
    ical_item,
)

# How many resources one calendar-multiget asks for.
MULTIGET_BATCH = 200


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
class _Markers:
    """What the server says about the calendar's version. Equal markers, same contents."""

    sync_token: str | None
    ctag: str | None  # the server's ctag, else "etags:<sha256 of its members' ETags>"
    etags: Mapping[str, str | None] | None  # by key, when the digest was computed from them

    def same_as(self, sync_token: str | None, ctag: str | None) -> bool:
        """The calendar is unchanged since markers ``sync_token``/``ctag`` (None: unknown)."""
        if self.sync_token is not None:
            return self.sync_token == sync_token
        return self.ctag is not None and self.ctag == ctag


class CalDAVProvider:
    """CalDAV servers: Radicale, Xandikos, Nextcloud, Fastmail, iCloud and others."""

    kind = "caldav"
    writes = True

    def calendars(self, access: CalendarAccess, limit: int) -> list[RemoteCalendar]:
        """The account's calendars (display name and URL), at most ``limit``."""
        with _translated_errors(access), _client(access) as client:
            found = client.principal().get_calendars()[:limit]
            return [RemoteCalendar(str(c.url), _clean(c.get_display_name())) for c in found]

    def read(
        self, access: CalendarAccess, cursor: Cursor, window: Interval, tz: ZoneInfo
    ) -> CalendarChanges:
        """The calendar's changes since ``cursor``, or all of it (see the module docstring)."""
        # A calendar whose markers were forgotten (its configuration changed, or it was not
        # found) is looked up afresh: another one may be meant now.
        remembered = cursor.remote_id if cursor.sync_token or cursor.ctag else None
        with _translated_errors(access), _client(access) as client:
            calendar, name, markers = _open(client, access, remembered)
            remote_id = str(calendar.url)
            known = cursor.incremental and cursor.remote_id == remote_id
            if known and markers.same_as(cursor.sync_token, cursor.ctag):
                return _changes(remote_id, name, markers, complete=False)
            if known and markers.sync_token and cursor.sync_token:
                changes = _changes_since_token(calendar, cursor.sync_token, window, tz)
                if changes is not None:
                    changed, removed, token = changes
                    return CalendarChanges(
                        remote_id, name, False, changed, removed, token, markers.ctag
                    )
            elif known and not markers.sync_token:
                etags = markers.etags if markers.etags is not None else _member_etags(calendar)
                changed, removed = _changes_by_etags(
                    calendar, etags, cursor.known_etags(), window, tz
                )
                return _changes(
                    remote_id, name, markers, complete=False, changed=changed, removed=removed
                )
            return _changes(
                remote_id,
                name,
                markers,
                complete=True,
                changed=_read_window(calendar, _etags_to_keep(calendar, markers), window, tz),
            )

    def put_event(
        self, access: CalendarAccess, uid: str, data: bytes, event_id: str | None = None
    ) -> None:
        """Store the iCalendar object ``data`` (one event, UID ``uid``) in the calendar,
        replacing any earlier version (found by its UID: ``event_id`` is not needed)."""
        with _translated_errors(access), _client(access) as client:
            calendar = _writable(client, access)
            try:
                _event_at(client, calendar, uid, data).save(increase_seqno=False)
            except caldav_error.NotFoundError:
                if not access.calendar_url:
                    raise
                calendar = _find(client, access)  # the remembered URL is gone: look it up
                _event_at(client, calendar, uid, data).save(increase_seqno=False)

    def delete_event(self, access: CalendarAccess, uid: str, event_id: str | None = None) -> None:
        """Remove the event with UID ``uid`` that ``put_event`` stored (nothing there: done)."""
        with _translated_errors(access), _client(access) as client:
            _event_at(client, _writable(client, access), uid).delete()


def _changes(
    remote_id: str,
    name: str | None,
    markers: _Markers,
    *,
    complete: bool,
    changed: list[ItemRead] | None = None,
    removed: list[str] | None = None,
) -> CalendarChanges:
    return CalendarChanges(
        remote_id, name, complete, changed or [], removed or [], markers.sync_token, markers.ctag
    )


def _etags_to_keep(calendar: Any, markers: _Markers) -> Mapping[str, str | None]:
    """The members' ETags a full read keeps, so the next read can compare them: on a server
    without sync tokens only (one with them lists its changes itself)."""
    if markers.sync_token:
        return {}
    return markers.etags if markers.etags is not None else _member_etags(calendar)


def _read_window(
    calendar: Any, etags: Mapping[str, str | None], window: Interval, tz: ZoneInfo
) -> list[ItemRead]:
    """Every event in the window (a day wider on both sides: the server places all-day and
    floating events in UTC, the sync in the sub account's timezone); on a server that finds
    changes by ETags, every other member too (no periods), so the next read knows them."""
    found = calendar.search(
        event=True,
        start=window.start - timedelta(days=1),
        end=window.end + timedelta(days=1),
        expand=False,
        post_filter=False,
    )
    items = {
        key: ical_item(key, etags.get(key), _text(obj.data), window, tz)
        for obj in found
        if obj.data
        for key in [_key(obj.url)]
    }
    for key, etag in etags.items():
        items.setdefault(key, ItemRead(key, etag, None, []))
    return list(items.values())


def _changes_since_token(
    calendar: Any, token: str, window: Interval, tz: ZoneInfo
) -> tuple[list[ItemRead], list[str], str | None] | None:
    """(changed, removed, new token) from a sync-collection REPORT; None when the server no
    longer knows the token (RFC 6578 3.2: read the calendar in full)."""
    try:
        report = calendar.get_objects_by_sync_token(
            token, load_objects=False, disable_fallback=True
        )
    except (caldav_error.ReportError, caldav_error.DAVError) as err:
        if _expired_token(err):
            return None
        raise
    removed = {_key(url) for url in report.deleted_urls}
    wanted = {_key(obj.url) for obj in report.objects} - removed
    fetched = _multiget(calendar, sorted(wanted), window, tz)
    gone = wanted - {item.key for item in fetched}  # removed between the two requests
    return fetched, sorted(removed | gone), _clean(report.sync_token)


def _changes_by_etags(
    calendar: Any,
    etags: Mapping[str, str | None],
    known: Mapping[str, str | None],
    window: Interval,
    tz: ZoneInfo,
) -> tuple[list[ItemRead], list[str]]:
    """(changed, removed): members whose ETag differs from the stored one, and stored ones that
    are no longer members."""
    wanted = sorted(key for key, etag in etags.items() if key not in known or known[key] != etag)
    fetched = _multiget(calendar, wanted, window, tz)
    removed = sorted(known.keys() - etags.keys())
    return fetched, removed


def _multiget(calendar: Any, keys: list[str], window: Interval, tz: ZoneInfo) -> list[ItemRead]:
    """The resources at ``keys`` (paths), fetched ``MULTIGET_BATCH`` at a time."""
    items: list[ItemRead] = []
    for batch in _batches(keys, MULTIGET_BATCH):
        urls = [calendar.url.join(quote(key, safe="/:@")) for key in batch]
        for obj in calendar.multiget(urls):
            if obj.data:
                key = _key(obj.url)
                etag = _clean((obj.props or {}).get(dav.GetEtag.tag))
                items.append(ical_item(key, etag, _text(obj.data), window, tz))
    return items


def _batches(items: list[str], size: int) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _expired_token(err: Exception) -> bool:
    """A sync-collection refused for its token (RFC 6578: 403 with DAV:valid-sync-token;
    Xandikos answers 412), not for the account's rights."""
    preconditions = getattr(err, "preconditions", None) or {}
    if dav.ValidSyncToken.tag in preconditions:
        return True
    return getattr(err, "status", None) in (409, 412) or isinstance(err, caldav_error.ReportError)


def _key(url: Any) -> str:
    """A resource's key: its path, unquoted (servers differ in what they percent-encode)."""
    return unquote(urlsplit(str(url)).path)


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


def _open(
    client: caldav.DAVClient, access: CalendarAccess, remembered: str | None
) -> tuple[Any, str | None, _Markers]:
    """The calendar, its name and markers; a remembered URL that is gone is looked up again."""
    if remembered:
        calendar = client.calendar(url=remembered)
        try:
            return calendar, *_markers(calendar, access)
        except (CalendarNotFound, caldav_error.NotFoundError):
            pass
    calendar = _find(client, access)
    return calendar, *_markers(calendar, access)


def _find(client: caldav.DAVClient, access: CalendarAccess) -> Any:
    ref = access.calendar
    if ref and _is_url(ref):
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


def _markers(calendar: Any, access: CalendarAccess) -> tuple[str | None, _Markers]:
    try:
        props = calendar.get_properties([SYNC_TOKEN(), CTAG(), dav.DisplayName()])
    except caldav_error.NotFoundError:
        raise CalendarNotFound(f"no calendar at {calendar.url} (HTTP 404)") from None
    if not props:
        raise CalendarNotFound(f"no calendar at {calendar.url}")
    name = _clean(props.get(dav.DisplayName.tag))
    if access.calendar and not _is_url(access.calendar) and name != access.calendar:
        # Renamed since the URL was remembered: look the name up again.
        raise CalendarNotFound(f"the calendar at {calendar.url} is no longer {access.calendar!r}")
    sync_token = _clean(props.get(SYNC_TOKEN.tag))
    ctag = _clean(props.get(CTAG.tag))
    etags = None
    if sync_token is None and ctag is None:
        etags = _member_etags(calendar)
        lines = sorted(f"{key} {etag}" for key, etag in etags.items())
        ctag = "etags:" + hashlib.sha256("\n".join(lines).encode()).hexdigest()
    return name, _Markers(sync_token, ctag, etags)


def _member_etags(calendar: Any) -> dict[str, str | None]:
    """Every member resource's ETag, by key (one depth-1 PROPFIND)."""
    response = calendar.get_properties([dav.GetEtag()], depth=1, parse_response_xml=False)
    found = response.expand_simple_props([dav.GetEtag()])
    own = _key(calendar.url)
    return {
        key: _clean(props.get(dav.GetEtag.tag))
        for href, props in found.items()
        for key in [_key(calendar.url.join(href))]
        if key.rstrip("/") != own.rstrip("/")
    }


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
