"""Availability profiles as people edit them in the dashboard: a profile's name and timezone,
its weekly hours one range at a time, its date overrides (a date closed, or open for its own
ranges), which profile is the default, and deleting one no event type uses.

The rules live here and provisioning reads its profiles with them: ``ProfileDoc`` for a
profile, ``WEEKDAYS`` and ``HoursRange`` for an open range, ``DateOverrideDoc`` for a date,
``build_profile`` for the rows. A sub account with profiles has exactly one default: the first
profile becomes it, and deleting an unused default hands it on.
"""

from __future__ import annotations

import re
from typing import Any

from marshmallow import Schema, ValidationError, fields, post_load, validate
from sqlalchemy import delete, func, select

from app.extensions import db
from app.models import AvailabilityProfile, DateOverride, EventType, SubAccount, WeeklyHours
from app.models.limits import NAME_MAX
from app.services.common.errors import InvalidRequest, NotFound
from app.services.common.ids import is_storable_id
from app.services.common.lookups import find_owned, load_document, load_named, refuse_taken_name
from app.validation import Text, TimezoneField

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_CLOCK = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$|^24:00$")


class HoursRange(fields.Field):
    """``["09:00", "17:00"]`` → ``(540, 1020)``, minutes after local midnight."""

    default_error_messages = {
        "invalid": 'Expected ["HH:MM", "HH:MM"] with the start before the end.',
    }

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> tuple:
        if not isinstance(value, list | tuple) or len(value) != 2:
            raise self.make_error("invalid")
        start, end = (clock_minutes(clock) for clock in value)
        if start is None or end is None or start >= end:
            raise self.make_error("invalid")
        return (start, end)


def clock_minutes(clock: Any) -> int | None:
    """``"09:30"`` → 570, minutes after local midnight (``"24:00"``, the day's end, is 1440);
    None for anything that is not such a clock. Shared with the dashboard's hours forms, which
    check each end of a range on its own so a message can stand next to the wrong one."""
    if not isinstance(clock, str) or not _CLOCK.match(clock):
        return None
    hours, mins = clock.split(":")
    return int(hours) * 60 + int(mins)


class DateOverrideDoc(Schema):
    date = fields.Date(required=True)
    hours = fields.List(HoursRange(), required=True)


class ProfileDoc(Schema):
    name = Text(required=True, validate=validate.Length(min=1, max=NAME_MAX))
    timezone = TimezoneField(load_default=None)
    default = fields.Boolean(load_default=False)
    weeklyHours = fields.Dict(
        keys=fields.String(validate=validate.OneOf(WEEKDAYS)),
        values=fields.List(HoursRange()),
        load_default=dict,
    )
    dateOverrides = fields.List(fields.Nested(DateOverrideDoc), load_default=list)


def build_profile(sub_account: SubAccount, doc: dict, is_default: bool) -> AvailabilityProfile:
    profile = AvailabilityProfile(
        sub_account_id=sub_account.id,
        name=doc["name"],
        timezone=doc["timezone"] or sub_account.settings.timezone,
        is_default=is_default,
    )
    for day, ranges in doc["weeklyHours"].items():
        for start, end in ranges:
            profile.weekly_hours.append(
                WeeklyHours(weekday=WEEKDAYS.index(day), start_minute=start, end_minute=end)
            )
    for override in doc["dateOverrides"]:
        rows = [
            DateOverride(date=override["date"], start_minute=start, end_minute=end)
            for start, end in override["hours"]
        ] or [DateOverride(date=override["date"])]
        profile.date_overrides.extend(rows)
    db.session.add(profile)
    return profile


class ProfileNotFound(NotFound):
    message = "Availability profile not found"


class HoursNotFound(NotFound):
    message = "Opening hours not found"


class DateOverrideNotFound(NotFound):
    message = "Date override not found"


class Clock(fields.String):
    """One end of an open range, ``HH:MM`` as provisioning reads it (``clock_minutes``)."""

    default_error_messages = {"clock": "Use HH:MM, from 00:00 to 24:00."}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        if clock_minutes(text) is None:
            raise self.make_error("clock")
        return text


class OpenRangeDoc(Schema):
    """``{"start": "09:00", "end": "12:00"}``: each end checked on its own, then the pair as
    provisioning's ``HoursRange``, so both agree on what a range is. Loads to ``hours``:
    minutes after local midnight."""

    start = Clock(required=True)
    end = Clock(required=True)

    @post_load
    def to_minutes(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        try:
            hours = HoursRange().deserialize([data.pop("start"), data.pop("end")])
        except ValidationError:
            raise ValidationError("Must be after the start.", "end") from None
        return {**data, "hours": hours}


class WeeklyRangeDoc(OpenRangeDoc):
    """One more open range on a weekday (``"mon"`` … ``"sun"``)."""

    weekday = fields.String(required=True, validate=validate.OneOf(WEEKDAYS))


class ClosedDateDoc(DateOverrideDoc):
    """``{"date": "2026-12-24"}``: the date closed all day."""

    class Meta:
        exclude = ("hours",)


class OpenDateDoc(ClosedDateDoc, OpenRangeDoc):
    """``{"date", "start", "end"}``: one more of the date's own open ranges."""


def list_profiles(sub_account: SubAccount) -> list[AvailabilityProfile]:
    """The default first, then by name."""
    return list(
        db.session.scalars(
            select(AvailabilityProfile)
            .where(AvailabilityProfile.sub_account_id == sub_account.id)
            .order_by(
                AvailabilityProfile.is_default.desc(),
                AvailabilityProfile.name,
                AvailabilityProfile.id,
            )
        )
    )


def get_profile(sub_account: SubAccount, profile_id: int) -> AvailabilityProfile:
    return find_owned(AvailabilityProfile, sub_account, profile_id, ProfileNotFound)


def chosen_profile(sub_account: SubAccount, profile_id: int | None) -> AvailabilityProfile | None:
    """The profile a form chose by id (None: the default); one that is not the sub account's
    is refused by field (it was typed into a form, not named by the URL)."""
    if profile_id is None:
        return None
    try:
        return get_profile(sub_account, profile_id)
    except ProfileNotFound:
        message = "Unknown availability profile."
        raise InvalidRequest(
            f"availabilityProfileId: {message}", errors={"availabilityProfileId": [message]}
        ) from None


def profile_users(profile: AvailabilityProfile) -> list[EventType]:
    """The event types, offered or deactivated, that take their hours from ``profile``: those
    that name it, and, for the default profile, those that name none (they use the default)."""
    takes_its_hours = EventType.availability_profile_id == profile.id
    if profile.is_default:
        takes_its_hours |= (EventType.sub_account_id == profile.sub_account_id) & (
            EventType.availability_profile_id.is_(None)
        )
    return list(
        db.session.scalars(
            select(EventType).where(takes_its_hours).order_by(EventType.name, EventType.id)
        )
    )


def hours_taken_from(sub_account: SubAccount) -> dict[int, int]:
    """How many event types take their hours from each profile, by profile id: those that name
    it, and, for the default profile, those that name none (they use the default)."""
    counts: dict[int | None, int] = dict(
        db.session.execute(
            select(EventType.availability_profile_id, func.count())
            .where(EventType.sub_account_id == sub_account.id)
            .group_by(EventType.availability_profile_id)
        ).all()
    )
    default_id = db.session.scalar(
        select(AvailabilityProfile.id).where(
            AvailabilityProfile.sub_account_id == sub_account.id,
            AvailabilityProfile.is_default.is_(True),
        )
    )
    taken = {pid: n for pid, n in counts.items() if pid is not None}
    if default_id is not None:
        taken[default_id] = taken.get(default_id, 0) + counts.get(None, 0)
    return taken


def create_profile(sub_account: SubAccount, document: dict[str, Any]) -> AvailabilityProfile:
    """A profile from a ``ProfileDoc``; the sub account's first becomes the default, and one
    marked ``default`` takes that over."""
    _, doc = load_named(sub_account.id, ProfileDoc(), document, AvailabilityProfile)
    is_first = not list_profiles(sub_account)
    if doc["default"]:
        _clear_default(sub_account)
    profile = build_profile(sub_account, doc, doc["default"] or is_first)
    db.session.flush()
    return profile


def update_profile(
    sub_account: SubAccount, profile_id: int, document: dict[str, Any]
) -> AvailabilityProfile:
    """Rename the profile and set its timezone (empty: the sub account's). Its hours stay the
    same wall-clock times in the new timezone."""
    profile = get_profile(sub_account, profile_id)
    doc = load_document(ProfileDoc(only=("name", "timezone")), document)
    refuse_taken_name(AvailabilityProfile, sub_account, doc["name"], except_id=profile.id)
    profile.name = doc["name"]
    profile.timezone = doc["timezone"] or sub_account.settings.timezone
    db.session.flush()
    return profile


def make_default(sub_account: SubAccount, profile_id: int) -> AvailabilityProfile:
    """The profile event types without one of their own take their hours from."""
    profile = get_profile(sub_account, profile_id)
    _clear_default(sub_account)
    profile.is_default = True
    db.session.flush()
    return profile


def delete_profile(sub_account: SubAccount, profile_id: int) -> None:
    """Delete a profile no event type uses (deleting one in use would silently move those event
    types to another profile's hours, or close them: the default's users are the event types
    without a profile of their own). Deleting an unused default makes the oldest remaining one
    it."""
    profile = get_profile(sub_account, profile_id)
    users = profile_users(profile)
    if users:
        names = ", ".join(event_type.name for event_type in users)
        instead = (
            "make another profile the default or give them a profile of their own"
            if profile.is_default
            else "give them another profile"
        )
        raise InvalidRequest(f"'{profile.name}' is used by {names}: {instead} first.")
    was_default = profile.is_default
    db.session.delete(profile)
    db.session.flush()
    if was_default:
        heir = db.session.scalar(
            select(AvailabilityProfile)
            .where(AvailabilityProfile.sub_account_id == sub_account.id)
            .order_by(AvailabilityProfile.id)
            .limit(1)
        )
        if heir is not None:
            heir.is_default = True
            db.session.flush()


def add_weekly_hours(
    sub_account: SubAccount, profile_id: int, document: dict[str, Any]
) -> WeeklyHours:
    """One more open range on a weekday (``WeeklyRangeDoc``); a day may have several."""
    profile = get_profile(sub_account, profile_id)
    doc = load_document(WeeklyRangeDoc(), document)
    start, end = doc["hours"]
    hours = WeeklyHours(
        profile_id=profile.id,
        weekday=WEEKDAYS.index(doc["weekday"]),
        start_minute=start,
        end_minute=end,
    )
    db.session.add(hours)
    db.session.flush()
    return hours


def get_weekly_hours(sub_account: SubAccount, profile_id: int, hours_id: int) -> WeeklyHours:
    """A range of the profile's weekly hours; another profile's is not found."""
    return _child(WeeklyHours, get_profile(sub_account, profile_id), hours_id, HoursNotFound)


def change_weekly_hours(
    sub_account: SubAccount, profile_id: int, hours_id: int, document: dict[str, Any]
) -> WeeklyHours:
    """The range opens and closes at other times on the same weekday (``OpenRangeDoc``)."""
    hours = get_weekly_hours(sub_account, profile_id, hours_id)
    hours.start_minute, hours.end_minute = load_document(OpenRangeDoc(), document)["hours"]
    db.session.flush()
    return hours


def remove_weekly_hours(sub_account: SubAccount, profile_id: int, hours_id: int) -> None:
    db.session.delete(get_weekly_hours(sub_account, profile_id, hours_id))
    db.session.flush()


def close_date(sub_account: SubAccount, profile_id: int, document: dict[str, Any]) -> DateOverride:
    """The date closed all day (``ClosedDateDoc``), replacing any ranges it had."""
    profile = get_profile(sub_account, profile_id)
    doc = load_document(ClosedDateDoc(), document)
    _clear_date(profile, doc["date"])
    override = DateOverride(profile_id=profile.id, date=doc["date"])
    db.session.add(override)
    db.session.flush()
    return override


def add_date_hours(
    sub_account: SubAccount, profile_id: int, document: dict[str, Any]
) -> DateOverride:
    """One more open range of the date's own (``OpenDateDoc``); a closed date opens for it."""
    profile = get_profile(sub_account, profile_id)
    doc = load_document(OpenDateDoc(), document)
    db.session.execute(
        delete(DateOverride).where(
            DateOverride.profile_id == profile.id,
            DateOverride.date == doc["date"],
            DateOverride.start_minute.is_(None),
        )
    )
    start, end = doc["hours"]
    override = DateOverride(
        profile_id=profile.id, date=doc["date"], start_minute=start, end_minute=end
    )
    db.session.add(override)
    db.session.flush()
    return override


def get_date_override(sub_account: SubAccount, profile_id: int, override_id: int) -> DateOverride:
    """A row of the profile's date overrides; another profile's is not found."""
    profile = get_profile(sub_account, profile_id)
    return _child(DateOverride, profile, override_id, DateOverrideNotFound)


def remove_date_override(sub_account: SubAccount, profile_id: int, override_id: int) -> None:
    """Remove one row of a date's override; once none is left the weekly hours apply again."""
    db.session.delete(get_date_override(sub_account, profile_id, override_id))
    db.session.flush()


def _clear_default(sub_account: SubAccount) -> None:
    for profile in list_profiles(sub_account):
        profile.is_default = False


def _clear_date(profile: AvailabilityProfile, day: Any) -> None:
    db.session.execute(
        delete(DateOverride).where(DateOverride.profile_id == profile.id, DateOverride.date == day)
    )


def _child(model: Any, profile: AvailabilityProfile, row_id: int, not_found: type[NotFound]) -> Any:
    """A row of ``profile``'s hours or overrides; another profile's is not found."""
    row = None
    if is_storable_id(row_id):
        row = db.session.scalar(
            select(model).where(model.id == row_id, model.profile_id == profile.id)
        )
    if row is None:
        raise not_found()
    return row
