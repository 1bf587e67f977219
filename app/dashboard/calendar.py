"""The calendar: week, month and list views (FullCalendar, vendored) of bookings coloured by
status, and on phones a day or three-day time grid. Blocked and external busy time lie behind
the bookings in the time grids and are entries of their own in the month and list views; a
booking opens its page, and each entry carries its full text for hover and focus.

FullCalendar has no timezone database of its own. So it runs in "UTC", and the entries feed
sends wall-clock times of the sub account's timezone (no offset), and reads the window it asks
for the same way: every time on screen is the sub account's, whatever the browser's zone.
"""

from __future__ import annotations

from datetime import date, datetime, time
from typing import Any

from flask import jsonify, render_template, request, url_for
from flask_login import current_user
from werkzeug.wrappers import Response

from app.dashboard.views import dashboard
from app.models import Host, SubAccount
from app.models.types import utcnow
from app.scheduling.timezones import local_to_utc, zone
from app.services.accounts.users import open_sub_account
from app.services.availability.hosts import get_host, hosts_of
from app.services.bookings.calendar_view import calendar_entries
from app.services.common.errors import HostNotFound, InvalidRequest


def _wall_clock(instant: datetime, tz_name: str) -> str:
    return instant.astimezone(zone(tz_name)).replace(tzinfo=None).isoformat(timespec="minutes")


def _span(start: datetime, end: datetime, tz_name: str) -> str:
    """``10:00–10:30`` in the sub account's time; an entry over midnight names its days."""
    first, last = (i.astimezone(zone(tz_name)) for i in (start, end))
    if first.date() == last.date():
        return f"{first:%H:%M}–{last:%H:%M}"
    return f"{first:%a} {first:%H:%M} – {last:%a} {last:%H:%M}"


def _window_day(name: str) -> date:
    """The date of FullCalendar's ``start``/``end`` parameter (always a midnight)."""
    text = request.args.get(name, "")
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        raise InvalidRequest(f"{name}: expected a date like 2026-12-07") from None


def _asked_host(sub_account: SubAccount) -> Host | None:
    """The host whose calendar is asked for (``?host=``), if one of the sub account's."""
    try:
        return get_host(sub_account, int(request.args.get("host", "")))
    except (ValueError, HostNotFound):
        return None


@dashboard.route("/s/<int:sub_account_id>/calendar")
def calendar(sub_account_id: int) -> str:
    sub_account = open_sub_account(current_user, sub_account_id)
    host = _asked_host(sub_account)
    return render_template(
        "dashboard/calendar.html",
        sub_account=sub_account,
        now=_wall_clock(utcnow(), sub_account.settings.timezone),
        hosts=hosts_of(sub_account.id),
        host=host,
    )


@dashboard.route("/s/<int:sub_account_id>/calendar/entries")
def calendar_feed(sub_account_id: int) -> Response | tuple[Response, int]:
    """FullCalendar's JSON event feed for the window it shows."""
    sub_account = open_sub_account(current_user, sub_account_id)
    tz_name = sub_account.settings.timezone
    try:
        start = local_to_utc(_window_day("start"), time(0), zone(tz_name))
        end = local_to_utc(_window_day("end"), time(0), zone(tz_name))
        host = _asked_host(sub_account)
        bookings, blocked = calendar_entries(
            sub_account, start, end, host.id if host is not None else None
        )
    except InvalidRequest as err:
        return jsonify({"message": err.message}), 400
    events: list[dict[str, Any]] = []
    several = len(hosts_of(sub_account.id)) > 1
    for b in bookings:
        # With whom, unless the title names them already ("Cleaning with Carol").
        named = b.attendee and b.attendee.casefold() in b.title.casefold()
        title = f"{b.title} · {b.attendee}" if b.attendee and not named else b.title
        if b.seats:
            title = f"{title} · {b.seats}"
        status = b.status.replace("_", " ").capitalize()
        when = _span(b.start, b.end, tz_name)
        # Whose it is, when the calendar shows several hosts' bookings.
        with_hosts = f", with {b.hosts}" if host is None and several and b.hosts else ""
        events.append(
            {
                "id": f"booking-{b.booking_id}",
                "title": title,
                "start": _wall_clock(b.start, tz_name),
                "end": _wall_clock(b.end, tz_name),
                "url": url_for(
                    "dashboard.booking", sub_account_id=sub_account.id, booking_id=b.booking_id
                ),
                "classNames": [f"status-{b.status}"],
                "extendedProps": {
                    "kind": "booking",
                    "status": status,
                    "when": when,
                    "detail": f"{title}, {when}, {status}{with_hosts}",
                },
            }
        )
    for entry in blocked:
        when = _span(entry.start, entry.end, tz_name)
        events.append(
            {
                "title": entry.label,
                "start": _wall_clock(entry.start, tz_name),
                "end": _wall_clock(entry.end, tz_name),
                # Behind the bookings in the time grids; calendar.js shows it as an entry of
                # its own in the month and list views, which draw no background.
                "display": "background",
                "classNames": ["busy-external" if entry.external else "busy-blocked"],
                "extendedProps": {
                    "kind": "busy" if entry.external else "blocked",
                    "when": when,
                    "detail": f"{entry.label}, {when}",
                },
            }
        )
    return jsonify(events)
