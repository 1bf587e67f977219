"""Calendar feeds (``kind = "ics"``): the "secret address in iCal format" Google, Outlook and
Apple offer, or any ``webcal://``/``https://`` address serving an iCalendar file. Read-only:
busy time comes in, nothing is written back.

A read is one GET of the whole file, conditional on what the last one answered
(``If-None-Match`` with its ``ETag``, ``If-Modified-Since`` with its ``Last-Modified``): an
unchanged feed costs one ``304``. A changed one is split into its events by UID (each with the
time zones it names) as text, without parsing the file: an event whose text is the one read
last time keeps its busy time without being parsed or expanded again, so a feed with one
change costs one download, a digest of each event's text, and one parse and expansion.

Bounded, as anything read from outside must be: the address is resolved once and must be
public unless ``CALDAV_ALLOW_PRIVATE`` is on (the connection goes to the address checked, as
webhooks' do), redirects are followed at most ``MAX_REDIRECTS`` times and each is checked the
same way, the file may be at most ``MAX_FEED_BYTES``, and the whole exchange, headers and
redirects included, must finish within ``deadline_seconds`` however slowly the server sends
(``ExchangeDeadline``; each read also has the timeout). A server too slow is named in the error.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit
from zoneinfo import ZoneInfo

from urllib3.exceptions import HTTPError, TimeoutError

from app.scheduling.intervals import Interval
from app.services.integrations.calendars.errors import (
    AuthenticationFailed,
    CalendarNotFound,
    MalformedCalendarData,
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
    zone_by_name,
)
from app.services.integrations.outbound.addresses import (
    CALDAV_ALLOW_PRIVATE,
    Target,
    UnsafeUrl,
    resolve_target,
)
from app.services.integrations.outbound.transport import ExchangeDeadline, host_header, pinned_pool

# A real calendar's feed is a few MB at most (a 4,770-event Google export is about 3 MB).
MAX_FEED_BYTES = 20 * 1024 * 1024
MAX_REDIRECTS = 3
_CHUNK = 64 * 1024
_USER_AGENT = "calendar-booking-service feed reader"


@dataclass(frozen=True)
class FeedAccess:
    url: str  # as the person gave it: webcal:// or http(s)://
    timeout: float  # connect and each read
    deadline_seconds: float  # the whole read
    allow_private: bool


def feed_url(url: str) -> str:
    """The address to fetch: ``webcal://`` (a feed's conventional scheme, which means "HTTP")
    as ``https://``; anything else as it is."""
    parts = urlsplit(url)
    if parts.scheme.lower() == "webcal":
        return urlunsplit(("https", *parts[1:]))
    return url


class FeedProvider:
    """A read-only calendar at one address."""

    kind = "ics"

    def calendars(self, access: FeedAccess, limit: int) -> list[RemoteCalendar]:
        """A feed is one calendar; its name is the file's ``X-WR-CALNAME`` when it has one."""
        answer = _fetch(access, {})
        name = _split(answer.body, access.url).name if answer.body else None
        return [RemoteCalendar(feed_url(access.url), name, primary=True, writable=False)][:limit]

    def read(
        self, access: FeedAccess, cursor: Cursor, window: Interval, tz: ZoneInfo
    ) -> CalendarChanges:
        remote_id = feed_url(access.url)
        known = cursor.incremental and cursor.remote_id == remote_id
        conditions = {}
        if known and cursor.sync_token:
            conditions["If-None-Match"] = cursor.sync_token
        if known and cursor.ctag:
            conditions["If-Modified-Since"] = cursor.ctag
        answer = _fetch(access, conditions)
        if answer.body is None:  # 304 Not Modified
            return CalendarChanges(remote_id, None, False, [], [], cursor.sync_token, cursor.ctag)
        feed = _split(answer.body, access.url)
        stored = cursor.known_etags() if known else {}
        items = [_item(uid, text, stored, window, tz) for uid, text in _events_by_uid(feed).items()]
        return CalendarChanges(
            remote_id,
            feed.name,
            True,
            items,
            [],
            answer.etag,
            answer.last_modified,
        )


def _item(
    uid: str, text: str, stored: Mapping[str, str | None], window: Interval, tz: ZoneInfo
) -> ItemRead:
    digest = hashlib.sha256(text.encode()).hexdigest()
    if stored.get(uid) == digest:
        return ItemRead(uid, digest, uid, [], kept=True)  # as read last time
    return ical_item(uid, digest, text, window, tz)


@dataclass
class _FeedText:
    """A feed's iCalendar text as its parts, split without parsing (``_split``)."""

    name: str | None = None
    zone: str | None = None  # X-WR-TIMEZONE, as an IANA name: the zone of its floating times
    zones: dict[str, list[str]] = field(default_factory=dict)  # TZID → its VTIMEZONE's lines
    events: dict[str, list[list[str]]] = field(default_factory=dict)  # UID → its VEVENTs


def _split(body: bytes, url: str) -> _FeedText:
    """The feed's events by UID (a series and its overrides together), its time zones, its
    name and its zone, from the text as it is: unfolded lines grouped by ``BEGIN``/``END``.
    Nothing is parsed here, so an unchanged event costs a digest of its text, not a parse; each
    changed event is parsed on its own (``ical_item``), and one that cannot be is skipped alone.

    An ``END`` that names no open component (``BEGIN:VTODO`` … ``END:VTOOD``) closes the
    innermost one, as ``icalendar`` reads it: one misspelt line costs at most that component,
    never the feed. The calendar's own is no exception (Exchange 2010 ends a file with
    ``END:VCALENDARD``), but between the calendar's components such an ``END`` is a stray of
    one already closed and closes nothing: there, only the file's last line closes the
    calendar. An ``END`` of a component that is open further out, before those inside it have
    ended, leaves no way to tell where anything ends: the feed is refused. So is a file that
    stops with a component open, named (``_cut_short``): it was cut, and what it holds is not
    the whole calendar."""
    text = body.decode("utf-8", errors="replace").lstrip("\ufeff")
    lines = _UNFOLD.sub("", text).splitlines()
    first = next((line for line in lines if line.strip()), "")
    if first.strip().upper() != "BEGIN:VCALENDAR":
        raise MalformedCalendarData(f"{_server(url)} sent a file that is not iCalendar")
    feed = _FeedText()
    stack: list[str] = []
    block: list[str] = []
    last = max(number for number, line in enumerate(lines) if line.strip())
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        name, _, value = line.partition(":")
        prop = name.split(";", 1)[0].strip().upper()
        if prop == "BEGIN":
            stack.append(value.strip().upper())
        if len(stack) >= 2:
            block.append(line)
        elif len(stack) == 1:
            _keep_calendar_property(feed, prop, value.strip())
        if prop == "END":
            closing = value.strip().upper()
            if not stack or (closing != stack[-1] and closing in stack):
                raise MalformedCalendarData(
                    f"{_server(url)} sent iCalendar whose BEGIN and END do not match"
                )
            if len(stack) == 1 and closing != stack[-1] and number != last:
                continue  # a stray END between the calendar's components: nothing to close
            stack.pop()
            if len(stack) == 1:
                _keep_component(feed, block)
                block = []
    if stack:
        raise MalformedCalendarData(_cut_short(url, stack, feed))
    return feed


def _cut_short(url: str, stack: list[str], feed: _FeedText) -> str:
    """What a file that stops with components open lacks: each open component's ``END``,
    innermost first, and how much of it was read whole."""
    ends = [f"END:{kind}" for kind in reversed(stack)]
    missing = ", ".join(ends[:-1]) + " and " + ends[-1] if len(ends) > 1 else ends[0]
    inner = f" inside a {stack[-1]}" if len(stack) > 1 else ""
    events = sum(map(len, feed.events.values()))
    return (
        f"{_server(url)} sent iCalendar that stops{inner} without {missing}, after"
        f" {events} complete event{'s' if events != 1 else ''}: the file was cut short"
        " (its server or a proxy ended the answer early?)"
    )


_UNFOLD = re.compile(r"\r?\n[ \t]")
# A TZID parameter's value: quoted (Outlook's "(UTC+01:00) Amsterdam, Berlin, …", which holds
# a colon) or not (RFC 5545 3.2: a quoted value may hold ":" ";" ",", an unquoted one none).
_TZID_PARAM = re.compile(r';TZID=(?:"([^"]*)"|([^";:,]*))', re.IGNORECASE)


def _keep_calendar_property(feed: _FeedText, prop: str, value: str) -> None:
    """A property of the calendar itself: its name, and the zone its floating times are in."""
    if prop == "X-WR-CALNAME":
        feed.name = value[:255] or None
    elif prop == "X-WR-TIMEZONE":
        zone = zone_by_name(value)
        feed.zone = zone.key if zone is not None else None


def _keep_component(feed: _FeedText, block: list[str]) -> None:
    """A component of the calendar (its lines, nested ones included) kept by what it is."""
    kind = block[0].partition(":")[2].strip().upper()
    own = _own_properties(block)
    if kind == "VTIMEZONE" and own.get("TZID"):
        feed.zones[own["TZID"]] = block
    elif kind == "VEVENT":
        uid = own.get("UID") or f"no-uid-{sum(map(len, feed.events.values()))}"
        feed.events.setdefault(uid, []).append(block)


def _own_properties(block: list[str]) -> dict[str, str]:
    """The component's own properties' values by name (not those of components within)."""
    found: dict[str, str] = {}
    depth = 0
    for line in block:
        name, _, value = line.partition(":")
        prop = name.split(";", 1)[0].strip().upper()
        if prop == "BEGIN":
            depth += 1
        elif prop == "END":
            depth -= 1
        elif depth == 1:
            found.setdefault(prop, value.strip())
    return found


def _events_by_uid(feed: _FeedText) -> dict[str, str]:
    """Each UID's events as a calendar of their own, with the time zones they name and the
    feed's ``X-WR-TIMEZONE``: Google's feeds name their zone there, and mean their floating
    times (and a series' UTC ones, whose wall time is kept across a DST change) in it, as
    ``recurring-ical-events`` reads them (``busy_time``). Only a zone known by name is carried:
    an unknown one would make every event unreadable."""
    texts = {}
    header = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//feed item//"]
    if feed.zone:
        header.append(f"X-WR-TIMEZONE:{feed.zone}")
    for uid, blocks in feed.events.items():
        named = {
            quoted or bare
            for block in blocks
            for line in block
            for quoted, bare in _TZID_PARAM.findall(line)
        }
        lines = list(header)
        for tzid in sorted(named):
            lines += feed.zones.get(tzid, [])
        for block in blocks:
            lines += block
        lines.append("END:VCALENDAR")
        texts[uid] = "\r\n".join(lines) + "\r\n"
    return texts


@dataclass(frozen=True)
class _Answer:
    body: bytes | None  # None: not modified
    etag: str | None
    last_modified: str | None


def _fetch(access: FeedAccess, conditions: dict[str, str]) -> _Answer:
    """GET the feed, following at most ``MAX_REDIRECTS`` redirects, each checked; the whole
    exchange (headers included, redirects too) within ``access.deadline_seconds``."""
    url = feed_url(access.url)
    with ExchangeDeadline(access.deadline_seconds) as deadline:
        for _ in range(MAX_REDIRECTS + 1):
            target = _target(url, access)
            status, headers, body = _get(target, conditions, access, deadline)
            if status in (301, 302, 303, 307, 308) and headers.get("location"):
                url = urljoin(url, headers["location"])
                continue
            return _answer(status, headers, body, access)
    raise ServerError(f"{_server(access.url)} redirected more than {MAX_REDIRECTS} times")


def _target(url: str, access: FeedAccess) -> Target:
    try:
        return resolve_target(
            url,
            require_https=False,
            allow_private=access.allow_private,
            setting=CALDAV_ALLOW_PRIVATE,
        )
    except UnsafeUrl as err:
        raise CalendarNotFound(f"the feed's address is refused: {err.message}") from None


def _answer(status: int, headers: dict[str, str], body: bytes, access: FeedAccess) -> _Answer:
    server = _server(access.url)
    if status == 304:
        return _answer_of(None, headers)
    if status in (401, 403):
        raise AuthenticationFailed(
            f"{server} refused the feed (HTTP {status}): its secret address may have been"
            " reset; subscribe with the new one"
        )
    if status in (404, 410):
        raise CalendarNotFound(
            f"{server} has no feed at this address (HTTP {status}): it was removed or its"
            " secret address reset; subscribe with the new one"
        )
    if status == 429 or status >= 500:
        raise ServerError(f"{server} answered HTTP {status}")
    if status != 200:
        raise ServerError(f"{server} answered HTTP {status}, not the feed")
    kind = headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "text/html" or body.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")):
        raise MalformedCalendarData(
            f"{server} answered with a web page, not a calendar (a sign-in or error page?):"
            " check the feed's address"
        )
    if b"BEGIN:VCALENDAR" not in body[:4096].upper():
        raise MalformedCalendarData(f"{server} sent something that is not an iCalendar file")
    return _answer_of(body, headers)


def _answer_of(body: bytes | None, headers: dict[str, str]) -> _Answer:
    return _Answer(body, headers.get("etag"), headers.get("last-modified"))


def _get(
    target: Target, conditions: dict[str, str], access: FeedAccess, deadline: ExchangeDeadline
) -> tuple[int, dict[str, str], bytes]:
    """One GET to the checked address: (status, headers with lower-case names, body)."""
    server = _server(target.url)
    pool = pinned_pool(target, access.timeout, deadline)
    headers = {
        "Host": host_header(target),
        "Accept": "text/calendar, */*;q=0.5",
        "User-Agent": _USER_AGENT,
        **conditions,
    }
    try:
        with pool:
            response = pool.urlopen(
                "GET",
                target.path,
                headers=headers,
                redirect=False,
                assert_same_host=False,
                preload_content=False,
            )
            try:
                body = _bounded_body(response, server)
            finally:
                response.release_conn()
                response.close()
    except (HTTPError, OSError) as err:
        if deadline.expired:
            raise _too_slow(server, access) from None
        if isinstance(err, TimeoutError):
            raise ServerTimeout(f"{server} did not answer within {access.timeout:g} s") from None
        raise ServerUnreachable(
            f"cannot fetch the feed from {server}: {type(err).__name__}"
        ) from None
    if deadline.expired:  # ended by the deadline where a short answer looks complete
        raise _too_slow(server, access)
    return response.status, {k.lower(): v for k, v in response.headers.items()}, body


def _too_slow(server: str, access: FeedAccess) -> ServerTimeout:
    return ServerTimeout(
        f"{server} did not send the feed within {access.deadline_seconds:g} s: it sends too slowly"
    )


def _bounded_body(response: Any, server: str) -> bytes:
    """The answer's body, refused past ``MAX_FEED_BYTES`` (the exchange's deadline ends a body
    sent too slowly, as it does headers)."""
    chunks, size = [], 0
    while chunk := response.read1(_CHUNK):
        size += len(chunk)
        if size > MAX_FEED_BYTES:
            raise MalformedCalendarData(
                f"{server}'s feed is larger than {MAX_FEED_BYTES // (1024 * 1024)} MB"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _server(url: str) -> str:
    parts = urlsplit(feed_url(url))
    return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
