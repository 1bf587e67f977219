"""The dashboard's forms (Flask-WTF: each carries and checks a CSRF token)."""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import DateField, EmailField, IntegerField, PasswordField, SelectField, StringField
from wtforms.validators import DataRequired, Length, NumberRange, Optional

from app.models import BookingStatus


class SignInForm(FlaskForm):
    # Any text: a malformed address simply matches no account (and test domains stay usable).
    email = EmailField("Email", validators=[DataRequired(), Length(max=254)])
    password = PasswordField("Password", validators=[DataRequired(), Length(max=1024)])


class SignOutForm(FlaskForm):
    """Only the CSRF token: signing out is a POST a third-party page cannot send."""


class PasswordForm(FlaskForm):
    current_password = PasswordField(
        "Current password", validators=[DataRequired(), Length(max=1024)]
    )
    new_password = PasswordField("New password", validators=[DataRequired(), Length(max=1024)])


class BookingFilterForm(FlaskForm):
    """The bookings list's filters: a GET form, so no CSRF token (it changes nothing)."""

    class Meta:
        csrf = False

    status = SelectField(
        "Status",
        choices=[("", "Any"), *((s.value, s.value.replace("_", " ")) for s in BookingStatus)],
        default="",
    )
    start = DateField("From", validators=[Optional()])
    end = DateField("Until", validators=[Optional()])
    email = StringField("Attendee email", validators=[Optional(), Length(max=254)])
    page = IntegerField("Page", default=1, validators=[Optional(), NumberRange(min=1, max=100000)])


class ActionForm(FlaskForm):
    """A button that changes a booking: only the CSRF token."""


class CancelForm(FlaskForm):
    reason = StringField("Reason (optional)", validators=[Optional(), Length(max=500)])
