"""Test data builders: provisioned tenants (through the real provisioning service) and
bookings inserted as rows (the booking write API is tested on its own)."""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from flask import Flask
from sqlalchemy import select

from app.config import settings_of
from app.extensions import db
from app.models import (
    Attendee,
    BlockedTime,
    Booking,
    CalendarConnection,
    CalendarSettings,
    EventType,
    Host,
    OutboxEvent,
    Permission,
    SubAccount,
)
from app.models.types import utcnow
from app.services.accounts.provisioning import provision

ALL_PERMISSIONS = [p.value for p in Permission]
_counter = itertools.count(1)


def tenant_document(**sub_account_overrides: Any) -> dict[str, Any]:
    """A provisioning document: one agency, one sub account, and API keys named after what
    they can do: ``all``, ``none``, ``without-<permission>``, ``expired``, ``inactive``, and
    the agency-level ``agency-level``."""
    n = next(_counter)
    keys = [
        {"name": "all", "permissions": ALL_PERMISSIONS},
        {"name": "none", "permissions": []},
        {"name": "expired", "permissions": ALL_PERMISSIONS, "expiresAt": "2020-01-01T00:00:00Z"},
        {"name": "inactive", "permissions": ALL_PERMISSIONS, "active": False},
        *(
            {"name": f"without-{p}", "permissions": [q for q in ALL_PERMISSIONS if q != p]}
            for p in ALL_PERMISSIONS
        ),
    ]
    sub_account = {
        "name": f"Clinic {n}",
        "timezone": "America/New_York",
        "settings": {"defaultDuration": 30, "minimumNoticeMinutes": 0, "bookingHorizonDays": 60},
        "availabilityProfiles": [
            {
                "name": "Office",
                "default": True,
                "weeklyHours": {
                    d: [["09:00", "17:00"]] for d in ("mon", "tue", "wed", "thu", "fri")
                },
            }
        ],
        "eventTypes": [
            {
                "name": "Cleaning",
                "duration": 30,
                "bufferAfter": 10,
                "availabilityProfile": "Office",
            },
            {"name": "Checkup", "duration": 60},
        ],
        "apiKeys": keys,
        **sub_account_overrides,
    }
    return {
        "agencies": [
            {
                "name": f"Agency {n}",
                "owner": {
                    "email": f"owner{n}-{secrets.token_hex(3)}@example.test",
                    "password": "s3cret-pass",
                },
                "apiKeys": [{"name": "agency-level", "permissions": ALL_PERMISSIONS}],
                "subAccounts": [sub_account],
            }
        ]
    }


@dataclass
class Tenant:
    agency_id: int
    sub_account_id: int
    event_types: dict[str, int]
    keys: dict[str, str]
    raw: dict[str, Any] = field(repr=False)

    def headers(self, key: str = "all") -> dict[str, str]:
        return {"x-calendar-api-key": self.keys[key]}

    @property
    def connections(self) -> dict[str, int]:
        """The sub account's calendar connections' ids by name, as provisioned."""
        return self.raw["agencies"][0]["subAccounts"][0].get("calendarConnections", {})

    @property
    def hosts(self) -> dict[str, int]:
        """The sub account's hosts' ids by name, as provisioned."""
        return self.raw["agencies"][0]["subAccounts"][0]["hosts"]


class TenantFactory:
    def create(self, **sub_account_overrides: Any) -> Tenant:
        created = provision(tenant_document(**sub_account_overrides))
        db.session.commit()
        agency = created["agencies"][0]
        sub = agency["subAccounts"][0]
        return Tenant(
            agency_id=agency["id"],
            sub_account_id=sub["id"],
            event_types=sub["eventTypes"],
            keys={**sub["apiKeys"], **agency["apiKeys"]},
            raw=created,
        )


def make_sub_account(tenant: Tenant, name: str = "Second clinic", timezone: str | None = None):
    """Another sub account of ``tenant``'s agency, inserted as a row (no event types, no keys;
    with calendar settings in ``timezone`` when one is given)."""
    settings = {"settings": CalendarSettings(timezone=timezone)} if timezone else {}
    sub_account = SubAccount(agency_id=tenant.agency_id, name=name, **settings)
    db.session.add(sub_account)
    db.session.flush()
    db.session.add(Host(sub_account_id=sub_account.id, name=name))  # its one host
    db.session.commit()
    return sub_account


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def make_booking(
    tenant: Tenant,
    start: datetime,
    *,
    minutes: int = 30,
    event_type: str = "Cleaning",
    status: str = "pending",
    emails: tuple[str, ...] = ("pat@example.test",),
    **fields: Any,
) -> Booking:
    """Insert a booking row as the write path would leave it (occupied interval included)."""
    et = db.session.get(EventType, tenant.event_types[event_type])
    end = start + timedelta(minutes=minutes)
    booking = Booking(
        uid=secrets.token_urlsafe(16),
        sub_account_id=tenant.sub_account_id,
        event_type_id=et.id,
        status=status,
        title=fields.pop("title", f"{et.name} with {emails[0]}"),
        timezone=fields.pop("timezone", "America/New_York"),
        meta=fields.pop("meta", {}),
        start_at=start,
        end_at=end,
        occupied_start=start - timedelta(minutes=et.buffer_before),
        occupied_end=end + timedelta(minutes=et.buffer_after),
        **fields,
    )
    for email in emails:
        booking.attendees.append(
            # Lower-cased, as the write path stores every email.
            Attendee(email=email.lower(), name=email.split("@")[0], timezone=booking.timezone)
        )
    db.session.add(booking)
    db.session.commit()
    return booking


def make_outbox_event(
    booking: Booking,
    occurred_at: datetime,
    kind: str = "booking.created",
    changed: tuple[str, ...] = (),
    **fields: Any,
) -> OutboxEvent:
    """Insert a domain event of ``booking`` as the outbox keeps it, which no handler has had
    yet (``fields`` adds e.g. a ``snapshot``)."""
    row = OutboxEvent(
        kind=kind,
        sub_account_id=booking.sub_account_id,
        booking_id=booking.id,
        changed=list(changed),
        occurred_at=occurred_at,
        **fields,
    )
    db.session.add(row)
    db.session.commit()
    return row


def book_through_api(client, tenant: Tenant, start: datetime, *, key: str = "all", **fields: Any):
    """``POST`` a 30-minute Cleaning booking at ``start`` with one attendee (``fields`` added
    to the body) with the tenant's API key ``key``; returns the response."""
    payload = {
        "startTime": z(start),
        "endTime": z(start + timedelta(minutes=30)),
        "attendees": [{"email": "pat@example.test"}],
        **fields,
    }
    url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings"
    return client.post(url, json=payload, headers=tenant.headers(key))


def availability_through_api(
    client, tenant: Tenant, first: date, last: date | None = None, *, key: str = "all"
):
    """``GET`` the Cleaning availability from the day ``first`` to ``last`` (``first`` alone:
    that day) with the tenant's API key ``key``; returns the response."""
    query = {
        "startDate": first.isoformat(),
        "endDate": (last or first).isoformat(),
        "eventTypeId": tenant.event_types["Cleaning"],
    }
    return client.get(
        "/v1/api/calendar/availability", query_string=query, headers=tenant.headers(key)
    )


NEW_YORK = ZoneInfo("America/New_York")
# Weekly hours open around the clock, every day (for ``availabilityProfiles``).
ALWAYS_OPEN = {
    day: [["00:00", "24:00"]] for day in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
}


def next_monday(weeks_ahead: int = 1) -> date:
    """A Monday at least a week away: inside the default 60-day horizon, past any notice."""
    today = datetime.now(NEW_YORK).date()
    return today + timedelta(days=(7 - today.weekday()) % 7 + 7 * weeks_ahead)


def ny(day: date, hour: int, minute: int = 0) -> datetime:
    """New York wall time on ``day`` as a UTC instant."""
    return datetime.combine(day, time(hour, minute), tzinfo=NEW_YORK).astimezone(UTC)


def z(instant: datetime) -> str:
    """The API's form of an instant."""
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_blocked_time(
    tenant: Tenant, start: datetime, end: datetime, source: str = "manual", **fields: Any
):
    """Insert blocked time (``source`` "manual", or "external" as a calendar sync leaves it,
    with ``calendar_connection_id`` and ``external_uid`` among ``fields``)."""
    blocked = BlockedTime(
        sub_account_id=tenant.sub_account_id, start_at=start, end_at=end, source=source, **fields
    )
    db.session.add(blocked)
    db.session.commit()
    return blocked


def hold_through_api(client, tenant: Tenant, start: datetime, *, minutes: int = 30, **fields):
    """``POST`` a hold of a Cleaning slot at ``start`` (``fields`` added to the body, ``key``
    choosing the API key); returns the response."""
    key = fields.pop("key", "all")
    payload = {"startTime": z(start), "endTime": z(start + timedelta(minutes=minutes)), **fields}
    url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/holds"
    return client.post(url, json=payload, headers=tenant.headers(key))


def external_busy_rows(connection_id: int) -> list[Any]:
    """The connection's external busy time as rows of (id, external_uid, start_at, end_at), in
    time order: what a sync stored."""
    return db.session.execute(
        select(BlockedTime.id, BlockedTime.external_uid, BlockedTime.start_at, BlockedTime.end_at)
        .where(BlockedTime.calendar_connection_id == connection_id)
        .order_by(BlockedTime.start_at, BlockedTime.id)
    ).all()


def busy_uids(app: Flask, connection_id: int) -> set[str | None]:
    """The UIDs of the events the connection's stored busy time came from, read in an app
    context of its own (for a test whose worker runs in another process)."""
    with app.app_context():
        uids = set(
            db.session.scalars(
                select(BlockedTime.external_uid).where(
                    BlockedTime.calendar_connection_id == connection_id
                )
            )
        )
        db.session.remove()
        return uids


def run_queued_sync(connection_id: int):
    """What the worker's ``calendars.sync`` does with a connection's queued sync, here: take
    it, sync and follow up, give it back. Returns the sync's result."""
    from app.jobs.calendars import sync_and_follow_up
    from app.services.integrations.calendars.freshness import begin_sync, end_sync

    assert begin_sync(connection_id, utcnow()) == "begun"
    db.session.commit()
    result = sync_and_follow_up(connection_id, now=utcnow(), page=lambda *_: "http://dashboard/")
    end_sync(connection_id)
    db.session.commit()
    return result


def first_read_over(connection_id: int) -> bool:
    """Whether the worker has read the connection since it was made, and followed up (the
    bookings made before it written into it): nothing of its first sync is still to come."""
    connection = db.session.get(CalendarConnection, connection_id, populate_existing=True)
    db.session.rollback()
    return bool(
        connection.last_success_at
        and connection.sync_running_until is None
        and connection.sync_requested_at is None
        and not connection.write_existing_pending
    )


def provider_connection(fake: Any, name: str, **fields: Any) -> dict[str, Any]:
    """A Google or Microsoft connection of a provisioning document (``calendarConnections``)
    to the fake's account ``ACCOUNT_EMAIL``, named ``name`` (``fields`` added)."""
    from tests.google_servers import FakeGoogle
    from tests.oauth_fakes import ACCOUNT_EMAIL

    return {
        "name": name,
        "kind": "google" if isinstance(fake, FakeGoogle) else "microsoft",
        "refreshToken": fake.issue_refresh_token(ACCOUNT_EMAIL),
        **fields,
    }


def connection_now(app: Any, connection_id: int) -> CalendarConnection:
    """The connection as stored now (read afresh in ``app``'s context, detached): what a
    deployment's worker has written so far."""
    with app.app_context():
        found = db.session.scalar(
            select(CalendarConnection)
            .where(CalendarConnection.id == connection_id)
            .execution_options(populate_existing=True)
        )
        db.session.remove()
        return found


@contextmanager
def changed_settings(app: Flask, **changes: Any) -> Iterator[None]:
    """The app's settings with ``changes`` (the fields' names) while the block runs."""
    before = settings_of(app)
    app.extensions["settings"] = before.model_copy(update=changes)
    try:
        yield
    finally:
        app.extensions["settings"] = before
