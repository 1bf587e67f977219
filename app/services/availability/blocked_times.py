"""Blocked time people enter by hand: listed, added in the sub account's timezone, removed.

Busy time synced from a connected calendar (``external``) is listed too, but only a sync
changes it: removing it here would last until the next sync put it back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from marshmallow import Schema, ValidationError, validate, validates_schema
from sqlalchemy import select

from app.extensions import db
from app.models import BlockedTime, BlockedTimeSource, SubAccount
from app.models.limits import REASON_MAX
from app.scheduling.timezones import InvalidInstant, format_utc, read_instant, zone
from app.services.common.errors import InvalidRequest, NotFound
from app.services.common.instants import resolve_instant
from app.services.common.lookups import find_owned, load_document
from app.validation import Text, UTCInstantField, describe_errors


class BlockedTimeDoc(Schema):
    start = UTCInstantField(required=True)
    end = UTCInstantField(required=True)
    reason = Text(load_default=None, allow_none=True, validate=validate.Length(max=REASON_MAX))

    @validates_schema
    def end_after_start(self, data: dict, **kwargs: Any) -> None:
        if data["end"] <= data["start"]:
            raise ValidationError("Must be after start.", "end")


class BlockedTimeNotFound(NotFound):
    message = "Blocked time not found"


def upcoming_blocked_times(
    sub_account: SubAccount, now: datetime, limit: int = 100
) -> list[BlockedTime]:
    """Blocked time, manual and synced, that has not ended by ``now``; soonest first."""
    return list(
        db.session.scalars(
            select(BlockedTime)
            .where(BlockedTime.sub_account_id == sub_account.id, BlockedTime.end_at > now)
            .order_by(BlockedTime.start_at, BlockedTime.id)
            .limit(limit)
        )
    )


def add_blocked_time(sub_account: SubAccount, document: dict[str, Any]) -> BlockedTime:
    """Manual blocked time from ``{"start", "end", "reason"}``, where ``start`` and ``end`` are
    ISO 8601 date-times; without an offset they are wall-clock times in the sub account's
    timezone, and one a daylight-saving change skips is refused, not moved. The rest of the
    rules (end after start, reason length) are provisioning's ``BlockedTimeDoc``."""
    tz = zone(sub_account.settings.timezone)
    instants: dict[str, str] = {}
    errors: dict[str, list[str]] = {}
    for name in ("start", "end"):
        try:
            instants[name] = format_utc(resolve_instant(name, read_instant(document.get(name)), tz))
        except InvalidInstant as err:
            errors[name] = [f"{str(err)[:1].upper()}{str(err)[1:]}."]
        except InvalidRequest as err:
            errors.update(err.errors or {})
    if errors:
        raise InvalidRequest(describe_errors(errors), errors=errors)
    doc = load_document(BlockedTimeDoc(), {**instants, "reason": document.get("reason")})
    blocked = BlockedTime(
        sub_account_id=sub_account.id,
        start_at=doc["start"],
        end_at=doc["end"],
        reason=doc["reason"],
        source=BlockedTimeSource.MANUAL,
    )
    db.session.add(blocked)
    db.session.flush()
    return blocked


def get_blocked_time(sub_account: SubAccount, blocked_time_id: int) -> BlockedTime:
    return find_owned(BlockedTime, sub_account, blocked_time_id, BlockedTimeNotFound)


def remove_blocked_time(sub_account: SubAccount, blocked_time_id: int) -> None:
    """Remove manual blocked time; synced busy time is refused (remove it in its calendar)."""
    blocked = get_blocked_time(sub_account, blocked_time_id)
    if blocked.source != BlockedTimeSource.MANUAL:
        raise InvalidRequest(
            "This busy time comes from a connected calendar; change it in that calendar."
        )
    db.session.delete(blocked)
    db.session.flush()
