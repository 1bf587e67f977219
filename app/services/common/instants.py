"""Turning the client's instants into UTC once the timezone that gives them meaning is known."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo

from app.scheduling.timezones import InstantInput, InvalidInstant
from app.services.common.errors import InvalidRequest


def resolve_instant(
    field: str,
    value: InstantInput,
    tz: ZoneInfo,
    *,
    date_means: Literal["start", "end"] = "start",
) -> datetime:
    """``value`` as a UTC instant; a local time that does not exist in ``tz`` is a 400 that
    names ``field``, like any other invalid field."""
    try:
        return value.resolve(tz, date_means=date_means)
    except InvalidInstant as err:
        raise InvalidRequest(f"{field}: {err}", errors={field: [str(err)]}) from None
