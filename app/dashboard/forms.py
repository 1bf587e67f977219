"""The dashboard's forms (Flask-WTF: each carries and checks a CSRF token).

Lengths are the columns' (``app.models.limits``): a form refuses, or a browser stops typing at
(``maxlength``, which WTForms renders from a ``Length`` validator), exactly what could not be
stored, and the services check the same numbers again."""

from __future__ import annotations

from collections.abc import Mapping

from flask_wtf import FlaskForm
from wtforms import (
    DateField,
    EmailField,
    FieldList,
    Form,
    FormField,
    IntegerField,
    PasswordField,
    SelectField,
    SelectMultipleField,
    StringField,
)
from wtforms.fields.choices import SelectChoice
from wtforms.validators import DataRequired, Length, NumberRange, Optional
from wtforms.widgets import CheckboxInput, ListWidget

from app.models import BookingStatus, ReminderChannel
from app.models.limits import EMAIL_MAX, PASSWORD_MAX, REASON_MAX
from app.services.accounts.users import PASSWORD_RULE
from app.services.common.errors import ServiceError
from app.validation import REMINDERS_MAX

# The largest page number a list's form takes: far past any real list, small enough that the
# offset it makes stays a storable integer.
MAX_PAGE = 100000


def page_field() -> IntegerField:
    """A list's page number (GET forms): 1 when absent, refused past ``MAX_PAGE``."""
    return IntegerField(
        "Page", default=1, validators=[Optional(), NumberRange(min=1, max=MAX_PAGE)]
    )


def page_count(total: int, page_size: int) -> int:
    """How many pages ``total`` rows fill, ``page_size`` a page: one at least, so an empty list
    is "page 1 of 1"."""
    return max(1, -(-total // page_size))


def password_field(label: str, *, new: bool = False) -> PasswordField:
    """A password as typed: required, and no longer than a password may be
    (``PASSWORD_MAX``), so a huge post costs no hashing time. A ``new`` one states the rule it
    must meet beside it, before the first try."""
    return PasswordField(
        label,
        validators=[DataRequired(), Length(max=PASSWORD_MAX)],
        description=PASSWORD_RULE if new else "",
    )


class SignInForm(FlaskForm):
    # Any text: a malformed address simply matches no account (and test domains stay usable).
    email = EmailField("Email", validators=[DataRequired(), Length(max=EMAIL_MAX)])
    password = password_field("Password")


class SignOutForm(FlaskForm):
    """Only the CSRF token: signing out is a POST a third-party page cannot send."""


class PasswordForm(FlaskForm):
    current_password = password_field("Current password")
    new_password = password_field("New password", new=True)


class BookingFilterForm(FlaskForm):
    """The bookings list's filters: a GET form, so no CSRF token (it changes nothing)."""

    class Meta:
        csrf = False

    status = SelectField(
        "Status",
        choices=[
            SelectChoice("", "Any"),
            *(SelectChoice(s.value, s.value.replace("_", " ")) for s in BookingStatus),
        ],
        default="",
    )
    # Choices: the sub account's event types (set by the view); unknown ids match nothing.
    event_type = SelectField("Event type", default="", validate_choice=False)
    start = DateField("From", validators=[Optional()])
    end = DateField("Until", validators=[Optional()])
    email = StringField("Attendee email", validators=[Optional(), Length(max=EMAIL_MAX)])
    page = page_field()


class MultiCheckboxField(SelectMultipleField):
    """A choice of several, as checkboxes. Values are checked by the service, which names
    an unknown one, rather than by the form."""

    widget = ListWidget(prefix_label=False)
    option_widget = CheckboxInput()


class ActionForm(FlaskForm):
    """A button that changes a booking: only the CSRF token."""


class CancelForm(FlaskForm):
    reason = StringField("Reason (optional)", validators=[Optional(), Length(max=REASON_MAX)])


# What a form posted without its valid CSRF token is told (fields.html's form_errors says it too).
FORM_EXPIRED = "The form expired or did not come from this site. Please try again."


def show_errors(
    form: FlaskForm, error: ServiceError, fields: Mapping[str, str] | None = None
) -> None:
    """Put a service's refusal next to the fields it names.

    Services name fields as their documents do (``bufferBefore``); ``fields`` maps those names
    to the form's (``buffer_before``) where they differ. Problems that name no field of the
    form, or none at all, are shown above the form (``form.form_errors``).
    """
    fields = fields or {}
    general = []
    for name, messages in (error.errors or {}).items():
        target = getattr(form, fields.get(name, name), None)
        if isinstance(target, FieldList):  # rows (reminders): its own errors are its rows'
            target = None
        if target is not None and hasattr(target, "errors") and name != "csrf_token":
            target.errors = [*target.errors, *messages]
        else:
            general.extend(messages if name == "_schema" else [f"{name}: {m}" for m in messages])
    if not error.errors:
        general.append(error.message)
    form.form_errors.extend(general)


# A reminder list as rows of a form: this many rows (the most a list may have), empty ones
# left out.
REMINDER_CHANNEL_LABELS = {
    ReminderChannel.ATTENDEE_EMAIL: "Email the attendees",
    ReminderChannel.BUSINESS_EMAIL: "Email the business",
    ReminderChannel.WEBHOOK: "booking.reminder webhook (for SMS or WhatsApp)",
}


class ReminderRowForm(Form):
    """One reminder of a list (a row of the settings' or an event type's form)."""

    # Named as the document names it, so a list fills the rows as it is.
    minutesBefore = IntegerField(
        "Minutes before the start (empty: no reminder)", validators=[Optional()]
    )
    channels = MultiCheckboxField(
        "Sent as",
        choices=[SelectChoice(c.value, label) for c, label in REMINDER_CHANNEL_LABELS.items()],
    )


def reminder_rows(field_name: str = "Reminders") -> FieldList:
    return FieldList(FormField(ReminderRowForm), field_name, min_entries=REMINDERS_MAX)


def reminders_of_rows(rows: FieldList) -> list[dict]:
    """The rows a person filled in, as the service's reminder list."""
    return [
        {"minutesBefore": row.minutesBefore.data, "channels": list(row.channels.data or ())}
        for row in rows
        if row.minutesBefore.data is not None
    ]


class PeriodLimitForm(Form):
    """One period's cap (a part of ``BookingLimitsForm``): named as the document names it."""

    count = IntegerField("Bookings at most (empty: no cap)", validators=[Optional()])
    minutes = IntegerField("Minutes of bookings at most (empty: no cap)", validators=[Optional()])


class BookingLimitsForm(Form):
    """``bookingLimits`` as a form: a day's, a week's and a month's caps."""

    perDay = FormField(PeriodLimitForm, "A day")
    perWeek = FormField(PeriodLimitForm, "A week (Monday to Sunday)")
    perMonth = FormField(PeriodLimitForm, "A month")


def limits_of(form: FormField) -> dict | None:
    """The caps a person filled in, as the service's ``bookingLimits`` (none: None)."""
    limits = {
        name: {"count": part.count.data, "minutes": part.minutes.data}
        for name, part in (
            (p, getattr(form.form, p).form) for p in ("perDay", "perWeek", "perMonth")
        )
        if part.count.data is not None or part.minutes.data is not None
    }
    return limits or None
