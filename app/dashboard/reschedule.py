"""Rescheduling a booking from its page: the open slots of a week for the booking's event type
and length (the booking's own time counts as free), each a button that moves the booking there
through the same update service, and conflict rule, as the API's PATCH."""

from __future__ import annotations

from datetime import date, timedelta

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user
from flask_wtf import FlaskForm
from werkzeug.wrappers import Response
from wtforms import DateField, HiddenField
from wtforms.validators import Optional

from app.dashboard.forms import FORM_EXPIRED
from app.dashboard.views import dashboard
from app.extensions import db
from app.models.types import utcnow
from app.scheduling.timezones import InvalidInstant, read_instant, zone
from app.services.accounts.users import open_sub_account
from app.services.availability.open_time import slots_to_move_to
from app.services.bookings.lifecycle import is_active
from app.services.bookings.queries import get_booking
from app.services.bookings.writes import BookingChanges, update_booking
from app.services.common.errors import InvalidRequest
from app.unit_of_work import perform

DAYS_SHOWN = 7


class WeekForm(FlaskForm):
    """Which week of slots to show: a GET form, so no CSRF token."""

    class Meta:
        csrf = False

    day = DateField("First day", validators=[Optional()])


class MoveForm(FlaskForm):
    start = HiddenField()


@dashboard.route("/s/<int:sub_account_id>/bookings/<int:booking_id>/reschedule")
def reschedule(sub_account_id: int, booking_id: int) -> str:
    sub_account = open_sub_account(current_user, sub_account_id)
    booking = get_booking(sub_account, booking_id)
    tz_name = sub_account.settings.timezone
    today = utcnow().astimezone(zone(tz_name)).date()
    week = WeekForm(request.args)
    first = week.day.data if week.validate() and week.day.data else None
    if first is None:
        first = max(today, booking.start_at.astimezone(zone(tz_name)).date())
    first = min(max(first, date(2000, 1, 1)), date(9000, 1, 1))
    days, problem, active = [], None, is_active(booking)
    if active:
        try:
            days = slots_to_move_to(sub_account, booking, first, DAYS_SHOWN, tz_name, utcnow())
        except InvalidRequest as err:  # e.g. the event type was deactivated
            problem = err.message
    return render_template(
        "dashboard/reschedule.html",
        sub_account=sub_account,
        booking=booking,
        active=active,
        week=week,
        days=days,
        problem=problem,
        earlier=first - timedelta(days=DAYS_SHOWN),
        later=first + timedelta(days=DAYS_SHOWN),
        move_form=MoveForm(),
    )


@dashboard.route("/s/<int:sub_account_id>/bookings/<int:booking_id>/reschedule", methods=["POST"])
def move(sub_account_id: int, booking_id: int) -> Response:
    sub_account = open_sub_account(current_user, sub_account_id)
    booking = get_booking(sub_account, booking_id)
    back = url_for("dashboard.reschedule", sub_account_id=sub_account.id, booking_id=booking.id)
    form = MoveForm()
    if not form.validate_on_submit():
        flash(FORM_EXPIRED)
        return redirect(back)
    try:
        start = read_instant(form.start.data or "")
        perform(
            update_booking(
                sub_account,
                booking.event_type_id,
                booking.id,
                BookingChanges(sent=frozenset({"start_time"}), start_time=start),
                now=utcnow(),
            )
        )
    except (InvalidRequest, InvalidInstant) as err:
        db.session.rollback()
        flash(f"Not moved: {getattr(err, 'message', err)}.")
        return redirect(back)
    flash("Booking rescheduled.")
    return redirect(
        url_for("dashboard.booking", sub_account_id=sub_account.id, booking_id=booking.id)
    )
