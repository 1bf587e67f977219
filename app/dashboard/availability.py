"""The availability page: the sub account's profiles (a new one made here, each edited on its
own page, ``availability_profiles``), its blocked time (manual added and removed here, synced
shown only), and a preview of the next days' open slots for an event type, as the API's
availability answers them. Times are the sub account's timezone's."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user
from werkzeug.wrappers import Response
from wtforms.fields.choices import SelectChoice

from app.dashboard.availability_forms import (
    BLOCKED_FIELDS,
    PROFILE_FIELDS,
    BlockedTimeForm,
    PreviewForm,
    ProfileForm,
)
from app.dashboard.changes import Page, press_button, save_form
from app.dashboard.forms import ActionForm
from app.dashboard.views import dashboard
from app.models import SubAccount
from app.models.types import utcnow
from app.scheduling.timezones import zone
from app.services.accounts.users import open_sub_account
from app.services.availability.blocked_times import (
    add_blocked_time,
    get_blocked_time,
    remove_blocked_time,
    upcoming_blocked_times,
)
from app.services.availability.event_types import list_event_types
from app.services.availability.preview import preview_open_slots
from app.services.availability.profiles import create_profile, hours_taken_from, list_profiles


@dataclass(frozen=True)
class PreviewDay:
    date: date
    label: str
    times: list[str]
    capped: str | None = None  # why a day without open time has none, if a cap closed it


@dashboard.route("/s/<int:sub_account_id>/availability")
def availability(sub_account_id: int) -> str:
    return _page(open_sub_account(current_user, sub_account_id))


@dashboard.route("/s/<int:sub_account_id>/availability/preview")
def availability_preview(sub_account_id: int) -> str | Response:
    """The preview alone, for htmx to swap in when another event type is chosen; a browser
    without htmx gets the whole page."""
    sub_account = open_sub_account(current_user, sub_account_id)
    if "HX-Request" not in request.headers:
        page = url_for(
            "dashboard.availability",
            sub_account_id=sub_account.id,
            event_type=request.args.get("event_type"),
        )
        return redirect(f"{page}#preview")
    return render_template(
        "dashboard/availability_preview.html", sub_account=sub_account, **_preview(sub_account)
    )


@dashboard.route("/s/<int:sub_account_id>/availability/profiles", methods=["POST"])
def availability_profile_create(sub_account_id: int) -> Page:
    sub_account = open_sub_account(current_user, sub_account_id)
    form = ProfileForm()
    profile, answer = save_form(
        form,
        lambda: create_profile(sub_account, form.document()),
        lambda: _page(sub_account, profile_form=form),
        PROFILE_FIELDS,
    )
    if answer is not None:
        return answer
    flash(f"Created the profile {profile.name}. Add its weekly hours below.")
    return redirect(
        url_for(
            "dashboard.availability_profile", sub_account_id=sub_account.id, profile_id=profile.id
        )
    )


@dashboard.route("/s/<int:sub_account_id>/availability/blocked", methods=["POST"])
def blocked_time_add(sub_account_id: int) -> Page:
    sub_account = open_sub_account(current_user, sub_account_id)
    form = BlockedTimeForm()
    _, answer = save_form(
        form,
        lambda: add_blocked_time(sub_account, form.document()),
        lambda: _page(sub_account, blocked_form=form),
        BLOCKED_FIELDS,
    )
    if answer is not None:
        return answer
    flash("Blocked time added.")
    return redirect(url_for("dashboard.availability", sub_account_id=sub_account.id) + "#blocked")


@dashboard.route(
    "/s/<int:sub_account_id>/availability/blocked/<int:blocked_time_id>/remove", methods=["POST"]
)
def blocked_time_remove(sub_account_id: int, blocked_time_id: int) -> Response:
    sub_account = open_sub_account(current_user, sub_account_id)
    get_blocked_time(sub_account, blocked_time_id)  # another sub account's: 404
    press_button(
        ActionForm(),
        lambda: remove_blocked_time(sub_account, blocked_time_id),
        "Blocked time removed.",
    )
    return redirect(url_for("dashboard.availability", sub_account_id=sub_account.id) + "#blocked")


def _page(
    sub_account: SubAccount,
    *,
    profile_form: ProfileForm | None = None,
    blocked_form: BlockedTimeForm | None = None,
) -> str:
    profiles = list_profiles(sub_account)
    taken = hours_taken_from(sub_account)
    return render_template(
        "dashboard/availability.html",
        sub_account=sub_account,
        profiles=[(profile, taken.get(profile.id, 0)) for profile in profiles],
        blocked_times=upcoming_blocked_times(sub_account, utcnow()),
        profile_form=profile_form or ProfileForm(formdata=None),
        blocked_form=blocked_form or BlockedTimeForm(formdata=None),
        button=ActionForm(),
        **_preview(sub_account),
    )


def _preview(sub_account: SubAccount) -> dict:
    """The preview's form and days: for the event type asked for (``?event_type=``), else the
    first offered one, else (none offered) the calendar's default duration."""
    offered = [et for et in list_event_types(sub_account) if et.active]
    form = PreviewForm(request.args)
    form.event_type.choices = [
        SelectChoice(str(et.id), f"{et.name} ({et.duration} min)") for et in offered
    ]
    event_type_id = None
    if offered:
        if "event_type" not in request.args:
            form.event_type.data = offered[0].id
        elif not form.validate():
            return {"preview_form": form, "preview_days": None}
        event_type_id = form.event_type.data
    tz = zone(sub_account.settings.timezone)
    days = [
        PreviewDay(
            date=day.date,
            label=f"{day.date:%a} {day.date.day} {day.date:%b}",
            times=[f"{slot.start.astimezone(tz):%H:%M}" for slot in day.slots],
            capped=day.capped,
        )
        for day in preview_open_slots(sub_account, event_type_id, utcnow())
    ]
    return {"preview_form": form, "preview_days": days}
