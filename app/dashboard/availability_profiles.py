"""One availability profile's page: its name and timezone, weekly hours (several ranges a day,
added and removed one at a time), date overrides (a date closed, or open for its own ranges),
making it the default, and deleting it once no event type uses it, through
``app.services.availability.profiles``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby
from typing import Any

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user
from werkzeug.wrappers import Response

from app.dashboard.availability_forms import (
    PROFILE_FIELDS,
    RANGE_FIELDS,
    WEEKDAY_NAMES,
    DateOverrideForm,
    ProfileForm,
    WeeklyHoursForm,
    WeeklyRangeForm,
)
from app.dashboard.changes import Page, press_button, save_form
from app.dashboard.forms import ActionForm
from app.dashboard.views import dashboard
from app.models import AvailabilityProfile, DateOverride, SubAccount, WeeklyHours
from app.scheduling.timezones import zone
from app.services.accounts.users import open_sub_account
from app.services.availability.profiles import (
    add_date_hours,
    add_weekly_hours,
    change_weekly_hours,
    close_date,
    delete_profile,
    get_date_override,
    get_profile,
    get_weekly_hours,
    make_default,
    profile_users,
    remove_date_override,
    remove_weekly_hours,
    update_profile,
)

PROFILE = "/s/<int:sub_account_id>/availability/profiles/<int:profile_id>"


@dataclass(frozen=True)
class ProfileRows:
    """A profile's rows of one kind, as their remove buttons need them: the services that find
    and remove one (``(sub_account, profile_id, row_id)``), what is said when one is removed,
    and the page's section that shows them."""

    find: Callable[[SubAccount, int, int], Any]
    remove: Callable[[SubAccount, int, int], Any]
    removed: str
    section: str


WEEKLY_HOURS = ProfileRows(
    get_weekly_hours, remove_weekly_hours, "Opening hours removed.", "weekly"
)
DATE_OVERRIDES = ProfileRows(
    get_date_override, remove_date_override, "Date override removed.", "overrides"
)


def clock(minutes: int) -> str:
    """Minutes after local midnight as ``HH:MM`` (1440 is ``24:00``, the day's end)."""
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


@dashboard.route(PROFILE, methods=["GET", "POST"])
def availability_profile(sub_account_id: int, profile_id: int) -> Page:
    """The profile's page; a POST renames it or sets its timezone."""
    sub_account, profile = _open(sub_account_id, profile_id)
    if request.method == "GET":
        return _page(sub_account, profile)
    form = ProfileForm()
    _, answer = save_form(
        form,
        lambda: update_profile(sub_account, profile.id, form.document()),
        lambda: _page(sub_account, profile, details_form=form),
        PROFILE_FIELDS,
    )
    if answer is not None:
        return answer
    flash(f"Saved the profile {profile.name} ({profile.timezone}).")
    return _back(sub_account, profile)


@dashboard.route(f"{PROFILE}/hours", methods=["POST"])
def weekly_hours_add(sub_account_id: int, profile_id: int) -> Page:
    sub_account, profile = _open(sub_account_id, profile_id)
    form = WeeklyHoursForm()
    hours, answer = save_form(
        form,
        lambda: add_weekly_hours(sub_account, profile.id, form.document()),
        lambda: _page(sub_account, profile, weekly_form=form),
        RANGE_FIELDS,
    )
    if answer is not None:
        return answer
    flash(f"{WEEKDAY_NAMES[hours.weekday]}: {_opened(hours)}")
    return _back(sub_account, profile, "weekly")


@dashboard.route(f"{PROFILE}/hours/<int:hours_id>", methods=["POST"])
def weekly_hours_change(sub_account_id: int, profile_id: int, hours_id: int) -> Response:
    """A range's hours changed in place (its row's own small form); a refusal is flashed."""
    sub_account, profile = _open(sub_account_id, profile_id)
    hours = get_weekly_hours(sub_account, profile.id, hours_id)
    form = WeeklyRangeForm()
    document = form.document()
    done = f"{WEEKDAY_NAMES[hours.weekday]}: {document['start']}–{document['end']}."
    press_button(
        form, lambda: change_weekly_hours(sub_account, profile.id, hours.id, document), done
    )
    return _back(sub_account, profile, "weekly")


@dashboard.route(f"{PROFILE}/hours/<int:hours_id>/remove", methods=["POST"])
def weekly_hours_remove(sub_account_id: int, profile_id: int, hours_id: int) -> Response:
    return _remove(sub_account_id, profile_id, hours_id, WEEKLY_HOURS)


@dashboard.route(f"{PROFILE}/overrides", methods=["POST"])
def date_override_add(sub_account_id: int, profile_id: int) -> Page:
    sub_account, profile = _open(sub_account_id, profile_id)
    form = DateOverrideForm()
    change = close_date if form.closed.data else add_date_hours
    override, answer = save_form(
        form,
        lambda: change(sub_account, profile.id, form.document()),
        lambda: _page(sub_account, profile, override_form=form),
        RANGE_FIELDS,
    )
    if answer is not None:
        return answer
    said = "closed all day." if override.start_minute is None else _opened(override)
    flash(f"{override.date:%a} {override.date.isoformat()}: {said}")
    return _back(sub_account, profile, "overrides")


@dashboard.route(f"{PROFILE}/overrides/<int:override_id>/remove", methods=["POST"])
def date_override_remove(sub_account_id: int, profile_id: int, override_id: int) -> Response:
    return _remove(sub_account_id, profile_id, override_id, DATE_OVERRIDES)


@dashboard.route(f"{PROFILE}/default", methods=["POST"])
def availability_profile_default(sub_account_id: int, profile_id: int) -> Response:
    sub_account, profile = _open(sub_account_id, profile_id)
    press_button(
        ActionForm(),
        lambda: make_default(sub_account, profile.id),
        f"{profile.name} is now the default profile.",
    )
    return _back(sub_account, profile)


@dashboard.route(f"{PROFILE}/delete", methods=["POST"])
def availability_profile_delete(sub_account_id: int, profile_id: int) -> Response:
    """Delete the profile, or say which event types keep it."""
    sub_account, profile = _open(sub_account_id, profile_id)
    deleted = press_button(
        ActionForm(),
        lambda: delete_profile(sub_account, profile.id),
        f"Deleted the profile {profile.name}.",
    )
    if deleted:
        return redirect(url_for("dashboard.availability", sub_account_id=sub_account.id))
    return _back(sub_account, profile)


def _opened(hours: WeeklyHours | DateOverride) -> str:
    """What is said of an open range just added."""
    assert hours.start_minute is not None and hours.end_minute is not None  # an open range
    return f"open {clock(hours.start_minute)} to {clock(hours.end_minute)} added."


def _open(sub_account_id: int, profile_id: int) -> tuple[SubAccount, AvailabilityProfile]:
    """The sub account the user may open, and its profile (another one's: 404)."""
    sub_account = open_sub_account(current_user, sub_account_id)
    return sub_account, get_profile(sub_account, profile_id)


def _remove(sub_account_id: int, profile_id: int, row_id: int, rows: ProfileRows) -> Response:
    """A row's remove button: the row must be the profile's (another profile's: 404), then
    it is removed as a button's change, and the page shows the rows' section again."""
    sub_account, profile = _open(sub_account_id, profile_id)
    rows.find(sub_account, profile.id, row_id)
    press_button(ActionForm(), lambda: rows.remove(sub_account, profile.id, row_id), rows.removed)
    return _back(sub_account, profile, rows.section)


def _back(sub_account: SubAccount, profile: AvailabilityProfile, section: str = "") -> Response:
    page = url_for(
        "dashboard.availability_profile", sub_account_id=sub_account.id, profile_id=profile.id
    )
    return redirect(f"{page}#{section}" if section else page)


def _page(
    sub_account: SubAccount,
    profile: AvailabilityProfile,
    *,
    details_form: ProfileForm | None = None,
    weekly_form: WeeklyHoursForm | None = None,
    override_form: DateOverrideForm | None = None,
) -> str:
    today = datetime.now(zone(profile.timezone)).date()
    upcoming = [o for o in profile.date_overrides if o.date >= today]
    return render_template(
        "dashboard/availability_profile.html",
        sub_account=sub_account,
        profile=profile,
        users=profile_users(profile),
        weekly=[
            (name, [h for h in profile.weekly_hours if h.weekday == index])
            for index, name in enumerate(WEEKDAY_NAMES)
        ],
        overrides=[(day, list(rows)) for day, rows in groupby(upcoming, lambda o: o.date)],
        clock=clock,
        details_form=details_form
        or ProfileForm(formdata=None, data={"name": profile.name, "timezone": profile.timezone}),
        weekly_form=weekly_form or WeeklyHoursForm(formdata=None),
        override_form=override_form or DateOverrideForm(formdata=None),
        button=ActionForm(),
    )
