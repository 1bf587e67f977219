"""Instants in and out of the API, and IANA timezone names.

Every instant inside the service is a timezone-aware UTC ``datetime``. Input may carry ``Z`` or
an offset; a naive date-time is wall-clock time in the request's timezone; a date alone means
the start of that day (or, for the end of a window, the end of it: the next day's midnight).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from importlib import resources
from typing import Literal
from zoneinfo import ZoneInfo

# Instants far outside any calendar's use are refused up front, so no timezone arithmetic on
# them can overflow ``datetime``'s range.
MIN_YEAR, MAX_YEAR = 1900, 2199
# The longest instant text read (the forms' longest is about 40 characters).
INSTANT_MAX_LENGTH = 64


class InvalidTimezone(ValueError):
    pass


class InvalidInstant(ValueError):
    pass


class NonexistentLocalTime(InvalidInstant):
    """A naive date-time that a daylight-saving change skips in the timezone it is read in."""


# In tzdata's list but not a place: a zone with no offset of its own, for unconfigured systems.
NOT_A_PLACE = frozenset({"Factory"})


@lru_cache(maxsize=1)
def _iana_names() -> frozenset[str]:
    """The zone names of the IANA database as the ``tzdata`` package ships them, not whatever
    the system's zoneinfo folder holds (``localtime``, ``posixrules`` and the like are files
    there, not zones)."""
    names = resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8").split()
    return frozenset(names) - NOT_A_PLACE


def is_timezone(name: str) -> bool:
    return name in _iana_names()


def timezone_names() -> list[str]:
    """Every IANA zone name, sorted: the choices a person picks a timezone from."""
    return sorted(_iana_names())


@lru_cache(maxsize=512)
def zone(name: str) -> ZoneInfo:
    """The zone for an IANA name; anything else (paths, abbreviations, blanks) is refused."""
    if not isinstance(name, str) or not is_timezone(name):
        raise InvalidTimezone(f"Unknown timezone '{name}'")
    return ZoneInfo(name)


def local_to_utc(day: date, at: time, tz: ZoneInfo) -> datetime:
    """Wall-clock time on ``day`` in ``tz`` as a UTC instant.

    A wall time that does not exist (skipped by a spring-forward change) or exists twice (a
    fall-back change) resolves with ``fold=0``: the offset in force before the change. So a
    non-existent 02:30 becomes 03:30 after a one-hour jump, and a doubled 01:30 is the first one.
    """
    return datetime.combine(day, at, tzinfo=tz).astimezone(UTC)


@dataclass(frozen=True)
class InstantInput:
    """An ISO 8601 value as the client wrote it, before a timezone gives it meaning.

    ``value`` is an aware or naive ``datetime``, or a ``date`` for a date alone. Parsing
    happens before authentication decides which calendar (and so which timezone) applies.
    """

    value: datetime | date

    @property
    def is_date(self) -> bool:
        return not isinstance(self.value, datetime)

    def resolve(self, tz: ZoneInfo, *, date_means: Literal["start", "end"] = "start") -> datetime:
        """The UTC instant this input names, reading naive values in ``tz``.

        Fractions of a second are dropped: every response shows whole seconds, so a booking
        stored as ending at 16:00:00.5 would look free at 16:00:00 and still conflict.

        A naive date-time that does not exist in ``tz`` (skipped by a spring-forward change)
        is refused rather than moved: the client meant a time that never happens. A doubled
        one (fall-back) is the first. A date alone is that day's first instant, even when a
        change skips its midnight.
        """
        if not isinstance(self.value, datetime):
            day = self.value + timedelta(days=1) if date_means == "end" else self.value
            return local_to_utc(day, time(0), tz)
        value = self.value.replace(microsecond=0)
        if value.tzinfo is not None:
            return value.astimezone(UTC)
        instant = value.replace(tzinfo=tz).astimezone(UTC)
        if instant.astimezone(tz).replace(tzinfo=None) != value:
            raise NonexistentLocalTime(
                f"{value.isoformat()} does not exist in {tz.key}"
                " (a daylight-saving change skips it)"
            )
        return instant


def read_instant(text: object) -> InstantInput:
    """Syntax check of an ISO 8601 date or date-time (``Z``, offset or naive)."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInstant("expected an ISO 8601 date or date-time")
    if len(text) > INSTANT_MAX_LENGTH:
        raise InvalidInstant(f"at most {INSTANT_MAX_LENGTH} characters")
    text = text.strip()
    try:
        if "T" not in text and " " not in text:
            value: date = date.fromisoformat(text)
        else:
            value = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInstant(f"'{text[:40]}' is not an ISO 8601 date or date-time") from None
    if not MIN_YEAR <= value.year <= MAX_YEAR:
        raise InvalidInstant(f"years from {MIN_YEAR} to {MAX_YEAR} only")
    return InstantInput(value)


def format_utc(instant: datetime) -> str:
    """UTC, second precision, trailing ``Z``: the one form every response uses. (Sliced from
    ``isoformat``, which is twice as fast as ``strftime``: an availability answer formats
    hundreds of these.)"""
    if instant.tzinfo is not UTC:
        instant = instant.astimezone(UTC)
    return instant.isoformat(timespec="seconds")[:19] + "Z"


def format_utc_seconds(seconds: int) -> str:
    """``format_utc`` of a POSIX instant in whole seconds, by arithmetic on the day's prefix:
    a 31-day availability answer writes about a thousand of these, which this does in a
    half the time of going through ``datetime``."""
    day, second = divmod(seconds, _SECONDS_A_DAY)
    prefix = _UTC_DAY_PREFIXES.get(day)
    if prefix is None:
        if len(_UTC_DAY_PREFIXES) >= _DAY_PREFIXES_KEPT:
            _UTC_DAY_PREFIXES.clear()
        prefix = _UTC_DAY_PREFIXES[day] = date.fromordinal(_EPOCH_ORDINAL + day).isoformat() + "T"
    return f"{prefix}{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z"


_SECONDS_A_DAY = 86_400
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_DAY_PREFIXES_KEPT = 20_000
_UTC_DAY_PREFIXES: dict[int, str] = {}
