"""The sub account's settings page: its name, timezone and calendar defaults, saved through
``calendar_settings`` under provisioning's rules. The form only turns text into numbers and
booleans; what a value may be is the service's to say, next to the field."""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user
from flask_wtf import FlaskForm
from wtforms import BooleanField, EmailField, FormField, IntegerField, StringField
from wtforms.validators import InputRequired, Optional

from app.dashboard.changes import Page, save_form
from app.dashboard.forms import BookingLimitsForm, limits_of, reminder_rows, reminders_of_rows
from app.dashboard.views import dashboard
from app.models import SubAccount
from app.scheduling.timezones import timezone_names
from app.services.accounts.users import open_sub_account
from app.services.availability.settings import (
    SettingsChange,
    settings_document,
    update_calendar_settings,
)

# Service document field → form field.
FIELDS = {
    "name": "name",
    "timezone": "timezone",
    "defaultDuration": "default_duration",
    "minimumNoticeMinutes": "minimum_notice",
    "bookingHorizonDays": "booking_horizon",
    "defaultLocation": "default_location",
    "notifyOnBooking": "notify_on_booking",
    "notificationEmail": "notification_email",
    "reminders": "reminders",
    "autoCompleteBookings": "auto_complete",
    "attendeeChangeNoticeHours": "attendee_notice_hours",
    "attendeeMaxReschedules": "attendee_max_moves",
    "bookingLimits": "booking_limits",
}


class SettingsForm(FlaskForm):
    name = StringField("Name")
    timezone = StringField("Timezone (IANA name, e.g. Europe/Berlin)")
    default_duration = IntegerField("Default duration (minutes)", validators=[InputRequired()])
    minimum_notice = IntegerField("Minimum notice (minutes)", validators=[InputRequired()])
    booking_horizon = IntegerField("Booking horizon (days ahead)", validators=[InputRequired()])
    default_location = StringField("Default location (optional)")
    notify_on_booking = BooleanField("Email a notification for each booking")
    notification_email = EmailField("Notification email (optional)")
    reminders = reminder_rows("Reminders of every event type that has none of its own")
    booking_limits = FormField(BookingLimitsForm, "Caps over all event types")
    auto_complete = BooleanField("Mark past bookings completed automatically")
    attendee_notice_hours = IntegerField(
        "Attendees may cancel or move until this many hours before the start (empty: 0)",
        validators=[Optional()],
    )
    attendee_max_moves = IntegerField(
        "Times an attendee may move a booking (empty: no limit)", validators=[Optional()]
    )

    def document(self) -> dict:
        """The service's document; blank optional text is "none"."""
        document = {name: getattr(self, field).data for name, field in FIELDS.items()}
        document["reminders"] = reminders_of_rows(self.reminders)
        document["bookingLimits"] = limits_of(self.booking_limits)
        for name in ("name", "timezone"):
            document[name] = (document[name] or "").strip()
        for name in ("defaultLocation", "notificationEmail"):
            document[name] = (document[name] or "").strip() or None
        if document["attendeeChangeNoticeHours"] is None:
            document["attendeeChangeNoticeHours"] = 0
        return document


@dashboard.route("/s/<int:sub_account_id>/settings", methods=["GET", "POST"])
def settings(sub_account_id: int) -> Page:
    sub_account = open_sub_account(current_user, sub_account_id)
    form = SettingsForm(data={FIELDS[k]: v for k, v in settings_document(sub_account).items()})
    if request.method == "GET":
        return _page(sub_account, form)
    change, answer = save_form(
        form,
        lambda: update_calendar_settings(sub_account, form.document()),
        lambda: _page(sub_account, form),
        FIELDS,
    )
    if answer is not None:
        return answer
    flash(_saved(change))
    return redirect(url_for("dashboard.settings", sub_account_id=sub_account.id))


def _page(sub_account: SubAccount, form: SettingsForm) -> str:
    return render_template(
        "dashboard/settings.html",
        sub_account=sub_account,
        form=form,
        timezones=timezone_names(),
    )


def _saved(change: SettingsChange) -> str:
    """What was saved; for a new timezone, what that changes and what it does not."""
    if not change.changed:
        return "Nothing changed."
    if not change.timezone_changed:
        return "Settings saved."
    message = (
        f"Settings saved. The timezone is now {change.timezone} (was"
        f" {change.previous_timezone}): this dashboard shows times in it, bookings made"
        " without a timezone take it, and all-day events of connected calendars are placed in"
        " it at their next sync. Existing bookings keep their times."
    )
    kept, previous = change.profiles_in_previous_timezone, change.previous_timezone
    if kept == 1:
        message += (
            f" 1 availability profile keeps its own timezone, {previous}: change it on the"
            " Availability page if its hours should follow."
        )
    elif kept:
        message += (
            f" {kept} availability profiles keep their own timezone, {previous}: change them on"
            " the Availability page if their hours should follow."
        )
    return message
