"""Output fields of the API."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from marshmallow import fields

from app.scheduling.timezones import format_utc


class UTCTimestamp(fields.DateTime):
    """An instant as UTC ISO 8601 with second precision and a trailing ``Z``."""

    def _serialize(self, value: datetime | None, attr: Any, obj: Any, **kwargs: Any) -> str | None:
        return None if value is None else format_utc(value)
